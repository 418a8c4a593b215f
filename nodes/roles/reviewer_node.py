"""The reviewer node: ``review.completed``; an approval ends the task, a revision re-plans."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from context import TaskContext
from context.events import (
    ReviewCompleted,
    TaskCompleted,
)

from ..render import Renderer, ReviewerRenderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import SUBMIT_REVIEW
from .failures import guarded
from .node_steps import model_call, prologue, reply_text, tool_args
from .role_node import ModelRequest, RoleNode

__all__ = ["MAX_REVIEW_ROUNDS", "make_reviewer_node"]

#: Reviews that may send the work back before the task stops as failed.
MAX_REVIEW_ROUNDS = 3


def make_reviewer_node(model: BaseChatModel, env: NodeEnv, renderer: Renderer | None = None) -> RoleNode:
    """The reviewer node: ``review.completed``; an approval ends the task, a revision re-plans.

    A reply without ``submit_review`` is a revision (no verdict is no approval). After
    ``MAX_REVIEW_ROUNDS`` revisions the task ends ``failed``.

    Args:
        model: The chat model the reviewer calls.
        env: The node environment.
        renderer: The reviewer's renderer; default :class:`~nodes.render.ReviewerRenderer`.

    Returns:
        The node ``(state, config) -> dict`` of changed state parts.
    """
    rend = renderer or ReviewerRenderer()

    def reviewer(state: TaskContext, config: RunnableConfig) -> Generator[ModelRequest, AIMessage, dict[str, Any]]:
        run = NodeRun(env, state, "reviewer", config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        built, ai = yield from model_call(run, model, rend, ctx, [SUBMIT_REVIEW], None)
        # no verdict is no approval: a reviewer that answers in prose sends the work back
        args = tool_args(ai, "submit_review") or {
            "verdict": "revise",
            "summary": reply_text(ai)[:500],
            "issues": ["the reviewer gave no verdict (no submit_review call)"],
        }
        verdict: Literal["approve", "revise"] = "revise" if args.get("verdict") == "revise" else "approve"
        review = ReviewCompleted(
            verdict=verdict, summary=str(args.get("summary") or ""), issues=[str(i) for i in args.get("issues") or []]
        )
        events = [run.make("review.completed", review)]
        rounds = ctx.events.counts.get("review.completed", 0) + 1
        if verdict == "approve":
            events.append(run.make("task.completed", TaskCompleted(status="completed", summary=review.summary)))
        elif rounds >= MAX_REVIEW_ROUNDS:
            events.append(
                run.make(
                    "task.completed",
                    TaskCompleted(
                        status="failed",
                        summary=f"review asked for revisions {rounds} times: {'; '.join(review.issues)}",
                    ),
                )
            )
        run.commit([*pre, built, *events])
        return run.update()

    return guarded("reviewer", env, reviewer)
