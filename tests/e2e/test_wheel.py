"""The wheel: what it holds, and that it works installed in a fresh venv, outside the checkout.

The wheel is built from a copy of the checkout (setuptools reuses ``build/lib``, so files of an
older layout left there would end up in it), installed with ``pip install <wheel>`` in a new
venv of the base interpreter (its dependencies from the package index), and ``taskctx demo
--approve-all`` and ``taskctx eval`` run from that venv in a temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = "graphs/demo/sample_workspace"
CASES = "graphs/eval/case_files"

pytestmark = pytest.mark.slow


def _files_under(folder: str, *, suffix: str = "") -> set[str]:
    root = REPO / folder
    return {
        f"{folder}/{p.relative_to(root).as_posix()}"
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and p.name.endswith(suffix)
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", ".ci", "build", "dist", "*.egg-info", "__pycache__", ".taskctx", ".pytest_cache"
    )
    shutil.copytree(REPO, src, ignore=ignore)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (found,) = tmp.glob("taskctx-*.whl")
    return found


def test_wheel_holds_exactly_the_three_packages_and_their_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"context", "nodes", "graphs"}
    packages = {
        n.rsplit("/", 1)[0].replace("/", ".")
        for n in names
        if n.endswith("/__init__.py") and not n.startswith(SAMPLE + "/")
    }
    import tomllib

    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert packages == set(listed)
    for must in (
        "graphs/cli/__main__.py",
        "graphs/eval/checks.py",
        "nodes/tools/node.py",
        "nodes/workspace/commands.py",
    ):
        assert must in names
    assert {n for n in names if n.startswith(SAMPLE + "/")} == _files_under(SAMPLE)
    assert {n for n in names if n.startswith(CASES + "/")} == _files_under(CASES, suffix=".json")
    assert {"context/py.typed", "nodes/py.typed", "graphs/py.typed"} <= set(names)


def _base_python() -> str:
    """The interpreter this one's venv was made from (a venv made from it holds no taskctx)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    return str(base if base.exists() else sys.executable)


def test_the_installed_wheel_runs_the_demo_and_the_eval(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["LANGGRAPH_STRICT_MSGPACK"] = "true"
    work = tmp_path / "work"  # outside the checkout: nothing of it is on the path
    work.mkdir()
    taskctx = str(venv / "bin" / "taskctx")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import graphs; print(graphs.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    demo = subprocess.run(
        [taskctx, "demo", "--approve-all", "--db", "d/t.sqlite", "--out", "d/runs"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert ": completed;" in demo.stdout
    ev = subprocess.run([taskctx, "eval"], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert ev.returncode == 0, ev.stdout[-2000:] + ev.stderr[-2000:]
    first = ev.stdout.splitlines()[0]
    assert re.fullmatch(r"taskctx eval: \d+ cases from .*/site-packages/graphs/eval/case_files", first), first
