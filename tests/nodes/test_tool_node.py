"""The tool node's contract details: error resolution per plan step, ``resume.started`` from the
tool node, the event log's ``kinds`` filter on the approval hot path, the explicit
``accepts_scopes`` flag, and the approval questions of a node run replayed in order."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context import Permissions, SqliteStores, TaskContext, new_event, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph, run_with_approvals
from nodes import ScriptedChatModel, ToolOutcome, WorkspaceTools
from nodes.runtime import NodeEnv
from nodes.testing import complete, plan, recover, review, tool_call
from nodes.tools import TaskToolNode, function_schema, make_tool_node

CONF = {"path": "app/proxy.conf", "content": "client_max_body_size 10m;\n"}


class FlakyTools:
    """A plain executor (no ``strict_resolution``): call ids starting with ``e`` fail."""

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("probe", "Probe something.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        if call_id.startswith("e"):
            return ToolOutcome("error", f"Error: probe {call_id} failed\n")
        return ToolOutcome("ok", f"probe {call_id} ok\n")


def _graph(model: ScriptedChatModel, tools: Any, stores: Any):
    return build_orchestrator(model, tools=tools, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)


def _ev(kind: str, payload: dict[str, Any], actor: str = "system") -> Any:
    return new_event(kind, payload, actor=actor)  # type: ignore[arg-type]


def _resolution_run(
    tools: Any, calls: list[tuple[str, str, dict[str, Any]]], node_cls: type[TaskToolNode] = TaskToolNode
) -> tuple[Any, list[Any]]:
    """Run the tool node (a ``node_cls``) on a task whose step s1 has an open error (call e1 of ``probe``
    ``{"n": 1}``) and whose pending calls are ``calls`` (id, step, args); the events it appended."""
    stores = SqliteStores(":memory:")
    env = NodeEnv(events=stores.events, artifacts=stores.artifacts)
    evs = [
        _ev("task.created", {"task_id": "er", "original_request": "Probe."}, "user"),
        _ev("plan.created", {"steps": [{"id": "s1", "title": "First"}, {"id": "s2", "title": "Second"}]}, "agent"),
        _ev("tool.called", {"call_id": "e1", "step_id": "s1", "tool": "probe", "arguments": '{"n": 1}'}, "agent"),
        _ev("tool.result.received", {"call_id": "e1", "status": "error", "result_summary": "Error: failed"}, "tool"),
        _ev(
            "error.occurred",
            {"error_id": "err-1", "source": "tool:probe", "message": "Error: failed", "step_id": "s1", "call_id": "e1"},
        ),
        *[
            _ev(
                "tool.called",
                {"call_id": cid, "step_id": step, "tool": "probe", "arguments": json.dumps(args)},
                "agent",
            )
            for cid, step, args in calls
        ],
    ]
    logged = stores.events.append("er", evs)
    state = replay(logged)
    node = make_tool_node(env, tools) if node_cls is TaskToolNode else node_cls(env, tools)
    assert type(node) is node_cls
    node(state, {})
    return state, stores.events.read("er", after=len(logged))


def test_a_success_resolves_only_open_errors_of_its_own_plan_step() -> None:
    # default rule (no strict_resolution): a success in another step leaves the error open ...
    _, new = _resolution_run(FlakyTools(), [("ok2", "s2", {"n": 1})])
    assert [e.kind for e in new] == ["tool.result.received"]
    # ... a success in the error's step resolves it, whatever the tool's arguments
    _, new = _resolution_run(FlakyTools(), [("ok3", "s1", {"n": 9})])
    assert [(e.kind, e.payload.get("error_id")) for e in new] == [
        ("tool.result.received", None),
        ("error.resolved", "err-1"),
    ]
    # strict rule: only the same tool with the same arguments, in any step
    strict = FlakyTools()
    strict.strict_resolution = True  # type: ignore[attr-defined]
    _, new = _resolution_run(strict, [("ok4", "s1", {"n": 9})])
    assert [e.kind for e in new] == ["tool.result.received"]
    _, new = _resolution_run(strict, [("ok5", "s2", {"n": 1})])
    assert [e.kind for e in new] == ["tool.result.received", "error.resolved"]


class NoResolutions(TaskToolNode):
    """One step of the node replaced: a success resolves no error."""

    def resolutions(self, run: Any, rec: Any, args: dict[str, Any]) -> list[Any]:
        return []


def test_the_tool_node_is_a_class_whose_steps_are_methods() -> None:
    _, new = _resolution_run(FlakyTools(), [("ok3", "s1", {"n": 9})], NoResolutions)
    assert [(e.kind, e.payload["call_id"], e.payload["status"]) for e in new] == [("tool.result.received", "ok3", "ok")]
    # the graph's "tools" node is the instance itself (sync __call__, async acall); LangGraph infers
    # its input schema from __call__
    g = build_orchestrator(ScriptedChatModel(script=[]), tools=FlakyTools())
    spec = g.builder.nodes["tools"]
    assert isinstance(spec.runnable, TaskToolNode) and spec.input_schema is TaskContext
    assert (spec.runnable.func, spec.runnable.afunc) == (spec.runnable.__call__, spec.runnable.acall)


def _approval_graph(tmp_path: Path, stores: Any, executor: list[Any]):
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True, exist_ok=True)
    (root / "app" / "proxy.conf").write_text("client_max_body_size 1m;\n")
    model = ScriptedChatModel(
        script={
            "planner": [plan("Patch the config")] * 5,
            "executor": executor,
            "recovery": [recover("replan", "rejected")] * 3,
            "reviewer": [review("approve")],
        }
    )
    return _graph(model, WorkspaceTools(root, receipts_dir=tmp_path / "receipts"), stores), root


def test_resume_that_stops_at_an_approval_in_the_tool_node_records_resume_started(tmp_path: Path) -> None:
    stores = SqliteStores(":memory:")
    g, root = _approval_graph(tmp_path, stores, [tool_call("write_file", CONF, id="w1"), complete("done")])
    task = new_task("Raise the limit.", "rs", permissions=Permissions(file_scopes=["app/**"]))
    first = run_graph(g, stores, "rs", task)
    assert first.waiting is not None and first.waiting["call_id"] == "w1"
    n = stores.events.last_seq("rs")
    again = run_graph(g, stores, "rs", None, resume=True)  # `taskctx resume` while the approval is pending
    assert again.waiting is not None and again.waiting["call_id"] == "w1"
    new = stores.events.read("rs", after=n)
    assert [e.kind for e in new] == ["resume.started"]  # its own batch; nothing of the question appended again
    third = run_graph(g, stores, "rs", None, resume=True)
    assert third.waiting is not None
    done = run_graph(g, stores, "rs", Command(resume={"action": "approve"}))
    assert done.waiting is None and done.state.control.status == "completed"
    events = stores.events.read("rs")
    kinds = [e.kind for e in events]
    assert kinds.count("resume.started") == 2 and kinds.count("permission.requested") == 1
    assert kinds.count("permission.granted") == 1
    assert len({e.payload["token"] for e in events if e.kind == "resume.started"}) == 2
    assert (root / "app" / "proxy.conf").read_text() == CONF["content"]
    assert replay(events) == done.state


class SpyEvents:
    """The event log, recording what each ``read`` returned."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.reads: list[tuple[int, Any, list[str]]] = []

    def read(self, task_id: str, after: int = 0, limit: int | None = None, kinds: Any = None) -> list[Any]:
        out = self.inner.read(task_id, after, limit, **({"kinds": kinds} if kinds is not None else {}))
        self.reads.append((after, kinds, [e.kind for e in out]))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SpyStores:
    def __init__(self, stores: SqliteStores):
        self.events = SpyEvents(stores.events)
        self.artifacts = stores.artifacts


