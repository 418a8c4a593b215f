"""An MCP server's tools in taskctx's default graph, through ``langchain-mcp-adapters``.

The server (``tests/mcp_kv_server.py``, FastMCP) runs over stdio, started and stopped by the
adapter's stdio client: ``read_log`` is read-only, ``kv_set`` has side effects (its
``readOnlyHint: False`` annotation says so) and appends a line to a file per run; ``kv_get``
(no annotations) and ``kv_clear`` (``destructiveHint``) have side effects too, by MCP's default. Async: one
session for the whole run (``load_mcp_tools(session)``, ``graph.ainvoke``). Sync: the tools of
``MultiServerMCPClient.get_tools()`` (a session per call) under ``graph.invoke``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context import Permissions, SqliteStores
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import thread_config
from nodes import EventLoopBlockedError, from_langchain_tools
from nodes.testing import ScriptedChatModel, complete, plan, review, tool_call
from nodes.tools.loops import LOOP_START_TIMEOUT

SERVER = Path(__file__).resolve().parents[1] / "mcp_kv_server.py"


def _client(store: Path) -> MultiServerMCPClient:
    return MultiServerMCPClient(
        {"kv": {"command": sys.executable, "args": [str(SERVER), str(store)], "transport": "stdio"}}
    )


def _graph(tmp_path: Path, tools: list[Any]) -> tuple[Any, SqliteStores]:
    script = {
        "planner": [plan("Read the log, then set the flag")],
        "executor": [
            tool_call("read_log", {"service": "api", "lines": 2}, id="r1"),
            tool_call("kv_set", {"key": "maintenance", "value": "on"}, id="k1"),
            complete("flag set"),
        ],
        "reviewer": [review("approve")],
    }
    stores = SqliteStores(tmp_path / "t.sqlite")
    g = build_orchestrator(
        ScriptedChatModel(script=script),
        tools=tools,
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
        stores=stores,
    )
    return g, stores


def _task(tid: str) -> Any:
    return new_task("Set maintenance on.", tid, permissions=Permissions(requires_approval=["kv_set"]))


def _check(stores: SqliteStores, tid: str, store: Path) -> None:
    events = stores.events.read(tid)
    called = {e.payload["call_id"]: e.payload["has_side_effects"] for e in events if e.kind == "tool.called"}
    assert called == {"r1": False, "k1": True}  # from the server's readOnlyHint annotations
    assert [e.kind for e in events if e.kind.startswith("permission.")] == [
        "permission.requested",
        "permission.granted",
    ]
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    assert results["r1"]["result_summary"] == "api line 1: upstream timed out\napi line 2: upstream timed out"
    assert (results["k1"]["status"], results["k1"]["result_summary"]) == ("ok", "set maintenance=on")
    assert store.read_text() == "maintenance=on\n"  # ran exactly once
    assert events[-1].kind == "task.completed" and events[-1].payload["status"] == "completed"


@pytest.mark.slow
def test_mcp_tools_in_an_async_run_on_one_session(tmp_path: Path) -> None:
    store = tmp_path / "store.txt"

    async def main() -> tuple[Any, SqliteStores]:
        async with _client(store).session("kv") as session:  # starts the server; stops it on exit
            tools = await load_mcp_tools(session)
            g, stores = _graph(tmp_path, tools)
            cfg = thread_config("am")
            first = await g.ainvoke(_task("am"), cfg, durability="sync")
            (ask,) = first["__interrupt__"]
            assert ask.value["tool"] == "kv_set" and not store.exists()  # asked before it ran
            await g.ainvoke(Command(resume={"action": "approve"}), cfg, durability="sync")
            return ask, stores

    ask, stores = asyncio.run(main())
    assert ask.value["arguments"] == {"key": "maintenance", "value": "on"}
    _check(stores, "am", store)


@pytest.mark.slow
def test_mcp_tools_in_a_sync_run_and_their_errors(tmp_path: Path) -> None:
    store = tmp_path / "store.txt"
    tools = asyncio.run(_client(store).get_tools())  # each call then opens a session of its own
    g, stores = _graph(tmp_path, tools)
    cfg = thread_config("sm")
    first = g.invoke(_task("sm"), cfg, durability="sync")
    assert first["__interrupt__"][0].value["tool"] == "kv_set"
    g.invoke(Command(resume={"action": "approve"}), cfg, durability="sync")
    _check(stores, "sm", store)
    # the server's error (the tool raised): an error result, the server's message kept
    out = from_langchain_tools(tools).execute("k2", "kv_set", {"key": "", "value": "x"})
    assert (out.status, out.output) == ("error", "Error executing tool kv_set: the key must not be empty")
    assert store.read_text() == "maintenance=on\n"


def _in_thread(fn: Any, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``fn`` in a thread; it must end (return or raise) within ``timeout`` seconds."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"still running after {timeout} s: a deadlock"
    return box


@pytest.mark.slow
def test_a_sync_run_inside_the_sessions_loop_raises_at_once(tmp_path: Path) -> None:
    store = tmp_path / "store.txt"
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with _client(store).session("kv") as session:
            g, seen["stores"] = _graph(tmp_path, await load_mcp_tools(session))
            started = time.monotonic()
            try:
                g.invoke(_task("in"), thread_config("in"), durability="sync")  # blocks the session's loop
            except EventLoopBlockedError as exc:  # (caught inside: the session's task group would wrap it)
                seen["error"] = exc
            seen["took"] = time.monotonic() - started
            seen["kinds"] = [e.kind for e in seen["stores"].events.read("in")]
            # the way the error names: the async run on the same loop goes on from there
            first = await g.ainvoke(None, thread_config("in"), durability="sync")
            assert first["__interrupt__"][0].value["tool"] == "kv_set"
            await g.ainvoke(Command(resume={"action": "approve"}), thread_config("in"), durability="sync")

    assert _in_thread(lambda: asyncio.run(main())) == {"value": None}
    assert isinstance(seen.get("error"), EventLoopBlockedError) and seen["took"] < LOOP_START_TIMEOUT
    assert str(seen["error"]).startswith(
        "tool read_log was called synchronously inside a running event loop; use ainvoke/astream"
    )
    kinds = seen["kinds"]
    assert kinds[-1] == "tool.called" and "tool.result.received" not in kinds  # not recorded as a result
    _check(seen["stores"], "in", store)  # then run once each, through ainvoke


@pytest.mark.slow
def test_a_sync_run_beside_the_sessions_loop_runs_on_it(tmp_path: Path) -> None:
    """The session's loop runs in a thread of its own; graph.invoke from another thread uses it."""
    store = tmp_path / "store.txt"
    loop = asyncio.new_event_loop()
    ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
    done = asyncio.Event()

    async def hold() -> None:
        async with _client(store).session("kv") as session:
            ready.set_result(await load_mcp_tools(session))
            await done.wait()

    th = threading.Thread(target=lambda: loop.run_until_complete(hold()), daemon=True)
    th.start()
    try:
        g, stores = _graph(tmp_path, ready.result(60))
        cfg = thread_config("bs")

        def run() -> None:
            first = g.invoke(_task("bs"), cfg, durability="sync")
            assert first["__interrupt__"][0].value["tool"] == "kv_set"
            g.invoke(Command(resume={"action": "approve"}), cfg, durability="sync")

        assert _in_thread(run) == {"value": None}
    finally:
        loop.call_soon_threadsafe(done.set)
        th.join(30)
    _check(stores, "bs", store)


