"""The blocks the fired context policies add (:mod:`context.policy`), resolved from the state and the stores."""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from context import ContextBlock, TaskContext
from context.blocks import Trust
from context.models import arguments_dict
from context.policy import ContextPolicy, default_policies, fired, situation
from context.text import clean

from ..runtime import NodeEnv
from .base import block, stale_text
from .quoting import quote_agent, quote_external, tool_label

__all__ = ["ERROR_LIMIT", "DIFF_LIMIT", "EVIDENCE_LIMIT", "Call", "PolicyBlocks", "policies_of", "policy_blocks"]

#: Characters of a failing call's full output a ``failing_error`` block shows (its tail).
ERROR_LIMIT = 12_000
#: Characters of the task's diffs a ``diff`` block shows (the latest changes).
DIFF_LIMIT = 6_000
#: Characters of each evidence output a ``finding_evidence`` block shows.
EVIDENCE_LIMIT = 1_500
_TEST = re.compile(r"\b(pytest|unittest|test|tests|tox|nox)\b|test_|_test\b")


def policies_of(env: NodeEnv) -> Sequence[ContextPolicy]:
    """The context policies of ``env``.

    Args:
        env: The node environment.

    Returns:
        ``env.policies``, or the defaults (:func:`context.policy.default_policies`) when it is None.
    """
    return default_policies() if env.policies is None else list(env.policies)


def _is_test(tool: str, args: str) -> bool:
    if tool != "run_command":
        return False
    argv = arguments_dict(args).get("argv")
    return isinstance(argv, list) and any(_TEST.search(str(a)) for a in argv)


class _CallIndex:
    """The calls of one task read so far from its (append-only) log: only new events are read."""

    def __init__(self) -> None:
        self.seq = 0
        self.called: dict[str, tuple[str, str]] = {}
        self.results: list[tuple[int, str, str, str, dict[str, object]]] = []


#: Per event log object, per task: the calls read so far (dropped with the log object).
_INDEX: weakref.WeakKeyDictionary[Any, dict[str, _CallIndex]] = weakref.WeakKeyDictionary()

#: One call with a result: ``(call id, tool, arguments as JSON text, result payload)``.
Call = tuple[str, str, str, dict[str, object]]


def _calls(ctx: TaskContext, env: NodeEnv) -> list[Call]:
    """``(call id, tool, arguments, result payload)`` of every call with a result up to the state's cursor.

    In order. The log is read once; later renders read only its new events.
    """
    tid = ctx.identity.task_id
    try:
        per_task = _INDEX.setdefault(env.events, {})
    except TypeError:  # an event log that takes no weak reference: read it whole
        per_task = {}
    idx = per_task.setdefault(tid, _CallIndex())
    for e in env.events.read(tid, after=idx.seq, kinds=("tool.called", "tool.result.received")):
        idx.seq = max(idx.seq, e.seq)
        if e.kind == "tool.called":
            idx.called[e.payload["call_id"]] = (e.payload["tool"], e.payload["arguments"])
        elif e.payload["call_id"] in idx.called:
            tool, args = idx.called[e.payload["call_id"]]
            idx.results.append((e.seq, e.payload["call_id"], tool, args, e.payload))
    return [(cid, tool, args, res) for seq, cid, tool, args, res in idx.results if seq <= ctx.events.cursor]


def _artifact(env: NodeEnv, ref: str | None) -> str | None:
    if not ref:
        return None
    try:
        data = env.artifacts.get(ref)
    except Exception:  # noqa: BLE001 - a missing artifact shows nothing
        return None
    return clean(data.decode("utf-8", errors="replace"))  # secrets were masked when it was stored


#: The text and trust of a relation's block, or None when there is nothing to show.
Resolved = tuple[str, Trust] | None


def _stale_facts(ctx: TaskContext, env: NodeEnv, calls: Callable[[], list[Call]]) -> Resolved:
    text = stale_text(ctx)
    return (text, "trusted_app") if text else None


def _last_checkpoint(ctx: TaskContext, env: NodeEnv, calls: Callable[[], list[Call]]) -> Resolved:
    cp_id = ctx.control.checkpoint_id
    if cp_id is None:
        return None
    lines = [
        "## Last good checkpoint",
        f"checkpoint {cp_id}; completed steps: {ctx.progress.completed_text()}; "
        f"current step: {ctx.plan.current_step_id or '(none)'}",
    ]
    cp = ctx.evidence.transcript_checkpoint
    if cp is not None:
        lines += ["working state materialised there:", *(f"- {ln}" for ln in cp.plan_lines)]
    return "\n".join(lines), "trusted_app"


