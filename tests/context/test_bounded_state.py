"""Bounded state: every list of the TaskContext is a window (errors, plan, completed steps); what
leaves the window stays in the event log, and replay(events) still equals the folded state."""

from __future__ import annotations

import pytest

from context import new_event, replay
from context.models import Plan, PlanStep
from context.windows import COMPLETED_WINDOW, ERRORS_WINDOW, PLAN_DONE_WINDOW


def _task(n_steps: int) -> list:
    steps = [
        {"id": f"s{i}", "title": f"Step {i}", "depends_on": [f"s{i - 1}"] if i > 1 else []}
        for i in range(1, n_steps + 1)
    ]
    return [
        new_event("task.created", {"task_id": "b", "original_request": "Do every step."}, actor="user"),
        new_event("plan.created", {"steps": steps}, actor="agent"),
    ]


def _failed_then_fixed(i: int) -> list:
    """Step ``s<i>``: a call that fails (error err-<i>), then the step completes and resolves it."""
    return [
        new_event("step.started", {"step_id": f"s{i}"}, actor="agent"),
        new_event("tool.called", {"call_id": f"c{i}", "step_id": f"s{i}", "tool": "bash"}, actor="agent"),
        new_event("tool.result.received", {"call_id": f"c{i}", "status": "error"}, actor="tool"),
        new_event(
            "error.occurred",
            {
                "error_id": f"err-{i}",
                "source": "tool:bash",
                "message": f"boom {i}",
                "step_id": f"s{i}",
                "call_id": f"c{i}",
            },
            actor="system",
        ),
        new_event("step.completed", {"step_id": f"s{i}", "summary": f"s{i} done"}, actor="agent"),
        new_event("error.resolved", {"error_id": f"err-{i}", "resolution": f"step s{i} completed"}, actor="system"),
        # the transcript restarts: the failed call leaves recent_tool_calls
        new_event(
            "context.built",
            {"role": "executor", "call": i, "budget": 8000, "prompt_tokens": 1, "transcript_reset": True},
            actor="system",
        ),
    ]


def test_errors_keep_the_open_ones_and_the_last_resolved_ones() -> None:
    ev = _task(300)
    for i in range(1, 121):
        ev += _failed_then_fixed(i)
    ev += [
        new_event("step.started", {"step_id": "s121"}, actor="agent"),
        new_event("error.occurred", {"error_id": "err-121", "source": "step:s121", "step_id": "s121"}, actor="system"),
    ]
    ctx = replay(ev)
    errs = ctx.errors
    assert [e.id for e in errs.resolved_errors] == [f"err-{i}" for i in range(121 - ERRORS_WINDOW, 121)]
    assert [e.id for e in errs.error_history] == [f"err-{i}" for i in range(121 - ERRORS_WINDOW, 122)]
    assert (errs.occurred_count, errs.resolved_count) == (121, 120)
    assert errs.last_error is not None and errs.last_error.id == "err-121"
    assert errs.resolved_errors[-1].resolution == "step s120 completed"
    # a resolved error whose failed call is still in the transcript stays (never recorded twice)
    ev2 = _task(30)
    for i in range(1, 15):
        ev2 += _failed_then_fixed(i)[:-1]  # no transcript restart: every failed call is still there
    ctx2 = replay(ev2)
    assert [e.id for e in ctx2.errors.resolved_errors] == [f"err-{i}" for i in range(1, 15)]
    assert ctx2.unrecorded_tool_errors() == []


def test_done_steps_fold_into_a_digest_and_dependencies_still_hold() -> None:
    ev = _task(300)
    for i in range(1, 298):
        ev += [
            new_event("step.started", {"step_id": f"s{i}"}, actor="agent"),
            new_event("step.completed", {"step_id": f"s{i}", "summary": f"s{i} done"}, actor="agent"),
        ]
    ctx = replay(ev)
    assert ctx.plan.done_digest == [f"s1-s{297 - PLAN_DONE_WINDOW}"]
    assert ctx.plan.done_folded == 297 - PLAN_DONE_WINDOW
    assert [s.id for s in ctx.plan.steps] == [f"s{i}" for i in range(298 - PLAN_DONE_WINDOW, 301)]
    assert ctx.progress.completed_steps == [f"s{i}" for i in range(298 - COMPLETED_WINDOW, 298)]
    assert ctx.progress.completed_count == 297
    assert ctx.progress.completed_text().startswith("297 in all, the last 20: s278, s279")
    nxt = ctx.next_runnable_step()
    assert nxt is not None and nxt.id == "s298"
    assert ctx.plan.lines(detail=False)[:2] == [
        "s1-s297 [done] 297 steps (titles and results in the event log)",
        "s298 [pending] Step 298",
    ]
    # a re-plan that lists folded steps again keeps them done (and folded, once)
    again = replay(
        [
            new_event(
                "plan.updated", {"steps": [{"id": f"s{i}", "title": f"Step {i}"} for i in range(1, 301)]}, actor="agent"
            )
        ],
        ctx,
    )
    assert again.plan.done_digest == ctx.plan.done_digest
    assert again.plan.done_folded == ctx.plan.done_folded
    assert [s.id for s in again.plan.steps if s.status == "done"] == [f"s{i}" for i in range(278, 298)]
    # folding order-independent ids: single ids, a range restarting after a gap
    p = Plan(steps=[PlanStep(id=i, title=i, status="done") for i in ["a", "s1", "s2", "s4", "b"]]).fold_done(window=1)
    assert (p.done_digest, p.done_folded, [s.id for s in p.steps]) == (["a", "s1-s2", "s4"], 4, ["b"])
    assert p.is_folded("s2") and not p.is_folded("s3") and p.is_folded("a") and not p.is_folded("b")


@pytest.mark.slow
def test_a_long_run_with_errors_keeps_a_small_state_and_replay_equals_the_fold() -> None:
    ev = _task(2000)
    for i in range(1, 2001):
        ev += _failed_then_fixed(i)
    step_by_step = None
    for e in ev:
        step_by_step = replay([e], step_by_step)
    assert step_by_step == replay(ev)
    assert len(step_by_step.model_dump_json()) < 64_000
    assert step_by_step.plan.status == "completed"
    assert step_by_step.errors.occurred_count == 2000


def test_a_long_replay_plans_at_most_100_steps(trajectories_dir) -> None:
    from context import load_trajectory
    from graphs.bench.scale import repeat_trajectory
    from nodes import ReplayChatModel

    traj = repeat_trajectory(load_trajectory(trajectories_dir / "openhands-ponyc-4588.jsonl"), 1_205)
    assert traj.id == "openhands-ponyc-4588-x1205" and traj.steps[50].observation == traj.steps[0].observation
    m = ReplayChatModel(trajectory=traj)
    steps = m._answer([], {"role": "planner", "executor_steps": 0}).tool_calls[0]["args"]["steps"]
    assert len(steps) == 93 and steps[0]["title"].startswith("Recorded steps 1-13 (")
    assert steps[-1]["title"].startswith("Recorded steps 1197-1205 (")
    assert ReplayChatModel(trajectory=repeat_trajectory(traj, 1_000)).chunks()[-1] == (991, 1_000)
