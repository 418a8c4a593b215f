"""A replay killed with SIGKILL resumes to the same final state as an uninterrupted run.

The child process kills itself with a real SIGKILL at a chosen point: inside a tool call (after
``tool.called`` was recorded, before its result) or inside a model call (before the node's
events were committed). ``taskctx resume`` then finishes the task in a new process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from context import TaskContext, replay
from context.sqlite_store import SqliteStores

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from context import load_trajectory
    from nodes import ReplayChatModel, ReplayTools
    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.project import open_project
    from graphs.runner import run_graph

    path, db, task_id, where, at = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    prune = sys.argv[6:] == ["prune"]  # keep only the latest checkpoint as the run goes (the CLI's way)

    class KillingTools(ReplayTools):
        def execute(self, call_id, tool, arguments):
            if where == "tool" and call_id == f"rec-{at}":
                os.kill(os.getpid(), signal.SIGKILL)
            return super().execute(call_id, tool, arguments)

    class KillingModel(ReplayChatModel):
        def _answer(self, messages, meta):
            if where == "model" and meta.get("role") == "executor" and meta.get("executor_steps") == at:
                os.kill(os.getpid(), signal.SIGKILL)
            return super()._answer(messages, meta)

    traj = load_trajectory(path)
    project = open_project(db)
    if where == "checkpoint":  # die while LangGraph writes a checkpoint: the node's writes are saved, the checkpoint is not
        saver, puts = project.checkpointer, [0]
        original_put = saver.put
        def put(*args, **kwargs):
            puts[0] += 1
            if puts[0] == at:
                os.kill(os.getpid(), signal.SIGKILL)
            return original_put(*args, **kwargs)
        saver.put = put
    project.stores.tasks.register(task_id, {"kind": "replay", "source": path, "budget": 8000})
    g = build_orchestrator(KillingModel(trajectory=traj), tools=KillingTools(traj),
                           checkpointer=project.checkpointer, stores=project.stores)
    run_graph(g, project.stores, task_id, new_task(traj.request, task_id), prune=prune)
    print("finished without being killed")
    """
)


def _normal(ctx: TaskContext) -> dict:
    """The state without what a resume legitimately changes: the event window and cursor,
    timestamps, the sequence numbers a checkpoint was taken at and a role report was recorded at
    (a resume adds ``resume.started``), and checkpoint ids (per thread)."""

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("timestamp", "at_seq", "seq", "checkpoint_id")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    d = ctx.model_dump(mode="json")
    d.pop("events")
    return strip(d)


