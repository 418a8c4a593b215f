"""Where required blocks cannot fit the budget, the latest call is
degraded (digest + ref) before ``BudgetError``; a budget too small for that fails on the task's
first executor call, before any tool runs, naming the smallest budget that works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import BudgetError, SqliteStores
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome, function_schema
from nodes.testing import complete, plan, review, tool_call

#: 300 lines of a build log: compressed, its head + tail still take 1,020 tokens
LOG = "".join(f"[{i:04d}] compiling module_{i:04d}.c with -O2 -Wall: ok, 0 warnings\n" for i in range(300))


class Tools:
    """One side-effecting tool that prints a long log; counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("build", "Build the project.")]

    def has_side_effects(self, tool: str) -> bool:
        return True

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.runs += 1
        return ToolOutcome("ok", LOG)


def _run(tmp_path: Path, budget: int) -> tuple[Any, SqliteStores, Tools]:
    tools = Tools()
    model = ScriptedChatModel(
        script={
            "planner": [plan("Build it")],
            "executor": [tool_call("build", {}, id="b1", content="Building now."), complete("built")],
            "reviewer": [review("approve")],
        }
    )
    stores = SqliteStores(tmp_path / "b.sqlite")
    g = build_orchestrator(
        model, tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()), budget=budget
    )
    return g, stores, tools


BUDGET_DEGRADED = 2_000  # the log's compressed form (1,020 tokens) does not fit; its digest (111) does
BUDGET_FLOOR = 1_827  # the smallest budget the first executor call accepts (o200k tokens)


def test_a_latest_call_too_large_for_the_budget_is_degraded_not_fatal(tmp_path: Path) -> None:
    g, stores, tools = _run(tmp_path, BUDGET_DEGRADED)
    r = run_graph(g, stores, "deg", new_task("Build the project.", "deg"))
    assert r.state.control.status == "completed" and tools.runs == 1
    built = [e for e in stores.events.read("deg") if e.kind == "context.built" and e.payload["role"] == "executor"]
    assert len(built) == 2
    second = {b["id"]: b for b in built[1].payload["blocks"]}
    assert second["tool.b1"]["included"] and second["tool.b1"]["priority"] == "required"
    prompt = stores.artifacts.get(built[1].payload["prompt_ref"]).decode()
    assert (
        "[digest] ok; [command output: 300 lines, 18600 chars; 16200 chars omitted from the middle; full output: "
        in prompt
    )
    assert "[0000] compiling" not in prompt and "[0299] compiling" not in prompt
    assert "Building now." not in prompt  # the degraded entry's thought stays in the log only
    assert all(e.payload["prompt_tokens"] <= BUDGET_DEGRADED - 1_000 for e in built)


def test_a_budget_too_small_fails_before_any_tool_runs(tmp_path: Path) -> None:
    g, stores, tools = _run(tmp_path, BUDGET_FLOOR - 1)
    with pytest.raises(BudgetError) as err:
        run_graph(g, stores, "small", new_task("Build the project.", "small"))
    assert tools.runs == 0  # no side effect
    assert str(err.value) == (
        f"executor of task small needs at least {BUDGET_FLOOR} tokens: required blocks {BUDGET_FLOOR - 1_000} + "
        f"reserve 1000; rerun with --budget {BUDGET_FLOOR} or more"
    )
    assert err.value.minimum == BUDGET_FLOOR
    assert [e.kind for e in stores.events.read("small")] == ["task.created", "context.built", "plan.created"]
    # the budget it names works: resumed with it, the task finishes
    g2, stores2, tools2 = _run(tmp_path, BUDGET_FLOOR)  # (the run takes its lease on the graph's own stores)
    r = run_graph(g2, stores2, "small2", new_task("Build the project.", "small2"))
    assert r.state.control.status == "completed" and tools2.runs == 1