def _failing_error(ctx: TaskContext, env: NodeEnv, calls: Callable[[], list[Call]]) -> Resolved:
    err = ctx.errors.last_error
    rec = next((r for r in ctx.evidence.recent_tool_calls if err and r.id == err.call_id), None)
    if rec is None:
        rec = next((r for r in reversed(ctx.evidence.recent_tool_calls) if r.status == "error"), None)
    if rec is None:
        return None
    full = _artifact(env, rec.raw_ref) or rec.result_summary
    if not rec.compressed and full.strip() == rec.result_summary.strip():
        return None  # the prompt already shows it whole
    cut = f"(the last {ERROR_LIMIT} of {len(full)} chars)\n" if len(full) > ERROR_LIMIT else ""
    text = (
        f"## The failing call's output in full: {rec.id} {tool_label(rec.tool)}, its arguments as the executor "
        "wrote them:\n" + quote_agent(rec.arguments, source="executor") + "\n"
    ) + quote_external(cut + full[-ERROR_LIMIT:], source=f"tool:{rec.tool}", ref=rec.raw_ref, call_id=rec.id)
    return text, "external_content"


def _diff(ctx: TaskContext, env: NodeEnv, calls: Callable[[], list[Call]]) -> Resolved:
    parts = []
    for cid, tool, args, res in calls():
        if res["status"] != "ok" or tool not in ("apply_patch", "write_file"):
            continue
        a = arguments_dict(args)
        if tool == "apply_patch":
            parts.append(f"# {cid} apply_patch\n{a.get('patch', '')}".rstrip())
        else:
            content = str(a.get("content", ""))
            parts.append(f"# {cid} write_file {a.get('path')}: {len(content.encode())} bytes written")
    if not parts:
        return None
    body = "\n".join(parts)
    if len(body) > DIFF_LIMIT:
        body = f"(the last {DIFF_LIMIT} of {len(body)} chars)\n" + body[-DIFF_LIMIT:]
    return "## Changes this task made (diffs as applied)\n" + quote_agent(body, source="diff"), "agent_claim"


def _ref(result: dict[str, object]) -> str | None:
    """The ``raw_ref`` of a ``tool.result.received`` payload, or None."""
    ref = result.get("raw_ref")
    return ref if isinstance(ref, str) else None


def _latest_result(ctx: TaskContext, want: str, calls: Callable[[], list[Call]]) -> Resolved:
    """The latest result of tool ``want`` (``test``: the latest test command)."""
    hits = [
        (cid, tool, args, res)
        for cid, tool, args, res in calls()
        if (_is_test(tool, args) if want == "test" else tool == want)
    ]
    if not hits:
        return None
    cid, tool, args, res = hits[-1]
    what = "test run" if want == "test" else f"result of {want}"
    text = (
        f"## The latest {what}: {cid} {tool_label(tool)} -> {res['status']}, its arguments as the executor "
        "wrote them:\n" + quote_agent(" ".join(args.split()), source="executor") + "\n"
    ) + quote_external(str(res["result_summary"]), source=f"tool:{tool}", ref=_ref(res), call_id=cid)
    return text, "external_content"


def _finding_evidence(ctx: TaskContext, env: NodeEnv, calls: Callable[[], list[Call]]) -> Resolved:
    stale = [f for f in ctx.evidence.findings if ctx.stale(f.id)]
    replaced = {x for f in ctx.evidence.findings for x in f.supersedes}
    findings = stale or [f for f in ctx.evidence.findings if f.id not in replaced][-3:]
    by_ref = {r.raw_ref: r for r in ctx.evidence.recent_tool_calls if r.raw_ref}
    refs: dict[str, list[str]] = {}  # each evidence once, naming every finding it backs
    for f in findings:
        for ref in f.evidence_refs:
            refs.setdefault(ref, []).append(f.id)
    lines = []
    for ref, ids in refs.items():
        rec = by_ref.get(ref)
        out = rec.result_summary if rec is not None else _artifact(env, ref)
        if out is None:
            continue
        out = out if len(out) <= EVIDENCE_LIMIT else out[:EVIDENCE_LIMIT] + f"\n[... {len(out)} chars: {ref}]"
        src = f"tool:{rec.tool}" if rec is not None else "artifact"
        lines.append(f"evidence of finding {', '.join(ids)}:\n" + quote_external(out, source=src, ref=ref))
    if not lines:
        return None
    return "## Evidence of the findings in play\n" + "\n".join(lines), "external_content"


