"""A task's states step by step, derived from its event log: LangGraph's ``get_state_history``.

The event log is the task's truth and the state at any seq is the fold of the log up to it, so a
task's history does not depend on which checkpoints were kept (the commands keep one per
thread). Each node run appends its events under one attempt key (:func:`nodes.attempts.attempt_key`),
so the log splits into steps: the events of one node run, or of one edit from outside a node
(``state.edited``). The point after each step is a state of the history:

* its checkpoint id is a *log point*, ``00000000-0000-4000-8000-<seq as 12 hex digits>``
  (:func:`point_checkpoint_id`; a UUID, as LangGraph Server takes it), unless a checkpoint
  LangGraph kept has that state, which is then listed as it is;
* ``values`` is the fold of the log up to the point's seq; ``next`` the node that ran after it;
  ``metadata`` LangGraph's (``source``, ``step``, ``parents``) with ``taskctx_seq`` (the seq)
  and ``taskctx_node`` (the node that ran up to it); ``created_at`` its last event's timestamp.

Every snapshot of the history carries both keys: a kept checkpoint gets its state's cursor and
the node that ended there, and one that holds no task state (LangGraph's input checkpoint, made
before the run's input was written: its values are empty) gets None for both.

A node run that appends no event leaves no step in the log, so it has no point of its own.

:func:`merged_history` merges these points with the checkpoints LangGraph lists (newest first),
:func:`point_of` tells which seq a checkpoint config names, and :class:`PastCheckpointError`
is the refusal of a run or edit from an earlier point where no fork can be made.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.types import PregelTask, StateSnapshot
from pydantic import BaseModel

from context import Event, InvalidInputError, LogAheadError, TaskContext, replay
from context.lineage import children_of
from nodes.attempts import attempt_of

__all__ = [
    "POINT_PREFIX",
    "CheckpointInputError",
    "ForeignStateError",
    "LogStep",
    "PastCheckpointError",
    "changed_values",
    "check_point",
    "check_server_thread_id",
    "child_holding",
    "child_id",
    "fork_at",
    "log_steps",
    "merged_history",
    "point_checkpoint_id",
    "point_of",
    "point_seq",
    "point_snapshot",
    "snapshot_cursor",
    "tuple_cursor",
]

#: Held while this process forks a task from LangGraph (:func:`fork_at`).
_FORKING = threading.Lock()

#: How many ids a fork from LangGraph skips, taken by other forks of its point at the same time.
_RACING_FORKS = 64

#: The first 24 characters of a log point's checkpoint id (:func:`point_checkpoint_id`).
POINT_PREFIX = "00000000-0000-4000-8000-"


class ForeignStateError(InvalidInputError):
    """A thread's checkpoint, or a run's input, holds another task's state past its start."""


class CheckpointInputError(InvalidInputError):
    """A run's or state edit's checkpoint id is a log point past the end of its task's log, or on
    a thread with no task (the message names why and the fix)."""


def check_point(thread_id: str, checkpoint_id: str, seq: int, last: int) -> None:
    """Refuse a log point (``seq``, from ``checkpoint_id``) that names no step of its task's log.

    Args:
        thread_id: The thread (the task's id).
        checkpoint_id: The log point's checkpoint id.
        seq: The seq it names.
        last: The seq of the task's last event (0: the thread has no task).

    Raises:
        CheckpointInputError: The thread has no task, or ``seq`` is past ``last``.
    """
    if last == 0:
        raise CheckpointInputError(
            f"checkpoint {checkpoint_id} is a taskctx log point (seq {seq}), but thread {thread_id!r} has no task: "
            "there is no event log for it to name; start the task first, or use a checkpoint id from this "
            "thread's get_state_history"
        )
    if seq > last:
        raise CheckpointInputError(
            f"checkpoint {checkpoint_id} of task {thread_id!r} names seq {seq}, past the end of its log, which ends "
            f"at seq {last}; pick a step from get_state_history (each has a log-point id), or leave checkpoint_id "
            "out for the latest state"
        )


class PastCheckpointError(LogAheadError, ValueError):
    """A run or state edit names a checkpoint at an earlier step than the task's event log.

    A ``ValueError`` too, so LangGraph Server shows its message to the client.
    """