def _taskctx(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "graphs.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "where,at,prune",
    [
        ("tool", 7, ""),
        ("model", 23, ""),
        ("tool", 41, ""),
        ("checkpoint", 60, ""),
        ("checkpoint", 61, ""),
        # pruned every 50 supersteps: killed after a prune, with one checkpoint left
        ("tool", 41, "prune"),
        ("checkpoint", 61, "prune"),
    ],
)
def test_sigkill_then_resume_matches_clean_run(
    trajectories_dir: Path, tmp_path: Path, where: str, at: int, prune: str
) -> None:
    traj = trajectories_dir / "openhands-ponyc-4588.jsonl"
    db = tmp_path / "crash.sqlite"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(traj), str(db), "k1", where, str(at), *([prune] if prune else [])],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr

    stores = SqliteStores(db)
    before = stores.events.read("k1")
    results_before = sum(1 for e in before if e.kind == "tool.result.received")
    assert 0 < results_before < 50
    stores.close()

    resumed = _taskctx("resume", "k1", "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr

    clean = _taskctx(
        "replay", str(traj), "--task-id", "c1", "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path
    )
    assert clean.returncode == 0, clean.stderr

    stores = SqliteStores(db)
    crashed_events = stores.events.read("k1")
    clean_events = stores.events.read("c1")
    # nothing recorded before the kill was lost or rewritten
    assert [e.id for e in crashed_events[: len(before)]] == [e.id for e in before]
    # each recorded step exactly once, no step redone
    for evs in (crashed_events, clean_events):
        assert Counter(e.payload["call_id"] for e in evs if e.kind == "tool.result.received") == {
            f"rec-{i}": 1 for i in range(1, 51)
        }
    assert [e.kind for e in crashed_events].count("resume.started") == 1
    a, b = _normal(replay(crashed_events)), _normal(replay(clean_events))
    a["identity"]["task_id"] = b["identity"]["task_id"] = "x"
    assert a == b


#: A task of three shout steps run with ``ainvoke`` (the model's ``_agenerate``, the tool's ``aexecute``),
#: killed with SIGKILL at a chosen point; ``resume`` continues it with ``ainvoke(None, ...)``.
ASYNC_CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from langchain_core.outputs import ChatGeneration, ChatResult
    import graphs, nodes
    from nodes.testing import complete, plan, review, tool_call

    db, task_id, where, at = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    def die(here):
        if where == here:
            os.kill(os.getpid(), signal.SIGKILL)

    class AsyncModel(nodes.ScriptedChatModel):
        def _generate(self, *a, **kw):
            raise AssertionError("the async run called the model the sync way")

        async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
            meta = dict(run_manager.metadata or {})
            if meta.get("role") == "executor" and str(meta.get("role_call")) == at:
                die("model")
            await asyncio.sleep(0)
            return ChatResult(generations=[ChatGeneration(message=self._answer(messages, meta))])

    class Shout:
        def schemas(self):
            return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

        def has_side_effects(self, tool):
            return False

        def execute(self, call_id, tool, arguments):
            raise AssertionError("the async run ran the tool the sync way")

        async def aexecute(self, call_id, tool, arguments):
            if call_id == at:
                die("tool")
            await asyncio.sleep(0)
            return arguments["text"].upper()

    words = ("hello", "there", "bye")
    executor = []
    for i, w in enumerate(words, 1):
        executor += [tool_call("shout", {"text": w}, id=f"c{i}"), complete(f"shouted {w}")]
    model = AsyncModel(script={
        "planner": [plan(*(f"Shout {w}" for w in words))],
        "executor": executor,
        "reviewer": [review("approve", "all were shouted")],
    })
    project = graphs.open_project(db)
    if where == "checkpoint":  # die while LangGraph writes a checkpoint (aput runs put in a worker thread)
        saver, puts, put = project.checkpointer, [0], project.checkpointer.put
        def killing_put(*args, **kwargs):
            puts[0] += 1
            if puts[0] == int(at):
                os.kill(os.getpid(), signal.SIGKILL)
            return put(*args, **kwargs)
        saver.put = killing_put
    graph = project.graph(model, tools=Shout(), memory=False)
    cfg = graphs.thread_config(task_id)
    task = None if where == "resume" else graphs.new_task("Shout hello, there, bye.", task_id)
    out = asyncio.run(graph.ainvoke(task, cfg, durability="sync"))
    print(out["control"].status)
    """
)


def _async_child(db: Path, task_id: str, where: str, at: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ASYNC_CHILD, str(db), task_id, where, at],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"},
    )


@pytest.mark.parametrize(
    "where,at",
    [("tool", "c2"), ("model", "4"), ("checkpoint", "5"), ("checkpoint", "8")],
)
def test_sigkill_under_ainvoke_then_async_resume_matches_clean_run(tmp_path: Path, where: str, at: str) -> None:
    db = tmp_path / "crash.sqlite"
    child = _async_child(db, "k1", where, at, tmp_path)
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    stores = SqliteStores(db)
    before = stores.events.read("k1")
    assert 0 < sum(1 for e in before if e.kind == "tool.result.received") < 3
    stores.close()

    resumed = _async_child(db, "k1", "resume", "", tmp_path)
    assert (resumed.returncode, resumed.stdout) == (0, "completed\n"), resumed.stderr
    clean = _async_child(db, "c1", "none", "", tmp_path)
    assert (clean.returncode, clean.stdout) == (0, "completed\n"), clean.stderr

    stores = SqliteStores(db)
    crashed_events, clean_events = stores.events.read("k1"), stores.events.read("c1")
    stores.close()
    # nothing recorded before the kill was lost or rewritten
    assert [e.id for e in crashed_events[: len(before)]] == [e.id for e in before]
    # each call's result exactly once, no step redone
    for evs in (crashed_events, clean_events):
        assert Counter(e.payload["call_id"] for e in evs if e.kind == "tool.result.received") == {
            "c1": 1,
            "c2": 1,
            "c3": 1,
        }
        assert Counter(e.payload["step_id"] for e in evs if e.kind == "step.completed") == {"s1": 1, "s2": 1, "s3": 1}
    a, b = _normal(replay(crashed_events)), _normal(replay(clean_events))
    a["identity"]["task_id"] = b["identity"]["task_id"] = "x"
    assert a == b
