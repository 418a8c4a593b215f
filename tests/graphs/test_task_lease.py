"""One writer per task: a second resume of a running task is refused at once, and a holder that
died is taken over (only then is its marked call treated as cut off).

Two processes resume one paused task; the task's only tool call appends a line to a file each
time it runs and then holds on until the test lets it go (so the other process always arrives
while the command runs, whatever the machine's speed). The file counts the runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from context import LeaseHeldError
from context.lease import LeaseHolder, TaskLeases, process_started
from context.sqlite_store import SqliteStores

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    import nodes
    from context import LeaseHeldError, Permissions
    from graphs.project import open_project
    from nodes.testing import complete, plan, review, tool_call

    db, count_file, release, mode = sys.argv[1:5]

    class Count:
        def schemas(self):
            return [nodes.function_schema("count", "Count a run.", {"n": {"type": "string"}}, ["n"])]

        def has_side_effects(self, tool):
            return True

        def execute(self, call_id, tool, arguments):
            with open(count_file, "a") as f:
                f.write(f"{os.getpid()}\\n")
            if mode == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            for _ in range(600):  # held until the test lets go (60 s at most)
                if os.path.exists(release):
                    break
                time.sleep(0.1)
            return "counted"

    model = nodes.ScriptedChatModel(script={
        "planner": [plan("Count once")],
        "executor": [tool_call("count", {"n": "1"}, id="c1"), complete("counted once")],
        "reviewer": [review("approve", "counted")],
    })
    project = open_project(db)
    g = project.graph(model, tools=Count())
    if mode == "setup":
        r = project.run(g, "Count once.", task_id="r1", permissions=Permissions(requires_approval=["count"]))
        print(json.dumps({"waiting": r.waiting is not None}))
        sys.exit(0)
    print("ready", flush=True)
    try:
        r = project.resume("r1", graph=g, approvals=lambda req: {"action": "approve", "seen": req["reason"]})
    except LeaseHeldError as exc:
        print(str(exc))
        sys.exit(4)
    print(json.dumps({"status": r.state.control.status}))
    """
)


