"""What a node returns, and where its router sends the task, checked against the event log.

The event log is the task's truth and the checkpoint its fold. LangGraph applies whatever a node
returns to the state channels, drops keys the state does not have without a word, and ends a
run whose router named a node the graph lacks (``wrote to unknown channel branch:to:...,
ignoring it``) with the task still running. :func:`guard_nodes` wraps every node of a graph
compiled with :func:`graphs.compile_graph` so that, after the node returns:

* a key that is not a part of the TaskContext is refused (naming the node, the keys, the fix);
* the state the update makes must be the fold of the event log: a part that differs from it
  (a field changed without an event, e.g. a new goal) is refused naming the fields, and events
  the node appended but did not return are refused naming them;
* each router after the node (:func:`guard_routers`), and a ``Command(goto=...)`` it returns,
  must send the state to a node the graph has; and the routes after it must not all lead to
  ``END`` while the task is still running (at the graph's top level, in a graph that runs one
  node at a time: elsewhere ``END`` is not the run's end).

A node that raises is a failure of the task, as a role node's is: recorded as ``error.occurred``
(source ``graph:<node>``, ``<node> node failed: <Type>: <text>``) and ``task.completed``
(failed), then raised on as LangGraph raises it; a resume of that checkpoint returns the
recorded fold without running the node again. LangGraph's control flow (``GraphBubbleUp``:
interrupts, ``ParentCommand``), taskctx's and the store's errors pass through unrecorded, and
an attempt the node's ``RetryPolicy`` retries is not recorded (only the last one).

A refusal is recorded as ``error.occurred`` (source ``graph:<node>``, the message) and
``task.completed`` (failed), and the node's update is that fold: the checkpoint and the log agree,
the task is failed, every router then ends the run and no further node runs.
"""

from __future__ import annotations

import asyncio
import copy
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langgraph._internal._constants import CONFIG_KEY_RUNTIME

# (LangGraph's own node runnable: a function called with the config, not traced; langgraph.prebuilt uses it so)
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph, get_update_as_tuples
from langgraph.types import Command, RetryPolicy, Send
from pydantic import BaseModel, ValidationError

from context import Event, InvalidInputError, TaskContext, new_event, replay
from context.events import ErrorOccurred, TaskCompleted
from nodes.attempts import NODE_RUNS, attempt_key, attempt_of, log_ahead_error
from nodes.roles.failures import failure_message, own_failure

__all__ = ["REFUSED_SOURCE", "graph_env", "guard_nodes", "guard_routers", "refuse_stranding", "refused"]

#: The ``source`` prefix of the errors this module records (``graph:<node>``).
REFUSED_SOURCE = "graph:"

#: How a node changes a task: the fix every refusal names.
_FIX = "record it as events with nodes.NodeRun (run.commit([...])) and return run.update()"


def _ctx(state: Any) -> TaskContext | None:
    if isinstance(state, TaskContext):
        return state
    if isinstance(state, dict) and "identity" in state:
        try:
            return TaskContext.model_validate(state)
        except ValidationError:
            return None
    return None


def refused(state: Any) -> bool:
    """Whether the task failed on a refusal of this module (its last error's source ``graph:``).

    Args:
        state: A TaskContext, its dict, or any other graph state.

    Returns:
        True when the task is failed by a refused update or route.
    """
    ctx = _ctx(state)
    if ctx is None or ctx.control.status != "failed":
        return False
    last = ctx.errors.last_error
    return last is not None and last.source.startswith(REFUSED_SOURCE)


def graph_env(builder: StateGraph) -> Any:
    """The :class:`nodes.NodeEnv` the graph's taskctx nodes share (the first one found).

    Args:
        builder: The graph, not compiled yet.

    Returns:
        The env of a node made by a ``nodes.make_*_node`` factory, or None when it has none.
    """
    for spec in builder.nodes.values():
        for holder in (spec.runnable, getattr(spec.runnable, "func", None)):  # a RoleNode, or a plain function
            env = getattr(holder, "taskctx_env", None) or getattr(holder, "env", None)
            if env is not None and hasattr(env, "events"):
                return env
    return None


