"""The text view of a task that ``taskctx inspect`` prints: its state as a person reads it.

:func:`render_view` prints a :class:`graphs.TaskView` on a rich console, one titled section each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from context import Event, ProviderUsage, TaskContext, all_errors, all_plan_steps, all_reports
from context.freshness import short_sha, stale_line
from context.history import REVIEW_REPORTS_SINCE
from context.text import escape_controls
from nodes.render.base import stale_text
from nodes.render.quoting import quote_agent
from nodes.render.role_reports import report_quote, role_label

from ..fork_workspace import NOT_UNDONE, no_workspace
from ..inspection import TaskView
from ..project import DEFAULT_DB
from .approval import approval_renderable
from .hints import command_hint

__all__ = ["RESTARTS_SHOWN", "render_view", "restart_line"]

#: Transcript restarts ``inspect`` lists (the latest; ``--all``: every one).
RESTARTS_SHOWN = 3


def restart_line(built: dict[str, Any]) -> str:
    """One line for an executor transcript restart: the call, why, the tokens removed and resent.

    Args:
        built: A ``context.built`` payload whose ``transcript_reset`` is set.

    Returns:
        The line, with the expected saving per call (in uncached-input-token units of its
        pricing rule) over the cycle it starts; a log written before the numbers were recorded
        says so.
    """
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


class _View:
    """Where the sections print: the console, the sink of recorded text, and the view's options."""

    def __init__(self, console: Console, view: TaskView, full: bool, full_hint: str | None, db: str | Path):
        self.console, self.view, self.full, self.full_hint, self.db = console, view, full, full_hint, db
        assert view.state is not None  # (a task not started has no view: the CLI says so in one line)
        self.ctx: TaskContext = view.state
        self.events: list[Event] = view.events

    def h(self, title: str) -> None:
        self.console.print(f"\n[bold]{title}[/bold]")

    def p(self, text: str) -> None:  # the one sink of recorded text: control and bidi characters escaped
        self.console.print(escape_controls(text), markup=False)

    def all_cmd(self) -> str:
        return command_hint("inspect", self.ctx.identity.task_id, self.db, None, "--all")


def render_view(
    console: Console, view: TaskView, *, full: bool = False, full_hint: str | None = None, db: str | Path = DEFAULT_DB
) -> None:
    """Print a task's view on ``console``, one titled section each (recorded text shown escaped).

    The sections: goal, request, criteria, constraints, lineage (a fork's parent and fork point,
    the tasks forked from it; when any), the memories it loaded (when any), plan,
    current step, progress, role reports (when any), evidence, model calls by role (with the executor's transcript
    restarts), permissions, approvals (the pending one in full), errors, omitted history,
    provider usage (when the model reports it), checkpoints.

    Args:
        console: Where to print.
        view: The task's view (:meth:`graphs.Project.inspect`); it must have a state.
        full: List every plan step, error, role report and transcript restart from the log (``--all``; the
            view's events must then be the whole log); otherwise the state's windows, with the
            command that lists the rest.
        full_hint: Where a cut view of the pending approval sends the reader
            (:func:`.approval.inspect_hint`; default: the default database's).
        db: The database the commands it names need (``--db`` when not the default).
    """
    v = _View(console, view, full, full_hint, db)
    sections = (_identity, _lineage, _memories, _plan, _progress, _reports, _evidence, _calls, _permissions, _errors)
    for section in (*sections, _usage):
        section(v)
    v.h("Checkpoints")
    resumes = [e for e in v.events if e.kind == "resume.started"]
    v.p(
        f"latest checkpoints: {', '.join(view.checkpoints) or '(none)'}; resumes: {len(resumes)}; "
        f"events: {v.ctx.events.cursor}"
    )


