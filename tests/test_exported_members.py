"""Each package's ``__all__`` is sorted, complete and honest; ``graphs`` is a small front door.

As httpx's own ``tests/test_exported_members.py``: every name in ``__all__`` exists, and every
public name a package ``__init__`` defines or re-exports is in it. Sorted as ruff's RUF022 sorts
(constants, then classes, then the rest), which also groups them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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
    "graphs.report",
]
#: The most names the front door may export.
FACADE_MAX = 25


def _isort_key(name: str) -> tuple[int, str]:
    """RUF022's order: SCREAMING_SNAKE_CASE, then CamelCase, then the rest."""
    if name.isupper() or re.fullmatch(r"[A-Z0-9_]+", name):
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _init_source(package: str) -> str:
    return (REPO / package.replace(".", "/") / "__init__.py").read_text(encoding="utf-8")


def _defined_names(package: str) -> set[str]:
    """The public names the package ``__init__`` defines (def, class, assignment) or imports from
    this project (a re-export); not the modules it imports, not third-party names, not what it
    imports only for type checkers."""
    names: set[str] = set()
    for node in ast.parse(_init_source(package)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            first_party = node.level > 0 or (node.module or "").split(".")[0] in ("context", "nodes", "graphs")
            if first_party:
                names.update(a.asname or a.name for a in node.names)
    mod = importlib.import_module(package)
    return {
        n
        for n in names
        if not n.startswith("_") and not inspect.ismodule(getattr(mod, n, None)) and n not in ("lazy_exports",)
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert exported == sorted(exported, key=_isort_key), package
    assert len(set(exported)) == len(exported), package


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_exists(package: str) -> None:
    mod = importlib.import_module(package)
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert missing == [], f"{package}.__all__ lists names it does not have: {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_exported(package: str) -> None:
    mod = importlib.import_module(package)
    assert _defined_names(package) - set(mod.__all__) == set(), package


def test_the_front_door_is_small_and_documented() -> None:
    import graphs

    assert len(graphs.__all__) <= FACADE_MAX
    undocumented = [n for n in graphs.__all__ if not (inspect.getdoc(getattr(graphs, n)) or "").strip()]
    assert undocumented == []


def test_the_front_door_loads_nothing_until_used() -> None:
    """``import graphs`` names its exports lazily (``context.lazy``): a command that needs none
    of them pays for none (``tests/test_packaging.py`` checks ``import graphs.cli``)."""
    import subprocess
    import sys

    code = "import sys, graphs; print(sorted(m for m in ('graphs.project', 'nodes', 'langgraph.graph') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"
