"""Folds of the task's own events: created, forked, checkpointed, interrupted, resumed, edited, completed.

They set the identity and permissions a task starts with, and ``control.status``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import Event, EventKind, StateEdited, TaskCompleted, TaskCreated, TaskForked
from .fold import Fold
from .models import TaskContext

__all__ = ["TASK_FOLDS"]


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


def _on_checkpoint_created(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(
        update={
            "control": ctx.control.model_copy(
                update={"checkpoint_id": e.payload["checkpoint_id"], "rollback_available": True}
            )
        }
    )


def _on_user_interrupted(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": "idle"})})


def _on_resume_started(ctx: TaskContext, e: Event) -> TaskContext:
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": "running"})})


def _on_state_edited(ctx: TaskContext, e: Event) -> TaskContext:
    """``state.edited``: each changed field of each part set to its new value."""
    p: StateEdited = e.typed()
    update: dict[str, object] = {}
    for part, fields in p.changes.items():
        cur = getattr(ctx, part)
        update[part] = type(cur).model_validate({**cur.model_dump(mode="json"), **fields})
    return ctx.model_copy(update=update)


def _on_task_forked(ctx: TaskContext, e: Event) -> TaskContext:
    """``task.forked``: the parent's fold becomes the child's (its id, the schema it is recorded with)."""
    p: TaskForked = e.typed()
    return ctx.model_copy(
        update={
            "identity": ctx.identity.model_copy(update={"task_id": p.task_id}),
            "events": ctx.events.model_copy(update={"schema_version": p.schema_version}),
        }
    )


def _on_task_completed(ctx: TaskContext, e: Event) -> TaskContext:
    tc: TaskCompleted = e.typed()
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": tc.status})})


#: The task's own kinds, each with its fold.
TASK_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "task.created": _on_task_created,
        "checkpoint.created": _on_checkpoint_created,
        "user.interrupted": _on_user_interrupted,
        "resume.started": _on_resume_started,
        "state.edited": _on_state_edited,
        "task.completed": _on_task_completed,
        "task.forked": _on_task_forked,
    }
)
