"""The pure reducer: ``apply_event(ctx, event) -> ctx`` and ``replay(events) -> ctx``.

Pure: it reads nothing but its arguments (no clock, no store) and never mutates ``ctx``; it
returns a new TaskContext that shares unchanged parts. Total: every kind in ``EventKind`` is
either folded by its handler in the table :data:`FOLDS` (``_on_<kind>(ctx, event) -> ctx``) or
listed in :data:`UNFOLDED_KINDS` (only the cursor and the events view move); a test checks that
the two together are exactly ``EventKind``. An event whose ``seq`` is not past
``ctx.events.cursor`` is ignored, so folding the same event twice is a no-op (idempotent
catch-up after a crash).

Source: docs/design.md "events: the log; every other view is derived from it"; the seed idea of
event sourcing (a left fold of the log into state).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from .events import (
    ContextBuilt,
    ErrorOccurred,
    ErrorResolved,
    Event,
    EventKind,
    FactStale,
    MemoryConfirmed,
    MemoryForgotten,
    MemoryLoaded,
    MemoryNoted,
    PermissionEvent,
    PlanCreated,
    RecoveryDecided,
    ReviewCompleted,
    StateEdited,
    StepCompleted,
    StepCompletionRequested,
    StepStarted,
    TaskCompleted,
    TaskCreated,
    ToolCalled,
    ToolResultReceived,
    TranscriptReset,
)
from .freshness import HEAD_PATH, change_text
from .models import (
    COMPLETED_WINDOW,
    ERRORS_WINDOW,
    FINDINGS_WINDOW,
    RECENT_EVENTS_WINDOW,
    STALE_WINDOW,
    ApprovalRequest,
    CurrentStep,
    ErrorRecord,
    Errors,
    EventSummary,
    LastStep,
    PendingCompletion,
    PlanStep,
    ProviderUsage,
    StaleFact,
    TaskContext,
    ToolCallRecord,
    TranscriptCheckpoint,
    TranscriptNote,
    arguments_dict,
)

__all__ = [
    "apply_event",
    "replay",
    "summarize_event",
    "CHECKPOINT_FINDINGS",
    "CHECKPOINT_OMITTED_LINES",
    "FOLDS",
    "UNFOLDED_KINDS",
    "Fold",
]

#: Findings a transcript checkpoint keeps (the most recent ones).
CHECKPOINT_FINDINGS = 5
#: One-line entries for tool calls leaving the transcript that a checkpoint keeps.
CHECKPOINT_OMITTED_LINES = 3


def replay(events: Iterable[Event], ctx: TaskContext | None = None) -> TaskContext:
    """Fold ``events`` (in log order) into ``ctx`` (default: an empty TaskContext)."""
    out = ctx if ctx is not None else TaskContext()
    for e in events:
        out = apply_event(out, e)
    return out


def summarize_event(e: Event) -> str:
    """A one-line, human-readable summary of an event (at most 160 chars)."""
    p = e.payload
    k = e.kind
    if k == "task.created":
        text = p["original_request"].splitlines()[0] if p["original_request"] else ""
    elif k in ("plan.created", "plan.updated"):
        text = f"{len(p['steps'])} steps" + (f": {p['reason']}" if p.get("reason") else "")
    elif k == "step.started":
        text = f"{p['step_id']}: {p['objective']}"
    elif k == "step.completed":
        text = f"{p['step_id']} {p['result']}: {p['summary']}"
    elif k == "step.completion.requested":
        text = f"{p['step_id']} {p['result']} once {', '.join(p['after_calls'])} succeed: {p['summary']}"
    elif k == "tool.called":
        text = f"{p['tool']} {p['arguments']}"
    elif k == "tool.result.received":
        text = f"{p['call_id']} {p['status']} ({p['raw_chars']} chars)"
    elif k.startswith("permission."):
        text = f"{p['tool']}: {p['reason']}"
    elif k == "error.occurred":
        text = f"{p['error_id']}: {p['message']}"
    elif k == "error.resolved":
        text = f"{p['error_id']}: {p['resolution']}"
    elif k == "context.built":
        text = f"{p['role']} call {p['call']}: {p['prompt_tokens']} tokens" + (
            " (transcript restarted)" if p["transcript_reset"] else ""
        )
    elif k == "review.completed":
        text = f"{p['verdict']}: {p['summary']}"
    elif k == "recovery.decided":
        text = f"{p['decision']}: {p['reason']}"
    elif k == "task.completed":
        text = f"{p['status']}: {p['summary']}"
    elif k == "fact.stale":
        text = f"{p['fact_id']}: {change_text(p['path'], p['cause'], p['old_sha'], p['new_sha'])}"
    elif k == "state.edited":
        text = "edited " + ", ".join(sorted(f"{part}.{f}" for part, fs in p["changes"].items() for f in fs))
    elif k == "memory.confirmed":
        text = f"{p['namespace']} {p['kind']}: {p['text']}"
    elif k == "memory.forgotten":
        text = f"{p['namespace']} {p['key']}: {p['text']}" + (f" ({p['reason']})" if p.get("reason") else "")
    elif k == "memory.loaded":
        ms = p["memories"]
        text = f"{len(ms)} {'memory' if len(ms) == 1 else 'memories'} ({p['search']}): " + ", ".join(
            m["key"] + (" stale" if m["stale"] else "") + (" superseded" if m["superseded_by"] else "") for m in ms
        )
    elif k == "resume.started":
        text = (f"{p['node']} runs" if p.get("node") else "resumed") + (
            f", from checkpoint {p['from_checkpoint']}" if p.get("from_checkpoint") else ""
        )
    else:
        text = json.dumps(p, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


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


def _checkpoint_view(ctx: TaskContext, leaving: list[ToolCallRecord], at_seq: int) -> TranscriptCheckpoint:
    omitted_total = ctx.evidence.omitted_calls + len(leaving)
    lines = ctx.plan.lines(detail=False)
    completed = []
    ls = ctx.progress.last_step
    step_summary = f"{ls.id} ({ls.result}): {ls.summary}" if ls is not None else ""
    for r in leaving[-CHECKPOINT_OMITTED_LINES:]:
        args = " ".join(r.arguments.split())
        if len(args) > 80:
            args = args[:77] + "..."
        completed.append(f"{r.id} {r.tool} {args} -> {r.status}, {r.raw_ref or 'no output'}")
    # Findings a later finding supersedes stay in the log, not in the checkpoint.
    replaced = {x for f in ctx.evidence.findings for x in f.supersedes}
    summary = (
        f"{omitted_total} earlier tool calls are out of the transcript; their exact output "
        "stays in the artifact store (fetch a ref with read_artifact)."
    )
    return TranscriptCheckpoint(
        at_seq=at_seq,
        plan_version=ctx.plan.version,
        plan_lines=lines,
        step_summary=step_summary,
        completed_summaries=completed,
        findings=[f for f in ctx.evidence.findings if f.id not in replaced][-CHECKPOINT_FINDINGS:],
        omitted_summary=summary,
    )


def _update_call(ctx: TaskContext, call_id: str, **changes: object) -> list[ToolCallRecord]:
    return [r.model_copy(update=changes) if r.id == call_id else r for r in ctx.evidence.recent_tool_calls]


def _completion_not_applied(ctx: TaskContext, call_id: str, reason: str, *, only_success: bool = False) -> TaskContext:
    """Mark the pending ``complete_step`` not applied when ``call_id`` is one of its calls (for a
    failure of the call: only when it claims success; a failed/blocked step ends either way)."""
    pc = ctx.control.pending_completion
    if pc is None or call_id not in pc.after_calls or pc.not_applied:
        return ctx
    if only_success and pc.result in ("failed", "blocked"):
        return ctx
    return ctx.model_copy(
        update={
            "control": ctx.control.model_copy(
                update={"pending_completion": pc.model_copy(update={"not_applied": reason})}
            )
        }
    )


def _drop_pending_completion(ctx: TaskContext) -> TaskContext:
    if ctx.control.pending_completion is None:
        return ctx
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"pending_completion": None})})


def _on_task_created(ctx: TaskContext, e: Event) -> TaskContext:
    p: TaskCreated = e.typed()
    return ctx.model_copy(
        update={
            "identity": ctx.identity.model_copy(
                update={
                    "task_id": p.task_id,
                    "original_request": p.original_request,
                    "constraints": list(p.constraints),
                    "constraint_sources": dict(p.constraint_sources),
                    "success_criteria": list(p.success_criteria),
                    "non_goals": list(p.non_goals),
                }
            ),
            "permissions": ctx.permissions.model_copy(
                update={
                    "allowed_tools": list(p.allowed_tools),
                    "denied_tools": list(p.denied_tools),
                    "requires_approval": list(p.requires_approval),
                    "file_scopes": list(p.file_scopes),
                }
            ),
            "control": ctx.control.model_copy(update={"status": "running"}),
            "events": ctx.events.model_copy(update={"schema_version": p.schema_version}),
        }
    )


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


def _on_tool_called(ctx: TaskContext, e: Event) -> TaskContext:
    t: ToolCalled = e.typed()
    rec = ToolCallRecord(
        id=t.call_id,
        step_id=t.step_id,
        tool=t.tool,
        arguments=t.arguments,
        status="pending",
        timestamp=e.timestamp,
        thought=t.thought,
    )
    calls = [r for r in ctx.evidence.recent_tool_calls if r.id != t.call_id] + [rec]
    return ctx.model_copy(update={"evidence": ctx.evidence.model_copy(update={"recent_tool_calls": calls})})


def _seen(ctx: TaskContext, files: dict[str, str], head: str | None) -> dict[str, object]:
    """The evidence update for bytes the task has now seen (read or written): the world, and
    stale marks whose new bytes these are no longer need a re-read."""
    if not files and head is None:
        return {}
    marks = [
        s.model_copy(update={"needs_reread": False})
        if s.needs_reread and (files.get(s.path) == s.new_sha or (s.path == HEAD_PATH and head == s.new_sha))
        else s
        for s in ctx.evidence.stale_facts
    ]
    return {
        "world": {**ctx.evidence.world, **files},
        "head": head if head is not None else ctx.evidence.head,
        "stale_facts": marks,
    }


def _on_tool_result_received(ctx: TaskContext, e: Event) -> TaskContext:
    r: ToolResultReceived = e.typed()
    changes: dict[str, object] = dict(
        status=r.status, result_summary=r.result_summary, raw_ref=r.raw_ref, compressed=r.compressed
    )
    if r.reads or r.head is not None:
        changes.update(reads=dict(r.reads), head=r.head)
    calls = _update_call(ctx, r.call_id, **changes)
    out = ctx.model_copy(
        update={
            "evidence": ctx.evidence.model_copy(update={"recent_tool_calls": calls, **_seen(ctx, r.reads, r.head)}),
            "progress": ctx.progress.model_copy(update={"executor_steps": ctx.progress.executor_steps + 1}),
        }
    )
    return (
        out
        if r.status == "ok"
        else _completion_not_applied(out, r.call_id, f"{r.call_id} returned {r.status}", only_success=True)
    )


def _on_permission_requested(ctx: TaskContext, e: Event) -> TaskContext:
    q: PermissionEvent = e.typed()
    req = ApprovalRequest(call_id=q.call_id, tool=q.tool, arguments=q.arguments, risk=q.risk, reason=q.reason)
    return ctx.model_copy(
        update={"control": ctx.control.model_copy(update={"pending_approval": req, "status": "waiting_user"})}
    )


def _approval_answered(ctx: TaskContext, q: PermissionEvent) -> TaskContext:
    """Back to running; the pending approval is cleared when it is the one for ``q.call_id``."""
    update: dict[str, object] = {"status": "running"}
    if ctx.control.pending_approval is not None and ctx.control.pending_approval.call_id == q.call_id:
        update["pending_approval"] = None
    return ctx.model_copy(update={"control": ctx.control.model_copy(update=update)})


def _on_permission_granted(ctx: TaskContext, e: Event) -> TaskContext:
    q: PermissionEvent = e.typed()
    out = _approval_answered(ctx, q)
    if q.arguments != "{}":
        # the arguments that run (an approver may have edited them)
        before = {c.id: c.arguments for c in out.evidence.recent_tool_calls}.get(q.call_id)
        calls = _update_call(out, q.call_id, arguments=q.arguments)
        out = out.model_copy(update={"evidence": out.evidence.model_copy(update={"recent_tool_calls": calls})})
        if before is not None and arguments_dict(before) != arguments_dict(q.arguments):
            out = _completion_not_applied(out, q.call_id, f"the approver edited the arguments of {q.call_id}")
    return out


def _on_permission_denied(ctx: TaskContext, e: Event) -> TaskContext:
    q: PermissionEvent = e.typed()
    out = _approval_answered(ctx, q)
    calls = _update_call(out, q.call_id, status="denied")
    out = out.model_copy(update={"evidence": out.evidence.model_copy(update={"recent_tool_calls": calls})})
    why = " ".join(q.reason.split())[:120]
    return _completion_not_applied(
        out, q.call_id, f"{q.call_id} was not run" + (f" ({why})" if why else ""), only_success=True
    )


def _on_checkpoint_created(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(
        update={
            "control": ctx.control.model_copy(
                update={"checkpoint_id": e.payload["checkpoint_id"], "rollback_available": True}
            )
        }
    )


def _on_file_modified(ctx: TaskContext, e: Event) -> TaskContext:
    path = e.payload["path"]
    sha = e.payload.get("sha256") or ""
    if sha:  # the task wrote these bytes: it knows them
        ctx = ctx.model_copy(update={"evidence": ctx.evidence.model_copy(update=_seen(ctx, {path: sha}, None))})
    if path in ctx.progress.changed_artifacts:
        return ctx
    return ctx.model_copy(
        update={
            "progress": ctx.progress.model_copy(update={"changed_artifacts": [*ctx.progress.changed_artifacts, path]})
        }
    )


def _errors_window(ctx: TaskContext, errors: Errors) -> Errors:
    """``errors`` cut to its window (see :class:`~context.models.Errors`): the last
    ``ERRORS_WINDOW`` resolved errors and those whose call is still in the transcript; every open one."""
    resolved = errors.resolved_errors
    if len(resolved) <= ERRORS_WINDOW:
        return errors
    live = {r.id for r in ctx.evidence.recent_tool_calls}
    cut = len(resolved) - ERRORS_WINDOW
    kept = [r for i, r in enumerate(resolved) if i >= cut or (r.call_id is not None and r.call_id in live)]
    dropped = {r.id for r in resolved} - {r.id for r in kept}
    history = [r for r in errors.error_history if r.id not in dropped]
    return errors.model_copy(update={"resolved_errors": kept, "error_history": history})


def _on_error_occurred(ctx: TaskContext, e: Event) -> TaskContext:
    o: ErrorOccurred = e.typed()
    rec = ErrorRecord(
        id=o.error_id, step_id=o.step_id, source=o.source, message=o.message, call_id=o.call_id, timestamp=e.timestamp
    )
    errors = ctx.errors.model_copy(
        update={
            "last_error": rec,
            "error_history": list(ctx.errors.error_history) + [rec],
            "occurred_count": ctx.errors.occurred_count + 1,
        }
    )
    return ctx.model_copy(update={"errors": _errors_window(ctx, errors)})


def _on_error_resolved(ctx: TaskContext, e: Event) -> TaskContext:
    res: ErrorResolved = e.typed()
    if any(x.id == res.error_id for x in ctx.errors.resolved_errors):
        return ctx
    found = [x for x in ctx.errors.error_history if x.id == res.error_id]
    resolved = list(ctx.errors.resolved_errors)
    count = ctx.errors.resolved_count
    if found:
        resolved.append(found[-1].model_copy(update={"resolution": res.resolution}))
        count += 1
    last = ctx.errors.last_error
    if last is not None and last.id == res.error_id:
        last = None
    errors = ctx.errors.model_copy(update={"resolved_errors": resolved, "last_error": last, "resolved_count": count})
    return ctx.model_copy(update={"errors": _errors_window(ctx, errors)})


def _on_user_interrupted(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": "idle"})})


def _on_resume_started(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": "running"})})


def _on_context_built(ctx: TaskContext, e: Event) -> TaskContext:
    b: ContextBuilt = e.typed()
    if b.transcript_reset:
        calls = ctx.evidence.recent_tool_calls
        keep = calls[max(0, len(calls) - b.keep_last) :] if b.keep_last > 0 else []
        leaving = calls[: len(calls) - len(keep)]
        view = _checkpoint_view(ctx, leaving, e.seq)
        if isinstance(b.transcript_reset, TranscriptReset) and b.transcript_reset.digests:
            view = view.model_copy(update={"digests": min(b.transcript_reset.digests, len(keep))})
        ctx = ctx.model_copy(
            update={
                "evidence": ctx.evidence.model_copy(
                    update={
                        "recent_tool_calls": list(keep),
                        "transcript_notes": [],
                        "omitted_calls": ctx.evidence.omitted_calls + len(leaving),
                        "omitted_summary": view.omitted_summary,
                        "transcript_checkpoint": view,
                    }
                )
            }
        )
    if b.usage:
        u = ctx.progress.usage or ProviderUsage()
        total = ProviderUsage(
            calls=u.calls + 1,
            input_tokens=u.input_tokens + b.usage.get("input_tokens", 0),
            output_tokens=u.output_tokens + b.usage.get("output_tokens", 0),
            cache_read=u.cache_read + b.usage.get("cache_read", 0),
            cache_creation=u.cache_creation + b.usage.get("cache_creation", 0),
            counted=u.counted + b.prompt_tokens,
        )
        ctx = ctx.model_copy(update={"progress": ctx.progress.model_copy(update={"usage": total})})
    if b.delta_note is not None:
        note = TranscriptNote(at=len(ctx.evidence.recent_tool_calls), text=b.delta_note)
        ctx = ctx.model_copy(
            update={
                "evidence": ctx.evidence.model_copy(update={"transcript_notes": [*ctx.evidence.transcript_notes, note]})
            }
        )
    return ctx


def _on_review_completed(ctx: TaskContext, e: Event) -> TaskContext:
    rv: ReviewCompleted = e.typed()
    status = "completed" if rv.verdict == "approve" else "revising"
    return ctx.model_copy(update={"plan": ctx.plan.model_copy(update={"status": status})})


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


def _on_task_completed(ctx: TaskContext, e: Event) -> TaskContext:
    tc: TaskCompleted = e.typed()
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": tc.status})})


def _on_memory_proposed(ctx: TaskContext, e: Event) -> TaskContext:
    m: MemoryNoted = e.typed()
    mem = ctx.memory.model_copy(update={"working_memory": list(ctx.memory.working_memory) + [m.text]})
    return ctx.model_copy(update={"memory": mem})


def _on_state_edited(ctx: TaskContext, e: Event) -> TaskContext:
    """``state.edited``: each changed field of each part set to its new value."""
    p: StateEdited = e.typed()
    update: dict[str, object] = {}
    for part, fields in p.changes.items():
        cur = getattr(ctx, part)
        update[part] = type(cur).model_validate({**cur.model_dump(mode="json"), **fields})
    return ctx.model_copy(update=update)


_MEMORY_FIELDS = {"fact": "durable_facts", "preference": "user_preferences", "convention": "project_conventions"}


def _on_memory_confirmed(ctx: TaskContext, e: Event) -> TaskContext:
    m: MemoryConfirmed = e.typed()
    mem = ctx.memory
    field = _MEMORY_FIELDS[m.kind]
    mem = mem.model_copy(
        update={
            field: list(getattr(mem, field)) + [m.text],
            "working_memory": [w for w in mem.working_memory if w != m.text],
        }
    )
    return ctx.model_copy(update={"memory": mem})


def _on_memory_forgotten(ctx: TaskContext, e: Event) -> TaskContext:
    """``memory.forgotten``: the memory leaves the task's loaded memories and, when the task
    confirmed it itself, its durable lists (by text)."""
    f: MemoryForgotten = e.typed()
    mem = ctx.memory
    update: dict[str, object] = {"loaded": [m for m in mem.loaded if (m.namespace, m.key) != (f.namespace, f.key)]}
    if f.text:
        for field in _MEMORY_FIELDS.values():
            update[field] = [t for t in getattr(mem, field) if t != f.text]
    return ctx.model_copy(update={"memory": mem.model_copy(update=update)})


def _on_memory_loaded(ctx: TaskContext, e: Event) -> TaskContext:
    """``memory.loaded``: the memories the task loaded from the long-term store (replacing any
    earlier load)."""
    p: MemoryLoaded = e.typed()
    return ctx.model_copy(update={"memory": ctx.memory.model_copy(update={"loaded": list(p.memories)})})


def _on_fact_stale(ctx: TaskContext, e: Event) -> TaskContext:
    """``fact.stale``: the mark is kept (the last ``STALE_WINDOW``); it needs no re-read when the
    task already saw the new bytes (its own write, or a read since)."""
    f: FactStale = e.typed()
    known = ctx.evidence.head if f.path == HEAD_PATH else ctx.evidence.world.get(f.path)
    mark = StaleFact(
        fact_id=f.fact_id,
        fact_kind=f.fact_kind,
        path=f.path,
        old_sha=f.old_sha,
        new_sha=f.new_sha,
        cause=f.cause,
        seq=e.seq,
        needs_reread=known != f.new_sha,
    )
    marks = [*ctx.evidence.stale_facts, mark][-STALE_WINDOW:]
    return ctx.model_copy(update={"evidence": ctx.evidence.model_copy(update={"stale_facts": marks})})


#: One event's fold: ``(ctx, event) -> new ctx``, pure (no clock, no store, ``ctx`` not mutated).
Fold = Callable[[TaskContext, Event], TaskContext]

#: The kinds the reducer folds, each with its handler: the list of kinds the reducer knows.
FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "task.created": _on_task_created,
        "plan.created": _on_plan_created,
        "plan.updated": _on_plan_created,
        "step.started": _on_step_started,
        "step.completed": _on_step_completed,
        "step.completion.requested": _on_step_completion_requested,
        "tool.called": _on_tool_called,
        "tool.result.received": _on_tool_result_received,
        "permission.requested": _on_permission_requested,
        "permission.granted": _on_permission_granted,
        "permission.denied": _on_permission_denied,
        "checkpoint.created": _on_checkpoint_created,
        "file.modified": _on_file_modified,
        "error.occurred": _on_error_occurred,
        "error.resolved": _on_error_resolved,
        "user.interrupted": _on_user_interrupted,
        "resume.started": _on_resume_started,
        "context.built": _on_context_built,
        "review.completed": _on_review_completed,
        "recovery.decided": _on_recovery_decided,
        "task.completed": _on_task_completed,
        "memory.proposed": _on_memory_proposed,
        "memory.confirmed": _on_memory_confirmed,
        "memory.forgotten": _on_memory_forgotten,
        "memory.loaded": _on_memory_loaded,
        "state.edited": _on_state_edited,
        "fact.stale": _on_fact_stale,
    }
)

#: Kinds the reducer deliberately does not fold: their events only move the cursor and the
#: events view (``apply_event``). Empty today: every kind changes the TaskContext.
UNFOLDED_KINDS: frozenset[EventKind] = frozenset()


def apply_event(ctx: TaskContext, event: Event) -> TaskContext:
    """Fold one event into ``ctx`` and return the new TaskContext.

    Events with ``seq <= ctx.events.cursor`` are already folded and return ``ctx`` unchanged.
    An event with ``seq == 0`` (not yet appended) is folded at ``cursor + 1``.
    """
    seq = event.seq or ctx.events.cursor + 1
    if seq <= ctx.events.cursor:
        return ctx
    if event.seq == 0:
        event = event.model_copy(update={"seq": seq})
    out = ctx if event.kind in UNFOLDED_KINDS else FOLDS[event.kind](ctx, event)
    recent = list(out.events.recent) + [
        EventSummary(
            seq=seq, kind=event.kind, actor=event.actor, timestamp=event.timestamp, summary=summarize_event(event)
        )
    ]
    counts = dict(out.events.counts)
    counts[event.kind] = counts.get(event.kind, 0) + 1
    view_update: dict[str, object] = {"cursor": seq, "recent": recent[-RECENT_EVENTS_WINDOW:], "counts": counts}
    if event.kind == "context.built":
        role = event.payload["role"]
        counts[f"context.built:{role}"] = counts.get(f"context.built:{role}", 0) + 1
        fps = dict(out.events.prompt_fingerprints)
        fps[role] = list(event.payload.get("fingerprints", []))
        view_update["prompt_fingerprints"] = fps
    elif event.kind == "resume.started":
        view_update["last_resume_token"] = event.payload.get("token", "")
    return out.model_copy(update={"events": out.events.model_copy(update=view_update)})
