"""A node run's attempt key (every event's ``causation_id``) and the error of a log ahead of its checkpoint.

Every event a node run appends carries its attempt key: the task, the cursor of the checkpoint
the node ran on, and the node's name. Events past a checkpoint's cursor that another attempt
appended mean one of two things: a node appended events without returning them as its state
update (its key names this checkpoint's cursor), or the graph was started from an older
checkpoint than the log (time travel, a fork). :func:`log_ahead_error` names which.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from context import Event, LogAheadError

__all__ = ["NODE_RUNS", "attempt_key", "attempt_of", "log_ahead_error"]

#: The :class:`~nodes.runtime.NodeRun` objects made while a node of a checked graph runs (each
#: adds itself): the check of its update (:mod:`graphs.divergence`) takes the fold the last one
#: holds instead of reading the node's events back. None outside such a node.
NODE_RUNS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("taskctx_node_runs", default=None)


def attempt_key(task_id: str, cursor: int, node: str) -> str:
    """The attempt key of one run of ``node`` on the checkpoint at ``cursor``.

    Args:
        task_id: The task.
        cursor: The seq the node's input checkpoint has folded.
        node: The node's name.

    Returns:
        ``"<task_id>#<cursor>:<node>"``.
    """
    return f"{task_id}#{cursor}:{node}"


def attempt_of(causation_id: str | None) -> tuple[int, str] | None:
    """The checkpoint cursor and node an attempt key names.

    Args:
        causation_id: An event's ``causation_id``.

    Returns:
        ``(cursor, node)``, or None when it is not an attempt key.
    """
    head, sep, node = (causation_id or "").partition(":")
    _, hash_, cursor = head.rpartition("#")
    if not sep or not hash_ or not cursor.isdigit() or not node:
        return None
    return int(cursor), node


def log_ahead_error(task_id: str, cursor: int, node: str, foreign: Sequence[Event]) -> LogAheadError:
    """The error of node ``node`` finding events of other node runs past its checkpoint.

    Args:
        task_id: The task.
        cursor: The seq the node's input checkpoint has folded.
        node: The node that found them.
        foreign: The events past ``cursor`` that another attempt appended (seq order, not empty).

    Returns:
        The error: naming the node that appended them when its attempt ran on this same
        checkpoint (it did not return them as its state update), else time travel.
    """
    first, last = foreign[0], foreign[-1]
    by = attempt_of(first.causation_id)
    if by is not None and by[0] == cursor and by[1] != node:
        same = [e for e in foreign if e.causation_id == first.causation_id]
        kinds = ", ".join(dict.fromkeys(e.kind for e in same))
        span = f"seq {same[0].seq}" if len(same) == 1 else f"seq {same[0].seq}-{same[-1].seq}"
        return LogAheadError(
            f"task {task_id!r}: node {by[1]!r} appended events to the event log ({span}: {kinds}) but did not "
            f"return them as its state update, so node {node!r} got a checkpoint at seq {cursor} that does not "
            f"include them; return the update the events make from node {by[1]!r} (with nodes.NodeRun: "
            "return run.update())"
        )
    return LogAheadError(
        f"task {task_id!r}: the event log is at seq {last.seq} but this checkpoint knows seq {cursor} "
        f"(event {first.seq} {first.kind} came from another node run): continuing from an older "
        "checkpoint (time travel, a fork) is not supported; resume from the latest checkpoint"
    )