def point_checkpoint_id(seq: int) -> str:
    """The checkpoint id of the log point at ``seq`` (the state after event ``seq``).

    Args:
        seq: An event's seq (0 to 2**48 - 1).

    Returns:
        A UUID string, :data:`POINT_PREFIX` and the seq as 12 hex digits.
    """
    return f"{POINT_PREFIX}{seq:012x}"


def point_seq(checkpoint_id: str | None) -> int | None:
    """The seq a log point's checkpoint id names.

    Args:
        checkpoint_id: A checkpoint id, or None.

    Returns:
        The seq, or None when it is not a log point's id (a checkpoint LangGraph wrote).
    """
    if not checkpoint_id or not checkpoint_id.startswith(POINT_PREFIX):
        return None
    tail = checkpoint_id[len(POINT_PREFIX) :]
    try:
        return int(tail, 16) if len(tail) == 12 else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LogStep:
    """One step of a task's log: the events of one node run, or of one edit from outside a node."""

    #: The seq of its last event: the state after the step is the fold up to it.
    seq: int
    #: The node that ran (for an edit: its ``as_node``, or None).
    node: str | None
    #: ``loop`` (a node run) or ``update`` (an edit from outside a node).
    source: str
    #: Its last event's timestamp (ISO 8601).
    created_at: str


def log_steps(events: Sequence[Event]) -> list[LogStep]:
    """Split a task's events into steps: each run of consecutive events with one ``causation_id``.

    Args:
        events: The task's events, in seq order.

    Returns:
        The steps, in log order.
    """
    out: list[LogStep] = []
    i = 0
    while i < len(events):
        j = i
        while j + 1 < len(events) and events[j + 1].causation_id == events[i].causation_id:
            j += 1
        key = attempt_of(events[i].causation_id)
        if key is not None:
            node, source = key[1], "loop"
        else:
            edited = next((e for e in events[i : j + 1] if e.kind == "state.edited"), None)
            node, source = (edited.payload.get("as_node") if edited else None), "update"
        out.append(LogStep(events[j].seq, node, source, str(events[j].timestamp)))
        i = j + 1
    return out


def snapshot_cursor(snap: StateSnapshot) -> int | None:
    """The seq a snapshot's state has folded (None: a snapshot without a TaskContext state)."""
    values = snap.values if isinstance(snap.values, dict) else {}
    part = values.get("events")
    cursor = getattr(part, "cursor", None) if not isinstance(part, dict) else part.get("cursor")
    return cursor if isinstance(cursor, int) else None


def _config(thread_id: str, seq: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": point_checkpoint_id(seq)}}


def _point(thread_id: str, step: LogStep, index: int, nxt: str | None, ctx: TaskContext | None) -> StateSnapshot:
    """The snapshot of the point after ``step`` (``ctx``: its fold; None: not folded yet)."""
    tasks: tuple[PregelTask, ...] = ()
    if nxt is not None:
        tid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"taskctx:{thread_id}#{step.seq}:{nxt}"))
        tasks = (PregelTask(tid, nxt, ("__pregel_pull", nxt)),)
    metadata = {
        "source": step.source,
        "step": index,
        "parents": {},
        "taskctx_seq": step.seq,
        "taskctx_node": step.node,
    }
    values = _values(ctx) if ctx is not None else {}
    return StateSnapshot(
        values,
        (nxt,) if nxt else (),
        _config(thread_id, step.seq),
        metadata,
        step.created_at,
        None,
        tasks,
        (),  # type: ignore[arg-type]
    )


def _values(ctx: TaskContext) -> dict[str, Any]:
    """A state's parts, every one (a snapshot LangGraph makes leaves out a part never written)."""
    return {p: getattr(ctx, p) for p in TaskContext.model_fields}


def _select(items: list[Any], before: Any, filter: dict[str, Any] | None, limit: int | None) -> list[Any]:
    """``items`` (newest first) after ``before``, matching ``filter``, at most ``limit`` of them."""
    if before is not None:
        bid = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        ids = [s.config["configurable"]["checkpoint_id"] for s in items]
        if bid in ids:
            items = items[ids.index(bid) + 1 :]
        elif (bseq := point_seq(bid)) is not None:
            items = [s for s in items if (c := s.metadata.get("taskctx_seq", snapshot_cursor(s))) is None or c < bseq]
        elif bid:
            items = [s for s in items if s.config["configurable"]["checkpoint_id"] < bid]
    if filter:
        items = [s for s in items if all((s.metadata or {}).get(k) == v for k, v in filter.items())]
    return items[:limit] if limit is not None and limit >= 0 else items


