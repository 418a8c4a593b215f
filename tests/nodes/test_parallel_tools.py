"""The read-only calls of one model answer run at the same time; the event log is the one-by-one run's.

Concurrency is shown without timing: tools that wait on a shared ``threading.Barrier`` return only
when the other call runs at the same time (one by one, the barrier times out and the call's result
is an error). The order the calls ran in is a list the tools append to.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from context import Permissions, SqliteStores, new_event, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome
from nodes.runtime import NodeEnv, NodeRun
from nodes.testing import complete, plan, review
from nodes.tools import TaskToolNode, function_schema, make_tool_node, run_at_once

WAIT = 5.0  # seconds a barrier waits for its other party (only reached when the calls run one by one)


class PairedTools:
    """``probe`` waits on a barrier of two before it returns; ``look`` returns at once; ``write`` has
    side effects; ``boom`` waits on the barrier, then raises. ``ran`` lists ``start:<id>`` and
    ``end:<id>`` in the order the calls got there."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=WAIT)
        self.lock = threading.Lock()
        self.ran: list[str] = []

    def note(self, what: str) -> None:
        with self.lock:
            self.ran.append(what)

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema(n, f"{n} something.") for n in ("probe", "look", "write", "boom")]

    def has_side_effects(self, tool: str) -> bool:
        return tool == "write"

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.note(f"start:{call_id}")
        try:
            if tool in ("probe", "boom"):
                self.barrier.wait()
            if tool == "boom":
                raise RuntimeError(f"{call_id} broke")
            return ToolOutcome("ok", f"{tool} {call_id} ok\n")
        finally:
            self.note(f"end:{call_id}")


def _ev(kind: str, payload: dict[str, Any], actor: str = "system") -> Any:
    return new_event(kind, payload, actor=actor)  # type: ignore[arg-type]


def _pending(
    tools: Any,
    calls: list[tuple[str, str]],
    max_parallel: int = 4,
    permissions: dict[str, Any] | None = None,
) -> tuple[SqliteStores, list[Any]]:
    """Run the tool node once on a task whose pending calls are ``calls`` (id, tool), one answer of
    the executor; the stores and the events the node appended."""
    stores = SqliteStores(":memory:")
    env = NodeEnv(events=stores.events, artifacts=stores.artifacts)
    logged = stores.events.append(
        "pt",
        [
            _ev("task.created", {"task_id": "pt", "original_request": "Probe.", **(permissions or {})}, "user"),
            _ev("plan.created", {"steps": [{"id": "s1", "title": "Probe"}]}, "agent"),
            *[
                _ev("tool.called", {"call_id": cid, "step_id": "s1", "tool": tool, "arguments": "{}"}, "agent")
                for cid, tool in calls
            ],
        ],
    )
    make_tool_node(env, tools, max_parallel)(replay(logged), {})
    return stores, stores.events.read("pt", after=len(logged))


def _results(events: list[Any]) -> list[tuple[str, str, str]]:
    return [
        (e.payload["call_id"], e.payload["status"], e.payload["result_summary"])
        for e in events
        if e.kind == "tool.result.received"
    ]


def test_two_read_only_calls_of_one_answer_run_at_the_same_time() -> None:
    tools = PairedTools()
    _, new = _pending(tools, [("c1", "probe"), ("c2", "probe")])
    # each returned only because the other was waiting on the barrier at the same time
    assert _results(new) == [("c1", "ok", "probe c1 ok\n"), ("c2", "ok", "probe c2 ok\n")]
    assert [e.kind for e in new] == ["tool.result.received", "tool.result.received"]
    assert sorted(tools.ran[:2]) == ["start:c1", "start:c2"]  # both started before either ended


def test_one_by_one_the_barrier_times_out_so_the_pair_test_can_fail() -> None:
    tools = PairedTools()
    tools.barrier = threading.Barrier(2, timeout=0.2)  # (only how long the failing run takes)
    _, new = _pending(tools, [("c1", "probe"), ("c2", "probe")], max_parallel=1)
    assert [(c, s) for c, s, _ in _results(new)] == [("c1", "error"), ("c2", "error")]
    assert tools.ran == ["start:c1", "end:c1", "start:c2", "end:c2"]
    assert "raised BrokenBarrierError" in _results(new)[0][2]