def _identity(v: _View) -> None:
    """Header, goal, request, success criteria, constraints (the planner's additions quoted)."""
    ctx, i = v.ctx, v.ctx.identity
    v.console.print(
        Text(f"task {escape_controls(i.task_id)}", style="bold"),
        Text(f" status: {ctx.control.status}  plan v{ctx.plan.version} ({ctx.plan.status})"),
    )
    v.h("Goal")
    if i.interpreted_goal:  # the planner's reading of the request: its claim
        v.p("as the planner wrote it (agent_claim):\n" + quote_agent(i.interpreted_goal, source="planner goal"))
    else:
        v.p("(not interpreted yet)")
    v.h("Original request (verbatim)")
    v.p(i.original_request)
    v.h("Success criteria")
    added = i.planner_criteria()
    _listed(v, [c for c in i.success_criteria if c not in added], added, "planner criteria")
    v.h("Constraints")
    planned = [c for c in i.constraints if i.constraint_sources.get(c) == "planner"]
    _listed(v, [c for c in i.constraints if c not in planned], planned, "planner constraints")


def _lineage(v: _View) -> None:
    """Parent and fork point (the workspace, the parent's side effects after the fork), children."""
    f, kids = v.view.forked, v.view.children
    if f is None and not kids:
        return
    v.h("Lineage")
    if f is not None:
        why = f": {f['why']}" if f.get("why") else ""
        v.p(f"forked from {f['parent_task_id']} at seq {f['fork_seq']}{why}")
        if f.get("workspace"):
            v.p(f"workspace: {f['workspace']} (a copy; the parent's own changes after the fork undone)")
            for path in f.get("restored", []):
                v.p(f"  restored {path}")
            for path, why_left in sorted(f.get("left", {}).items()):
                v.p(f"  left {path}: {why_left}")
        elif (none := no_workspace(v.view.spec, f["parent_task_id"])) is not None:
            v.p(none)
        elif v.view.after_fork:
            v.p(f"workspace: shared with {f['parent_task_id']}; these {NOT_UNDONE}:")
            for line in v.view.after_fork:
                v.p(f"  {line}")
    for child, seq in kids:
        v.p(f"forked into {child} at seq {seq}")


def _listed(v: _View, given: list[str], added: list[str], source: str) -> None:
    """The given items, then the planner's additions quoted as its claim ("(none)" when neither)."""
    for c in given or ([] if added else ["(none)"]):
        v.p(f"- {c}")
    if added:
        v.p("added by the planner (agent_claim):\n" + quote_agent("\n".join(f"- {c}" for c in added), source=source))


def _memories(v: _View) -> None:
    """The durable memories the task loaded at its start (the section only when it loaded any)."""
    if not v.ctx.memory.loaded:
        return
    v.h("Memories loaded")
    for m in v.ctx.memory.loaded:
        where = f"task {m.task_id}" if m.task_id else "no task"
        marks = (["STALE"] if m.stale else []) + ([f"superseded by {m.superseded_by}"] if m.superseded_by else [])
        state = f"; {', '.join(marks)}" if marks else ""
        v.p(
            f"- {m.key} [{m.namespace} {m.kind}{state}] {m.text} (confirmed by {m.confirmed_by}, {where}, {m.confirmed_at})"
        )
        for f in m.stale:
            v.p(f"  stale: {f.path} sha256 {short_sha(f.recorded)} then, {short_sha(f.current)} now")


def _plan(v: _View) -> None:
    """The plan (its window, or every step with ``full``) and the current step, quoted."""
    ctx = v.ctx
    v.h("Plan")
    steps = all_plan_steps(ctx, v.events) if v.full else list(ctx.plan.steps)
    if not v.full and ctx.plan.done_folded:
        v.p(f"   {ctx.plan.digest_line()}; `{v.all_cmd()}` lists them")
    if steps:  # titles the planner model wrote: its claim, quoted as in the prompts
        lines = [f"{'->' if s.id == ctx.plan.current_step_id else '  '} {s.id} [{s.status}] {s.title}" for s in steps]
        v.p(
            f"v{ctx.plan.version}, the steps as the planner wrote them (agent_claim):\n"
            + quote_agent("\n".join(lines), source=f"planner plan v{ctx.plan.version}")
        )
    v.h("Current step")
    cs = ctx.current_step
    v.p(
        f"{ctx.plan.current_step_id} (risk {cs.risk_level}), as the planner wrote it (agent_claim):\n"
        + quote_agent(
            f"{cs.objective}\nexpected: {cs.expected_output or '-'}", source=f"planner {ctx.plan.current_step_id}"
        )
        if cs
        else "(none)"
    )


