"""``checkpoint_serde()`` round-trips every class a TaskContext checkpoint holds, with no warning;
``adopt_checkpoint_serde`` gives a checkpointer made elsewhere (LangGraph Server's) that serializer."""

from __future__ import annotations

import importlib
import logging
import typing
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from context import TaskContext
from graphs.checkpoint import (
    CHECKPOINT_TYPES,
    CheckpointSerializer,
    adopt_checkpoint_serde,
    checkpoint_serde,
    checkpoint_types,
)


def _sample(tp: Any) -> Any:
    """A value of type ``tp`` with every field filled (one item per list and dict), so nested models
    are in it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Annotated:
        return _sample(args[0])
    if origin in (list, tuple, set, frozenset):
        return [_sample(args[0])] if args else []
    if origin is dict:
        return {_sample(args[0]): _sample(args[1])} if args else {}
    if args:  # X | None, Union[...]: the first that is not None
        return _sample(next(a for a in args if a is not type(None)))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_validate({name: _sample(f.annotation) for name, f in tp.model_fields.items()})
    return {str: "s", int: 1, float: 1.5, bool: True}.get(tp, None)


def _classes() -> list[type[BaseModel]]:
    return [getattr(importlib.import_module(m), n) for m, n in CHECKPOINT_TYPES]


@pytest.fixture
def serde_events() -> Any:
    seen: list[dict[str, Any]] = []
    remove = register_serde_event_listener(seen.append)
    yield seen
    remove()


def test_checkpoint_types_are_every_model_the_task_context_holds() -> None:
    assert CHECKPOINT_TYPES == checkpoint_types(TaskContext)
    names = {n for _, n in CHECKPOINT_TYPES}
    assert {"TaskContext", "Identity", "Errors", "ErrorRecord", "LoadedMemory", "FileStamp", "ProviderUsage"} <= names
    assert ("context.usage", "ProviderUsage") in CHECKPOINT_TYPES
    assert ("context.memory", "StaleFile") in CHECKPOINT_TYPES


def test_every_checkpointed_class_round_trips_with_no_warning(
    caplog: pytest.LogCaptureFixture, serde_events: list[dict[str, Any]]
) -> None:
    serde = checkpoint_serde()
    full = _sample(TaskContext)
    with caplog.at_level(logging.DEBUG, logger="langgraph"):
        for cls in _classes():
            value = _sample(cls)
            back = serde.loads_typed(serde.dumps_typed(value))
            assert type(back) is cls and back == value
        back = serde.loads_typed(serde.dumps_typed(full))
        parts = {p: serde.loads_typed(serde.dumps_typed(getattr(full, p))) for p in TaskContext.model_fields}
    assert type(back) is TaskContext and back == full
    assert parts == dict(full)  # one channel per part, as LangGraph checkpoints them
    assert back.memory.loaded and type(back.memory.loaded[0]).__name__ == "LoadedMemory"  # a nested one, rebuilt
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert serde_events == []


class NotCheckpointed(BaseModel):
    """A model no TaskContext holds."""

    x: int = 1


def test_a_class_the_task_context_does_not_hold_is_not_rebuilt_and_is_reported(
    serde_events: list[dict[str, Any]],
) -> None:
    serde = checkpoint_serde()
    back = serde.loads_typed(serde.dumps_typed(NotCheckpointed(x=3)))
    assert back == {"x": 3}  # its data, not the class
    assert serde_events == [{"kind": "msgpack_blocked", "module": __name__, "name": "NotCheckpointed"}]
    # LangGraph's default serializer (without LANGGRAPH_STRICT_MSGPACK) reports each TaskContext part,
    # checkpointed one channel per part as LangGraph stores them
    serde_events.clear()
    lax = JsonPlusSerializer(allowed_msgpack_modules=True)
    full = _sample(TaskContext)
    for part in TaskContext.model_fields:
        lax.loads_typed(lax.dumps_typed(getattr(full, part)))
    reported = {(e["kind"], e["module"], e["name"]) for e in serde_events}
    assert ("msgpack_unregistered_allowed", "context.models", "Errors") in reported
    assert ("msgpack_unregistered_allowed", "context.models", "Identity") in reported


def test_adopt_gives_a_server_checkpointer_the_serializer_once() -> None:
    saver = InMemorySaver(serde=JsonPlusSerializer(pickle_fallback=True, allowed_msgpack_modules=True))
    assert adopt_checkpoint_serde(saver) is True
    assert isinstance(saver.serde, CheckpointSerializer) and saver.serde.pickle_fallback is True
    first = saver.serde
    assert adopt_checkpoint_serde(saver) is False and saver.serde is first
    assert adopt_checkpoint_serde(None) is False
    other = InMemorySaver()
    other.serde = object()  # type: ignore[assignment]  # a custom serializer: left as it is
    assert adopt_checkpoint_serde(other) is False