def test_the_rejected_before_check_reads_only_denials(tmp_path: Path) -> None:
    stores = SqliteStores(":memory:")
    spy = SpyStores(stores)
    same = lambda messages, meta: tool_call("write_file", CONF, id=f"w{meta['role_call']}")  # noqa: E731
    g, _ = _approval_graph(tmp_path, spy, [same] * 20)
    r = run_with_approvals(
        g,
        stores,
        "rb",
        new_task("Raise the limit.", "rb", permissions=Permissions(file_scopes=["app/**"])),
        answer=lambda req: {"action": "reject", "reason": "no"},
    )
    assert r.finished
    events = stores.events.read("rb")
    assert sum(e.kind == "context.built" for e in events) >= 4
    assert (
        sum(e.kind == "tool.result.received" and "already rejected" in e.payload["result_summary"] for e in events) == 2
    )
    # every call that needed approval checked earlier rejections without reading the manifests
    assert not [x for x in spy.events.reads if "context.built" in x[2]], spy.events.reads
    filtered = [x for x in spy.events.reads if x[1] is not None]
    assert filtered and all(set(kinds) <= {"permission.denied"} for _, _, kinds in filtered)


def test_event_log_kinds_filter(stores: Any) -> None:
    tid = f"kinds-{uuid.uuid4().hex[:8]}"
    evs = [
        _ev(k, p)
        for k, p in [
            ("user.interrupted", {}),
            ("resume.started", {"token": "a"}),
            ("user.interrupted", {}),
            ("resume.started", {"token": "b"}),
            ("resume.started", {"token": "c"}),
        ]
    ]
    stores.events.append(tid, evs)
    log = stores.events
    assert [e.seq for e in log.read(tid, kinds=["resume.started"])] == [2, 4, 5]
    assert [e.payload["token"] for e in log.read(tid, kinds=["resume.started"])] == ["a", "b", "c"]
    assert [e.seq for e in log.read(tid, kinds=("resume.started", "user.interrupted"))] == [1, 2, 3, 4, 5]
    assert [e.seq for e in log.read(tid, after=2, kinds=["resume.started"])] == [4, 5]
    assert [e.seq for e in log.read(tid, kinds=["resume.started"], limit=2)] == [2, 4]  # limit counts matches
    assert [e.seq for e in log.iter(tid, kinds=["user.interrupted"])] == [1, 3]
    assert log.read(tid, kinds=[]) == [] and log.read(tid, kinds=["task.created"]) == []
    assert [e.seq for e in log.read(tid)] == [1, 2, 3, 4, 5]


