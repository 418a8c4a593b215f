"""Issue 13 part 3: stores read back are verified. A corruption suite: one healthy task (a replay
stopped after 3 executor steps), then each case damages a copy of its database and runs
``taskctx resume``, ``inspect``, ``report`` and ``doctor`` on it.

The rule for every case: 0 silent wrong states and 0 tracebacks. ``resume`` either refuses with
one line (exit 2: what is damaged, where, what to do) or, when the damage cannot change the
state (an artifact nobody reads on the way), finishes with a state equal to the log's fold;
``doctor`` names the damage (exit 2); ``inspect`` and ``report`` exit 0 or 2 with one line.

On Postgres (``TASKCTX_TEST_PG``) the same cases run on the Postgres stores where they apply
(SQL on the same tables).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import SqliteStores, replay
from graphs.cli import app

STEPS = 6
TRAJ = [
    {"id": "cor-1", "task": "Find where the config is read.\nDo not modify setup.py.", "n_steps": STEPS, "meta": {}},
    *[
        {
            "step": i,
            "thought": f"look {i}",
            "action": json.dumps({"name": "cat", "arguments": {"path": f"f{i}.py"}}),
            "observation": f"line one of f{i}\n" * (3 + i),
        }
        for i in range(1, STEPS + 1)
    ],
]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database holding task cor-1 stopped after 3 executor steps (resumable)."""
    root = tmp_path_factory.mktemp("cor")
    f = root / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in TRAJ) + "\n", encoding="utf-8")
    db = root / "h.sqlite"
    res = CliRunner().invoke(app, ["replay", str(f), "--db", str(db), "--out", str(root / "runs"), "--max-steps", "3"])
    assert res.exit_code == 0, res.output
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA wal_checkpoint(FULL)").fetchone()[0] == 0  # every page in the main file
    conn.close()
    return db


def _sql(*stmts: str) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        conn = sqlite3.connect(db)
        for s in stmts:
            conn.execute(s)
        conn.commit()
        conn.close()

    return run


def _seq_of(db: Path, kind: str, nth: int = 0) -> int:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq FROM taskctx_events WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
    conn.close()
    return int(rows[nth][0])


def _alter_payload(kind: str, fn: Callable[[dict[str, Any]], Any], nth: int = 0) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        seq = _seq_of(db, kind, nth)
        conn = sqlite3.connect(db)
        p = json.loads(conn.execute("SELECT payload FROM taskctx_events WHERE seq = ?", (seq,)).fetchone()[0])
        new = fn(p)
        conn.execute(
            "UPDATE taskctx_events SET payload = ? WHERE seq = ?",
            (new if isinstance(new, str) else json.dumps(new), seq),
        )
        conn.commit()
        conn.close()

    return run


def _swap(kind_a: str, kind_b: str) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        a, b = _seq_of(db, kind_a), _seq_of(db, kind_b)
        _sql(
            f"UPDATE taskctx_events SET seq = -1 WHERE seq = {a}",
            f"UPDATE taskctx_events SET seq = {a} WHERE seq = {b}",
            f"UPDATE taskctx_events SET seq = {b} WHERE seq = -1",
        )(db)

    return run


def _duplicate(kind: str) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        conn = sqlite3.connect(db)
        last = conn.execute("SELECT MAX(seq) FROM taskctx_events").fetchone()[0]
        row = conn.execute("SELECT * FROM taskctx_events WHERE kind = ? ORDER BY seq LIMIT 1", (kind,)).fetchone()
        conn.execute(
            "INSERT INTO taskctx_events VALUES (?,?,?,?,?,?,?,?,?)",
            (row[0], last + 1, row[2] + "-copy", *row[3:]),
        )
        conn.commit()
        conn.close()

    return run


def _artifact(op: str) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        conn = sqlite3.connect(db)
        ref = json.loads(
            conn.execute(
                "SELECT payload FROM taskctx_events WHERE kind = 'tool.result.received' ORDER BY seq LIMIT 1"
            ).fetchone()[0]
        )["raw_ref"]
        digest = ref.split(":")[-1]
        if op == "alter":
            conn.execute("UPDATE taskctx_artifacts SET data = X'00' || data WHERE digest = ?", (digest,))
        elif op == "delete":
            conn.execute("DELETE FROM taskctx_artifacts WHERE digest = ?", (digest,))
        elif op == "size":
            conn.execute("UPDATE taskctx_artifacts SET size = size + 7 WHERE digest = ?", (digest,))
        elif op == "prompts":  # every prompt artifact: the export reads the last one
            for (p,) in conn.execute("SELECT payload FROM taskctx_events WHERE kind = 'context.built'").fetchall():
                d = json.loads(p)["prompt_ref"].split(":")[-1]
                conn.execute("UPDATE taskctx_artifacts SET data = data || X'0A' WHERE digest = ?", (d,))
        conn.commit()
        conn.close()

    return run


