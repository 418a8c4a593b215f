"""Checkpoints are a cache of the event log: with ``prune=True`` (the ``taskctx`` commands) a
thread keeps only its latest checkpoint and its pending writes, on SQLite (``PruningSqliteSaver``)
and Postgres (LangGraph's ``PostgresSaver.prune``); the task still resumes and folds to the same
state."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from context import ModelCallError, load_trajectory, replay
from graphs import build_orchestrator, new_task, open_project
from graphs.checkpoint import PRUNE_EVERY, PruningSqliteSaver, checkpoint_serde, prune_thread
from graphs.runner import run_graph
from nodes import ReplayChatModel, ReplayTools


def _rows(db: Path, thread: str) -> tuple[int, int]:
    c = sqlite3.connect(db)
    try:
        n = c.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread,)).fetchone()[0]
        w = c.execute("SELECT COUNT(*) FROM writes WHERE thread_id = ?", (thread,)).fetchone()[0]
        return n, w
    finally:
        c.close()


def _graph(traj, project):
    return build_orchestrator(
        ReplayChatModel(trajectory=traj),
        tools=ReplayTools(traj),
        checkpointer=project.checkpointer,
        stores=project.stores,
    )


def test_a_pruned_run_keeps_one_checkpoint_resumes_and_folds_to_the_same_state(
    trajectories_dir: Path, tmp_path: Path
) -> None:
    traj = load_trajectory(trajectories_dir / "openhands-ponyc-4588.jsonl")
    db = tmp_path / "p.sqlite"
    project = open_project(str(db))
    assert isinstance(project.checkpointer, PruningSqliteSaver)
    g = _graph(traj, project)
    first = run_graph(g, project.stores, "p1", new_task(traj.request, "p1"), stop_after=20, prune=True)
    assert first.stopped_early and first.next_nodes == ("executor",)
    assert _rows(db, "p1") == (1, 0)  # the latest checkpoint alone; it has no pending writes
    done = run_graph(g, project.stores, "p1", None, resume=True, prune=True)
    assert done.state.control.status == "completed"
    assert _rows(db, "p1") == (1, 0)
    assert replay(project.stores.events.read("p1")) == done.state
    snap = g.get_state({"configurable": {"thread_id": "p1"}})
    assert (
        snap.parent_config is None and len(list(project.checkpointer.list({"configurable": {"thread_id": "p1"}}))) == 1
    )
    # the history is the log's, step by step (graphs.time_travel): the kept checkpoint, then a log point per step
    from graphs.time_travel import log_steps

    history = list(g.get_state_history({"configurable": {"thread_id": "p1"}}))
    assert [h.metadata["taskctx_seq"] for h in history] == [
        s.seq for s in reversed(log_steps(project.stores.events.read("p1")))
    ]
    # without prune every superstep's checkpoint stays (get_state_history, notebooks)
    run_graph(g, project.stores, "p2", new_task(traj.request, "p2"))
    kept, _ = _rows(db, "p2")
    assert kept == 124 > 2 * PRUNE_EVERY
    assert _rows(db, "p1") == (1, 0)  # another thread is untouched by a prune and vice versa
    assert prune_thread(project.checkpointer, "p2") is True
    assert _rows(db, "p2") == (1, 0)
    project.close()


def test_prune_keeps_the_latest_checkpoints_pending_writes(tmp_path: Path) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    conn = sqlite3.connect(tmp_path / "w.sqlite", check_same_thread=False)
    saver = PruningSqliteSaver(conn, serde=checkpoint_serde())
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ids = []
    for i in range(3):
        cp = empty_checkpoint()
        cfg = saver.put(cfg, cp, {"step": i}, {})
        saver.put_writes(cfg, [("ch", f"v{i}")], task_id=f"task{i}")
        ids.append(cp["id"])
    saver.prune(["t"])
    tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert tup is not None and tup.checkpoint["id"] == ids[-1] and tup.parent_config is None
    assert tup.pending_writes == [("task2", "ch", "v2")]
    assert [r[0] for r in conn.execute("SELECT checkpoint_id FROM writes")] == [ids[-1]]
    with pytest.raises(TypeError, match="not a str"):
        saver.prune("t")
    with pytest.raises(ValueError, match="Unknown prune strategy: 'all'"):
        saver.prune(["t"], strategy="all")
    saver.prune(["t"], strategy="delete")
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    conn.close()


def test_a_saver_without_prune_is_left_alone() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    assert prune_thread(InMemorySaver(), "x") is False


@pytest.mark.postgres
def test_postgres_keeps_one_checkpoint_per_thread_with_langgraphs_prune(trajectories_dir: Path, pg_db: str) -> None:
    traj = load_trajectory(trajectories_dir / "sweagent-pydicom-1458.jsonl")
    project = open_project(pg_db)
    try:
        g = _graph(traj, project)
        done = run_graph(g, project.stores, "pg1", new_task(traj.request, "pg1"), prune=True)
        run_graph(g, project.stores, "pg2", new_task(traj.request, "pg2"))
        import psycopg

        with psycopg.connect(pg_db) as c:
            rows = dict(c.execute("SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id").fetchall())
            writes = dict(c.execute("SELECT thread_id, COUNT(*) FROM checkpoint_writes GROUP BY thread_id").fetchall())
        assert rows["pg1"] == 1 and "pg1" not in writes
        assert rows["pg2"] == 34  # not pruned: every superstep's checkpoint
        assert replay(project.stores.events.read("pg1")) == done.state
        snap = g.get_state({"configurable": {"thread_id": "pg1"}})
        assert snap.values["control"].status == "completed" and snap.parent_config is None
    finally:
        project.close()


class _DownAfter(ReplayChatModel):
    """The replay model whose provider goes down at the executor's 11th call."""

    def _answer(self, messages: Any, meta: dict[str, Any]) -> Any:
        if meta.get("role") == "executor" and int(meta.get("executor_steps", 0)) >= 10:
            raise ModelCallError("connection refused", role="executor")
        return super()._answer(messages, meta)


