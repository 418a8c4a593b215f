"""LangChain tools in taskctx's graph as they are: ``build_orchestrator(tools=[@tool...])``.

The default graph runs offline (ScriptedChatModel) with a read-only ``read_log`` and a
``kv_set`` with side effects: approval through ``interrupt()`` and ``Command(resume=...)``, the
receipt of the call, the tool run once, exceptions as error results, long output stored raw and
shown compressed, async tools awaited on the run's loop, mixed lists with a ToolExecutor.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context import Permissions, SqliteStores, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import thread_config
from nodes import LangChainTools, ScriptedChatModel, ToolSet, WorkspaceTools, from_langchain_tools
from nodes.testing import complete, plan, review, tool_call
from nodes.tools import ToolOutcome, message_text, run_at_once, side_effect_names
from nodes.tools.loops import LOOP_START_TIMEOUT, EventLoopBlockedError

RUNS: list[tuple[str, str]] = []


@tool
def read_log(service: str, lines: int = 3) -> str:
    """Read the last lines of a service's log."""
    return "".join(f"{service} line {i}: upstream timed out\n" for i in range(1, lines + 1))


@tool
def kv_set(key: str, value: str) -> str:
    """Set a key of the store."""
    RUNS.append((key, value))
    return f"set {key}={value}"


def _graph(tmp_path: Path, script: dict[str, list[Any]], tools: list[Any], **kw: Any) -> tuple[Any, SqliteStores]:
    stores = SqliteStores(tmp_path / "t.sqlite")
    model = ScriptedChatModel(script=script)
    saver = InMemorySaver(serde=checkpoint_serde())
    return build_orchestrator(model, tools=tools, checkpointer=saver, stores=stores, **kw), stores


def test_default_graph_runs_tools_with_an_approval_and_a_receipt(tmp_path: Path) -> None:
    RUNS.clear()
    script = {
        "planner": [plan("Look at the log, then set the flag")],
        "executor": [
            tool_call("read_log", {"service": "api"}, id="r1"),
            tool_call("kv_set", {"key": "maintenance", "value": "on"}, id="k1"),
            complete("flag set"),
        ],
        "reviewer": [review("approve")],
    }
    g, stores = _graph(tmp_path, script, [read_log, kv_set], side_effects="kv_set")  # one str: one name
    cfg = thread_config("lc")
    task = new_task("Set maintenance on.", "lc", permissions=Permissions(requires_approval=["kv_set"]))
    first = g.invoke(task, cfg, durability="sync")
    (ask,) = first["__interrupt__"]
    assert ask.value["tool"] == "kv_set" and ask.value["arguments"] == {"key": "maintenance", "value": "on"}
    assert ask.value["risk"] == "medium" and RUNS == []  # asked before it ran
    g.invoke(Command(resume={"action": "approve", "request_id": ask.value["request_id"]}), cfg, durability="sync")
    assert RUNS == [("maintenance", "on")]  # ran exactly once

    events = stores.events.read("lc")
    assert [e.kind for e in events] == [
        "task.created",
        "context.built",
        "plan.created",
        "step.started",
        "context.built",
        "tool.called",
        "tool.result.received",
        "context.built",
        "tool.called",
        "permission.requested",
        "permission.granted",
        "tool.result.received",
        "context.built",
        "step.completed",
        "checkpoint.created",
        "context.built",
        "review.completed",
        "task.completed",
    ]
    called = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.called"}
    assert called["r1"]["has_side_effects"] is False and called["k1"]["has_side_effects"] is True
    granted = next(e for e in events if e.kind == "permission.granted")
    assert granted.actor == "user" and granted.payload["call_id"] == "k1"
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    assert results["k1"]["status"] == "ok" and results["k1"]["result_summary"] == "set maintenance=on"
    raw = stores.artifacts.get(results["r1"]["raw_ref"]).decode()
    assert raw == "".join(f"api line {i}: upstream timed out\n" for i in (1, 2, 3))
    # the receipt: beside the SQLite file, keyed by task and call, its output in the artifact store
    ex = LangChainTools([read_log, kv_set], side_effects={"kv_set"}, receipts_dir=tmp_path / "receipts")
    path = ex.receipt("lc", "k1")
    assert path is not None and sorted(p.name for p in (tmp_path / "receipts").iterdir()) == [path.name]
    receipt = json.loads(path.read_text())
    assert {k: receipt[k] for k in ("task_id", "call_id", "tool", "status", "outcome")} == {
        "task_id": "lc",
        "call_id": "k1",
        "tool": "kv_set",
        "status": "finished",
        "outcome": "ok",
    }
    assert stores.artifacts.get(receipt["output_ref"]) == b"set maintenance=on"
    assert replay(events).control.status == "completed"
    # the schemas offered are the tools' own
    assert ex.schemas() == [convert_to_openai_tool(read_log), convert_to_openai_tool(kv_set)]
    assert ex.schemas()[0]["function"]["parameters"]["properties"] == {
        "service": {"type": "string"},
        "lines": {"default": 3, "type": "integer"},
    }


