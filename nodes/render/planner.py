"""The planner's renderer: core + plan + progress + findings (no raw tool output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import TaskContext
from context.freshness import stale_line

from ..runtime import NodeEnv, Rendered
from .base import assemble, block, core_blocks, error_block, finding_blocks, memory_block, plan_text, plan_trust
from .policy_blocks import policy_blocks
from .quoting import EXTERNAL_RULE, quote_agent
from .role_reports import ALL_ROLES, report_blocks

__all__ = ["PlannerRenderer", "PLANNER_SYSTEM"]

PLANNER_SYSTEM = (
    "You are the planner of a taskctx task. Turn the request into a short plan of concrete steps, each "
    "with an expected output, and call submit_plan. Keep every hard constraint. When re-planning, keep the "
    "steps already done and plan only what is left; say why in `reason`.\n" + EXTERNAL_RULE
)


#: Event kinds whose summary the planner's progress shows; the first two are a model's words.
_AGENT_SUMMARIES = {"review.completed": "review", "recovery.decided": "recovery"}


def progress_text(ctx: TaskContext) -> tuple[str, bool]:
    """The progress block: completed steps, the last step, review and recovery summaries.

    Args:
        ctx: The state.

    Returns:
        ``(text, whether it quotes an agent's claim)``.
    """
    lines = ["## Progress"]
    lines.append(f"completed steps: {ctx.progress.completed_text()}; tool calls so far: {ctx.progress.executor_steps}")
    agent = False
    if ctx.progress.last_step is not None:
        ls = ctx.progress.last_step
        said = "\n".join([ls.summary, *(f"unresolved: {u}" for u in ls.unresolved_issues)])
        stale = stale_line(ctx, f"step:{ls.id}")
        lines.append(
            f"last step {ls.id} ({ls.result}), the executor's summary{f' [{stale}]' if stale else ''}:\n"
            + quote_agent(said, source=f"complete_step {ls.id}")
        )
        agent = True
    for s in ctx.events.recent:
        if s.kind in _AGENT_SUMMARIES:
            lines.append(f"{s.kind}:\n" + quote_agent(s.summary, source=_AGENT_SUMMARIES[s.kind]))
            agent = True
        elif s.kind == "permission.denied":  # the refused call's tool and arguments are the executor's words
            lines.append(f"{s.kind}:\n" + quote_agent(s.summary, source="executor call refused"))
            agent = True
    return "\n".join(lines), agent


class PlannerRenderer:
    """The planner's renderer: core + plan + progress + findings (no raw tool output)."""

    role = "planner"

    def __init__(self, *, reports: Sequence[str] = (ALL_ROLES,)):
        """A planner renderer.

        Args:
            reports: The roles whose reports (``progress.reports``) the prompt shows: role names,
                or ``"*"`` for every other role (the default: the reviewer's and every custom role's, for the re-plan); ``()``: none.
        """
        self.reports = tuple(reports)

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        """Render the planner's prompt.

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
                priority="high",
                slot="msg:state",
            )
        )
        progress, agent = progress_text(ctx)
        cands.append(
            block(
                env,
                "state.progress",
                progress,
                kind="state",
                layer="recent",
                source="TaskContext.progress",
                priority="high",
                trust="agent_claim" if agent else "trusted_app",
                slot="msg:state",
            )
        )
        cands += report_blocks(ctx, env, self.role, self.reports)
        err = error_block(ctx, env, slot="msg:state")
        if err is not None:
            cands.append(err)
        cands += policy_blocks(ctx, env, self.role, slot="msg:state")
        cands += finding_blocks(
            env, ctx.evidence.findings, lambda f: f"[{', '.join(f.evidence_refs) or 'no refs'}]", ctx
        )
        return assemble(
            role=self.role,
            env=env,
            system=PLANNER_SYSTEM,
            candidates=cands,
            layout=["msg:core", "msg:state"],
            tools=tools,
        )
