"""The agent rows: each recorded run replayed through a real ``create_agent`` agent, one middleware a row.

``TaskContextMiddleware``, LangChain's ``SummarizationMiddleware`` and
``ContextEditingMiddleware(ClearToolUsesEdit)``: the real classes in a real agent (the replay
model issues the recorded calls, the recorded observations answer them). Every prompt is read
as the model got it (an innermost middleware sees the request the others made) and counted by
:data:`~graphs.bench.strategies.COUNT`, so the rows compare with the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ContextEditingMiddleware, ModelRequest
from langchain.agents.middleware.context_editing import ClearToolUsesEdit
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from context import SqliteStores, Trajectory, masked_bytes
from nodes import ReplayTools, ScriptedChatModel
from nodes.render.executor import EXECUTOR_SYSTEM
from nodes.runtime import fingerprints

from ..middleware import TaskContextMiddleware
from .metrics import Stats, strategy_stats
from .strategies import (
    CLEAR_KEEP,
    COUNT,
    Call,
    count_messages,
    messages_text,
    orphan_tool_results,
    summarizer_middleware,
)

__all__ = ["AGENT_ROWS", "AgentRun", "agent_stats", "agents_markdown", "run_agent"]

#: The rows, each a middleware in a real ``create_agent`` agent.
AGENT_ROWS = ("agent + TaskContextMiddleware", "agent + SummarizationMiddleware", "agent + ContextEditingMiddleware")


@dataclass
class AgentRun:
    """One recorded run through an agent: its calls, and (TaskContextMiddleware) what its refs restore."""

    calls: list[Call]
    compressed: int | None = None
    restored: int | None = None
    summaries: int = 0
    log: list[Any] = field(default_factory=list)


class _Capture(AgentMiddleware):  # type: ignore[type-arg]
    """Innermost: keeps every model request as the model gets it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        msgs = ([request.system_message] if request.system_message else []) + list(request.messages)
        tools = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in request.tools]
        self.requests.append((msgs, tools))
        return handler(request)


class _Observations(AgentMiddleware):  # type: ignore[type-arg]
    """Answers each recorded call ``rec-<i>`` with the recorded observation (the recorded tools)."""

    def __init__(self, t: Trajectory) -> None:
        super().__init__()
        self.t = t

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        cid = request.tool_call["id"]
        s = self.t.steps[int(cid.split("-")[1]) - 1]
        return ToolMessage(content=s.observation, tool_call_id=cid, name=request.tool_call["name"])


