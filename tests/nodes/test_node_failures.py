"""A role node whose model call or answer raises a non-provider exception records the failure and
the graph routes on it; it never raises again on every resume. A provider failure is
different: nothing is recorded, and the resume repeats the call once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core import exceptions as lce
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from context import ModelCallError, SqliteStores
from graphs.checkpoint import checkpoint_serde
from graphs.orchestrator import build_orchestrator, new_task
from graphs.runner import run_graph
from nodes import ScriptedChatModel
from nodes.render import PlannerRenderer
from nodes.testing import complete, plan, recover, review, tool_call


def _graph(tmp_path: Path, script: dict[str, list[Any]]) -> tuple[Any, SqliteStores, ScriptedChatModel]:
    stores = SqliteStores(tmp_path / "f.sqlite")
    model = ScriptedChatModel(script=script)
    g = build_orchestrator(model, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    return g, stores, model


def _kinds(stores: SqliteStores, tid: str) -> list[str]:
    return [e.kind for e in stores.events.read(tid) if e.kind != "context.built"]


def test_an_executor_answer_it_cannot_parse_fails_the_step_and_recovery_decides(tmp_path: Path) -> None:
    garbage = tool_call("complete_step", {"summary": "done", "findings": 42})  # findings must be a list
    g, stores, _ = _graph(
        tmp_path,
        {"planner": [plan("look")], "executor": [garbage], "recovery": [recover("stop", "the answer is unusable")]},
    )
    r = run_graph(g, stores, "t1", new_task("Look.", "t1"))
    assert r.state.control.status == "failed"
    assert _kinds(stores, "t1") == [
        "task.created",
        "plan.created",
        "step.started",
        "error.occurred",
        "step.completed",
        "error.occurred",
        "recovery.decided",
        "task.completed",
    ]
    err = stores.events.read("t1", kinds=["error.occurred"])[0].payload
    assert (err["source"], err["step_id"], err["error_id"]) == ("node:executor", "s1", "err-1")
    assert err["message"] == "executor node failed: TypeError: 'int' object is not iterable"
    done = stores.events.read("t1", kinds=["step.completed"])[0]
    assert (done.actor, done.payload["result"], done.payload["summary"]) == ("system", "failed", err["message"])
    # the recovery role saw the failure (its prompt names it) and decided; resuming runs nothing
    n = stores.events.last_seq("t1")
    again = run_graph(g, stores, "t1", None, resume=True)
    assert again.state.control.status == "failed" and stores.events.last_seq("t1") == n


def test_a_retry_after_an_executor_failure_reaches_the_executor_again(tmp_path: Path) -> None:
    """Recovery may retry: the executor runs again (here it answers properly) and the task ends."""
    garbage = tool_call("complete_step", {"summary": "done", "findings": 42})
    g, stores, model = _graph(
        tmp_path,
        {
            "planner": [plan("look")],
            "executor": [garbage, complete("looked")],
            "recovery": [recover("retry", "try again")],
            "reviewer": [review("approve", "ok")],
        },
    )
    r = run_graph(g, stores, "t2", new_task("Look.", "t2"))
    assert r.state.control.status == "completed"
    assert [e.payload["source"] for e in stores.events.read("t2", kinds=["error.occurred"])] == [
        "node:executor",
        "step:s1",
    ]
    assert r.state.errors.error_history[0].message == "executor node failed: TypeError: 'int' object is not iterable"


def test_a_bug_in_a_custom_renderer_ends_the_task_failed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}

    def broken(self: Any, ctx: Any, env: Any, tools: Any) -> Any:
        calls["n"] += 1
        raise KeyError("missing slot 'msg:extra'")

    monkeypatch.setattr(PlannerRenderer, "render", broken)
    g, stores, _ = _graph(tmp_path, {"planner": [plan("look")]})
    r = run_graph(g, stores, "t3", new_task("Look.", "t3"))
    assert r.state.control.status == "failed" and calls["n"] == 1
    assert _kinds(stores, "t3") == ["task.created", "error.occurred", "task.completed"]
    (err,) = r.state.errors.error_history
    assert (err.source, err.message) == ("node:planner", "planner node failed: KeyError: \"missing slot 'msg:extra'\"")
    # every resume: nothing runs again, nothing raises
    for _ in range(3):
        again = run_graph(g, stores, "t3", None, resume=True)
        assert again.state.control.status == "failed"
    assert calls["n"] == 1 and _kinds(stores, "t3") == ["task.created", "error.occurred", "task.completed"]


def test_a_reviewer_answer_it_cannot_parse_ends_the_task_failed(tmp_path: Path) -> None:
    garbage = tool_call("submit_review", {"verdict": "revise", "issues": 7})  # issues must be a list
    g, stores, _ = _graph(
        tmp_path, {"planner": [plan("look")], "executor": [complete("looked")], "reviewer": [garbage]}
    )
    r = run_graph(g, stores, "t4", new_task("Look.", "t4"))
    assert r.state.control.status == "failed"
    last = stores.events.read("t4")[-2:]
    assert [e.kind for e in last] == ["error.occurred", "task.completed"]
    assert last[0].payload["source"] == "node:reviewer"
    assert last[0].payload["message"].startswith("reviewer node failed: TypeError: ")


def test_a_provider_failure_still_records_nothing_and_the_resume_repeats_the_call(tmp_path: Path) -> None:
    tries = {"n": 0}

    def flaky(messages: Any, meta: dict[str, Any]) -> AIMessage:
        tries["n"] += 1
        if tries["n"] == 1:
            raise lce.ModelRateLimitError("rate limited")
        return plan("look")

    g, stores, _ = _graph(
        tmp_path,
        {"planner": [flaky, flaky], "executor": [complete("looked")], "reviewer": [review("approve", "ok")]},
    )
    with pytest.raises(ModelCallError, match="rate limited"):
        run_graph(g, stores, "t5", new_task("Look.", "t5"))
    assert stores.events.read("t5") == []
    r = run_graph(g, stores, "t5", None, resume=True)
    assert r.state.control.status == "completed" and tries["n"] == 2
    assert not stores.events.read("t5", kinds=["error.occurred"])
