"""Routers: exact next node for each state they can meet."""

from __future__ import annotations

from langgraph.graph import END

from context import (
    Control,
    ErrorRecord,
    Errors,
    Evidence,
    LastStep,
    Plan,
    PlanStep,
    Progress,
    TaskContext,
    ToolCallRecord,
)
from graphs import routing


def ctx(**kw) -> TaskContext:
    return TaskContext(**kw)


STEPS = [PlanStep(id="s1", title="a", status="done"), PlanStep(id="s2", title="b", depends_on=["s1"])]


def test_after_planner() -> None:
    assert routing.after_planner(ctx(plan=Plan(steps=STEPS))) == "executor"
    assert routing.after_planner(ctx()) == END
    assert routing.after_planner(ctx(plan=Plan(steps=STEPS), control=Control(status="failed"))) == END


def test_after_executor() -> None:
    pending = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="pending")])
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), evidence=pending)) == "tools"
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS))) == "executor"  # s2 is runnable
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS, current_step_id="s2"))) == "executor"
    done = [s.model_copy(update={"status": "done"}) for s in STEPS]
    assert routing.after_executor(ctx(plan=Plan(steps=done))) == "reviewer"
    blocked = [STEPS[0].model_copy(update={"status": "failed"}), STEPS[1]]
    # a failed step goes to recovery first; once recovery has decided (step no longer failed), on
    failed_last = Progress(last_step=LastStep(id="s1", result="failed", summary="no"))
    assert routing.after_executor(ctx(plan=Plan(steps=blocked), progress=failed_last)) == "recovery"
    assert routing.after_executor(ctx(plan=Plan(steps=blocked))) == "reviewer"
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), control=Control(status="completed"))) == END
    # a dict (as get_state returns) routes the same
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), evidence=pending).model_dump()) == "tools"


def test_after_tools() -> None:
    err = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="error")])
    assert routing.after_tools(ctx(evidence=err)) == "recovery"
    handled = Errors(error_history=[ErrorRecord(id="err-1", call_id="c1")])
    assert routing.after_tools(ctx(evidence=err, errors=handled)) == "executor"
    ok = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="ok")])
    assert routing.after_tools(ctx(evidence=ok)) == "executor"


def test_after_recovery_and_reviewer() -> None:
    assert routing.after_recovery(ctx(plan=Plan(steps=STEPS, status="revising"))) == "planner"
    assert routing.after_recovery(ctx(plan=Plan(steps=STEPS, status="executing"))) == "executor"
    assert routing.after_recovery(ctx(control=Control(status="failed"))) == END
    assert routing.after_reviewer(ctx(plan=Plan(steps=STEPS, status="revising"))) == "planner"
    assert routing.after_reviewer(ctx(control=Control(status="completed"))) == END


def test_failed_step_goes_to_recovery_and_retry_runs_it_again(tmp_path) -> None:
    """A step the model ends as failed is recorded by recovery and, on retry, runs again; a
    reviewer that answers without a verdict does not approve."""
    from langchain_core.messages import AIMessage

    from context import replay
    from graphs import build_orchestrator, new_task, open_project
    from graphs.runner import run_graph
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, recover, review

    model = ScriptedChatModel(
        script={
            "planner": [plan("a"), plan(reason="s1 is done; nothing left")],
            "executor": [complete("could not do it", result="failed"), complete("done now")],
            "recovery": [recover("retry", "try again")],
            "reviewer": [AIMessage(content="Looks fine to me."), review("approve", "ok")],
        }
    )
    project = open_project(str(tmp_path / "t.sqlite"))
    g = build_orchestrator(model, checkpointer=project.checkpointer, stores=project.stores)
    r = run_graph(g, project.stores, "fs", new_task("do a", "fs"))
    kinds = [e.kind for e in project.stores.events.read("fs")]
    assert [
        k
        for k in kinds
        if k
        in (
            "step.completed",
            "error.occurred",
            "recovery.decided",
            "review.completed",
            "task.completed",
            "plan.updated",
        )
    ] == [
        "step.completed",
        "error.occurred",
        "recovery.decided",
        "step.completed",
        "review.completed",
        "plan.updated",
        "review.completed",
        "task.completed",
    ]
    ctx = replay(project.stores.events.read("fs"))
    assert ctx.errors.error_history[0].source == "step:s1"
    assert ctx.errors.error_history[0].message == "step s1 ended failed: could not do it"
    assert [s.status for s in ctx.plan.steps] == ["done"] and r.state.control.status == "completed"