def merged_history(
    thread_id: str,
    events: Sequence[Event],
    kept: list[StateSnapshot],
    *,
    filter: dict[str, Any] | None = None,
    before: Any = None,
    limit: int | None = None,
) -> list[StateSnapshot]:
    """A task's history: the checkpoints LangGraph kept and the log points between them, newest first.

    Args:
        thread_id: The task's thread (its task id).
        events: The task's events, in seq order.
        kept: LangGraph's own snapshots of the thread (``get_state_history``), newest first.
        filter: Metadata every snapshot returned must have (LangGraph's ``filter``).
        before: A checkpoint config: only snapshots older than it.
        limit: At most this many snapshots.

    Returns:
        The snapshots, newest first: a kept checkpoint where one has the state of a point, a log
        point (see module doc) for every other point up to the newest kept checkpoint's seq (all
        of them when none was kept).
    """
    steps = log_steps(events)
    by_seq = {s.seq: s.node for s in steps}
    kept = [_marked(s, by_seq) for s in kept]
    nodes = [s.node if s.source == "loop" else None for s in steps]
    covered = {c for s in kept if (c := snapshot_cursor(s)) is not None}
    head = max(covered) if covered else None
    points: list[StateSnapshot] = []
    for i, step in enumerate(steps):
        if step.seq in covered or (head is not None and step.seq > head):
            continue
        nxt = next((n for n in nodes[i + 1 :] if n is not None), None)
        points.append(_point(thread_id, step, i + 1, nxt, None))
    points.reverse()
    merged: list[StateSnapshot] = []
    for snap in kept:
        c = snapshot_cursor(snap)
        while points and c is not None and points[0].metadata["taskctx_seq"] > c:  # type: ignore[index]
            merged.append(points.pop(0))
        merged.append(snap)
    merged += points
    chosen = _select(merged, before, filter, limit)
    return _folded(chosen, merged, events)


def _marked(snap: StateSnapshot, by_seq: dict[int, str | None]) -> StateSnapshot:
    """A kept checkpoint with ``taskctx_seq`` (its cursor) and ``taskctx_node`` in its metadata; both None
    for one that holds no task state (LangGraph's input checkpoint, made before the run's input was written)."""
    c = snapshot_cursor(snap)
    node = by_seq.get(c) if c is not None else None
    return snap._replace(metadata={**(snap.metadata or {}), "taskctx_seq": c, "taskctx_node": node})


def _folded(chosen: list[StateSnapshot], merged: list[StateSnapshot], events: Sequence[Event]) -> list[StateSnapshot]:
    """``chosen`` with each log point's values folded (one pass over the log) and parents linked."""
    want = sorted({s.metadata["taskctx_seq"] for s in chosen if not s.values and point_seq(_cid(s)) is not None})  # type: ignore[index]
    states: dict[int, TaskContext] = {}
    ctx, done = TaskContext(), 0
    for seq in want:
        ctx = replay([e for e in events[done:seq]], ctx)
        done = seq
        states[seq] = ctx
    parent = {_cid(a): b.config for a, b in zip(merged, merged[1:], strict=False)}
    out = []
    for s in chosen:
        seq = point_seq(_cid(s))
        if seq is not None and seq in states:
            s = s._replace(values=_values(states[seq]))
        if s.parent_config is None and _cid(s) in parent:
            s = s._replace(parent_config=parent[_cid(s)])
        out.append(s)
    return out


def _cid(s: StateSnapshot) -> str:
    return str(s.config["configurable"]["checkpoint_id"])


def point_of(config: Any, kept: Any, head: Any, last: int) -> int | None:
    """The seq of the state a config's checkpoint id names, when it is an earlier step than the thread's latest.

    Args:
        config: A run or ``update_state`` config.
        kept: The ``CheckpointTuple`` LangGraph loads for it (None: no checkpoint with its id).
        head: The thread's latest ``CheckpointTuple`` (None: it has none).
        last: The seq of the task's last event.

    Returns:
        The seq of an earlier point (a log point's, or a kept checkpoint's cursor); None when the
        config names no checkpoint id, the latest one, or a point at the latest's seq.
    """
    cid = ((config or {}).get("configurable") or {}).get("checkpoint_id")
    if not cid or (head is not None and head.config["configurable"].get("checkpoint_id") == cid):
        return None
    seq = point_seq(cid)
    if seq is None:
        seq = tuple_cursor(kept)
    now = tuple_cursor(head)
    now = last if now is None else now
    return seq if seq is not None and seq < now else None