def _tools(t: Trajectory) -> list[BaseTool]:
    """The recorded tools as LangChain tools, their schemas as recorded (the observations answer them)."""
    out: list[BaseTool] = []
    for sc in ReplayTools(t).schemas():
        f = sc["function"]
        out.append(
            StructuredTool.from_function(
                func=lambda **_kw: "",
                name=f["name"],
                description=f.get("description") or f["name"],
                args_schema=f.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return out


def _script(t: Trajectory) -> list[AIMessage]:
    calls = [
        AIMessage(
            content=s.thought,
            tool_calls=[{"name": s.tool, "args": s.arguments, "id": f"rec-{i}", "type": "tool_call"}],
        )
        for i, s in enumerate(t.steps, start=1)
    ]
    return [*calls, AIMessage(content="Done: every recorded step replayed.")]


def _middleware(row: str, budget: int, stores: SqliteStores) -> AgentMiddleware:  # type: ignore[type-arg]
    if row == AGENT_ROWS[0]:
        return TaskContextMiddleware(stores=stores, budget=budget, count_tokens=COUNT, task_id="bench")
    if row == AGENT_ROWS[1]:
        return summarizer_middleware(budget)  # type: ignore[no-any-return]
    if row == AGENT_ROWS[2]:
        edit = ClearToolUsesEdit(trigger=budget, keep=CLEAR_KEEP)
        return ContextEditingMiddleware(edits=[edit], token_counter=count_messages)
    raise ValueError(f"unknown agent row {row!r}; expected one of {AGENT_ROWS}")


def _elided(text: str, t: Trajectory, k: int) -> int:
    """Observations of the first ``k`` steps not in the prompt in full (cleared, summarised, compressed or left out)."""
    return sum(1 for s in t.steps[:k] if s.observation.strip() and s.observation not in text)


def run_agent(t: Trajectory, row: str, budget: int) -> AgentRun:
    """Replay ``t`` through ``create_agent`` with one middleware; one :class:`Call` per recorded step.

    Args:
        t: The recorded run.
        row: One of :data:`AGENT_ROWS`.
        budget: The token budget (the middleware's).

    Returns:
        The run (the agent's last call, its final answer, is not a recorded step: not counted).

    Raises:
        ValueError: ``row`` is not one of :data:`AGENT_ROWS`.
    """
    stores = SqliteStores(":memory:")
    cap = _Capture()
    mw = _middleware(row, budget, stores)
    agent = create_agent(
        ScriptedChatModel(script=_script(t)),
        _tools(t),
        system_prompt=SystemMessage(content=EXECUTOR_SYSTEM),
        middleware=[mw, _Observations(t), cap],
    )
    agent.invoke({"messages": [{"role": "user", "content": t.request}]}, {"recursion_limit": 4 * len(t.steps) + 20})
    calls = []
    for k, (msgs, tools) in enumerate(cap.requests[: len(t.steps)]):
        text = messages_text(msgs)
        calls.append(
            Call(
                index=k,
                prompt_tokens=count_messages(msgs, tools or None),
                fingerprints=fingerprints(msgs, tools, COUNT),
                text=text,
                orphans=orphan_tool_results(msgs),
                elided=_elided(text, t, k),
                role="agent",
            )
        )
    run = AgentRun(calls)
    if row == AGENT_ROWS[0]:
        _restorability(run, stores, t)
    if row == AGENT_ROWS[1]:
        summaries = {
            str(m.content) for msgs, _ in cap.requests for m in msgs if "extractive stand-in" in str(m.content)
        }
        run.summaries = len(summaries)
    stores.close()
    return run


def _restorability(run: AgentRun, stores: SqliteStores, t: Trajectory) -> None:
    """Every compressed observation fetched back by its ref, against the recorded one (as stored)."""
    comp = rest = 0
    for e in stores.events.read("bench", kinds=["tool.result.received"]):
        p = e.payload
        if not p.get("compressed"):
            continue
        comp += 1
        s = t.steps[int(p["call_id"].split("-")[1]) - 1]
        rest += stores.artifacts.get(p["raw_ref"]) == masked_bytes(s.observation)
    run.compressed, run.restored = comp, rest
    run.log = [json.loads(e.to_json()) for e in stores.events.read("bench", kinds=["context.built"])]


def agent_stats(t: Trajectory, row: str, budget: int, constraints: list[str]) -> Stats:
    """The stats of one agent row over one recorded run (as the other rows are scored).

    Args:
        t: The recorded run.
        row: One of :data:`AGENT_ROWS`.
        budget: The token budget.
        constraints: The request's hard constraints (retention).

    Returns:
        The stats (TaskContextMiddleware: with its refs' restorability).
    """
    run = run_agent(t, row, budget)
    st = strategy_stats(t.id, row, run.calls, budget, t.request, constraints)
    st.compressed, st.restored, st.summaries = run.compressed, run.restored, run.summaries
    return st


def agents_markdown(
    totals: dict[str, Stats], halves: dict[str, list[str]], per_run: dict[str, dict[str, Stats]]
) -> list[str]:
    """The agent rows' section of ``results.md``: totals, and each half against the taskctx graph.

    Args:
        totals: Row -> its totals; ``taskctx`` among them (the graph's executor calls).
        halves: Half name -> its runs (the two-fold split).
        per_run: Run id -> row -> its stats (``taskctx`` among them).

    Returns:
        Markdown lines (none without agent rows).
    """
    rows = [r for r in AGENT_ROWS if r in totals]
    if not rows:
        return []
    tc = totals["taskctx"].effective_cost
    out = [
        "## Agents with middleware (a real `create_agent` agent per run)",
        "",
        "Each run replayed through `langchain.agents.create_agent` with the replay model and one middleware, "
        "the real classes: TaskContextMiddleware (taskctx), SummarizationMiddleware (settings and stand-in "
        f"summary as the summarization row), ContextEditingMiddleware(ClearToolUsesEdit(trigger=budget, keep={CLEAR_KEEP})). "
        "Prompts as the model got them; the agent's last call (its final answer) is not a recorded step.",
        "",
        "| row | calls | effective cost | × taskctx graph | peak prompt | over budget | retention | orphans | restorability |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ["taskctx", *rows]:
        s = totals[r]
        rest = "n/a" if s.restorability is None else f"{100 * s.restorability:.1f}%"
        out.append(
            f"| {r} | {s.calls} | {s.effective_cost:,.0f} | {s.effective_cost / tc:.3f} | {s.peak_prompt_tokens:,} | "
            f"{s.over_budget} | {100 * s.retention:.1f}% | {s.orphans} | {rest} |"
        )
    out += [
        "",
        "| half | runs | TaskContextMiddleware × taskctx graph | over budget | retention | met (≤ 1.15×, 0, 100%) |",
    ]
    out.append("|---|---:|---:|---:|---:|---|")
    for name, ids in halves.items():
        m, g = Stats("half", AGENT_ROWS[0]), Stats("half", "taskctx")
        for tid in ids:
            if AGENT_ROWS[0] in per_run.get(tid, {}):
                m.add(per_run[tid][AGENT_ROWS[0]])
                g.add(per_run[tid]["taskctx"])
        if not m.calls:
            continue
        x = m.effective_cost / g.effective_cost
        ok = x <= 1.15 and m.over_budget == 0 and m.retained == m.calls
        out.append(
            f"| {name} | {len(ids)} | {x:.3f} | {m.over_budget} | {100 * m.retention:.1f}% | {'yes' if ok else '**no**'} |"
        )
    return [*out, ""]
