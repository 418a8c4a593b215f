"""The executor's renderer: core + checkpoint + the append-only transcript of calls + the state delta.

Stable parts come first, so a call's prompt starts with the previous call's; the transcript
restarts when the budget forces it or the cost model expects it to pay (:mod:`.restart`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from context import BudgetError, ContextBlock, TaskContext, apply_event, new_event
from context.blocks import Priority, Trust
from context.events import ContextBuilt, TranscriptReset
from context.models import ToolCallRecord, TranscriptNote
from context.text import cut
from context.windows import DEGRADED_ARGS_CHARS, NARROW_DELTA_TOKENS, PLAN_ROOM_TOKENS

from ..runtime import NodeEnv, Rendered
from .base import assemble, block, core_blocks, error_block, memory_block
from .policy_blocks import PolicyBlocks
from .quoting import EXTERNAL_RULE
from .restart import KEEP_LAST, restart_decision
from .role_reports import report_blocks
from .transcript import DIGEST_LINE_CHARS, checkpoint_text, delta_text, entry_messages, shown_output

__all__ = ["DEGRADE_ORDER", "ENTRY_CACHE", "EXECUTOR_SYSTEM", "MAX_NOTES", "REUSE_MIN_CHARS", "ExecutorRenderer"]

#: What the executor's required blocks give up, in this order, before a ``BudgetError`` is
#: possible (each step's cost is in the manifest reason of the blocks it degraded).
DEGRADE_ORDER = (
    "state narrowed: the state delta and the checkpoint with the plan as one line of counts, "
    "their texts cut, the newest findings and left calls",
    "the floor's calls as digests with refs: each kept call and the latest one as a digest line, "
    "its thought left out and its arguments cut around their ref",
)


#: A transcript holding this many state-delta notes restarts: steps that end without tool calls
#: add notes but no calls, and the notes live in the checkpointed state until a restart.
MAX_NOTES = 12


#: Rendered transcript entries the renderer keeps (LRU).
ENTRY_CACHE = 1024


EXECUTOR_SYSTEM = (
    "You are the executor of a taskctx task. Work on the current step only, one tool call at a time. "
    "When the step's expected output is reached, call complete_step with a short summary and your findings "
    "(each with the artifact refs that support it). Never break a hard constraint. Fetch any omitted output "
    "with read_artifact(ref) when you need it.\n" + EXTERNAL_RULE
)


#: An output at least this long (chars of its prompt form) that is byte-identical to an earlier
#: output in the same transcript is rendered as a pointer to that call (same artifact ref).
REUSE_MIN_CHARS = 300


@dataclass
class _TranscriptBlocks:
    """The transcript's blocks of one rendering pass: the calls, and the notes between them."""

    env: NodeEnv
    #: Calls in the transcript.
    n: int
    #: Notes not added yet, oldest first (the current delta last, when it changed).
    notes: list[TranscriptNote]
    #: The pass's candidate blocks, appended to.
    cands: list[ContextBlock]
    #: Block id -> the chat messages it stands for.
    extra: dict[str, list[BaseMessage]] = field(default_factory=dict)

    def add_notes(self, upto: int) -> None:
        """Add the notes made at or before call ``upto``; the last note is the required delta."""
        env, n = self.env, self.n
        while self.notes and self.notes[0].at <= upto:
            note = self.notes.pop(0)
            latest = not self.notes
            bid = "step.delta" if latest else f"note.{note.at}.{len(self.extra)}"
            self.extra[bid] = [HumanMessage(content=note.text)]
            self.cands.append(
                block(
                    env,
                    bid,
                    note.text,
                    kind="state",
                    layer="step",
                    source="TaskContext",
                    priority="required" if latest else "normal",
                    trust=_trust_of(note.text),
                    slot="seq:transcript",
                    relevance=1.0 - (n - note.at) / max(n, 1),
                    tokens=env.count_messages(self.extra[bid]),
                )
            )

    def add_call(self, rec: ToolCallRecord, msgs: list[BaseMessage], tokens: int, prio: Priority, age: int) -> None:
        """Add one call's entry (``msgs``: its AI and tool message, ``tokens`` of them), ``age`` calls old."""
        bid = f"tool.{rec.id}"
        self.extra[bid] = msgs
        self.cands.append(
            block(
                self.env,
                bid,
                msgs[1].content if isinstance(msgs[1].content, str) else "",
                kind="tool_result",
                layer="recent",
                source=f"tool:{rec.tool}",
                priority=prio,
                trust="external_content",
                observed_at=rec.timestamp,
                relevance=1.0 - age / max(self.n, 1),
                slot="seq:transcript",
                compressed=rec.compressed,
                tokens=tokens,
            )
        )