class ScopedNoCheck(FlakyTools):
    """Takes the scopes (declared), has no ``check`` policy."""

    accepts_scopes = True

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Any = None) -> ToolOutcome:
        self.seen.append(scopes)
        return ToolOutcome("ok", "fine\n")


class CheckedNoScopes(FlakyTools):
    """Has a ``check`` policy but an ``execute`` of three arguments."""

    def check(self, tool: str, args: dict[str, Any], scopes: Any = ()) -> tuple[str, str, tuple[str, ...]]:
        return "low", "", ()


def test_execute_gets_the_scopes_by_the_explicit_flag() -> None:
    for tools, tid in ((ScopedNoCheck(), "sc"), (CheckedNoScopes(), "cn")):
        stores = SqliteStores(":memory:")
        model = ScriptedChatModel(
            script={
                "planner": [plan("Probe")],
                "executor": [tool_call("probe", {}, id="p1"), complete("ok")],
                "reviewer": [review("approve")],
            }
        )
        r = run_graph(
            _graph(model, tools, stores),
            stores,
            tid,
            new_task("Probe.", tid, permissions=Permissions(file_scopes=["app/**"])),
        )
        call = next(c for c in r.state.evidence.recent_tool_calls if c.id == "p1")
        assert call.status == "ok", call.result_summary
        if isinstance(tools, ScopedNoCheck):
            assert tools.seen == [["app/**"]]

    from nodes.tools import accepts_scopes

    assert accepts_scopes(WorkspaceTools.__new__(WorkspaceTools)) and WorkspaceTools.accepts_scopes is True
    assert not accepts_scopes(FlakyTools()) and not accepts_scopes(CheckedNoScopes())
