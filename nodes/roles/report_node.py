"""A custom role's report: :func:`report` records ``role.reported``; :func:`make_role_node` is a whole role node.

A role that checks the work (a tester, a linter, a security reviewer) records what it found as
one ``role.reported`` event: a verdict, a summary, items and refs. The reducer keeps the last
reports of each role in ``progress.reports``; the renderers that take the role's reports
(``PlannerRenderer`` and ``ReviewerRenderer`` take every role's) quote them in their prompts.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from context import Event, TaskContext
from context.events import RoleReported

from ..render import Renderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import SUBMIT_REPORT
from .failures import guarded
from .node_steps import model_call, prologue, reply_text, tool_args
from .role_node import ModelRequest, RoleNode

__all__ = ["make_role_node", "report"]


def report(
    run: NodeRun,
    verdict: str,
    *,
    summary: str = "",
    items: Iterable[str] = (),
    refs: Iterable[str] = (),
    step_id: str | None = None,
    before: Sequence[Event] = (),
) -> dict[str, Any]:
    """Record the role's report (``role.reported``, role ``run.node``) and return the node's state update.

    One transaction: ``before`` (the node's prologue, its ``context.built``...) then the report.
    A node returns what this returns, as the built-in nodes return ``run.update()``.

    Args:
        run: The node's run (:class:`~nodes.NodeRun`); its node name is the report's role.
        verdict: A short word of the role's vocabulary (``pass``, ``fail``...; one line, at most 40 chars).
        summary: What the role found, in a sentence or two.
        items: The issues, failing checks or other findings, one text each.
        refs: What the report rests on (artifact refs, finding ids).
        step_id: The plan step the report is about, or None (the whole task).
        before: Events of this attempt not yet committed, appended first.

    Returns:
        The state update: every part the events changed (``run.update()``).

    Raises:
        pydantic.ValidationError: A verdict of more than one line or 40 chars, or a node name
            that is no role name (letters, digits, ``_.:-``); the error names the field.
    """
    payload = RoleReported(
        role=run.node, verdict=verdict, summary=summary, items=list(items), refs=list(refs), step_id=step_id
    )
    run.commit([*before, run.make("role.reported", payload)])
    return run.update()


def make_role_node(role: str, model: BaseChatModel, env: NodeEnv, renderer: Renderer) -> RoleNode:
    """A custom role's node: render its prompt, call the model, record its ``submit_report`` as ``role.reported``.

    The model is offered :data:`~nodes.schemas.SUBMIT_REPORT` (verdict, summary, items, refs); a
    reply without it is recorded as the verdict ``"none"`` with the reply's text as the summary
    (the first 500 chars). Add the node under ``role``'s name; the report changes no control flow,
    so route on it (``progress.reports``) where the graph should.

    Args:
        role: The role's name, the node's name in the graph (letters, digits, ``_.:-``).
        model: The chat model the role calls (its calls carry metadata ``role``).
        env: The node environment.
        renderer: The role's renderer (its ``role`` should be ``role``).

    Returns:
        The node ``(state, config) -> dict`` of changed state parts.
    """

    def node(state: TaskContext, config: RunnableConfig) -> Generator[ModelRequest, AIMessage, dict[str, Any]]:
        run = NodeRun(env, state, role, config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        built, ai = yield from model_call(run, model, renderer, ctx, [SUBMIT_REPORT], ctx.plan.current_step_id)
        args = tool_args(ai, "submit_report") or {"verdict": "none", "summary": reply_text(ai)[:500]}
        return report(
            run,
            " ".join(str(args.get("verdict") or "").split())[:40],
            summary=str(args.get("summary") or ""),
            items=[str(i) for i in args.get("items") or []],
            refs=[str(r) for r in args.get("refs") or []],
            step_id=ctx.plan.current_step_id,
            before=[*pre, built],
        )

    node.__name__ = role
    return guarded(role, env, node)
