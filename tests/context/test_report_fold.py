"""Role reports in the TaskContext: ``role.reported`` and (from schema 3) ``review.completed`` fold
into ``progress.reports``, a window of the last 3 reports per role with at most 20 items each; a
schema-2 task's reviews stay out (its checkpoints were written without them); every report is
read back from the log; a bad report is refused naming the field."""

from __future__ import annotations

import pydantic
import pytest

from context import RoleReport, all_reports, new_event, replay, summarize_event
from context.windows import REPORT_ITEMS_KEPT, REPORTS_PER_ROLE

TS = "2026-01-01T00:00:00.000Z"


def _log(schema: int, *more: tuple[str, dict[str, object], str | None]) -> list:
    base = [
        ("task.created", {"task_id": "t", "original_request": "x", "schema_version": schema}, None),
        ("plan.created", {"steps": [{"id": "s1", "title": "a"}]}, None),
        ("step.started", {"step_id": "s1"}, None),
    ]
    out = []
    for i, (kind, payload, cause) in enumerate([*base, *more], start=1):
        e = new_event(kind, payload, actor="agent", timestamp=TS, causation_id=cause)  # type: ignore[arg-type]
        out.append(e.model_copy(update={"seq": i}))
    return out


def test_a_report_and_a_review_fold_with_their_role_seq_plan_and_step() -> None:
    events = _log(
        3,
        ("role.reported", {"role": "tester", "verdict": "fail", "items": ["a", "b"], "refs": ["c1"]}, "t#3:tester"),
        ("review.completed", {"verdict": "revise", "summary": "no", "issues": ["fix a"]}, "t#4:reviewer"),
        ("review.completed", {"verdict": "approve"}, "t#5:critic"),  # a reviewer node under another name
    )
    ctx = replay(events)
    assert ctx.progress.reports == [
        RoleReport(role="tester", seq=4, verdict="fail", items=["a", "b"], items_total=2, refs=["c1"], plan_version=1),
        RoleReport(
            role="reviewer",
            seq=5,
            kind="review.completed",
            verdict="revise",
            summary="no",
            items=["fix a"],
            items_total=1,
            step_id="s1",
            plan_version=1,
        ),
        RoleReport(role="critic", seq=6, kind="review.completed", verdict="approve", step_id="s1", plan_version=1),
    ]
    assert all_reports(events) == ctx.progress.reports
    assert ctx.plan.status == "completed"  # the review still moves the plan
    assert [summarize_event(e) for e in events[3:4]] == ["tester fail: (2 items)"]


def test_the_window_keeps_the_last_three_of_each_role_and_twenty_items() -> None:
    many = [f"issue {i}" for i in range(25)]
    reports = [("role.reported", {"role": "tester", "verdict": f"v{i}", "items": many}, None) for i in range(5)]
    events = _log(3, ("role.reported", {"role": "lint", "verdict": "ok"}, None), *reports)
    ctx = replay(events)
    assert [(r.role, r.verdict) for r in ctx.progress.reports] == [
        ("lint", "ok"),
        ("tester", "v2"),
        ("tester", "v3"),
        ("tester", "v4"),
    ]
    assert REPORTS_PER_ROLE == 3 and REPORT_ITEMS_KEPT == 20
    last = ctx.progress.reports[-1]
    assert (last.items, last.items_total) == (many[:20], 25)
    assert len(all_reports(events)) == 6  # the log keeps every one
    assert events[-1].payload["items"] == many  # ... whole


def test_a_schema_2_tasks_review_is_no_report() -> None:
    """Schema 2 -> 3: a review recorded before reports folds as before (the checkpoints that task
    wrote hold no report, and must stay the log's fold)."""
    events = _log(2, ("review.completed", {"verdict": "revise", "issues": ["x"]}, "t#3:reviewer"))
    ctx = replay(events)
    assert ctx.progress.reports == [] and ctx.plan.status == "revising"
    assert all_reports(events) == []


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"role": "tester", "verdict": "fail\nnow"}, "verdict"),
        ({"role": "tester", "verdict": "x" * 41}, "verdict"),
        ({"role": "a tester", "verdict": "ok"}, "role"),
        ({"role": "", "verdict": "ok"}, "role"),
        ({"verdict": "ok"}, "role"),
    ],
)
def test_a_bad_report_is_refused_naming_the_field(payload: dict[str, object], field: str) -> None:
    with pytest.raises(pydantic.ValidationError) as got:
        new_event("role.reported", payload, actor="agent")
    assert [e["loc"] for e in got.value.errors()] == [(field,)]
