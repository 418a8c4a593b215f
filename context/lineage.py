"""Forked logs: a child task's event log is its parent's prefix, referenced, then its own events.

A fork writes one row for the child: ``task.forked`` at seq ``fork_seq + 1`` (its payload names
the parent and the fork seq). That first own row is the child's lineage record: reading the
child's log reads the parent's rows ``1..fork_seq`` where they are (recursively, for a fork of a
fork), then the child's own rows. Nothing of the parent is copied, so a fork costs the same
whatever the parent's length, and the parent is never written.

:func:`chained` does that reading for both backends; each gives it a :class:`Segments` (its own
rows of one task, the first row of a task, a task's last seq).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import DamagedStoreError, InvalidInputError, UnknownTaskError
from .events import Event, TaskForked, new_event
from .models import SCHEMA_VERSION
from .store import damaged

__all__ = [
    "FORKED",
    "NOT_RUN_KINDS",
    "Lineage",
    "Segments",
    "chained",
    "chained_count",
    "children_of",
    "fork_log",
    "fork_status",
    "lineage_of_row",
    "prefix_error",
]


@dataclass(frozen=True)
class Lineage:
    """Where a child task's log comes from.

    Attributes:
        parent: The parent task's id.
        fork_seq: The last seq of the parent's log the child's log holds.
        why: Why the fork was made (the ``task.forked`` payload's ``why``).
    """

    parent: str
    fork_seq: int
    why: str = ""


class Segments(Protocol):
    """What :func:`chained` needs of a backend's event log."""

    def lineage(self, task_id: str) -> Lineage | None:
        """The task's lineage (None: not a fork, or no events)."""
        ...

    def last_seq(self, task_id: str) -> int:
        """The last seq of the task's own rows (0: none)."""
        ...


def lineage_of_row(task_id: str, row: Sequence[Any] | None) -> Lineage | None:
    """The lineage a task's first own row records.

    Args:
        task_id: The task.
        row: ``(seq, kind, payload JSON text)`` of its lowest-seq row (None: it has no rows).

    Returns:
        The lineage when that row is ``task.forked``, else None.

    Raises:
        DamagedStoreError: The ``task.forked`` row does not parse, or its seq is not its fork seq + 1.
    """
    if row is None or row[1] != "task.forked":
        return None
    try:
        p = json.loads(row[2])
        out = Lineage(str(p["parent_task_id"]), int(p["fork_seq"]), str(p.get("why", "")))
    except (TypeError, ValueError, KeyError) as exc:
        raise damaged(task_id, "the event log", f"its task.forked row (seq {row[0]}) does not parse") from exc
    if int(row[0]) != out.fork_seq + 1:
        raise damaged(
            task_id,
            "the event log",
            f"its task.forked row is seq {row[0]}, but it forks {out.parent!r} at seq {out.fork_seq} "
            f"(it must be seq {out.fork_seq + 1})",
        )
    return out


#: The status a fork shows (``list``, ``inspect``, the report) until it has run: made, not started.
FORKED = "forked"
#: The kinds of a fork's own rows that are not a run of it: its ``task.forked`` and edits of its state.
NOT_RUN_KINDS = ("task.forked", "state.edited")


def fork_status(status: str, not_run: bool) -> str:
    """The status a fork shows: :data:`FORKED` while it has not run, else its folded status.

    Args:
        status: Its folded ``control.status`` (the parent's at the fork point, until it runs).
        not_run: Its own rows are all of :data:`NOT_RUN_KINDS` (no node of it has run yet).

    Returns:
        ``"forked"`` when ``not_run`` and the folded status is not final (a fork at the end of a
        completed or failed task stays so), else ``status``.
    """
    return FORKED if not_run and status not in ("completed", "failed") else status


def prefix_error(task_id: str, lin: Lineage, parent_last: int) -> DamagedStoreError:
    """The error of a child whose parent's prefix is not all there.

    Args:
        task_id: The child.
        lin: Its lineage.
        parent_last: The last seq of the parent's own rows (0: the parent is not in the database).

    Returns:
        A ``DamagedStoreError`` naming the parent, the fork seq and what is missing.
    """
    where = (
        "that task is not in this database"
        if parent_last == 0
        else f"that task's log ends at seq {parent_last}, before the fork point"
    )
    return damaged(
        task_id,
        "the event log",
        f"it was forked from task {lin.parent!r} at seq {lin.fork_seq} and reads its first {lin.fork_seq} "
        f"events from that task, but {where}",
        inspectable=False,
    )


#: Reads one task's own rows as events: ``(task_id, after, upto, limit) -> events`` with
#: ``after < seq <= upto`` (``upto`` None: to the end), in seq order, checked as the backend checks
#: an unfiltered or a filtered read.
OwnRows = Callable[[str, int, "int | None", "int | None"], Iterator[Event]]


def chained(
    log: Segments, own: OwnRows, task_id: str, after: int, limit: int | None, upto: int | None = None
) -> Iterator[Event]:
    """A task's log after ``after``: its parent's prefix (when it is a fork) then its own rows.

    Args:
        log: The backend's event log.
        own: Reads one task's own rows (see :data:`OwnRows`).
        task_id: The task.
        after: Only events with ``seq > after``.
        limit: At most this many events (None: all).
        upto: Only events with ``seq <= upto`` (None: to the end).

    Yields:
        The events, in seq order.

    Raises:
        DamagedStoreError: The task is a fork and its parent is missing or shorter than the fork
            seq (:func:`prefix_error`), or a row fails the backend's checks.
    """
    if limit is not None and limit <= 0:
        return
    lin = log.lineage(task_id)
    n = 0
    if lin is not None and after < lin.fork_seq:
        parent_last = log.last_seq(lin.parent)
        if parent_last < lin.fork_seq:
            raise prefix_error(task_id, lin, parent_last)
        top = lin.fork_seq if upto is None else min(upto, lin.fork_seq)
        for e in chained(log, own, lin.parent, after, limit, top):
            yield e
            n += 1
        after = lin.fork_seq
    if (upto is not None and after >= upto) or (limit is not None and n >= limit):
        return
    yield from own(task_id, after, upto, None if limit is None else limit - n)


def chained_count(log: Segments, own_count: Callable[[str, int | None], int], task_id: str) -> int:
    """How many rows a task's log holds, its parent's prefix counted (``last_seq`` when none is missing).

    Args:
        log: The backend's event log.
        own_count: ``(task_id, upto) -> `` the number of the task's own rows with ``seq <= upto``.
        task_id: The task.

    Returns:
        The count.
    """

    def count(tid: str, upto: int | None) -> int:
        lin = log.lineage(tid)
        if lin is None:
            return own_count(tid, upto)
        top = lin.fork_seq if upto is None else min(upto, lin.fork_seq)
        return count(lin.parent, top) + (0 if upto is not None and upto <= lin.fork_seq else own_count(tid, upto))

    return count(task_id, None)


def fork_log(
    events: Any,
    parent: str,
    child: str,
    fork_seq: int,
    *,
    why: str = "",
    workspace: str = "",
    restored: Sequence[str] = (),
    left: dict[str, str] | None = None,
) -> Event:
    """Start a child task's log: the parent's events up to ``fork_seq`` (referenced), then ``task.forked``.

    One row is written, to the child's log; the parent's log is only read (its last seq).

    Args:
        events: The event log (SQLite or Postgres) both tasks are in.
        parent: The parent task's id.
        child: The new task's id (no events yet).
        fork_seq: The last seq of the parent's log the child holds (1 to the parent's last seq).
        why: Why the fork is made, in words (recorded).
        workspace: The child's workspace copy ("": it shares the parent's).
        restored: The files of that copy set back to their bytes at the fork.
        left: Path -> why a file the parent changed after the fork was left as it is.

    Returns:
        The ``task.forked`` event as written (seq ``fork_seq + 1``).

    Raises:
        UnknownTaskError: The parent has no events.
        InvalidInputError: ``child`` already has events, is ``parent``, or ``fork_seq`` is outside the parent's log.
    """
    last = events.last_seq(parent)
    if not last:
        raise UnknownTaskError(f"task {parent!r} has no events to fork; check the task id (taskctx list)")
    if child == parent or events.last_seq(child):
        raise InvalidInputError(f"task {child!r} already exists; fork into another task id")
    if not 1 <= fork_seq <= last:
        raise InvalidInputError(
            f"task {parent!r} has events 1 to {last}; fork at a seq in that range "
            f"(taskctx inspect {parent} --all shows them)"
        )
    payload = TaskForked(
        task_id=child,
        parent_task_id=parent,
        fork_seq=fork_seq,
        why=why,
        schema_version=SCHEMA_VERSION,
        workspace=workspace,
        restored=list(restored),
        left=dict(left or {}),
    )
    e = new_event("task.forked", payload, actor="user", correlation_id=child)
    written: list[Event] = events.append(child, [e.model_copy(update={"seq": fork_seq + 1})])
    return written[0]


def children_of(events: Any, task_id: str) -> list[tuple[str, int]]:
    """The tasks forked from a task: ``(child id, fork seq)``, by id.

    One lookup of the first row per task of the database (:meth:`lineage`), nothing of the logs read.

    Args:
        events: The event log.
        task_id: The parent.

    Returns:
        Its children (not theirs).
    """
    out = []
    for t in events.task_ids():
        lin = events.lineage(t)
        if lin is not None and lin.parent == task_id:
            out.append((t, lin.fork_seq))
    return out
