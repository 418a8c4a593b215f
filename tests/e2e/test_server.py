"""LangGraph Server: ``langgraph dev`` (in-memory runtime) serving ``langgraph.json``, driven with
``langgraph-sdk`` over loopback.

The server runs from a temporary copy of ``langgraph.json`` (graph paths made absolute), so its
``.langgraph_api/`` state lands in the test's tmp folder; the event log and artifacts go to
``TASKCTX_DB``: a SQLite file, or (when ``TASKCTX_TEST_PG`` is set) a fresh Postgres database.
A thread replays a short recorded trajectory (sweagent-pydicom-1458, 12 steps) whose ``rm``
call needs approval: the run stops at the approval ``interrupt()``, the thread is
``interrupted``, a second run resumes it with ``Command(resume={"action": "approve"})`` and the
task completes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from context import Permissions, TaskContext, replay
from context.pg_store import open_stores

REPO = Path(__file__).resolve().parents[2]
TRAJECTORY = "sweagent-pydicom-1458.jsonl"
LANGGRAPH = Path(sys.executable).parent / "langgraph"


def test_langgraph_json_names_the_factory_and_the_checkpoint_types() -> None:
    from graphs.checkpoint import CHECKPOINT_TYPES

    cfg = json.loads((REPO / "langgraph.json").read_text())
    assert cfg["graphs"] == {"taskctx": "./graphs/server.py:make_graph"}
    assert (REPO / "graphs" / "server.py").is_file()
    serde = cfg["checkpointer"]["serde"]
    # keep the server's msgpack allowlist in step with the TaskContext's classes
    assert sorted(map(tuple, serde["allowed_msgpack_modules"])) == sorted(CHECKPOINT_TYPES)
    assert serde["pickle_fallback"] is False
    if LANGGRAPH.exists():
        r = subprocess.run(
            [str(LANGGRAPH), "validate", "--config", str(REPO / "langgraph.json")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1"},
        )
        assert r.returncode == 0 and "is valid. (1 graph found)" in r.stdout, r.stdout + r.stderr
        assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


def test_factory_builds_the_graph_without_a_checkpointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trajectories_dir: Path
) -> None:
    """In-process: the factory reads its stores from TASKCTX_DB and records the thread's spec."""
    from graphs import server

    db = str(tmp_path / "f.sqlite")
    monkeypatch.setenv("TASKCTX_DB", db)
    g = server.build_server_graph(
        {"configurable": {"thread_id": "th1", "trajectory": str(trajectories_dir / TRAJECTORY)}}
    )
    assert g.checkpointer is None
    assert set(g.nodes) >= {"planner", "executor", "tools", "reviewer", "recovery"}
    st = server.server_stores()
    assert st.path == db
    assert st.tasks.get("th1") == {
        "kind": "replay",
        "source": str((trajectories_dir / TRAJECTORY).resolve()),
        "budget": 8000,
        "checkpoints": "server",  # (the Server's, not in TASKCTX_DB: doctor does not look for them there)
    }
    # a later run of the thread without config rebuilds the same graph
    assert server._spec({"thread_id": "th1"}, st) == st.tasks.get("th1")
    assert server.build_server_graph({"configurable": {"thread_id": "th1", "budget": 9000}}).checkpointer is None
    assert server._spec({"thread_id": "th1", "budget": 9000}, st)["budget"] == 9000
    # a thread that never named a model: readable, but a model call explains the fix
    from context import InvalidInputError

    g3 = server.build_server_graph({"configurable": {"thread_id": "th2"}})
    from graphs import new_task

    with pytest.raises(InvalidInputError, match="names no model"):
        g3.invoke(new_task("x", "th2"), {"configurable": {"thread_id": "th2"}})