def _progress(v: _View) -> None:
    """Completed steps, executor steps, the last step's summary and the changed files."""
    ctx = v.ctx
    v.h("Recent progress")
    v.p(f"completed steps: {ctx.progress.completed_text()}; executor steps: {ctx.progress.executor_steps}")
    if ctx.progress.last_step:
        ls = ctx.progress.last_step
        v.p(
            f"last step {ls.id} ({ls.result}), its summary ({ls.provenance}):\n"
            + quote_agent(ls.summary, source=f"complete_step {ls.id}")
        )
    if ctx.progress.changed_artifacts:
        v.p(f"changed: {', '.join(ctx.progress.changed_artifacts)}")


def _reports(v: _View) -> None:
    """The role reports (the state's last of each role, or every one with ``full``), quoted."""
    ctx = v.ctx
    counts = ctx.events.counts
    total = counts.get("role.reported", 0) + (
        counts.get("review.completed", 0) if ctx.events.schema_version >= REVIEW_REPORTS_SINCE else 0
    )
    if not total:
        return
    reports = all_reports(v.events) if v.full else list(ctx.progress.reports)
    v.h("Role reports")
    if len(reports) < total:
        v.p(f"({total} reports, the last of each role here; `{v.all_cmd()}` lists every one)")
    for r in reports:
        step = f", step {r.step_id}" if r.step_id else ""
        v.p(f"- {role_label(r.role)} #{r.seq} ({r.kind}, plan v{r.plan_version}{step}), its claim (agent_claim):")
        v.p(report_quote(r))


def _evidence(v: _View) -> None:
    """The recent tool calls and findings (stale ones marked), the stale facts, the world seen."""
    ctx = v.ctx
    v.h("Evidence")
    for r in ctx.evidence.recent_tool_calls[-8:]:
        stale = stale_line(ctx, r.id)
        v.p(
            f"- {r.id} {r.tool} -> {r.status}"
            + (f"  {r.raw_ref}" if r.raw_ref else "")
            + (f" [{stale}]" if stale else "")
        )
    for f in ctx.evidence.findings[-8:]:
        stale = stale_line(ctx, f.id)
        v.p(
            f"- finding {f.id} ({f.provenance}) [{', '.join(f.evidence_refs)}]"
            + (f" [{stale}]" if stale else "")
            + ":\n"
            + quote_agent(f.statement, source=f"complete_step {f.id}")
        )
    stale_all = stale_text(ctx)
    if stale_all is not None:
        v.h("Stale facts")
        v.p(stale_all.split("\n", 1)[1])
    if ctx.evidence.world or ctx.evidence.head:
        v.p(
            f"world version {ctx.evidence.world_version}: {len(ctx.evidence.world)} files seen, HEAD {ctx.evidence.head}"
        )


def _calls(v: _View) -> None:
    """The model calls by role (each role under its own name) and the executor's restarts."""
    v.h("Model calls by role")
    by_role: dict[str, list[dict[str, Any]]] = {}
    for e in v.events:
        if e.kind == "context.built":
            by_role.setdefault(str(e.payload["role"]), []).append(e.payload)
    for role, calls in by_role.items():
        ids = [str(c["call"]) for c in calls]  # a long task: the first and last 5, and how many between
        nums = (
            ", ".join(ids)
            if len(ids) <= 12
            else f"{', '.join(ids[:5])}, ... {len(ids) - 10} more ..., {', '.join(ids[-5:])}"
        )
        v.p(
            f"- {role}: {len(calls)} call{'s' if len(calls) != 1 else ''} ({nums}); "
            f"{sum(c['prompt_tokens'] for c in calls):,} prompt tokens; manifests: "
            f"{sum(c['blocks_in'] for c in calls)} blocks in, {sum(c['blocks_out'] for c in calls)} out"
        )
    if not by_role:
        v.p("(no model call yet)")
    restarts = [c for c in by_role.get("executor", []) if c.get("transcript_reset")]
    shown_restarts = restarts if v.full else restarts[-RESTARTS_SHOWN:]
    if len(shown_restarts) < len(restarts):
        v.p(
            f"executor transcript restarts: {len(restarts)}, the last {len(shown_restarts)} "
            f"(`{v.all_cmd()}` lists every one):"
        )
    elif restarts:
        v.p(f"executor transcript restarts: {len(restarts)}")
    for c in shown_restarts:
        v.p(f"- {restart_line(c)}")


