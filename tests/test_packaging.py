"""The packages resolve to this distribution; the layers hold (import-linter); context/ is
mypy-clean. What the wheel holds, and that it works installed: tests/e2e/test_wheel.py."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Every package of the wheel, as pyproject.toml lists them.
PACKAGES = [
    "context",
    "nodes",
    "nodes.render",
    "nodes.roles",
    "nodes.tools",
    "nodes.workspace",
    "graphs",
    "graphs.cli",
    "graphs.bench",
    "graphs.eval",
    "graphs.demo",
    "graphs.middleware",
    "graphs.report",
]


def test_pyproject_lists_every_package_on_disk() -> None:
    import tomllib

    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert listed == PACKAGES
    on_disk = sorted(
        ".".join(p.parent.relative_to(REPO).parts)
        for top in ("context", "nodes", "graphs")
        for p in (REPO / top).rglob("__init__.py")
        if "sample_workspace" not in p.parts
    )
    assert on_disk == sorted(PACKAGES)


def test_packages_resolve_to_this_distribution() -> None:
    dist = md.distribution("taskctx")
    assert dist.metadata["Name"] == "taskctx"
    owners = md.packages_distributions()
    for name in ("context", "nodes", "graphs"):  # no other installed distribution ships these names
        assert set(owners.get(name, [])) == {"taskctx"}, (name, owners.get(name))
    for name in ("context", "nodes", "graphs"):
        mod = importlib.import_module(name)
        assert Path(mod.__file__).resolve().parent == REPO / name, f"{name} resolves to {mod.__file__}"
    (ep,) = tuple(dist.entry_points.select(group="console_scripts", name="taskctx"))
    assert ep.value == "graphs.cli:main"


def test_import_layers() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    out = subprocess.run(
        [exe, "--config", str(REPO / "pyproject.toml")], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 kept, 0 broken" in out.stdout
    assert "graphs wiring never imports the applications (cli, bench, eval, demo, report) KEPT" in out.stdout
    assert "context layers: value types -> events -> folds and builders KEPT" in out.stdout
    assert "no import cycles inside context KEPT" in out.stdout


@pytest.mark.slow
def test_context_is_mypy_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    files = sum(len(list((REPO / pkg).rglob("*.py"))) for pkg in ("context", "nodes"))
    assert out.stdout.strip().splitlines()[-1] == f"Success: no issues found in {files} source files"


def test_every_package_has_one_all() -> None:
    for name in PACKAGES:
        mod = importlib.import_module(name)
        assert isinstance(getattr(mod, "__all__", None), list), name
        for sym in mod.__all__:
            assert hasattr(mod, sym), f"{name}.__all__ lists missing {sym}"


def test_import_graphs_cli_loads_no_graph_runtime_nor_langsmith() -> None:
    """``import graphs.cli`` (every command's start) imports neither LangGraph's graph runtime,
    nor ``langgraph.types`` (whose import loads langchain-core's tracers and langsmith), nor the
    chat-model packages: a command loads them only when it builds or runs a graph (docs/concepts/durability.md)."""
    heavy = [
        "langsmith",
        "langchain_core.tracers",
        "langgraph.types",
        "langgraph.graph",
        "langgraph.pregel",
        "langchain_openai",
        "langchain_anthropic",
        "nodes.tools",
    ]
    code = f"import graphs.cli, sys; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_the_readmes_bare_pytest_collects_every_test_folder() -> None:
    # the `pytest` script puts no repository root on sys.path (python -m pytest does): tests/context
    # and the other folders named like a package must not shadow it
    script = Path(sys.executable).parent / "pytest"
    folders = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "tests").iterdir() if p.is_dir() and (REPO / p.name).is_dir()
    )
    assert folders == ["tests/context", "tests/graphs", "tests/nodes"]
    out = subprocess.run(
        [str(script), "--collect-only", "-q", "-n0", "-p", "no:cacheprovider", *folders],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "ImportError" not in out.stdout and "error" not in out.stdout.splitlines()[-1]
