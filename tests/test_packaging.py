"""The wheel holds exactly context, nodes, graphs; they resolve to this distribution; the layers
hold (import-linter); context/ is mypy-clean."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def test_wheel_holds_exactly_the_three_packages(tmp_path: Path) -> None:
    try:
        import setuptools  # noqa: F401
    except ImportError:  # pragma: no cover
        import pytest

        pytest.skip("setuptools not installed")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                          str(REPO)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import zipfile

    (wheel,) = tmp_path.glob("taskctx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"context", "nodes", "graphs"}
    assert "context/__init__.py" in names and "nodes/render/executor.py" in names


def test_import_layers() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    out = subprocess.run([exe, "--config", str(REPO / "pyproject.toml")], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 kept, 0 broken" in out.stdout


def test_context_is_mypy_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "Success: no issues found in 10 source files"


def test_every_package_has_one_all() -> None:
    for name in ("context", "nodes", "graphs"):
        mod = importlib.import_module(name)
        assert isinstance(getattr(mod, "__all__", None), list), name
        for sym in mod.__all__:
            assert hasattr(mod, sym), f"{name}.__all__ lists missing {sym}"
