"""Folds of the errors: an error occurred, an error resolved, kept as a bounded window."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import ErrorOccurred, ErrorResolved, Event, EventKind
from .fold import Fold
from .models import ErrorRecord, Errors, TaskContext
from .windows import ERRORS_WINDOW

__all__ = ["ERROR_FOLDS"]


def _errors_window(ctx: TaskContext, errors: Errors) -> Errors:
    """``errors`` cut to its window (see :class:`~context.models.Errors`).

    It keeps every open error, the last ``ERRORS_WINDOW`` resolved ones and those whose call is
    still in the transcript.
    """
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


#: The error kinds, each with its fold.
ERROR_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "error.occurred": _on_error_occurred,
        "error.resolved": _on_error_resolved,
    }
)
