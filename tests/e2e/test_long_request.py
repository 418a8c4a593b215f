"""A run whose request is about 7,700 tokens: a real SWE-bench issue (pytest-6197, mini-swe-agent
with Gemini 3 Pro) that quotes the long pytest logs of its own run, built here from the shared
recording (never copied into the repository).

At the default budget it is refused at its start, before any model call or tool runs, with the
budget it needs; at that budget the whole run completes: its required blocks degrade, it never
stops later for its budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import BudgetError, SqliteStores, load_trajectory
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools
from nodes.message_tokens import model_counter

SOURCE = "minisweagent-pytest-6197.jsonl"
#: the recorded steps whose pytest logs the request quotes, as the issue's reporter would paste them
LOG_STEPS = (45, 54, 60, 67, 72, 74)
REQUEST_CHARS = 31_200
#: what the task-start check asks for this task (o200k tokens)
NEEDS = 10_867


def _long_request_run(long_dir: Path, out: Path) -> Path:
    """The pytest-6197 run with its issue quoting the pytest logs of its steps ``LOG_STEPS``."""
    header, *steps = (json.loads(x) for x in (long_dir / SOURCE).read_text().splitlines())
    logs = [s["observation"] for s in steps if s["step"] in LOG_STEPS]
    log = "\n".join(x.split("<output>\n", 1)[-1].rsplit("</output>", 1)[0] for x in logs)
    task = header["task"]
    end = task.index("</pr_description>")
    quoted = ("\nFull log of our build server's run:\n```\n" + log)[: REQUEST_CHARS - len(task) - 5] + "\n```\n"
    header = {**header, "id": "long-request", "task": task[:end] + quoted + task[end:]}
    path = out / "long-request.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [header, *steps]) + "\n")
    return path


def _graph(path: Path, stores: SqliteStores, budget: int):
    traj = load_trajectory(path)
    saver = InMemorySaver(serde=checkpoint_serde())
    model = ReplayChatModel(trajectory=traj)
    return traj, build_orchestrator(model, tools=ReplayTools(traj), stores=stores, checkpointer=saver, budget=budget)


def test_the_request_is_about_7700_tokens(long_trajectories_dir: Path, tmp_path: Path) -> None:
    traj = load_trajectory(_long_request_run(long_trajectories_dir, tmp_path))
    assert len(traj.request) == REQUEST_CHARS
    assert model_counter(ReplayChatModel(trajectory=traj))(traj.request) == 7_695


def test_at_the_default_budget_it_is_refused_at_its_start(long_trajectories_dir: Path, tmp_path: Path) -> None:
    path = _long_request_run(long_trajectories_dir, tmp_path)
    stores = SqliteStores(tmp_path / "t.sqlite")
    traj, g = _graph(path, stores, DEFAULT_BUDGET)
    with pytest.raises(BudgetError) as err:
        run_graph(g, stores, "t1", new_task(traj.request, "t1"))
    assert err.value.scope == "task" and err.value.minimum == NEEDS and err.value.budget == DEFAULT_BUDGET
    assert str(err.value).startswith(
        f"task t1 needs a budget of at least {NEEDS} tokens, refused at its start before any side effect"
    )
    assert list(stores.events.read("t1")) == []  # no model call, no tool call: nothing recorded


def test_at_the_budget_it_names_the_whole_run_completes(long_trajectories_dir: Path, tmp_path: Path) -> None:
    path = _long_request_run(long_trajectories_dir, tmp_path)
    stores = SqliteStores(tmp_path / "t.sqlite")
    traj, g = _graph(path, stores, NEEDS)
    r = run_graph(g, stores, "t2", new_task(traj.request, "t2"))
    assert r.state.control.status == "completed" and r.state.progress.executor_steps == len(traj.steps) == 92
    events = list(stores.events.read("t2"))
    built = [e.payload for e in events if e.kind == "context.built"]
    assert all(p["prompt_tokens"] <= NEEDS - 1_000 for p in built)
    assert all(traj.request in stores.artifacts.get(p["prompt_ref"]).decode() for p in built)  # verbatim
    reasons = [b["reason"] for p in built for b in p["blocks"] if "degraded (step" in b["reason"]]
    assert any("(step 1 of 2: state narrowed)" in x for x in reasons)
    assert any("(step 2 of 2: the floor's calls as digests with refs)" in x for x in reasons)
    assert not [e for e in events if e.kind == "error.occurred" and "budget" in e.payload.get("message", "")]
