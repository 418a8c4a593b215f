"""``--db postgresql://...``: the Postgres stores and checkpointer.

Needs a throwaway server named by ``TASKCTX_TEST_PG`` (``.ci/run`` starts one on 127.0.0.1:5433);
every test skips with that reason when it is not set. Each test gets a fresh database (``pg_db``).

* concurrent appenders of one task never interleave (the rest of the store contract runs on
  both stores: the ``stores`` fixture in tests/context/test_event_log.py and test_compression.py);
* ``taskctx replay --max-steps`` then ``taskctx resume`` on Postgres;
* ``taskctx demo`` stops at an approval; ``taskctx approve`` in other processes finishes it;
* the SIGKILL crash scenarios of ``tests/e2e/test_crash_resume.py`` on Postgres;
* load: 4 processes x 20 threads x 20 executor steps on one database; every thread's log is
  complete, in order and its own;
* a connection dropped with ``pg_terminate_backend`` during a run is retried, not fatal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from context import StoreError, TaskContext, new_event, replay
from context.pg_store import PgStores, is_postgres_url, open_stores, redact_url

REPO = Path(__file__).resolve().parents[2]
TS = "2026-01-01T00:00:00.000Z"
ENV = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}


def call(i: int) -> Any:
    return new_event(
        "tool.called", {"call_id": f"c{i}", "tool": "bash", "arguments": f'{{"n": {i}}}'}, actor="agent", timestamp=TS
    )


def _taskctx(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "graphs.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=ENV
    )


# -- URLs and concurrent appenders -------------------------------------------------------------


def test_url_detection_and_redaction() -> None:
    assert is_postgres_url("postgresql://u@h:5433/db") and is_postgres_url("postgres://u@h/db")
    assert is_postgres_url("postgresql+psycopg://u@h/db")
    assert not is_postgres_url(".taskctx/taskctx.sqlite") and not is_postgres_url(":memory:")
    assert redact_url("postgresql://u:s3cret@h:5433/db") == "postgresql://u:***@h:5433/db"
    assert redact_url("postgresql://u@h:5433/db") == "postgresql://u@h:5433/db"


@pytest.mark.postgres
def test_concurrent_appenders_of_one_task_never_interleave(pg_db: str) -> None:
    """8 threads x 2 stores (two pools: as two processes would) append 25 batches of 3 to one task."""
    stores = [PgStores(pg_db), PgStores(pg_db)]
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        st = stores[k % 2]
        try:
            for b in range(25):
                st.events.append(
                    "shared",
                    [
                        new_event(
                            "tool.called", {"call_id": f"w{k}-{b}-{j}", "tool": "x", "arguments": "{}"}, actor="agent"
                        )
                        for j in range(3)
                    ],
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    try:
        assert not errors
        evs = stores[0].events.read("shared")
        assert [e.seq for e in evs] == list(range(1, 8 * 25 * 3 + 1))
        # each batch landed as one contiguous run, in its own order
        ids = [e.payload["call_id"] for e in evs]
        for i in range(0, len(ids), 3):
            w, b, j = ids[i].split("-")
            assert ids[i : i + 3] == [f"{w}-{b}-{n}" for n in range(3)]
    finally:
        for st in stores:
            st.close()


# -- resume and crash on Postgres -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.postgres
def test_replay_max_steps_then_resume_on_postgres(trajectories_dir: Path, tmp_path: Path, pg_db: str) -> None:
    traj = str(trajectories_dir / "openhands-ponyc-4588.jsonl")
    out = str(tmp_path / "runs")
    r = _taskctx("replay", traj, "--task-id", "t1", "--max-steps", "10", "--db", pg_db, "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "stopped after 10 executor steps" in r.stdout
    s = open_stores(pg_db)
    assert isinstance(s, PgStores)
    try:
        assert sum(e.kind == "tool.result.received" for e in s.events.read("t1")) == 10
        r2 = _taskctx("resume", "t1", "--db", pg_db, "--out", out, cwd=tmp_path)
        assert r2.returncode == 0, r2.stderr
        assert "task t1: completed; 50 executor steps" in r2.stdout
        evs = s.events.read("t1")
        assert [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"] == [
            f"rec-{i}" for i in range(1, 51)
        ]
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert [e.kind for e in evs].count("resume.started") == 1
        insp = _taskctx("inspect", "t1", "--db", pg_db, "--json", cwd=tmp_path)
        assert insp.returncode == 0, insp.stderr
        assert TaskContext.model_validate_json(insp.stdout) == replay(evs)
        assert not (tmp_path / ".taskctx").exists()  # nothing went to the default SQLite file
    finally:
        s.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_read_only_commands_run_no_ddl_on_postgres(trajectories_dir: Path, tmp_path: Path, pg_db: str) -> None:
    """``inspect``, ``list`` and ``report`` on a database without the taskctx tables: one line,
    exit 2, and the database still holds only its own table; on a taskctx database they work in
    read-only sessions."""
    import psycopg

    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    for cmd in (["inspect", "t1"], ["list"], ["report", "t1", "--html", str(tmp_path / "r.html")]):
        r = _taskctx(*cmd, "--db", pg_db, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.strip().splitlines()[-1] == (
            f"error: {redact_url(pg_db)} is not a taskctx database (no taskctx tables); "
            "pass the --db a task was started with"
        )
    with psycopg.connect(pg_db, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    assert [r[0] for r in rows] == ["notes"]
    assert not (tmp_path / "r.html").exists()
    traj = str(trajectories_dir / "openhands-ponyc-4588.jsonl")
    r = _taskctx("replay", traj, "--task-id", "t1", "--max-steps", "1", "--db", pg_db, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _taskctx("list", "--db", pg_db, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(x["task_id"], x["status"], x["executor_steps"]) for x in json.loads(r.stdout)] == [("t1", "running", 1)]


@pytest.mark.slow
@pytest.mark.postgres
def test_demo_waits_for_approval_then_other_processes_approve_on_postgres(tmp_path: Path, pg_db: str) -> None:
    """``taskctx demo`` (no answer given) stops at its approval in one process; ``taskctx approve``
    answers it from another process, twice, and the task completes: the hand-off between
    workers that a shared Postgres database allows."""
    out = str(tmp_path / "runs")
    r = _taskctx("demo", "--db", pg_db, "--out", out, "--task-id", "w1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "taskctx approve w1" in r.stdout
    s = open_stores(pg_db)
    try:
        ctx = replay(s.events.read("w1"))
        assert ctx.control.status == "waiting_user" and ctx.control.pending_approval is not None
        first = ctx.control.pending_approval.call_id
        answers = 0
        while ctx.control.pending_approval is not None and answers < 5:
            rid = [e for e in s.events.read("w1") if e.kind == "permission.requested"][-1].id  # the one shown
            a = _taskctx("approve", "w1", "--request", rid, "--db", pg_db, "--out", out, cwd=tmp_path)
            assert a.returncode == 0, a.stderr
            answers += 1
            ctx = replay(s.events.read("w1"))
        assert answers == 2 and ctx.control.status == "completed"
        evs = s.events.read("w1")
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        granted = [e.payload["call_id"] for e in evs if e.kind == "permission.granted" and e.actor == "user"]
        assert granted[0] == first and len(granted) == 2
        again = _taskctx("approve", "w1", "--db", pg_db, cwd=tmp_path)
        assert again.returncode == 2 and "no pending approval" in again.stderr
        assert s.events.last_seq("w1") == len(evs)
    finally:
        s.close()


def _crash_module() -> Any:
    """``tests/e2e/test_crash_resume.py`` (its child script and state normaliser), loaded by path."""
    spec = importlib.util.spec_from_file_location(
        "_taskctx_crash_resume", Path(__file__).with_name("test_crash_resume.py")
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("where,at", [("tool", 7), ("model", 23), ("checkpoint", 60)])
def test_sigkill_then_resume_matches_clean_run_on_postgres(
    trajectories_dir: Path, tmp_path: Path, pg_db: str, where: str, at: int
) -> None:
    crash = _crash_module()
    traj = trajectories_dir / "openhands-ponyc-4588.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", crash.CHILD, str(traj), pg_db, "k1", where, str(at)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=ENV,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    s = open_stores(pg_db)
    try:
        before = s.events.read("k1")
        assert 0 < sum(e.kind == "tool.result.received" for e in before) < 50
        resumed = _taskctx("resume", "k1", "--db", pg_db, "--out", str(tmp_path / "runs"), cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        clean = _taskctx(
            "replay", str(traj), "--task-id", "c1", "--db", pg_db, "--out", str(tmp_path / "runs"), cwd=tmp_path
        )
        assert clean.returncode == 0, clean.stderr
        crashed_events, clean_events = s.events.read("k1"), s.events.read("c1")
    finally:
        s.close()
    assert [e.id for e in crashed_events[: len(before)]] == [e.id for e in before]
    for evs in (crashed_events, clean_events):
        assert Counter(e.payload["call_id"] for e in evs if e.kind == "tool.result.received") == {
            f"rec-{i}": 1 for i in range(1, 51)
        }
    assert [e.kind for e in crashed_events].count("resume.started") == 1
    a, b = crash._normal(replay(crashed_events)), crash._normal(replay(clean_events))
    a["identity"]["task_id"] = b["identity"]["task_id"] = "x"
    assert a == b


# -- load: 4 processes x 20 threads x 20 steps --------------------------------------------------

LOAD_CHILD = textwrap.dedent(
    """
    import concurrent.futures as cf, json, sys, time
    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.project import open_project
    from graphs.runner import run_graph
    from nodes import ScriptedChatModel, ToolOutcome, function_schema
    from nodes.testing import complete, plan, review, tool_call

    url, proc, n_threads, n_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

    def step(messages, meta):
        i, tid = meta["role_call"], meta["task_id"]
        if i <= n_steps:
            return tool_call("echo", {"task": tid, "n": i}, id=f"{tid}-c{i}")
        return complete(f"{n_steps} echoes of {tid} done")

    class Echo:
        def schemas(self):
            return [function_schema("echo", "Echo the arguments.",
                                    {"task": {"type": "string"}, "n": {"type": "integer"}}, ["task", "n"])]
        def has_side_effects(self, tool):
            return False
        def execute(self, call_id, tool, arguments):
            return ToolOutcome("ok", f"echo {arguments['task']} {arguments['n']} ({call_id})")

    model = ScriptedChatModel(script={"planner": [plan("echo")], "executor": [step] * (n_steps + 1),
                                      "reviewer": [review("approve", "all echoes done")]})
    t0 = time.perf_counter()
    project = open_project(url)
    g = build_orchestrator(model, tools=Echo(), checkpointer=project.checkpointer, stores=project.stores)
    tids = [f"p{proc}-t{j:02d}" for j in range(n_threads)]

    def one(tid):
        r = run_graph(g, project.stores, tid, new_task(f"Echo {n_steps} times", tid), prune=True)
        return [tid, r.state.control.status, r.state.progress.executor_steps]

    with cf.ThreadPoolExecutor(n_threads) as ex:
        results = list(ex.map(one, tids))
    project.close()
    print(json.dumps({"proc": proc, "seconds": round(time.perf_counter() - t0, 2), "results": results}))
    """
)


@pytest.mark.slow
@pytest.mark.postgres
def test_load_4_processes_20_threads_20_steps(pg_db: str, tmp_path: Path) -> None:
    n_proc, n_threads, n_steps = 4, 20, 20
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD_CHILD, pg_db, str(p), str(n_threads), str(n_steps)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for p in range(n_proc)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    wall = time.perf_counter() - t0
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    results = [r for rep in reports for r in rep["results"]]
    assert len(results) == n_proc * n_threads
    assert all(status == "completed" and steps == n_steps for _, status, steps in results), results

    from graphs.project import open_project

    project = open_project(pg_db)
    try:
        s = project.stores
        tids = sorted(s.events.task_ids())
        assert tids == sorted(f"p{p}-t{j:02d}" for p in range(n_proc) for j in range(n_threads))
        total = 0
        for tid in tids:
            evs = s.events.read(tid)
            total += len(evs)
            # complete and in order
            assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
            kinds = [e.kind for e in evs]
            assert kinds[0] == "task.created" and kinds[-1] == "task.completed"
            results_ = [e for e in evs if e.kind == "tool.result.received"]
            assert [e.payload["call_id"] for e in results_] == [f"{tid}-c{i}" for i in range(1, n_steps + 1)]
            # its own and no other thread's
            assert {e.correlation_id for e in evs} == {tid}
            assert all(e.payload["call_id"].startswith(tid + "-") for e in evs if "call_id" in e.payload)
            for i, e in enumerate(results_, 1):
                assert s.artifacts.get(e.payload["raw_ref"]).decode() == f"echo {tid} {i} ({tid}-c{i})"
            # the checkpointed state is the log folded
            snap = project.checkpointer.get_tuple({"configurable": {"thread_id": tid}})
            state = TaskContext.model_validate(snap.checkpoint["channel_values"])
            assert state.identity.task_id == tid and state.events.cursor == len(evs)
            assert replay(evs) == state
        # pruned as they ran (LangGraph's PostgresSaver.prune): one checkpoint per thread, no writes
        import psycopg

        with psycopg.connect(pg_db) as c:
            per_thread = c.execute("SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id").fetchall()
            left = c.execute("SELECT COUNT(*) FROM checkpoint_writes").fetchone()[0]
        assert sorted(per_thread) == [(tid, 1) for tid in tids] and left == 0
    finally:
        project.close()
    print(
        f"\nload: {n_proc} processes x {n_threads} threads x {n_steps} steps: {len(results)} tasks, "
        f"{total} events, {wall:.1f} s wall (per process: {[r['seconds'] for r in reports]})"
    )
    assert wall < 120


# -- dropped connections --------------------------------------------------------------------


def _terminate(url: str, app_names: tuple[str, ...]) -> int:
    """``pg_terminate_backend`` every connection of ``app_names`` to this database; how many."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = ANY(%s) AND pid <> pg_backend_pid()",
            (list(app_names),),
        ).fetchall()
    return sum(1 for r in rows if r[0])