def test_exceptions_and_tool_errors_are_error_results() -> None:
    @tool
    def explode(what: str) -> str:
        """Fail."""
        raise ValueError(f"no such thing: {what}")

    @tool
    def refuse(what: str) -> str:
        """Fail the LangChain way."""
        raise ToolException(f"refused {what}")

    handled = StructuredTool.from_function(
        lambda what: (_ for _ in ()).throw(ToolException(f"handled {what}")),
        name="handled",
        description="Fail, handled by the tool.",
        handle_tool_error=True,
    )
    ex = from_langchain_tools([explode, refuse, handled])
    assert (
        ex.execute("e1", "explode", {"what": "x"}).output == "error: tool explode raised ValueError: no such thing: x"
    )
    assert ex.execute("e2", "refuse", {"what": "y"}).output == "error: tool refuse raised ToolException: refused y"
    out = ex.execute("e3", "handled", {"what": "z"})
    assert (out.status, out.output) == ("error", "handled z")  # a ToolMessage of status error
    bad = ex.execute("e4", "explode", {})
    assert bad.status == "error" and bad.output.startswith("error: tool explode raised ValidationError")
    assert ex.execute("e5", "nope", {}).output == "error: unknown tool 'nope'; the tools are: explode, refuse, handled"


def test_long_output_is_stored_raw_and_shown_compressed(tmp_path: Path) -> None:
    @tool
    def dump_log(service: str) -> str:
        """The whole log."""
        return "".join(f"{service} {i:05d} GET /upload 413 payload too large\n" for i in range(400))

    script = {
        "planner": [plan("Read the log")],
        "executor": [tool_call("dump_log", {"service": "api"}, id="d1"), complete("read")],
        "reviewer": [review("approve")],
    }
    g, stores = _graph(tmp_path, script, [dump_log])
    g.invoke(new_task("Read the api log.", "big"), thread_config("big"), durability="sync")
    res = next(e.payload for e in stores.events.read("big") if e.kind == "tool.result.received")
    full = dump_log.invoke({"service": "api"})
    assert res["raw_chars"] == len(full) == 17600 and res["compressed"] is True
    assert stores.artifacts.get(res["raw_ref"]).decode() == full  # byte-exact behind the ref
    assert len(res["result_summary"]) < len(full) // 4 and res["raw_ref"] in res["result_summary"]
    # labelled by the tool's name, not as a command's output
    assert res["result_summary"].endswith(
        f"\n[tool output: dump_log, 400 lines, 17600 chars; 15200 chars omitted from the middle; "
        f"full output: {res['raw_ref']}]"
    )
    assert "command output" not in res["result_summary"]


