"""The planner's renderer: core + plan + progress + findings (no raw tool output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import TaskContext

from ..runtime import NodeEnv, Rendered
from .common import assemble, block, core_blocks, error_block, memory_block, plan_text

__all__ = ["PlannerRenderer", "PLANNER_SYSTEM"]

PLANNER_SYSTEM = (
    "You are the planner of a taskctx task. Turn the request into a short plan of concrete steps, each "
    "with an expected output, and call submit_plan. Keep every hard constraint. When re-planning, keep the "
    "steps already done and plan only what is left; say why in `reason`."
)


def progress_text(ctx: TaskContext) -> str:
    lines = ["## Progress"]
    lines.append(
        f"completed steps: {', '.join(ctx.progress.completed_steps) or '(none)'}; "
        f"tool calls so far: {ctx.progress.executor_steps}"
    )
    if ctx.progress.last_step is not None:
        ls = ctx.progress.last_step
        lines.append(f"last step {ls.id} ({ls.result}): {ls.summary}")
        lines += [f"unresolved: {u}" for u in ls.unresolved_issues]
    for s in ctx.events.recent:
        if s.kind in ("review.completed", "recovery.decided", "permission.denied"):
            lines.append(f"{s.kind}: {s.summary}")
    return "\n".join(lines)


class PlannerRenderer:
    role = "planner"

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
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
                priority="high",
                slot="msg:state",
            )
        )
        cands.append(
            block(
                env,
                "state.progress",
                progress_text(ctx),
                kind="state",
                layer="recent",
                source="TaskContext.progress",
                priority="high",
                slot="msg:state",
            )
        )
        err = error_block(ctx, env, slot="msg:state")
        if err is not None:
            cands.append(err)
        n = len(ctx.evidence.findings)
        for i, f in enumerate(ctx.evidence.findings):
            cands.append(
                block(
                    env,
                    f"finding.{f.id}",
                    f"- finding: {f.statement} [{', '.join(f.evidence_refs) or 'no refs'}]",
                    kind="state",
                    layer="recent",
                    source="step.completed",
                    priority="normal",
                    relevance=(i + 1) / n,
                    slot="msg:state",
                ).model_copy(update={"supersedes": [f"finding.{x}" for x in f.supersedes]})
            )
        return assemble(
            role=self.role,
            env=env,
            system=PLANNER_SYSTEM,
            candidates=cands,
            layout=["msg:core", "msg:state"],
            tools=tools,
        )
