"""The reviewer's renderer: core (success criteria) + plan + changed artifacts + findings with refs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import TaskContext

from ..runtime import NodeEnv, Rendered
from .common import assemble, block, core_blocks, memory_block, plan_text

__all__ = ["ReviewerRenderer", "REVIEWER_SYSTEM"]

REVIEWER_SYSTEM = (
    "You are the reviewer of a taskctx task. Check the work against every success criterion and hard "
    "constraint, using the findings and their evidence refs. Call submit_review with verdict 'approve', "
    "or 'revise' and the issues that must be fixed."
)


class ReviewerRenderer:
    role = "reviewer"

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        cands = core_blocks(ctx, env)
        mem = memory_block(ctx, env, slot="msg:core")
        if mem is not None:
            cands.append(mem)
        cands.append(block(env, "state.plan", plan_text(ctx), kind="state", layer="step", source="TaskContext.plan",
                           priority="required", slot="msg:state"))
        changed = ctx.progress.changed_artifacts
        text = "## Changed artifacts\n" + ("\n".join(f"- {a}" for a in changed) or "(none recorded)")
        cands.append(block(env, "state.changed", text, kind="state", layer="recent", source="step.completed",
                           priority="high", slot="msg:state"))
        n = len(ctx.evidence.findings)
        for i, f in enumerate(ctx.evidence.findings):
            cands.append(block(env, f"finding.{f.id}",
                               f"- finding {f.id}: {f.statement}\n  evidence: {', '.join(f.evidence_refs) or '(none)'}",
                               kind="state", layer="recent", source="step.completed", priority="normal",
                               relevance=(i + 1) / n, slot="msg:state",
                               ).model_copy(update={"supersedes": [f"finding.{x}" for x in f.supersedes]}))
        return assemble(role=self.role, env=env, system=REVIEWER_SYSTEM, candidates=cands,
                        layout=["msg:core", "msg:state"], tools=tools)