def test_side_effects_from_metadata_mcp_hints_and_names() -> None:
    a = StructuredTool.from_function(
        lambda: "a", name="a", description="a", metadata={"taskctx": {"side_effects": True}}
    )
    b = StructuredTool.from_function(lambda: "b", name="b", description="b", metadata={"readOnlyHint": False})
    c = StructuredTool.from_function(lambda: "c", name="c", description="c", metadata={"readOnlyHint": True})
    d = StructuredTool.from_function(lambda: "d", name="d", description="d")
    assert side_effect_names([a, b, c, d]) == {"a", "b"}
    # MCP annotations: read-only only with readOnlyHint True (the MCP default is False)
    hints = [
        {"destructiveHint": True},
        {"readOnlyHint": None, "destructiveHint": None, "idempotentHint": True, "openWorldHint": None},
        {"readOnlyHint": True, "destructiveHint": True},
        {"destructiveHint": True, "taskctx": {"side_effects": False}},
    ]
    mcp = [
        StructuredTool.from_function(lambda: "", name=f"m{i}", description="m", metadata=h) for i, h in enumerate(hints)
    ]
    assert side_effect_names(mcp) == {"m0", "m1"}
    assert side_effect_names([a, b, c, d], {"d"}) == {"a", "b", "d"}
    with pytest.raises(ValueError, match=r"side_effects names 'kv_sett', not among the tools \(a, b, c, d\)"):
        side_effect_names([a, b, c, d], {"kv_sett"})
    # one str is one name, not its characters; a tool stands for its name
    assert side_effect_names([read_log, kv_set], "kv_set") == {"kv_set"}
    assert side_effect_names([read_log, kv_set], [kv_set]) == {"kv_set"}
    assert from_langchain_tools([read_log, kv_set], side_effects="kv_set").has_side_effects("kv_set")
    assert not from_langchain_tools([read_log, kv_set], side_effects="kv_set").has_side_effects("read_log")
    with pytest.raises(ValueError) as unknown:
        build_orchestrator(ScriptedChatModel(), tools=[read_log, kv_set], side_effects="kv_sett")
    assert str(unknown.value) == (
        "side_effects names 'kv_sett', not among the tools (kv_set, read_log); name the tools by their .name"
    )
    with pytest.raises(ValueError) as several:
        from_langchain_tools([read_log, kv_set], side_effects=["kv_set", "purge", "drop"])
    assert str(several.value).startswith("side_effects names 'drop', 'purge', not among the tools (kv_set, read_log)")
    with pytest.raises(TypeError) as bad:
        side_effect_names([read_log, kv_set], [3])
    assert str(bad.value) == (
        'side_effects holds 3 (int); give tool names or tools, e.g. side_effects={"kv_set"} or side_effects="kv_set"'
    )
    with pytest.raises(ValueError, match="tool name 'read_artifact' is one taskctx's nodes use themselves"):
        LangChainTools([StructuredTool.from_function(lambda: "", name="read_artifact", description="x")])
    with pytest.raises(ValueError, match="two tools are named 'read_log'"):
        LangChainTools([read_log, read_log])
    with pytest.raises(TypeError, match="is neither a LangChain tool nor a ToolExecutor"):
        from_langchain_tools([read_log, print])
    with pytest.raises(TypeError, match=r"pass a list: tools=\[read_log\]"):
        build_orchestrator(ScriptedChatModel(), tools=read_log)
    with pytest.raises(ValueError, match="side_effects=\\['x'\\] is for a list of LangChain tools"):
        build_orchestrator(ScriptedChatModel(), tools=from_langchain_tools([read_log]), side_effects={"x"})
    assert message_text([{"type": "text", "text": "one"}, "two", {"type": "image", "url": "u"}]) == (
        'one\ntwo\n{"type": "image", "url": "u"}'
    )
    assert message_text([], {"structured_content": {"n": 1}}) == '{"structured_content": {"n": 1}}'


def test_async_tools_are_awaited_on_the_runs_loop(tmp_path: Path) -> None:
    loops: list[tuple[str, int]] = []

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        await asyncio.sleep(0)
        loops.append(("fetch", id(asyncio.get_running_loop())))
        return f"<html>{url}</html>"

    @tool
    async def post(url: str, body: str) -> str:
        """Post a body (side effects)."""
        await asyncio.sleep(0)
        loops.append(("post", id(asyncio.get_running_loop())))
        return f"posted {len(body)} bytes to {url}"

    script = {
        "planner": [plan("Fetch and post")],
        "executor": [
            tool_call("fetch", {"url": "http://x/a"}, id="f1"),
            tool_call("post", {"url": "http://x/b", "body": "hello"}, id="p1"),
            complete("done"),
        ],
        "reviewer": [review("approve")],
    }
    g, stores = _graph(tmp_path, script, [fetch, post], side_effects={"post"})

    async def main() -> int:
        await g.ainvoke(new_task("Fetch a, post b.", "as"), thread_config("as"), durability="sync")
        return id(asyncio.get_running_loop())

    loop = asyncio.run(main())
    assert loops == [("fetch", loop), ("post", loop)]  # awaited on the run's own event loop
    results = [e.payload for e in stores.events.read("as") if e.kind == "tool.result.received"]
    assert [r["result_summary"] for r in results] == ["<html>http://x/a</html>", "posted 5 bytes to http://x/b"]
    # the same async-only tool under a sync invoke: awaited on an event loop of its own
    out = from_langchain_tools([fetch]).execute("f2", "fetch", {"url": "http://x/c"})
    assert (out.status, out.output) == ("ok", "<html>http://x/c</html>") and loops[-1][1] != loop


