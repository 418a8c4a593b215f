"""The executor node: starts the next step, records the tool calls the model asks for, completes steps."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from context import BudgetError, Event, TaskContext, replay
from context.events import (
    StepCompletionRequested,
    ToolCalled,
)
from context.text import cut

from ..render import ExecutorRenderer, Renderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import COMPLETE_STEP
from ..tools import CONTROL_TOOLS, READ_ARTIFACT_SCHEMA, ToolExecutor
from .base import Node, model_call, prologue, reply_text, step_started, tool_args
from .completion import completion_args, step_completed
from .failures import guarded

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def make_executor_node(
    model: BaseChatModel, env: NodeEnv, tools: ToolExecutor, renderer: Renderer | None = None
) -> Node:
    """The executor: starts the next runnable step, asks the model for tool calls
    (``tool.called``, run by the tool node) or ``complete_step`` (``step.completed``)."""
    rend = renderer or ExecutorRenderer()

    def executor(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "executor", config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        if ctx.plan.current_step_id is None:
            nxt = ctx.next_runnable_step()
            if nxt is None:
                run.commit(pre)
                return run.update()
            started = step_started(run, nxt)
            pre.append(started)
            ctx = replay([started], ctx)
        step_id = ctx.plan.current_step_id
        if ctx.completion_ready():  # complete_step came with the step's last calls, and they have finished
            pc = ctx.control.pending_completion
            assert pc is not None
            run.commit(
                [
                    *pre,
                    *step_completed(
                        run, ctx, pc.step_id, pc.result, pc.summary, list(pc.findings), list(pc.unresolved_issues)
                    ),
                ]
            )
            return run.update()
        schemas = [*tools.schemas(), READ_ARTIFACT_SCHEMA, COMPLETE_STEP]
        minimum = getattr(rend, "minimum_budget", None)
        if minimum is not None and not ctx.events.counts.get("context.built:executor"):
            # the task's first executor call, before any tool runs: a budget too small for a
            # degraded call later fails now, not after a side effect
            need = minimum(ctx, env, schemas)
            if need > env.budget:
                raise BudgetError(
                    role="executor",
                    task_id=ctx.identity.task_id,
                    required=need - env.reserve_for_output,
                    reserve=env.reserve_for_output,
                    budget=env.budget,
                )
        built, ai = model_call(run, model, rend, ctx, schemas, step_id)
        thought = reply_text(ai)
        work = [tc for tc in ai.tool_calls if tc["name"] not in CONTROL_TOOLS]
        events: list[Event] = []
        used = {r.id for r in ctx.evidence.recent_tool_calls}
        if work:
            for i, tc in enumerate(work):
                # ids go back to the provider: keep them in the strictest format (Anthropic's
                # ^[a-zA-Z0-9_-]+$); a repeated id gets "_<cursor>"
                cid = _ID_UNSAFE.sub("_", tc.get("id") or "") or f"call_{uuid.uuid4().hex[:12]}"
                if cid in used:
                    cid = f"{cid}_{ctx.events.cursor}"
                used.add(cid)
                events.append(
                    run.make(
                        "tool.called",
                        ToolCalled(
                            call_id=cid,
                            step_id=step_id,
                            tool=tc["name"],
                            arguments=json.dumps(tc["args"], sort_keys=True, ensure_ascii=False),
                            thought=thought if i == 0 else "",
                            idempotency_key=f"{run.task_id}:{cid}",
                            has_side_effects=tools.has_side_effects(tc["name"]),
                        ),
                    )
                )
            done = tool_args(ai, "complete_step")
            if done is not None and step_id is not None:  # finish the step once these calls succeed
                result, summary, findings, unresolved = completion_args(step_id, done)
                events.append(
                    run.make(
                        "step.completion.requested",
                        StepCompletionRequested(
                            step_id=step_id,
                            after_calls=[ev.payload["call_id"] for ev in events],
                            result=result,
                            summary=summary,
                            findings=findings,
                            unresolved_issues=unresolved,
                        ),
                    )
                )
        else:
            args = tool_args(ai, "complete_step") or {"summary": cut(thought.strip(), 500)}
            result, summary, findings, unresolved = completion_args(step_id or "", args)
            events += step_completed(run, ctx, step_id or "", result, summary, findings, unresolved)
        run.commit([*pre, built, *events])
        return run.update()

    return guarded("executor", env, executor)
