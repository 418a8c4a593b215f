"""The recovery renderer: core + the failure and error history + the last good checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context import TaskContext
from context.compression import compress_arguments

from ..runtime import NodeEnv, Rendered
from .base import assemble, block, core_blocks
from .policy_blocks import policy_blocks
from .quoting import EXTERNAL_RULE, quote_agent, quote_external, tool_label
from .role_reports import report_blocks

__all__ = ["RecoveryRenderer", "RECOVERY_SYSTEM", "ERROR_HISTORY_SHOWN"]

ERROR_HISTORY_SHOWN = 5
#: This renderer's checkpoint block, and the ``last_checkpoint`` policy block that supersedes it
#: when a policy adds it (the builder then keeps the policy's, or this one if that is dropped).
CHECKPOINT_BLOCK = "recovery.checkpoint"
POLICY_CHECKPOINT = "policy.last_checkpoint"

RECOVERY_SYSTEM = (
    "You are the recovery role of a taskctx task. A step failed. Decide with decide_recovery: 'retry' "
    "(the executor tries again, differently), 'replan' (the planner revises the remaining steps) or "
    "'stop' (the task cannot succeed). Give a one-line reason.\n" + EXTERNAL_RULE
)


class RecoveryRenderer:
    """The recovery renderer: core + the failure and error history + the last good checkpoint.

    The checkpoint is shown once: the renderer's own block (``recovery.checkpoint``), or the
    policy's ``last_checkpoint`` block when a context policy adds it, which supersedes it.
    """

    role = "recovery"

    def __init__(self, *, reports: Sequence[str] = ()):
        """A recovery renderer.

        Args:
            reports: The roles whose reports (``progress.reports``) the prompt shows: role names,
                or ``"*"`` for every other role (shown with the failure); ``()``: none.
        """
        self.reports = tuple(reports)

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        """Render the recovery prompt.

        Args:
            ctx: The state.
            env: The node environment.
            tools: The tool schemas the call offers.

        Returns:
            The prompt.
        """
        cands = core_blocks(ctx, env)
        failing = [r for r in ctx.evidence.recent_tool_calls if r.status == "error"][-1:]
        for r in failing:
            text = quote_external(r.result_summary[-1500:], source=f"tool:{r.tool}", ref=r.raw_ref, call_id=r.id)
            cands.append(
                block(
                    env,
                    f"failure.{r.id}",
                    f"## Failure in {tool_label(r.tool)}, called with (the executor's arguments):\n"
                    # long arguments as the transcript shows them once run (head, tail, their ref): a
                    # required block of a bounded size
                    + quote_agent(compress_arguments(r.arguments)[0], source="executor")
                    + f"\n{text}",
                    kind="tool_result",
                    layer="recovery",
                    source=f"tool:{r.tool}",
                    priority="required",
                    trust="external_content",
                    slot="msg:recovery",
                )
            )
        hist = ctx.errors.error_history[-ERROR_HISTORY_SHOWN:]
        resolved = {e.id for e in ctx.errors.resolved_errors}
        lines = [f"- {e.id} [{'resolved' if e.id in resolved else 'open'}] {e.source}: {e.message}" for e in hist]
        # error messages are cut from tool output: the list is quoted as external content
        history = quote_external("\n".join(lines), source="error history") if lines else "(none)"
        cands.append(
            block(
                env,
                "recovery.history",
                "## Error history (messages quoted from tool output)\n" + history,
                kind="state",
                layer="recovery",
                source="TaskContext.errors",
                priority="high",
                trust="external_content" if lines else "trusted_app",
                slot="msg:recovery",
            )
        )
        # the policy's checkpoint block (with the working state there) stands in for this
        # renderer's own: one "## Last good checkpoint", the manifest says which (superseded)
        cands += [
            b.model_copy(update={"supersedes": [*b.supersedes, CHECKPOINT_BLOCK]}) if b.id == POLICY_CHECKPOINT else b
            for b in policy_blocks(ctx, env, self.role, slot="msg:recovery")
        ]
        cp = ctx.control.checkpoint_id or "(none yet)"
        done = ctx.progress.completed_text()
        cur = ctx.plan.current_step_id or "(none)"
        cands.append(
            block(
                env,
                CHECKPOINT_BLOCK,
                f"## Last good checkpoint\ncheckpoint: {cp}; completed steps: {done}; current step: {cur}",
                kind="state",
                layer="recovery",
                source="TaskContext.control",
                priority="high",
                slot="msg:recovery",
            )
        )
        cands += report_blocks(ctx, env, self.role, self.reports, slot="msg:recovery")
        return assemble(
            role=self.role,
            env=env,
            system=RECOVERY_SYSTEM,
            candidates=cands,
            layout=["msg:core", "msg:recovery"],
            tools=tools,
        )
