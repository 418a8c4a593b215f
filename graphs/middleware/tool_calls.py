"""How :class:`~graphs.middleware.TaskContextMiddleware` records an agent's tool calls.

Each call is answered from the event log when it already ran (a resume), recorded when it starts
and when it returns (its output masked and compressed as the graph's are), and a side effect cut
off by a crash is an error the model sees instead of a second run. A mixin of the middleware.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from context import Event, classify_result, compress_tool_result, mask_secrets, new_event
from context.events import (
    PermissionEvent,
    ToolCalled,
    ToolResultReceived,
)
from nodes import NodeEnv, quote_external
from nodes.tools.builtin import READ_ARTIFACT_SCHEMA, read_artifact
from nodes.tools.tool_bytes import bytes_kept, keeping_bytes

from .answers import (
    PAUSED,
    CallRecord,
    answer_key,
    answer_seqs,
    call_key,
    key_of,
    lost_answers,
    made_by,
    recorded_result,
    resume_point,
    unanswered,
)
from .prompt import message_text

__all__ = ["INTERRUPTED", "NOT_FINISHED", "PAUSED", "ToolCallRecording", "check_gated", "split_reviewers"]

#: The message a side-effecting call gets when it was cut off mid-run (it is never run twice).
INTERRUPTED = (
    "The call {call_id} of {tool} was interrupted while it ran (the process stopped) and is not run "
    "again: it has side effects. Check its effect before calling it again."
)
#: The event kinds of a call's record: its start, a pause at its tool's interrupt(), its result.
_CALL_KINDS = ("tool.called", "permission.requested", "tool.result.received")

#: The message a call gets that has no result when a new turn starts (it has no side effects, or never ran).
NOT_FINISHED = (
    "The call {call_id} of {tool} has no result: its run stopped before it finished (the process "
    "stopped, or a new message started another turn). Call it again if it is still needed."
)


class ToolCallRecording:
    """The middleware's ``wrap_tool_call`` / ``awrap_tool_call`` and the recording behind them."""

    if TYPE_CHECKING:
        env: NodeEnv
        stores: Any
        side_effects: tuple[str, ...]
        requires_approval: tuple[str, ...]
        reviewers: tuple[HumanInTheLoopMiddleware, ...]

        def task_id(self, state: Any = None) -> str: ...

        def _append(self, task_id: str, events: list[Event]) -> list[Event]: ...

        def check_tools(self, tools: Any, *, every: bool = True) -> None: ...

    # ---- tool calls ----------------------------------------------------------------------
    def _check_all_tools(self, request: Any) -> None:
        """Check the names against all the agent's tools: the tool node's, which a tool call carries."""
        tools = getattr(request.runtime, "tools", None)
        if tools:
            self.check_tools(tools)

    def _gated(self, request: Any) -> bool:
        """Whether the call went through an approval step: its tool is gated, and the reviewer asked.

        With the agent's ``HumanInTheLoopMiddleware`` given (``requires_approval=hitl``) a call is
        gated when the tool is in its ``interrupt_on`` and its ``when`` predicate (if any) holds;
        with names only, when the tool is named.
        """
        name = request.tool_call["name"]
        if name not in self.requires_approval:
            return False
        if not self.reviewers:
            return True
        for hitl in self.reviewers:
            config = hitl.interrupt_on.get(name)
            when = config.get("when") if config else None
            if config and (when is None or when(request)):
                return True
        return False

    def _before_tool(self, request: Any) -> tuple[ToolMessage | None, bool]:
        """A recorded result, or for a cut-off side effect an error, answering the call (None: run it).

        Returns:
            ``(tool message or None, paused)``; ``paused``: the call's run stopped at its tool's
            own ``interrupt()`` (it runs again from its first line, its start recorded already).
        """
        cid, name, _ = _as_run(request)
        tid = self.task_id(request.state)
        made = made_by(request.state, cid)
        key, since = (key_of(made[1], made[0], cid), self._since(tid, made[1])) if made else ("", 0)
        seen = self.stores.events.read(tid, kinds=list(_CALL_KINDS))
        record = recorded_result(seen, cid, key, since)
        if record.result is None and (record.paused or not record.started or name not in self.side_effects):
            return None, record.paused  # run it: new, paused at its interrupt(), or without side effects
        return self._answer(tid, record, cid, name), False  # the recorded result, or INTERRUPTED

    def _pause_event(self, request: Any, ran: tuple[str, dict[str, Any]] | None, kind: str, actor: str) -> None:
        """Record a call's pause at its tool's own ``interrupt()`` (``permission.requested``) or its going on."""
        cid, name, args = _as_run(request)
        tool_, used = ran or (name, args)
        arguments = json.dumps(used, sort_keys=True, ensure_ascii=False, default=str)
        perm = PermissionEvent(call_id=cid, tool=tool_, arguments=arguments, reason=PAUSED)
        self._append(self.task_id(request.state), [new_event(kind, perm, actor=actor)])

    def _since(self, tid: str, ai: AIMessage) -> int:
        """The seq of the ``context.built`` of the answer ``ai`` (0: not known)."""
        if not ai.id:
            return 0
        built = self.stores.events.read(tid, kinds=["context.built"], fields=["answer"])
        return answer_seqs(built).get(ai.id, 0)

    def _answer(self, tid: str, record: CallRecord, cid: str, name: str) -> ToolMessage:
        """A call's tool message from the log: its recorded result, else an error recorded now.

        The error is :data:`INTERRUPTED` for a side effect that started (not paused at its
        ``interrupt()``), else :data:`NOT_FINISHED`.
        """
        done = record.result
        if done is None:
            cut = name in self.side_effects and record.started and not record.paused
            text = (INTERRUPTED if cut else NOT_FINISHED).format(call_id=cid, tool=name)
            p = ToolResultReceived(call_id=cid, status="error", result_summary=text, raw_chars=len(text))
            done = self._append(tid, [new_event("tool.result.received", p, actor="system")])[0].payload
        return self._shown(cid, name, done)

    def _mended(self, tid: str, messages: Sequence[BaseMessage]) -> list[BaseMessage] | None:
        """The messages a new turn starts with: its calls answered as the log says, lost answers put back.

        - A call of an AI message no tool message answers (a step's tool messages pending or
          lost when the turn started) gets its tool message right after that AI message.
        - A tool message another middleware gave a call cut off mid-run (deepagents'
          ``PatchToolCallsMiddleware``: "did not complete") is replaced by the log's answer, its
          id kept.
        - The lost answers (:func:`~graphs.middleware.answers.lost_answers`) go back, each call
          answered, right after the messages they answered when those are there, else before
          the turn's new human messages; when nothing else is left before them, the task's
          request (``task.created``) goes first.

        A call's tool message is its recorded result; a side effect cut off mid-run gets
        :data:`INTERRUPTED`, any other call :data:`NOT_FINISHED`, both recorded as error results
        (so they are given once, and a later run of the call is answered from the log). The list
        is rewritten (``REMOVE_ALL_MESSAGES``, then every message, ids kept).

        Returns:
            The update's ``messages``, or None (nothing to mend).
        """
        events = self.stores.events.read(tid, kinds=["task.created", "context.built", *_CALL_KINDS, "task.completed"])
        tools = [e for e in events if e.kind in _CALL_KINDS]
        seqs = answer_seqs(events)

        def record(ai: AIMessage, key: str, cid: str) -> CallRecord:
            return recorded_result(tools, cid, key, seqs.get(ai.id or "", 0))

        open_calls = unanswered(messages)
        fixed: list[BaseMessage] = []
        made: dict[str, tuple[int, AIMessage]] = {}  # call id -> the AI message naming it last
        changed = False
        for i, m in enumerate(messages):
            if isinstance(m, ToolMessage) and m.tool_call_id in made:
                at, ai = made[m.tool_call_id]
                cid = m.tool_call_id
                rec = record(ai, key_of(ai, at, cid), cid)
                if rec.started and rec.result is None:  # not this call's result: another middleware's stand-in
                    name = next(tc["name"] for tc in ai.tool_calls if tc.get("id") == cid)
                    fixed.append(self._answer(tid, rec, cid, name).model_copy(update={"id": m.id}))
                    changed = True
                    continue
            fixed.append(m)
            if not isinstance(m, AIMessage):
                continue
            made.update({tc.get("id") or "": (i, m) for tc in m.tool_calls})
            for _, tc in (c for c in open_calls if c[0] == i):
                cid = tc.get("id") or ""
                fixed.append(self._answer(tid, record(m, key_of(m, i, cid), cid), cid, tc["name"]))
                changed = True
        lost: list[BaseMessage] = []
        for ai in lost_answers(fixed, events, set(self.side_effects)):
            lost.append(ai)
            for tc in ai.tool_calls:
                cid = tc.get("id") or ""
                lost.append(self._answer(tid, record(ai, answer_key(ai.id, cid), cid), cid, tc["name"]))
        if not lost and not changed:
            return None
        at = resume_point(fixed, events, lost[0]) if lost and isinstance(lost[0], AIMessage) else None
        if at is None:  # before the turn's new human messages
            at = len(fixed)
            while at > 0 and isinstance(fixed[at - 1], HumanMessage):
                at -= 1
            if lost and not at and events and events[0].kind == "task.created":  # the request was lost with them
                lost.insert(0, HumanMessage(events[0].payload["original_request"]))
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *fixed[:at], *lost, *fixed[at:]]

    def _record_start(self, request: Any, args: dict[str, Any] | None = None, tool: str | None = None) -> None:
        """Record the call as it starts its run (and its approval: the approval step let it through).

        ``args`` and ``tool``: what the tool's function was called with, when they are known
        (a reviewer's edit), else the request's call.
        """
        cid, name, asked = _as_run(request)
        tid = self.task_id(request.state)
        name = tool or name
        arguments = json.dumps(asked if args is None else args, sort_keys=True, ensure_ascii=False, default=str)
        out: list[Event] = []
        if self._gated(request):  # the call reached its run: the approval step let it through
            perm = PermissionEvent(call_id=cid, tool=name, arguments=arguments, reason="approved")
            out += [new_event("permission.requested", perm, actor="system")]
            out += [new_event("permission.granted", perm, actor="user")]
        thought = _thought(request.state, cid)
        called = ToolCalled(
            call_id=cid,
            tool=name,
            arguments=arguments,
            thought=thought,
            idempotency_key=call_key(request.state, cid),
            has_side_effects=name in self.side_effects,
        )
        self._append(tid, [*out, new_event("tool.called", called, actor="agent")])

    def _instrumented(
        self,
        request: Any,
        started: list[tuple[str, dict[str, Any]]],
        paused: bool = False,
        outputs: list[Any] | None = None,
    ) -> Any:
        """The request whose tools note their ``bytes`` and record the call when its run starts.

        The call is recorded when a tool's function starts, with the name and arguments it runs
        with, not before the handler: a ``HumanInTheLoopMiddleware`` inside this middleware
        (listed after it) substitutes a reviewer's edit in the handler (the agent's other tools
        are wrapped too, for an edit that names another tool), and in ``per_call`` mode decides
        there: a call it pauses or rejects never started. A tool without a function of its own
        is recorded before the handler, as the request calls it. ``paused``: the call's start
        is recorded already (it stopped at its tool's own ``interrupt()``). ``outputs``: where
        the tool's function adds what it returned.
        """
        _, name, asked = _as_run(request)

        def start(tool: str, fields: set[str], kwargs: dict[str, Any]) -> None:
            if not started:
                ran = {k: v for k, v in kwargs.items() if k in fields}
                started.append((tool, ran))
                if not paused:
                    self._record_start(request, ran if ran or not asked else None, tool)

        main = _recording(request.tool, start, set(asked), outputs) if request.tool is not None else None
        if main is None or request.tool.name != name:
            if not paused:
                self._record_start(request)
            started.append((name, asked))
            return request
        update: dict[str, Any] = {"tool": main}
        runtime = request.runtime
        if dataclasses.is_dataclass(runtime) and getattr(runtime, "tools", None):
            tools = [main if t is request.tool else (_recording(t, start, set(), outputs) or t) for t in runtime.tools]
            update["runtime"] = dataclasses.replace(runtime, tools=tools)  # type: ignore[type-var]
        return request.override(**update)

    def _unstarted(self, request: Any, result: Any) -> Any:
        """Record a gated call answered inside the handler without a run: a reviewer's rejection or answer."""
        cid, name, args = _as_run(request)
        text = message_text(result) if isinstance(result, ToolMessage) else ""
        denied = isinstance(result, ToolMessage) and result.status == "error"
        perm = PermissionEvent(call_id=cid, tool=name, arguments=json.dumps(args, sort_keys=True), reason=text[:500])
        out: list[Event] = []
        if self._gated(request):
            out.append(new_event("permission.requested", perm, actor="system"))
            out.append(new_event("permission.denied" if denied else "permission.granted", perm, actor="user"))
        p = ToolResultReceived(
            call_id=cid, status="denied" if denied else "ok", result_summary=text, raw_chars=len(text)
        )
        written = self._append(self.task_id(request.state), [*out, new_event("tool.result.received", p, actor="user")])
        return self._shown(cid, name, written[-1].payload, base=result if isinstance(result, ToolMessage) else None)

    def _after_tool(
        self,
        request: Any,
        result: Any,
        kept: Sequence[bytes] = (),
        ran: tuple[str, dict[str, Any]] | None = None,
        outputs: Sequence[Any] = (),
    ) -> Any:
        """Store the output raw, record its result, and give the agent the compressed, quoted form.

        ``kept``: the ``bytes`` the tool returned (stored as they are; the text is their UTF-8
        decoding, undecodable bytes as U+FFFD, as the graph's LangChain tools record them).
        ``ran``: the tool and arguments it ran with (default: the request's call). ``outputs``:
        what the tool's function returned: a note another middleware inside this one put before
        that text (a reviewer's edit) is not stored with it; it stays before the quoted output,
        as it is when that middleware is outside.
        """
        cid, name, args = _as_run(request)
        name, args = ran or (name, args)
        if not isinstance(result, ToolMessage):  # a Command: its update goes through as the tool made it
            self._command_result(self.task_id(request.state), cid, result)
            return result
        own, text, note = (outputs[-1] if outputs else None), result.content, ""
        if isinstance(own, str) and own and isinstance(text, str) and text != own and text.endswith(own):
            note, result = text[: -len(own)], result.model_copy(update={"content": own})
        if kept and result.status != "error":
            raw = kept[-1].decode("utf-8", "replace")
            ref = self.env.artifacts.put(kept[-1])
        else:
            raw = result.content if isinstance(result.content, str) else json.dumps(result.content, ensure_ascii=False)
            ref = self.env.artifacts.put(raw)
        path = args.get("path") or args.get("file_path")
        kind = classify_result(name, args)
        comp = compress_tool_result(raw, kind, ref, path=path if isinstance(path, str) else None, tool=name)
        p = ToolResultReceived(
            call_id=cid,
            status="error" if result.status == "error" else "ok",
            result_summary=comp.text,
            raw_ref=ref,
            raw_chars=len(raw),
            compressed=comp.compressed,
        )
        written = self._append(self.task_id(request.state), [new_event("tool.result.received", p, actor="tool")])
        shown = self._shown(cid, name, written[0].payload, base=result)
        return shown.model_copy(update={"content": note + shown.content}) if note else shown

    def _command_result(self, tid: str, cid: str, command: Any) -> None:
        """Record the tool message a tool's ``Command`` carries (shown as it is: not compressed)."""
        update = getattr(command, "update", None)
        msgs = update.get("messages", []) if isinstance(update, dict) else []
        tm = next((m for m in msgs if isinstance(m, ToolMessage) and m.tool_call_id == cid), None)
        if tm is None:
            return
        raw = message_text(tm)
        p = ToolResultReceived(
            call_id=cid,
            status="error" if tm.status == "error" else "ok",
            result_summary=raw,
            raw_ref=self.env.artifacts.put(raw),
            raw_chars=len(raw),
        )
        self._append(tid, [new_event("tool.result.received", p, actor="tool")])

    def _failed(self, request: Any, exc: Exception) -> None:
        """Record a call whose tool raised: an error result, so a resume answers it from the log."""
        text = f"{type(exc).__name__}: {exc}"
        p = ToolResultReceived(call_id=request.tool_call.get("id") or "", status="error", result_summary=text)
        self._append(
            self.task_id(request.state),
            [new_event("tool.result.received", p.model_copy(update={"raw_chars": len(text)}), actor="tool")],
        )

    def _shown(self, cid: str, name: str, p: dict[str, Any], base: ToolMessage | None = None) -> ToolMessage:
        """The tool message the agent keeps: the recorded prompt form, quoted, with its ref."""
        text = quote_external(mask_secrets(p["result_summary"]).text, source=f"tool:{name}", ref=p.get("raw_ref"))
        status = "error" if p["status"] != "ok" else "success"
        if base is not None:
            return base.model_copy(update={"content": text, "status": status})
        return ToolMessage(content=text, tool_call_id=cid, name=name, status=status)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Record the call and its result; the agent gets the output compressed, quoted, with its ref.

        ``read_artifact`` (the middleware's own tool) is shown whole and not stored again. A tool
        that returns ``bytes`` has them stored as they are, its text their UTF-8 decoding
        (undecodable bytes as U+FFFD), as the graph's LangChain tools record them.

        Args:
            request: The tool call request (``ToolCallRequest``).
            handler: The next handler (the tool's run).

        Returns:
            The tool message (or the tool's ``Command``).

        Raises:
            ValueError: ``side_effects`` or ``requires_approval`` names a tool the agent does not
                have (the call is not run).
        """
        self._check_all_tools(request)
        if request.tool_call["name"] == "read_artifact":
            return handler(request)
        answered, paused = self._before_tool(request)
        if answered is not None:
            return answered
        started: list[tuple[str, dict[str, Any]]] = []
        outputs: list[Any] = []
        with bytes_kept() as kept:
            try:
                out = handler(self._instrumented(request, started, paused, outputs))
            except GraphInterrupt:  # a reviewer's decision to come, or the tool's own interrupt()
                if started and not paused:  # the tool's own: recorded once, not a cut
                    self._pause_event(request, started[0], "permission.requested", "tool")
                raise
            except GraphBubbleUp:  # a Command for the parent graph: not a result
                raise
            except Exception as exc:  # recorded, then raised as the agent would have raised it
                if not started:
                    self._record_start(request)
                self._failed(request, exc)
                raise
        if not started:  # answered inside the handler, the tool not run
            if isinstance(out, ToolMessage) and self._gated(request):
                return self._unstarted(request, out)  # a reviewer's rejection or answer
            self._record_start(request)  # another middleware's answer: the call's result
        if paused:  # its interrupt() was answered: the run went on
            self._pause_event(request, started[0] if started else None, "permission.granted", "user")
        return self._after_tool(request, out, kept, started[0] if started else None, outputs)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`.

        Args:
            request: The tool call request.
            handler: The next handler (the tool's run).

        Returns:
            The tool message (or the tool's ``Command``).

        Raises:
            ValueError: ``side_effects`` or ``requires_approval`` names a tool the agent does not
                have (the call is not run).
        """
        self._check_all_tools(request)
        if request.tool_call["name"] == "read_artifact":
            return await handler(request)
        answered, paused = self._before_tool(request)
        if answered is not None:
            return answered
        started: list[tuple[str, dict[str, Any]]] = []
        outputs: list[Any] = []
        with bytes_kept() as kept:
            try:
                out = await handler(self._instrumented(request, started, paused, outputs))
            except GraphInterrupt:  # a reviewer's decision to come, or the tool's own interrupt()
                if started and not paused:  # the tool's own: recorded once, not a cut
                    self._pause_event(request, started[0], "permission.requested", "tool")
                raise
            except GraphBubbleUp:  # a Command for the parent graph: not a result
                raise
            except Exception as exc:  # recorded, then raised as the agent would have raised it
                if not started:
                    self._record_start(request)
                self._failed(request, exc)
                raise
        if not started:  # answered inside the handler, the tool not run
            if isinstance(out, ToolMessage) and self._gated(request):
                return self._unstarted(request, out)  # a reviewer's rejection or answer
            self._record_start(request)  # another middleware's answer: the call's result
        if paused:  # its interrupt() was answered: the run went on
            self._pause_event(request, started[0] if started else None, "permission.granted", "user")
        return self._after_tool(request, out, kept, started[0] if started else None, outputs)

    def _read_artifact_tool(self) -> BaseTool:
        env = self.env

        @tool("read_artifact", description=READ_ARTIFACT_SCHEMA["function"]["description"])
        def read_artifact_tool(ref: str) -> str:
            """Fetch the exact text of an artifact ref."""
            out = read_artifact(env, {"ref": ref})
            return out.output if out.status == "ok" else f"error: {out.output}"

        return read_artifact_tool


def _as_run(request: Any) -> tuple[str, str, dict[str, Any]]:
    """The call id, tool and arguments of the request's call (a reviewer's edit, when one outside applied it)."""
    tc = request.tool_call
    return tc.get("id") or "", tc["name"], dict(tc.get("args") or {})


def _recording(
    tool_: BaseTool,
    start: Callable[[str, set[str], dict[str, Any]], None],
    asked: set[str],
    outputs: list[Any] | None = None,
) -> Any:
    """A copy of ``tool_`` that notes its ``bytes``, calls ``start(name, fields, kwargs)`` as it runs.

    ``outputs``: where the function's own return value is added (before any middleware's note).
    None: the tool has no function of its own to wrap.
    """
    copy = keeping_bytes(tool_)
    func, coro = getattr(copy, "func", None), getattr(copy, "coroutine", None)
    if copy is tool_ or (func is None and coro is None):
        return None
    fields = set(getattr(getattr(tool_, "tool_call_schema", None), "model_fields", None) or {}) | asked
    update: dict[str, Any] = {}
    if callable(func):
        sync_func = func

        @functools.wraps(sync_func)
        def run(*a: Any, **kw: Any) -> Any:
            start(tool_.name, fields, kw)
            out = sync_func(*a, **kw)
            if outputs is not None:
                outputs.append(out)
            return out

        update["func"] = run
    if callable(coro):
        async_func = coro

        @functools.wraps(async_func)
        async def arun(*a: Any, **kw: Any) -> Any:
            start(tool_.name, fields, kw)
            out = await async_func(*a, **kw)
            if outputs is not None:
                outputs.append(out)
            return out

        update["coroutine"] = arun
    return copy.model_copy(update=update)


def _thought(state: Any, call_id: str) -> str:
    """The text of the AI message that made the call (the agent's note, recorded with it)."""
    made = made_by(state, call_id)
    return made[1].content if made is not None and isinstance(made[1].content, str) else ""


def split_reviewers(
    requires_approval: Any,
) -> tuple[tuple[HumanInTheLoopMiddleware, ...], Any]:
    """The ``HumanInTheLoopMiddleware`` instances of a ``requires_approval=`` argument, and the rest.

    Args:
        requires_approval: One reviewer middleware, one name or tool, or an iterable of them.

    Returns:
        The reviewer middleware, and the names and tools (for ``as_names``).
    """
    if isinstance(requires_approval, HumanInTheLoopMiddleware):
        return (requires_approval,), ()
    if isinstance(requires_approval, str | BaseTool) or requires_approval is None:
        return (), requires_approval
    items = list(requires_approval)
    hitl = tuple(i for i in items if isinstance(i, HumanInTheLoopMiddleware))
    return hitl, [i for i in items if not isinstance(i, HumanInTheLoopMiddleware)]


def check_gated(names: Sequence[str], reviewers: Sequence[HumanInTheLoopMiddleware]) -> None:
    """Refuse a name of ``requires_approval`` that the reviewer middleware given with it does not gate.

    Args:
        names: The tools named in ``requires_approval``.
        reviewers: The ``HumanInTheLoopMiddleware`` given in ``requires_approval`` (none: no check).

    Raises:
        ValueError: A named tool is in no reviewer's ``interrupt_on`` (or is set to False there),
            so its calls would run unreviewed; naming the tool and the fix.
    """
    if not reviewers:
        return
    gated = {n for h in reviewers for n in h.interrupt_on}
    for name in dict.fromkeys(names):
        if name not in gated:
            raise ValueError(
                f"requires_approval names {name!r}, which the HumanInTheLoopMiddleware does not gate; "
                f"add {name!r}: True to its interrupt_on, or drop the name (the middleware's gates are enough)"
            )