def _truncate(fraction: float) -> Callable[[Path], None]:
    def run(db: Path) -> None:
        size = db.stat().st_size
        with open(db, "r+b") as fh:
            fh.truncate(int(size * fraction))

    return run


def _garbage_header(db: Path) -> None:
    with open(db, "r+b") as fh:
        fh.write(b"NOT A DATABASE!!")


#: (case id, damage, what doctor must say, whether resume must refuse)
CASES: list[tuple[str, Callable[[Path], None], str, bool]] = [
    ("row-deleted-middle", _sql("DELETE FROM taskctx_events WHERE seq = 7"), "event seq 7 is missing", True),
    ("row-deleted-first", _sql("DELETE FROM taskctx_events WHERE seq = 1"), "event seq 1 is missing", True),
    (
        "row-deleted-last",
        _sql("DELETE FROM taskctx_events WHERE seq = (SELECT MAX(seq) FROM taskctx_events)"),
        "the last 1 event is missing from the log",
        True,
    ),
    (
        "rows-deleted-last-three",
        _sql("DELETE FROM taskctx_events WHERE seq > (SELECT MAX(seq) - 3 FROM taskctx_events)"),
        "the last 3 events are missing from the log",
        True,
    ),
    ("rows-deleted-all", _sql("DELETE FROM taskctx_events"), "the last", True),
    ("rows-reordered-call-and-result", _swap("tool.called", "tool.result.received"), "event log:", True),
    ("rows-reordered-plan-and-task", _swap("task.created", "plan.created"), "event log: seq 1 is plan.created", True),
    ("row-duplicated-tool-call", _duplicate("tool.called"), "calls rec-1 again (first called at seq 6)", True),
    ("row-duplicated-task-created", _duplicate("task.created"), "task.created twice", True),
    (
        "row-seq-renumbered",
        _sql("UPDATE taskctx_events SET seq = seq + 100 WHERE seq = 5"),
        "event seq 5 is missing",
        True,
    ),
    (
        "payload-text-altered",
        _alter_payload("tool.result.received", lambda p: {**p, "result_summary": "nothing here"}),
        "checkpoint: its state differs from the event log's fold",
        True,
    ),
    (
        "payload-status-altered",
        _alter_payload("tool.result.received", lambda p: {**p, "status": "error"}),
        "checkpoint: its state differs",
        True,
    ),
    (
        "payload-constraint-removed",
        _alter_payload("task.created", lambda p: {**p, "constraints": []}),
        "differs from the event log's fold up to seq",
        True,
    ),
    ("payload-not-json", _alter_payload("plan.created", lambda p: "{not json"), "payload that is not JSON", True),
    ("payload-not-object", _alter_payload("plan.created", lambda p: "[1, 2]"), "payload that is not an object", True),
    (
        "payload-wrong-type",
        _alter_payload("tool.result.received", lambda p: {**p, "status": "exploded"}),
        "payload its kind does not allow (status",
        True,
    ),
    (
        "payload-unknown-field",
        _alter_payload("plan.created", lambda p: {**p, "owner": "mallory"}),
        "payload its kind does not allow (owner",
        True,
    ),
    (
        "payload-required-field-missing",
        _alter_payload("tool.called", lambda p: {k: v for k, v in p.items() if k != "call_id"}),
        "payload its kind does not allow (call_id",
        True,
    ),
    (
        "kind-unknown",
        _sql("UPDATE taskctx_events SET kind = 'tool.exploded' WHERE seq = 6"),
        "unknown kind 'tool.exploded'",
        True,
    ),
    (
        "timestamp-before-previous",
        _sql("UPDATE taskctx_events SET timestamp = '2000-01-01T00:00:00.000Z' WHERE seq = 8"),
        "is dated 2000-01-01",
        True,
    ),
    ("artifact-bytes-altered", _artifact("alter"), "holds bytes that do not match its hash", False),
    ("artifact-deleted", _artifact("delete"), "is missing", False),
    ("artifact-size-altered", _artifact("size"), "records a size of", False),
    ("artifact-prompts-altered", _artifact("prompts"), "do not match its hash", False),
    (
        "registry-row-deleted",
        _sql("DELETE FROM taskctx_tasks"),
        "task registry: no row for this task",
        True,
    ),
    ("registry-row-not-json", _sql("UPDATE taskctx_tasks SET spec = '{oops'"), "task registry: its row", True),
    ("registry-row-not-object", _sql("UPDATE taskctx_tasks SET spec = '42'"), "task registry: its row", True),
    (
        "checkpoints-deleted",
        _sql("DELETE FROM checkpoints", "DELETE FROM writes"),
        "checkpoint: none, though the event log holds",
        True,
    ),
    ("events-table-dropped", _sql("DROP TABLE taskctx_events"), "the last", True),
    ("file-truncated-half", _truncate(0.5), "", True),
    ("file-truncated-to-header", _truncate(0.02), "", True),
    ("file-header-garbage", _garbage_header, "", True),
]


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def _one_line_error(res: Any) -> str:
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    errs = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
    assert len(errs) == 1, res.output
    return errs[0]