def test_a_call_with_side_effects_runs_alone_between_the_read_only_runs() -> None:
    tools = PairedTools()
    calls = [("r1", "probe"), ("r2", "probe"), ("w1", "write"), ("r3", "probe"), ("r4", "probe")]
    _, new = _pending(tools, calls)
    assert [c for c, s, _ in _results(new) if s == "ok"] == ["r1", "r2", "w1", "r3", "r4"]
    # r1 and r2 together, then w1 on its own, then r3 and r4 together
    assert sorted(tools.ran[:4]) == ["end:r1", "end:r2", "start:r1", "start:r2"]
    assert tools.ran[4:6] == ["start:w1", "end:w1"]
    assert sorted(tools.ran[6:]) == ["end:r3", "end:r4", "start:r3", "start:r4"]
    # the write gets its marker first, as one by one; the read-only calls get none
    assert [(e.kind, e.payload["call_id"]) for e in new] == [
        ("tool.result.received", "r1"),
        ("tool.result.received", "r2"),
        ("permission.granted", "w1"),
        ("tool.result.received", "w1"),
        ("tool.result.received", "r3"),
        ("tool.result.received", "r4"),
    ]


class OutOfOrderTools:
    """``slow`` returns only after ``fast`` has returned; ``done`` lists the calls as they return."""

    def __init__(self) -> None:
        self.fast_done = threading.Event()
        self.done: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("slow", "Slow."), function_schema("fast", "Fast.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "slow" and not self.fast_done.wait(WAIT):
            return "error: fast never returned"
        self.done.append(call_id)
        if tool == "fast":
            self.fast_done.set()
        return f"{tool} {call_id} ok\n"


def test_the_log_keeps_the_call_order_when_the_second_call_finishes_first() -> None:
    tools = OutOfOrderTools()
    _, new = _pending(tools, [("a", "slow"), ("b", "fast")])
    assert tools.done == ["b", "a"]
    assert [(e.seq, e.payload["call_id"]) for e in new] == [(5, "a"), (6, "b")]
    assert _results(new) == [("a", "ok", "slow a ok\n"), ("b", "ok", "fast b ok\n")]


def test_a_call_that_raises_is_its_own_error_result_and_the_other_succeeds() -> None:
    tools = PairedTools()
    _, new = _pending(tools, [("b1", "boom"), ("p1", "probe")])
    assert _results(new) == [
        ("b1", "error", "error: tool boom raised RuntimeError: b1 broke"),
        ("p1", "ok", "probe p1 ok\n"),
    ]


class Plain:
    """Deterministic read-only tools (``look``), one with side effects (``write``)."""

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("look", "Look."), function_schema("write", "Write.")]

    def has_side_effects(self, tool: str) -> bool:
        return tool == "write"

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        if call_id == "l2":
            return ToolOutcome("error", "Error: l2 failed\n")
        return ToolOutcome("ok", f"{tool} {call_id} {json.dumps(arguments, sort_keys=True)}\n" * 40)


def _log(events: list[Any]) -> list[str]:
    """The events as stored, ids and timestamps aside."""
    return [json.dumps(e.model_dump(mode="json", exclude={"id", "timestamp"}), sort_keys=True) for e in events]


def test_the_event_log_is_byte_identical_to_a_one_by_one_run() -> None:
    calls = [("l1", "look"), ("l2", "look"), ("l3", "look"), ("w1", "write"), ("l4", "look"), ("l5", "look")]
    par_stores, par = _pending(Plain(), calls, max_parallel=4)
    seq_stores, seq = _pending(Plain(), calls, max_parallel=1)  # one by one: each call through handle()
    assert _log(par) == _log(seq)
    assert [e.kind for e in par].count("tool.result.received") == 6
    # the stored outputs too
    refs = [e.payload["raw_ref"] for e in par if e.kind == "tool.result.received"]
    assert [par_stores.artifacts.get(r) for r in refs] == [seq_stores.artifacts.get(r) for r in refs]


