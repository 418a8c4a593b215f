"""Forking a task: a child task that starts from the parent's state at an earlier seq and runs on.

:func:`fork_task` (``Project.fork``, ``taskctx fork``) finds the fork point (a seq, or the end of
executor step N; it must end a node run), writes the child's one row (``task.forked``, after the
parent's prefix, which is referenced, not copied: :mod:`context.lineage`), registers the child
(the parent's registry row, its workspace and receipts its own when the workspace is forked:
:mod:`graphs.fork_workspace`) and gives the child's thread a fresh LangGraph checkpoint holding
the fold of that prefix, as if the node that ended there had just returned. The parent is only
read. ``Project.resume`` then runs the child on, with the same or another model, budget or
graph, or after a state edit (``state.edited``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context import Event, InvalidInputError, LeaseHeldError, TaskContext, UnknownTaskError, apply_event, replay
from context.lineage import fork_log
from nodes.attempts import attempt_of

from .diagnosis import REGISTERED_MARK, ensure_sound, on_server
from .fork_workspace import copy_at_fork
from .runner import thread_config

__all__ = ["ChildTakenError", "ForkPoint", "ForkResult", "fork_point", "fork_task", "state_at"]

#: How far a fork point's node run is looked for, before and after the seq (events).
_NEAR = 400

#: Where a task's seqs are listed, in the fork point's errors.
_SEQS = "taskctx inspect {} --all shows them"


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork starts: the last seq of the parent's log the child holds, and the node that ended there.

    Attributes:
        seq: The fork seq.
        node: The node whose run ended at ``seq`` (the child's checkpoint is as if it had just
            returned; None: no node wrote the events there, e.g. a log written by a harness).
    """

    seq: int
    node: str | None


@dataclass
class ForkResult:
    """What :func:`fork_task` made.

    Attributes:
        task_id: The child.
        parent: The parent.
        fork_seq: The last seq of the parent's log the child holds.
        state: The child's state (the fold of the prefix and its ``task.forked``).
        next_nodes: The nodes the child's checkpoint runs next.
        event: The child's ``task.forked`` event.
        workspace: The child's workspace copy (None: it shares the parent's, or the task has none).
        restored: The files of the copy set back to their bytes at the fork.
        left: Path -> why a file the parent changed after the fork was left as it is.
    """

    task_id: str
    parent: str
    fork_seq: int
    state: TaskContext
    next_nodes: tuple[str, ...]
    event: Event
    workspace: Path | None = None
    restored: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)


def _node_at(events: Any, task_id: str, seq: int) -> tuple[str | None, int | None]:
    """The node whose run wrote event ``seq``, and the seq where that run ends (None: no node run)."""
    near = events.read(task_id, after=seq - 1, limit=2)
    key = near[0].causation_id if near else None
    by = attempt_of(key)
    if by is None:
        return None, None
    if len(near) < 2 or near[1].causation_id != key:
        return by[1], seq
    end = seq  # inside the run: how far it goes, for the message
    for e in events.iter(task_id, after=seq, limit=_NEAR):
        if e.causation_id != key:
            break
        end = e.seq
    return by[1], end


def _last_node(events: Any, task_id: str, seq: int) -> str | None:
    """The node of the last node-run event at or before ``seq`` (a few hundred events back at most)."""
    for e in reversed(events.read(task_id, after=max(0, seq - _NEAR), limit=min(seq, _NEAR))):
        by = attempt_of(e.causation_id)
        if by is not None:
            return by[1]
    return None


def _arg(name: str, value: Any, cli: bool) -> str:
    """An argument as the caller spells it: ``--at-step 3`` (the CLI's flag) or ``at_step=3`` (Python)."""
    return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value}"


def _step_end(events: Any, task_id: str, step: int, cli: bool) -> int:
    """The seq that ends the node run in which the parent's executor step ``step`` was recorded."""
    results = events.read(task_id, kinds=["tool.result.received"], fields=["call_id"])
    if step < 1 or len(results) < step:
        if not results:
            raise InvalidInputError(
                f"task {task_id!r} has no executor step yet; fork it at a seq instead ({_arg('at', 'SEQ', cli)}; "
                f"{_SEQS.format(task_id)})"
            )
        _, end = _node_at(events, task_id, results[-1].seq)
        where = "is before its first executor step; its last is" if step < 1 else "is past its last executor step,"
        raise InvalidInputError(
            f"task {task_id!r}: {_arg('at_step', step, cli)} {where} step {len(results)} (it ends at "
            f"seq {end if end is not None else results[-1].seq}); fork at a step from 1 to {len(results)}"
        )
    _, end = _node_at(events, task_id, results[step - 1].seq)
    return end if end is not None else results[step - 1].seq


