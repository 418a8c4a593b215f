"""The fold of ``context.built``: a restart of the executor transcript, usage, state notes.

A restart moves the calls that leave the transcript into a :class:`~context.models.TranscriptCheckpoint`
materialised from the state at that event.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import ContextBuilt, Event, EventKind, TranscriptReset
from .fold import Fold
from .models import TaskContext, ToolCallRecord, TranscriptCheckpoint, TranscriptNote
from .usage import ProviderUsage

__all__ = ["CHECKPOINT_FINDINGS", "CHECKPOINT_OMITTED_LINES", "TRANSCRIPT_FOLDS"]


#: Findings a transcript checkpoint keeps (the most recent ones).
CHECKPOINT_FINDINGS = 5

#: One-line entries for tool calls leaving the transcript that a checkpoint keeps.
CHECKPOINT_OMITTED_LINES = 3


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
        total = (ctx.progress.usage or ProviderUsage()).plus(b.usage, counted=b.prompt_tokens)
        ctx = ctx.model_copy(update={"progress": ctx.progress.model_copy(update={"usage": total})})
    if b.delta_note is not None:
        note = TranscriptNote(at=len(ctx.evidence.recent_tool_calls), text=b.delta_note)
        ctx = ctx.model_copy(
            update={
                "evidence": ctx.evidence.model_copy(update={"transcript_notes": [*ctx.evidence.transcript_notes, note]})
            }
        )
    return ctx


#: ``context.built`` with its fold.
TRANSCRIPT_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "context.built": _on_context_built,
    }
)
