"""Going on from an older checkpoint than the event log (time travel) forks the task, and the
parent's log is left as it was."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from context import LogAheadError, load_trajectory
from graphs import build_orchestrator, new_task, open_project, thread_config
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


def test_time_travel_forks_and_wrong_causes_are_named(trajectories_dir: Path, tmp_path: Path) -> None:
    """The issue's four paths, on a kept (not pruned) history: each forks or names its real cause."""
    from context import TaskContext
    from graphs.time_travel import ForeignStateError, PastCheckpointError

    g, project = _replayed(trajectories_dir, tmp_path, "f1")
    before = [e.id for e in project.stores.events.read("f1")]
    old = [s for s in g.get_state_history({"configurable": {"thread_id": "f1"}}) if s.next == ("executor",)][-1]
    assert old.values["events"].cursor == 3
    # invoke(None, old.config): a child from seq 3 that replays on to the end
    child = TaskContext.model_validate(g.invoke(None, old.config, durability="sync"))
    assert child.identity.task_id == "f1-fork-3" and child.control.status == "completed"
    assert child.progress.executor_steps == 12
    # update_state(old.config, ...): no "node run in flight", a child with the edit
    cfg = g.update_state(old.config, {"identity": {"interpreted_goal": "another goal"}})
    assert cfg["configurable"]["thread_id"] == "f1-fork-3-2"
    assert g.get_state(cfg).values["identity"].interpreted_goal == "another goal"
    # a new input from an earlier step: refused, naming the step
    cid = old.config["configurable"]["checkpoint_id"]
    with pytest.raises(PastCheckpointError) as refused:
        g.invoke(old.values, old.config, durability="sync")
    assert str(refused.value).startswith(
        f"run: checkpoint {cid} of task 'f1' is its state at seq 3, an earlier step than its latest (seq 66); a run "
        "from there forks the task and takes input None (got dict)"
    )
    # the input checkpoint, before the first node run: nothing to fork
    (start,) = [s for s in g.get_state_history(thread_config("f1")) if s.metadata.get("step") == 0]
    with pytest.raises(PastCheckpointError, match=r"is its input, before its first node run \(seq 0\)"):
        g.invoke(None, start.config, durability="sync")
    # the old state under a new thread: not damage, another task's state
    foreign = "holds the state of task 'f1' at seq 3 (a task's state copied to another thread"
    with pytest.raises(ForeignStateError, match="^thread 'f2': update_state's values " + re.escape(foreign)):
        g.update_state({"configurable": {"thread_id": "f2"}}, old.values)
    with pytest.raises(ForeignStateError, match="^thread 'f3': the run's input " + re.escape(foreign)):
        g.invoke(old.values, {"configurable": {"thread_id": "f3"}}, durability="sync")
    assert issubclass(PastCheckpointError, LogAheadError) and issubclass(PastCheckpointError, ValueError)
    assert [e.id for e in project.stores.events.read("f1")] == before
    assert project.stores.events.last_seq("f2") == project.stores.events.last_seq("f3") == 0


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
