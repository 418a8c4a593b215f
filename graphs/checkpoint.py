"""Checkpointer setup: a serializer that knows the TaskContext's classes."""

from __future__ import annotations

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import context.models as _models

__all__ = ["CHECKPOINT_TYPES", "checkpoint_serde"]

#: ``(module, class)`` of every model a TaskContext checkpoint holds.
CHECKPOINT_TYPES: list[tuple[str, str]] = [
    ("context.models", name) for name in _models.__all__ if isinstance(getattr(_models, name), type)
]


def checkpoint_serde() -> JsonPlusSerializer:
    """A serializer for any LangGraph checkpointer (``InMemorySaver(serde=checkpoint_serde())``)
    that loads TaskContext parts without the "unregistered type" warning; works the same with
    ``LANGGRAPH_STRICT_MSGPACK=true``."""
    return JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)
