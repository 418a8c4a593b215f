"""``taskctx fork`` on the demo task: the child starts from the step before the first config patch
with the workspace as it was then (the person's hand edit kept, the task's own later patches
undone), runs on to green, and the parent's log, state, export and workspace are byte-identical
before and after; a child that shares the workspace lists the parent's side effects after the
fork; ``doctor`` names a child whose parent's prefix is gone; Postgres alike."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import TaskContext, replay
from context.pg_store import open_stores
from graphs.cli import app
from graphs.demo.scenario import DEMO_HAND_EDIT, DEMO_TEST_ARGV, SAMPLE_WORKSPACE

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def _tree(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root``."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _snapshot(db: str, out: Path, workspace: Path) -> dict[str, object]:
    """The parent's log (every event as JSON), state, export and workspace, as bytes' hashes."""
    st = open_stores(db)
    try:
        log = [e.to_json() for e in st.events.read("d1")]
    finally:
        st.close()
    state = invoke("inspect", "d1", "--db", db, "--json")
    assert state.exit_code == 0, state.output
    return {"log": log, "state": state.stdout, "export": _tree(out / "d1"), "workspace": _tree(workspace)}


def _demo_then_fork_at_the_step_before_the_first_patch(db: str, tmp_path: Path) -> tuple[Path, dict[str, object]]:
    out = tmp_path / "runs"
    r = invoke("demo", "--db", db, "--out", str(out), "--task-id", "d1", "--approve-all")
    assert r.exit_code == 0, r.output
    assert "task d1: completed; 10 executor steps" in r.stdout
    parent_ws = tmp_path / "ws"
    st = open_stores(db)
    try:
        parent_ws = Path(str(st.tasks.get("d1")["workspace"]))
        calls = [e for e in st.events.read("d1", kinds=["tool.called"])]
        assert [c.payload["call_id"] for c in calls][4:6] == ["d-reread", "d-fix1"]  # step 5 reads, step 6 patches
    finally:
        st.close()
    before = _snapshot(db, out, parent_ws)
    f = invoke(
        "fork", "d1", "--at-step", "5", "--task-id", "c1", "--workspace-at-fork", "--why", "another fix", "--db", db
    )
    assert f.exit_code == 0, f.output
    child_ws = parent_ws.parent / "c1"
    assert f.stdout.splitlines() == [
        "forked d1 at seq 28 into c1 (5 executor steps done; next: executor)",
        f"workspace: {child_ws.resolve()} (a copy; the parent's own changes after the fork undone)",
        "  restored proxy/nginx.conf",
        "  left CHANGELOG.md: the task never saw its bytes before the parent changed it at seq 63; left as it is",
        f"run it on: taskctx resume c1 --db {db}",
    ]
    return child_ws, before


@pytest.mark.slow
def test_fork_the_demo_with_its_workspace_at_the_fork_runs_on_to_green(tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), tmp_path / "runs"
    child_ws, before = _demo_then_fork_at_the_step_before_the_first_patch(db, tmp_path)
    # the file as it was at step 5: the sample's, with the person's hand edit made while paused
    conf = (SAMPLE_WORKSPACE / "proxy" / "nginx.conf").read_bytes() + DEMO_HAND_EDIT.encode()
    assert (child_ws / "proxy" / "nginx.conf").read_bytes() == conf
    st = open_stores(db)
    try:
        assert st.events.read("d1", kinds=["tool.result.received"])[4].payload["reads"] == {
            "proxy/nginx.conf": hashlib.sha256(conf).hexdigest()
        }
        forked = st.events.read("c1", after=28, limit=1)[0]
        assert (forked.kind, forked.payload["parent_task_id"], forked.payload["why"]) == (
            "task.forked",
            "d1",
            "another fix",
        )
        assert forked.payload["restored"] == ["proxy/nginx.conf"] and list(forked.payload["left"]) == ["CHANGELOG.md"]
        spec = st.tasks.get("c1")
        assert spec["workspace"] == str(child_ws.resolve()) and spec["receipts"].endswith("/c1")
    finally:
        st.close()
    insp = invoke("inspect", "c1", "--db", db)
    assert "Lineage\nforked from d1 at seq 28: another fix\n" in insp.stdout
    assert "  restored proxy/nginx.conf\n" in insp.stdout
    assert invoke("doctor", "c1", "--db", db).exit_code == 0
    r = invoke("resume", "c1", "--db", db, "--out", str(out), "--approve-all")
    assert r.exit_code == 0, r.output
    assert "task c1: completed; 10 executor steps" in r.stdout
    assert r.stdout.count("-> approved (--approve-all)") == 2  # the child's own patches, approved as any task's
    st = open_stores(db)
    try:
        log = st.events.read("c1")
        assert [e.seq for e in log] == list(range(1, len(log) + 1))
        own = [e for e in log if e.seq > 28]
        assert [e.kind for e in own][:2] == ["task.forked", "resume.started"]
        assert all(e.causation_id is None or e.causation_id.startswith("c1#") for e in own)
        assert [e.payload["call_id"] for e in own if e.kind == "tool.called"] == [
            "d-fix1",
            "d-test1",
            "d-fix2",
            "d-test2",
            "d-changelog",
        ]
        assert replay(log).control.status == "completed"
    finally:
        st.close()
    green = subprocess.run(DEMO_TEST_ARGV, cwd=child_ws, capture_output=True, text=True, timeout=120)
    assert green.returncode == 0, green.stderr
    assert b"client_max_body_size 10m;" in (child_ws / "proxy" / "nginx.conf").read_bytes()
    parent_ws = child_ws.parent / "d1"
    assert _snapshot(db, out, parent_ws) == before  # the parent: log, state, export and workspace unchanged
    listed = json.loads(invoke("list", "--db", db, "--json").stdout)
    rows = {t["task_id"]: t for t in listed}
    assert (rows["c1"]["parent"], rows["c1"]["fork_seq"]) == ("d1", 28)
    assert rows["d1"]["children"] == [{"task_id": "c1", "fork_seq": 28}]


@pytest.mark.slow
def test_a_fork_that_shares_the_workspace_lists_the_parents_side_effects(tmp_path: Path) -> None:
    db = str(tmp_path / "t.sqlite")
    out = tmp_path / "runs"
    r = invoke("demo", "--db", db, "--out", str(out), "--task-id", "d1", "--approve-all")
    assert r.exit_code == 0, r.output
    mid = invoke("fork", "d1", "--at", "37", "--db", db)
    assert mid.exit_code == 2
    assert mid.stderr.strip() == (
        "error: task 'd1': seq 37 is inside a run of node 'executor' (its events go on to seq 38); fork where a "
        "node run ends: --at 38, or a seq before that run"
    )
    f = invoke("fork", "d1", "--at", "38", "--db", db)
    assert f.exit_code == 0, f.output
    effects = [
        '  seq 41: run_command {"argv": ["python", "-m", "unittest", "-v", "tests/test_upload.py"]} (call d-test1)',
        "  seq 52: proxy/nginx.conf changed by apply_patch (call d-fix2)",
        '  seq 55: run_command {"argv": ["python", "-m", "unittest", "-v", "tests/test_upload.py"]} (call d-test2)',
        "  seq 63: CHANGELOG.md changed by write_file (call d-changelog)",
    ]
    assert f.stdout.splitlines()[1:] == [
        "workspace: shared with d1; these happened in the parent after the fork; not undone:",
        *effects,
        f"run it on: taskctx resume d1-fork-38 --db {db}",
    ]
    insp = invoke("inspect", "d1-fork-38", "--db", db)
    assert "\n".join(["forked from d1 at seq 38", f.stdout.splitlines()[1], *effects]) in insp.stdout
    # a state edit of the child before it runs on: recorded as the user's, the parent untouched
    import graphs.demo  # noqa: F401  (the demo task kind)
    from graphs import open_project

    with open_project(db) as p:
        g = p.task_graph("d1-fork-38")
        g.update_state({"configurable": {"thread_id": "d1-fork-38"}}, {"identity": {"constraints": ["keep 10mb"]}})
        edited = p.stores.events.read("d1-fork-38", after=39)
        assert [(e.seq, e.kind, e.actor) for e in edited] == [(40, "state.edited", "user")]
        assert TaskContext.model_validate(
            g.get_state({"configurable": {"thread_id": "d1-fork-38"}}).values
        ).identity.constraints == ["keep 10mb"]
        assert p.stores.events.last_seq("d1") == 69
        # the config's bytes at the fork gone from the artifact store: the parent's two patches are
        # un-applied instead, last first, each result checked against the sha the change before recorded
        conf = (SAMPLE_WORKSPACE / "proxy" / "nginx.conf").read_bytes() + DEMO_HAND_EDIT.encode()
        p.stores._db.conn.execute("DELETE FROM taskctx_artifacts WHERE digest = ?", (hashlib.sha256(conf).hexdigest(),))
        r2 = p.fork("d1", at_step=5, new_task_id="c2", workspace_at_fork=True, workspace=tmp_path / "c2ws")
        assert (r2.restored, sorted(r2.left)) == (["proxy/nginx.conf"], ["CHANGELOG.md"])
        assert (tmp_path / "c2ws" / "proxy" / "nginx.conf").read_bytes() == conf
        # a file something else changed after the parent's last change: named, left as it is
        ws = Path(str(p.stores.tasks.get("d1")["workspace"]))
        (ws / "proxy" / "nginx.conf").write_bytes(b"# ops rewrote it\n")
        r3 = p.fork("d1", at_step=5, new_task_id="c3", workspace_at_fork=True)
        assert r3.restored == []
        assert r3.left["proxy/nginx.conf"] == (
            "something else changed it after the parent's last change to it (seq 52, sha256 "
            f"{p.stores.events.read('d1', after=51, limit=1)[0].payload['sha256'][:12]}): it holds sha256 "
            f"{hashlib.sha256(b'# ops rewrote it' + bytes([10])).hexdigest()[:12]}; left as it is"
        )
        assert (ws.parent / "c3" / "proxy" / "nginx.conf").read_bytes() == b"# ops rewrote it\n"
        # ... replaced by a directory, or by a link to a file of other bytes: named as such, not "missing"
        (ws / "proxy" / "nginx.conf").unlink()
        (ws / "proxy" / "nginx.conf").mkdir()
        (ws / "proxy" / "nginx.conf" / "site.conf").write_bytes(b"x\n")
        r4 = p.fork("d1", at_step=5, new_task_id="c4", workspace_at_fork=True)
        assert r4.left["proxy/nginx.conf"].endswith("): it is a directory now; left as it is")
        shutil.rmtree(ws / "proxy" / "nginx.conf")
        (ws / "proxy" / "nginx.conf").symlink_to(tmp_path / "nowhere")
        r5 = p.fork("d1", at_step=5, new_task_id="c5", workspace_at_fork=True)
        assert r5.left["proxy/nginx.conf"].endswith("): it is a symbolic link now; left as it is")
        # doctor: the parent's prefix gone is named
        p.stores._db.conn.execute("DELETE FROM taskctx_events WHERE task_id = 'd1' AND seq > 30")
    doc = invoke("doctor", "d1-fork-38", "--db", db)
    assert doc.exit_code == 2, doc.output
    assert (
        "event log: it was forked from task 'd1' at seq 38 and reads its first 38 events from that task, but that "
        "task's log ends at seq 30, before the fork point"
    ) in doc.stdout


@pytest.mark.postgres
def test_fork_the_demo_on_postgres(tmp_path: Path, pg_db: str) -> None:
    child_ws, _ = _demo_then_fork_at_the_step_before_the_first_patch(pg_db, tmp_path)
    conf = (SAMPLE_WORKSPACE / "proxy" / "nginx.conf").read_bytes() + DEMO_HAND_EDIT.encode()
    assert (child_ws / "proxy" / "nginx.conf").read_bytes() == conf
    r = invoke("resume", "c1", "--db", pg_db, "--out", str(tmp_path / "runs"), "--approve-all")
    assert r.exit_code == 0, r.output
    assert "task c1: completed; 10 executor steps" in r.stdout
    st = open_stores(pg_db)
    try:
        assert st.events.lineage("c1").parent == "d1"
        assert st.events.count("c1") == st.events.last_seq("c1")
    finally:
        st.close()
    assert subprocess.run([sys.executable, "-m", "unittest", "tests/test_upload.py"], cwd=child_ws).returncode == 0


def test_doctor_calls_an_unrun_fork_of_a_python_api_task_ok(trajectories_dir: Path, tmp_path: Path) -> None:
    from context import load_trajectory
    from graphs import build_orchestrator, open_project
    from nodes import ReplayChatModel, ReplayTools

    db = str(tmp_path / "t.sqlite")
    traj = load_trajectory(trajectories_dir / "sweagent-pydicom-1458.jsonl")

    def graph(p: Any) -> Any:
        return build_orchestrator(
            ReplayChatModel(trajectory=traj), tools=ReplayTools(traj), checkpointer=p.checkpointer, stores=p.stores
        )

    with open_project(db) as p:
        g = graph(p)
        assert p.run(g, traj.request, task_id="P").state.control.status == "completed"
        assert p.stores.tasks.get("P") is None  # run through the Python API: no registry row
        p.fork("P", at=3, new_task_id="C1", graph=g)
    for tid, n in (("P", 66), ("C1", 4)):
        doc = invoke("doctor", tid, "--db", db)
        assert doc.exit_code == 0, doc.output
        assert doc.stdout.splitlines()[0] == f"task {tid}: ok ({n} events; started through the Python API)"
    with open_project(db) as p:  # and it resumes, as doctor says
        assert p.resume("C1", graph=graph(p)).state.control.status == "completed"


def test_a_fork_of_a_task_without_a_workspace_says_it_has_none(trajectories_dir: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "t.sqlite")
    traj = str(trajectories_dir / "moatless-requests-863.jsonl")
    r = invoke("replay", traj, "--task-id", "r1", "--db", db, "--out", str(tmp_path / "runs"))
    assert r.exit_code == 0, r.output
    f = invoke("fork", "r1", "--at-step", "3", "--task-id", "r1-b", "--db", db)
    assert f.exit_code == 0, f.output
    none = "workspace: none (task r1 has no workspace, so the child shares none and nothing is undone)"
    assert f.stdout.splitlines() == [
        "forked r1 at seq 14 into r1-b (3 executor steps done; next: executor)",
        none,
        f"run it on: taskctx resume r1-b --db {db}",
    ]
    insp = invoke("inspect", "r1-b", "--db", db)
    assert f"forked from r1 at seq 14\n{none}\n" in insp.stdout
    assert "shared with" not in insp.stdout
