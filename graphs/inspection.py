"""What ``taskctx inspect`` shows of a task, as data: :class:`TaskView` (:func:`inspect_task`).

Read-only: it reads the event log, the registry row and the checkpoints, never writes. The text
view of a :class:`TaskView` is :func:`graphs.report.render_view`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from context import PAYLOAD_MODELS, DamagedStoreError, Event, TaskContext, TaskInfo, find_task, replay
from context.verify import check_events

from .diagnosis import checkpoint_findings, diagnose, ensure_sound, quick_state, unshowable

__all__ = ["BUILT_FIELDS", "VIEW_KINDS", "TaskView", "UnshowableTaskError", "inspect_task"]

#: The kinds the view reads from the log (without ``full``).
VIEW_KINDS = ["context.built", "permission.requested", "permission.denied", "permission.granted", "resume.started"]
#: What the view reads of a ``context.built`` payload (its model calls by role and provider usage;
#: not the manifest's blocks, most of each payload).
BUILT_FIELDS = ["role", "call", "prompt_tokens", "blocks_in", "blocks_out", "usage"]


@dataclass(frozen=True)
class TaskView:
    """A task as ``taskctx inspect`` shows it (``inspect --json`` prints :attr:`state`).

    Attributes:
        task_id: The task.
        state: Its state folded from the log (None: not started, no events yet).
        events: The events the view lists, in seq order: with ``whole_log``, every event;
            otherwise those of :data:`VIEW_KINDS`, ``context.built`` with :data:`BUILT_FIELDS` only.
        checkpoints: The newest checkpoint ids of its thread (at most 5), newest first.
        findings: Damage found while reading it (one line each; empty: sound as far as read).
        spec: Its task registry row (how a taskctx command started it; None: it has none).
        whole_log: Whether the whole log was read and folded.
        input_state: For a task not started, the input state it was started with (from its
            first checkpoint), when there is one.
        forked: A fork's ``task.forked`` payload (parent, fork seq, why, its workspace; None:
            not a fork).
        children: The tasks forked from it, ``(child id, fork seq)``.
        after_fork: For a fork that shares its parent's workspace: the parent's side effects
            after the fork, one line each (not undone).
    """

    task_id: str
    state: TaskContext | None
    events: list[Event] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    spec: dict[str, Any] | None = None
    whole_log: bool = False
    input_state: TaskContext | None = None
    forked: dict[str, Any] | None = None
    children: list[tuple[str, int]] = field(default_factory=list)
    after_fork: list[str] = field(default_factory=list)

    @property
    def started(self) -> bool:
        """Whether the task has recorded anything (a state folded from its log)."""
        return self.state is not None

    @property
    def stopped(self) -> dict[str, Any] | None:
        """Why a run command stopped it (the registry row's ``stopped``), or None."""
        stop = (self.spec or {}).get("stopped")
        return stop if isinstance(stop, dict) else None


class UnshowableTaskError(DamagedStoreError):
    """A task too damaged to show: no event can be read, or the readable ones do not fold.

    Attributes:
        shown_findings: The findings read before the view gave up (the CLI prints them as
            warnings first; empty when no event could be read).
    """

    def __init__(self, what: str, task_id: str, shown_findings: list[str]):
        """Say that ``task_id`` cannot be shown and why (``what``)."""
        super().__init__(f"{what}; check the database for every finding", task_id=task_id, what=what, inspectable=False)
        self.shown_findings = shown_findings


def view_events(log: Any, task_id: str) -> list[Event]:
    """The events the view lists, in seq order (see :attr:`TaskView.events`).

    Args:
        log: The task's event log.
        task_id: The task.

    Returns:
        The ``context.built`` events with only :data:`BUILT_FIELDS` in their payloads
        (extracted in SQL), and the other :data:`VIEW_KINDS` whole.
    """
    built = log.read(task_id, kinds=["context.built"], fields=BUILT_FIELDS)
    rest = log.read(task_id, kinds=[k for k in VIEW_KINDS if k != "context.built"])
    return sorted([*built, *rest], key=lambda e: e.seq)


def _checkpoints(checkpointer: Any, task_id: str) -> list[str]:
    cfg = {"configurable": {"thread_id": task_id}}
    return [c.config["configurable"]["checkpoint_id"] for c in checkpointer.list(cfg, limit=5)]


def _input_state(checkpointer: Any, task_id: str) -> TaskContext | None:
    """The input a registered task was started with, from its first checkpoint (None: none)."""
    snap = checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
    if snap is None or not snap.checkpoint["channel_values"]:
        return None
    channels = snap.checkpoint["channel_values"]
    return TaskContext.model_validate({k: channels[k] for k in TaskContext.model_fields if k in channels})


def inspect_task(stores: Any, checkpointer: Any, task_id: str, *, full: bool = False) -> TaskView:
    """Read what ``taskctx inspect`` shows of ``task_id``.

    A long log that passes the bounded check (:func:`graphs.diagnosis.quick_state`) is shown from
    the checkpoint's state with the tail folded on, reading only the events the view lists;
    otherwise (``full``, damage, a short log) the whole log is read, checked and folded.

    Args:
        stores: The project's stores.
        checkpointer: The project's checkpointer.
        task_id: The task.
        full: Read and fold the whole log (``inspect --all`` and ``--json``).

    Returns:
        The view; its ``findings`` list what is damaged when the task can still be shown.

    Raises:
        UnknownTaskError: Neither the registry nor the log knows the task.
        UnshowableTaskError: The task is too damaged to show.
        DamagedStoreError: A registered task with no event whose checkpoint has folded events
            (its rows were deleted), as ``doctor`` and ``resume`` judge it.
    """
    damage: list[str] = []
    info: TaskInfo | None = None
    spec: dict[str, Any] | None = None
    try:
        if stores.events.last_seq(task_id):  # the log is checked and folded once, below
            spec = stores.tasks.get(task_id)
        else:
            info = find_task(stores, task_id)
            spec = info.spec
    except DamagedStoreError as exc:  # reported with what is left
        damage = list(exc.problems)
    if info is not None and not info.started:  # registered; its first node failed before it recorded anything
        ensure_sound(stores, checkpointer, task_id)  # a checkpoint that has folded events the log lost: damage
        return TaskView(task_id, None, spec=info.spec or {}, input_state=_input_state(checkpointer, task_id))
    quick = quick_state(stores, checkpointer, task_id) if not (full or damage) else None
    if quick is not None and quick[0] is not None:
        events = view_events(stores.events, task_id)
        view = TaskView(task_id, quick[0], events, _checkpoints(checkpointer, task_id), spec=spec)
    else:
        state, events, found = _fold_checked(stores, task_id, damage)
        # the checkpoint against the log's fold, as doctor and resume compare them (an altered payload)
        if found:  # a damaged log: doctor's comparison of what is left (it reads the rows as they are)
            found += [
                f for f in diagnose(stores, checkpointer, task_id, artifacts=False) if f.startswith("checkpoint:")
            ]
        else:
            found = checkpoint_findings(checkpointer, task_id, events)
        view = TaskView(task_id, state, events, _checkpoints(checkpointer, task_id), found, spec, whole_log=True)
    return _with_lineage(stores, view)


def _with_lineage(stores: Any, view: TaskView) -> TaskView:
    """The view with the task's parent, fork point and children (:mod:`context.lineage`)."""
    from context.lineage import NOT_RUN_KINDS, children_of, fork_status

    from .fork_workspace import no_workspace, shared_side_effects

    kids = children_of(stores.events, view.task_id)
    try:
        lin = stores.events.lineage(view.task_id)
    except DamagedStoreError:  # (named in the findings already)
        lin = None
    if lin is None:
        return replace(view, children=kids) if kids else view
    forked = stores.events.read(view.task_id, after=lin.fork_seq, limit=1)[0].payload
    none = forked.get("workspace") or no_workspace(view.spec, lin.parent)
    shared = [] if none else shared_side_effects(stores, lin.parent, lin.fork_seq)
    state = view.state
    if state is not None:
        quiet = stores.events.read(view.task_id, after=lin.fork_seq, kinds=list(NOT_RUN_KINDS), fields=["seq"])
        status = fork_status(state.control.status, len(quiet) == stores.events.last_seq(view.task_id) - lin.fork_seq)
        state = state.model_copy(update={"control": state.control.model_copy(update={"status": status})})
    return replace(view, state=state, forked=forked, children=kids, after_fork=shared)


def _fold_checked(stores: Any, task_id: str, damage: list[str]) -> tuple[TaskContext, list[Event], list[str]]:
    """The whole log, checked and folded: ``(state, events, findings)``.

    The whole log, checked and folded: ``(state, events, findings)``; a gap or an unknown
    kind leaves the readable events of known kinds (named in the findings).
    """
    try:
        events = stores.events.read(task_id)
        found = check_events(events)
    except DamagedStoreError as exc:  # a gap: show what is left, after saying so
        found = exc.problems
        events = stores.events.read(task_id, kinds=list(PAYLOAD_MODELS))
    found = damage + [f for f in found if f not in damage]
    if not events:
        what = f"task {task_id!r} is damaged ({found[0] if found else 'no event can be read'}) and cannot be shown"
        raise UnshowableTaskError(what, task_id, [])
    # one judgement with report and resume (graphs.diagnosis.unshowable): the row that blocks the view
    block = unshowable(stores, task_id) if found else None
    if block is not None and block not in found:
        found.append(block)
    try:
        if block is not None:
            raise ValueError(block)
        return replay(events), events, found
    except Exception as exc:  # a payload its kind does not allow: nothing trustworthy to show
        what = f"task {task_id!r} is damaged ({found[0] if found else type(exc).__name__}) and cannot be shown" + (
            f" ({block.removeprefix('event log: ')} blocks it)" if block and block != found[0] else ""
        )
        raise UnshowableTaskError(what, task_id, found) from exc
