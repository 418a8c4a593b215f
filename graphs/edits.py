"""State written outside a node (``graph.update_state``, e.g. LangGraph Studio's state editor):
recorded in the event log or refused, so the log and the checkpoint always agree.

:class:`TaskGraph` is the compiled graph :func:`graphs.build_orchestrator` returns (a
``CompiledStateGraph`` whose ``bulk_update_state`` / ``abulk_update_state``, and so
``update_state`` / ``aupdate_state``, go through :func:`record_edit` first):

* an update that is the fold of events already in the log (what a harness does after appending
  events itself) passes unchanged;
* an edit of the fields a user may edit (:data:`context.events.EDITABLE_FIELDS`: identity's
  interpreted goal, success criteria, non-goals and hard constraints; the permissions; the
  memory) is appended as ``state.edited`` (actor ``user``, the changed fields), folded, and the
  fold is what the checkpoint gets;
* anything else (the progress, evidence, errors, plan, control, events parts: all derived from the
  log) raises ``InvalidInputError`` naming the field and what may be edited.

Every graph :func:`graphs.compile_graph` compiles is a :class:`TaskGraph`. Its ``stream`` and
``astream`` (and so ``invoke``, ``ainvoke``, ``astream_events``) also record a resume the LangGraph
way: a run that continues a thread (input ``None`` or a ``Command(resume=...)``) from a checkpoint
this graph object did not leave there itself (a new process, another graph, an edit, a crash) is
a resume, as ``taskctx resume`` is: the stored data is checked first
(:func:`graphs.diagnosis.ensure_sound`), and the run gets a ``resume_token`` its first node
records as ``resume.started`` with the freshness check (``fact.stale``) of what changed while the
task was paused, once per resume.

Time travel the LangGraph way (:mod:`graphs.time_travel`): ``get_state_history`` lists every step
of the task's event log (also after its checkpoints were pruned), ``get_state`` of a log point
gives the fold up to it, and a run (input None) or ``update_state`` from an earlier step forks
the task there (:func:`graphs.fork.fork_task`) into a child task, ``<parent>-fork-<seq>`` or
``configurable.fork_task_id``: the run goes on as the child (its result is the child's state),
the edit is recorded on the child and ``update_state`` returns the child's config. The parent is
never changed. A thread whose checkpoint, or a run's input, is another task's state is refused
(:class:`~graphs.time_travel.ForeignStateError`).

A thread holds one task: a new input on a thread whose latest checkpoint holds a task is refused
before anything is written (``InvalidInputError``: continue it with ``invoke(None, config)`` or
use a new thread id), and a run that continues a thread with no checkpoint raises
``UnknownTaskError`` naming the thread. ``update_state(..., as_node=...)`` whose edges send the
unfinished task to ``END`` is refused (it would be left ``running`` with nothing next).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StateUpdate
from pydantic import BaseModel, ValidationError

from context import InvalidInputError, TaskContext, UnknownTaskError, new_event, replay
from context.events import EDITABLE_FIELDS, StateEdited

from .divergence import refuse_stranding
from .edit_refusals import check_owner, past_events, refuse_id_edit, refuse_no_task
from .project_errors import NoCheckpointError
from .time_travel import (
    PastCheckpointError,
    changed_values,
    check_point,
    check_server_thread_id,
    child_holding,
    fork_at,
    merged_history,
    point_of,
    point_seq,
    point_snapshot,
    tuple_cursor,
)

__all__ = ["TaskGraph", "editable_fields", "record_edit"]


def editable_fields() -> str:
    """The editable fields, as ``part.field`` names (for messages and docs)."""
    return ", ".join(f"{p}.{f}" for p, fs in EDITABLE_FIELDS.items() for f in sorted(fs))


def _proposed(cur: TaskContext, values: dict[str, Any]) -> TaskContext:
    update: dict[str, Any] = {}
    for part, v in values.items():
        if part not in TaskContext.model_fields:
            raise InvalidInputError(
                f"update_state: {part!r} is not a part of the TaskContext; editable: {editable_fields()}"
            )
        old = getattr(cur, part)
        if isinstance(v, BaseModel) or v is None or old is None:
            update[part] = v
        else:  # a dict: the fields it names, over the current part
            update[part] = type(old).model_validate({**old.model_dump(mode="json"), **dict(v)})
    try:
        return TaskContext.model_validate({**dict(cur), **update})
    except ValidationError as exc:
        err = exc.errors()[0]  # (e.g. a part given as None)
        where, msg = ".".join(str(x) for x in err["loc"]), err["msg"]
        raise InvalidInputError(f"update_state: {where}: {msg}; editable: {editable_fields()}") from None


def record_edit(
    events: Any, state: TaskContext, values: dict[str, Any] | None, as_node: str | None
) -> dict[str, Any] | None:
    """The values an update of ``state`` (the thread's current TaskContext) should write: ``values``
    unchanged when they are the log's own fold, else the fold of a new ``state.edited`` event
    (appended to ``events``, the event log) with every changed editable field. Raises
    ``InvalidInputError`` for a field that may not be edited."""
    if not values or not state.identity.task_id:
        return values
    task_id = state.identity.task_id
    new = _proposed(state, values)
    past = events.read(task_id, after=state.events.cursor)
    if past and new.events.cursor == past[-1].seq and replay(past, state) == new:
        return {p: getattr(new, p) for p in values}  # the fold of events already appended (e.g. an injected event)
    changes: dict[str, dict[str, Any]] = {}
    for part in TaskContext.model_fields:
        a, b = getattr(state, part), getattr(new, part)
        if a == b:
            continue
        if part not in EDITABLE_FIELDS or a is None or b is None:
            raise InvalidInputError(
                f"update_state: the {part!r} part is derived from the event log and cannot be edited; "
                f"editable: {editable_fields()}"
            )
        fa, fb = a.model_dump(mode="json"), b.model_dump(mode="json")
        diff = {f: fb[f] for f in fb if fb[f] != fa.get(f)}
        bad = sorted(set(diff) - EDITABLE_FIELDS[part])
        if bad:
            raise InvalidInputError(
                f"update_state: {part}.{bad[0]} is recorded by the task's events and cannot be edited; "
                f"editable: {editable_fields()}"
            )
        changes[part] = diff
    if not changes:
        return {}  # (the values as they are: a dict part would be written whole, its other fields reset)
    if past:
        raise InvalidInputError(past_events(task_id, state.events.cursor, past))
    e = new_event(
        "state.edited",
        StateEdited(changes=changes, as_node=as_node),
        actor="user",
        correlation_id=task_id,
    ).model_copy(update={"seq": state.events.cursor + 1})
    appended = events.append(task_id, [e])
    folded = replay(appended, state)
    return {p: getattr(folded, p) for p in TaskContext.model_fields if getattr(folded, p) != getattr(state, p)}


def _as_fork_node(
    forked: tuple[RunnableConfig, str | None], supersteps: Sequence[Sequence[StateUpdate]]
) -> tuple[RunnableConfig, list[list[StateUpdate]]]:
    """The child's config, and ``supersteps`` with each update of no ``as_node`` made as the fork point's node.

    So the edit keeps what runs next at the fork point (LangGraph would infer another node from
    the child's fresh checkpoint).
    """
    config, node = forked
    return config, [[StateUpdate(u.values, u.as_node or node, u.task_id) for u in step] for step in supersteps]


def _thread_only(config: RunnableConfig) -> RunnableConfig:
    """``config`` without its ``checkpoint_id``: the thread's latest checkpoint."""
    conf = {k: v for k, v in (config.get("configurable") or {}).items() if k != "checkpoint_id"}
    return {**config, "configurable": conf}


class _NoRegistry:
    """The task registry of stores that have none (a graph on an event log only): knows no task."""

    def get(self, task_id: str) -> None:
        return None


class _LogOnly:
    """The stores :func:`graphs.diagnosis.ensure_sound` reads, when the graph knows its event log only."""

    def __init__(self, events: Any):
        self.events, self.artifacts, self.tasks = events, None, _NoRegistry()


class TaskGraph(CompiledStateGraph):
    """The compiled taskctx graph: every state update from outside a node is recorded in the
    event log or refused, a run that continues a thread is recorded as a resume (see module
    doc). ``taskctx_events`` is the task's event log, ``taskctx_stores`` its stores (None: the
    event log only)."""

    taskctx_events: Any = None
    taskctx_stores: Any = None

    def copy(self, update: dict[str, Any] | None = None) -> TaskGraph:
        """LangGraph's ``copy`` (``with_config``, the LangGraph Server's checkpointer), keeping the event log.

        Args:
            update: Attributes to replace.

        Returns:
            The copy, with this graph's ``taskctx_events`` and ``taskctx_stores``.
        """
        out = super().copy(update)
        out.taskctx_events, out.taskctx_stores = self.taskctx_events, self.taskctx_stores
        return out

    def _own_thread(self, config: RunnableConfig | None) -> str | None:
        """The thread id of a config this graph reads the log of (None: no log, no thread, or a subgraph's)."""
        conf = (config or {}).get("configurable") or {}
        if self.taskctx_events is None or conf.get("thread_id") is None or conf.get("checkpoint_ns"):
            return None
        return str(conf["thread_id"])

    def get_state_history(  # type: ignore[override]
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """The task's states step by step, derived from its event log (:mod:`graphs.time_travel`).

        Args:
            config: The thread's config (``thread_id``).
            filter: Metadata every snapshot must have.
            before: Only snapshots older than this checkpoint config.
            limit: At most this many snapshots.

        Returns:
            The snapshots, newest first: the checkpoints LangGraph kept, and a log point for every
            other step of the log (also after the checkpoints were pruned).
        """
        tid = self._own_thread(config)
        if tid is None:
            yield from super().get_state_history(config, filter=filter, before=before, limit=limit)
            return
        kept = list(super().get_state_history(_thread_only(config)))
        events = self.taskctx_events.read(tid)
        yield from merged_history(tid, events, kept, filter=filter, before=before, limit=limit)

    async def aget_state_history(  # type: ignore[override]
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """:meth:`get_state_history`, async (the event log is read in a worker thread)."""
        tid = self._own_thread(config)
        if tid is None:
            async for snap in super().aget_state_history(config, filter=filter, before=before, limit=limit):
                yield snap
            return
        kept = [s async for s in super().aget_state_history(_thread_only(config))]
        events = await asyncio.to_thread(self.taskctx_events.read, tid)
        for snap in await asyncio.to_thread(
            merged_history, tid, events, kept, filter=filter, before=before, limit=limit
        ):
            yield snap

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """LangGraph's ``get_state``; a log point's checkpoint id (:func:`graphs.time_travel.point_checkpoint_id`) gives the fold up to its seq.

        Args:
            config: The thread's config, with a ``checkpoint_id`` for an earlier state.
            subgraphs: Include the subgraphs' states (LangGraph's argument).

        Returns:
            The snapshot.
        """
        config = self._in_child(config) or config
        point = self._log_point(config)
        if point is None:
            return super().get_state(config, subgraphs=subgraphs)
        return point_snapshot(point[0], self.taskctx_events.read(point[0]), point[1])

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """:meth:`get_state`, async."""
        config = await asyncio.to_thread(self._in_child, config) or config
        point = await asyncio.to_thread(self._log_point, config)
        if point is None:
            return await super().aget_state(config, subgraphs=subgraphs)
        return await asyncio.to_thread(lambda: point_snapshot(point[0], self.taskctx_events.read(point[0]), point[1]))

    def _log_point(self, config: RunnableConfig | None) -> tuple[str, int] | None:
        """``(thread, seq)`` when ``config``'s checkpoint id is a log point of this graph's task (None: it is not one).

        Raises:
            CheckpointInputError: The log point is past the end of the task's log, or its thread has no task.
        """
        tid = self._own_thread(config)
        cid = ((config or {}).get("configurable") or {}).get("checkpoint_id")
        seq = point_seq(cid)
        if tid is None or seq is None:
            return None
        check_point(tid, str(cid), seq, self.taskctx_events.last_seq(tid))
        return tid, seq

    def _past(self, config: RunnableConfig | None) -> tuple[str, int, int] | None:
        """``(thread, seq, latest seq)`` when ``config`` names a checkpoint at an earlier step than the thread's latest."""
        tid = self._own_thread(config)
        conf = (config or {}).get("configurable") or {}
        if tid is None or self.checkpointer is None or not conf.get("checkpoint_id"):
            return None
        self._log_point(config)
        head = self.checkpointer.get_tuple(_thread_only({"configurable": {"thread_id": tid}}))
        kept = None
        if point_seq(conf["checkpoint_id"]) is None:
            kept = self.checkpointer.get_tuple(
                {"configurable": {"thread_id": tid, "checkpoint_id": conf["checkpoint_id"]}}
            )
            if kept is None and head is not None:
                raise PastCheckpointError(
                    f"checkpoint {conf['checkpoint_id']} of task {tid!r} is not kept: the thread holds no checkpoint "
                    "of that id (pruned: the taskctx commands keep a thread's latest checkpoint only; or never one of "
                    "its ids); pick its step from get_state_history, which lists every step of the event log with a "
                    "checkpoint id that stays valid"
                )
        last = self.taskctx_events.last_seq(tid)
        seq = point_of(config, kept, head, last)
        if seq is None:
            return None
        now = tuple_cursor(head)
        return tid, seq, last if now is None else now

    def _forked(self, what: str, input: Any, config: RunnableConfig | None) -> tuple[RunnableConfig, str | None] | None:
        """The child's config, and the fork point's node, when ``config`` names an earlier step: the task forked there.

        None when it names no earlier step (see module doc). A run from an earlier step must have input None (a new
        input or a ``Command`` there is refused with :class:`~graphs.time_travel.PastCheckpointError`).
        """
        past = self._past(config)
        if past is None:
            return None
        tid, seq, now = past
        conf = dict((config or {}).get("configurable") or {})
        cid = conf.pop("checkpoint_id")
        if seq == 0:
            raise PastCheckpointError(
                f"{what}: checkpoint {cid} of task {tid!r} is its input, before its first node run (seq 0): there "
                f"is nothing to fork; start a new task with that input (graphs.new_task(..., task_id=<a new id>))"
            )
        if input is not None:
            raise PastCheckpointError(
                f"{what}: checkpoint {cid} of task {tid!r} is its state at seq {seq}, an earlier step than its latest "
                f"(seq {now}); a run from there forks the task and takes input None (got {type(input).__name__}): "
                "invoke(None, config) to fork and run the child, or update_state(config, values) to fork it with an edit"
            )
        wanted = conf.pop("fork_task_id", None)
        if wanted is not None and "assistant_id" in conf:  # (a LangGraph Server run: its thread ids are UUIDs)
            check_server_thread_id(str(wanted), "fork_task_id")
        child, node = fork_at(self, tid, seq, wanted, why=f"LangGraph {what} from checkpoint {cid}")
        return {**(config or {}), "configurable": {**conf, "thread_id": child}}, node

    def _left(self) -> dict[str, str]:
        """Thread id -> the checkpoint id this graph object's last run of it ended at."""
        return self.__dict__.setdefault("_taskctx_left", {})  # type: ignore[no-any-return]

    def _resume_config(self, input: Any, config: RunnableConfig | None) -> tuple[RunnableConfig | None, str | None]:
        """``config`` with a ``resume_token`` when this run is a resume (see module doc), and the thread id."""
        conf = dict((config or {}).get("configurable") or {})
        tid = conf.get("thread_id")
        if tid is None or self.checkpointer is None or self.taskctx_events is None or conf.get("checkpoint_ns"):
            return config, None  # no thread, no checkpoints, or a subgraph's run inside a parent's
        new_input = not (input is None or isinstance(input, Command))
        if new_input:
            check_owner(str(tid), input, "the run's input")
        if new_input and "checkpoint_id" not in conf:
            self._refuse_new_input(str(tid))
        if "resume_token" in conf or conf.get("__taskctx_not_resume") or new_input:
            return config, str(tid)  # the caller decided (taskctx resume; run_graph(resume=False)), or a new input
        tup = self.checkpointer.get_tuple(
            {"configurable": {k: conf[k] for k in ("thread_id", "checkpoint_id") if k in conf}}
        )
        if tup is None:
            if "checkpoint_id" not in conf:
                self._refuse_unknown_thread(str(tid), input)
            return config, str(tid)
        check_owner(str(tid), tup.checkpoint.get("channel_values"), "its checkpoint")
        cp = tup.config["configurable"].get("checkpoint_id")
        if cp == self._left().get(str(tid)):
            return config, str(tid)  # this graph stopped the thread there itself: the same caller goes on
        if not conf.pop("__taskctx_checked", False):
            from .diagnosis import ensure_sound

            ensure_sound(self.taskctx_stores or _LogOnly(self.taskctx_events), self.checkpointer, str(tid), full=False)
        conf.update(resume_token=uuid.uuid4().hex, resumed_from_checkpoint=cp)
        return {**(config or {}), "configurable": conf}, str(tid)

    def _refuse_new_input(self, tid: str) -> None:
        """Refuse a new input on thread ``tid`` when its latest checkpoint already holds a task.

        LangGraph would start the graph again on the thread's state, over the task's event log:
        refused before any checkpoint is written, so the task stays resumable.
        """
        tup = self.checkpointer.get_tuple({"configurable": {"thread_id": tid}})  # type: ignore[union-attr]
        identity = (tup.checkpoint.get("channel_values") or {}).get("identity") if tup is not None else None
        held = getattr(identity, "task_id", None) or (identity.get("task_id") if isinstance(identity, dict) else None)
        if not held:
            return
        control = (tup.checkpoint.get("channel_values") or {}).get("control")  # type: ignore[union-attr]
        status = getattr(control, "status", None) or "running"
        go_on = (
            f"task {held!r} has ended; "
            if status in ("completed", "failed")
            else f"to continue task {held!r} call invoke(None, config) (or Command(resume=...) when it waits for "
            "an answer); "
        )
        raise InvalidInputError(
            f"thread {tid!r} already holds task {held!r} ({status}); a new input would start the graph again "
            f"over that task's event log, so nothing was run or written; {go_on}to start a new task use a new "
            "thread_id (graphs.thread_config(<new task id>))"
        )

    def _refuse_unknown_thread(self, tid: str, input: Any) -> None:
        """Refuse a resume (input ``None`` or a ``Command``) of a thread with no checkpoint."""
        last = self.taskctx_events.last_seq(tid)
        if last:
            raise NoCheckpointError(tid, getattr(self.taskctx_stores, "path", "the event log"), last)
        what = "invoke(None, config)" if input is None else "Command(resume=...)"
        raise UnknownTaskError(
            f"thread {tid!r} has no checkpoint and no task of that id has events, so {what} has nothing to continue; "
            f"check the thread_id (taskctx list shows the tasks), or start a task on it with "
            f"invoke(graphs.new_task(request, {tid!r}), config)"
        )

    def _ended(self, tid: str | None, left: bool) -> None:
        """Remember where the run left thread ``tid`` (``left``), or forget it (the run failed)."""
        if tid is None or self.checkpointer is None:
            return
        tup = self.checkpointer.get_tuple({"configurable": {"thread_id": tid}}) if left else None
        if tup is None:
            self._left().pop(tid, None)
        else:
            self._left()[tid] = tup.config["configurable"]["checkpoint_id"]

    def _in_child(self, config: RunnableConfig | None) -> RunnableConfig | None:
        """``config`` on the child's thread when its checkpoint id is not its thread's but a child's.

        Studio's "Fork" runs, reads and edits the checkpoint ``update_state`` returned on the thread
        it edited; every path (``stream``, ``get_state``, ``update_state``, sync and async) goes to the child.
        """
        tid, conf = self._own_thread(config), (config or {}).get("configurable") or {}
        cid = conf.get("checkpoint_id")
        if tid is None or self.checkpointer is None or not cid or point_seq(cid) is not None:
            return config
        if self.checkpointer.get_tuple({"configurable": {"thread_id": tid, "checkpoint_id": cid}}) is not None:
            return config
        child = child_holding(self.taskctx_events, self.checkpointer, tid, str(cid))
        return config if child is None else {**(config or {}), "configurable": {**conf, "thread_id": child}}

    def _latest(self, input: Any, config: RunnableConfig | None) -> RunnableConfig | None:
        """The child's config when ``config`` names an earlier step (:meth:`_forked`) or a child's checkpoint
        (:meth:`_in_child`); a log point at the latest step is the thread's latest."""
        config = self._in_child(config)
        forked = self._forked("run", input, config)
        if forked is not None:
            return forked[0]
        return _thread_only(config) if config is not None and self._log_point(config) is not None else config

    def _named(self, input: Any, config: RunnableConfig | None, tid: str | None) -> RunnableConfig | None:
        """``config`` with the root run's name, tags and metadata of a task's invocation (as
        :func:`graphs.tracing.root_run_config` gives them); the caller's own run name, tags and
        metadata are kept over them."""
        if tid is None or "command" in ((config or {}).get("metadata") or {}):
            return config  # no task thread, or the taskctx runner named the run itself
        from .tracing import root_run_config

        conf = (config or {}).get("configurable") or {}
        lin = self.taskctx_events.lineage(tid) if hasattr(self.taskctx_events, "lineage") else None
        roles = [n for n in self.nodes if n not in ("__start__", "tools")]
        root = root_run_config(
            tid,
            "resume_token" in conf or input is None,  # (None: it continues the thread, also in one process)
            isinstance(input, Command),
            roles,
            (lin.parent, lin.fork_seq) if lin is not None else None,
        )
        given = config or {}
        return {
            **given,
            "run_name": given.get("run_name") or root["run_name"],  # the caller's name wins
            "tags": [*root["tags"], *(t for t in given.get("tags") or [] if t not in root["tags"])],
            "metadata": {**root["metadata"], **(given.get("metadata") or {})},
        }

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        """LangGraph's ``stream``, a continued thread recorded as a resume (see module doc)."""
        config, tid = self._resume_config(input, self._latest(input, config))
        config = self._named(input, config, tid)
        left = False
        try:
            yield from super().stream(input, config, **kwargs)
            left = True
        except GeneratorExit:  # the caller stopped reading (a stop after N steps): the thread is left there
            left = True
            raise
        finally:
            self._ended(tid, left)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        """LangGraph's ``astream``, a continued thread recorded as a resume (see module doc)."""
        config = await asyncio.to_thread(self._latest, input, config)
        config, tid = await asyncio.to_thread(self._resume_config, input, config)  # (the stores' reads are sync)
        config = await asyncio.to_thread(self._named, input, config, tid)
        left = False
        try:
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
            left = True
        except GeneratorExit:
            left = True
            raise
        finally:
            await asyncio.to_thread(self._ended, tid, left)

    def _recorded(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> list[list[StateUpdate]]:
        if self.taskctx_events is None:
            return [list(s) for s in supersteps]
        out: list[list[StateUpdate]] = []
        for step in supersteps:
            row = []
            for u in step:
                snap = self.get_state(config)
                state = TaskContext.model_validate(snap.values) if snap.values else TaskContext()
                values = u.values if isinstance(u.values, dict) or u.values is None else dict(u.values)
                if (tid := self._own_thread(config)) is not None:
                    check_owner(tid, values, "update_state's values")
                    if not snap.values:
                        refuse_no_task(tid, values, self.taskctx_events.last_seq(tid))
                if u.as_node is not None and state.identity.task_id:
                    refuse_stranding(
                        getattr(self, "builder", None),
                        state,
                        _proposed(state, values) if values else state,
                        u.as_node,
                        snap.next,
                    )
                row.append(
                    StateUpdate(record_edit(self.taskctx_events, state, values, u.as_node), u.as_node, u.task_id)
                )
            out.append(row)
        return out

    def _edits_of(self, past: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> list[list[StateUpdate]]:
        """``supersteps`` with each update cut to what it changes of the earlier step ``past`` names (a fork's edit)."""
        state = self.get_state(past).values
        return [[StateUpdate(changed_values(state, u.values), u.as_node, u.task_id) for u in s] for s in supersteps]

    def _refuse_id_edits(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> None:
        """Refuse an edit of the task's id, on the thread it names (before a fork at an earlier step)."""
        if (tid := self._own_thread(config)) is not None:
            for u in (u for step in supersteps for u in step):
                refuse_id_edit(tid, u.values, editable_fields())

    def bulk_update_state(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> RunnableConfig:
        """LangGraph's ``bulk_update_state``, each update recorded or refused first."""
        config = self._in_child(config) or config
        self._refuse_id_edits(config, supersteps)
        forked = self._forked("update_state", None, config)
        if forked is None:  # (a log point at the latest step: the thread's latest)
            config = _thread_only(config) if self._log_point(config) is not None else config
            return super().bulk_update_state(config, self._recorded(config, supersteps))
        past, (config, supersteps) = config, _as_fork_node(forked, supersteps)
        try:
            supersteps = self._edits_of(past, supersteps)
            return super().bulk_update_state(config, self._recorded(config, supersteps))
        except BaseException:
            self._discard(config)  # a refused edit makes no child
            raise

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """LangGraph's ``abulk_update_state``, each update recorded or refused first."""
        config = await asyncio.to_thread(self._in_child, config) or config
        self._refuse_id_edits(config, supersteps)
        forked = await asyncio.to_thread(self._forked, "update_state", None, config)
        if forked is None:
            config = _thread_only(config) if await asyncio.to_thread(self._log_point, config) is not None else config
            return await super().abulk_update_state(config, await asyncio.to_thread(self._recorded, config, supersteps))
        past, (config, supersteps) = config, _as_fork_node(forked, supersteps)
        try:
            supersteps = await asyncio.to_thread(self._edits_of, past, supersteps)
            return await super().abulk_update_state(config, await asyncio.to_thread(self._recorded, config, supersteps))
        except BaseException:
            await asyncio.to_thread(self._discard, config)
            raise

    def _discard(self, config: RunnableConfig) -> None:
        """Take back the child a fork for ``update_state`` made, when its edit was refused: its
        checkpoints, its lone ``task.forked`` row and its registry row."""
        child = str((config.get("configurable") or {})["thread_id"])
        if self.checkpointer is not None:
            self.checkpointer.delete_thread(child)
        if self.taskctx_events is not None:
            self.taskctx_events.discard_fork(child)
        tasks = getattr(self.taskctx_stores, "tasks", None)
        if tasks is not None and hasattr(tasks, "unregister"):
            tasks.unregister(child)
