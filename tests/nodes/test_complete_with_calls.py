"""``complete_step`` sent together with the step's last tool calls: the step completes once they
all succeed, without another executor model call; a failed or denied call withdraws nothing
from the log but leaves the completion unused, and the model is asked again."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from context import SqliteStores, new_event, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome
from nodes.testing import and_complete, complete, plan, recover, review, tool_call
from nodes.tools import function_schema


class Probe:
    """``probe``: call ids starting with ``e`` fail, the others return ``probe <id> ok``."""

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("probe", "Probe something.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        if call_id.startswith("e"):
            return ToolOutcome("error", f"Error: probe {call_id} failed\n")
        return ToolOutcome("ok", f"probe {call_id} ok\n")


def _run(executor: list[Any], recoveries: int = 1) -> tuple[list[Any], Any]:
    stores = SqliteStores(":memory:")
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe twice")],
            "executor": executor,
            "reviewer": [review("approve", "ok")],
            "recovery": [recover("retry", "try again")] * recoveries,
        }
    )
    g = build_orchestrator(model, tools=Probe(), stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    res = run_graph(g, stores, "cw", new_task("Probe twice.", "cw"))
    assert res.finished
    return stores.events.read("cw"), res


def _kinds(events: list[Any]) -> list[str]:
    return [e.kind if e.kind != "context.built" else f"built:{e.payload['role']}" for e in events]


def test_the_step_completes_after_its_last_call_without_another_model_call() -> None:
    events, _ = _run(
        [
            tool_call("probe", {"n": 1}, id="a1"),
            and_complete(tool_call("probe", {"n": 2}, id="a2"), "probed twice", findings=["both probes ok"]),
        ]
    )
    assert _kinds(events) == [
        "task.created",
        "built:planner",
        "plan.created",
        "step.started",
        "built:executor",
        "tool.called",
        "tool.result.received",
        "built:executor",
        "tool.called",
        "step.completion.requested",
        "tool.result.received",
        "step.completed",
        "checkpoint.created",
        "built:reviewer",
        "review.completed",
        "task.completed",
    ]
    req = next(e for e in events if e.kind == "step.completion.requested").payload
    assert (req["step_id"], req["after_calls"], req["summary"]) == ("s1", ["a2"], "probed twice")
    assert req["findings"][0]["evidence_refs"] == []  # no refs yet: the results are not in
    done = next(e for e in events if e.kind == "step.completed").payload
    refs = [e.payload["raw_ref"] for e in events if e.kind == "tool.result.received"]
    # on completion the finding gets the step's refs (the result of a2 included)
    assert done["findings"] == [
        {
            "id": "s1.f1",
            "statement": "both probes ok",
            "evidence_refs": refs,
            "supersedes": [],
            "provenance": "agent_claim",
            "rests_on": {},  # scripted tools record no workspace reads (context.freshness)
            "head": None,
        }
    ]
    assert done["summary"] == "probed twice" and done["result"] == "success"
    # folded: pending between the request and step.completed, cleared after it
    at = next(i for i, e in enumerate(events) if e.kind == "step.completion.requested")
    pending = replay(events[: at + 1]).control.pending_completion
    assert pending is not None and pending.after_calls == ["a2"]
    assert replay(events).control.pending_completion is None


def test_a_failed_call_leaves_the_completion_unused_and_asks_the_model_again() -> None:
    events, _ = _run(
        [
            and_complete(tool_call("probe", {"n": 1}, id="e1"), "probed", findings=["probe ok"]),
            complete("probe failed, step done anyway", findings=["probe e1 failed"]),
        ]
    )
    assert _kinds(events) == [
        "task.created",
        "built:planner",
        "plan.created",
        "step.started",
        "built:executor",
        "tool.called",
        "step.completion.requested",
        "tool.result.received",
        "error.occurred",
        "built:recovery",
        "recovery.decided",
        "built:executor",
        "step.completed",
        "error.resolved",
        "checkpoint.created",
        "built:reviewer",
        "review.completed",
        "task.completed",
    ]
    done = next(e for e in events if e.kind == "step.completed").payload
    assert done["summary"] == "probe failed, step done anyway"
    # the executor prompt that follows says why the step did not complete
    pending = replay(events[: next(i for i, e in enumerate(events) if e.kind == "error.occurred")]).control
    assert pending.pending_completion is not None and pending.pending_completion.not_applied == "e1 returned error"


def test_the_next_prompt_says_the_completion_was_not_applied() -> None:
    stores = SqliteStores(":memory:")
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe")],
            "reviewer": [review("approve", "ok")],
            "recovery": [recover("retry", "again")],
            "executor": [and_complete(tool_call("probe", {"n": 1}, id="e1"), "probed"), complete("done after all")],
        }
    )
    g = build_orchestrator(model, tools=Probe(), stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    assert run_graph(g, stores, "na", new_task("Probe.", "na")).finished
    built = [e for e in stores.events.read("na") if e.kind == "context.built" and e.payload["role"] == "executor"]
    second = stores.artifacts.get(built[1].payload["prompt_ref"]).decode()
    assert (
        "Your complete_step sent with e1 was not applied: e1 returned error. "
        "Call complete_step again when the step is done."
    ) in second


def test_a_failed_step_sent_with_a_call_ends_failed_whatever_the_call_returns() -> None:
    events, _ = _run(
        [
            and_complete(tool_call("probe", {"n": 1}, id="e1"), "cannot probe", result="failed"),
            complete("recovered", findings=["ok now"]),
        ]
    )
    done = [e.payload for e in events if e.kind == "step.completed"]
    assert [(d["result"], d["summary"]) for d in done] == [("failed", "cannot probe"), ("success", "recovered")]
    # the step ends failed before recovery runs, so one recovery call sees both the call's error and the step's
    assert _kinds(events)[6:13] == [
        "step.completion.requested",
        "tool.result.received",
        "step.completed",
        "error.occurred",
        "error.occurred",
        "built:recovery",
        "recovery.decided",
    ]
    assert [e.payload["decision"] for e in events if e.kind == "recovery.decided"] == ["retry"]


def test_a_blocked_step_sent_with_a_call_then_stopped_leaves_nothing_pending() -> None:
    stores = SqliteStores(":memory:")
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe")],
            "recovery": [recover("stop", "cannot go on")],
            "executor": [and_complete(tool_call("probe", {"n": 1}, id="e1"), "blocked by the probe", result="blocked")],
        }
    )
    g = build_orchestrator(model, tools=Probe(), stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    res = run_graph(g, stores, "bs", new_task("Probe.", "bs"))
    ctx = replay(stores.events.read("bs"))
    assert res.finished and ctx.control.status == "failed"
    assert [(s.id, s.status) for s in ctx.plan.steps] == [("s1", "blocked")]
    assert ctx.control.pending_completion is None


def test_an_edited_approval_leaves_the_completion_unapplied() -> None:
    def ev(kind: str, payload: dict[str, Any]) -> Any:
        return new_event(kind, payload, actor="agent")  # type: ignore[arg-type]

    base = [
        ev("task.created", {"task_id": "ea", "original_request": "Deploy."}),
        ev("plan.created", {"steps": [{"id": "s1", "title": "deploy"}]}),
        ev("step.started", {"step_id": "s1"}),
        ev("tool.called", {"call_id": "d1", "step_id": "s1", "tool": "deploy", "arguments": '{"env": "staging"}'}),
        ev("step.completion.requested", {"step_id": "s1", "after_calls": ["d1"], "summary": "deployed"}),
        ev("permission.requested", {"call_id": "d1", "tool": "deploy", "arguments": '{"env": "staging"}'}),
    ]
    same = replay(
        [*base, ev("permission.granted", {"call_id": "d1", "tool": "deploy", "arguments": '{"env":"staging"}'})]
    )
    assert same.control.pending_completion is not None and same.control.pending_completion.not_applied == ""
    edited = replay(
        [*base, ev("permission.granted", {"call_id": "d1", "tool": "deploy", "arguments": '{"env": "qa"}'})]
    )
    assert edited.control.pending_completion is not None
    assert edited.control.pending_completion.not_applied == "the approver edited the arguments of d1"
    denied = replay([*base, ev("permission.denied", {"call_id": "d1", "tool": "deploy", "reason": "no"})])
    assert denied.control.pending_completion is not None
    assert denied.control.pending_completion.not_applied == "d1 was not run (no)"


def test_the_reviewer_reads_every_finding_from_the_log() -> None:
    from context.windows import FINDINGS_WINDOW

    n = FINDINGS_WINDOW + 2
    stores = SqliteStores(":memory:")
    model = ScriptedChatModel(
        script={
            "planner": [plan(*[f"Step {i}" for i in range(1, n + 1)])],
            "executor": [complete(f"step {i} done", findings=[f"fact {i}"]) for i in range(1, n + 1)],
            "reviewer": [review("approve", "ok")],
        }
    )
    g = build_orchestrator(model, tools=Probe(), stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    res = run_graph(g, stores, "rf", new_task("Collect facts.", "rf"))
    assert res.finished
    events = stores.events.read("rf")
    assert [f.id for f in replay(events).evidence.findings] == [f"s{i}.f1" for i in range(3, n + 1)]
    rev = next(e for e in events if e.kind == "context.built" and e.payload["role"] == "reviewer").payload
    assert [b["id"] for b in rev["blocks"] if b["id"].startswith("finding.")] == [
        f"finding.s{i}.f1" for i in range(1, n + 1)
    ]


def test_an_answer_without_calls_completes_the_step_with_its_text_cut_saying_so() -> None:
    from langchain_core.messages import AIMessage

    events, _ = _run([AIMessage(content="done " * 120)])  # 600 chars, stripped: 599
    done = [e.payload for e in events if e.kind == "step.completed"]
    assert [d["summary"] for d in done] == ["done " * 100 + "… (99 chars more)"]