def test_mixed_list_with_a_tool_executor(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "x.txt").write_text("old\n")
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "r")
    ex = from_langchain_tools([read_log, ws, kv_set], side_effects={"kv_set"})
    assert isinstance(ex, ToolSet)
    names = [s["function"]["name"] for s in ex.schemas()]
    assert names[:2] == ["read_log", "kv_set"] and "write_file" in names and "run_command" in names
    assert ex.has_side_effects("write_file") and ex.has_side_effects("kv_set") and not ex.has_side_effects("read_log")
    assert ex.check("kv_set", {"key": "k", "value": "v"}, []) == ("medium", "kv_set has side effects", ())
    assert ex.check("write_file", {"path": "app/x.txt", "content": "new\n"}, ["app/**"])[2] == ("app/x.txt",)
    assert ex.execute("w1", "write_file", {"path": "app/x.txt", "content": "new\n"}, ["app/**"]).status == "ok"
    assert (root / "app" / "x.txt").read_text() == "new\n"
    assert ex.recover("w1", "write_file", {"path": "app/x.txt", "content": "new\n"}, ["app/**"]).state == "done"
    assert ex.recover("k9", "kv_set", {"key": "k", "value": "v"}).note.startswith("kv_set keeps no receipts")
    assert ex.fingerprint == ws.fingerprint and ex.strict_resolution is True
    with pytest.raises(ValueError, match="tool 'list_dir' is offered by both WorkspaceTools and WorkspaceTools"):
        ToolSet([ws, WorkspaceTools(root)])


def test_read_only_calls_of_one_answer_run_at_once(tmp_path: Path) -> None:
    seen: list[str] = []
    gate = threading.Barrier(2, timeout=30)

    @tool
    def probe(host: str) -> str:
        """Probe a host."""
        gate.wait()  # both calls are running at the same time, or this times out
        seen.append(host)
        return f"{host} up"

    two = tool_call("probe", {"host": "a"}, id="p1")
    two.tool_calls.append({"name": "probe", "args": {"host": "b"}, "id": "p2", "type": "tool_call"})
    script = {"planner": [plan("Probe")], "executor": [two, complete("up")], "reviewer": [review("approve")]}
    g, stores = _graph(tmp_path, script, [probe])
    g.invoke(new_task("Probe a and b.", "pp"), thread_config("pp"), durability="sync")
    res = [
        (e.payload["call_id"], e.payload["result_summary"])
        for e in stores.events.read("pp")
        if e.kind == "tool.result.received"
    ]
    assert sorted(seen) == ["a", "b"] and res == [("p1", "a up"), ("p2", "b up")]  # recorded in call order


def test_a_mixed_list_in_an_async_run_keys_the_receipt_by_task(tmp_path: Path) -> None:
    @tool
    async def post(body: str) -> str:
        """Post a body."""
        await asyncio.sleep(0)
        return f"posted {body}"

    (tmp_path / "ws").mkdir()
    script = {
        "planner": [plan("Post")],
        "executor": [tool_call("post", {"body": "x"}, id="p1"), complete("posted")],
        "reviewer": [review("approve")],
    }
    g, stores = _graph(tmp_path, script, [WorkspaceTools(tmp_path / "ws"), post], side_effects={"post"})
    asyncio.run(g.ainvoke(new_task("Post x.", "mx"), thread_config("mx"), durability="sync"))
    (receipt,) = (tmp_path / "receipts").iterdir()  # through ToolSet.aexecute, on the run's loop
    data = json.loads(receipt.read_text())
    assert (data["task_id"], data["call_id"], data["status"]) == ("mx", "p1", "finished")
    assert stores.artifacts.get(data["output_ref"]) == b"posted x"


