"""Continuing from an older checkpoint than the event log (time travel) is refused, and the log
is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import LogAheadError, load_trajectory
from graphs import build_orchestrator, new_task, open_project, run_graph
from nodes import ReplayChatModel, ReplayTools


def test_time_travel_is_refused_and_changes_nothing(trajectories_dir: Path, tmp_path: Path) -> None:
    traj = load_trajectory(trajectories_dir / "sweagent-pydicom-1458.jsonl")
    project = open_project(str(tmp_path / "t.sqlite"))
    g = build_orchestrator(ReplayChatModel(trajectory=traj), tools=ReplayTools(traj),
                           checkpointer=project.checkpointer, stores=project.stores)
    run_graph(g, project.stores, "f1", new_task(traj.request, "f1"))
    before = [e.id for e in project.stores.events.read("f1")]
    old = [s for s in g.get_state_history({"configurable": {"thread_id": "f1"}}) if s.next == ("executor",)][-1]
    with pytest.raises(LogAheadError, match=r"^task 'f1': the event log is at seq \d+ but this checkpoint knows seq \d+"):
        g.invoke(None, old.config, durability="sync")
    assert [e.id for e in project.stores.events.read("f1")] == before