class ExecutorRenderer:
    """The executor's renderer: core + checkpoint + the append-only transcript + the state delta.

    Transcript entries are rendered once and cached (an entry depends only on the entries before
    it), in a bounded LRU shared by the threads of a graph.

    Args:
        keep_last: Calls a transcript restart keeps.
        reports: The roles whose reports (``progress.reports``) the prompt shows, in the state
            delta at its tail: role names, or ``"*"`` for every other role; default none.
    """

    role = "executor"

    def __init__(self, keep_last: int = KEEP_LAST, *, reports: Sequence[str] = ()):
        self.keep_last = keep_last
        self.reports = tuple(reports)
        # transcript entries as rendered, keyed by the entry and everything before it in the
        # transcript (an entry's form depends only on earlier entries): append-only, so each
        # call renders only its new entries. Bounded (LRU), shared by the threads of a graph.
        self._entries: OrderedDict[tuple[Any, ...], tuple[int, str, list[BaseMessage], int]] = OrderedDict()
        self._entry_ids = itertools.count(1)
        self._lock = threading.Lock()

    def _entry(
        self,
        prev: int,
        rec: ToolCallRecord,
        *,
        digest: bool,
        same_as: str | None,
        shown: Sequence[tuple[str, str]],
        reuse: bool,
        env: NodeEnv,
        degrade: bool = False,
    ) -> tuple[int, str, list[BaseMessage], int]:
        """``(entry id, shown output, messages, tokens)`` of one transcript entry, cached.

        ``reuse=False``: no span pointers (``shown`` is ignored).
        """
        key = (
            prev,
            rec.id,
            rec.status,
            rec.raw_ref,
            rec.result_summary,
            rec.thought,
            rec.tool,
            rec.arguments,
            digest,
            same_as,
            reuse,
            degrade,
            env.count_tokens,
        )
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        body = shown_output(rec, digest=digest, same_as=same_as, earlier=shown if reuse else ())
        if degrade and rec.thought:  # the last resort before BudgetError: the thought goes (it stays in the log)
            rec = rec.model_copy(update={"thought": ""})
        msgs = entry_messages(rec, body, degraded=degrade and digest)
        entry = (next(self._entry_ids), body, msgs, env.count_messages(msgs))
        with self._lock:
            self._entries[key] = entry
            while len(self._entries) > ENTRY_CACHE:
                self._entries.popitem(last=False)
        return entry

    def _render(
        self,
        ctx: TaskContext,
        env: NodeEnv,
        tools: Sequence[dict[str, Any]],
        *,
        reset: bool,
        digest: int,
        reuse: bool = True,
        digest_latest: bool = False,
        policy: PolicyBlocks | None = None,
        narrow: bool = False,
    ) -> Rendered:
        """One rendering pass (see :meth:`render`).

        ``policy``: the policy blocks this render's passes share (default: built for this pass
        alone); ``narrow``: the state delta and the checkpoint narrowed (the first degrade step).
        """
        cands = self._state_blocks(ctx, env, narrow=narrow)
        n = len(ctx.evidence.recent_tool_calls)
        # the state delta: appended to the transcript only when it changed since the last one shown
        notes = list(ctx.evidence.transcript_notes)
        now = _cut_tokens(delta_text(ctx, narrow=True), NARROW_DELTA_TOKENS, env) if narrow else delta_text(ctx)
        delta_note = None if notes and notes[-1].text == now else now
        if delta_note is not None:
            notes.append(TranscriptNote(at=n, text=now))
        transcript = _TranscriptBlocks(env, n, notes, cands)
        self._add_calls(ctx, env, transcript, digest=digest, reuse=reuse, digest_latest=digest_latest)
        transcript.add_notes(n)
        err = error_block(ctx, env, slot="msg:delta")
        if err is not None:
            cands.append(err)
        cands += report_blocks(ctx, env, self.role, self.reports, slot="msg:delta")
        policy = policy if policy is not None else self._policy(ctx, env)
        cands += policy(ctx, env)
        r = assemble(
            role=self.role,
            env=env,
            system=EXECUTOR_SYSTEM,
            candidates=cands,
            layout=["msg:core", "msg:checkpoint", "seq:transcript", "msg:delta"],
            tools=tools,
            extra_messages=transcript.extra,
            transcript_reset=reset,
            keep_last=self.keep_last if reset else 0,
        )
        return replace(r, delta_note=delta_note)

    def _state_blocks(self, ctx: TaskContext, env: NodeEnv, *, narrow: bool = False) -> list[ContextBlock]:
        """The blocks before the transcript: the core layer, loaded memories, the checkpoint."""
        cands = core_blocks(ctx, env)
        mem = memory_block(ctx, env, slot="msg:core")
        if mem is not None:
            cands.append(mem)
        cp = checkpoint_text(ctx, narrow=narrow)
        if cp is not None:
            cands.append(
                block(
                    env,
                    "state.checkpoint",
                    cp,
                    kind="state",
                    layer="recent",
                    source="event log",
                    priority="high",
                    trust=_trust_of(cp),
                    slot="msg:checkpoint",
                )
            )
        return cands

    def _add_calls(
        self,
        ctx: TaskContext,
        env: NodeEnv,
        transcript: _TranscriptBlocks,
        *,
        digest: int,
        reuse: bool,
        digest_latest: bool,
    ) -> None:
        """Add each call of the transcript to ``transcript``, after the notes that come before it."""
        calls = ctx.evidence.recent_tool_calls
        n = len(calls)
        # calls a forced restart showed as digests stay so until they leave (a stable prefix)
        pinned = ctx.evidence.transcript_checkpoint.digests if ctx.evidence.transcript_checkpoint else 0
        first_by_ref: dict[str, str] = {}
        shown: list[tuple[str, str]] = []
        prev = 0
        for i, rec in enumerate(calls):
            transcript.add_notes(i)
            age = n - 1 - i
            dig = (
                i < pinned
                or (digest > 0 and 0 < age and age >= self.keep_last - digest)
                or (digest_latest and age == 0)
            )
            # point only to an earlier output shown in full in this prompt (never to a digest)
            ok = reuse and rec.status == "ok" and len(rec.result_summary) >= REUSE_MIN_CHARS
            ref = rec.raw_ref if ok else None
            same_as = first_by_ref.get(ref) if ref and not dig else None
            if ref and same_as is None and not dig:
                first_by_ref[ref] = rec.id
            prev, body, msgs, tokens = self._entry(
                prev, rec, digest=dig, same_as=same_as, shown=shown, reuse=reuse, env=env, degrade=digest_latest
            )
            shown.append((rec.id, body))
            prio: Priority = "required" if age == 0 else ("high" if age < self.keep_last else "normal")
            transcript.add_call(rec, msgs, tokens, prio, age)

    def _policy(self, ctx: TaskContext, env: NodeEnv) -> PolicyBlocks:
        """The policy blocks of one render from ``ctx`` (the task's calls read once for all its passes)."""
        return PolicyBlocks(ctx, env, self.role, slot="msg:delta")

    def _restarted(self, ctx: TaskContext, digests: int = 0) -> TaskContext:
        """``ctx`` as the reducer folds a restart here (``digests``: kept calls shown as digests)."""
        reset = TranscriptReset(reason="budget", removed=0, resent=0, expected_saving=0.0, digests=digests)
        prelim = new_event(
            "context.built",
            ContextBuilt(
                call=0, role=self.role, budget=0, prompt_tokens=0, transcript_reset=reset, keep_last=self.keep_last
            ),
            actor="system",
        )
        return apply_event(ctx, prelim)

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        """Render the executor's prompt, restarting the transcript when it must or when it pays.

        A restart is taken when the budget forces it or the cost model expects it to pay
        (:func:`~nodes.render.restart.restart_decision`). When the required blocks do not fit even
        then, they degrade in the order of :data:`DEGRADE_ORDER`: the state narrowed, then the
        latest call and the kept ones as their digest and ref (at most ``DIGEST_LINE_CHARS``
        chars of the output's last line), without their thoughts. The manifest reason of each
        degraded block names its step and its tokens before and after.

        Args:
            ctx: The state.
            env: The node environment (budget, reserve, counter, stores).
            tools: The tool schemas the call offers.

        Returns:
            The prompt (``transcript_reset`` set when it restarts the transcript).

        Raises:
            BudgetError: The required blocks do not fit even degraded.
        """
        policy = self._policy(ctx, env)
        try:
            return self._fit(ctx, env, tools, policy)
        except BudgetError:
            pass
        full = self._render(ctx, replace(env, budget=10**9), tools, reset=False, digest=0, policy=policy)
        try:
            return _degraded(self._fit(ctx, env, tools, policy, narrow=True), full, 1)
        except BudgetError:
            if not ctx.evidence.recent_tool_calls:
                raise
        reset = len(ctx.evidence.recent_tool_calls) > self.keep_last or (
            len(ctx.evidence.transcript_notes) >= MAX_NOTES
        )
        base = self._restarted(ctx, self.keep_last - 1) if reset else ctx
        r = self._render(
            base,
            env,
            tools,
            reset=reset,
            digest=self.keep_last - 1,
            reuse=False,
            digest_latest=True,
            policy=policy,
            narrow=True,
        )
        return _degraded(r, full, 2)

    def minimum_budget(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> int:
        """The smallest budget under which every later call of the task fits, degraded, in tokens.

        The required blocks of ``ctx`` fully degraded (:data:`DEGRADE_ORDER`): the state delta at
        its narrowed bound (``NARROW_DELTA_TOKENS``), one finished call as its digest with
        arguments at their degraded bound (``DEGRADED_ARGS_CHARS``), plus the overhead and
        ``env.reserve_for_output``; before the plan exists, ``PLAN_ROOM_TOKENS`` more for what it
        adds. The planner checks it at task start and the executor on its first call, before any
        tool runs. What a re-plan adds to the core layer beyond that room is not foreseen.

        Args:
            ctx: The state.
            env: The node environment (budget, reserve, counter, stores).
            tools: The tool schemas the call offers.

        Returns:
            The budget, in tokens.
        """
        probe = ToolCallRecord(
            id="call_probe_000000",
            step_id=ctx.plan.current_step_id,
            tool=max((t.get("function", t).get("name", "") for t in tools), key=len, default="tool"),
            arguments=json.dumps({"command": "x " * (DEGRADED_ARGS_CHARS // 2)}),
            status="error",
            result_summary="x " * (DIGEST_LINE_CHARS // 2),
            raw_ref="artifact://sha256:" + "0" * 64,
        )
        probed = ctx.model_copy(update={"evidence": ctx.evidence.model_copy(update={"recent_tool_calls": [probe]})})
        roomy = replace(env, budget=10**9)
        r = self._render(probed, roomy, tools, reset=False, digest=0, reuse=False, digest_latest=True, narrow=True)
        need = sum(e.tokens for e in r.manifest.entries if e.priority == "required" and e.id != "step.delta")
        delta = next((e.tokens for e in r.manifest.entries if e.id == "step.delta"), 0)
        room = PLAN_ROOM_TOKENS if ctx.plan.version == 0 else 0  # at task start: what the plan adds
        return need + max(delta, NARROW_DELTA_TOKENS) + room + r.manifest.overhead_tokens + env.reserve_for_output

    def _fit(
        self,
        ctx: TaskContext,
        env: NodeEnv,
        tools: Sequence[dict[str, Any]],
        policy: PolicyBlocks,
        narrow: bool = False,
    ) -> Rendered:
        limit = env.budget - env.reserve_for_output
        r = self._render(ctx, env, tools, reset=False, digest=0, policy=policy, narrow=narrow)
        fits = r.prompt_tokens <= limit and not r.manifest.dropped
        notes_full = len(ctx.evidence.transcript_notes) >= MAX_NOTES
        reset = len(ctx.evidence.recent_tool_calls) > self.keep_last or notes_full
        if not reset:
            if fits:
                return r
            return self._digests(ctx, env, tools, limit, policy, narrow)
        rule = env.cache_rule
        if fits and not notes_full:
            # price the restart first from this rendering (the old checkpoint standing for the
            # new one), and render it only when that estimate expects it to pay
            est = restart_decision(r, None, rule, limit, self.keep_last)
            if est.resent > est.removed or est.expected_saving <= 0:
                return r
        best: tuple[float, Rendered, TranscriptReset] | None = None
        for d in range(0, self.keep_last if not fits else 1):
            cand = self._render(self._restarted(ctx, d), env, tools, reset=True, digest=0, policy=policy, narrow=narrow)
            if cand.prompt_tokens > limit or cand.manifest.dropped:
                continue
            dec = restart_decision(r, cand, rule, limit, self.keep_last)
            if fits and not notes_full and (dec.resent > dec.removed or dec.expected_saving <= 0):
                return r  # rendered, it does not pay after all: keep the transcript
            if best is None or dec.expected_saving > best[0]:
                reason = "cost" if fits and not notes_full else ("budget" if not fits else "notes")
                best = (dec.expected_saving, cand, dec.model_copy(update={"reason": reason, "digests": d}))
        if best is not None:
            return replace(best[1], transcript_reset=best[2])
        if fits:  # the restart notes_full asks for does not fit: keep the transcript as it is
            return r
        last = self.keep_last - 1
        dec = restart_decision(r, None, rule, limit, self.keep_last)
        dec = dec.model_copy(update={"reason": "budget", "digests": last})
        # the builder has to drop calls: no pointers at all, so none can point to a dropped call
        r = self._render(
            self._restarted(ctx, last), env, tools, reset=True, digest=0, reuse=False, policy=policy, narrow=narrow
        )
        return replace(r, transcript_reset=dec)

    def _digests(
        self,
        ctx: TaskContext,
        env: NodeEnv,
        tools: Sequence[dict[str, Any]],
        limit: int,
        policy: PolicyBlocks,
        narrow: bool = False,
    ) -> Rendered:
        """The prompt with 1, 2... of the older calls as digests: the first that fits.

        When no restart is possible (few calls). Else the builder drops calls, with no pointers at
        all (none may point to a dropped call).
        """
        for d in range(1, self.keep_last):
            r = self._render(ctx, env, tools, reset=False, digest=d, policy=policy, narrow=narrow)
            if r.prompt_tokens <= limit and not r.manifest.dropped:
                return r
        return self._render(
            ctx, env, tools, reset=False, digest=self.keep_last - 1, reuse=False, policy=policy, narrow=narrow
        )


def _cut_tokens(text: str, limit: int, env: NodeEnv) -> str:
    """``text`` cut to at most ``limit`` tokens by ``env.count_tokens``, saying so."""
    if env.count_tokens(text) <= limit:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest head whose cut form fits
        mid = (lo + hi + 1) // 2
        if env.count_tokens(cut(text, mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return cut(text, lo)


def _degraded(r: Rendered, full: Rendered, step: int) -> Rendered:
    """``r`` with the manifest reason of each block it degraded: the step and its tokens before and after.

    ``full``: the same call rendered undegraded with room to spare; ``step``: the last
    :data:`DEGRADE_ORDER` step taken (1-based).
    """
    before = {e.id: e.tokens for e in full.manifest.entries}
    entries = []
    for e in r.manifest.entries:
        was = before.get(e.id)
        if was is not None and e.tokens < was:
            k = 1 if e.id in ("step.delta", "state.checkpoint") else step
            why = f"{e.reason}; degraded (step {k} of {len(DEGRADE_ORDER)}: {DEGRADE_ORDER[k - 1].split(':')[0]}), {was} -> {e.tokens} tokens"
            e = e.model_copy(update={"reason": why})
        entries.append(e)
    return replace(r, manifest=r.manifest.model_copy(update={"entries": entries}))


def _trust_of(text: str) -> Trust:
    """A block's trust: that of its least trusted part.

    ``agent_claim`` for a block that quotes an agent's claim (:func:`quote_agent`), else
    ``trusted_app``.
    """
    return "agent_claim" if '<external_content source="agent:' in text else "trusted_app"