@pytest.mark.parametrize(("case", "damage", "finding", "refuse"), CASES, ids=[c[0] for c in CASES])
def test_corruption_sqlite(
    healthy: Path, tmp_path: Path, case: str, damage: Callable[[Path], None], finding: str, refuse: bool
) -> None:
    db = tmp_path / "d.sqlite"
    shutil.copy(healthy, db)
    damage(db)
    common = ["--db", str(db)]
    res = _invoke(["resume", "cor-1", *common, "--out", str(tmp_path / "runs")])
    if refuse:
        assert res.exit_code == 2, res.output
        line = _one_line_error(res)
        assert "another process" not in line and "taskctx replay" not in line
    else:
        assert res.exit_code in (0, 2), res.output
        if res.exit_code == 2:
            line = _one_line_error(res)
            assert "artifact" in line and "doctor" in line
        else:  # finished: the state is the log's fold (nothing was built on the damaged bytes)
            st = SqliteStores(db)
            events = st.events.read("cor-1")
            assert events[-1].kind == "task.completed"
            assert replay(events).progress.executor_steps == STEPS
            st.close()
    doc = _invoke(["doctor", "cor-1", *common])
    assert doc.exit_code == 2, doc.output
    assert "Traceback" not in doc.output and doc.exception is None or isinstance(doc.exception, SystemExit)
    if finding:
        assert finding in doc.output, doc.output
    for cmd in (["inspect", "cor-1", *common], ["report", "cor-1", *common, "--html", str(tmp_path / "r.html")]):
        r = _invoke(cmd)
        assert r.exit_code in (0, 2), (cmd, r.output, r.exception)
        if r.exit_code == 2:
            _one_line_error(r)
        else:
            assert r.exception is None


def test_a_healthy_task_passes_the_doctor(healthy: Path, tmp_path: Path) -> None:
    db = tmp_path / "ok.sqlite"
    shutil.copy(healthy, db)
    res = _invoke(["doctor", "--db", str(db)])
    assert res.exit_code == 0, res.output
    n = SqliteStores(db).events.last_seq("cor-1")
    assert res.output == f"task cor-1: ok ({n} events)\n"
    done = _invoke(["resume", "cor-1", "--db", str(db), "--out", str(tmp_path / "runs")])
    assert done.exit_code == 0, done.output
    assert _invoke(["doctor", "cor-1", "--db", str(db)]).exit_code == 0


def test_the_missing_middle_row_of_the_issue_is_refused_with_one_line(healthy: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    shutil.copy(healthy, db)
    _sql("DELETE FROM taskctx_events WHERE seq = 7")(db)
    res = _invoke(["resume", "cor-1", "--db", str(db), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 2
    assert _one_line_error(res) == (
        "error: task 'cor-1' is damaged: event log: event seq 7 is missing (seq 6 is followed by 8); run "
        "`taskctx doctor cor-1` for every finding; restore the database from a backup, or start the task again "
        "under a new --task-id (the damaged task can still be inspected)"
    )
