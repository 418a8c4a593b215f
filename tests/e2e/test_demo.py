"""Whole runs through the CLI: the demo (approved, waiting for an answer given from another
process, denied, a hand edit while it waits) and a replay stopped with --max-steps then resumed;
``inspect`` of what they recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context import replay
from context.sqlite_store import SqliteStores
from graphs.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def _last_request(db: str, task_id: str) -> str:
    """The id of the task's last approval request (what ``approve --request`` names)."""
    return SqliteStores(db).events.read(task_id, kinds=["permission.requested"])[-1].id


def _error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_demo_plans_fails_recovers_resumes_and_completes(tmp_path: Path) -> None:
    """``taskctx demo --approve-all`` on the bundled sample workspace: explores, is refused outside
    its scopes, is interrupted, the config is edited by hand while paused, the resume finds the
    findings about it stale and re-reads it, asks approval for the fix, hits a failing test,
    recovers, and ends with the sample's test green."""
    import subprocess
    import sys

    db, out = tmp_path / "t.sqlite", tmp_path / "runs"
    r = invoke("demo", "--db", str(db), "--out", str(out), "--task-id", "d1", "--approve-all")
    assert r.exit_code == 0, r.output
    assert "interrupted after 4 executor steps" in r.stdout
    assert "-- while paused, a person edits proxy/nginx.conf by hand (adds a comment line); resuming" in r.stdout
    assert r.stdout.count("approval requested: apply_patch") == 2
    assert r.stdout.count("-> approved (--approve-all)") == 2
    # each patch is shown in full as a diff (real newlines), not as cut one-line JSON
    assert (
        "  approval requested: apply_patch proxy/nginx.conf (5 lines of diff)  [call d-fix2]\n"
        "    risk high: writes proxy/nginx.conf (a config, CI, build, secret or executable file)\n"
        "    --- a/proxy/nginx.conf\n"
        "    +++ b/proxy/nginx.conf\n"
        "    @@ -6,1 +6,1 @@\n"
        "    -        client_max_body_size 10mb;\n"
        "    +        client_max_body_size 10m;\n"
    ) in "\n".join(line.rstrip() for line in r.stdout.split("\n"))
    assert "    +        client_max_body_size 10mb;" in r.stdout
    assert "permission.denied: read_file: secrets/prod.env is outside the task's file scopes" in r.stdout
    assert "task d1: completed; 10 executor steps" in r.stdout
    stores = SqliteStores(db)
    kinds = [e.kind for e in stores.events.read("d1")]
    assert kinds[:4] == ["task.created", "context.built", "plan.created", "step.started"]
    assert kinds.count("resume.started") == 1
    assert kinds.count("permission.denied") == 1 and kinds.count("permission.requested") == 2
    assert kinds.count("error.occurred") == 1 and kinds.count("error.resolved") == 1
    assert kinds[-2:] == ["review.completed", "task.completed"]
    # the hand edit while paused: the resume fingerprints the workspace; the grep output and the
    # finding about the config rest on its old bytes (stale), and the executor re-reads it first
    evs = stores.events.read("d1")
    stale = [(e.payload["fact_id"], e.payload["path"], e.payload["cause"]) for e in evs if e.kind == "fact.stale"]
    assert stale == [
        ("d-grep", "proxy/nginx.conf", "resume"),
        ("s1.f1", "proxy/nginx.conf", "resume"),  # s1.f2 is about app/upload.py: it rests on that file only
        ("step:s1", "proxy/nginx.conf", "resume"),
        ("d-reread", "proxy/nginx.conf", "write"),
        ("step:s2", "proxy/nginx.conf", "write"),
    ]
    assert kinds[kinds.index("resume.started") + 1] == "fact.stale"
    # the demo prints them as they are recorded
    old_sha, new_sha = (next(e.payload for e in evs if e.kind == "fact.stale")[k][:12] for k in ("old_sha", "new_sha"))
    for fid in ("d-grep", "s1.f1", "s1"):
        assert (
            f"] fact.stale: {'step:' if fid == 's1' else ''}{fid}: proxy/nginx.conf changed while paused ({old_sha} -> {new_sha})\n"
            in r.stdout
        )
    assert r.stdout.count("] fact.stale: ") == 5
    called = [e.payload["call_id"] for e in evs if e.kind == "tool.called"]
    assert called[called.index("d-reread") + 1] == "d-fix1"  # re-read before acting
    ctx = replay(stores.events.read("d1"))
    assert [(f.id, sorted(f.rests_on)) for f in ctx.evidence.findings[:2]] == [
        ("s1.f1", ["proxy/nginx.conf"]),
        ("s1.f2", ["app/upload.py"]),
    ]
    assert ctx.errors.error_history[0].id == "err-1"
    assert ctx.errors.resolved_errors[0].resolution == "later call d-test2 (run_command) succeeded"
    assert ctx.progress.changed_artifacts == ["proxy/nginx.conf", "CHANGELOG.md"]
    # the workspace copy: fixed, tests green, the test file untouched
    ws = tmp_path / "workspaces" / "d1"
    assert "client_max_body_size 10m;" in (ws / "proxy" / "nginx.conf").read_text()
    from graphs.demo import SAMPLE_WORKSPACE

    assert (ws / "tests" / "test_upload.py").read_bytes() == (
        SAMPLE_WORKSPACE / "tests" / "test_upload.py"
    ).read_bytes()
    green = subprocess.run(
        [sys.executable, "-m", "unittest", "tests/test_upload.py"], cwd=ws, capture_output=True, text=True, timeout=60
    )
    assert green.returncode == 0, green.stderr
    red = subprocess.run(
        [sys.executable, "-m", "unittest", "tests/test_upload.py"],
        cwd=SAMPLE_WORKSPACE,
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert red.returncode != 0 and "413 != 201" in red.stderr  # the bundled sample shows the bug
    # the bearer token of the proxy log never leaves the artifact store unmasked
    trace = (out / "d1" / "trace.jsonl").read_text()
    assert "eyJhbGciOiJIUzI1NiJ9" not in trace and "[REDACTED:jwt]" in trace
    run_dir = out / "d1"
    assert sorted(p.name for p in run_dir.iterdir()) == [
        ".export.json",
        "calls.jsonl",
        "context_pack.md",
        "costs.json",
        "manifests.jsonl",
        "state.json",
        "trace.jsonl",
    ]
    assert len((run_dir / "trace.jsonl").read_text().splitlines()) == len(kinds)
    manifests = [json.loads(x) for x in (run_dir / "manifests.jsonl").read_text().splitlines()]
    assert [m["role"] for m in manifests] == ["planner"] + ["executor"] * 9 + ["recovery"] + ["executor"] * 4 + [
        "reviewer"
    ]
    assert set(manifests[0]) == {
        "call",
        "role",
        "step_id",
        "budget",
        "prompt_tokens",
        "cached_prefix_tokens",
        "transcript_reset",
        "rebuilt",
        "usage",
        "blocks",
    }
    # the scripted model reports no usage; no prompt was rebuilt
    assert {(m["usage"], m["rebuilt"]) for m in manifests} == {(None, None)}
    assert set(manifests[0]["blocks"][0]) == {"id", "layer", "kind", "trust", "tokens", "included", "reason"}
    pack = (run_dir / "context_pack.md").read_text()
    assert "Do not modify tests/test_upload.py." in pack and "executor call 15" in pack

    insp = invoke("inspect", "d1", "--db", str(db))
    assert insp.exit_code == 0
    for heading in (
        "Goal",
        "Success criteria",
        "Constraints",
        "Plan",
        "Current step",
        "Recent progress",
        "Evidence",
        "Permissions",
        "Pending approvals",
        "Approvals and denials",
        "Error history",
        "Resolved errors",
        "Omitted history",
        "Checkpoints",
    ):
        assert f"\n{heading}\n" in insp.stdout
    assert (
        "permission.denied (policy): read_file [d-secrets] secrets/prod.env is outside the task's file scopes"
        in insp.stdout
    )
    assert "permission.granted (user): apply_patch [d-fix1] approved by the user" in insp.stdout
    assert "err-1 [resolved: later call d-test2 (run_command) succeeded] tool:run_command in s3" in insp.stdout
    assert "resumes: 1" in insp.stdout


def test_demo_without_an_answer_waits_then_approve_from_another_process(tmp_path: Path) -> None:
    """Non-interactive, no flag: the demo stops at the first approval; ``taskctx approve`` answers
    it (then the next one); answering when nothing is pending is an error (exit 2, one line)."""
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    r = invoke("demo", "--db", db, "--out", out, "--task-id", "w1")
    assert r.exit_code == 0, r.output
    assert "waiting for approval of apply_patch (call d-fix1, high risk)" in r.stdout
    assert "taskctx approve w1" in r.stdout
    ctx = replay(SqliteStores(db).events.read("w1"))
    assert ctx.control.pending_approval is not None and ctx.control.status == "waiting_user"
    bad = invoke("approve", "w1", "--edit", "[1, 2]", "--db", db)
    assert bad.exit_code == 2 and "JSON object" in _error_line(bad)
    r2 = invoke("approve", "w1", "--db", db, "--out", out)
    assert r2.exit_code == 0, r2.output
    assert "waiting for approval of apply_patch (call d-fix2, high risk)" in r2.stdout
    # ``taskctx approve`` shows what it approves (the first patch, in full) and then the next request
    shown = "\n".join(line.rstrip() for line in r2.stdout.split("\n"))
    first = SqliteStores(db).events.read("w1", kinds=["permission.requested"])
    assert "  approval requested: apply_patch proxy/nginx.conf (11 lines of diff)  [call d-fix1]" in shown
    assert f"    -> approve (request {first[0].id})" in shown
    assert "    -        client_max_body_size 1m;\n    +        client_max_body_size 10mb;\n" in shown
    assert "            proxy_pass http://app:8000;" in shown  # the patch's last line
    assert "    +        client_max_body_size 10m;" in shown
    # the second request came after an answer: a script must name it (it may not be what the script saw)
    second = SqliteStores(db).events.read("w1", kinds=["permission.requested"])[1]
    hint = f"Approve with: taskctx approve w1 --request {second.id} --db {db} --out {out}"
    assert hint in r2.stdout
    unseen = invoke("approve", "w1", "--db", db, "--out", out)
    assert unseen.exit_code == 2 and _error_line(unseen) == (
        f"error: task 'w1' waits on request {second.id} (apply_patch, call d-fix2, high risk), put up after 1 "
        "earlier request(s) were answered, so it may not be the one this script saw: nothing was answered; "
        f"name it: `taskctx approve w1 --request {second.id} --db {db}`"
    )
    stale = invoke("approve", "w1", "--request", first[0].id, "--db", db, "--out", out)
    assert stale.exit_code == 2 and f"request {first[0].id} of task 'w1' is not pending" in _error_line(stale)
    assert replay(SqliteStores(db).events.read("w1")).control.pending_approval is not None  # still pending
    r3 = invoke("approve", "w1", "--request", second.id, "--db", db, "--out", out)
    assert r3.exit_code == 0, r3.output
    assert "task w1: completed; 10 executor steps" in r3.stdout
    n = SqliteStores(db).events.last_seq("w1")
    r4 = invoke("approve", "w1", "--reject", "too late", "--db", db)
    assert r4.exit_code == 2 and "has no pending approval" in _error_line(r4)
    assert SqliteStores(db).events.last_seq("w1") == n
    r5 = invoke("approve", "nosuch", "--db", db)
    assert r5.exit_code == 2 and "no task 'nosuch'" in _error_line(r5)


def test_replay_max_steps_then_resume(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    traj = str(trajectories_dir / "openhands-ponyc-4588.jsonl")
    r = invoke("replay", traj, "--task-id", "t1", "--max-steps", "10", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert "stopped after 10 executor steps" in r.stdout
    stores = SqliteStores(db)
    assert sum(e.kind == "tool.result.received" for e in stores.events.read("t1")) == 10
    r2 = invoke("resume", "t1", "--db", db, "--out", out)
    assert r2.exit_code == 0, r2.output
    assert "task t1: completed; 50 executor steps" in r2.stdout
    evs = stores.events.read("t1")
    ids = [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"]
    assert ids == [f"rec-{i}" for i in range(1, 51)]
    assert [e.kind for e in evs].count("resume.started") == 1
    # the duplicate start is refused and records nothing
    n = len(evs)
    r3 = invoke("replay", traj, "--task-id", "t1", "--db", db)
    assert r3.exit_code == 2 and "already exists" in _error_line(r3)
    assert stores.events.last_seq("t1") == n
    # resuming a finished task changes nothing
    r4 = invoke("resume", "t1", "--db", db, "--out", out)
    assert r4.exit_code == 0 and "already finished" in r4.stdout
    assert stores.events.last_seq("t1") == n


def test_demo_deny_all_ends_cleanly_as_failed(tmp_path: Path) -> None:
    r = invoke(
        "demo", "--deny-all", "--db", str(tmp_path / "t.sqlite"), "--out", str(tmp_path / "o"), "--task-id", "dn"
    )
    assert r.exit_code == 1, r.output  # a task that ends failed exits 1 (bad input: 2)
    assert "task dn: failed" in r.stdout and r.stderr == ""
    assert r.stdout.endswith(f"inspect it: taskctx inspect dn --db {tmp_path / 't.sqlite'}\n")
    assert (tmp_path / "o" / "dn" / "state.json").is_file()  # exported before the exit
    r = invoke("resume", "dn", "--db", str(tmp_path / "t.sqlite"), "--out", str(tmp_path / "o"))
    assert r.exit_code == 1 and "task dn is already finished (failed); nothing to resume" in r.stdout
    events = SqliteStores(tmp_path / "t.sqlite").events.read("dn")
    ctx = replay(events)
    assert ctx.control.status == "failed"
    assert ctx.progress.last_step.result == "blocked"
    # the refused fix ends s2 blocked and recovery stops there (s3 never starts)
    assert [(e.payload["step_id"], e.payload["result"]) for e in events if e.kind == "step.completed"] == [
        ("s1", "success"),
        ("s2", "blocked"),
    ]
    assert [e.payload["decision"] for e in events if e.kind == "recovery.decided"] == ["stop"]
    assert [e.payload["step_id"] for e in events if e.kind == "step.started"] == ["s1", "s2"]
    assert (tmp_path / "o" / "dn" / "trace.jsonl").exists()


_HAND_EDITS = {
    "appended": lambda t: t + "# tuned by hand\n",
    "limit-line": lambda t: t.replace("client_max_body_size 1m;", "client_max_body_size 2m;  # hand edit"),
    "line-moved": lambda t: "# ops note\n# second note\n" + t,
}


@pytest.mark.slow
@pytest.mark.parametrize("edit", list(_HAND_EDITS))
def test_taskctx_approve_checks_the_workspace_before_the_approved_patch_acts(tmp_path: Path, edit: str) -> None:
    """The demo waits for the approval of its nginx.conf patch (no terminal); a person edits the
    config meanwhile (a line appended, the limit line itself changed, lines added above it);
    ``taskctx approve`` records the edit (``fact.stale``, cause ``approval``) before acting, the
    approved patch, made against the old bytes, is not run, and the patch made again on the
    re-read bytes applies: the task completes with the fix."""
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    r = invoke("demo", "--db", db, "--out", out, "--task-id", "d1")
    assert "waiting for approval of apply_patch (call d-fix1, high risk)" in r.stdout, r.output
    # the command it names can be pasted as it is (no usage brackets in it)
    rid = _last_request(db, "d1")
    assert f"Approve with: taskctx approve d1 --request {rid} --db {db} --out {out} (or add --edit JSON," in " ".join(
        r.stdout.split()
    )
    conf = tmp_path / "workspaces" / "d1" / "proxy" / "nginx.conf"
    edited = _HAND_EDITS[edit](conf.read_text())
    assert edited != conf.read_text()
    conf.write_text(edited)
    r = invoke("approve", "d1", "--db", db, "--out", out)
    evs = SqliteStores(db).events.read("d1")
    stale = [e.payload["fact_id"] for e in evs if e.kind == "fact.stale" and e.payload["cause"] == "approval"]
    assert stale == ["s1.f1", "step:s1", "d-grep", "d-reread"]
    kinds = [e.kind for e in evs]
    first = kinds.index("fact.stale", kinds.index("permission.requested"))
    assert kinds[first : first + 5] == ["fact.stale"] * 4 + ["permission.denied"]
    assert "] fact.stale: d-reread: proxy/nginx.conf changed while waiting for approval (" in r.stdout
    assert (
        "] permission.denied: apply_patch: approved by the user, but proxy/nginx.conf changed while waiting" in r.stdout
    )
    assert "permission.granted" not in kinds and "file.modified" not in kinds
    assert conf.read_text() == edited  # the person's edit stands
    # the executor re-reads the file and makes the change again: put up for approval again
    assert "      tool result d-fix1: denied (0 chars): not run: proxy/nginx.conf changed while waiting" in r.stdout
    assert "waiting for approval of apply_patch (call d-fix1-2, high risk)" in r.stdout, r.output
    assert r.exit_code == 0, r.output
    calls = [e.payload["call_id"] for e in evs if e.kind == "tool.called"]
    assert calls[-3:] == ["d-fix1", "d-reread-2", "d-fix1-2"]
    assert "step.completed" not in kinds[first:]
    r = invoke("approve", "d1", "--request", _last_request(db, "d1"), "--db", db, "--out", out)
    assert "waiting for approval of apply_patch (call d-fix2, high risk)" in r.stdout, r.output
    r = invoke("approve", "d1", "--request", _last_request(db, "d1"), "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    evs = SqliteStores(db).events.read("d1")
    granted = [e.payload["call_id"] for e in evs if e.kind == "permission.granted" and e.actor == "user"]
    assert granted == ["d-fix1-2", "d-fix2"]
    text = conf.read_text()
    assert "client_max_body_size 10m;" in text and "1m;" not in text and "2m;" not in text
    assert text.count("\n") == edited.count("\n") and text.startswith(edited.splitlines()[0])  # the rest kept
    assert [e.payload["status"] for e in evs if e.kind == "task.completed"] == ["completed"]
    r = invoke("inspect", "d1", "--db", db)
    assert "permission.denied (system): apply_patch [d-fix1] approved by the user, but proxy/nginx.conf" in r.stdout


@pytest.mark.parametrize("named", [False, True], ids=["no-request", "same-request"])
def test_two_approves_at_once_approve_nothing_unseen(tmp_path: Path, named: bool) -> None:
    """Two shells answer the demo's first request at once (two processes, no terminal): one
    approves it; the other is refused (the lease, or the request it meant is answered); the next
    request (the high-risk d-fix2) stays pending, approved by nobody."""
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    assert invoke("demo", "--db", db, "--out", out, "--task-id", "w2").exit_code == 0
    first = SqliteStores(db).events.read("w2", kinds=["permission.requested"])[0]
    args = [sys.executable, "-m", "graphs.cli", "approve", "w2", "--db", db, "--out", out]
    if named:
        args += ["--request", first.id]
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    procs = [
        subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    done = [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]
    codes = sorted(c for c, _, _ in done)
    assert codes[0] == 0 and codes[1] in (2, 4), done
    loser = next(e for c, _, e in done if c != 0)
    assert len(loser.strip().splitlines()) == 1, loser  # one line
    assert "nothing was" in loser
    events = SqliteStores(db).events.read("w2")
    granted = [e.payload["call_id"] for e in events if e.kind == "permission.granted" and e.actor == "user"]
    assert granted == ["d-fix1"]  # d-fix2 approved by nobody
    ctx = replay(events)
    assert ctx.control.pending_approval is not None and ctx.control.pending_approval.call_id == "d-fix2"
