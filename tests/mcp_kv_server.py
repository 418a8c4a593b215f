"""A tiny MCP server over stdio for the tests (``python tests/mcp_kv_server.py STORE``).

Four tools, built with the ``mcp`` package's FastMCP: ``read_log`` (read-only: ``readOnlyHint``),
``kv_set`` (side effects: it appends ``key=value`` to the file ``STORE``, one line per run, so a
test counts the runs), ``kv_get`` (no annotations: side effects by MCP's default) and
``kv_clear`` (``destructiveHint`` only: it empties ``STORE``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

STORE = Path(sys.argv[1])
server = FastMCP("kv", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_log(service: str, lines: int = 3) -> str:
    """Read the last lines of a service's log."""
    return "\n".join(f"{service} line {i}: upstream timed out" for i in range(1, lines + 1))


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def kv_set(key: str, value: str) -> str:
    """Set a key of the store (appends a line per run)."""
    if not key:
        raise ValueError("the key must not be empty")
    with STORE.open("a", encoding="utf-8") as fh:
        fh.write(f"{key}={value}\n")
    return f"set {key}={value}"


@server.tool()
def kv_get(key: str) -> str:
    """The last value set for a key (no annotations)."""
    lines = STORE.read_text(encoding="utf-8").splitlines() if STORE.exists() else []
    values = [ln.split("=", 1)[1] for ln in lines if ln.split("=", 1)[0] == key]
    return values[-1] if values else f"{key} is not set"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def kv_clear() -> str:
    """Empty the store."""
    STORE.write_text("", encoding="utf-8")
    return "cleared"


if __name__ == "__main__":
    server.run("stdio")