# -- the server ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class DevServer:
    def __init__(self, folder: Path, db: str, strict_msgpack: bool = True):
        self.folder, self.db = folder, db
        self.strict_msgpack = strict_msgpack
        self.log = folder / "server.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> None:
        cfg = json.loads((REPO / "langgraph.json").read_text())
        cfg["graphs"] = {
            k: str(REPO / v.split(":")[0].removeprefix("./")) + ":" + v.split(":")[1] for k, v in cfg["graphs"].items()
        }
        cfg["dependencies"] = [str(REPO)]
        (self.folder / "langgraph.json").write_text(json.dumps(cfg, indent=2))
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "LANGSMITH_API_KEY",
                "LANGCHAIN_API_KEY",
                "LANGGRAPH_CLOUD_LICENSE_KEY",
                "LANGSMITH_CONTROL_PLANE_API_KEY",
            )
        }
        env.update(
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            LANGGRAPH_NO_VERSION_CHECK="true",
            LANGSMITH_TRACING="false",
            LANGCHAIN_TRACING_V2="false",
            TASKCTX_DB=self.db,
            LANGGRAPH_STRICT_MSGPACK="true" if self.strict_msgpack else "false",
        )
        last = ""
        for _ in range(3):  # a port taken between _free_port and bind: langgraph dev would pick another
            port = _free_port()
            fh = open(self.log, "w")
            self.proc = subprocess.Popen(
                [
                    str(LANGGRAPH),
                    "dev",
                    "--no-browser",
                    "--no-reload",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--config",
                    str(self.folder / "langgraph.json"),
                ],
                cwd=self.folder,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            fh.close()
            bound = self._wait_ready(port, timeout=60)
            if bound == port:
                self.url = f"http://127.0.0.1:{port}"
                return
            last = f"asked for port {port}, server said {bound}"
            self.stop()
        pytest.fail(f"langgraph dev did not come up on its port ({last}); log:\n{self._log_tail()}")

    def log_text(self) -> str:
        """The whole server log, colours removed."""
        return _ANSI.sub("", self.log.read_text(errors="replace"))

    def _log_tail(self) -> str:
        return _ANSI.sub("", self.log.read_text(errors="replace"))[-4000:] if self.log.exists() else ""

    def _wait_ready(self, port: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {self.proc.returncode}; log:\n{self._log_tail()}")
            m = re.search(r"API: http://127\.0\.0\.1:(\d+)", self._log_tail())
            if m:
                bound = int(m.group(1))
                if bound != port:
                    return bound
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=2) as r:
                        if r.status == 200 and json.loads(r.read()).get("ok") is True:
                            return port
                except OSError:
                    pass
            time.sleep(0.2)
        pytest.fail(f"langgraph dev not ready after {timeout:.0f} s; log:\n{self._log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


@pytest.fixture(params=["sqlite", "sqlite-permissive", pytest.param("postgres", marks=pytest.mark.postgres)])
def dev_server(request: pytest.FixtureRequest, tmp_path: Path, trajectories_dir: Path):
    """``langgraph dev`` on a SQLite or Postgres event log; ``sqlite-permissive``: the server without
    ``LANGGRAPH_STRICT_MSGPACK`` (LangGraph's default, which warns about each unregistered type)."""
    # find_spec, not import: importing langgraph_runtime_inmem creates .langgraph_api/ in the cwd
    for mod in ("langgraph_sdk", "langgraph_runtime_inmem", "langgraph_api"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed: pip install 'langgraph-cli[inmem]' langgraph-sdk (or -e '.[dev]')")
    if not LANGGRAPH.exists():
        pytest.skip(f"no langgraph CLI at {LANGGRAPH}: pip install 'langgraph-cli[inmem]'")
    db = request.getfixturevalue("pg_db") if request.param == "postgres" else str(tmp_path / "server.sqlite")
    srv = DevServer(tmp_path, db, strict_msgpack=request.param != "sqlite-permissive")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
    shutil.rmtree(tmp_path / ".langgraph_api", ignore_errors=True)


def test_server_replay_reaches_an_approval_and_resumes(dev_server: DevServer, trajectories_dir: Path) -> None:
    from langgraph_sdk import get_sync_client

    from graphs import new_task

    client = get_sync_client(url=dev_server.url)
    assert any(a["graph_id"] == "taskctx" for a in client.assistants.search(graph_id="taskctx"))
    thread = client.threads.create(metadata={"test": "approval"})
    tid = thread["thread_id"]
    task = new_task(
        "Make Pixel Representation optional for the pixel data handler",
        tid,
        permissions=Permissions(requires_approval=["rm"]),
    )
    config = {"configurable": {"trajectory": str(trajectories_dir / TRAJECTORY)}}

    t0 = time.perf_counter()
    out: Any = client.runs.wait(tid, "taskctx", input=task.model_dump(mode="json"), config=config)
    first_run = time.perf_counter() - t0
    # stopped at the approval interrupt of the tool node
    [intr] = out["__interrupt__"]
    assert intr["value"]["type"] == "approval"
    assert {k: intr["value"][k] for k in ("task_id", "call_id", "tool", "arguments")} == {
        "task_id": tid,
        "call_id": "rec-11",
        "tool": "rm",
        "arguments": {"command": "rm reproduce_bug.py"},
    }
    assert client.threads.get(tid)["status"] == "interrupted"
    snap = client.threads.get_state(tid)
    assert snap["next"] == ["tools"]
    assert [i["value"]["call_id"] for t in snap["tasks"] for i in t["interrupts"]] == ["rec-11"]
    stores = open_stores(dev_server.db)
    try:
        evs = stores.events.read(tid)
        assert [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"] == [
            f"rec-{i}" for i in range(1, 11)
        ]
        assert evs[-1].kind == "permission.requested" and evs[-1].payload["call_id"] == "rec-11"

        # resume with a command; the thread's first run recorded which trajectory it replays
        t0 = time.perf_counter()
        client.runs.wait(tid, "taskctx", command={"resume": {"action": "approve"}})
        resume_run = time.perf_counter() - t0
        final = client.threads.get_state(tid)
        assert final["next"] == [] and client.threads.get(tid)["status"] == "idle"
        ctx = TaskContext.model_validate(final["values"])
        assert ctx.control.status == "completed" and ctx.progress.executor_steps == 12
        assert ctx.identity.task_id == tid and ctx.permissions.requires_approval == ["rm"]

        evs = stores.events.read(tid)
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"] == [
            f"rec-{i}" for i in range(1, 13)
        ]
        granted = [e for e in evs if e.kind == "permission.granted"]
        assert [(e.payload["call_id"], e.actor) for e in granted if e.payload["call_id"] == "rec-11"] == [
            ("rec-11", "user")
        ]
        assert [e.kind for e in evs].count("permission.requested") == 1
        assert evs[-1].kind == "task.completed"
        assert replay(evs) == ctx  # the server's checkpointed state is the log folded
        history = client.threads.get_history(tid, limit=500)
        assert len(history) > 30
    finally:
        stores.close()
    # the resume loaded the TaskContext from the server's checkpointer: every class of it is known
    log = dev_server.log_text()
    assert "Background run succeeded" in log
    assert [ln for ln in log.splitlines() if "unregistered type" in ln or "Blocked deserialization" in ln] == []
    print(
        f"\nserver ({'postgres' if dev_server.db.startswith('postgres') else 'sqlite'}): "
        f"first run to the interrupt {first_run:.2f} s, resume to the end {resume_run:.2f} s, "
        f"{len(evs)} events, {len(history)} checkpoints"
    )


def test_a_server_thread_loads_the_memories_of_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trajectories_dir: Path
) -> None:
    """Like the CLI: a memory confirmed in TASKCTX_DB (``taskctx memory confirm --db``) is loaded
    by a new thread's task whose request it is relevant to."""
    from graphs import new_task, open_project, server
    from graphs.memory_store import confirm_memory

    db = str(tmp_path / "m.sqlite")
    with open_project(db) as p:
        rec = confirm_memory(p, "The staging database is pg-staging-1 on port 5433", subject="staging database")
    monkeypatch.setenv("TASKCTX_DB", db)
    g = server.build_server_graph(
        {"configurable": {"thread_id": "th1", "trajectory": str(trajectories_dir / TRAJECTORY)}}
    )
    for _ in g.stream(
        new_task("Connect the report job to the staging database.", "th1"), {"configurable": {"thread_id": "th1"}}
    ):
        break  # the planner ran: the task has loaded its memories
    events = server.server_stores().events.read("th1")
    assert [e.kind for e in events[:2]] == ["task.created", "memory.loaded"]
    assert [m["key"] for m in events[1].payload["memories"]] == [rec.key]


def test_server_streams_messages_tuple_as_runs_wait_runs(dev_server: DevServer, trajectories_dir: Path) -> None:
    """What LangGraph Studio does: ``stream_mode=["messages-tuple", "updates"]``. The run completes
    as ``runs.wait`` does (the same log and state, ids and timestamps aside), and the replay
    model's tokens arrive as they come, tagged with the node, role and call."""
    from langgraph_sdk import get_sync_client
    from run_compare import comparable

    from context import load_trajectory
    from graphs import new_task

    client = get_sync_client(url=dev_server.url)
    config = {"configurable": {"trajectory": str(trajectories_dir / TRAJECTORY)}}
    request = "Make Pixel Representation optional for the pixel data handler"
    waited, streamed = client.threads.create()["thread_id"], client.threads.create()["thread_id"]
    client.runs.wait(waited, "taskctx", input=new_task(request, waited).model_dump(mode="json"), config=config)
    parts = list(
        client.runs.stream(
            streamed,
            "taskctx",
            input=new_task(request, streamed).model_dump(mode="json"),
            config=config,
            stream_mode=["messages-tuple", "updates"],
        )
    )
    assert client.threads.get(streamed)["status"] == "idle"
    stores = open_stores(dev_server.db)
    try:
        runs = [comparable(stores.events.read(t), client.threads.get_state(t)["values"]) for t in (waited, streamed)]
    finally:
        stores.close()
    assert runs[1][1]["control"]["status"] == "completed"
    assert runs[1] == runs[0]
    messages = [p.data for p in parts if p.event == "messages"]
    calls: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for chunk, meta in messages:
        assert meta["langgraph_node"] == meta["role"]
        calls.setdefault((meta["role"], meta["role_call"]), []).append(chunk)
    n_calls = sum(1 for e in runs[1][0] if e["kind"] == "context.built")
    assert len(calls) == n_calls and len(messages) > 2 * n_calls
    thought = load_trajectory(trajectories_dir / TRAJECTORY).steps[0].thought
    first = [c["content"] for c in calls[("executor", 1)] if c["content"]]
    assert len(first) > 1 and "".join(first) == thought
    nodes = [n for p in parts if p.event == "updates" for n in p.data]
    assert nodes[0] == "planner" and nodes[-1] == "reviewer" and nodes.count("tools") == 12


@pytest.mark.parametrize("dev_server", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_server_history_and_a_fork_from_an_earlier_step(dev_server: DevServer, trajectories_dir: Path) -> None:
    """What LangGraph Studio does: the thread's history, a state at an earlier step, "Re-run from
    here" (``runs.wait`` with a ``checkpoint_id``) and "Fork" (``update_state`` with one, then a
    run of the checkpoint it returned on the same thread): each forks the task into a child, which
    completes; the parent is left as it was."""
    from langgraph_sdk import get_sync_client

    from graphs import new_task

    client = get_sync_client(url=dev_server.url)
    config = {"configurable": {"trajectory": str(trajectories_dir / TRAJECTORY)}}
    tid = client.threads.create()["thread_id"]
    task = new_task("Make Pixel Representation optional for the pixel data handler", tid)
    client.runs.wait(tid, "taskctx", input=task.model_dump(mode="json"), config=config)
    history = client.threads.get_history(tid, limit=500)
    # the step after executor step 3's tool result (history is newest first)
    past = [h for h in history if h["metadata"].get("taskctx_node") == "tools"][-3]
    seq, cid = past["metadata"]["taskctx_seq"], past["checkpoint"]["checkpoint_id"]
    assert past["next"] == ["executor"] or past["next"] == ["recovery"]
    assert client.threads.get_state(tid, checkpoint_id=cid)["values"]["events"]["cursor"] == seq
    stores = open_stores(dev_server.db)
    try:
        parent = [e.id for e in stores.events.read(tid)]
        head = client.threads.get_state(tid)["values"]
        assert seq == [e.seq for e in stores.events.read(tid) if e.kind == "tool.result.received"][2]
        # "Re-run from here", into a thread made for the child
        child = client.threads.create(graph_id="taskctx")["thread_id"]
        out: Any = client.runs.wait(
            tid, "taskctx", input=None, checkpoint_id=cid, config={"configurable": {"fork_task_id": child}}
        )
        assert out["identity"]["task_id"] == child and out["control"]["status"] == "completed"
        state = client.threads.get_state(child)
        assert state["values"]["control"]["status"] == "completed" and state["next"] == []
        events = stores.events.read(child)
        assert [e.id for e in events[:seq]] == parent[:seq]
        assert events[seq].kind == "task.forked" and events[seq].payload["parent_task_id"] == tid
        assert [e.kind for e in events].count("tool.result.received") == 12  # 3 in the prefix, 9 its own
        assert replay(events) == TaskContext.model_validate(state["values"])
        # a child the Server could not open as a thread: refused, nothing forked
        with pytest.raises(Exception, match=r"InvalidInputError: configurable.fork_task_id 'x1' is not a UUID"):
            client.runs.wait(
                tid, "taskctx", input=None, checkpoint_id=cid, config={"configurable": {"fork_task_id": "x1"}}
            )
        assert stores.events.last_seq("x1") == 0 and stores.tasks.get("x1") is None
        # "Fork": an edit at that step, recorded on the next child
        # (Studio's editor sends the whole state back, one field changed)
        whole = client.threads.get_state(tid, checkpoint_id=cid)["values"]
        whole["identity"]["non_goals"] = ["speed"]
        resp = client.threads.update_state(tid, whole, checkpoint_id=cid)
        second = resp["checkpoint"]["thread_id"]
        assert second == str(uuid.uuid5(uuid.UUID(tid), f"{tid}-fork-{seq}"))
        edited = stores.events.read(second)
        assert [e.kind for e in edited[seq:]] == ["task.forked", "state.edited"]
        assert edited[seq + 1].payload["changes"] == {"identity": {"non_goals": ["speed"]}}
        # ... and Studio runs the checkpoint it got back on the thread it edited: the child goes on
        out = client.runs.wait(tid, "taskctx", input=None, checkpoint=resp["checkpoint"])
        assert out["identity"]["task_id"] == second and out["control"]["status"] == "completed"
        assert out["identity"]["non_goals"] == ["speed"]
        client.threads.create(thread_id=second, graph_id="taskctx", if_exists="do_nothing")
        assert client.threads.get_state(second)["values"] == out
        edited = stores.events.read(second)
        assert [e.kind for e in edited[seq : seq + 3]] == ["task.forked", "state.edited", "resume.started"]
        assert replay(edited) == TaskContext.model_validate(out)
        # the parent: its log and state as they were
        assert [e.id for e in stores.events.read(tid)] == parent
        assert client.threads.get_state(tid)["values"] == head
        counts = {t: stores.events.last_seq(t) for t in (tid, child, second)}
    finally:
        stores.close()
    assert "Background run succeeded" in dev_server.log_text()
    _doctor_and_resume_of_server_tasks(dev_server.db, counts)


def _doctor_and_resume_of_server_tasks(db: str, counts: dict[str, int]) -> None:
    """``taskctx doctor --db $TASKCTX_DB`` finds the Server's tasks sound (their checkpoints are
    the Server's), and ``taskctx resume`` of one says where it runs, not that it is damaged."""
    from typer.testing import CliRunner

    from graphs.cli import app

    r = CliRunner().invoke(app, ["doctor", "--db", db])
    note = "run by LangGraph Server, whose checkpoints are not in this database: not checked"
    assert r.exit_code == 0, r.output
    assert sorted(r.output.splitlines()) == sorted(f"task {t}: ok ({n} events; {note})" for t, n in counts.items())
    tid = next(iter(counts))
    r = CliRunner().invoke(app, ["resume", tid, "--db", db])
    assert r.exit_code != 0 and "damaged" not in r.output, r.output
    assert f"task '{tid}' runs on LangGraph Server: its checkpoints are the Server's" in " ".join(r.output.split())
