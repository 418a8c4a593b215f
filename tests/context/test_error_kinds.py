"""Every error taskctx raises is a RuntimeError (bad input a ValueError too): LangGraph Server
shows those kinds' messages to its client and hides any other's; LangGraph's default
RetryPolicy does not retry them."""

from __future__ import annotations

import inspect

import pytest

import context
from context import DamagedStoreError, InvalidInputError, LeaseHeldError, TaskctxError

ERRORS = [c for c in vars(context).values() if inspect.isclass(c) and issubclass(c, TaskctxError)]


def test_every_error_is_a_runtime_error_and_bad_input_a_value_error() -> None:
    assert len(ERRORS) >= 15
    assert all(issubclass(c, RuntimeError) for c in ERRORS)
    assert {c.__name__ for c in ERRORS if issubclass(c, ValueError)} == {
        c.__name__ for c in ERRORS if issubclass(c, InvalidInputError)
    }


@pytest.mark.parametrize(
    "exc",
    [
        InvalidInputError("fork_task_id '../x' is not a valid task id"),
        DamagedStoreError("task 't1' is damaged: event log: event seq 7 is missing", ["event seq 7 is missing"]),
        LeaseHeldError("t1", "pid 41 on host h (last heartbeat 3 s ago)", pid=41, host="h"),
    ],
)
def test_langgraph_server_passes_the_message_on(exc: Exception) -> None:
    serde = pytest.importorskip("langgraph_api.serde", reason="langgraph-api (langgraph dev) is not installed")
    assert serde.default(exc) == {"error": type(exc).__name__, "message": str(exc)}
    assert serde.default(Exception("x")) == {"error": "Exception", "message": "An internal error occurred"}


def test_the_default_retry_policy_does_not_retry_them() -> None:
    from langgraph.types import default_retry_on

    assert default_retry_on(InvalidInputError("x")) is False
    assert default_retry_on(LeaseHeldError("t1", "pid 41", pid=41)) is False