#: Relation -> its resolver (``latest_result:<tool>`` is resolved by :func:`_latest_result`).
_RESOLVERS: dict[str, Callable[[TaskContext, NodeEnv, Callable[[], list[Call]]], Resolved]] = {
    "stale_facts": _stale_facts,
    "last_checkpoint": _last_checkpoint,
    "failing_error": _failing_error,
    "diff": _diff,
    "finding_evidence": _finding_evidence,
}


def _resolve(ctx: TaskContext, env: NodeEnv, relation: str, calls: Callable[[], list[Call]]) -> Resolved:
    """The text and trust of one relation's block, or None when there is nothing to show.

    ``calls()``: the task's calls with a result (:func:`_calls`).
    """
    if relation.startswith("latest_result:"):
        return _latest_result(ctx, relation.split(":", 1)[1], calls)
    resolver = _RESOLVERS.get(relation)
    return resolver(ctx, env, calls) if resolver is not None else None


def policy_blocks(
    ctx: TaskContext, env: NodeEnv, role: str, *, slot: str, calls: Callable[[], list[Call]] | None = None
) -> list[ContextBlock]:
    """The blocks the fired policies add to ``role``'s prompt: one ``policy.<relation>`` block per relation.

    The first, highest-priority policy that asks for a relation names it
    (``added_by="policy:<name>"``); a relation with nothing to show adds no block.

    Args:
        ctx: The state.
        env: The node environment.
        role: The role whose prompt it is.
        slot: The layout slot of the blocks.
        calls: The task's calls with a result up to ``ctx``'s cursor (:data:`Call` tuples, in
            order), when the caller has them; default: read from ``env.events`` at most once.

    Returns:
        The blocks.
    """
    if calls is None:
        calls = functools.cache(lambda: _calls(ctx, env))
    sit = situation(ctx, role)
    out: list[ContextBlock] = []
    done: set[str] = set()
    for p in fired(policies_of(env), sit):
        for rel in p.add:
            if rel in done:
                continue
            done.add(rel)
            got = _resolve(ctx, env, rel, calls)
            if got is None:
                continue
            text, trust = got
            bid = "policy." + rel.replace(":", ".")
            b = block(
                env,
                bid,
                text,
                kind="tool_result" if trust == "external_content" else "state",
                layer="referenced",
                source=f"policy:{p.name}",
                priority=p.priority,
                trust=trust,
                slot=slot,
            )
            out.append(b.model_copy(update={"added_by": f"policy:{p.name}"}))
    return out


class PolicyBlocks:
    """The policy blocks of one ``render()`` that renders a prompt several times (the executor).

    The task's calls are read from ``env.events`` at most once, up to ``ctx``'s cursor (a restart
    folded on ``ctx`` adds no call), and the blocks of each state are built once.

    Args:
        ctx: The state the render starts from.
        env: The node environment.
        role: The role, as for :func:`policy_blocks`.
        slot: The layout slot, as for :func:`policy_blocks`.
    """

    def __init__(self, ctx: TaskContext, env: NodeEnv, role: str, *, slot: str) -> None:
        self.role, self.slot = role, slot
        self.calls = functools.cache(lambda: _calls(ctx, env))
        self._blocks: dict[tuple[int, int], tuple[TaskContext, NodeEnv, list[ContextBlock]]] = {}

    def __call__(self, ctx: TaskContext, env: NodeEnv) -> list[ContextBlock]:
        """The blocks for ``ctx`` and ``env``: the same list for the same two objects.

        Args:
            ctx: This render's state, or it with a restart folded on.
            env: The node environment (the executor may pass one with a smaller budget).

        Returns:
            The blocks (:func:`policy_blocks`).
        """
        key = (id(ctx), id(env))
        hit = self._blocks.get(key)
        if hit is None:  # the objects are kept with their blocks, so their ids stay theirs
            hit = (ctx, env, policy_blocks(ctx, env, self.role, slot=self.slot, calls=self.calls))
            self._blocks[key] = hit
        return hit[2]
