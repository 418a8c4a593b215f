"""Report blocks within the budget: one ``report.<role>.<seq>`` block per report a renderer takes,
the newest of each role ``high`` and older ones ``normal`` (dropped first when the budget is
tight); what each built-in renderer takes; a model-driven role without ``submit_report``."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from context import TaskContext, new_event, replay
from graphs import new_task
from nodes import ExecutorRenderer, NodeEnv, PlannerRenderer, RecoveryRenderer, ReviewerRenderer, make_role_node
from nodes.schemas import COMPLETE_STEP, DECIDE_RECOVERY, SUBMIT_PLAN, SUBMIT_REVIEW
from nodes.testing import ScriptedChatModel

TS = "2026-01-01T00:00:00.000Z"


def _ctx(*reports: dict[str, Any]) -> TaskContext:
    ev = [
        new_event("task.created", {"task_id": "rb", "original_request": "x", "schema_version": 3}, actor="user"),
        new_event("plan.created", {"steps": [{"id": "s1", "title": "a"}]}, actor="agent"),
        new_event("step.started", {"step_id": "s1"}, actor="agent"),
        *(new_event("role.reported", r, actor="agent", timestamp=TS) for r in reports),
    ]
    return replay(ev)


def _report_entries(r: Any) -> list[tuple[str, str, bool, str]]:
    return [(e.id, e.priority, e.included, e.reason) for e in r.manifest.entries if e.id.startswith("report.")]


def test_the_newest_report_of_a_role_outranks_its_older_ones_when_the_budget_is_tight() -> None:
    long = ["a failing check with a long description " * 3] * 5
    ctx = _ctx(*({"role": "tester", "verdict": f"fail {i}", "items": long} for i in range(3)))
    env = NodeEnv.sqlite()
    roomy = PlannerRenderer().render(ctx, env, [SUBMIT_PLAN])
    assert [x[:3] for x in _report_entries(roomy)] == [
        ("report.tester.4", "normal", True),
        ("report.tester.5", "normal", True),
        ("report.tester.6", "high", True),
    ]
    sizes = {e.id: e.tokens for e in roomy.manifest.entries}
    # a budget one report short: the older normal one goes first, the newest stays
    tight = NodeEnv.sqlite(budget=roomy.prompt_tokens + env.reserve_for_output - sizes["report.tester.4"] + 5)
    r = PlannerRenderer().render(ctx, tight, [SUBMIT_PLAN])
    got = {i: inc for i, _, inc, _ in _report_entries(r)}
    assert got == {"report.tester.4": False, "report.tester.5": True, "report.tester.6": True}
    assert r.prompt_tokens <= tight.budget - tight.reserve_for_output


def test_what_each_built_in_renderer_takes() -> None:
    ctx = _ctx({"role": "tester", "verdict": "fail"}, {"role": "reviewer", "verdict": "revise"})
    env = NodeEnv.sqlite()
    takes = {
        "planner": _report_entries(PlannerRenderer().render(ctx, env, [SUBMIT_PLAN])),
        "reviewer": _report_entries(ReviewerRenderer().render(ctx, env, [SUBMIT_REVIEW])),
        "executor": _report_entries(ExecutorRenderer().render(ctx, env, [COMPLETE_STEP])),
        "recovery": _report_entries(RecoveryRenderer().render(ctx, env, [DECIDE_RECOVERY])),
    }
    assert {k: [x[0] for x in v] for k, v in takes.items()} == {
        "planner": ["report.tester.4", "report.reviewer.5"],
        "reviewer": ["report.tester.4"],  # every other role's
        "executor": [],
        "recovery": [],
    }
    named = ExecutorRenderer(reports=["tester"]).render(ctx, env, [COMPLETE_STEP])
    assert [x[0] for x in _report_entries(named)] == ["report.tester.4"]
    assert named.messages[-1].content.startswith("## Report of tester (role.reported #4, plan v1), the role's claim:")
    own = ReviewerRenderer(reports=["reviewer"]).render(ctx, env, [SUBMIT_REVIEW])  # named, its own are taken
    assert [x[0] for x in _report_entries(own)] == ["report.reviewer.5"]
    off = NodeEnv.sqlite(reports=False)
    assert _report_entries(PlannerRenderer().render(ctx, off, [SUBMIT_PLAN])) == []


def test_a_role_that_answers_without_submit_report_reports_verdict_none() -> None:
    class Bare:
        role = "lint"

        def render(self, ctx: TaskContext, env: NodeEnv, tools: Any) -> Any:
            return PlannerRenderer().render(ctx, env, tools)

    env = NodeEnv.sqlite()
    model = ScriptedChatModel(script={"lint": [AIMessage(content="looks fine to me")]})
    node = make_role_node("lint", model, env, Bare())
    update = node(new_task("Lint it.", "rb"), {})
    (r,) = update["progress"].reports
    assert (r.role, r.verdict, r.summary, r.items, r.seq) == ("lint", "none", "looks fine to me", [], 3)
    assert [e.kind for e in env.events.read("rb")] == ["task.created", "context.built", "role.reported"]
