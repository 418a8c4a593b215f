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


def test_studio_fork_runs_the_child_checkpoint_on_the_parent_thread(trajectories_dir: Path, tmp_path: Path) -> None:
    """Studio's "Fork": ``update_state`` at an earlier step, then a run of the checkpoint it returned
    on the thread it edited. The edit forked the task, so the run goes on as that child; the child
    of a UUID thread is a UUID (the Server's thread ids are)."""
    import uuid

    from context import TaskContext, replay

    parent = "6f1c2b9e-3d4a-4c5b-8e7f-0a1b2c3d4e5f"
    g, project = _replayed(trajectories_dir, tmp_path, parent)
    before = [e.id for e in project.stores.events.read(parent)]
    head = g.get_state(thread_config(parent)).values
    old = [s for s in g.get_state_history(thread_config(parent)) if s.next == ("executor",)][-1]
    seq = old.values["events"].cursor
    resp = g.update_state(old.config, {"identity": {"non_goals": ["speed"]}})
    child = resp["configurable"]["thread_id"]
    assert child == str(uuid.uuid5(uuid.UUID(parent), f"{parent}-fork-{seq}"))
    # the run as the Server makes it: the parent's thread, the checkpoint the edit returned
    run = {
        "configurable": {
            "thread_id": parent,
            "checkpoint_ns": "",
            "checkpoint_id": resp["configurable"]["checkpoint_id"],
        }
    }
    out = TaskContext.model_validate(g.invoke(None, run, durability="sync"))
    assert out.identity.task_id == child and out.control.status == "completed"
    assert out.identity.non_goals == ["speed"] and out.progress.executor_steps == 12
    # reading that checkpoint on the parent's thread reads the child's, sync and async
    import asyncio

    for snap in (g.get_state(run), asyncio.run(g.aget_state(run))):
        assert snap.config["configurable"]["thread_id"] == child
        assert snap.values["identity"].task_id == child and snap.values["identity"].non_goals == ["speed"]
    events = project.stores.events.read(child)
    assert [e.id for e in events[:seq]] == before[:seq]
    assert [e.kind for e in events[seq : seq + 3]] == ["task.forked", "state.edited", "resume.started"]
    assert replay(events) == out
    # the parent: its log and state as they were; a checkpoint id no task holds is still "not kept"
    assert [e.id for e in project.stores.events.read(parent)] == before
    assert g.get_state(thread_config(parent)).values == head
    gone = {"configurable": {"thread_id": parent, "checkpoint_id": str(uuid.uuid4())}}
    with pytest.raises(LogAheadError, match=r"is not kept"):
        g.invoke(None, gone, durability="sync")
    project.close()


def test_forks_of_one_step_at_once_each_get_their_own_child(trajectories_dir: Path, tmp_path: Path) -> None:
    """Four ``update_state`` at one earlier step at the same time (four Studio "Fork"s): four
    children, ``-fork-<seq>`` then ``-2`` to ``-4``, each with its own edit; none is refused."""
    from concurrent.futures import ThreadPoolExecutor

    g, project = _replayed(trajectories_dir, tmp_path, "c1")
    old = [s for s in g.get_state_history(thread_config("c1")) if s.next == ("executor",)][-1]
    seq = old.values["events"].cursor

    def fork(i: int) -> tuple[str, int]:
        cfg = g.update_state(old.config, {"identity": {"non_goals": [f"n{i}"]}})
        return cfg["configurable"]["thread_id"], i

    with ThreadPoolExecutor(4) as pool:
        made = list(pool.map(fork, range(4)))
    base = f"c1-fork-{seq}"
    assert sorted(c for c, _ in made) == sorted([base, f"{base}-2", f"{base}-3", f"{base}-4"])
    for child, i in made:
        events = project.stores.events.read(child)
        assert [e.kind for e in events[seq:]] == ["task.forked", "state.edited"]
        assert g.get_state(thread_config(child)).values["identity"].non_goals == [f"n{i}"]
    project.close()


def test_an_edit_of_the_task_id_is_refused_as_not_editable(trajectories_dir: Path, tmp_path: Path) -> None:
    """``update_state`` with another ``identity.task_id``, at the latest and at an earlier step:
    refused as a field that cannot be edited, naming the thread's id; no child is made."""
    from context import InvalidInputError

    g, project = _replayed(trajectories_dir, tmp_path, "e1")
    old = [s for s in g.get_state_history(thread_config("e1")) if s.next == ("executor",)][-1]
    for config in (thread_config("e1"), old.config):
        with pytest.raises(InvalidInputError) as refused:
            g.update_state(config, {"identity": {"task_id": "evil"}})
        assert str(refused.value).startswith(
            "update_state: identity.task_id cannot be edited (it is 'e1', the thread's id, and 'evil' was given)"
        )
    assert project.stores.events.task_ids() == ["e1"]
    project.close()


def test_an_edit_of_a_thread_with_no_task_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """``update_state`` on a thread with no checkpoint and no events: refused, nothing written;
    the thread then starts a task as any new one."""
    from context import InvalidInputError
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, review

    model = ScriptedChatModel(
        script={"planner": [plan("Say hi")], "executor": [complete("said hi")], "reviewer": [review("approve")]}
    )
    with open_project(str(tmp_path / "n.sqlite")) as project:
        g = project.graph(model)
        with pytest.raises(InvalidInputError) as refused:
            g.update_state(thread_config("nothere"), {"identity": {"constraints": ["q"]}})
        assert str(refused.value).startswith("update_state: thread 'nothere' holds no task (no checkpoint, no events)")
        assert list(project.checkpointer.list(thread_config("nothere"))) == []
        out = g.invoke(new_task("Say hi.", "nothere"), thread_config("nothere"), durability="sync")
        assert out["control"].status == "completed"


def test_a_fork_with_the_whole_state_sent_back_records_only_what_changed(
    trajectories_dir: Path, tmp_path: Path
) -> None:
    """Studio's state editor (and ``past.values`` edited in Python) sends the whole state back with
    one field changed: the child records that field as its edit, and the rest is the fork."""
    g, project = _replayed(trajectories_dir, tmp_path, "w1")
    old = [s for s in g.get_state_history(thread_config("w1")) if s.next == ("executor",)][-1]
    seq = old.values["events"].cursor
    whole = {**old.values, "identity": old.values["identity"].model_copy(update={"non_goals": ["speed"]})}
    cfg = g.update_state(old.config, whole)
    child = cfg["configurable"]["thread_id"]
    events = project.stores.events.read(child)
    assert [e.kind for e in events[seq:]] == ["task.forked", "state.edited"]
    assert events[seq + 1].payload["changes"] == {"identity": {"non_goals": ["speed"]}}
    assert g.get_state(cfg).values["identity"].non_goals == ["speed"]
    # the same as JSON (what the Server gets from Studio), on the next child
    as_json = {k: v.model_dump(mode="json") for k, v in whole.items()}
    again = g.update_state(old.config, as_json)["configurable"]["thread_id"]
    assert again == f"{child}-2"
    assert project.stores.events.read(again)[seq + 1].payload["changes"] == {"identity": {"non_goals": ["speed"]}}
    project.close()
