"""The end of an executor step: ``step.completed`` with its findings, their evidence and freshness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import Event, Finding, TaskContext
from context.events import (
    CheckpointCreated,
    ErrorResolved,
    FactStale,
    StepCompleted,
)
from context.freshness import HEAD_PATH, about
from context.literals import FactKind, StepResult
from context.models import ToolCallRecord, arguments_dict

from ..runtime import NodeRun
from .node_steps import one_of

__all__ = ["STEP_RESULTS", "completion_args", "step_completed"]


def _raw_findings(step_id: str, raw: Any) -> list[Finding]:
    """The findings of a ``complete_step`` call as the model gave them (refs may be empty)."""
    out = []
    for i, f in enumerate(raw or [], start=1):
        if isinstance(f, dict):
            stmt, ev = str(f.get("statement") or ""), [str(r) for r in f.get("evidence_refs") or []]
        else:
            stmt, ev = str(f), []
        if stmt:
            sup = [str(s) for s in f.get("supersedes") or []] if isinstance(f, dict) else []
            out.append(Finding(id=f"{step_id}.f{i}", statement=stmt, evidence_refs=ev, supersedes=sup))
    return out


def _with_refs(
    ctx: TaskContext, step_id: str, findings: list[Finding], older: Sequence[ToolCallRecord] = ()
) -> list[Finding]:
    """The findings with refs and the files they rest on.

    A finding without refs gets the refs of the step's last 3 tool results; each finding rests on
    the files its evidence calls read (the transcript's calls and ``older``, read back from the
    log) that its statement names, or on all of them when it names none
    (:func:`context.freshness.about`).
    """
    refs = [r.raw_ref for r in ctx.evidence.recent_tool_calls if r.step_id == step_id and r.raw_ref][-3:]
    out = [f if f.evidence_refs else f.model_copy(update={"evidence_refs": list(refs)}) for f in findings]
    written = _written_by(ctx, step_id)
    calls = [*older, *ctx.evidence.recent_tool_calls]
    based = [_rests_on(ctx, f, [r for r in calls if r.raw_ref in f.evidence_refs], written) for f in out]
    return [f.model_copy(update={"rests_on": about(f.statement, f.rests_on)}) if f.rests_on else f for f in based]


def _older_evidence(run: NodeRun, ctx: TaskContext, findings: list[Finding]) -> list[ToolCallRecord]:
    """The calls whose artifacts ``findings`` cite but that have left the transcript, oldest first.

    Read back from the log (``tool.result.received`` only, and only when a finding cites such a
    ref), with what they read and the HEAD then.
    """
    recent = {r.raw_ref for r in ctx.evidence.recent_tool_calls}
    want = {x for f in findings for x in f.evidence_refs} - recent
    if not want:
        return []
    out = []
    for e in run.env.events.read(run.task_id, kinds=("tool.result.received",)):
        p = e.payload
        if e.seq <= ctx.events.cursor and p.get("raw_ref") in want and (p.get("reads") or p.get("head")):
            out.append(
                ToolCallRecord(
                    id=p["call_id"], tool="", raw_ref=p["raw_ref"], reads=dict(p.get("reads") or {}), head=p.get("head")
                )
            )
    return out


def _written_by(ctx: TaskContext, step_id: str) -> set[str]:
    """The files the step's own successful write or patch calls changed.

    Its findings and summary are about what they wrote.
    """
    out: set[str] = set()
    for r in ctx.evidence.recent_tool_calls:
        if r.step_id != step_id or r.status != "ok":
            continue
        args = arguments_dict(r.arguments)
        if r.tool == "write_file":
            out.add(str(args.get("path", "")))
        elif r.tool == "apply_patch":
            out.update(
                ln[4:].strip().removeprefix("b/")
                for ln in str(args.get("patch", "")).splitlines()
                if ln.startswith("+++ ")
            )
    return out


def _rests_on(ctx: TaskContext, fact: Any, calls: list[ToolCallRecord], written: set[str] | None = None) -> Any:
    """``fact`` (a Finding or StepCompleted) with the files it rests on and the HEAD.

    ``rests_on``: the files ``calls`` read, path -> sha256 of the bytes read (the latest read
    wins; a file in ``written``, which the step changed, at the bytes it wrote); ``head``: the
    HEAD they saw.
    """
    files: dict[str, str] = {}
    head = None
    for r in calls:
        files.update(r.reads)
        head = r.head if r.head is not None else head
    for path in written or ():
        if path in files and path in ctx.evidence.world:
            files[path] = ctx.evidence.world[path]
    if not files and head is None:
        return fact
    return fact.model_copy(update={"rests_on": files, "head": head})


#: The results a ``complete_step`` call may give (anything else is ``success``).
STEP_RESULTS: tuple[StepResult, ...] = ("success", "partial", "failed", "blocked")


def completion_args(step_id: str, args: dict[str, Any]) -> tuple[StepResult, str, list[Finding], list[str]]:
    """The parts of a ``complete_step`` call, each coerced to its type.

    Args:
        step_id: The step it completes (findings are numbered ``<step_id>.f<n>``).
        args: The call's arguments.

    Returns:
        ``(result, summary, findings, unresolved_issues)``; a result the tool does not know is
        ``success``.
    """
    return (
        one_of(args.get("result"), STEP_RESULTS, "success"),
        str(args.get("summary") or ""),
        _raw_findings(step_id, args.get("findings")),
        [str(u) for u in args.get("unresolved_issues") or []],
    )


def step_completed(
    run: NodeRun,
    ctx: TaskContext,
    step_id: str,
    result: StepResult,
    summary: str,
    findings: list[Finding],
    unresolved: list[str],
) -> list[Event]:
    """``step.completed`` and, for a step that succeeded, what it settles.

    With freshness, ``fact.stale`` for findings resting on evidence already stale; on success or
    a partial result, ``error.resolved`` for the errors it settles and ``checkpoint.created`` for
    the checkpoint the node started from (the last good checkpoint).

    Args:
        run: The node run.
        ctx: The state.
        step_id: The step completing.
        result: ``success``, ``partial``, ``failed`` or ``blocked``.
        summary: The executor's summary.
        findings: The findings as given (:func:`completion_args`).
        unresolved: Issues the step left open.

    Returns:
        The events, not yet committed.
    """
    older = _older_evidence(run, ctx, findings)
    completed = StepCompleted(
        step_id=step_id,
        result=result,
        summary=summary,
        findings=_with_refs(ctx, step_id, findings, older),
        unresolved_issues=unresolved,
    )
    completed = _rests_on(
        ctx, completed, [r for r in ctx.evidence.recent_tool_calls if r.step_id == step_id], _written_by(ctx, step_id)
    )
    events = [run.make("step.completed", completed)]
    if run.env.freshness:
        events += _born_stale(run, ctx, completed, older)
    if result in ("success", "partial"):
        events += _resolved_by_step(run, ctx, step_id)
        # the checkpoint this node started from holds the step's recorded work: the last
        # good checkpoint recovery can point at (LangGraph passes it as checkpoint_map[""])
        cp = ((run.config.get("configurable") or {}).get("checkpoint_map") or {}).get("")
        if cp:
            events.append(run.make("checkpoint.created", CheckpointCreated(checkpoint_id=str(cp)), actor="system"))
    return events


def _born_stale(
    run: NodeRun, ctx: TaskContext, completed: StepCompleted, older: Sequence[ToolCallRecord] = ()
) -> list[Event]:
    """``fact.stale`` for the new findings and step summary that rest on evidence already stale.

    A call whose file changed before the step ended: its facts are stale from the start.
    """
    by_ref = {r.raw_ref: r.id for r in [*older, *ctx.evidence.recent_tool_calls] if r.raw_ref}
    step_calls = [r.id for r in ctx.evidence.recent_tool_calls if r.step_id == completed.step_id]
    facts: list[tuple[str, FactKind, list[str], dict[str, str]]] = [
        (f.id, "finding", [by_ref[x] for x in f.evidence_refs if x in by_ref], {**f.rests_on, HEAD_PATH: f.head or ""})
        for f in completed.findings
    ]
    facts.append(
        (f"step:{completed.step_id}", "step", step_calls, {**completed.rests_on, HEAD_PATH: completed.head or ""})
    )
    out = []
    for fid, kind, calls, rests_on in facts:
        seen: set[tuple[str, str]] = set()
        for m in ctx.evidence.stale_facts:
            if m.fact_id in calls and rests_on.get(m.path) == m.old_sha and (m.path, m.new_sha) not in seen:
                seen.add((m.path, m.new_sha))
                payload = FactStale(
                    fact_id=fid, fact_kind=kind, path=m.path, old_sha=m.old_sha, new_sha=m.new_sha, cause=m.cause
                )
                out.append(run.make("fact.stale", payload, actor="system"))
    return out


def _resolved_by_step(run: NodeRun, ctx: TaskContext, step_id: str) -> list[Event]:
    """``error.resolved`` for each open error a successful step settles.

    The errors of this step, and those of steps a re-plan replaced (their work is what this step
    did instead).
    """
    done = {e.id for e in ctx.errors.resolved_errors}
    in_plan = {s.id for s in ctx.plan.steps}
    return [
        run.make("error.resolved", ErrorResolved(error_id=e.id, resolution=f"step {step_id} completed"), actor="system")
        for e in ctx.errors.error_history
        if e.id not in done and (e.step_id == step_id or (e.step_id is not None and e.step_id not in in_plan))
    ]