@pytest.mark.slow
def test_mcp_tools_are_read_only_only_when_annotated_so(tmp_path: Path) -> None:
    store = tmp_path / "store.txt"
    tools = {t.name: t for t in asyncio.run(_client(store).get_tools())}
    assert tools["kv_get"].metadata is None  # no annotations at all
    assert (tools["kv_clear"].metadata or {})["destructiveHint"] is True
    assert (tools["kv_clear"].metadata or {})["readOnlyHint"] is None
    ex = from_langchain_tools(list(tools.values()))
    assert {n: ex.has_side_effects(n) for n in tools} == {
        "read_log": False,  # readOnlyHint: True
        "kv_set": True,  # readOnlyHint: False
        "kv_get": True,  # unannotated: MCP's default readOnlyHint is false
        "kv_clear": True,  # destructiveHint: True
    }
    # in the default graph: the unannotated call goes through the permission marker
    script = {
        "planner": [plan("Read the flag")],
        "executor": [tool_call("kv_get", {"key": "maintenance"}, id="g1"), complete("read")],
        "reviewer": [review("approve")],
    }
    stores = SqliteStores(tmp_path / "t.sqlite")
    g = build_orchestrator(ScriptedChatModel(script=script), tools=list(tools.values()), stores=stores)
    g.invoke(new_task("Read the maintenance flag.", "ro"), thread_config("ro"))
    events = stores.events.read("ro")
    assert [e.kind for e in events if e.kind.startswith(("tool.", "permission."))] == [
        "tool.called",
        "permission.granted",
        "tool.result.received",
    ]
    assert events[[e.kind for e in events].index("tool.called")].payload["has_side_effects"] is True
    # the user says otherwise: read-only after all
    kv_get = tools["kv_get"]
    kv_get.metadata = {**(kv_get.metadata or {}), "taskctx": {"side_effects": False}}
    assert not from_langchain_tools([kv_get]).has_side_effects("kv_get")