def guard_routers(builder: StateGraph) -> StateGraph:
    """A shallow copy of ``builder`` whose routers end the run once the task is refused.

    Args:
        builder: The graph, not compiled yet (left as it is).

    Returns:
        The copy to compile: each conditional edge's router returns no destination for a task
        :func:`refused` (LangGraph then ends the run), else what the router returns.
    """
    out = copy.copy(builder)
    out.branches = defaultdict(dict)
    for source, branches in builder.branches.items():
        for name, branch in branches.items():
            out.branches[source][name] = branch._replace(path=_stopping(branch.path))
    return out


def _stopping(path: Runnable[Any, Any]) -> Runnable[Any, Any]:
    def route(state: Any, config: RunnableConfig) -> Any:
        return [] if refused(state) else path.invoke(state, config)

    async def aroute(state: Any, config: RunnableConfig) -> Any:
        return [] if refused(state) else await path.ainvoke(state, config)

    return RunnableCallable(route, aroute, name=path.name, trace=False)


def guard_nodes(compiled: CompiledStateGraph, builder: StateGraph, events: Any) -> None:
    """Wrap each function node of ``compiled`` in the check of this module (see module doc).

    Args:
        compiled: The compiled graph (its nodes are replaced in place).
        builder: The graph it was compiled from (its nodes, routers and path maps).
        events: The task's event log.
    """
    known = {*builder.nodes, END}
    # (a graph that can run nodes side by side: a node's END is not the run's end)
    fans = bool(builder.waiting_edges) or len({s for s, _ in builder.edges}) < len(builder.edges)
    for name, spec in builder.nodes.items():
        pn = compiled.nodes[name]
        if isinstance(pn.bound, RunnableCallable):  # (a subgraph node is left as it is)
            # a taskctx node (a role's, the tool node) records its own failures: nothing is recorded for it here
            holders = (spec.runnable, getattr(spec.runnable, "func", None))
            builtin = any(getattr(h, "taskctx_env", None) or getattr(h, "env", None) for h in holders)
            retry = () if builtin else (pn.retry_policy or compiled.retry_policy or ())
            guard = _NodeGuard(name, pn.bound, events, builder.branches.get(name, {}), known, retry, not builtin)
            run, arun = guard.run, guard.arun
        elif pn.subgraphs:  # a subgraph node: its own nodes are checked inside it; the routes after it here
            guard = _NodeGuard(name, pn.bound, events, builder.branches.get(name, {}), known)
            run, arun = guard.run_subgraph, guard.arun_subgraph
        else:
            continue
        guard.edges = None if fans else [e for s, e in builder.edges if s == name]
        guard.routes_by_command = bool(spec.ends)
        bound = RunnableCallable(run, arun, name=pn.bound.name, trace=False)
        compiled.nodes[name] = pn.copy({"bound": bound, "subgraphs": pn.subgraphs})


def _updates(out: Any) -> dict[str, Any] | None:
    """The state keys a node's return value writes (None: not one this check reads)."""
    if out is None:
        return {}
    if isinstance(out, dict):
        return dict(out)
    if isinstance(out, Command):
        if out.graph == Command.PARENT:
            return None
        return _updates(out.update)
    if isinstance(out, BaseModel):
        return dict(get_update_as_tuples(out, list(type(out).model_fields)))
    return None


def _merged(ctx: TaskContext, updates: dict[str, Any]) -> TaskContext | None:
    """The state ``updates`` make of ``ctx`` (None: one the TaskContext refuses)."""
    try:
        return TaskContext.model_validate({**dict(ctx), **updates})
    except ValidationError:
        return None


def _overlaid(ctx: TaskContext, updates: dict[str, Any]) -> TaskContext | None:
    """``updates`` with each dict laid over the part it names: the fields a partial dict sets.

    (LangGraph writes a dict as the whole part, the fields it omits at their defaults; the fields
    it names are what the node meant to change.)
    """
    try:
        over = {
            p: type(old).model_validate({**old.model_dump(), **v})
            if isinstance(v, dict) and isinstance(old, BaseModel)
            else v
            for p, v in updates.items()
            for old in [getattr(ctx, p, None)]
        }
        return TaskContext.model_validate({**dict(ctx), **over})
    except ValidationError:
        return None


def _retries_on(policy: RetryPolicy, exc: Exception) -> bool:
    """Whether ``policy`` retries ``exc`` (its ``retry_on``: a class, classes, or a predicate), as LangGraph decides."""
    on = policy.retry_on
    if isinstance(on, type):
        return isinstance(exc, on)
    if isinstance(on, Sequence):
        return isinstance(exc, tuple(on))
    return bool(on(exc))


