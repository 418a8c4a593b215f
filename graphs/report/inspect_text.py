"""The text view of a task that ``taskctx inspect`` prints: its state as a person reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from context import Event, TaskContext, all_errors, all_plan_steps
from context.freshness import short_sha, stale_line
from context.text import escape_controls
from nodes.render.base import quote_agent, stale_text

from ..orchestrator import DEFAULT_DB
from .approval import approval_renderable
from .hints import command_hint

__all__ = ["RESTARTS_SHOWN", "render_state", "restart_line"]

#: Transcript restarts ``inspect`` lists (the latest; ``--all``: every one).
RESTARTS_SHOWN = 3


def restart_line(built: dict[str, Any]) -> str:
    """One line for the executor transcript restart of ``built`` (a ``context.built`` payload
    whose ``transcript_reset`` is set): the call, why, the tokens it removed and sent again and
    the expected saving per call (in uncached-input-token units of its pricing rule) over the
    cycle it starts; a log written before the numbers were recorded says so."""
    tr = built.get("transcript_reset")
    head = f"call {built.get('call')}"
    if not isinstance(tr, dict):
        return f"{head}: transcript restarted (no numbers in this log)"
    rule = f", {tr['rule']} pricing" if tr.get("rule") else ""
    digests = f"; {tr['digests']} of the kept calls as digests" if tr.get("digests") else ""
    return (
        f"{head}: transcript restarted ({tr['reason']}): removed {tr['removed']:,} tokens, resent {tr['resent']:,}; "
        f"expected saving {tr['expected_saving']:,.1f} per call over {tr.get('horizon', 1)} calls{rule}{digests}"
    )


def render_state(
    console: Console,
    ctx: TaskContext,
    events: list[Event],
    checkpoints: list[str],
    has_checkpoint: bool,
    *,
    full_hint: str | None = None,
    full: bool = False,
    db: str | Path = DEFAULT_DB,
) -> None:
    """Print ``ctx`` (folded from ``events``) on ``console`` (control characters and bidi
    overrides shown escaped: :func:`context.text.escape_controls`), one titled section each: goal,
    request, criteria, constraints, the memories it loaded (only when it loaded any), plan, current step, progress, evidence, model calls by role
    (built-in and custom roles alike, each under its own name; the executor's transcript
    restarts with their numbers, :func:`restart_line`: the last ``RESTARTS_SHOWN``, ``full``: all), permissions, approvals (the
    pending one in full, :func:`.approval.approval_renderable`), errors, omitted history, provider
    usage (when the model reports it: input tokens reported vs counted, cache read/write),
    checkpoints (``checkpoints``: the newest ids, as listed by the checkpointer). ``has_checkpoint``
    is not used (kept for callers). ``full_hint``: where a cut view of the pending approval sends
    the reader (:func:`.approval.inspect_hint` for the task's database; default: the default
    database's). ``db``: the database the commands it names need (``--db`` when not the default).
    The plan and the errors show the state's windows (done steps before them in one line; open
    errors and the last resolved ones) with the command that lists the rest; ``full`` lists every
    plan step and error from the log (:func:`context.all_plan_steps`, :func:`context.all_errors`)."""

    def h(title: str) -> None:
        console.print(f"\n[bold]{title}[/bold]")

    def p(text: str) -> None:  # the one sink of recorded text: control and bidi characters escaped
        console.print(escape_controls(text), markup=False)

    i = ctx.identity
    console.print(
        Text(f"task {escape_controls(i.task_id)}", style="bold"),
        Text(f" status: {ctx.control.status}  plan v{ctx.plan.version} ({ctx.plan.status})"),
    )
    h("Goal")
    if i.interpreted_goal:  # the planner's reading of the request: its claim
        p("as the planner wrote it (agent_claim):\n" + quote_agent(i.interpreted_goal, source="planner goal"))
    else:
        p("(not interpreted yet)")
    h("Original request (verbatim)")
    p(i.original_request)
    h("Success criteria")
    added = i.planner_criteria()
    for c in [c for c in i.success_criteria if c not in added] or ([] if added else ["(none)"]):
        p(f"- {c}")
    if added:
        p(
            "added by the planner (agent_claim):\n"
            + quote_agent("\n".join(f"- {c}" for c in added), source="planner criteria")
        )
    h("Constraints")
    planned = [c for c in i.constraints if i.constraint_sources.get(c) == "planner"]
    for c in [c for c in i.constraints if c not in planned] or ([] if planned else ["(none)"]):
        p(f"- {c}")
    if planned:
        p(
            "added by the planner (agent_claim):\n"
            + quote_agent("\n".join(f"- {c}" for c in planned), source="planner constraints")
        )
    if ctx.memory.loaded:  # the durable memories it loaded at its start (section shown only then)
        h("Memories loaded")
        for m in ctx.memory.loaded:
            where = f"task {m.task_id}" if m.task_id else "no task"
            marks = (["STALE"] if m.stale else []) + ([f"superseded by {m.superseded_by}"] if m.superseded_by else [])
            state = f"; {', '.join(marks)}" if marks else ""
            p(
                f"- {m.key} [{m.namespace} {m.kind}{state}] {m.text} (confirmed by {m.confirmed_by}, {where}, {m.confirmed_at})"
            )
            for f in m.stale:
                p(f"  stale: {f.path} sha256 {short_sha(f.recorded)} then, {short_sha(f.current)} now")
    h("Plan")
    all_cmd = command_hint("inspect", i.task_id, db, None, "--all")
    steps = all_plan_steps(ctx, events) if full else list(ctx.plan.steps)
    if not full and ctx.plan.done_folded:
        p(f"   {ctx.plan.digest_line()}; `{all_cmd}` lists them")
    if steps:  # titles the planner model wrote: its claim, quoted as in the prompts
        lines = [f"{'->' if s.id == ctx.plan.current_step_id else '  '} {s.id} [{s.status}] {s.title}" for s in steps]
        p(
            f"v{ctx.plan.version}, the steps as the planner wrote them (agent_claim):\n"
            + quote_agent("\n".join(lines), source=f"planner plan v{ctx.plan.version}")
        )
    h("Current step")
    cs = ctx.current_step
    p(
        f"{ctx.plan.current_step_id} (risk {cs.risk_level}), as the planner wrote it (agent_claim):\n"
        + quote_agent(
            f"{cs.objective}\nexpected: {cs.expected_output or '-'}", source=f"planner {ctx.plan.current_step_id}"
        )
        if cs
        else "(none)"
    )
    h("Recent progress")
    p(f"completed steps: {ctx.progress.completed_text()}; executor steps: {ctx.progress.executor_steps}")
    if ctx.progress.last_step:
        ls = ctx.progress.last_step
        p(
            f"last step {ls.id} ({ls.result}), its summary ({ls.provenance}):\n"
            + quote_agent(ls.summary, source=f"complete_step {ls.id}")
        )
    if ctx.progress.changed_artifacts:
        p(f"changed: {', '.join(ctx.progress.changed_artifacts)}")
    h("Evidence")
    for r in ctx.evidence.recent_tool_calls[-8:]:
        stale = stale_line(ctx, r.id)
        p(
            f"- {r.id} {r.tool} -> {r.status}"
            + (f"  {r.raw_ref}" if r.raw_ref else "")
            + (f" [{stale}]" if stale else "")
        )
    for f in ctx.evidence.findings[-8:]:
        stale = stale_line(ctx, f.id)
        p(
            f"- finding {f.id} ({f.provenance}) [{', '.join(f.evidence_refs)}]"
            + (f" [{stale}]" if stale else "")
            + ":\n"
            + quote_agent(f.statement, source=f"complete_step {f.id}")
        )
    stale_all = stale_text(ctx)
    if stale_all is not None:
        h("Stale facts")
        p(stale_all.split("\n", 1)[1])
    if ctx.evidence.world or ctx.evidence.head:
        p(f"world version {ctx.evidence.world_version}: {len(ctx.evidence.world)} files seen, HEAD {ctx.evidence.head}")
    h("Model calls by role")
    by_role: dict[str, list[dict]] = {}
    for e in events:
        if e.kind == "context.built":
            by_role.setdefault(str(e.payload["role"]), []).append(e.payload)
    for role, calls in by_role.items():
        ids = [str(c["call"]) for c in calls]  # a long task: the first and last 5, and how many between
        nums = (
            ", ".join(ids)
            if len(ids) <= 12
            else f"{', '.join(ids[:5])}, ... {len(ids) - 10} more ..., {', '.join(ids[-5:])}"
        )
        p(
            f"- {role}: {len(calls)} call{'s' if len(calls) != 1 else ''} ({nums}); "
            f"{sum(c['prompt_tokens'] for c in calls):,} prompt tokens; manifests: "
            f"{sum(c['blocks_in'] for c in calls)} blocks in, {sum(c['blocks_out'] for c in calls)} out"
        )
    if not by_role:
        p("(no model call yet)")
    restarts = [c for c in by_role.get("executor", []) if c.get("transcript_reset")]
    shown_restarts = restarts if full else restarts[-RESTARTS_SHOWN:]
    if len(shown_restarts) < len(restarts):
        p(
            f"executor transcript restarts: {len(restarts)}, the last {len(shown_restarts)} "
            f"(`{command_hint('inspect', i.task_id, db, None, '--all')}` lists every one):"
        )
    elif restarts:
        p(f"executor transcript restarts: {len(restarts)}")
    for c in shown_restarts:
        p(f"- {restart_line(c)}")
    h("Permissions")
    pm = ctx.permissions
    p(
        f"allowed: {', '.join(pm.allowed_tools) or '(all)'}; denied: {', '.join(pm.denied_tools) or '(none)'}; "
        f"approval: {', '.join(pm.requires_approval) or '(none)'}; scopes: {', '.join(pm.file_scopes) or '(workspace)'}"
    )
    h("Pending approvals")
    a = ctx.control.pending_approval
    if a is None:
        p("(none)")
    else:  # shown in full, as at the prompt (a write as the file, a patch as a diff, ...)
        console.print(
            approval_renderable(
                {"task_id": i.task_id, "call_id": a.call_id, "tool": a.tool, "arguments": a.arguments}
                | {"risk": a.risk, "reason": a.reason},
                full_hint=full_hint,
            )
        )
    h("Approvals and denials")
    # requests, the user's answers and every refusal; calls the policy let run are only counted
    shown = [
        e
        for e in events
        if e.kind in ("permission.requested", "permission.denied")
        or (e.kind == "permission.granted" and e.actor == "user")
    ]
    # a system refusal of a call put up for approval (its file changed while waiting, edited
    # arguments refused) is the tool node's, not the policy's
    asked = {e.payload["call_id"] for e in shown if e.kind == "permission.requested"}
    for e in shown[-12:]:
        who = "user" if e.actor == "user" else ("system" if e.payload["call_id"] in asked else "policy")
        p(f"- #{e.seq} {e.kind} ({who}): {e.payload['tool']} [{e.payload['call_id']}] {e.payload['reason']}")
    auto = sum(1 for e in events if e.kind == "permission.granted" and e.actor != "user")
    p(
        f"({len(shown)} shown; {auto} side-effecting calls allowed by policy without approval)"
        if shown or auto
        else "(none)"
    )
    h("Error history")
    errs = ctx.errors
    if full:
        history = all_errors(events)
        resolved = {e.id: e for e in history if e.resolution is not None}
    else:
        history = list(errs.error_history)
        resolved = {e.id: e for e in errs.resolved_errors}
        earlier = errs.occurred_count - len(history)
        if earlier > 0:
            p(
                f"({errs.occurred_count} errors, {errs.resolved_count} resolved; the {earlier} resolved before these "
                f"are in the event log: `{command_hint('inspect', i.task_id, db, None, '--all')}` lists every one)"
            )
    for e in history:
        state = f"resolved: {resolved[e.id].resolution}" if e.id in resolved else "open"
        p(f"- {e.id} [{state}] {e.source} in {e.step_id}: {e.message}")
    if not history:
        p("(none)")
    h("Resolved errors")
    p(", ".join(resolved) or "(none)")
    h("Omitted history")
    p(ctx.evidence.omitted_summary or "(nothing omitted)")
    reported = [e.payload for e in events if e.kind == "context.built" and e.payload.get("usage")]
    if reported:  # only for models that report usage (real providers)
        h("Provider usage")
        counted = sum(c["prompt_tokens"] for c in reported)
        inp = sum(c["usage"]["input_tokens"] for c in reported)
        p(
            f"{len(reported)} calls: {inp:,} input tokens reported vs {counted:,} counted ({inp - counted:+,}); "
            f"cache read {sum(c['usage']['cache_read'] for c in reported):,}, "
            f"cache write {sum(c['usage']['cache_creation'] for c in reported):,}, "
            f"output {sum(c['usage']['output_tokens'] for c in reported):,}"
        )
        for c in reported[-5:]:
            u = c["usage"]
            p(
                f"  call {c['call']} {c['role']}: {u['input_tokens']:,} reported vs {c['prompt_tokens']:,} counted "
                f"({u['input_tokens'] - c['prompt_tokens']:+,}), cache read {u['cache_read']:,}"
            )
    h("Checkpoints")
    resumes = [e for e in events if e.kind == "resume.started"]
    p(f"latest checkpoints: {', '.join(checkpoints) or '(none)'}; resumes: {len(resumes)}; events: {ctx.events.cursor}")