def tuple_cursor(tup: Any) -> int | None:
    """The seq a ``CheckpointTuple``'s TaskContext has folded (None: no tuple, or no TaskContext in it)."""
    if tup is None:
        return None
    part = (tup.checkpoint.get("channel_values") or {}).get("events")
    cursor = getattr(part, "cursor", None) if not isinstance(part, dict) else part.get("cursor")
    return cursor if isinstance(cursor, int) else None


def point_snapshot(thread_id: str, events: Sequence[Event], seq: int) -> StateSnapshot:
    """The snapshot of the state at ``seq``: the fold of the log up to it, ``next`` the node that ran after.

    Args:
        thread_id: The task's thread (its task id).
        events: The task's events, in seq order.
        seq: The point (0 to the last seq).

    Returns:
        The snapshot, its config the log point's; ``next`` empty when no node ran after ``seq``.
    """
    steps = log_steps(events)
    index = sum(1 for s in steps if s.seq <= seq)
    mine = next((s for s in reversed(steps) if s.seq <= seq), None)
    nxt = next((s.node for s in steps if s.seq > seq and s.source == "loop"), None)
    step = LogStep(seq, mine.node if mine else None, mine.source if mine else "input", mine.created_at if mine else "")
    ctx = replay([e for e in events if e.seq <= seq])
    return _point(thread_id, step, index, nxt, ctx)


class _ForkHost:
    """What :func:`graphs.fork.fork_task` reads of a project, for a graph that knows its stores and checkpointer."""

    def __init__(self, stores: Any, checkpointer: Any):
        self.stores, self.checkpointer = stores, checkpointer
        self.path = getattr(stores, "path", "") or "this database"

    def task_graph(self, task_id: str, *, spec: dict[str, Any] | None = None) -> Any:
        raise InvalidInputError(f"the graph of task {task_id!r} is the graph that forks it")  # (graph= is given)