def _fields(expected: TaskContext, got: TaskContext, parts: list[str]) -> list[str]:
    """``part.field`` for each field of ``parts`` where ``got`` differs from ``expected``."""
    out = []
    for p in parts:
        a, b = getattr(expected, p), getattr(got, p)
        if not isinstance(a, BaseModel) or not isinstance(b, BaseModel):
            out.append(p)
            continue
        da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
        out += [f"{p}.{f}" for f in db if db[f] != da.get(f)]
    return out


def _in_subgraph(config: RunnableConfig) -> bool:
    """Whether the node runs inside a subgraph (its END returns to the parent graph, not the run's end)."""
    return "|" in str((config.get("configurable") or {}).get("checkpoint_ns", ""))


def _routes(branches: dict[str, Any], state: TaskContext, config: RunnableConfig) -> list[tuple[str, Any, Any]] | None:
    """``(router, its path map, a value it returns)`` for each router after a node, run on ``state``
    untraced (the real routing is traced, not this look-ahead); None when a router raises."""
    quiet: RunnableConfig = {**config, "callbacks": None}
    out: list[tuple[str, Any, Any]] = []
    for name, branch in branches.items():
        try:
            result = branch.path.invoke(state, quiet)
        except Exception:  # noqa: BLE001 - a router that needs more than the state: LangGraph decides
            return None
        out += [(name, branch.ends, r) for r in (result if isinstance(result, list | tuple) else [result])]
    return out


def _target(ends: dict[Hashable, str] | None, r: Any) -> Any:
    """The node a router's return value ``r`` names, through its path map ``ends``."""
    if isinstance(r, Send):
        return r.node
    return ends.get(r, r) if ends else r


