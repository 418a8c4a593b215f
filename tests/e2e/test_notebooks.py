"""Execute every notebook in notebooks/ (CI also runs ``pytest --nbmake notebooks/``).

Each notebook runs in a fresh ``python3`` kernel with a temporary working directory, once with
LangGraph's default msgpack mode and once with ``LANGGRAPH_STRICT_MSGPACK=true`` (the kernel
inherits the environment). Notebooks are stored without outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
TIMEOUT = 120


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "no notebook found in notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("strict", ["false", "true"], ids=["default-msgpack", "strict-msgpack"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, strict: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", strict)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear outputs before committing"
