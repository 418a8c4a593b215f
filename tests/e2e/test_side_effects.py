"""Side-effect-safe resume: the process is killed (SIGKILL) between ``tool.called`` and
``tool.result.received`` of a ``write_file`` and of a ``run_command`` of the demo; after
``taskctx resume`` each side effect happened exactly once.

The child runs the real demo (scripted policy, real workspace tools on a copy of the sample) and
kills itself inside the tool call, before or after the tool did its work. Exactly once is
measured on the workspace itself: the CHANGELOG's bytes and mtime, and a line the sample's test
package appends to ``runs.log`` each time the tests run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from context import replay
from context.sqlite_store import SqliteStores
from nodes import ToolOutcome, WorkspaceTools

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from graphs.demo import DEMO_REQUEST, copy_sample, demo_model, demo_permissions, demo_tools
    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.project import open_project
    from graphs.runner import run_with_approvals
    from nodes import WorkspaceTools

    db, tid, ws, receipts, kill_call, when = sys.argv[1:7]
    needs_approval = [t for t in (sys.argv[7] if len(sys.argv) > 7 else "").split(",") if t]

    class Killing(WorkspaceTools):
        def execute(self, call_id, tool, arguments, scopes=()):
            if call_id == kill_call and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            out = super().execute(call_id, tool, arguments, scopes)
            if call_id == kill_call and when == "mid":  # as if killed while the command still ran
                self.receipt(call_id).write_text('{"call_id": "%s", "status": "started"}' % call_id)
            if call_id == kill_call and when in ("after", "mid"):
                os.kill(os.getpid(), signal.SIGKILL)
            return out

    project = open_project(db)
    copy_sample(ws)
    with open(os.path.join(ws, "tests", "__init__.py"), "a") as fh:  # count test runs
        fh.write("import os\\nwith open(os.path.join(os.path.dirname(__file__), '..', 'runs.log'), 'a') as _f:\\n"
                 "    _f.write('run\\\\n')\\n")
    project.stores.tasks.register(tid, {"kind": "demo", "budget": 8000, "workspace": ws, "receipts": receipts})
    g = build_orchestrator(demo_model(), tools=demo_tools(ws, receipts, cls=Killing),
                           checkpointer=project.checkpointer, stores=project.stores)
    perms = demo_permissions().model_copy(update={"requires_approval": needs_approval})
    run_with_approvals(g, project.stores, tid, new_task(DEMO_REQUEST, tid, permissions=perms),
                       answer=lambda req: {"action": "approve"})
    print("finished without being killed")
    """
)


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
    "call,when", [("d-changelog", "after"), ("d-test2", "after"), ("d-changelog", "before"), ("d-test2", "before")]
)
def test_sigkill_inside_a_side_effect_then_resume_runs_it_exactly_once(tmp_path: Path, call: str, when: str) -> None:
    db, ws, receipts = tmp_path / "t.sqlite", tmp_path / "ws", tmp_path / "receipts" / "k1"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), "k1", str(ws), str(receipts), call, when],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr

    stores = SqliteStores(db)
    before = stores.events.read("k1")
    kinds = [e.kind for e in before]
    assert kinds[-1] == "permission.granted" and before[-1].payload["call_id"] == call  # the marker, no result
    assert not any(e.kind == "tool.result.received" and e.payload["call_id"] == call for e in before)
    changelog = ws / "CHANGELOG.md"
    stat_before = changelog.stat().st_mtime_ns
    runs_before = (ws / "runs.log").read_text().count("run\n")
    stores.close()

    resumed = _taskctx("resume", "k1", "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "task k1: completed; 10 executor steps" in resumed.stdout, resumed.stdout

    stores = SqliteStores(db)
    events = stores.events.read("k1")
    assert [e.id for e in events[: len(before)]] == [e.id for e in before]  # nothing rewritten
    results = Counter(e.payload["call_id"] for e in events if e.kind == "tool.result.received")
    assert all(n == 1 for n in results.values()) and len(results) == 10, (
        results
    )  # the demo re-reads the config (d-reread)
    markers = Counter(e.payload["call_id"] for e in events if e.kind == "permission.granted")
    assert markers[call] == 1  # the re-run did not grant (start) it a second time
    assert [e.kind for e in events].count("resume.started") == 1
    result = next(e for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == call)
    summary = result.payload["result_summary"]
    ctx = replay(events)
    assert ctx.control.status == "completed"
    # exactly once, measured on the workspace
    runs = (ws / "runs.log").read_text().count("run\n")
    assert runs == 2, runs  # d-test1 and d-test2, each once
    assert "## Unreleased\n\n- Fix HTTP 413" in changelog.read_text()
    assert [e.payload["path"] for e in events if e.kind == "file.modified"].count("CHANGELOG.md") == 1
    if when == "after":
        assert summary.startswith("[recovered after an interruption:"), summary
        if call == "d-changelog":
            assert changelog.stat().st_mtime_ns == stat_before  # not written again
        else:
            assert runs_before == 2  # it had run before the kill; resume reused its receipt
            assert result.payload["status"] == "ok" and "OK" in summary
    else:
        assert summary.startswith("[run again after an interruption:"), summary
        if call == "d-test2":
            assert runs_before == 1
    green = subprocess.run(
        [sys.executable, "-m", "unittest", "tests/test_upload.py"], cwd=ws, capture_output=True, text=True, timeout=60
    )
    assert green.returncode == 0, green.stderr


def test_recover_decisions(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "x.txt").write_text("old\n")
    t = WorkspaceTools(root, receipts_dir=tmp_path / "r")
    w = {"path": "app/x.txt", "content": "new\n"}
    assert t.recover("c1", "write_file", w).state == "retry"
    (root / "app" / "x.txt").write_text("new\n")
    done = t.recover("c1", "write_file", w)
    assert done.state == "done" and isinstance(done.outcome, ToolOutcome) and done.outcome.modified == "app/x.txt"
    patch = "--- a/app/x.txt\n+++ b/app/x.txt\n@@ -1 +1 @@\n-new\n+newer\n"
    assert t.recover("c2", "apply_patch", {"patch": patch}).state == "retry"
    (root / "app" / "x.txt").write_text("newer\n")
    assert t.recover("c2", "apply_patch", {"patch": patch}).state == "done"
    (root / "app" / "x.txt").write_text("something else\n")
    assert t.recover("c2", "apply_patch", {"patch": patch}).state == "ask"
    cmd = {"argv": ["ls", "app"]}
    assert t.recover("c3", "run_command", cmd).state == "retry"  # never started
    t.receipts_dir.mkdir(parents=True, exist_ok=True)
    t.receipt("c3").write_text(json.dumps({"call_id": "c3", "status": "started"}))
    asked = t.recover("c3", "run_command", cmd)
    assert asked.state == "ask" and "cut off" in asked.note
    out = t.execute("c4", "run_command", cmd)
    fin = t.recover("c4", "run_command", cmd)
    assert fin.state == "done" and fin.outcome is not None and fin.outcome.output == out.output


@pytest.mark.slow
def test_command_cut_off_mid_run_asks_before_running_again(tmp_path: Path) -> None:
    """A command whose receipt says it started but never finished may have had effects: resume
    puts it up for approval instead of re-running it; approving runs it again."""
    db, ws, receipts = tmp_path / "t.sqlite", tmp_path / "ws", tmp_path / "receipts" / "k2"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), "k2", str(ws), str(receipts), "d-test2", "after"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    receipt = WorkspaceTools(ws, receipts_dir=receipts).receipt("d-test2")
    receipt.write_text(json.dumps({"call_id": "d-test2", "status": "started"}))  # as if killed mid-run
    resumed = _taskctx("resume", "k2", "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "waiting for approval of run_command (call d-test2, high risk)" in resumed.stdout
    assert (ws / "runs.log").read_text().count("run\n") == 2  # not re-run on its own
    stores = SqliteStores(db)
    req = [e for e in stores.events.read("k2") if e.kind == "permission.requested"][-1]
    assert "cut off while running" in req.payload["reason"]
    stores.close()
    ok = _taskctx("approve", "k2", "--request", req.id, "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "task k2: completed; 10 executor steps" in ok.stdout
    assert (ws / "runs.log").read_text().count("run\n") == 3  # run again, once, after the approval


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["approve", "reject"])
def test_a_call_approved_then_cut_off_is_put_up_again_not_approved_by_the_old_answer(
    tmp_path: Path, answer: str
) -> None:
    """The user approved ``d-test2`` (run_command needs approval here); the process died while the
    command ran. ``taskctx resume`` must not take the stored "approve" as the answer to the new
    question ("interrupted before its result was recorded... run it again?"): LangGraph matches
    resume values to interrupt() calls by order, so the re-run puts the original question first
    (its stored answer, already acted on) and then asks the new one, which waits for the user."""
    db, ws, receipts = tmp_path / "t.sqlite", tmp_path / "ws", tmp_path / "receipts" / "k3"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), "k3", str(ws), str(receipts), "d-test2", "mid", "run_command"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert (ws / "runs.log").read_text().count("run\n") == 2  # d-test1 and d-test2
    stores = SqliteStores(db)
    before = stores.events.read("k3")
    grants = lambda evs: [e.actor for e in evs if e.kind == "permission.granted" and e.payload["call_id"] == "d-test2"]  # noqa: E731
    asks = lambda evs: [e for e in evs if e.kind == "permission.requested" and e.payload["call_id"] == "d-test2"]  # noqa: E731
    assert grants(before) == ["user"] and len(asks(before)) == 1
    stores.close()

    resumed = _taskctx("resume", "k3", "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "waiting for approval of run_command (call d-test2, high risk)" in resumed.stdout, resumed.stdout
    assert (ws / "runs.log").read_text().count("run\n") == 2  # not run again on the old answer
    stores = SqliteStores(db)
    events = stores.events.read("k3")
    new = events[len(before) :]
    assert [e.kind for e in new] == ["resume.started", "permission.requested"], [e.kind for e in new]
    assert "interrupted before its result was recorded" in new[1].payload["reason"]
    assert grants(events) == ["user"]
    request_id = new[1].id
    stores.close()

    flags = ["--reject", "ran already"] if answer == "reject" else []
    done = _taskctx(
        "approve", "k3", "--request", request_id, *flags, "--db", str(db), "--out", str(tmp_path / "runs"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stores = SqliteStores(db)
    events = stores.events.read("k3")
    # taskctx resume, then taskctx approve: a new process continuing the thread is a resume too
    assert len(asks(events)) == 2 and [e.kind for e in events].count("resume.started") == 2
    results = [e for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == "d-test2"]
    assert len(results) == 1
    runs = (ws / "runs.log").read_text().count("run\n")
    if answer == "approve":
        assert grants(events) == ["user", "user"] and runs == 3  # run again once, on the new answer
        assert (
            results[0].payload["result_summary"].startswith("[run again after an interruption, approved by the user]")
        )
        assert "task k3: completed" in done.stdout, done.stdout
    else:
        assert grants(events) == ["user"] and runs == 2  # the side effect ran exactly once
        assert results[0].payload["status"] == "denied"
    assert replay(events).control.pending_approval is None
