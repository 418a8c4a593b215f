"""Which tasks exist in a taskctx database: the one answer every command uses.

The task registry and the event log together say which tasks exist (a task exists once either
knows it); the event log alone says what a task is (status, steps, last activity are folded from
it, never taken from the registry). No other function lists tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from .errors import DamagedStoreError, UnknownTaskError
from .events import Event
from .lineage import NOT_RUN_KINDS, Lineage, fork_status
from .memory import MEMORY_LOG
from .reducer import replay
from .verify import check_events

__all__ = ["DAMAGED", "NOT_STARTED", "TaskInfo", "find_task", "list_tasks", "unknown_task_message"]

#: ``TaskInfo.status`` of a registered task without events.
NOT_STARTED = "not started"
#: ``TaskInfo.status`` of a task whose stored data fails its checks (``list_tasks``).
DAMAGED = "damaged"


class _Log(Protocol):
    def read(
        self, task_id: str, after: int = 0, limit: int | None = None, kinds: Sequence[str] | None = None
    ) -> list[Event]: ...
    def task_ids(self) -> list[str]: ...
    def lineage(self, task_id: str) -> Lineage | None: ...


class _Registry(Protocol):
    def get(self, task_id: str) -> dict[str, object] | None: ...
    def task_ids(self) -> list[str]: ...


class _Stores(Protocol):
    @property
    def events(self) -> _Log: ...
    @property
    def tasks(self) -> _Registry: ...
    @property
    def path(self) -> str: ...


@dataclass(frozen=True)
class TaskInfo:
    """One task as the database knows it.

    ``status``: the folded ``control.status`` (``idle``, ``running``, ``completed``, ``failed``,
    ...), ``"forked"`` (a fork not run yet: :func:`context.lineage.fork_status`) or ``"not
    started"`` (registered, no events); ``executor_steps``: executor steps
    recorded; ``last_activity``: ISO-8601 UTC timestamp of its last event (None without
    events); ``events``: number of events; ``spec``: the registry entry (how it was started),
    None when it was not started by a taskctx command; ``damage``: the findings about a damaged
    task (status ``"damaged"``, as :func:`list_tasks` reports it instead of raising).
    """

    task_id: str
    status: str
    executor_steps: int
    last_activity: str | None
    events: int
    spec: dict[str, object] | None
    #: What :mod:`context.verify` found wrong with it (``status`` is then ``"damaged"``); empty
    #: for a sound task.
    damage: tuple[str, ...] = ()
    #: The task it was forked from and the fork seq (None: not a fork; :mod:`context.lineage`).
    parent: str | None = None
    fork_seq: int | None = None
    #: The tasks forked from it, ``(child id, fork seq)`` (filled in by :func:`list_tasks`).
    children: tuple[tuple[str, int], ...] = ()

    @property
    def registered(self) -> bool:
        """A taskctx command started it: ``resume``/``approve`` can rebuild its graph."""
        return self.spec is not None

    @property
    def started(self) -> bool:
        """Its log holds at least one event."""
        return self.events > 0

    def as_json(self) -> dict[str, object]:
        """``{task_id, status, executor_steps, last_activity, events, registered}``, as JSON.

        A damaged task also has ``damaged``: its findings; a fork ``parent`` and ``fork_seq``; a
        task forked from ``children`` (``[{task_id, fork_seq}]``).
        """
        out: dict[str, object] = {
            "task_id": self.task_id,
            "status": self.status,
            "executor_steps": self.executor_steps,
            "last_activity": self.last_activity,
            "events": self.events,
            "registered": self.registered,
        }
        if self.damage:
            out["damaged"] = list(self.damage)
        if self.parent is not None:
            out.update(parent=self.parent, fork_seq=self.fork_seq)
        if self.children:
            out["children"] = [{"task_id": c, "fork_seq": s} for c, s in self.children]
        return out


def _info(stores: _Stores, task_id: str) -> TaskInfo:
    events = stores.events.read(task_id)
    spec = stores.tasks.get(task_id)
    if not events:
        return TaskInfo(task_id, NOT_STARTED, 0, None, 0, spec)
    try:
        ctx = replay(events)
    except (ValueError, KeyError, TypeError) as exc:  # a payload its kind does not allow
        found = check_events(events) or [f"event log: it cannot be folded ({type(exc).__name__})"]
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        what = f"task {task_id!r} is damaged: {found[0]}{more}"
        raise DamagedStoreError(
            f"{what}; check the database for every finding", found, task_id=task_id, what=what
        ) from exc
    lin = stores.events.lineage(task_id)
    status: str = ctx.control.status
    if lin is not None:
        status = fork_status(status, all(e.kind in NOT_RUN_KINDS for e in events if e.seq > lin.fork_seq))
    return TaskInfo(
        task_id,
        status,
        ctx.progress.executor_steps,
        events[-1].timestamp,
        len(events),
        spec,
        parent=lin.parent if lin is not None else None,
        fork_seq=lin.fork_seq if lin is not None else None,
    )


def list_tasks(stores: _Stores) -> list[TaskInfo]:
    """Every task of a database, registry and event log reconciled.

    A task whose log or registry row fails its checks is listed with status ``"damaged"`` and its
    findings (``TaskInfo.damage``), never raised: one damaged task does not hide the others.

    Args:
        stores: The database's stores (``.events``, ``.tasks``, ``.path``).

    Returns:
        The tasks, the most recent activity first; tasks without events ("not started") last,
        by id.
    """
    ids = (set(stores.events.task_ids()) | set(stores.tasks.task_ids())) - {MEMORY_LOG}  # (no task: memory)
    infos = [_info_or_damage(stores, t) for t in ids]
    kids: dict[str, list[tuple[str, int]]] = {}
    for i in infos:
        if i.parent is not None and i.fork_seq is not None:
            kids.setdefault(i.parent, []).append((i.task_id, i.fork_seq))
    infos = [replace(i, children=tuple(sorted(kids[i.task_id]))) if i.task_id in kids else i for i in infos]
    started = sorted((i for i in infos if i.last_activity), key=lambda i: (i.last_activity, i.task_id), reverse=True)
    return started + sorted((i for i in infos if not i.last_activity), key=lambda i: i.task_id)


def _info_or_damage(stores: _Stores, task_id: str) -> TaskInfo:
    try:
        return _info(stores, task_id)
    except DamagedStoreError as exc:
        found = tuple(exc.problems) or (str(exc),)
        try:  # when the log itself reads back, its last event still dates the task
            events = stores.events.read(task_id)
        except DamagedStoreError:
            events = []
        last = events[-1].timestamp if events else None
        return TaskInfo(task_id, DAMAGED, 0, last, len(events), None, found)


def unknown_task_message(task_id: str, where: str, known: Sequence[str]) -> str:
    """The message for a task id a database does not know.

    Args:
        task_id: The id asked for.
        where: The database (its path or redacted URL).
        known: The ids it holds.

    Returns:
        ``no task 'x' in DB; check the id and --db (tasks: a, b)``, at most 10 ids named.
    """
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    return f"no task {task_id!r} in {where}; check the id and --db (tasks: {shown or 'none'})"


def find_task(stores: _Stores, task_id: str) -> TaskInfo:
    """One task as the database knows it.

    Args:
        stores: The database's stores.
        task_id: The task.

    Returns:
        Its :class:`TaskInfo`.

    Raises:
        UnknownTaskError: Neither the registry nor the log knows it (the message names the
            database and the tasks it holds, as :func:`list_tasks` sees them).
        DamagedStoreError: Its event log or registry row fails its checks (:mod:`context.verify`).
    """
    info = _info(stores, task_id)
    if info.registered or info.started:
        return info
    raise UnknownTaskError(unknown_task_message(task_id, stores.path, [i.task_id for i in list_tasks(stores)]))