@pytest.mark.postgres
def test_store_retries_a_dropped_connection(pg_db: str) -> None:
    """Unchecked pool (the connection is used as handed out): the call fails on the dead
    connection and is retried on a new one. With retries=0 the same drop is an error (control)."""
    s = PgStores(pg_db, check=False)
    bare = PgStores(pg_db, check=False, retries=0)
    try:
        s.events.append("t1", [call(1)])
        bare.events.last_seq("t1")
        assert _terminate(pg_db, ("taskctx-store",)) >= 2
        assert [e.seq for e in s.events.append("t1", [call(2)])] == [2]
        assert s.retried >= 1
        with pytest.raises(StoreError, match="lost the connection"):
            bare.events.last_seq("t1")
        assert s.events.last_seq("t1") == 2
        assert _terminate(pg_db, ("taskctx-store",)) >= 1
        ref = s.artifacts.put(b"x")
        assert _terminate(pg_db, ("taskctx-store",)) >= 1
        assert s.artifacts.get(ref) == b"x" and [e.seq for e in s.events.read("t1")] == [1, 2]
    finally:
        s.close()
        bare.close()


@pytest.mark.postgres
@pytest.mark.parametrize("checked", [True, False], ids=["checked-pool", "unchecked-pool-retry"])
def test_run_survives_pg_terminate_backend(pg_db: str, checked: bool) -> None:
    """A scripted 12-step run; at steps 3, 6, 9 and 12 the tool terminates every connection of the
    store and the checkpointer. The run finishes, its log is complete and equals the checkpoint."""
    from graphs.checkpoint import checkpoint_serde
    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.postgres import CHECKPOINTER_APPLICATION_NAME, open_postgres_checkpointer
    from graphs.runner import run_graph, thread_config
    from nodes import ScriptedChatModel, ToolOutcome, function_schema
    from nodes.testing import complete, plan, review, tool_call

    n = 12
    killed: list[int] = []

    class Killer:
        def schemas(self) -> list[dict[str, Any]]:
            return [function_schema("step", "One step.", {"n": {"type": "integer"}}, ["n"])]

        def has_side_effects(self, tool: str) -> bool:
            return False

        def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
            if arguments["n"] % 3 == 0:
                killed.append(_terminate(pg_db, ("taskctx-store", CHECKPOINTER_APPLICATION_NAME)))
            return ToolOutcome("ok", f"step {arguments['n']} done")

    model = ScriptedChatModel(
        script={
            "planner": [plan("steps")],
            "executor": [tool_call("step", {"n": i}, id=f"s-{i}") for i in range(1, n + 1)] + [complete("done")],
            "reviewer": [review("approve", "ok")],
        }
    )
    stores = PgStores(pg_db, check=checked)
    saver, pool = open_postgres_checkpointer(pg_db, serde=checkpoint_serde(), check=checked)
    try:
        g = build_orchestrator(model, tools=Killer(), checkpointer=saver, stores=stores)
        r = run_graph(g, stores, "d1", new_task("twelve steps", "d1"))
        assert r.state.control.status == "completed" and r.state.progress.executor_steps == n
        assert len(killed) == 4 and all(k >= 2 for k in killed), killed  # store + checkpointer each time
        evs = stores.events.read("d1")
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"] == [
            f"s-{i}" for i in range(1, n + 1)
        ]
        assert replay(evs) == TaskContext.model_validate(g.get_state(thread_config("d1")).values)
        if not checked:  # every dead connection was handed out, failed, and the call was retried
            assert stores.retried >= 4 and saver.retried >= 4, (stores.retried, saver.retried, pool.get_stats())
        print(
            f"\n{'checked' if checked else 'unchecked'} pool: {sum(killed)} connections terminated in 4 rounds; "
            f"retried calls: store {stores.retried}, checkpointer {saver.retried}"
        )
    finally:
        pool.close()
        stores.close()
