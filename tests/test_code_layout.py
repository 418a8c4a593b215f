"""The layout rules a newcomer can rely on: sizes, one meaning per file name, no cycles, no private imports."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("context", "nodes", "graphs")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    out = []
    for pkg in PACKAGES:
        out += [p for p in sorted((REPO / pkg).rglob("*.py")) if "sample_workspace" not in p.parts]
    return out


def _rel(p: Path) -> str:
    return p.relative_to(REPO).as_posix()


def test_no_module_over_600_lines() -> None:
    over = {_rel(p): n for p in _modules() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert over == {}


def test_no_function_over_80_lines() -> None:
    over = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    over[f"{_rel(p)}:{node.lineno} {node.name}"] = n
    assert over == {}


def test_one_meaning_per_file_name() -> None:
    names = Counter(p.name for p in _modules() if p.name not in {"__init__.py", "__main__.py"})
    assert sorted(n for n, c in names.items() if c > 1) == []


def test_no_import_of_another_modules_private_names() -> None:
    found = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{_rel(p)}:{node.lineno} {'.' * node.level}{node.module or ''}.{alias.name}")
    assert found == []


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    # every import counts: those under TYPE_CHECKING and inside functions too (a cycle they hide is still one)
    return grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=False)


def _edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Each module's direct imports, less those of a package ``__init__`` into its own submodules: an
    ``__init__`` that re-exports its submodules' names is the package's front, not a member of a cycle."""
    return {
        m: {w for w in graph.find_modules_directly_imported_by(m) if not w.startswith(m + ".")} for m in graph.modules
    }


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return sorted(out)


def test_no_import_cycles(import_graph: grimp.ImportGraph) -> None:
    assert _cycles(_edges(import_graph)) == []