def _child(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    args = [
        sys.executable,
        "-c",
        CHILD,
        str(tmp_path / "t.sqlite"),
        str(tmp_path / "count"),
        str(tmp_path / "go"),
        mode,
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)


def _paused_task(tmp_path: Path) -> None:
    setup = _child(tmp_path, "setup")
    out, errs = setup.communicate(timeout=300)
    assert setup.returncode == 0 and json.loads(out.splitlines()[-1]) == {"waiting": True}, out + errs


def _runs(tmp_path: Path) -> list[str]:
    f = tmp_path / "count"
    return f.read_text().split() if f.exists() else []


@pytest.mark.parametrize("offset", [0.0, 0.3, 0.6, 1.0])
def test_two_resumes_of_a_running_command_run_it_once_and_the_loser_gets_one_line(
    tmp_path: Path, offset: float
) -> None:
    _paused_task(tmp_path)
    a = _child(tmp_path, "resume")
    assert a.stdout is not None and a.stdout.readline() == "ready\n"
    time.sleep(offset)  # the second resume starts this long after the first is ready to resume
    b = _child(tmp_path, "resume")
    procs = {a.pid: a, b.pid: b}
    loser = None
    while loser is None:  # the first to end is the loser (the winner's command holds on until released)
        loser = next((p for p in procs.values() if p.poll() is not None), None)
        time.sleep(0.05)
    (tmp_path / "go").touch()
    winner = next(p for p in procs.values() if p is not loser)
    w_out, w_err = winner.communicate(timeout=300)
    l_out, l_err = loser.communicate(timeout=60)
    assert winner.returncode == 0, w_out + w_err
    assert json.loads(w_out.splitlines()[-1]) == {"status": "completed"}
    assert loser.returncode == 4, l_out + l_err
    lines = [x for x in l_out.splitlines() if x != "ready"]
    assert len(lines) == 1 and re.fullmatch(
        rf"task 'r1' is being run by another process, pid {winner.pid} on host {re.escape(socket.gethostname())} "
        r"\(last heartbeat \d+ s ago\); wait for it to end or stop it, then run the command again "
        r"\(a holder that ended is taken over at once\)",
        lines[0],
    ), lines
    assert _runs(tmp_path) == [str(winner.pid)]  # the command ran once, in the winner
    stores = SqliteStores(tmp_path / "t.sqlite")
    events = stores.events.read("r1")
    kinds = [e.kind for e in events]
    assert kinds.count("resume.started") == 1 and kinds.count("permission.granted") == 1
    assert [e.payload["call_id"] for e in events if e.kind == "tool.result.received"] == ["c1"]
    assert stores.leases.holder("r1") is None  # released at the end
    stores.close()


def test_a_holder_killed_mid_command_is_taken_over_and_its_call_asked_as_cut_off(tmp_path: Path) -> None:
    _paused_task(tmp_path)
    a = _child(tmp_path, "die")
    a.communicate(timeout=300)
    assert a.returncode == -signal.SIGKILL
    stores = SqliteStores(tmp_path / "t.sqlite")
    held = stores.leases.holder("r1")
    assert held is not None and held.pid == a.pid  # the dead process's row is still there
    stores.close()
    (tmp_path / "go").touch()
    b = _child(tmp_path, "resume")
    out, errs = b.communicate(timeout=300)
    assert b.returncode == 0, out + errs
    assert _runs(tmp_path) == [str(a.pid), str(b.pid)]  # asked (approved by the script), then run again
    stores = SqliteStores(tmp_path / "t.sqlite")
    asked = [e.payload["reason"] for e in stores.events.read("r1") if e.kind == "permission.requested"]
    assert len(asked) == 2 and asked[1].startswith("interrupted before its result was recorded")
    assert stores.leases.holder("r1") is None
    stores.close()


def test_a_holder_stopped_mid_command_and_taken_over_is_told_what_it_had_recorded(tmp_path: Path) -> None:
    """SIGSTOP the holder while its command runs, give its row to another host's process (as that
    host takes an expired lease over), SIGCONT: its next append is refused, in one line naming what
    it had recorded and the holder now; nothing more is written."""
    _paused_task(tmp_path)
    a = _child(tmp_path, "resume")
    assert a.stdout is not None and a.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 120
    while not _runs(tmp_path):  # the command runs
        assert time.monotonic() < deadline and a.poll() is None, a.communicate()
        time.sleep(0.05)
    os.kill(a.pid, signal.SIGSTOP)
    stores = SqliteStores(tmp_path / "t.sqlite")
    try:
        before = stores.events.read("r1")
        now = time.time()
        with stores._connect() as conn:
            conn.execute(
                "UPDATE taskctx_leases SET host = 'elsewhere', pid = 4242, started = '', token = 'thief', "
                "heartbeat = ?, expires = ? WHERE task_id = 'r1'",
                (now, now + 60),
            )
    finally:
        (tmp_path / "go").touch()
        os.kill(a.pid, signal.SIGCONT)
    out, errs = a.communicate(timeout=120)
    assert a.returncode == 4, out + errs
    lines = [x for x in out.splitlines() if x != "ready"]
    last = before[-1]
    assert last.kind == "permission.granted"
    assert len(lines) == 1 and re.fullmatch(
        re.escape(f"task 'r1': this process (pid {a.pid}) lost its lease on the task while running it: ")
        + r"pid 4242 on host elsewhere \(last heartbeat \d+ s ago\) has the task now; "
        + re.escape(
            f"what it recorded stays: events up to seq {last.seq} (permission.granted, plan step s1); this process "
            "wrote no event after that (this append was refused); let the other holder go on with the task; when it "
            "has ended, resume the task to continue"
        ),
        lines[0],
    ), lines
    assert [e.id for e in stores.events.read("r1")] == [e.id for e in before]  # nothing written after the loss
    assert _runs(tmp_path) == [str(a.pid)]
    held = stores.leases.holder("r1")
    assert held is not None and held.token == "thief"  # the new holder's row is left alone
    stores.close()


def _row(stores: SqliteStores, holder: LeaseHolder) -> None:
    with stores._connect() as conn:
        conn.execute(
            "INSERT INTO taskctx_leases VALUES (?,?,?,?,?,?,?)",
            (holder.task_id, holder.host, holder.pid, holder.started, holder.token, holder.heartbeat, holder.expires),
        )


def test_lease_rules(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "t.sqlite")
    now = time.time()
    me = socket.gethostname()
    # a live holder on this host (this test's own process, another token): refused, and so are appends
    _row(stores, LeaseHolder("live", me, os.getpid(), process_started(os.getpid()), "other", now, now + 60))
    with pytest.raises(
        LeaseHeldError,
        match=rf"^task 'live' is being run by another run in this process, this "
        rf"process \(pid {os.getpid()}, through another store on the same database, lease token other,",
    ):
        with stores.leases.hold("live"):
            pass
    from context import new_event
    from context.events import TaskCreated

    e = new_event("task.created", TaskCreated(task_id="live", original_request="x"), actor="user")
    with pytest.raises(LeaseHeldError):
        stores.events.append("live", [e])
    assert stores.events.last_seq("live") == 0
    # a process that ended (a pid whose start differs) on this host: taken over
    _row(stores, LeaseHolder("dead", me, os.getpid(), "1", "gone", now, now + 60))
    # another host's holder whose lease expired: taken over; one not expired: refused
    _row(stores, LeaseHolder("lapsed", "elsewhere", 1, "", "old", now - 120, now - 60))
    _row(stores, LeaseHolder("remote", "elsewhere", 1, "", "rem", now, now + 60))
    for task in ("dead", "lapsed"):
        with stores.leases.hold(task) as owner:
            got = stores.leases.holder(task)
            assert got is not None and got.pid == os.getpid() and got.token == stores.leases.token(task)
            with stores.leases.hold(task, owner) as again:  # re-entrant for the run that holds it
                assert again == owner
            with pytest.raises(LeaseHeldError, match=rf"^task '{task}' is being run by another run in this process, "):
                with stores.leases.hold(task):  # another run through the same store
                    pass
            assert stores.leases.holder(task) == got
        assert stores.leases.holder(task) is None
    with pytest.raises(LeaseHeldError, match="^task 'remote' is being run by another process, pid 1 on host elsewhere"):
        with stores.leases.hold("remote"):
            pass
    stores.close()


def test_a_live_holder_on_this_host_is_not_taken_over_however_old_its_lease(tmp_path: Path) -> None:
    """A clock step past the lease, or a holder paused (SIGSTOP) past it, is no end of the holder."""
    stores = SqliteStores(tmp_path / "t.sqlite")
    now, me = time.time(), socket.gethostname()
    other = subprocess.Popen(["sleep", "60"])
    try:
        started = process_started(other.pid)
        _row(stores, LeaseHolder("paused", me, other.pid, started, "other", now - 3660, now - 3600))
        with pytest.raises(
            LeaseHeldError, match=rf"^task 'paused' is being run by another process, pid {other.pid} on host "
        ):
            with stores.leases.hold("paused"):
                pass
        assert stores.leases.holder("paused") == LeaseHolder(
            "paused", me, other.pid, started, "other", now - 3660, now - 3600
        )  # not taken over
        # when that process has ended, the same row is taken over at once
        other.kill()
        other.wait()
        with stores.leases.hold("paused"):
            assert stores.leases.holder("paused").pid == os.getpid()  # type: ignore[union-attr]
        # another host's holder: its expiry decides
        assert LeaseHolder("x", "elsewhere", other.pid, started, "t", now - 120, now - 60).gone(now)
        assert not LeaseHolder("x", "elsewhere", other.pid, started, "t", now, now + 60).gone(now)
    finally:
        other.kill()
        other.wait()
        stores.close()


def test_the_heartbeat_renews_and_a_lost_lease_is_noticed(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "t.sqlite")
    leases = TaskLeases(stores._connect, "sqlite", ttl=5.0, heartbeat=0.05)
    with leases.hold("hb"):
        first = leases.holder("hb")
        assert first is not None
        deadline = time.monotonic() + 30
        while (now := leases.holder("hb")) is not None and now.heartbeat == first.heartbeat:
            assert time.monotonic() < deadline, "no heartbeat in 30 s"
            time.sleep(0.05)
        assert now is not None and now.expires == pytest.approx(now.heartbeat + 5.0)
        with stores._connect() as conn:  # another taker took it over
            conn.execute("UPDATE taskctx_leases SET token = 'thief' WHERE task_id = 'hb'")
        held = leases._held["hb"]
        assert held.thread is not None
        held.thread.join(timeout=30)
        assert held.lost
    assert leases.holder("hb") is not None  # the thief's row stays
    stores.close()


@pytest.mark.parametrize("stores", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_a_second_holder_of_one_database_is_refused_and_appends_are_fenced(stores) -> None:
    """SQLite and Postgres alike: a second store object's leases (another TaskLeases of the same
    database, in this process) are refused while the first holds, naming this process; released,
    it may take it."""
    from context import new_event
    from context.events import TaskCreated

    other = TaskLeases(stores.leases._connect, stores.leases._dialect)
    with stores.leases.hold("p1"):
        held = stores.leases.holder("p1")
        assert held is not None and held.pid == os.getpid() and held.token == stores.leases.token("p1")
        assert held.expires == pytest.approx(held.heartbeat + 60.0) and held.this_process()
        with pytest.raises(LeaseHeldError) as ei:
            with other.hold("p1"):
                pass
        assert ei.value.same_process and ei.value.pid == os.getpid()
        assert re.fullmatch(
            rf"task 'p1' is being run by another run in this process, this process \(pid {os.getpid()}, through "
            rf"another store on the same database, lease token {held.token[:8]}, last heartbeat \d+ s ago\): each "
            r"store object \(SqliteStores, PgStores, open_project\) takes the task's lease on its own; run the task "
            r"through one store \(one project\), one run at a time, or wait for the other run to end",
            str(ei.value),
        )
        e = new_event("task.created", TaskCreated(task_id="p1", original_request="x"), actor="user")
        assert [x.seq for x in stores.events.append("p1", [e])] == [1]  # the holder writes
    assert stores.leases.holder("p1") is None
    with other.hold("p1"):
        assert stores.leases.holder("p1") is not None
        e2 = new_event("task.created", TaskCreated(task_id="p2", original_request="y"), actor="user")
        with pytest.raises(LeaseHeldError):  # a writer without the lease is fenced off
            stores.events.append("p1", [e2.model_copy(update={"seq": 2})])
    assert stores.events.last_seq("p1") == 1


def test_a_sequence_conflict_names_the_writer_in_this_process_or_another(tmp_path: Path) -> None:
    """The conflict's message says whether the log's last events came from this store object (two
    runs at once), another store of this process, or another process."""
    from context import SequenceConflictError, new_event
    from context.events import TaskCreated

    db = tmp_path / "w.sqlite"
    a, b = SqliteStores(db), SqliteStores(db)

    def created(seq: int) -> Any:
        e = new_event("task.created", TaskCreated(task_id="w1", original_request="x"), actor="user")
        return e.model_copy(update={"seq": seq})

    a.events.append("w1", [created(1)])
    tail = "is writing this task: run one writer per thread_id"
    head = "task 'w1': event task.created has seq 1 but the log expects 2; "
    with pytest.raises(SequenceConflictError) as ei:
        a.events.append("w1", [created(1)])
    assert str(ei.value) == (
        f"{head}another run in this process (on the same store: e.g. two invoke/ainvoke of one thread_id at once) "
        f"{tail}"
    )
    with pytest.raises(SequenceConflictError) as ei:
        b.events.append("w1", [created(1)])
    assert str(ei.value) == f"{head}another store of this process on the same database {tail}"
    subprocess.run(  # another process appends seq 2
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            from context.sqlite_store import SqliteStores
            from context import new_event
            from context.events import TaskCreated
            s = SqliteStores({str(db)!r})
            s.events.append("w1", [new_event("task.created", TaskCreated(task_id="w1", original_request="y"), actor="user")])
            """),
        ],
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    with pytest.raises(SequenceConflictError) as ei:
        a.events.append("w1", [created(2)])
    assert str(ei.value) == f"task 'w1': event task.created has seq 2 but the log expects 3; another process {tail}"
    a.close()
    b.close()
