"""Chat models and answer builders for tests and offline runs.

:class:`ScriptedChatModel` answers from a script per role; :class:`ReplayChatModel` replays a
recorded trajectory. :func:`plan`, :func:`tool_call`, :func:`complete`, :func:`and_complete`,
:func:`review` and :func:`recover` build the answers.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

from context import Trajectory
from context.text import cut

__all__ = [
    "ARGS_CHUNK",
    "OFFLINE_PROFILE",
    "RECORDED_THOUGHT",
    "REPLAY_CHUNK",
    "ReplayChatModel",
    "ScriptedChatModel",
    "and_complete",
    "complete",
    "plan",
    "recover",
    "reply_chunks",
    "review",
    "text_pieces",
    "tool_call",
]

REPLAY_CHUNK = 10
#: A replay plan has at most this many steps (as a planner would not write a 1,000-step plan):
#: past ``REPLAY_CHUNK * REPLAY_MAX_PLAN_STEPS`` recorded actions each plan step holds more of them.
REPLAY_MAX_PLAN_STEPS = 100
#: Heads a finding that is the recorded agent's own thought (not something the replay observed).
RECORDED_THOUGHT = "recorded thought (replay):"
#: Characters of a recorded thought a replayed finding quotes (longer: cut, saying so).
THOUGHT_LIMIT = 300

_ids = itertools.count(1)


def tool_call(name: str, args: dict[str, Any] | None = None, id: str | None = None, content: str = "") -> AIMessage:
    """An AI message with one tool call.

    Args:
        name: The tool's name.
        args: Its arguments (None: none).
        id: The call's id; default ``call_<n>``, ``n`` a process-wide counter written with six
            digits at least, so a call's token count never depends on how many came before.
        content: The message's text (the model's thought).

    Returns:
        The message.
    """
    return AIMessage(
        content=content,
        tool_calls=[{"name": name, "args": args or {}, "id": id or f"call_{next(_ids):06d}", "type": "tool_call"}],
    )


def plan(
    *titles: str,
    goal: str = "",
    criteria: Sequence[str] = (),
    reason: str = "",
    steps: Sequence[dict[str, Any]] | None = None,
    constraints: Sequence[str] = (),
) -> AIMessage:
    """A ``submit_plan`` answer.

    Args:
        *titles: Step titles: steps ``s1``, ``s2``... (unless ``steps`` is given).
        goal: The interpreted goal.
        criteria: Success criteria the planner adds.
        reason: Why this plan.
        steps: Step dicts (``title``, ``id``, ``description``, ``expected_output``, ``depends_on``).
        constraints: Hard constraints the planner adds.

    Returns:
        The answer.
    """
    st = list(steps) if steps is not None else [{"title": t} for t in titles]
    args: dict[str, Any] = {"interpreted_goal": goal, "success_criteria": list(criteria), "steps": st, "reason": reason}
    if constraints:
        args["constraints"] = list(constraints)
    return tool_call("submit_plan", args)


def complete(summary: str, findings: Sequence[str | dict[str, Any]] = (), result: str = "success") -> AIMessage:
    """A ``complete_step`` answer.

    Args:
        summary: The step's summary.
        findings: Findings: statements, or dicts (``statement``, ``evidence_refs``, ``supersedes``).
        result: ``success``, ``partial``, ``failed`` or ``blocked``.

    Returns:
        The answer.
    """
    fs = [f if isinstance(f, dict) else {"statement": f} for f in findings]
    return tool_call("complete_step", {"summary": summary, "findings": fs, "result": result})


def and_complete(
    msg: AIMessage, summary: str, findings: Sequence[str | dict[str, Any]] = (), result: str = "success"
) -> AIMessage:
    """``msg`` (an answer with tool calls) plus ``complete_step``: the step completes once they succeed.

    No other executor call is needed.

    Args:
        msg: An answer with tool calls (:func:`tool_call`).
        summary: The step's summary.
        findings: Findings, as for :func:`complete`.
        result: The step's result.

    Returns:
        The answer.
    """
    return AIMessage(content=msg.content, tool_calls=[*msg.tool_calls, *complete(summary, findings, result).tool_calls])


def review(verdict: str = "approve", summary: str = "", issues: Sequence[str] = ()) -> AIMessage:
    """A ``submit_review`` answer.

    Args:
        verdict: ``approve`` or ``revise``.
        summary: The review's summary.
        issues: What must be fixed (for ``revise``).

    Returns:
        The answer.
    """
    return tool_call("submit_review", {"verdict": verdict, "summary": summary, "issues": list(issues)})


def recover(decision: str = "retry", reason: str = "") -> AIMessage:
    """A ``decide_recovery`` answer.

    Args:
        decision: ``retry``, ``replan`` or ``stop``.
        reason: Why.

    Returns:
        The answer.
    """
    return tool_call("decide_recovery", {"decision": decision, "reason": reason})


Answer = AIMessage | Callable[[list[BaseMessage], dict[str, Any]], AIMessage]


#: The metadata of the offline model call in flight (``role``, ``role_call``...). langchain-core
#: hands ``_generate`` a run manager carrying it, but calls ``_stream`` without one (it runs the
#: callbacks itself), so the public entry points put it here for both.
_CALL_META: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("taskctx_call_meta", default=None)
#: Characters of a tool call's JSON arguments per streamed chunk.
ARGS_CHUNK = 16


def text_pieces(text: str) -> list[str]:
    """``text`` as a model streams it: one piece per word, each with the whitespace before it.

    Args:
        text: The reply's text.

    Returns:
        The pieces; joined, they are ``text`` (empty text: no piece).
    """
    return re.findall(r"\s*\S+|\s+$", text)


def reply_chunks(msg: AIMessage) -> list[AIMessageChunk]:
    """``msg`` as a streaming provider sends it: its text word by word, then each tool call.

    A tool call's first chunk carries its name, id and index; its JSON arguments follow in
    pieces of :data:`ARGS_CHUNK` characters (the index joins them), as OpenAI and Anthropic
    stream them. The chunks added up (``+``) give ``msg``'s content and tool calls.

    Args:
        msg: The whole reply.

    Returns:
        The chunks, at least one.
    """
    content = msg.content if isinstance(msg.content, str) else ""
    out = [AIMessageChunk(content=piece) for piece in text_pieces(content)]
    if not isinstance(msg.content, str):  # a content list is sent whole
        out.append(AIMessageChunk(content=msg.content))
    for i, tc in enumerate(msg.tool_calls):
        args = json.dumps(tc["args"])
        pieces = [args[k : k + ARGS_CHUNK] for k in range(0, len(args), ARGS_CHUNK)] or [""]
        for k, piece in enumerate(pieces):
            first = k == 0
            out.append(
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {
                            "name": tc["name"] if first else None,
                            "args": piece,
                            "id": tc["id"] if first else None,
                            "index": i,
                            "type": "tool_call_chunk",
                        }
                    ],
                )
            )
    return out or [AIMessageChunk(content="")]


#: The profile the offline models declare (langchain-core's ``ModelProfile``): a window like
#: the o200k models' they count as, so ``--budget auto`` works offline.
OFFLINE_PROFILE: dict[str, Any] = {"max_input_tokens": 128_000, "max_output_tokens": 16_384, "tool_calling": True}


class _OfflineModel(BaseChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("profile", dict(OFFLINE_PROFILE))
        super().__init__(**kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """The model with ``tools`` bound as OpenAI-format tools (LangChain's fake models raise here).

        Args:
            tools: Tools in any form ``convert_to_openai_tool`` takes.
            **kwargs: Other bind arguments.

        Returns:
            The bound model.
        """
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _answer(self, messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
        raise NotImplementedError

    def _meta(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        return {**(self.metadata or {}), **(metadata or {})}

    def generate(self, messages: Any, stop: Any = None, callbacks: Any = None, **kwargs: Any) -> Any:
        """``BaseChatModel.generate`` (``invoke``, ``batch``), the call's metadata kept for ``_stream``."""
        token = _CALL_META.set(self._meta(kwargs.get("metadata")))
        try:
            return super().generate(messages, stop, callbacks, **kwargs)
        finally:
            _CALL_META.reset(token)

    async def agenerate(self, messages: Any, stop: Any = None, callbacks: Any = None, **kwargs: Any) -> Any:
        """``BaseChatModel.agenerate`` (``ainvoke``, ``abatch``), the call's metadata kept for ``_stream``."""
        token = _CALL_META.set(self._meta(kwargs.get("metadata")))
        try:
            return await super().agenerate(messages, stop, callbacks, **kwargs)
        finally:
            _CALL_META.reset(token)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[AIMessageChunk]:
        """``BaseChatModel.stream``, the call's metadata (``config["metadata"]``) kept for ``_stream``."""
        ctx = contextvars.copy_context()  # each step runs in it: the caller's context is left as it was
        ctx.run(_CALL_META.set, self._meta(ensure_config(config).get("metadata")))
        chunks = ctx.run(super().stream, input, config, **kwargs)
        while True:
            try:
                yield ctx.run(next, chunks)
            except StopIteration:
                return

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """``BaseChatModel.astream``, the call's metadata (``config["metadata"]``) kept for ``_stream``."""
        token = _CALL_META.set(self._meta(ensure_config(config).get("metadata")))
        try:
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
        finally:
            with contextlib.suppress(ValueError):  # closed from another context (garbage collection)
                _CALL_META.reset(token)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        meta = dict(run_manager.metadata) if run_manager and run_manager.metadata else dict(_CALL_META.get() or {})
        msg = self._answer(messages, meta)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        msg = self._answer(messages, dict(_CALL_META.get() or {}))
        for chunk in reply_chunks(msg):
            yield ChatGenerationChunk(message=chunk)


class ScriptedChatModel(_OfflineModel):
    """A chat model that answers from ``script``: a list (any role, in order) or ``{role: [answers]}``.

    An answer is an ``AIMessage`` or ``callable(messages, metadata) -> AIMessage``. The answer
    index is the role's call number, read from the call's metadata (``role_call``, set by every
    taskctx node), so a script picks up at the right place after a resume in a new process;
    outside taskctx nodes it counts calls itself. When a role's script runs out,
    ``fallback[role]`` answers, if given; otherwise ``IndexError`` names the role and the call.
    Streamed, the answer comes word by word, its tool calls in pieces (:func:`reply_chunks`).
    """

    script: dict[str, list[Any]] | list[Any] = Field(default_factory=list)
    fallback: dict[str, Any] = Field(default_factory=dict)
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "taskctx-scripted"

    def _answer(self, messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
        role = str(meta.get("role", "*"))
        if isinstance(self.script, dict):
            answers = self.script.get(role) or self.script.get("*") or []
            key = role
        else:
            answers, key = self.script, "*"
        if "role_call" in meta and isinstance(self.script, dict):
            idx = int(meta["role_call"]) - 1  # the call number counts from 1
        else:
            idx = self._counts.get(key, 0)
        self._counts[key] = idx + 1
        if idx >= len(answers) and role in self.fallback:
            fallback: Answer = self.fallback[role]
            return fallback(messages, meta) if callable(fallback) else fallback
        if idx >= len(answers):
            raise IndexError(
                f"ScriptedChatModel: no answer left for role {role!r} call {idx + 1} "
                f"(script has {len(answers)}); add answers to the script"
            )
        a: Answer = answers[idx]
        return a(messages, meta) if callable(a) else a


class ReplayChatModel(_OfflineModel):
    """A chat model that replays ``trajectory`` role by role.

    The planner gets a plan of one step per ``chunk`` recorded actions (at most
    ``REPLAY_MAX_PLAN_STEPS`` steps); the executor gets recorded action ``executor_steps + 1`` as a
    tool call ``rec-<i>`` (:class:`~nodes.tools.ReplayTools` returns its observation), with
    ``complete_step`` beside each step's last action, its finding the chunk's last recorded
    thought headed :data:`RECORDED_THOUGHT`; the reviewer approves; recovery retries.
    """

    trajectory: Trajectory
    chunk: int = REPLAY_CHUNK

    @property
    def _llm_type(self) -> str:
        return "taskctx-replay"

    def chunks(self) -> list[tuple[int, int]]:
        """``(first, last)`` recorded action (1-based) of each plan step.

        ``chunk`` actions each, or more when that would make more than ``REPLAY_MAX_PLAN_STEPS`` steps.
        """
        n = len(self.trajectory.steps)
        size = max(self.chunk, -(-n // REPLAY_MAX_PLAN_STEPS))
        return [(a, min(a + size - 1, n)) for a in range(1, n + 1, size)]

    def _answer(self, messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
        role = meta.get("role")
        steps = self.trajectory.steps
        if role == "planner":
            plan_steps = []
            for k, (a, b) in enumerate(self.chunks(), start=1):
                tools = sorted({s.tool for s in steps[a - 1 : b]})
                plan_steps.append(
                    {
                        "id": f"s{k}",
                        "title": f"Recorded steps {a}-{b} ({', '.join(tools)})",
                        "expected_output": f"the observations of recorded steps {a}-{b}",
                        "depends_on": [f"s{k - 1}"] if k > 1 else [],
                    }
                )
            return plan(
                goal=self.trajectory.goal,  # the request's first meaningful line, not its boilerplate
                steps=plan_steps,
                criteria=[f"all {len(steps)} recorded actions replayed once, each observation recorded"],
            )
        if role == "executor":
            pos = int(meta.get("executor_steps", 0))
            sid = str(meta.get("step_id") or "s1")
            k = int(sid[1:]) if sid[1:].isdigit() else 1
            a, b = self.chunks()[min(k, len(self.chunks())) - 1]
            last = next((s.thought for s in reversed(steps[a - 1 : min(b, pos + 1)]) if s.thought), "")
            thought = cut(" ".join(last.split()), THOUGHT_LIMIT)
            finding = f"{RECORDED_THOUGHT} {thought}" if thought else f"recorded steps {a}-{b} replayed"
            if pos < b and pos < len(steps):
                s = steps[pos]
                call = tool_call(s.tool, s.arguments, id=f"rec-{pos + 1}", content=s.thought)
                if pos + 1 == min(b, len(steps)):  # the chunk's last action: complete the step with it
                    return and_complete(call, f"Replayed recorded steps {a}-{b}", findings=[finding])
                return call
            return complete(f"Replayed recorded steps {a}-{b}", findings=[finding])
        if role == "reviewer":
            return review("approve", f"all {len(steps)} recorded steps replayed")
        if role == "recovery":
            return recover("retry", "the recorded agent went on after this error")
        return AIMessage(content="")
