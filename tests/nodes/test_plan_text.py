"""Long plans in prompts: runs of done steps collapse into one line (the steps stay in the
state and the log), so a 300-step plan still fits a reviewer or executor prompt."""

from __future__ import annotations

from context import Plan, PlanStep, new_event, replay
from context.windows import PLAN_FULL_STEPS
from nodes import NodeEnv
from nodes.render import ReviewerRenderer
from nodes.render.transcript import delta_text


def _plan(statuses: str) -> Plan:
    st = {"d": "done", "s": "skipped", "r": "running", "p": "pending", "f": "failed"}
    return Plan(steps=[PlanStep(id=f"s{i}", title=f"Step {i}", status=st[c]) for i, c in enumerate(statuses, start=1)])


def test_runs_group_three_or_more_done_steps() -> None:
    groups = _plan("ddddsdddrpp").runs()
    # s1-s4 done, s5 skipped alone, s6-s8 done, then running and pending steps one by one
    assert [(g[0].id, g[-1].id) for g in groups] == [
        ("s1", "s4"),
        ("s5", "s5"),
        ("s6", "s8"),
        ("s9", "s9"),
        ("s10", "s10"),
        ("s11", "s11"),
    ]
    assert [(g[0].id, g[-1].id) for g in _plan("ddrdd").runs()] == [(f"s{i}", f"s{i}") for i in range(1, 6)]
    assert [(g[0].id, g[-1].id) for g in _plan("dddpppp").runs(statuses=("done", "pending"))] == [
        ("s1", "s3"),
        ("s4", "s7"),
    ]


def test_a_short_plan_keeps_every_line_a_long_one_collapses_done_runs() -> None:
    short = _plan("ddr")
    assert short.lines() == ["s1 [done] Step 1", "s2 [done] Step 2", "s3 [running] Step 3"]
    long = _plan("d" * 297 + "rpp")
    assert len(long.steps) > PLAN_FULL_STEPS
    assert long.lines() == [
        "s1-s297 [done] 297 steps (titles and results in the event log)",
        "s298 [running] Step 298",
        "s299 [pending] Step 299",
        "s300 [pending] Step 300",
    ]


def test_a_300_step_plan_fits_the_reviewer_and_the_executor_delta() -> None:
    steps = [{"id": f"s{i}", "title": f"Check item {i} of the inventory"} for i in range(1, 301)]
    ev = [
        new_event("task.created", {"task_id": "lp", "original_request": "Check every item."}, actor="user"),
        new_event("plan.created", {"steps": steps}, actor="agent"),
    ]
    for i in range(1, 298):
        ev += [
            new_event("step.started", {"step_id": f"s{i}"}, actor="agent"),
            new_event("step.completed", {"step_id": f"s{i}", "summary": f"item {i} checked"}, actor="agent"),
        ]
    ev.append(new_event("step.started", {"step_id": "s298"}, actor="agent"))
    ctx = replay(ev)
    assert "Plan: s1-s297 done · s298 running · s299 pending · s300 pending" in delta_text(ctx).splitlines()
    r = ReviewerRenderer().render(ctx, NodeEnv.sqlite(budget=8000), [])
    assert r.prompt_tokens < 1000
    assert (
        "- s1-s297 [done] 297 steps (titles and results in the event log)\n- s298 [running]" in r.messages[-1].content
    )