def _plain(value: Any) -> Any:
    """``value`` as JSON data (a state part's model dumped), to compare what a client sent with a state."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def changed_values(past: dict[str, Any], values: Any) -> Any:
    """What ``values`` changes of the state ``past``, field by field (an edit, not the whole state).

    A state editor, or code that edits ``snapshot.values``, may send the whole state back with one
    field changed: at an earlier step that state is the parent's, and only what differs from it is
    the child's edit.

    Args:
        past: The state the edit is made on (``StateSnapshot.values``: part -> model or dict).
        values: The values given to ``update_state`` (None, or part -> model or dict).

    Returns:
        Part -> the fields whose JSON value differs from ``past`` (a part that is not a mapping:
        kept whole when it differs); ``values`` itself when it is not a mapping.
    """
    if isinstance(values, BaseModel):
        values = dict(values)
    if not isinstance(values, dict):
        return values
    out: dict[str, Any] = {}
    for part, given in values.items():
        now, before = _plain(given), _plain(past.get(part))
        if isinstance(now, dict) and isinstance(before, dict):
            fields = {k: v for k, v in now.items() if k not in before or before[k] != v}
            if fields:
                out[part] = fields
        elif now != before:
            out[part] = given
    return out


def check_server_thread_id(task_id: str, name: str) -> None:
    """Refuse a child id LangGraph Server cannot open as a thread (its thread ids are UUIDs).

    Args:
        task_id: The id a Server run names for the child.
        name: The argument that names it (``fork_task_id``).

    Raises:
        InvalidInputError: ``task_id`` is not a UUID (nothing was forked).
    """
    try:
        uuid.UUID(task_id)
    except ValueError:
        raise InvalidInputError(
            f"configurable.{name} {task_id!r} is not a UUID, and LangGraph Server opens only threads with a UUID id, "
            f"so the child could not be continued there; nothing was forked; name a new thread's id "
            f"(client.threads.create()['thread_id']), or leave {name} out for one made from the parent's"
        ) from None


def child_holding(events: Any, checkpointer: Any, parent: str, checkpoint_id: str) -> str | None:
    """The child of ``parent`` whose thread holds checkpoint ``checkpoint_id``.

    LangGraph Studio's "Fork" runs the checkpoint ``update_state`` returned on the thread it
    edited: when that edit forked the task, the checkpoint is the child's.

    Args:
        events: The event log (its lineage rows name each task's parent).
        checkpointer: The graph's checkpointer.
        parent: The thread the run names.
        checkpoint_id: The checkpoint id the run names.

    Returns:
        The child's task id (its thread id), or None: no child of ``parent`` holds it.
    """
    for child, _ in children_of(events, parent):
        conf = {"thread_id": child, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
        if checkpointer.get_tuple({"configurable": conf}) is not None:
            return child
    return None


def child_id(stores: Any, parent: str, seq: int, wanted: str | None, skip: Collection[str] = ()) -> str:
    """The id of the child a LangGraph run or edit from an earlier step forks into.

    Args:
        stores: The stores (an event log and a task registry).
        parent: The parent task.
        seq: The fork seq.
        wanted: The id the config names (``configurable.fork_task_id``), or None.
        skip: Ids not to give (another fork at once is making them).

    Returns:
        ``wanted``, else ``<parent>-fork-<seq>``, else the first free of ``<parent>-fork-<seq>-2``,
        ``-3``...: the same database gives the same id, and each fork of one point a new one. A
        parent whose id is a UUID (a LangGraph Server thread) gets a UUID, the ``uuid5`` of that
        name in the parent's namespace, so the Server takes it as a thread id.
    """
    if wanted:
        return str(wanted)
    try:
        space: uuid.UUID | None = uuid.UUID(parent)
    except ValueError:
        space = None

    def named(n: int) -> str:
        name = f"{parent}-fork-{seq}" + ("" if n == 1 else f"-{n}")
        return name if space is None else str(uuid.uuid5(space, name))

    n = 1
    while named(n) in skip or stores.events.last_seq(named(n)) or stores.tasks.get(named(n)) is not None:
        n += 1
    return named(n)


def fork_at(graph: Any, parent: str, seq: int, wanted: str | None, why: str) -> tuple[str, str | None]:
    """Fork ``parent`` at ``seq`` for a LangGraph run or edit of ``graph`` (:func:`graphs.fork.fork_task`).

    Args:
        graph: The task's :class:`graphs.edits.TaskGraph` (its stores, checkpointer, and the
            child's graph).
        parent: The parent task.
        seq: The fork seq (it ends a node run).
        wanted: The child's id, or None (:func:`child_id`).
        why: Why, in words (recorded in ``task.forked``).

    Returns:
        The child's task id (its thread id), and the node whose run ended at ``seq`` (the child's
        checkpoint is as if it had just returned; None: no node wrote the events there).

    Raises:
        InvalidInputError: ``seq`` does not end a node run, or the named child exists.
        PastCheckpointError: The graph knows no task registry (a ``NodeEnv`` without ``stores``).
    """
    from .fork import check_child_id

    stores = graph.taskctx_stores
    if stores is None or not hasattr(stores, "tasks"):
        raise PastCheckpointError(
            f"task {parent!r}: to go on from seq {seq} the task is forked, and this graph knows its event log only; "
            "give its nodes' NodeEnv the project's stores (NodeEnv(..., stores=project.stores)), or fork with "
            f"Project.fork({parent!r}, at={seq})"
        )
    if wanted is not None:
        check_child_id(wanted, "fork_task_id")
    host, skip = _ForkHost(stores, graph.checkpointer), set()
    with _FORKING:  # (forks of this process one at a time: none probes an id another has just made)
        return _fork_free(host, stores, graph, parent, seq, wanted, why, skip)


def _fork_free(
    host: Any, stores: Any, graph: Any, parent: str, seq: int, wanted: str | None, why: str, skip: set[str]
) -> tuple[str, str | None]:
    """:func:`fork_at`'s fork into the first free child id (another process may take one first)."""
    from .fork import ChildTakenError, fork_point, fork_task

    while True:
        child = child_id(stores, parent, seq, wanted, skip)
        try:
            fork_task(host, parent, at=seq, new_task_id=child, why=why, graph=graph, id_name="fork_task_id")
            return child, fork_point(stores.events, parent, at=seq).node
        except ChildTakenError:
            if wanted is not None or len(skip) >= _RACING_FORKS:
                raise
            skip.add(child)  # another fork of this point took the id first: the next one