def _permissions(v: _View) -> None:
    """The permissions, the pending approval in full, the approvals and denials."""
    ctx, i = v.ctx, v.ctx.identity
    v.h("Permissions")
    pm = ctx.permissions
    v.p(
        f"allowed: {', '.join(pm.allowed_tools) or '(all)'}; denied: {', '.join(pm.denied_tools) or '(none)'}; "
        f"approval: {', '.join(pm.requires_approval) or '(none)'}; scopes: {', '.join(pm.file_scopes) or '(workspace)'}"
    )
    v.h("Pending approvals")
    a = ctx.control.pending_approval
    if a is None:
        v.p("(none)")
    else:  # shown in full, as at the prompt (a write as the file, a patch as a diff, ...)
        v.console.print(
            approval_renderable(
                {"task_id": i.task_id, "call_id": a.call_id, "tool": a.tool, "arguments": a.arguments}
                | {"risk": a.risk, "reason": a.reason},
                full_hint=v.full_hint,
            )
        )
    v.h("Approvals and denials")
    # requests, the user's answers and every refusal; calls the policy let run are only counted
    shown = [
        e
        for e in v.events
        if e.kind in ("permission.requested", "permission.denied")
        or (e.kind == "permission.granted" and e.actor == "user")
    ]
    # a system refusal of a call put up for approval (its file changed while waiting, edited
    # arguments refused) is the tool node's, not the policy's
    asked = {e.payload["call_id"] for e in shown if e.kind == "permission.requested"}
    for e in shown[-12:]:
        who = "user" if e.actor == "user" else ("system" if e.payload["call_id"] in asked else "policy")
        v.p(f"- #{e.seq} {e.kind} ({who}): {e.payload['tool']} [{e.payload['call_id']}] {e.payload['reason']}")
    auto = sum(1 for e in v.events if e.kind == "permission.granted" and e.actor != "user")
    v.p(
        f"({len(shown)} shown; {auto} side-effecting calls allowed by policy without approval)"
        if shown or auto
        else "(none)"
    )


def _errors(v: _View) -> None:
    """The error history (its window, or every error with ``full``), the resolved ones, omissions."""
    errs = v.ctx.errors
    v.h("Error history")
    if v.full:
        history = all_errors(v.events)
        resolved = {e.id: e for e in history if e.resolution is not None}
    else:
        history = list(errs.error_history)
        resolved = {e.id: e for e in errs.resolved_errors}
        earlier = errs.occurred_count - len(history)
        if earlier > 0:
            v.p(
                f"({errs.occurred_count} errors, {errs.resolved_count} resolved; the {earlier} resolved before these "
                f"are in the event log: `{v.all_cmd()}` lists every one)"
            )
    for e in history:
        state = f"resolved: {resolved[e.id].resolution}" if e.id in resolved else "open"
        where = f" in {e.step_id}" if e.step_id else ""  # a graph's error belongs to no step
        v.p(f"- {e.id} [{state}] {e.source}{where}: {e.message}")
    if not history:
        v.p("(none)")
    v.h("Resolved errors")
    v.p(", ".join(resolved) or "(none)")
    v.h("Omitted history")
    v.p(v.ctx.evidence.omitted_summary or "(nothing omitted)")


def _usage(v: _View) -> None:
    """Provider usage against the counted tokens (only for models that report usage)."""
    reported = [e.payload for e in v.events if e.kind == "context.built" and e.payload.get("usage")]
    if not reported:
        return
    v.h("Provider usage")
    t = ProviderUsage()
    for c in reported:
        t = t.plus(c["usage"], counted=c["prompt_tokens"])
    v.p(
        f"{t.calls} calls: {t.input_tokens:,} input tokens reported vs {t.counted:,} counted "
        f"({t.input_tokens - t.counted:+,}); cache read {t.cache_read:,}, cache write {t.cache_creation:,}, "
        f"output {t.output_tokens:,}"
    )
    for c in reported[-5:]:
        u = c["usage"]
        v.p(
            f"  call {c['call']} {c['role']}: {u['input_tokens']:,} reported vs {c['prompt_tokens']:,} counted "
            f"({u['input_tokens'] - c['prompt_tokens']:+,}), cache read {u['cache_read']:,}"
        )