class _Conn:
    """A connection bound to the event loop it was opened on (as an aiohttp session is: ``_loop``)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()


def _bound_tool(conn: _Conn, name: str = "lookup") -> StructuredTool:
    session = conn

    async def lookup(key: str) -> Any:
        """Look a key up over the connection."""
        assert asyncio.get_running_loop() is session._loop  # only works on the connection's own loop
        return f"{key}=on" if name == "lookup" else f"{key}=on".encode()

    return StructuredTool.from_function(coroutine=lookup, name=name, description="Look a key up.")


def _in_thread(fn: Any, timeout: float = 30.0) -> Any:
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


def test_a_sync_call_inside_the_tools_own_loop_raises_at_once() -> None:
    async def main() -> Any:
        ex = from_langchain_tools([_bound_tool(_Conn())])
        started = time.monotonic()
        try:
            return ex.execute("l1", "lookup", {"key": "flag"})  # blocks the loop the tool needs
        finally:
            assert time.monotonic() - started < LOOP_START_TIMEOUT  # at once, not after a wait

    box = _in_thread(lambda: asyncio.run(main()))
    assert isinstance(box.get("error"), EventLoopBlockedError)
    assert str(box["error"]).startswith(
        "tool lookup was called synchronously inside a running event loop; use ainvoke/astream (the tool's "
        "session lives on that loop, which this sync call blocks, so the call cannot run without blocking it)"
    )

    # two read-only calls of one answer: the worker threads see the loop their caller blocks
    async def parallel() -> Any:
        ex = from_langchain_tools([_bound_tool(_Conn())])
        jobs = [lambda k=k: ex.execute(f"p{k}", "lookup", {"key": k}) for k in ("a", "b")]
        started = time.monotonic()
        try:
            return run_at_once(jobs, 2)
        finally:
            assert time.monotonic() - started < LOOP_START_TIMEOUT

    assert isinstance(_in_thread(lambda: asyncio.run(parallel())).get("error"), EventLoopBlockedError)


def test_a_sync_call_beside_the_tools_own_loop_runs_on_it(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    th = threading.Thread(target=loop.run_forever, daemon=True)
    th.start()
    try:
        conn = asyncio.run_coroutine_threadsafe(_open(), loop).result(10)
        ex = LangChainTools([_bound_tool(conn)], side_effects={"lookup"}, receipts_dir=tmp_path / "r")
        box = _in_thread(lambda: ex.execute("l2", "lookup", {"key": "flag"}))
        assert box == {"value": ToolOutcome("ok", "flag=on", "other")}  # run on the connection's loop
        raw = from_langchain_tools([_bound_tool(conn, "lookup_bytes")])
        box = _in_thread(lambda: raw.execute("l4", "lookup_bytes", {"key": "flag"}))
        assert box == {"value": ToolOutcome("ok", "flag=on", "other", raw=b"flag=on")}  # its bytes seen there too
    finally:
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)
    # that loop has stopped: an error naming why, at once, and no receipt left behind
    box = _in_thread(lambda: ex.execute("l3", "lookup", {"key": "flag"}))
    assert str(box["error"]) == (
        "tool lookup is bound to the event loop of its session, and that loop is not running (has the session's "
        "`async with` ended?): run the graph async (`await graph.ainvoke(...)`) inside the `async with` of the MCP "
        "session, or take the tools of `MultiServerMCPClient.get_tools()` (a session per call)"
    )
    assert [p.name for p in (tmp_path / "r").iterdir()] == [ex.receipt("", "l2").name]  # type: ignore[union-attr]
    loop.close()


async def _open() -> _Conn:
    return _Conn()


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR caf\xc3\xa9 \xff\xfe end"


def test_bytes_are_stored_as_they_are_and_shown_decoded(tmp_path: Path) -> None:
    @tool
    def snapshot(name: str) -> bytes:
        """The raw bytes of a snapshot."""
        return PNG

    @tool
    async def asnapshot(name: str) -> bytes:
        """The raw bytes of a snapshot, async."""
        await asyncio.sleep(0)
        return PNG

    shown = PNG.decode("utf-8", "replace")
    assert shown == "\ufffdPNG\r\n\x1a\n\x00\x00\x00\rIHDR café \ufffd\ufffd end"
    ex = from_langchain_tools([snapshot, asnapshot], side_effects={"snapshot"}, receipts_dir=tmp_path / "r")
    assert ex.execute("s0", "snapshot", {"name": "x"}) == ToolOutcome("ok", shown, "other", raw=PNG)
    assert ex.execute("s1", "asnapshot", {"name": "x"}) == ToolOutcome("ok", shown, "other", raw=PNG)
    assert asyncio.run(ex.aexecute("s2", "asnapshot", {"name": "x"})) == ToolOutcome("ok", shown, "other", raw=PNG)
    assert ex.execute("s3", "snapshot", {}).raw is None  # an error result: no bytes

    async def in_a_notebook() -> ToolOutcome:  # a sync call where a loop runs: awaited in a worker thread
        return ex.execute("s4", "asnapshot", {"name": "x"})

    assert asyncio.run(in_a_notebook()) == ToolOutcome("ok", shown, "other", raw=PNG)

    script = {
        "planner": [plan("Take the snapshot")],
        "executor": [
            tool_call("snapshot", {"name": "home"}, id="b1"),
            tool_call("asnapshot", {"name": "home"}, id="b2"),
            complete("taken"),
        ],
        "reviewer": [review("approve")],
    }
    g, stores = _graph(tmp_path, script, [snapshot, asnapshot], side_effects={"snapshot"})
    g.invoke(new_task("Take the snapshot.", "by"), thread_config("by"), durability="sync")
    results = {e.payload["call_id"]: e.payload for e in stores.events.read("by") if e.kind == "tool.result.received"}
    for cid in ("b1", "b2"):
        assert stores.artifacts.get(results[cid]["raw_ref"]) == PNG  # byte-exact, not "b'\\x89PNG...'"
        assert results[cid]["result_summary"] == shown  # the prompt's text: decoded, U+FFFD for the rest
        assert results[cid]["raw_chars"] == len(shown)
    # the receipt keeps the bytes too, and a resume records them as they are
    receipt = json.loads(LangChainTools([snapshot], receipts_dir=tmp_path / "receipts").receipt("by", "b1").read_text())  # type: ignore[union-attr]
    assert receipt["bytes"] is True and stores.artifacts.get(receipt["output_ref"]) == PNG
    ex3 = LangChainTools(
        [snapshot], side_effects={"snapshot"}, receipts_dir=tmp_path / "r3", artifacts=stores.artifacts
    )
    ex3.execute("s9", "snapshot", {"name": "x"})  # (outside a run: the task is "")
    assert ex3.recover("s9", "snapshot", {"name": "x"}).outcome == ToolOutcome("ok", shown, "other", raw=PNG)


def test_a_tools_loop_that_never_starts_the_call_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool's loop runs in another thread but is blocked (as by a sync call waiting for it)."""
    monkeypatch.setattr("nodes.tools.loops.LOOP_START_TIMEOUT", 0.5)
    ran: list[str] = []
    loop = asyncio.new_event_loop()
    th = threading.Thread(target=loop.run_forever, daemon=True)
    th.start()
    conn = asyncio.run_coroutine_threadsafe(_open(), loop).result(10)
    session = conn

    async def poke(key: str) -> str:
        """Poke a key."""
        ran.append(key)
        return f"poked {key} on {session._loop is asyncio.get_running_loop()}"

    release = threading.Event()
    loop.call_soon_threadsafe(release.wait)  # the loop is stuck in a callback
    ex = from_langchain_tools([StructuredTool.from_function(coroutine=poke, name="poke", description="Poke.")])
    box = _in_thread(lambda: ex.execute("k1", "poke", {"key": "a"}))
    assert str(box["error"]).startswith(
        "tool poke was called synchronously inside a running event loop; use ainvoke/astream (the loop of the "
        "tool's session did not start the call within 0.5 s: it is blocked, most likely by the sync call waiting "
        "for this tool, so the call cannot run without blocking it)"
    )
    release.set()
    assert asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "free"), loop).result(10) == "free"
    assert ran == []  # the abandoned call never runs, even once the loop is free
    box = _in_thread(lambda: ex.execute("k2", "poke", {"key": "b"}))
    assert box == {"value": ToolOutcome("ok", "poked b on True", "other")} and ran == ["b"]
    loop.call_soon_threadsafe(loop.stop)
    th.join(10)
    loop.close()
