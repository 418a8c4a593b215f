"""Which tasks exist in a taskctx database: the one answer every command uses.

A database knows a task in two places: the task registry (``taskctx_tasks``: how the task was
started, so that ``resume`` and ``approve`` can rebuild its graph) and the event log
(``taskctx_events``: what happened). They disagree in two cases:

* registered, no events: the command registered the task and its first node failed before it
  appended anything (a planner whose required blocks do not fit ``--budget``, a model that
  cannot be reached). The task exists: ``resume`` continues it from its first checkpoint.
* events, not registered: the task was run through the Python API (``graphs.Project.run``) on these
  stores. The task exists: ``inspect``, ``list`` and ``report`` show it; the CLI cannot rebuild
  its graph, so ``resume`` and ``approve`` say so.

:func:`list_tasks` reconciles them: **the registry and the log together say which tasks exist**
(the union: a task exists once either knows it), and **the event log is authoritative for what a
task is** (status, executor steps, last activity are folded from the log by the reducer, never
taken from the registry, which only holds the start spec). No other function lists tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .errors import DamagedStoreError, UnknownTaskError
from .events import Event
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
    ...) or ``"not started"`` (registered, no events); ``executor_steps``: executor steps
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

    @property
    def registered(self) -> bool:
        """A taskctx command started it: ``resume``/``approve`` can rebuild its graph."""
        return self.spec is not None

    @property
    def started(self) -> bool:
        """Its log holds at least one event."""
        return self.events > 0

    def as_json(self) -> dict[str, object]:
        """``{task_id, status, executor_steps, last_activity, events, registered}`` (and
        ``damaged``: the findings, for a damaged task)."""
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
    return TaskInfo(task_id, ctx.control.status, ctx.progress.executor_steps, events[-1].timestamp, len(events), spec)


def list_tasks(stores: _Stores) -> list[TaskInfo]:
    """Every task of ``stores`` (registry and event log reconciled, see the module doc), the most
    recent activity first; tasks without events ("not started") last, by id. A task whose log or
    registry row fails its checks is listed with status ``"damaged"`` and its findings
    (``TaskInfo.damage``), never raised: one damaged task does not hide the others."""
    ids = (set(stores.events.task_ids()) | set(stores.tasks.task_ids())) - {MEMORY_LOG}  # (no task: memory)
    infos = [_info_or_damage(stores, t) for t in ids]
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
    """``no task 'x' in DB; check the id and --db (tasks: a, b)``, at most 10 ids named."""
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    return f"no task {task_id!r} in {where}; check the id and --db (tasks: {shown or 'none'})"


def find_task(stores: _Stores, task_id: str) -> TaskInfo:
    """The :class:`TaskInfo` of ``task_id``; raises ``UnknownTaskError`` naming the database and
    the tasks it holds (as :func:`list_tasks` sees them) when neither the registry nor the log
    knows it; ``DamagedStoreError`` (what is damaged, and ``taskctx doctor``) when its event log
    or registry row fails its checks (:mod:`context.verify`)."""
    info = _info(stores, task_id)
    if info.registered or info.started:
        return info
    raise UnknownTaskError(unknown_task_message(task_id, stores.path, [i.task_id for i in list_tasks(stores)]))
