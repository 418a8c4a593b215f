"""The reviewer's renderer: core (success criteria) + plan + changed artifacts + findings with refs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import Finding, TaskContext
from context.text import quote_name

from ..runtime import NodeEnv, Rendered
from .base import assemble, block, core_blocks, finding_blocks, memory_block, plan_text, plan_trust
from .policy_blocks import policy_blocks
from .quoting import EXTERNAL_RULE
from .role_reports import ALL_ROLES, report_blocks

__all__ = ["ReviewerRenderer", "REVIEWER_SYSTEM", "all_findings"]

REVIEWER_SYSTEM = (
    "You are the reviewer of a taskctx task. Check the work against every success criterion and hard "
    "constraint, using the findings and their evidence refs. Call submit_review with verdict 'approve', "
    "or 'revise' and the issues that must be fixed.\n" + EXTERNAL_RULE
)


def all_findings(ctx: TaskContext, env: NodeEnv) -> list[Finding]:
    """Every finding of the task up to ``ctx``'s cursor, oldest first.

    From the event log's ``step.completed`` events (the state keeps only the last
    ``FINDINGS_WINDOW``), plus any in the state's window the log does not hold.

    Args:
        ctx: The state.
        env: The node environment (its event log).

    Returns:
        The findings.
    """
    out: list[Finding] = []
    if ctx.identity.task_id:
        for e in env.events.iter(ctx.identity.task_id, kinds=["step.completed"]):
            if e.seq > ctx.events.cursor:
                break
            out += e.typed().findings
    seen = {f.id for f in out}
    return out + [f for f in ctx.evidence.findings if f.id not in seen]


class ReviewerRenderer:
    """The reviewer's renderer: core (success criteria) + plan + changed artifacts + findings with refs.

    Every finding of the task is a candidate (read from the event log); the builder drops the
    oldest first when they do not fit.
    """

    role = "reviewer"

    def __init__(self, *, reports: Sequence[str] = (ALL_ROLES,)):
        """A reviewer renderer.

        Args:
            reports: The roles whose reports (``progress.reports``) the prompt shows: role names,
                or ``"*"`` for every other role (the default: every custom role's, a tester's say); ``()``: none.
        """
        self.reports = tuple(reports)

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        """Render the reviewer's prompt.

        Args:
            ctx: The state.
            env: The node environment.
            tools: The tool schemas the call offers.

        Returns:
            The prompt.
        """
        cands = core_blocks(ctx, env)
        mem = memory_block(ctx, env, slot="msg:core")
        if mem is not None:
            cands.append(mem)
        cands.append(
            block(
                env,
                "state.plan",
                plan_text(ctx),
                kind="state",
                layer="step",
                source="TaskContext.plan",
                trust=plan_trust(ctx),
                priority="required",
                slot="msg:state",
            )
        )
        changed = ctx.progress.changed_artifacts
        text = "## Changed artifacts\n" + ("\n".join(f"- {quote_name(a)}" for a in changed) or "(none recorded)")
        cands.append(
            block(
                env,
                "state.changed",
                text,
                kind="state",
                layer="recent",
                source="step.completed",
                priority="high",
                slot="msg:state",
            )
        )
        cands += report_blocks(ctx, env, self.role, self.reports)
        cands += policy_blocks(ctx, env, self.role, slot="msg:state")
        cands += finding_blocks(
            env, all_findings(ctx, env), lambda f: f"(evidence: {', '.join(f.evidence_refs) or '(none)'})", ctx
        )
        return assemble(
            role=self.role,
            env=env,
            system=REVIEWER_SYSTEM,
            candidates=cands,
            layout=["msg:core", "msg:state"],
            tools=tools,
        )
