"""Where required blocks cannot fit the budget, they degrade (the state narrowed, then the latest
call as its digest + ref) before ``BudgetError``; a budget too small for the task fails at its
start, before any model call or tool runs, naming the budget that carries the whole task."""

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
from nodes.testing import complete, plan, recover, review, tool_call

#: 300 lines of a build log: compressed, its head + tail still take 1,020 tokens
LOG = "".join(f"[{i:04d}] compiling module_{i:04d}.c with -O2 -Wall: ok, 0 warnings\n" for i in range(300))
#: The build's arguments: 3,000 chars of flags (compressed once run: head and tail of 1,200 chars)
FLAGS = " ".join(f"-DMODULE_{i:04d}=1" for i in range(177))


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


def _run(tmp_path: Path, budget: Any, **kw: Any) -> tuple[Any, SqliteStores, Tools]:
    tools = Tools()
    model = ScriptedChatModel(
        script={
            "planner": [plan("Build it")],
            "executor": [
                tool_call("build", {"flags": FLAGS}, id="b1", content="Building now."),
                complete("built"),
            ],
            "reviewer": [review("approve")],
        }
    )
    stores = SqliteStores(tmp_path / "b.sqlite")
    g = build_orchestrator(
        model, tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()), budget=budget, **kw
    )
    return g, stores, tools


BUDGET_FLOOR = 2_483  # the smallest budget the task-start check accepts (o200k tokens)
BUDGET_DEGRADED = 3_500  # the call's compressed form (2,439 tokens) does not fit; its digest (374) does


def test_a_latest_call_too_large_for_the_budget_is_degraded_not_fatal(tmp_path: Path) -> None:
    g, stores, tools = _run(tmp_path, BUDGET_DEGRADED)
    r = run_graph(g, stores, "deg", new_task("Build the project.", "deg"))
    assert r.state.control.status == "completed" and tools.runs == 1
    built = [e for e in stores.events.read("deg") if e.kind == "context.built" and e.payload["role"] == "executor"]
    assert len(built) == 2
    second = {b["id"]: b for b in built[1].payload["blocks"]}
    assert second["tool.b1"]["included"] and second["tool.b1"]["priority"] == "required"
    assert second["tool.b1"]["tokens"] == 374
    assert second["tool.b1"]["reason"] == (
        "required; degraded (step 2 of 2: the floor's calls as digests with refs), 2439 -> 374 tokens"
    )
    prompt = stores.artifacts.get(built[1].payload["prompt_ref"]).decode()
    assert (
        "[digest] ok; [command output: 300 lines, 18600 chars; 16200 chars omitted from the middle; full output: "
        in prompt
    )
    assert "[0000] compiling" not in prompt and "[0299] compiling" not in prompt
    assert "Building now." not in prompt  # the degraded entry's thought stays in the log only
    assert "-DMODULE_0000=1" in prompt and "-DMODULE_0176=1" in prompt  # its arguments' head and tail
    assert "-DMODULE_0100=1" not in prompt and "[... 2431 of 2831 chars omitted; full arguments: " in prompt
    assert all(e.payload["prompt_tokens"] <= BUDGET_DEGRADED - 1_000 for e in built)


def test_a_budget_too_small_fails_before_any_tool_runs(tmp_path: Path) -> None:
    g, stores, tools = _run(tmp_path, BUDGET_FLOOR - 1)
    with pytest.raises(BudgetError) as err:
        run_graph(g, stores, "small", new_task("Build the project.", "small"))
    assert tools.runs == 0  # no side effect
    assert str(err.value) == (
        f"task small needs a budget of at least {BUDGET_FLOOR} tokens, refused at its start before any side "
        f"effect: its request and the floor of every executor call, degraded, take {BUDGET_FLOOR - 1_000} + "
        f"reserve 1000; the budget {BUDGET_FLOOR - 1} is too small, rerun with --budget {BUDGET_FLOOR} or more"
    )
    assert err.value.minimum == BUDGET_FLOOR and err.value.scope == "task"
    assert list(stores.events.read("small")) == []  # refused before the planner's model call
    # the budget it names works: resumed with it, the task finishes
    g2, stores2, tools2 = _run(tmp_path, BUDGET_FLOOR)  # (the run takes its lease on the graph's own stores)
    r = run_graph(g2, stores2, "small2", new_task("Build the project.", "small2"))
    assert r.state.control.status == "completed" and tools2.runs == 1


def test_budget_auto_takes_the_models_window_capped_by_the_cost_target(tmp_path: Path) -> None:
    g, stores, tools = _run(tmp_path, "auto", budget_cap=BUDGET_DEGRADED)  # the scripted model's window: 128,000
    r = run_graph(g, stores, "auto", new_task("Build the project.", "auto"))
    assert r.state.control.status == "completed" and tools.runs == 1
    built = [e.payload for e in stores.events.read("auto") if e.kind == "context.built"]
    assert {p["budget"] for p in built} == {BUDGET_DEGRADED}


#: 5,599 chars of flags: over the 4,000 chars arguments are shown whole up to
LONG_FLAGS = " ".join(f"-DUNIT_{i:04d}=1" for i in range(400))


class FailingTools(Tools):
    """The build fails (its log ends in an error)."""

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.runs += 1
        return ToolOutcome("error", LOG + "error: module_0300.c: no such file\n")


def test_recovery_shows_a_failed_calls_long_arguments_compressed(tmp_path: Path) -> None:
    tools = FailingTools()
    model = ScriptedChatModel(
        script={
            "planner": [plan("Build it")],
            "executor": [tool_call("build", {"flags": LONG_FLAGS}, id="b1")],
            "recovery": [recover("stop", "the build cannot work")],
        }
    )
    stores = SqliteStores(tmp_path / "r.sqlite")
    g = build_orchestrator(
        model, tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()), budget=BUDGET_DEGRADED
    )
    r = run_graph(g, stores, "rec", new_task("Build the project.", "rec"))
    assert r.state.control.status == "failed" and tools.runs == 1
    (built,) = [
        e.payload for e in stores.events.read("rec") if e.kind == "context.built" and e.payload["role"] == "recovery"
    ]
    prompt = stores.artifacts.get(built["prompt_ref"]).decode()
    assert "-DUNIT_0000=1" in prompt and "-DUNIT_0399=1" in prompt  # head and tail
    assert "-DUNIT_0200=1" not in prompt and "[... 3199 of 5599 chars omitted; full arguments: " in prompt
