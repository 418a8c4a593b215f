"""Folds of memory: noted, confirmed, forgotten and loaded memories (``memory``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .events import Event, EventKind, MemoryConfirmed, MemoryForgotten, MemoryLoaded, MemoryNoted
from .fold import Fold
from .models import TaskContext

__all__ = ["MEMORY_FOLDS"]


def _on_memory_proposed(ctx: TaskContext, e: Event) -> TaskContext:
    m: MemoryNoted = e.typed()
    mem = ctx.memory.model_copy(update={"working_memory": list(ctx.memory.working_memory) + [m.text]})
    return ctx.model_copy(update={"memory": mem})


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
    """``memory.forgotten``: the memory leaves the loaded memories and the durable lists.

    It leaves the durable lists (by text) when the task confirmed it itself.
    """
    f: MemoryForgotten = e.typed()
    mem = ctx.memory
    update: dict[str, object] = {"loaded": [m for m in mem.loaded if (m.namespace, m.key) != (f.namespace, f.key)]}
    if f.text:
        for field in _MEMORY_FIELDS.values():
            update[field] = [t for t in getattr(mem, field) if t != f.text]
    return ctx.model_copy(update={"memory": mem.model_copy(update=update)})


def _on_memory_loaded(ctx: TaskContext, e: Event) -> TaskContext:
    """``memory.loaded``: the memories loaded from the long-term store replace any earlier load."""
    p: MemoryLoaded = e.typed()
    return ctx.model_copy(update={"memory": ctx.memory.model_copy(update={"loaded": list(p.memories)})})


#: The memory kinds, each with its fold.
MEMORY_FOLDS: Mapping[EventKind, Fold] = MappingProxyType(
    {
        "memory.proposed": _on_memory_proposed,
        "memory.confirmed": _on_memory_confirmed,
        "memory.forgotten": _on_memory_forgotten,
        "memory.loaded": _on_memory_loaded,
    }
)
