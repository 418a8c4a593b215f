"""``TaskContextMiddleware``: taskctx's context machinery for an existing LangChain agent, in one line.

``create_agent(model, tools, middleware=[TaskContextMiddleware("agent.db")])`` (or deepagents'
``create_deep_agent(..., middleware=[...])``) gets an event log and artifact store (a SQLite file,
or a ``postgresql://`` URL), the request pinned verbatim with its hard constraints on every call,
every tool output stored raw and shown compressed and quoted with its ref (``read_artifact`` is
added to the tools), the budget over the whole request, a ``context.built`` event per model call
whose manifest is also the LangSmith model run's metadata, and a prefix that stays cached.
The task is the agent's thread (``thread_id``); with the agent's checkpointer a resume records
nothing twice and runs no recorded tool call again.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import ensure_config, var_child_runnable_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config

from context import Event, extract_constraints, new_event, replay
from context.events import (
    ContextBuilt,
    PermissionEvent,
    ResumeStarted,
    TaskCompleted,
    TaskCreated,
    ToolResultReceived,
)
from context.models import SCHEMA_VERSION
from context.pg_store import is_postgres_url
from context.tokens import TokenCounter
from nodes import DEFAULT_BUDGET, DEFAULT_RESERVE, NodeEnv, cached_prefix_tokens, fingerprints
from nodes.prompt_parts import prompt_text
from nodes.runtime import provider_of, usage_of
from nodes.tools import as_names

from .answers import answer_of, answer_seqs, recorded_answer
from .prompt import AGENT_ROLE, PromptInputs, agent_prompt, message_text, system_text
from .tool_calls import ToolCallRecording, check_gated, split_reviewers

__all__ = ["TaskContextMiddleware"]


#: The agent state's key of the task of a run without a ``thread_id`` (private to the middleware).
TASK_KEY = "taskctx_task_id"


class TaskContextState(AgentState):  # type: ignore[type-arg]
    """The agent's state, with the task of a run without a ``thread_id``."""

    taskctx_task_id: NotRequired[Annotated[str, PrivateStateAttr]]


def _open_stores(db: str) -> Any:
    """The event log and artifact store of ``db``: a SQLite file (its folder created) or a Postgres URL."""
    if is_postgres_url(db):
        from context.pg_store import PgStores

        return PgStores(db)
    from context import SqliteStores

    if db != ":memory:":
        Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return SqliteStores(db)


def _thread_id() -> str | None:
    try:
        cfg = get_config()
    except RuntimeError:  # outside a graph run
        return None
    tid = (cfg.get("configurable") or {}).get("thread_id")
    return str(tid) if tid else None


