"""The async twins of :meth:`graphs.Project.run` and :meth:`graphs.Project.resume`.

:class:`AsyncProject` gives :class:`graphs.Project` ``arun`` and ``aresume``: the same checks, lease,
``resume.started``, approvals loop and result as the sync methods, the graph run with LangGraph's
``astream`` on the caller's event loop. What touches the stores (the lease, the checks of the stored
data, reading the events back, pruning) runs in a worker thread (``asyncio.to_thread``), so the event
loop never waits on the database.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from context import Event, InvalidInputError, Permissions, TaskContext
from context.held_secrets import hold_secrets, secret_note
from context.secrets import take_secrets

from .checkpoint import PRUNE_EVERY, prune_thread
from .diagnosis import Checked, ensure_sound
from .orchestrator import new_task
from .run_setup import run_config, thread_config, tools_steps
from .runner import KEEP_CALLS, RunResult, Stores, tool_parameters
from .task_secrets import secrets_to_resume

if TYPE_CHECKING:
    from langgraph.types import Command

    from .runner import ResumePoint

__all__ = ["AsyncAnswer", "AsyncProject", "arun_graph", "arun_with_approvals", "start_state"]

#: An approval answerer for the async runs: as :data:`graphs.project.Answer`, or a coroutine function.
AsyncAnswer = Callable[[dict[str, Any]], "dict[str, Any] | None | Awaitable[dict[str, Any] | None]"]


def start_state(
    project: Any,
    request_or_task: str | TaskContext,
    task_id: str | None,
    constraints: list[str] | None,
    permissions: Permissions | None,
    secrets: dict[str, str] | None = None,
) -> tuple[TaskContext, dict[str, str]]:
    """The state a new run starts: ``request_or_task`` as given, or a request made a task.

    Secrets (given, the project's, and those the detector finds in a request) become placeholders
    in the request (:func:`context.secrets.take_secrets`); the caller holds the returned values for
    the run (:func:`context.held_secrets.hold_secrets`).

    Args:
        project: The project (its ``stores``, ``path`` and ``secrets``).
        request_or_task: What the agent should do, or a state made by :func:`graphs.new_task`.
        task_id: The task's id (a request only; default ``task-<8 hex>``).
        constraints: Hard constraints, verbatim (a request only).
        permissions: The task's permissions (a request only).
        secrets: Name -> value of secrets for the task.

    Returns:
        ``(the new task's state, name -> value of the secrets to hold)``.

    Raises:
        InvalidInputError: The task already exists, ``task_id`` contradicts the state's, or a
            secret is not valid (:class:`context.MissingSecretError`: a state's placeholder has no value).
    """
    given = {**getattr(project, "secrets", {}), **(secrets or {})}
    if isinstance(request_or_task, TaskContext):
        task, held = request_or_task, secrets_to_resume(request_or_task, given, {})
        if task_id is not None and task_id != task.identity.task_id:
            raise InvalidInputError(f"task_id {task_id!r} differs from the state's {task.identity.task_id!r}")
    else:
        request, held = take_secrets(request_or_task, given)
        tid = task_id if task_id is not None else f"task-{uuid.uuid4().hex[:8]}"
        with hold_secrets(held):  # the values are sealed in the state, as in everything stored
            notes = [secret_note(n) for n in held]
            task = new_task(request, tid, constraints=[*(constraints or []), *notes], permissions=permissions)
    tid = task.identity.task_id
    if project.stores.events.last_seq(tid):
        raise InvalidInputError(f"task {tid!r} already exists in {project.path}; resume it or pick another task id")
    return task, held


async def _astream(
    graph: Any,
    stores: Stores,
    task_id: str,
    input: Any,
    config: dict[str, Any],
    stop_after: int | None,
    on_event: Callable[[Event], None] | None,
    prune: bool,
) -> tuple[bool, list[Event], int]:
    """``graphs.runner._stream`` with ``astream``: ``(stopped early, the last calls, how many)``."""
    from .tracing import paused_runs_traced, root_run_config

    roles = [n for n in graph.nodes if n not in ("__start__", "tools")]
    answering = input is not None and not isinstance(input, TaskContext)
    root = root_run_config(task_id, "resume_token" in config["configurable"], answering, roles)
    config = {**config, **root, "metadata": {**root["metadata"], **config.get("metadata", {})}}
    seen = await asyncio.to_thread(stores.events.last_seq, task_id)
    calls: collections.deque[Event] = collections.deque(maxlen=KEEP_CALLS)
    n_calls, stopped, supersteps = 0, False, 0
    try:
        with paused_runs_traced():
            stream = graph.astream(input, config, stream_mode="updates", durability="sync")
            async with contextlib.aclosing(stream):
                async for update in stream:
                    supersteps += 1
                    if prune and supersteps % PRUNE_EVERY == 0:
                        await asyncio.to_thread(prune_thread, graph.checkpointer, task_id)
                    new = await asyncio.to_thread(stores.events.read, task_id, after=seen)
                    if new:
                        seen = new[-1].seq
                        for e in new:
                            if e.kind == "context.built":
                                calls.append(e)
                                n_calls += 1
                            if on_event:
                                on_event(e)
                    steps = tools_steps(update) if stop_after is not None else None
                    if steps is not None and stop_after is not None and steps >= stop_after:
                        stopped = True
                        break
    except BaseException:
        if prune:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(prune_thread, graph.checkpointer, task_id)
        raise
    if prune:
        await asyncio.to_thread(prune_thread, graph.checkpointer, task_id)
    return stopped, list(calls), n_calls


async def arun_graph(
    graph: Any,
    stores: Stores,
    task_id: str,
    input: TaskContext | Command | None,
    *,
    stop_after: int | None = None,
    resume: bool | None = None,
    on_event: Callable[[Event], None] | None = None,
    prune: bool = False,
    checked: Checked | None = None,
) -> RunResult:
    """:func:`graphs.runner.run_graph` with ``astream``; the caller holds the task's lease.

    Args:
        graph: As in :func:`graphs.runner.run_graph`.
        stores: As in :func:`graphs.runner.run_graph`.
        task_id: As in :func:`graphs.runner.run_graph`.
        input: As in :func:`graphs.runner.run_graph`.
        stop_after: As in :func:`graphs.runner.run_graph`.
        resume: As in :func:`graphs.runner.run_graph`.
        on_event: As in :func:`graphs.runner.run_graph`.
        prune: As in :func:`graphs.runner.run_graph`.
        checked: As in :func:`graphs.runner.run_graph`.

    Returns:
        How the run ended.

    Raises:
        UnknownTaskError: ``resume`` of a thread that has no checkpoint.
        InvalidInputError: ``input`` is a new task's state but ``task_id`` already has events.
        DamagedStoreError: Continuing a thread whose stored data fails its checks.
    """
    from langgraph.types import Command

    if isinstance(input, TaskContext) and (seen := await asyncio.to_thread(stores.events.last_seq, task_id)):
        raise InvalidInputError(
            f"task {task_id!r} already has {seen} events in this database: continue it with "
            f"Project.aresume({task_id!r}), or start the new task under another task id"
        )
    if checked is None and (resume or input is None or isinstance(input, Command)):
        checked = await asyncio.to_thread(ensure_sound, stores, graph.checkpointer, task_id, full=False)
    config = await asyncio.to_thread(run_config, graph, stores, task_id, resume, checked)
    stopped, calls, n_calls = await _astream(graph, stores, task_id, input, config, stop_after, on_event, prune)
    snap = await graph.aget_state(thread_config(task_id))
    return RunResult(
        task_id=task_id,
        state=TaskContext.model_validate(snap.values),
        next_nodes=tuple(snap.next),
        stopped_early=stopped,
        calls=calls,
        interrupts=[] if stopped else [i.value for i in (snap.interrupts or ())],
        n_calls=n_calls,
    )


async def arun_with_approvals(
    graph: Any,
    stores: Stores,
    task_id: str,
    input: TaskContext | Command | None,
    *,
    answer: AsyncAnswer,
    stop_after: int | None = None,
    resume: bool | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
    prune: bool = False,
    checked: Checked | None = None,
    lease_owner: str | None = None,
) -> RunResult:
    """:func:`graphs.runner.run_with_approvals` with ``astream``, the task's lease held throughout.

    Args:
        graph: As in :func:`graphs.runner.run_with_approvals`.
        stores: As in :func:`graphs.runner.run_with_approvals`.
        task_id: As in :func:`graphs.runner.run_with_approvals`.
        input: As in :func:`graphs.runner.run_with_approvals`.
        answer: As in :func:`graphs.runner.run_with_approvals`; it may be a coroutine function.
        stop_after: As in :func:`graphs.runner.run_with_approvals`.
        resume: As in :func:`graphs.runner.run_with_approvals`.
        on_event: As in :func:`graphs.runner.run_with_approvals`.
        on_request: As in :func:`graphs.runner.run_with_approvals`.
        prune: As in :func:`graphs.runner.run_with_approvals`.
        checked: As in :func:`graphs.runner.run_with_approvals`.
        lease_owner: As in :func:`graphs.runner.run_with_approvals` (the lease is entered in a
            worker thread: the owner token, not the thread, makes the nested holds one run's).

    Returns:
        How the last run ended.

    Raises:
        LeaseHeldError: Another live run (another process, or another run of this one) holds the
            task's lease; nothing ran.
    """
    from langgraph.types import Command

    held = stores.leases.hold(task_id, lease_owner)
    await asyncio.to_thread(held.__enter__)
    try:
        kw: dict[str, Any] = {"stop_after": stop_after, "on_event": on_event, "prune": prune}
        result = await arun_graph(graph, stores, task_id, input, resume=resume, checked=checked, **kw)
        while result.waiting is not None:
            if on_request:
                on_request(result.waiting)
            params = tool_parameters(graph, str(result.waiting.get("tool")))
            reply = answer(result.waiting if params is None else {**result.waiting, "parameters": params})
            if inspect.isawaitable(reply):
                reply = await reply
            if reply is None:
                break
            if "request_id" in result.waiting and "request_id" not in reply:
                reply = {**reply, "request_id": result.waiting["request_id"]}
            result = await arun_graph(graph, stores, task_id, Command(resume=reply), **kw)
    except BaseException as exc:
        await asyncio.to_thread(held.__exit__, type(exc), exc, exc.__traceback__)
        raise
    await asyncio.to_thread(held.__exit__, None, None, None)
    return result


def _pending(request: dict[str, Any]) -> None:
    """Every approval request stays pending."""
    return None


class AsyncProject:
    """``arun`` and ``aresume``, the async twins of ``run`` and ``resume`` (mixed into :class:`graphs.Project`)."""

    stores: Stores
    checkpointer: Any

    async def arun(
        self,
        graph: Any,
        request_or_task: str | TaskContext,
        *,
        task_id: str | None = None,
        max_steps: int | None = None,
        approvals: AsyncAnswer | None = None,
        constraints: list[str] | None = None,
        permissions: Permissions | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        prune: bool = False,
        secrets: dict[str, str] | None = None,
    ) -> RunResult:
        """:meth:`graphs.Project.run`, the graph run with ``astream`` on the caller's event loop.

        Args:
            graph: As in :meth:`graphs.Project.run`.
            request_or_task: As in :meth:`graphs.Project.run`.
            task_id: As in :meth:`graphs.Project.run`.
            max_steps: As in :meth:`graphs.Project.run`.
            approvals: As in :meth:`graphs.Project.run`; it may be a coroutine function.
            constraints: As in :meth:`graphs.Project.run`.
            permissions: As in :meth:`graphs.Project.run`.
            on_event: As in :meth:`graphs.Project.run`.
            on_request: As in :meth:`graphs.Project.run`.
            prune: As in :meth:`graphs.Project.run`.
            secrets: As in :meth:`graphs.Project.run`.

        Returns:
            How the run ended.

        Raises:
            InvalidInputError: The task already exists, ``task_id`` contradicts the state's, or a
                secret is not valid.
            LeaseHeldError: Another live run holds the task's lease.
        """
        task, held = await asyncio.to_thread(
            start_state, self, request_or_task, task_id, constraints, permissions, secrets
        )
        with hold_secrets(held):
            return await arun_with_approvals(
                graph,
                self.stores,
                task.identity.task_id,
                task,
                answer=approvals or _pending,
                stop_after=max_steps,
                on_event=on_event,
                on_request=on_request,
                prune=prune,
            )

    async def aresume(
        self,
        task_id: str,
        *,
        graph: Any = None,
        max_steps: int | None = None,
        approvals: AsyncAnswer | None = None,
        budget: int | None = None,
        timeout: float | None = None,
        on_resume: Callable[[ResumePoint], None] | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        prune: bool = False,
        secrets: dict[str, str] | None = None,
    ) -> RunResult:
        """:meth:`graphs.Project.resume`, the graph run with ``astream`` on the caller's event loop.

        Args:
            task_id: As in :meth:`graphs.Project.resume`.
            graph: As in :meth:`graphs.Project.resume`.
            max_steps: As in :meth:`graphs.Project.resume`.
            approvals: As in :meth:`graphs.Project.resume`; it may be a coroutine function.
            budget: As in :meth:`graphs.Project.resume`.
            timeout: As in :meth:`graphs.Project.resume`.
            on_resume: As in :meth:`graphs.Project.resume`.
            on_event: As in :meth:`graphs.Project.resume`.
            on_request: As in :meth:`graphs.Project.resume`.
            prune: As in :meth:`graphs.Project.resume`.
            secrets: As in :meth:`graphs.Project.resume`.

        Returns:
            How the run ended (``already_finished`` for a finished task: nothing ran).

        Raises:
            DamagedStoreError: As in :meth:`graphs.Project.resume`.
            UnknownTaskError: As in :meth:`graphs.Project.resume`.
            LeaseHeldError: As in :meth:`graphs.Project.resume`.
            MissingSecretError: As in :meth:`graphs.Project.resume`.
        """
        held = self.stores.leases.hold(task_id)  # before the checks, as resume takes it
        owner = await asyncio.to_thread(held.__enter__)
        try:
            plan = await asyncio.to_thread(
                self._resume_point,  # type: ignore[attr-defined]
                task_id,
                graph,
                budget,
                timeout,
                on_resume,
                secrets,
            )
            if isinstance(plan, RunResult):
                result = plan
            else:
                g, done, checked, secret_values = plan
                with hold_secrets(secret_values):
                    result = await arun_with_approvals(
                        g,
                        self.stores,
                        task_id,
                        None,
                        answer=approvals or _pending,
                        stop_after=done + max_steps if max_steps else None,
                        resume=True,
                        on_event=on_event,
                        on_request=on_request,
                        prune=prune,
                        checked=checked,
                        lease_owner=owner,
                    )
        except BaseException as exc:
            await asyncio.to_thread(held.__exit__, type(exc), exc, exc.__traceback__)
            raise
        await asyncio.to_thread(held.__exit__, None, None, None)
        return result
