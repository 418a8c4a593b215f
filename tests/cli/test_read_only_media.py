"""A sound database on a read-only mount: the commands that read work, ``resume`` says it cannot
write there, and a write-ahead log that only a writable folder can replay is named as such.

The mount is real: a read-only bind mount of the database's folder in a mount namespace of the
test's own (``unshare -m``), since root ignores file permissions. Where that cannot be made (not
root, no ``unshare``), the tests skip and say so.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import graphs
import nodes
from nodes.testing import complete, plan, review


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe}"],
        capture_output=True,
    )
    return r.returncode == 0


@pytest.fixture
def ro_dir(tmp_path: Path) -> Path:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("a read-only bind mount needs root and unshare -m (chmod alone does not stop root)")
    d = tmp_path / "media"
    d.mkdir()
    return d


def _task(db: Path) -> int:
    """A finished task ``t1`` in ``db``; the number of its events."""

    script = {
        "planner": [plan("Look", "Look again")],
        "executor": [complete("looked"), complete("looked again")],
        "reviewer": [review("approve", "both looked")],
    }
    with graphs.open_project(db) as project:
        done = project.run(project.graph(nodes.ScriptedChatModel(script=script)), "Shout.", task_id="t1")
        assert done.state.control.status == "completed"
        return project.stores.events.last_seq("t1")


def _on_read_only(folder: Path, commands: list[list[str]], cwd: Path) -> list[tuple[int, str, str]]:
    """Run taskctx commands with ``folder`` mounted read-only: ``(exit code, stdout, stderr)`` each."""
    out = []
    for args in commands:
        cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "graphs.cli", *args])
        script = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec {cmd}"
        r = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=300,
            env={**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"},
        )
        out.append((r.returncode, r.stdout, r.stderr))
    return out


def test_read_commands_work_on_a_read_only_mount_and_resume_says_it_cannot_write(ro_dir: Path, tmp_path: Path) -> None:
    db = ro_dir / "t.sqlite"
    n = _task(db)
    assert not (ro_dir / "t.sqlite-wal").exists() or (ro_dir / "t.sqlite-wal").stat().st_size == 0
    html = tmp_path / "report.html"
    inspect, listing, doctor, report, resume = _on_read_only(
        ro_dir,
        [
            ["inspect", "t1", "--db", str(db)],
            ["list", "--db", str(db)],
            ["doctor", "--db", str(db)],
            ["report", "t1", "--db", str(db), "--html", str(html)],
            ["resume", "t1", "--db", str(db), "--out", str(tmp_path / "runs")],
        ],
        tmp_path,
    )
    assert inspect[0] == 0 and inspect[1].startswith("task t1  status: completed"), inspect
    rows = {ln.split("│")[1].strip(): ln.split("│")[2].strip() for ln in listing[1].splitlines() if ln.startswith("│")}
    assert listing[0] == 0 and rows["t1"] == "completed (Python API)", listing
    assert doctor[0] == 0, doctor
    assert doctor[1].splitlines() == [f"task t1: ok ({n} events; started through the Python API)"]
    assert report[0] == 0 and html.stat().st_size > 0, report
    assert resume[0] == 2 and resume[2].splitlines() == [
        f"error: cannot write the taskctx database at {db}: it is on read-only media (or its folder is not "
        "writable by this user: unable to open database file); inspect, list, doctor and report still read it; "
        "to run the task, copy the file (with any -wal beside it) to a writable folder and pass that --db"
    ], resume
    assert "not a taskctx database" not in "".join(x[2] for x in (inspect, listing, doctor, report, resume))


def test_a_pending_write_ahead_log_on_a_read_only_mount_is_named(ro_dir: Path, tmp_path: Path) -> None:
    """A copy taken while a writer held frames not yet checkpointed: the -wal holds part of the
    database, and only a writable folder can replay it."""
    src = tmp_path / "src.sqlite"
    _task(src)
    writer = sqlite3.connect(src)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO taskctx_artifacts VALUES ('pending', 1, X'00')")
    writer.commit()
    wal = Path(str(src) + "-wal")
    assert wal.stat().st_size > 0
    db = ro_dir / "t.sqlite"
    shutil.copy(src, db)
    shutil.copy(wal, str(db) + "-wal")
    writer.close()
    size = Path(str(db) + "-wal").stat().st_size
    ((code, out, errs),) = _on_read_only(ro_dir, [["inspect", "t1", "--db", str(db)]], tmp_path)
    assert code == 2, out + errs
    assert errs.splitlines() == [
        f"error: cannot read the taskctx database at {db}: unable to open database file, and its write-ahead log "
        f"(t.sqlite-wal, {size} bytes) holds changes not yet in the file, which only a writable folder can replay; "
        "copy the file with its -wal to a writable folder and pass that --db"
    ]