def _node_run(stores: SqliteStores, calls: list[tuple[str, str]], permissions: dict[str, Any]) -> tuple[Any, NodeRun]:
    env = NodeEnv(events=stores.events, artifacts=stores.artifacts)
    logged = stores.events.append(
        "ao",
        [
            _ev("task.created", {"task_id": "ao", "original_request": "x", **permissions}, "user"),
            _ev("plan.created", {"steps": [{"id": "s1", "title": "x"}]}, "agent"),
            *[
                _ev("tool.called", {"call_id": c, "step_id": "s1", "tool": t, "arguments": "{}"}, "agent")
                for c, t in calls
            ],
        ],
    )
    state = replay(logged)
    return TaskToolNode(env, Plain()), NodeRun(env, state, "tools", {})


def test_calls_that_need_approval_or_are_built_in_stop_the_run_of_read_only_calls() -> None:
    calls = [("l1", "look"), ("l2", "look"), ("a1", "read_artifact"), ("l3", "look")]
    node, run = _node_run(SqliteStores(":memory:"), calls, {})
    pending = run.ctx.evidence.recent_tool_calls
    assert [r.id for r, _ in node.at_once(run, pending)] == ["l1", "l2"]
    assert node.at_once(run, pending[2:]) == []  # read_artifact reads the stores the calls before it write
    node, run = _node_run(SqliteStores(":memory:"), calls, {"requires_approval": ["look"]})
    assert node.at_once(run, run.ctx.evidence.recent_tool_calls) == []


def test_max_parallel_is_checked_and_bounds_the_threads() -> None:
    with pytest.raises(ValueError, match="max_parallel must be at least 1 \\(got 0\\)"):
        make_tool_node(NodeEnv.sqlite(), Plain(), 0)
    with pytest.raises(ValueError, match="max_parallel must be at least 1"):
        run_at_once([], 0)
    # an executor's own max_parallel lowers the node's (1: an executor that is not thread-safe)
    one, eight, zero = Plain(), Plain(), Plain()
    one.max_parallel, eight.max_parallel, zero.max_parallel = 1, 8, 0  # type: ignore[attr-defined]
    assert [TaskToolNode(NodeEnv.sqlite(), t).max_parallel for t in (Plain(), one, eight)] == [4, 1, 4]
    with pytest.raises(ValueError, match="Plain.max_parallel must be at least 1 \\(got 0\\)"):
        TaskToolNode(NodeEnv.sqlite(), zero)
    lock, running, most = threading.Lock(), [0], [0]
    gate = threading.Barrier(2, timeout=WAIT)

    def job(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait()  # pairs: with max_parallel 2, each job meets exactly one other
        with lock:
            running[0] -= 1
        return i

    assert run_at_once([lambda i=i: job(i) for i in range(6)], 2) == [0, 1, 2, 3, 4, 5]
    assert most[0] == 2


def test_the_default_graph_runs_an_answers_read_only_calls_at_once() -> None:
    """Through ``build_orchestrator``: one executor answer with two ``probe`` calls, each waiting for the other."""
    tools = PairedTools()
    two = AIMessage(
        content="",
        tool_calls=[
            {"name": "probe", "args": {"n": 1}, "id": "p1", "type": "tool_call"},
            {"name": "probe", "args": {"n": 2}, "id": "p2", "type": "tool_call"},
        ],
    )
    model = ScriptedChatModel(
        script={"planner": [plan("Probe twice")], "executor": [two, complete("both fine")], "reviewer": [review()]}
    )
    stores = SqliteStores(":memory:")
    tools.max_parallel = 2  # type: ignore[attr-defined]
    g = build_orchestrator(model, tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    out = run_graph(g, stores, "gp", new_task("Probe twice.", "gp", permissions=Permissions()))
    assert out.state.control.status == "completed"
    assert _results(stores.events.read("gp")) == [("p1", "ok", "probe p1 ok\n"), ("p2", "ok", "probe p2 ok\n")]
