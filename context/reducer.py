"""The pure reducer: ``apply_event(ctx, event) -> ctx`` and ``replay(events) -> ctx``.

Pure: it reads nothing but its arguments and never mutates ``ctx``. Total: every kind in
``EventKind`` is folded by its handler in :data:`FOLDS` (the ``context.fold_*`` modules, one per
part of the state) or listed in :data:`UNFOLDED_KINDS`. Idempotent: an event whose ``seq`` is not
past ``ctx.events.cursor`` is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from .event_summary import summarize_event
from .events import Event, EventKind
from .fold import Fold
from .fold_errors import ERROR_FOLDS
from .fold_evidence import EVIDENCE_FOLDS
from .fold_memory import MEMORY_FOLDS
from .fold_plan import PLAN_FOLDS
from .fold_task import TASK_FOLDS
from .fold_transcript import TRANSCRIPT_FOLDS
from .models import EventSummary, TaskContext
from .windows import RECENT_EVENTS_WINDOW

__all__ = ["FOLDS", "UNFOLDED_KINDS", "Fold", "apply_event", "replay"]


#: The kinds the reducer folds, each with its handler: the list of kinds the reducer knows.
FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {**TASK_FOLDS, **PLAN_FOLDS, **EVIDENCE_FOLDS, **TRANSCRIPT_FOLDS, **ERROR_FOLDS, **MEMORY_FOLDS}
)

#: Kinds the reducer deliberately does not fold: their events only move the cursor and the
#: events view (``apply_event``). Empty today: every kind changes the TaskContext.
UNFOLDED_KINDS: frozenset[EventKind] = frozenset()


def replay(events: Iterable[Event], ctx: TaskContext | None = None) -> TaskContext:
    """Fold events, in log order, into a TaskContext.

    Args:
        events: The events, in seq order.
        ctx: The context to fold into (default: an empty TaskContext).

    Returns:
        The folded context.
    """
    out = ctx if ctx is not None else TaskContext()
    for e in events:
        out = apply_event(out, e)
    return out


def apply_event(ctx: TaskContext, event: Event) -> TaskContext:
    """Fold one event into a TaskContext.

    Args:
        ctx: The context before the event (not mutated).
        event: The event. One with ``seq <= ctx.events.cursor`` is already folded; one with
            ``seq == 0`` (not yet appended) is folded at ``cursor + 1``.

    Returns:
        The new TaskContext (``ctx`` itself for an event already folded).
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