class TaskContextMiddleware(ToolCallRecording, AgentMiddleware):  # type: ignore[type-arg]
    """taskctx's context machinery for a ``create_agent`` / ``create_deep_agent`` agent.

    Put it first in ``middleware=[...]``, before or after a ``HumanInTheLoopMiddleware`` (a
    reviewer's edit is recorded as it ran in either order). Each thread (``thread_id``) is one
    task of the log.
    """

    state_schema = TaskContextState

    def __init__(
        self,
        db: str = "taskctx.db",
        *,
        budget: int = DEFAULT_BUDGET,
        reserve_for_output: int = DEFAULT_RESERVE,
        side_effects: str | Iterable[str | BaseTool] = (),
        requires_approval: str | Iterable[str | BaseTool | HumanInTheLoopMiddleware] | HumanInTheLoopMiddleware = (),
        constraints: Sequence[str] = (),
        count_tokens: TokenCounter | None = None,
        keep_last: int = 3,
        low_water: float = 0.0,
        task_id: str | None = None,
        stores: Any = None,
    ) -> None:
        """Open the stores; the agent's calls are recorded from its first run on.

        Args:
            db: The database: a SQLite file (created, with its folder), ``:memory:``, or a
                ``postgresql://`` URL. Ignored when ``stores`` is given.
            budget: Tokens of every model call's whole request (system message, tool schemas,
                messages) and its answer.
            reserve_for_output: Tokens of the budget kept for the answer.
            side_effects: The tools with side effects, by name or as the tools themselves (one
                ``str`` is one name): a call of one that was cut off mid-run is never run
                again, and its result stays in the prompt.
            requires_approval: The agent's ``HumanInTheLoopMiddleware`` (best: the tools it
                gates are read from its ``interrupt_on``, a ``when`` predicate included), or the
                tools it gates, named as ``side_effects``: each decision is recorded
                (``permission.requested`` then ``granted`` or ``denied``). A call the reviewer
                middleware given does not gate runs with no approval recorded.
            constraints: Hard constraints of every task, verbatim (those in the request's wording
                are found and kept too).
            count_tokens: The token counter (``str -> int``); default o200k_base.
            keep_last: The newest turns ranked high (kept before older ones).
            low_water: When turns must leave the prompt, the share of the history's room (tokens)
                the cut leaves filled, beyond the turns a cut always keeps (the newest, the
                user's, those of side-effecting tools); the rest is room the next calls grow into
                on a cached prefix. 0: only those turns stay.
            task_id: The task's id when the agent runs without a ``thread_id``; default a new
                ``agent-<hex>`` id per middleware.
            stores: Stores to use instead of opening ``db`` (``SqliteStores`` / ``PgStores``).

        Raises:
            StoreOpenError: The database cannot be opened.
            TypeError: ``side_effects`` or ``requires_approval`` holds an item that is neither a
                name nor a LangChain tool (nor, for ``requires_approval``, a
                ``HumanInTheLoopMiddleware``).
            ValueError: ``requires_approval`` names a tool that the ``HumanInTheLoopMiddleware``
                given with it does not gate.
        """
        super().__init__()
        # checked before the stores open: a bad argument opens nothing
        side_effect_tools = as_names(side_effects)
        self.reviewers, named = split_reviewers(requires_approval)
        approval_tools = as_names(named, "requires_approval")
        check_gated(approval_tools, self.reviewers)
        self.stores = stores if stores is not None else _open_stores(db)
        env_kw: dict[str, Any] = {} if count_tokens is None else {"count_tokens": count_tokens}
        self.env = NodeEnv(
            events=self.stores.events,
            artifacts=self.stores.artifacts,
            budget=budget,
            reserve_for_output=reserve_for_output,
            stores=self.stores,
            **env_kw,
        )
        self.side_effects = tuple(side_effect_tools)
        self.named_approval = tuple(approval_tools)
        self.requires_approval = tuple(
            dict.fromkeys([*approval_tools, *(n for h in self.reviewers for n in h.interrupt_on)])
        )
        self.constraints = list(constraints)
        self.keep_last = keep_last
        self.low_water = low_water
        self.default_task_id = task_id or f"agent-{uuid.uuid4().hex[:12]}"
        self._given: set[str] = set()  # the tasks given to conversations without a thread_id
        self._lock = threading.Lock()
        self._known, self._every = set[str](), False  # the agent's tools seen, and whether all (check_tools)
        self.tools: list[BaseTool] = [self._read_artifact_tool()]

    # ---- public helpers -------------------------------------------------------------------
    def task_id(self, state: Any = None) -> str:
        """The task a call belongs to: the run's ``thread_id``, else its conversation's task id.

        A run without a ``thread_id`` is a conversation of its own: :meth:`before_agent` gives it
        a task (the middleware's ``task_id`` for the first, a new ``agent-<hex>`` id for each
        later one) and keeps it in the agent's state, so nothing recorded in one conversation
        answers a call or stands for an approval in another.

        Args:
            state: The agent's state (its task, when the run has no ``thread_id``).

        Returns:
            The task id.
        """
        tid = _thread_id()
        if tid:
            return tid
        own = state.get(TASK_KEY) if isinstance(state, dict) else None
        return str(own) if own else self.default_task_id

    def _new_conversation(self) -> str:
        """The task of a run without a ``thread_id`` that starts a conversation."""
        with self._lock:
            tid = self.default_task_id
            if tid in self._given or self.stores.events.read(tid, limit=1):
                tid = f"agent-{uuid.uuid4().hex[:12]}"
            self._given.add(tid)
            return tid

    def events(self, task_id: str) -> list[Event]:
        """The task's event log, in order.

        Args:
            task_id: The task (the agent's ``thread_id``).

        Returns:
            The events.
        """
        return list(self.stores.events.read(task_id))

    def close(self) -> None:
        """Close the stores (when the middleware opened them)."""
        self.stores.close()

    # ---- the task ------------------------------------------------------------------------
    def _ensure_task(self, task_id: str, messages: Sequence[BaseMessage]) -> None:
        """Record ``task.created`` from the first human message, once per task."""
        if self.stores.events.read(task_id, kinds=["task.created"], limit=1):
            return
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        request = message_text(first) if first is not None else ""
        found = [c for c in extract_constraints(request) if c not in self.constraints]
        payload = TaskCreated(
            task_id=task_id,
            original_request=request,
            constraints=[*self.constraints, *found],
            constraint_sources={c: "request" for c in found},
            schema_version=SCHEMA_VERSION,
            requires_approval=list(self.requires_approval),
        )
        self._append(task_id, [new_event("task.created", payload, actor="user")])

    def _append(self, task_id: str, events: list[Event]) -> list[Event]:
        return list(self.stores.events.append(task_id, events)) if events else []

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record ``task.created`` on the thread's first run (the request: its first human message).

        A later run of a thread whose agent had answered (a follow-up message), or a new message
        over a run that did not finish (a crash, an approval not given), records
        ``resume.started``: the task runs again. A run that starts with calls of its messages
        left without a result, or over a model step the checkpoint lost (a crash while a side
        effect of its answer ran), first answers those calls and puts that answer back, each call
        with its recorded result or an error saying it was cut off.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None, or an update: for a run without a ``thread_id`` that starts a conversation, its
            task (kept in the agent's state: :meth:`task_id`); the calls answered and the
            answers put back, as ``messages``.
        """
        update = None
        if not _thread_id() and not state.get(TASK_KEY):
            update = {TASK_KEY: self._new_conversation()}
        tid = self.task_id(update or state)
        messages = state.get("messages") or []
        self._ensure_task(tid, messages)
        last = self.stores.events.read(tid, after=max(0, self.stores.events.last_seq(tid) - 1))
        # a follow-up message, or a new one over a run that did not finish (a crash, an approval left)
        if last and last[-1].kind not in ("task.created", "resume.started"):
            self._append(tid, [new_event("resume.started", ResumeStarted(node=AGENT_ROLE), actor="user")])
        if mended := self._mended(tid, messages):  # calls left without a result, answers the checkpoint lost
            update = {**(update or {}), "messages": mended}
        return update

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record ``task.completed`` when the agent answered (its last message calls no tool).

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None (the state is unchanged).
        """
        messages = state.get("messages") or []
        if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
            return None
        tid = self.task_id(state)
        last = self.stores.events.read(tid, after=max(0, self.stores.events.last_seq(tid) - 1))
        if not last or last[-1].kind != "task.completed":  # (a resume re-running this hook records it once)
            done = TaskCompleted(summary=message_text(messages[-1])[:2_000])
            self._append(tid, [new_event("task.completed", done, actor="agent")])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_agent`.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None.
        """
        return self.after_agent(state, runtime)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_agent`.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None.
        """
        return self.before_agent(state, runtime)

    # ---- model calls ---------------------------------------------------------------------
    def _answers(self, task_id: str, messages: Sequence[BaseMessage], events: list[Event]) -> list[Event]:
        """Events for the tool messages the agent got without a tool run.

        A gated call's is the reviewer's rejection or answer (``permission.*`` and a ``denied``
        result, by the user); any other call's is another middleware's answer (an ``error`` or
        ``ok`` result, by the system).
        """
        results = [e for e in events if e.kind == "tool.result.received"]
        since = answer_seqs(events)  # a call's events come after its answer's context.built
        calls: dict[str, tuple[str, dict[str, Any], int]] = {}
        out: list[Event] = []
        for m in messages:
            if isinstance(m, AIMessage):
                at = since.get(m.id or "", 0)
                calls.update({tc.get("id") or "": (tc["name"], tc.get("args") or {}, at) for tc in m.tool_calls})
            if not isinstance(m, ToolMessage) or m.tool_call_id not in calls:
                continue
            name, args, after = calls[m.tool_call_id]
            if any(e.payload["call_id"] == m.tool_call_id and e.seq > after for e in results):
                continue  # recorded: its run's result, or this answer recorded at an earlier call
            text = message_text(m)
            gated, failed = name in self.requires_approval, m.status == "error"
            perm = PermissionEvent(
                call_id=m.tool_call_id, tool=name, arguments=json.dumps(args, sort_keys=True), reason=text[:500]
            )
            if gated:  # a reviewer's rejection or answer
                out.append(new_event("permission.requested", perm, actor="system"))
                out.append(new_event("permission.denied" if failed else "permission.granted", perm, actor="user"))
            status = ("denied" if gated else "error") if failed else "ok"  # else another middleware's answer
            result = ToolResultReceived(call_id=m.tool_call_id, status=status, result_summary=text, raw_chars=len(text))
            out.append(new_event("tool.result.received", result, actor="user" if gated else "system"))
        return out

    def check_tools(self, tools: Iterable[BaseTool | dict[str, Any]], *, every: bool = True) -> None:
        """Check that ``side_effects`` and ``requires_approval`` name only the agent's tools.

        The names are checked against every tool seen so far. A model request's tools may be a
        part of the agent's (a middleware before this one may filter them per call), so a name
        missing there waits; the agent's tool calls carry all its tools (the tool node's), and
        there a missing name is refused, before the call runs or is recorded.

        Args:
            tools: Tools of the agent (LangChain tools, or OpenAI-format tool dicts).
            every: Whether ``tools`` are all the agent's tools (False: a model request's, which
                may be filtered).

        Raises:
            ValueError: A name is not one of the agent's tools, once all of them are known
                (naming it and the agent's tools).
        """
        with self._lock:
            self._known |= {_tool_name(t) for t in tools} - {"read_artifact"}
            self._every = self._every or every
            known, final = set(self._known), self._every
        if not final:
            return
        for argument, names in (("side_effects", self.side_effects), ("requires_approval", self.named_approval)):
            unknown = [n for n in dict.fromkeys(names) if n not in known]
            if unknown:
                which = "is not one of" if len(unknown) == 1 else "are not among"
                raise ValueError(
                    f"{argument} names {', '.join(map(repr, unknown))}, which {which} the agent's tools "
                    f"({', '.join(sorted(known)) or 'none'}); fix the name"
                )

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, dict[str, Any]]:
        """The request with taskctx's prompt, and what recording its ``context.built`` needs."""
        self.check_tools(request.tools, every=False)
        tid = self.task_id(request.state)
        self._ensure_task(tid, request.messages)
        events = self.events(tid)
        answers = self._answers(tid, request.messages, events)
        events += self._append(tid, answers)
        built = [e for e in events if e.kind == "context.built" and e.payload["role"] == AGENT_ROLE]
        last = built[-1].payload if built else None
        left_out = {b["id"] for b in last["blocks"] if not b["included"]} if last else set()
        tools = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in request.tools]
        inputs = PromptInputs(
            ctx=replay(events),
            system=system_text(request.system_message),
            messages=list(request.messages),
            tools=tools,
            left_out={i for i in left_out if i.startswith("turn.")},
            results={e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"},
            side_effects=self.side_effects,
            keep_last=self.keep_last,
            low_water=self.low_water,
        )
        rendered, earlier = agent_prompt(inputs, self.env)
        fps = fingerprints(rendered.messages, rendered.tools, self.env.count_tokens)
        m = rendered.manifest
        payload = ContextBuilt(
            call=len(built) + 1,
            role=AGENT_ROLE,
            budget=m.budget,
            prompt_tokens=rendered.prompt_tokens,
            cached_prefix_tokens=cached_prefix_tokens(last["fingerprints"], fps) if last else 0,
            blocks_in=len(m.included),
            blocks_out=len(m.dropped) + len(earlier),
            blocks=[*m.entries, *earlier],
            fingerprints=fps,
        )
        # a resume that re-runs the same call (its event was the last recorded) records it once
        again = bool(events) and events[-1].kind == "context.built" and events[-1].payload.get("fingerprints") == fps
        pending = {"task_id": tid, "payload": payload, "rendered": rendered, "again": again}
        pending["replay"] = recorded_answer(request.messages, events)
        sys_msg, *rest = rendered.messages
        return request.override(system_message=sys_msg, messages=rest), pending  # type: ignore[arg-type]

    def _metadata(self, pending: dict[str, Any]) -> dict[str, Any]:
        """The LangSmith metadata of the model run: the task, the call's tokens and its manifest."""
        p: ContextBuilt = pending["payload"]
        return {
            "task_id": pending["task_id"],
            "thread_id": pending["task_id"],
            "role": AGENT_ROLE,
            "call": p.call,
            "budget": p.budget,
            "prompt_tokens": p.prompt_tokens,
            "cached_prefix_tokens": p.cached_prefix_tokens,
            "manifest": {
                "included": [b.id for b in p.blocks if b.included],
                "dropped": [{"id": b.id, "reason": b.reason} for b in p.blocks if not b.included],
                "blocks": [
                    {
                        "id": b.id,
                        "layer": b.layer,
                        "kind": b.kind,
                        "trust": b.trust,
                        "tokens": b.tokens,
                        "included": b.included,
                    }
                    for b in p.blocks
                ],
            },
        }

    def _record_call(self, request: ModelRequest, pending: dict[str, Any], response: Any, ms: int) -> None:
        """Record the call's ``context.built``: manifest, prompt (an artifact), usage and latency."""
        if pending["again"]:
            return
        r = pending["rendered"]
        result = response.result if isinstance(response, ModelResponse) else [response]
        ai = next((x for x in result if isinstance(x, AIMessage)), None)
        p: ContextBuilt = pending["payload"]
        p = p.model_copy(
            update={
                "prompt_ref": self.env.artifacts.put(prompt_text(r.messages, r.tools)),
                "usage": usage_of(ai) if ai is not None else None,
                "model": _model_name(request.model),
                "provider": provider_of(request.model) or None,
                "latency_ms": ms,
                "reply_tokens": self.env.count_messages([ai]) if ai is not None else None,
                "answer": answer_of(request.messages, ai),
            }
        )
        self._append(pending["task_id"], [new_event("context.built", p, actor="system")])

    def _traced(self, pending: dict[str, Any]) -> Any:
        """Set the run config's metadata for the model run the handler starts (returns the reset token)."""
        cfg = ensure_config()
        meta = {**(cfg.get("metadata") or {}), **self._metadata(pending)}
        return var_child_runnable_config.set({**cfg, "metadata": meta})  # type: ignore[typeddict-item]

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Send taskctx's prompt of the agent's messages; record the call's ``context.built``.

        Args:
            request: The agent's model request (its system message, messages and tools).
            handler: The next handler (the model call).

        Returns:
            The handler's response; or, when the log holds the answer of this call (same
            messages) with a tool call it recorded and the checkpoint lacks it (a crash before the
            model step's checkpoint was written), that answer again, with its call ids.

        Raises:
            BudgetError: The request's fixed part (system message, tool schemas, core layer) does
                not fit the budget.
            ValueError: ``side_effects`` or ``requires_approval`` names a tool the agent does not
                have, once all its tools are known (:meth:`check_tools`); nothing of the call is
                recorded.
        """
        new, pending = self._prepare(request)
        if pending["replay"] is not None:  # the log holds this call's answer: given again, not asked anew
            return ModelResponse(result=[pending["replay"]])
        token = self._traced(pending)
        t0 = time.perf_counter()
        try:
            response = handler(new)
        finally:
            var_child_runnable_config.reset(token)
        self._record_call(request, pending, response, int((time.perf_counter() - t0) * 1000))
        return response

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_model_call`.

        Args:
            request: The agent's model request.
            handler: The next handler (the model call).

        Returns:
            The handler's response.
        """
        new, pending = self._prepare(request)
        if pending["replay"] is not None:  # the log holds this call's answer: given again, not asked anew
            return ModelResponse(result=[pending["replay"]])
        token = self._traced(pending)
        t0 = time.perf_counter()
        try:
            response = await handler(new)
        finally:
            var_child_runnable_config.reset(token)
        self._record_call(request, pending, response, int((time.perf_counter() - t0) * 1000))
        return response


def _tool_name(t: BaseTool | dict[str, Any]) -> str:
    """A tool's name: a LangChain tool's ``.name``, or an OpenAI-format dict's."""
    if isinstance(t, BaseTool):
        return t.name
    return str((t.get("function") or {}).get("name") or t.get("name") or "")


def _model_name(model: Any) -> str | None:
    try:
        return str(model._get_ls_params().get("ls_model_name") or type(model).__name__)
    except Exception:
        return type(model).__name__
