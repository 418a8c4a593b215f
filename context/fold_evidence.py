"""Folds of the evidence: tool calls and their results, approvals, files changed, stale facts.

They move ``evidence`` (the transcript's calls, the world the task has seen, the stale marks)
and the pending approval or completion a call answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import Event, EventKind, FactStale, PermissionEvent, ToolCalled, ToolResultReceived
from .fold import Fold
from .freshness import HEAD_PATH
from .models import ApprovalRequest, StaleFact, TaskContext, ToolCallRecord, arguments_dict
from .windows import STALE_WINDOW

__all__ = ["EVIDENCE_FOLDS"]


def _update_call(ctx: TaskContext, call_id: str, **changes: object) -> list[ToolCallRecord]:
    return [r.model_copy(update=changes) if r.id == call_id else r for r in ctx.evidence.recent_tool_calls]


def _completion_not_applied(ctx: TaskContext, call_id: str, reason: str, *, only_success: bool = False) -> TaskContext:
    """Mark the pending ``complete_step`` not applied when ``call_id`` is one of its calls.

    With ``only_success`` (a failure of the call) only when it claims success: a failed or
    blocked step ends either way.
    """
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


def _seen(ctx: TaskContext, files: dict[str, str], head: str | None) -> dict[str, object]:
    """The evidence update for bytes the task has now seen (read or written).

    The world takes them, and stale marks whose new bytes these are no longer need a re-read.
    """
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


def _on_fact_stale(ctx: TaskContext, e: Event) -> TaskContext:
    """``fact.stale``: the mark is kept (the last ``STALE_WINDOW``).

    It needs no re-read when the task already saw the new bytes (its own write, or a read since).
    """
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


#: The evidence's kinds, each with its fold.
EVIDENCE_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "tool.called": _on_tool_called,
        "tool.result.received": _on_tool_result_received,
        "permission.requested": _on_permission_requested,
        "permission.granted": _on_permission_granted,
        "permission.denied": _on_permission_denied,
        "file.modified": _on_file_modified,
        "fact.stale": _on_fact_stale,
    }
)