def test_a_run_stopped_by_an_error_is_pruned_too(trajectories_dir: Path, tmp_path: Path) -> None:
    """A pruned run that stops on an error (here a provider failure after 10 tool calls) keeps
    only its latest checkpoint as well; the error is raised unchanged."""
    traj = load_trajectory(trajectories_dir / "openhands-ponyc-4588.jsonl")
    db = tmp_path / "b.sqlite"
    project = open_project(str(db))
    g = build_orchestrator(
        _DownAfter(trajectory=traj), tools=ReplayTools(traj), checkpointer=project.checkpointer, stores=project.stores
    )
    with pytest.raises(ModelCallError, match="connection refused"):
        run_graph(g, project.stores, "b1", new_task(traj.request, "b1"), prune=True)
    assert [e.kind for e in project.stores.events.read("b1")].count("tool.result.received") == 10
    assert _rows(db, "b1")[0] == 1
    with pytest.raises(ModelCallError):  # without prune the run's checkpoints stay
        run_graph(g, project.stores, "b2", new_task(traj.request, "b2"))
    assert _rows(db, "b2")[0] > 10


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_project_checkpointer_answers_the_async_calls(
    tmp_path: Path, request: pytest.FixtureRequest, db: str
) -> None:
    """aput, aput_writes, aget_tuple, alist, aprune and adelete_thread: the sync methods, in a worker thread."""
    import asyncio

    from langgraph.checkpoint.base import empty_checkpoint

    url = str(tmp_path / "a.sqlite") if db == "sqlite" else request.getfixturevalue("pg_db")

    async def run(saver) -> None:
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        ids = []
        for i in range(3):
            cp = empty_checkpoint()
            cfg = await saver.aput(cfg, cp, {"step": i}, {})
            await saver.aput_writes(cfg, [("ch", f"v{i}")], task_id=f"task{i}")
            ids.append(cp["id"])
        assert [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": "t"}})] == ids[::-1]
        assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t"}})] == ids[::-1]
        await saver.aprune(["t"])
        tup = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert tup is not None and tup.checkpoint["id"] == ids[-1] and tup.parent_config is None
        assert [w[1:] for w in tup.pending_writes] == [("ch", "v2")]
        await saver.adelete_thread("t")
        assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is None

    with open_project(url) as project:
        asyncio.run(run(project.checkpointer))