class _NodeGuard:
    """One node, wrapped: run it, then check what it returned (see module doc)."""

    def __init__(
        self,
        name: str,
        inner: Runnable[Any, Any],
        events: Any,
        branches: dict[str, Any],
        known: set[str],
        retry: Sequence[RetryPolicy] = (),
        records_failures: bool = True,
    ):
        self.name, self.inner, self.events, self.branches, self.known = name, inner, events, branches, known
        self.retry, self.records_failures = retry, records_failures
        #: The node's plain edges' targets (None: the graph can fan out, so an END here may not end the run).
        self.edges: list[str] | None = []
        #: Whether the node declares ``Command(goto=...)`` destinations (``add_node(..., destinations=...)``).
        self.routes_by_command = False

    def run(self, state: Any, config: RunnableConfig) -> Any:
        ctx = _ctx(state)
        if ctx is None or not ctx.identity.task_id:
            return self.inner.invoke(state, config)
        if refused(ctx):  # reached by a plain edge after a refusal: the task is over
            return {}
        failed = self.failed_before(ctx)
        if failed is not None:
            return failed
        runs: list[Any] = []
        token = NODE_RUNS.set(runs)
        try:
            out = self.inner.invoke(state, config)
        except Exception as exc:
            self.record_failure(ctx, exc, config)
            raise
        finally:
            NODE_RUNS.reset(token)
        return self.settle(ctx, out, config, runs)

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        inner = self.inner
        if inner.func is not None and getattr(inner.afunc, "__wrapped__", None) is inner.func:  # type: ignore[attr-defined]
            # a sync node: run it, and the check's store reads, in the executor as LangGraph runs it
            return await run_in_executor(config, self.run, state, config)
        ctx = _ctx(state)
        if ctx is None or not ctx.identity.task_id:
            return await inner.ainvoke(state, config)
        if refused(ctx):
            return {}
        failed = await asyncio.to_thread(self.failed_before, ctx)
        if failed is not None:
            return failed
        runs: list[Any] = []
        token = NODE_RUNS.set(runs)
        try:
            out = await inner.ainvoke(state, config)
        except Exception as exc:
            await asyncio.to_thread(self.record_failure, ctx, exc, config)
            raise
        finally:
            NODE_RUNS.reset(token)
        return await asyncio.to_thread(self.settle, ctx, out, config, runs)  # (the stores' reads are sync)

    def run_subgraph(self, state: Any, config: RunnableConfig) -> Any:
        """Run a subgraph node, then check only where the routes after it send the task (:meth:`routed`)."""
        return self.routed(state, self.inner.invoke(state, config), config)

    async def arun_subgraph(self, state: Any, config: RunnableConfig) -> Any:
        """:meth:`run_subgraph`, async."""
        out = await self.inner.ainvoke(state, config)
        return await asyncio.to_thread(self.routed, state, out, config)

    def routed(self, state: Any, out: Any, config: RunnableConfig) -> Any:
        """``out`` (a subgraph's state) when the routes after it lead on; else it with the refusal's fold."""
        ctx, updates = _ctx(state), _updates(out)
        if ctx is None or not ctx.identity.task_id or not updates:
            return out
        new = _merged(ctx, updates)
        if new is None or refused(new):
            return out
        problem = self.bad_route(new, config, out)
        return out if problem is None else {**updates, **self.refuse(new, new, problem)}

    def failed_before(self, ctx: TaskContext) -> dict[str, Any] | None:
        """The fold of a failure an earlier run of this node recorded on this checkpoint, or None.

        The node raised, its failure was recorded and raised on (LangGraph keeps the checkpoint
        before the node): a resume ends the task failed as recorded, without running the node again.
        """
        task_id, cursor = ctx.identity.task_id, ctx.events.cursor
        if self.events.last_seq(task_id) <= cursor:
            return None
        past = self.events.read(task_id, after=cursor)
        if any(attempt_of(e.causation_id) != (cursor, self.name) for e in past):
            return None  # another node's, or another checkpoint's: settle names it
        folded = replay(past, ctx)
        return self.fold(ctx, folded) if refused(folded) else None

    def retried(self, exc: Exception, config: RunnableConfig) -> bool:
        """Whether LangGraph runs the node again after ``exc`` (a ``RetryPolicy`` with attempts left)."""
        policy = next((p for p in self.retry if _retries_on(p, exc)), None)
        if policy is None:
            return False
        runtime = (config.get("configurable") or {}).get(CONFIG_KEY_RUNTIME)
        info = getattr(runtime, "execution_info", None)
        return getattr(info, "node_attempt", 1) < policy.max_attempts

    def record_failure(self, ctx: TaskContext, exc: Exception, config: RunnableConfig) -> None:
        """Record the node's own failure (``error.occurred``, ``task.completed`` failed) before it is raised on.

        Nothing is recorded for LangGraph's control flow, taskctx's and the store's own errors
        (:func:`nodes.roles.failures.own_failure`; an ``OSError`` is the node's own), or an attempt
        its ``RetryPolicy`` retries.
        """
        if not self.records_failures or not own_failure(exc, os_errors=True) or self.retried(exc, config):
            return
        task_id, cursor = ctx.identity.task_id, ctx.events.cursor
        past = self.events.read(task_id, after=cursor)
        if any((a := attempt_of(e.causation_id)) is None or a[0] != cursor for e in past):
            return  # the log is past this checkpoint: raised on unrecorded (the next run names it)
        try:
            self.refuse(ctx, replay(past, ctx), failure_message(self.name, exc))
        except Exception as rec:  # noqa: BLE001 - the node's own error is the one raised
            exc.add_note(f"taskctx could not record this failure in the event log: {type(rec).__name__}: {rec}")

    def settle(self, ctx: TaskContext, out: Any, config: RunnableConfig, runs: list[Any]) -> Any:
        """``out`` when it is the log's fold and routes to a node the graph has; else the refusal.

        The fold is known without reading the log back when the node appended nothing (the log
        ends at the input's cursor) or its last :class:`nodes.NodeRun` holds it (the log ends at
        that run's cursor); else (and to name what is wrong) the events past the cursor are read.
        """
        updates = _updates(out)
        if updates is None:
            return out
        task_id, cursor = ctx.identity.task_id, ctx.events.cursor
        last = self.events.last_seq(task_id)
        mine = [r for r in runs if r.task_id == task_id and r.input.events.cursor == cursor]
        known = ctx if last == cursor else mine[-1].ctx if mine and mine[-1].ctx.events.cursor == last else None
        if known is not None and not any(k not in TaskContext.model_fields for k in updates):
            got = _merged(ctx, updates)
            if got == known:
                problem = self.bad_goto(out) or self.bad_route(known, config, out)
                return out if problem is None else self.refuse(ctx, known, problem)
        past = self.events.read(task_id, after=cursor)
        foreign = [e for e in past if (a := attempt_of(e.causation_id)) is None or a[0] != cursor]
        if foreign:  # events of a later checkpoint: the graph runs from an older one
            raise log_ahead_error(task_id, cursor, self.name, foreign)
        expected = replay(past, ctx)
        if refused(expected):  # a refusal recorded by an attempt that died before its checkpoint
            return self.fold(ctx, expected)
        problem = (
            self.problem(ctx, expected, updates, past) or self.bad_goto(out) or self.bad_route(expected, config, out)
        )
        return out if problem is None else self.refuse(ctx, expected, problem)

    def problem(
        self, ctx: TaskContext, expected: TaskContext, updates: dict[str, Any], past: list[Event]
    ) -> str | None:
        """Why the update is not the log's fold, or None when it is."""
        unknown = sorted(str(k) for k in updates if k not in TaskContext.model_fields)
        if unknown:
            return (
                f"node {self.name!r} returned {', '.join(map(repr, unknown))}, which the TaskContext has no part "
                f"for (LangGraph would drop it without a word): a node's result belongs in the event log; {_FIX}"
            )
        try:
            got = TaskContext.model_validate({**dict(ctx), **updates})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            return f"node {self.name!r} returned a state update the TaskContext refuses ({where}: {err['msg']}); {_FIX}"
        if got == expected:
            return None
        parts = [p for p in TaskContext.model_fields if getattr(got, p) != getattr(expected, p)]
        returned = [p for p in parts if p in updates]
        if returned:
            named = _fields(expected, _overlaid(ctx, updates) or got, returned) or _fields(expected, got, returned)
            return (
                f"node {self.name!r} returned {', '.join(named)} without an event "
                "recording it (the checkpoint would no longer be the event log's fold): a node changes the task only "
                f"through the event log; {_FIX}; to edit a task from outside a node, use graph.update_state "
                "(recorded as state.edited)"
            )
        kinds = ", ".join(dict.fromkeys(e.kind for e in past))
        span = f"seq {past[0].seq}" if len(past) == 1 else f"seq {past[0].seq}-{past[-1].seq}"
        return (
            f"node {self.name!r} appended events to the event log ({span}: {kinds}) but did not return the "
            f"state they make ({', '.join(parts)}): return the update the events make (with nodes.NodeRun: "
            "return run.update())"
        )

    def bad_goto(self, out: Any) -> str | None:
        """Why the node's ``Command(goto=...)`` names a node the graph lacks, or None."""
        if not isinstance(out, Command) or out.graph is not None:
            return None
        for g in out.goto if isinstance(out.goto, list | tuple) else [out.goto]:
            target = g.node if isinstance(g, Send) else g
            if target in self.known:
                continue
            nodes = ", ".join(repr(n) for n in sorted(self.known - {END}))
            return (
                f"node {self.name!r} returned Command(goto={target!r}), but the graph has no node {target!r} "
                f"(LangGraph would drop the route without a word); its nodes: {nodes}; go to one of them or END, "
                f"and declare the targets: add_node({self.name!r}, ..., destinations=(...)) or type the node "
                "-> Command[Literal[...]]"
            )
        return None

    def bad_route(self, state: TaskContext, config: RunnableConfig, out: Any = None) -> str | None:
        """Why a router after this node sends ``state`` to no node of the graph, or ends the run
        with the task unfinished; None when neither."""
        routes = _routes(self.branches, state, config)
        if routes is None:  # the router's own call, right after, raises it where it belongs
            return None
        targets: list[Any] = []
        for name, ends, r in routes:
            problem = self.unknown(name, ends, r)
            if problem is not None:
                return problem
            targets.append(_target(ends, r))
        if isinstance(out, Command) and out.graph is None and out.goto:
            gotos = out.goto if isinstance(out.goto, list | tuple) else [out.goto]
            targets += [g.node if isinstance(g, Send) else g for g in gotos]
        return self.stranded(state, targets, config)

    def stranded(self, state: TaskContext, targets: list[Any], config: RunnableConfig) -> str | None:
        """Why the routes after this node end the run while the task is still running, or None."""
        if self.edges is None or state.control.status != "running" or _in_subgraph(config):
            return None
        if not (self.branches or self.edges or targets) and self.routes_by_command:
            return None  # (a node routing with Command(goto=...) that returned none: LangGraph ends there)
        if any(t != END for t in [*self.edges, *targets]):
            return None
        if not (self.branches or self.edges or targets):
            return (
                f"node {self.name!r} has no edge out of it, so LangGraph ended the run there with task "
                f"{state.identity.task_id!r} still running (no node recorded task.completed); add an edge or a "
                f"router after {self.name!r} to the node that goes on with the task (the reviewer records "
                "task.completed)"
            )
        how = (
            f"router {', '.join(self.branches)}"
            if self.branches
            else "Command(goto=END)"
            if targets
            else "a plain edge"
        )
        return (
            f"{how} (after node {self.name!r}) sent task {state.identity.task_id!r} to END while it is still "
            "running (no node recorded task.completed; LangGraph would end the run with the task left running "
            "and nothing to run next); route an unfinished task to a node that goes on with it (the "
            "reviewer records task.completed), and return END only once control.status is completed or failed"
        )

    def unknown(self, router: str, ends: dict[Hashable, str] | None, r: Any) -> str | None:
        if not isinstance(r, Send) and ends:
            if r not in ends:
                return (
                    f"router {router} (after node {self.name!r}) returned {r!r}, which its path map has no key for "
                    f"(keys: {', '.join(map(repr, ends))}); add {r!r}: <a node of the graph> to the path map of "
                    f"add_conditional_edges({self.name!r}, {router}, ...)"
                )
        target = _target(ends, r)
        if target in self.known:
            return None
        nodes = ", ".join(repr(n) for n in sorted(self.known - {END}))
        return (
            f"router {router} (after node {self.name!r}) returned {target!r}, but the graph has no node {target!r} "
            f"(LangGraph would drop the route and end the run with the task running); its nodes: {nodes}; return one "
            "of them or END, and type the router -> Literal[...] so that compile_graph checks its targets"
        )

    def refuse(self, ctx: TaskContext, expected: TaskContext, problem: str) -> dict[str, Any]:
        """Record ``problem`` (``error.occurred``, ``task.completed`` failed); the update is the log's fold."""
        task_id = ctx.identity.task_id
        cause = attempt_key(task_id, ctx.events.cursor, self.name)
        made = [
            new_event(
                "error.occurred",
                ErrorOccurred(
                    error_id=f"err-{expected.errors.occurred_count + 1}",
                    source=f"{REFUSED_SOURCE}{self.name}",
                    message=problem,
                    step_id=expected.plan.current_step_id,
                ),
                actor="system",
                correlation_id=task_id,
                causation_id=cause,
            ),
            new_event(
                "task.completed",
                TaskCompleted(status="failed", summary=problem),
                actor="system",
                correlation_id=task_id,
                causation_id=cause,
            ),
        ]
        numbered = [e.model_copy(update={"seq": expected.events.cursor + 1 + i}) for i, e in enumerate(made)]
        return self.fold(ctx, replay(self.events.append(task_id, numbered), expected))

    @staticmethod
    def fold(ctx: TaskContext, folded: TaskContext) -> dict[str, Any]:
        return {p: getattr(folded, p) for p in TaskContext.model_fields if getattr(folded, p) != getattr(ctx, p)}


def refuse_stranding(builder: Any, state: TaskContext, new: TaskContext, as_node: str, nxt: Sequence[str]) -> None:
    """Refuse ``update_state(..., as_node=...)`` when the edges after ``as_node`` send the edited,
    unfinished task to no node: LangGraph would leave it ``running`` with nothing to run next.

    Args:
        builder: The graph's ``StateGraph`` (None: nothing is checked).
        state: The task's state before the edit.
        new: Its state with the edit.
        as_node: The node the edit is made as.
        nxt: The nodes the task would continue at without ``as_node``.

    Raises:
        InvalidInputError: Every edge after ``as_node`` leads to ``END`` and the task has not finished.
    """
    if builder is None or as_node not in builder.nodes or new.control.status in ("completed", "failed"):
        return
    routes = _routes(builder.branches.get(as_node, {}), new, {})
    if routes is None:
        return
    targets = [end for start, end in builder.edges if start == as_node] + [_target(e, r) for _, e, r in routes]
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
