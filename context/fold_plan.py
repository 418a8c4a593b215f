"""Folds of the plan's events: a plan made or revised, steps started and completed, reviews, reports, recovery.

They move ``plan``, ``current_step``, ``progress`` (its role reports too) and the findings a step
completes with.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import (
    Event,
    EventKind,
    PlanCreated,
    RecoveryDecided,
    ReviewCompleted,
    StepCompleted,
    StepCompletionRequested,
    StepStarted,
)
from .fold import Fold
from .history import report_of
from .models import CurrentStep, LastStep, PendingCompletion, PlanStep, TaskContext
from .reports import keep_report
from .windows import COMPLETED_WINDOW, FINDINGS_WINDOW

__all__ = ["PLAN_FOLDS"]


def _fold_plan(ctx: TaskContext, p: PlanCreated) -> TaskContext:
    done = set(ctx.progress.completed_steps)
    steps = [
        s.model_copy(update={"status": "done"}) if s.id in done or ctx.plan.is_folded(s.id) else s for s in p.steps
    ]
    ident = ctx.identity
    new_criteria = [c for c in p.success_criteria if c not in ident.success_criteria]
    criteria = list(ident.success_criteria) + new_criteria
    non_goals = list(ident.non_goals) + [c for c in p.non_goals if c not in ident.non_goals]
    added = [c for c in dict.fromkeys(p.constraints) if c.strip() and c not in ident.constraints]
    update: dict[str, object] = {
        "interpreted_goal": p.interpreted_goal or ident.interpreted_goal,
        "success_criteria": criteria,
        "non_goals": non_goals,
    }
    if new_criteria:
        update["criteria_sources"] = {**ident.criteria_sources, **dict.fromkeys(new_criteria, "planner")}
    if added:
        update["constraints"] = [*ident.constraints, *added]
        update["constraint_sources"] = {**ident.constraint_sources, **dict.fromkeys(added, "planner")}
    return ctx.model_copy(
        update={
            "identity": ident.model_copy(update=update),
            "plan": ctx.plan.model_copy(
                update={
                    "version": ctx.plan.version + 1,
                    "status": "approved",
                    "steps": steps,
                    "current_step_id": None,
                }
            ).fold_done(),
            "current_step": None,
        }
    )


def _set_step_status(steps: list[PlanStep], step_id: str, status: str) -> list[PlanStep]:
    return [s.model_copy(update={"status": status}) if s.id == step_id else s for s in steps]


def _drop_pending_completion(ctx: TaskContext) -> TaskContext:
    if ctx.control.pending_completion is None:
        return ctx
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"pending_completion": None})})


def _on_plan_created(ctx: TaskContext, e: Event) -> TaskContext:
    """``plan.created`` and ``plan.updated``: a new plan version replaces the plan."""
    return _drop_pending_completion(_fold_plan(ctx, e.typed()))


def _on_step_completion_requested(ctx: TaskContext, e: Event) -> TaskContext:
    q: StepCompletionRequested = e.typed()
    pc = PendingCompletion(
        step_id=q.step_id,
        after_calls=list(q.after_calls),
        result=q.result,
        summary=q.summary,
        findings=list(q.findings),
        unresolved_issues=list(q.unresolved_issues),
    )
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"pending_completion": pc})})


def _on_step_started(ctx: TaskContext, e: Event) -> TaskContext:
    s: StepStarted = e.typed()
    return ctx.model_copy(
        update={
            "plan": ctx.plan.model_copy(
                update={
                    "status": "executing",
                    "current_step_id": s.step_id,
                    "steps": _set_step_status(ctx.plan.steps, s.step_id, "running"),
                }
            ),
            "current_step": CurrentStep(
                objective=s.objective,
                expected_output=s.expected_output,
                input_context=list(s.input_context),
                allowed_tools=list(s.allowed_tools),
                constraints=list(s.constraints),
                risk_level=s.risk_level,
            ),
            "control": ctx.control.model_copy(update={"status": "running", "pending_completion": None}),
        }
    )


def _on_step_completed(ctx: TaskContext, e: Event) -> TaskContext:
    c: StepCompleted = e.typed()
    status = {"success": "done", "partial": "done", "failed": "failed", "blocked": "blocked"}[c.result]
    steps = _set_step_status(ctx.plan.steps, c.step_id, status)
    completed = list(ctx.progress.completed_steps)
    count = ctx.progress.completed_count
    if status == "done" and c.step_id not in completed:
        completed.append(c.step_id)
        count += 1
    all_done = bool(steps) and all(s.status in ("done", "skipped") for s in steps)
    return ctx.model_copy(
        update={
            "plan": ctx.plan.model_copy(
                update={
                    "steps": steps,
                    "current_step_id": None,
                    "status": "completed" if all_done else ctx.plan.status,
                }
            ).fold_done(),
            "current_step": None,
            "progress": ctx.progress.model_copy(
                update={
                    "completed_steps": completed[-COMPLETED_WINDOW:],
                    "completed_count": count,
                    "last_step": LastStep(
                        id=c.step_id,
                        result=c.result,
                        summary=c.summary,
                        findings=[f.statement for f in c.findings],
                        changed_artifacts=list(c.changed_artifacts),
                        unresolved_issues=list(c.unresolved_issues),
                        rests_on=dict(c.rests_on),
                        head=c.head,
                    ),
                }
            ),
            "evidence": ctx.evidence.model_copy(
                update={"findings": (list(ctx.evidence.findings) + list(c.findings))[-FINDINGS_WINDOW:]}
            ),
            "control": ctx.control.model_copy(update={"pending_completion": None}),
        }
    )


def _with_report(ctx: TaskContext, e: Event) -> TaskContext:
    """``ctx`` with the report ``e`` records (if any) in ``progress.reports``."""
    report = report_of(
        e, plan_version=ctx.plan.version, step_id=ctx.plan.current_step_id, schema_version=ctx.events.schema_version
    )
    if report is None:
        return ctx
    reports = keep_report(list(ctx.progress.reports), report)
    return ctx.model_copy(update={"progress": ctx.progress.model_copy(update={"reports": reports})})


def _on_review_completed(ctx: TaskContext, e: Event) -> TaskContext:
    rv: ReviewCompleted = e.typed()
    status = "completed" if rv.verdict == "approve" else "revising"
    ctx = _with_report(ctx, e)  # the reviewer's report, from schema 3 on
    return ctx.model_copy(update={"plan": ctx.plan.model_copy(update={"status": status})})


def _on_role_reported(ctx: TaskContext, e: Event) -> TaskContext:
    return _with_report(ctx, e)


def _on_recovery_decided(ctx: TaskContext, e: Event) -> TaskContext:
    d: RecoveryDecided = e.typed()
    if d.decision == "stop":
        return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": "failed"})})
    if d.decision == "replan":
        return ctx.model_copy(update={"plan": ctx.plan.model_copy(update={"status": "revising"})})
    # retry: a step that ended failed or blocked runs again
    steps = [
        s.model_copy(update={"status": "pending"}) if s.status in ("failed", "blocked") else s for s in ctx.plan.steps
    ]
    return (
        ctx
        if steps == ctx.plan.steps
        else ctx.model_copy(update={"plan": ctx.plan.model_copy(update={"steps": steps})})
    )


#: The plan's kinds, each with its fold.
PLAN_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "plan.created": _on_plan_created,
        "plan.updated": _on_plan_created,
        "step.started": _on_step_started,
        "step.completed": _on_step_completed,
        "step.completion.requested": _on_step_completion_requested,
        "review.completed": _on_review_completed,
        "role.reported": _on_role_reported,
        "recovery.decided": _on_recovery_decided,
    }
)