def fork_point(
    events: Any, task_id: str, *, at: int | None = None, at_step: int | None = None, cli: bool = False
) -> ForkPoint:
    """Check a fork point: a seq that ends a node run of the task (or the end of executor step N).

    Args:
        events: The event log.
        task_id: The parent.
        at: The fork seq (an event's seq, as ``inspect --all`` and the trace show it).
        at_step: Or: the end of executor step N (where ``--max-steps N`` would have stopped).
        cli: Name the arguments in errors as the CLI's flags (``--at SEQ``), not as Python's (``at=SEQ``).

    Returns:
        The fork point.

    Raises:
        InvalidInputError: Neither or both are given, one is not an int, the seq is past the log, or it falls inside
            a node run (the message names the run's node and the seq that ends it).
        UnknownTaskError: The task has no events.
    """
    for name, value in (("at", at), ("at_step", at_step)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInputError(f"{_arg(name, repr(value), cli)} is not a whole number; give an int")
    last = events.last_seq(task_id)
    if not last:
        raise UnknownTaskError(f"task {task_id!r} has no events; check the task id (taskctx list)")
    if (at is None) == (at_step is None):
        raise InvalidInputError(
            f"fork at a seq ({_arg('at', 'SEQ', cli)}) or at the end of an executor step ({_arg('at_step', 'N', cli)}), "
            "one of them"
        )
    seq = at if at is not None else _step_end(events, task_id, int(at_step or 0), cli)
    if not 1 <= seq <= last:
        past = "past the end of its log" if seq > last else "before the start of its log"
        raise InvalidInputError(
            f"task {task_id!r}: seq {seq} is {past}, which ends at seq {last}; fork at a seq from 1 to {last} "
            f"({_arg('at', 'SEQ', cli)}; {_SEQS.format(task_id)})"
        )
    node, end = _node_at(events, task_id, seq)
    if end is not None and end != seq:
        raise InvalidInputError(
            f"task {task_id!r}: seq {seq} is inside a run of node {node!r} (its events go on to seq {end}); "
            f"fork where a node run ends: {_arg('at', end, cli)}, or a seq before that run"
        )
    if node is None:
        node = _last_node(events, task_id, seq)
    return ForkPoint(seq, node)


def state_at(stores: Any, checkpointer: Any, task_id: str, seq: int) -> TaskContext:
    """The task's state at ``seq``: the fold of its log up to there, whether or not a checkpoint was kept.

    From the latest checkpoint when its cursor is at or before ``seq`` (the events between folded
    on), else from the start of the log.

    Args:
        stores: The project's stores.
        checkpointer: Its checkpointer (None: fold from the start).
        task_id: The task.
        seq: The seq (1 to the log's last).

    Returns:
        The fold.

    Raises:
        DamagedStoreError: The task's stored data fails its checks (:func:`graphs.diagnosis.ensure_sound`).
    """
    checked = ensure_sound(stores, checkpointer, task_id, full=False)
    base = checked.state
    if base is None or base.events.cursor > seq:
        base = TaskContext()
    cursor = base.events.cursor
    return replay(stores.events.iter(task_id, after=cursor, limit=seq - cursor), base) if seq > cursor else base


def _checkpoint(task_id: str, state: TaskContext, node: str | None, graph: Any, registered: bool) -> tuple[str, ...]:
    """Give the child's thread its first checkpoint: ``state``, as if ``node`` had just returned it
    (marked :data:`REGISTERED_MARK` when the child gets a registry row, as a run of it would be)."""
    values = {p: getattr(state, p) for p in TaskContext.model_fields}
    cfg = thread_config(task_id)
    if registered:
        cfg["metadata"] = {REGISTERED_MARK: True}
    graph.update_state(cfg, values, as_node=node)
    snap = graph.get_state(thread_config(task_id))
    return tuple(snap.next)


def _undo(project: Any, child: str, written: bool, copy: Any) -> None:
    """Take back what a fork that failed wrote: the child's checkpoints, its ``task.forked`` row, its workspace copy."""
    if written:
        if project.checkpointer is not None:
            project.checkpointer.delete_thread(child)
        project.stores.events.discard_fork(child)
    if copy is not None:
        copy.remove()


#: A task id that names folders (a child's workspace copy and receipts, an export): ``--task-id``,
#: ``new_task_id`` and ``fork_task_id`` all take it; no path separator, no ``..``, and no leading
#: ``-`` (it would read as an option in every later command: ``taskctx resume -x``).
CHILD_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def check_child_id(task_id: str, what: str = "new_task_id") -> str:
    """Refuse a child id given by name that could not name a folder of its own.

    Args:
        task_id: The id.
        what: The argument's name, as the error names it.

    Returns:
        ``task_id``.

    Raises:
        InvalidInputError: It is not 1-128 letters, digits, '-', '_' or '.' (not starting with '.' or '-').
    """
    if not isinstance(task_id, str) or not CHILD_ID.fullmatch(task_id):
        raise InvalidInputError(
            f"{what} {str(task_id)[:60]!r} is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' "
            "(not starting with '.' or '-'): the child's workspace copy and receipts are named by it"
        )
    return task_id


def _child_spec(project: Any, task_id: str, graph: Any, spec_update: dict[str, Any] | None) -> dict[str, Any]:
    """The child's registry row: the parent's with ``spec_update`` over it (refused when there is
    none and no ``graph`` to run the child with)."""
    spec = project.stores.tasks.get(task_id)
    if spec is None and graph is None:
        raise InvalidInputError(
            f"task {task_id!r} has no task registry row (it was run through the Python API), so the child's graph "
            "cannot be rebuilt; pass graph= (Project.fork(..., graph=...))"
        )
    spec = {**(spec or {}), **(spec_update or {})}
    if on_server(spec) and graph is None:
        spec.pop("checkpoints")  # (the child's graph is the project's: its checkpoints are in the database)
    return spec


class ChildTakenError(InvalidInputError):
    """A fork's child id is taken: the task exists, or another fork is making it at this moment."""


def _check_free(project: Any, child: str, id_name: str) -> None:
    """Refuse ``child`` when a task of that id exists (:class:`ChildTakenError`)."""
    if project.stores.events.last_seq(child) or project.stores.tasks.get(child) is not None:
        raise ChildTakenError(f"task {child!r} already exists in {project.path}; pick another {id_name}")


@contextmanager
def _claimed(project: Any, child: str, id_name: str) -> Iterator[None]:
    """Hold ``child``'s lease while the fork makes it, its id checked again under the lease."""
    _check_free(project, child, id_name)  # (again, just before the lease: the fold took a while)
    with ExitStack() as stack:
        try:
            stack.enter_context(project.stores.leases.hold(child))
        except LeaseHeldError as exc:
            raise ChildTakenError(
                f"task {child!r} is being made by another fork at this moment; pick another {id_name}"
            ) from exc
        _check_free(project, child, id_name)  # (another fork may have made it since the first check)
        yield


def fork_task(
    project: Any,
    task_id: str,
    *,
    at: int | None = None,
    at_step: int | None = None,
    new_task_id: str | None = None,
    why: str = "",
    workspace_at_fork: bool = False,
    workspace: str | Path | None = None,
    spec_update: dict[str, Any] | None = None,
    graph: Any = None,
    id_name: str = "new_task_id",
) -> ForkResult:
    """Fork ``task_id`` at a seq (or the end of an executor step) into a new task (see module doc).

    Args:
        project: The project both tasks are in (a :class:`graphs.Project`).
        task_id: The parent.
        at: The fork seq.
        at_step: Or: the end of executor step N.
        new_task_id: The child's id (default ``<parent>-fork-<fork seq>``).
        why: Why, in words (recorded in ``task.forked``).
        workspace_at_fork: Give the child a copy of the workspace with the parent's own changes
            after the fork undone (:func:`graphs.fork_workspace.workspace_at`).
        workspace: Where that copy goes (default: beside the parent's, named by the child's id).
        spec_update: Keys of the child's registry row to change (``budget``, ``model``, ...).
        graph: The child's graph (None: rebuilt from its registry row).
        id_name: The child id's argument as the caller names it (a flag, ``--task-id``: errors name flags).

    Returns:
        What was made.

    Raises:
        InvalidInputError: The fork point is not one, the child id is taken, a workspace copy
            is asked of a task without a workspace, or ``workspace`` is given without ``workspace_at_fork``.
        UnknownTaskError: The parent is unknown.
        DamagedStoreError: The parent's stored data fails its checks.
    """
    if workspace is not None and not workspace_at_fork:
        raise InvalidInputError(
            f"workspace={str(workspace)!r} is where the copy of workspace_at_fork=True goes, and that is not given; "
            "pass workspace_at_fork=True too, or drop workspace= to share the parent's workspace"
        )
    events = project.stores.events
    point = fork_point(events, task_id, at=at, at_step=at_step, cli=id_name.startswith("--"))
    child = new_task_id or f"{task_id}-fork-{point.seq}"
    _check_free(project, child, id_name)
    state = state_at(project.stores, project.checkpointer, task_id, point.seq)
    spec = _child_spec(project, task_id, graph, spec_update)
    with _claimed(project, child, id_name):
        copy = copy_at_fork(project, task_id, child, spec, point.seq, state, workspace) if workspace_at_fork else None
        written = False
        try:
            if copy is not None:
                spec = {**spec, **copy.spec}
            g = graph if graph is not None else project.task_graph(child, spec=spec)
            e = fork_log(
                events,
                task_id,
                child,
                point.seq,
                why=why,
                workspace=str(copy.root) if copy is not None else "",
                restored=copy.restored if copy is not None else (),
                left=copy.left if copy is not None else None,
            )
            written = True
            folded = apply_event(state, e)
            nxt = _checkpoint(child, folded, point.node, g, bool(spec))
            if spec:
                project.stores.tasks.register(child, spec)
        except BaseException:
            _undo(project, child, written, copy)
            raise
    out = ForkResult(child, task_id, point.seq, folded, nxt, e)
    if copy is not None:
        out.workspace, out.restored, out.left = copy.root, list(copy.restored), dict(copy.left)
    return out
