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
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateUpdate
from pydantic import BaseModel

from context import InvalidInputError, TaskContext, UnknownTaskError, new_event, replay
from context.events import EDITABLE_FIELDS, StateEdited

from .project_errors import NoCheckpointError

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
    return TaskContext.model_validate({**dict(cur), **update})


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
        return values  # the fold of events already appended (e.g. an injected event)
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
        return values
    if past:
        raise InvalidInputError(
            f"update_state: task {task_id!r} has events past its checkpoint (a node run in flight); edit it "
            "when no run is in progress"
        )
    e = new_event(
        "state.edited",
        StateEdited(changes=changes, as_node=as_node),
        actor="user",
        correlation_id=task_id,
    ).model_copy(update={"seq": state.events.cursor + 1})
    appended = events.append(task_id, [e])
    folded = replay(appended, state)
    return {p: getattr(folded, p) for p in TaskContext.model_fields if getattr(folded, p) != getattr(state, p)}


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

    def _left(self) -> dict[str, str]:
        """Thread id -> the checkpoint id this graph object's last run of it ended at."""
        left: dict[str, str] = self.__dict__.setdefault("_taskctx_left", {})
        return left

    def _resume_config(self, input: Any, config: RunnableConfig | None) -> tuple[RunnableConfig | None, str | None]:
        """``config`` with a ``resume_token`` when this run is a resume (see module doc), and the thread id."""
        conf = dict((config or {}).get("configurable") or {})
        tid = conf.get("thread_id")
        if tid is None or self.checkpointer is None or self.taskctx_events is None or conf.get("checkpoint_ns"):
            return config, None  # no thread, no checkpoints, or a subgraph's run inside a parent's
        new_input = not (input is None or isinstance(input, Command))
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

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        """LangGraph's ``stream``, a continued thread recorded as a resume (see module doc)."""
        config, tid = self._resume_config(input, config)
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
        config, tid = await asyncio.to_thread(self._resume_config, input, config)  # (the stores' reads are sync)
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
                if u.as_node is not None and state.identity.task_id:
                    self._refuse_stranding(state, _proposed(state, values) if values else state, u.as_node, snap.next)
                row.append(
                    StateUpdate(record_edit(self.taskctx_events, state, values, u.as_node), u.as_node, u.task_id)
                )
            out.append(row)
        return out

    def _refuse_stranding(self, state: TaskContext, new: TaskContext, as_node: str, nxt: Sequence[str]) -> None:
        """Refuse ``update_state(..., as_node=...)`` when the edges after ``as_node`` send the edited,
        unfinished task to no node: LangGraph would leave it ``running`` with nothing to run next."""
        builder = getattr(self, "builder", None)
        if builder is None or as_node not in builder.nodes or new.control.status in ("completed", "failed"):
            return
        targets = [end for start, end in builder.edges if start == as_node]
        for branch in builder.branches.get(as_node, {}).values():
            try:
                result = branch.path.invoke(new, {"callbacks": None})
            except Exception:  # noqa: BLE001 - a router that needs more than the state: LangGraph decides
                return
            for r in result if isinstance(result, list | tuple) else [result]:
                target = getattr(r, "node", r)
                targets.append(branch.ends.get(target, target) if branch.ends else target)
        if not targets and builder.nodes[as_node].ends:
            return  # (a node routing with Command(goto=...): where it goes is not known ahead)
        if any(t != END for t in targets):
            return
        waits = f"it would continue at {', '.join(map(repr, nxt))}" if nxt else "it has no next node now either"
        raise InvalidInputError(
            f"update_state(as_node={as_node!r}) would leave task {state.identity.task_id!r} running with no next "
            f"node: the graph continues from the edges of {as_node!r} as if it had just run, and they send the task "
            f"to END (the task has not finished); nothing was recorded; leave as_node out (the default: {waits}), "
            f"or name the node whose edges lead where the task should go"
        )

    def bulk_update_state(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> RunnableConfig:
        """LangGraph's ``bulk_update_state``, each update recorded or refused first."""
        return super().bulk_update_state(config, self._recorded(config, supersteps))

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """LangGraph's ``abulk_update_state``, each update recorded or refused first."""
        return await super().abulk_update_state(config, self._recorded(config, supersteps))
