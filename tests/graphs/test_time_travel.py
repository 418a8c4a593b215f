"""Continuing from an older checkpoint than the event log (time travel) is refused, and the log
is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import LogAheadError, load_trajectory
from graphs import build_orchestrator, new_task, open_project
from graphs.runner import run_graph
from nodes import ReplayChatModel, ReplayTools


def _replayed(trajectories_dir: Path, tmp_path: Path, task_id: str):
    """The pydicom run (12 recorded steps) replayed to the end: (graph, project)."""
    traj = load_trajectory(trajectories_dir / "sweagent-pydicom-1458.jsonl")
    project = open_project(str(tmp_path / "t.sqlite"))
    g = build_orchestrator(
        ReplayChatModel(trajectory=traj),
        tools=ReplayTools(traj),
        checkpointer=project.checkpointer,
        stores=project.stores,
    )
    run_graph(g, project.stores, task_id, new_task(traj.request, task_id))
    return g, project


def test_time_travel_is_refused_and_changes_nothing(trajectories_dir: Path, tmp_path: Path) -> None:
    g, project = _replayed(trajectories_dir, tmp_path, "f1")
    before = [e.id for e in project.stores.events.read("f1")]
    old = [s for s in g.get_state_history({"configurable": {"thread_id": "f1"}}) if s.next == ("executor",)][-1]
    with pytest.raises(
        LogAheadError, match=r"^task 'f1': the event log is at seq \d+ but this checkpoint knows seq \d+"
    ):
        g.invoke(None, old.config, durability="sync")
    assert [e.id for e in project.stores.events.read("f1")] == before


def test_completed_steps_name_their_last_good_checkpoint(trajectories_dir: Path, tmp_path: Path) -> None:
    from context import replay

    g, project = _replayed(trajectories_dir, tmp_path, "c1")
    events = project.stores.events.read("c1")
    created = [e.payload["checkpoint_id"] for e in events if e.kind == "checkpoint.created"]
    completed = [e for e in events if e.kind == "step.completed"]
    assert len(created) == len(completed) == 2  # 12 recorded steps: plan steps s1 (1-10) and s2 (11-12)
    history = {
        s.config["configurable"]["checkpoint_id"]: s for s in g.get_state_history({"configurable": {"thread_id": "c1"}})
    }
    for cp in created:  # each names a real checkpoint of the thread, taken when the executor was next
        assert history[cp].next == ("executor",)
    ctx = replay(events)
    assert ctx.control.checkpoint_id == created[-1] and ctx.control.rollback_available
