"""Stores read back are verified. A corruption suite: one healthy task (a replay
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
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from typer.testing import CliRunner

from context import replay
from graphs.cli import app

STEPS = 6
PG_URL = os.environ.get("TASKCTX_TEST_PG", "")
#: Damage that needs a file (SQLite only).
FILE_CASES = {"file-truncated-half", "file-truncated-to-header", "file-header-garbage"}
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


def _replay_into(db: str, root: Path) -> None:
    f = root / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in TRAJ) + "\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["replay", str(f), "--db", db, "--out", str(root / "runs"), "--max-steps", "3"])
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def healthy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A database holding task cor-1 stopped after 3 executor steps (resumable): a SQLite file,
    or (with ``TASKCTX_TEST_PG``) a Postgres database used as the template of each case's copy."""
    root = tmp_path_factory.mktemp("cor")
    if request.param == "sqlite":
        db = root / "h.sqlite"
        _replay_into(str(db), root)
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA wal_checkpoint(FULL)").fetchone()[0] == 0  # every page in the main file
        conn.close()
        yield db
        return
    pg_url = request.getfixturevalue("pg_url")  # skips without TASKCTX_TEST_PG
    import psycopg

    name = f"cor_healthy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(pg_url)._replace(path="/" + name))
    _replay_into(url, root)
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _Conn:
    """One connection to a case's database (SQLite file or Postgres URL); ``?`` placeholders."""

    def __init__(self, db: str):
        self.pg = db.startswith("postgresql://")
        if self.pg:
            import psycopg

            self.conn: Any = psycopg.connect(db, autocommit=True)
        else:
            self.conn = sqlite3.connect(db)

    def rows(self, sql: str, *args: Any) -> list[Any]:
        return list(self.conn.execute(sql.replace("?", "%s") if self.pg else sql, args).fetchall())

    def ex(self, sql: str, *args: Any) -> None:
        self.conn.execute(sql.replace("?", "%s") if self.pg else sql, args)

    def close(self) -> None:
        if not self.pg:
            self.conn.commit()
        self.conn.close()


def _sql(*stmts: str) -> Callable[[str], None]:
    def run(db: str) -> None:
        c = _Conn(db)
        for s in stmts:
            c.ex(s)
        c.close()

    return run


def _seq_of(c: _Conn, kind: str, nth: int = 0) -> int:
    rows = c.rows("SELECT seq FROM taskctx_events WHERE kind = ? ORDER BY seq", kind)
    return int(rows[nth][0])


def _alter_payload(kind: str, fn: Callable[[dict[str, Any]], Any], nth: int = 0) -> Callable[[str], None]:
    def run(db: str) -> None:
        c = _Conn(db)
        seq = _seq_of(c, kind, nth)
        p = json.loads(c.rows("SELECT payload FROM taskctx_events WHERE seq = ?", seq)[0][0])
        new = fn(p)
        c.ex(
            "UPDATE taskctx_events SET payload = ? WHERE seq = ?", new if isinstance(new, str) else json.dumps(new), seq
        )
        c.close()

    return run


def _swap(kind_a: str, kind_b: str) -> Callable[[str], None]:
    def run(db: str) -> None:
        c = _Conn(db)
        a, b = _seq_of(c, kind_a), _seq_of(c, kind_b)
        c.ex(f"UPDATE taskctx_events SET seq = -1 WHERE seq = {a}")
        c.ex(f"UPDATE taskctx_events SET seq = {a} WHERE seq = {b}")
        c.ex(f"UPDATE taskctx_events SET seq = {b} WHERE seq = -1")
        c.close()

    return run


def _duplicate(kind: str) -> Callable[[str], None]:
    def run(db: str) -> None:
        c = _Conn(db)
        last = c.rows("SELECT MAX(seq) FROM taskctx_events")[0][0]
        row = c.rows("SELECT * FROM taskctx_events WHERE kind = ? ORDER BY seq LIMIT 1", kind)[0]
        c.ex("INSERT INTO taskctx_events VALUES (?,?,?,?,?,?,?,?,?)", row[0], last + 1, row[2] + "-copy", *row[3:])
        c.close()

    return run


def _artifact(op: str) -> Callable[[str], None]:
    def run(db: str) -> None:
        c = _Conn(db)
        ref = json.loads(
            c.rows("SELECT payload FROM taskctx_events WHERE kind = 'tool.result.received' ORDER BY seq LIMIT 1")[0][0]
        )["raw_ref"]
        digest = ref.split(":")[-1]
        zero, newline = ("'\\x00'::bytea", "'\\x0a'::bytea") if c.pg else ("X'00'", "X'0A'")
        if op == "alter":
            c.ex(f"UPDATE taskctx_artifacts SET data = {zero} || data WHERE digest = ?", digest)
        elif op == "delete":
            c.ex("DELETE FROM taskctx_artifacts WHERE digest = ?", digest)
        elif op == "size":
            c.ex("UPDATE taskctx_artifacts SET size = size + 7 WHERE digest = ?", digest)
        elif op == "prompts":  # every prompt artifact: the export reads the last one
            for (p,) in c.rows("SELECT payload FROM taskctx_events WHERE kind = 'context.built'"):
                d = json.loads(p)["prompt_ref"].split(":")[-1]
                c.ex(f"UPDATE taskctx_artifacts SET data = data || {newline} WHERE digest = ?", d)
        c.close()

    return run


def _no_checkpoints(db: str) -> None:
    c = _Conn(db)
    for t in ("checkpoints", "checkpoint_writes", "checkpoint_blobs") if c.pg else ("checkpoints", "writes"):
        c.ex(f"DELETE FROM {t}")
    c.close()


def _truncate(fraction: float) -> Callable[[str], None]:
    def run(db: str) -> None:
        size = Path(db).stat().st_size
        with open(db, "r+b") as fh:
            fh.truncate(int(size * fraction))

    return run


def _garbage_header(db: str) -> None:
    with open(db, "r+b") as fh:
        fh.write(b"NOT A DATABASE!!")


#: (case id, damage, what doctor must say, whether resume must refuse)
CASES: list[tuple[str, Callable[[str], None], str, bool]] = [
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
        _no_checkpoints,
        "checkpoint: none, though the event log holds",
        True,
    ),
    # SQLite: the read-only open names the lost table; Postgres: resume re-creates it empty, so the
    # doctor finds the events the checkpoint folded missing from the log
    ("events-table-dropped", _sql("DROP TABLE taskctx_events"), "missing", True),
    ("file-truncated-half", _truncate(0.5), "", True),
    ("file-truncated-to-header", _truncate(0.02), "", True),
    ("file-header-garbage", _garbage_header, "", True),
]


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def _db_opt(db: str) -> str:
    """`` --db DB`` as a hint names it (:func:`graphs.report.hints.command_hint`: quoted, no password)."""
    from graphs.report.hints import command_hint

    return command_hint("x", None, db).removeprefix("taskctx x")


def _one_line_error(res: Any) -> str:
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    errs = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
    assert len(errs) == 1, res.output
    return errs[0]


@pytest.fixture
def copy_of(healthy: Any, tmp_path: Path) -> Any:
    """A fresh copy of the healthy database for one case: its path or URL, and its stores."""
    if isinstance(healthy, Path):
        db = tmp_path / "d.sqlite"
        shutil.copy(healthy, db)
        yield str(db)
        return
    import psycopg

    name = urlsplit(healthy).path.lstrip("/")
    copy = f"cor_case_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    yield urlunsplit(urlsplit(PG_URL)._replace(path="/" + copy))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')


def _stores(db: str) -> Any:
    from context.pg_store import open_stores

    return open_stores(db)


@pytest.mark.parametrize(("case", "damage", "finding", "refuse"), CASES, ids=[c[0] for c in CASES])
def test_corruption(
    copy_of: str, tmp_path: Path, case: str, damage: Callable[[str], None], finding: str, refuse: bool
) -> None:
    db = copy_of
    if case in FILE_CASES and db.startswith("postgresql://"):
        pytest.skip("damage to a file: SQLite only")
    damage(db)
    common = ["--db", db]
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
            st = _stores(db)
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


def test_a_healthy_task_passes_the_doctor(copy_of: str, tmp_path: Path) -> None:
    db = copy_of
    res = _invoke(["doctor", "--db", db])
    assert res.exit_code == 0, res.output
    st = _stores(db)
    n = st.events.last_seq("cor-1")
    st.close()
    assert res.output == f"task cor-1: ok ({n} events)\n"
    done = _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")])
    assert done.exit_code == 0, done.output
    assert _invoke(["doctor", "cor-1", "--db", db]).exit_code == 0


def test_the_missing_middle_row_of_the_issue_is_refused_with_one_line(copy_of: str, tmp_path: Path) -> None:
    db = copy_of
    _sql("DELETE FROM taskctx_events WHERE seq = 7")(db)
    res = _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")])
    assert res.exit_code == 2
    assert _one_line_error(res) == (
        "error: task 'cor-1' is damaged: event log: event seq 7 is missing (seq 6 is followed by 8); run "
        f"`taskctx doctor cor-1{_db_opt(db)}` for every finding; restore the database from a backup, or start the "
        f"task again under a new --task-id; `taskctx inspect cor-1{_db_opt(db)}` still shows what can be read"
    )
    # and it does: the rest, after a warning naming the gap
    shown = _invoke(["inspect", "cor-1", "--db", db])
    assert shown.exit_code == 0 and shown.stderr.startswith(
        "warning: task cor-1 is damaged: event log: event seq 7 is missing (seq 6 is followed by 8)\n"
    )


@pytest.mark.parametrize("damage", ["unreadable payload", "unknown kind"])
def test_report_and_inspect_agree_on_what_a_damaged_task_still_shows(copy_of: str, tmp_path: Path, damage: str) -> None:
    """Both say whether ``inspect`` still shows the task, and it is the truth: a row whose payload
    cannot be read stops every reader; a row of an unknown kind is skipped after a warning.
    Every command they name carries the ``--db`` given."""
    db = copy_of
    if damage == "unreadable payload":
        if "://" in db:
            pytest.skip("a payload that is not JSON: the SQLite text column only")
        _sql("UPDATE taskctx_events SET payload = '{not json' WHERE seq = 7")(db)
        what = "event seq 7 (tool.result.received) has a payload that is not JSON"
        tail = "; inspect cannot show it either"
    else:
        _sql("UPDATE taskctx_events SET kind = 'bogus.kind' WHERE seq = 7")(db)
        what = "event seq 7 has an unknown kind 'bogus.kind'"
        tail = f"; `taskctx inspect cor-1{_db_opt(db)}` still shows what can be read"
    line = (
        f"error: task 'cor-1': the event log is damaged: {what}; run `taskctx doctor cor-1{_db_opt(db)}` for every "
        f"finding; restore the database from a backup, or start the task again under a new --task-id{tail}"
    )
    report = _invoke(["report", "cor-1", "--db", db, "--html", str(tmp_path / "r.html")])
    assert report.exit_code == 2 and _one_line_error(report) == line
    shown = _invoke(["inspect", "cor-1", "--db", db])
    if damage == "unreadable payload":
        assert shown.exit_code == 2 and _one_line_error(shown) == line
    else:
        assert shown.exit_code == 0 and shown.stderr == f"warning: task cor-1 is damaged: event log: {what}\n"
        assert shown.stdout.startswith("task cor-1  status: ")


@pytest.mark.parametrize("fraction", [0.5, 0.02])
def test_a_truncated_file_is_named_damaged_by_every_command(healthy: Any, tmp_path: Path, fraction: float) -> None:
    """The read-only commands (and resume's read-only check) open a truncated taskctx file as
    damaged, never as "not a taskctx database"; the file is left as it was."""
    if not isinstance(healthy, Path):
        pytest.skip("damage to a file: SQLite only")
    db = tmp_path / "d.sqlite"
    shutil.copy(healthy, db)
    _truncate(fraction)(str(db))
    before = db.read_bytes()
    for cmd in (
        ["inspect", "cor-1"],
        ["list"],
        ["report", "cor-1", "--html", str(tmp_path / "r.html")],
        ["doctor"],
        ["resume", "cor-1", "--out", str(tmp_path / "runs")],
    ):
        r = _invoke([*cmd, "--db", str(db)])
        assert r.exit_code == 2, (cmd, r.output)
        assert _one_line_error(r) == (
            f"error: the taskctx database at {db} is damaged (database disk image is malformed): restore it "
            "from a backup, or pass another --db"
        ), cmd
    assert db.read_bytes() == before


def test_doctor_lists_every_damaged_row_not_only_the_first(copy_of: str, tmp_path: Path) -> None:
    """A missing row does not hide the damage after it: doctor names the gap (seq 7, a result),
    a payload that is not JSON (seq 9, the second call) and a payload its kind does not allow
    (seq 13, the third result): the rows that do not parse first, then the log's checks in seq
    order (seq 10 answers the call of the unreadable seq 9)."""
    db = copy_of
    _sql("DELETE FROM taskctx_events WHERE seq = 7")(db)
    _alter_payload("tool.called", lambda p: "{not json", 1)(db)
    _alter_payload("tool.result.received", lambda p: {**p, "status": "exploded"}, 1)(db)
    res = _invoke(["doctor", "cor-1", "--db", db])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines()[:5] == [
        "task cor-1: 4 problems",
        "  - event log: event seq 9 (tool.called) has a payload that is not JSON",
        "  - event log: event seq 7 is missing (seq 6 is followed by 8)",
        "  - event log: seq 10 answers call rec-2, which was not called before it",
        "  - event log: seq 13 (tool.result.received) has a payload its kind does not allow "
        "(status: Input should be 'ok', 'error' or 'denied')",
    ]
    # resume still refuses with the first finding, and counts the rest
    r = _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2
    assert _one_line_error(r).startswith(
        "error: task 'cor-1' is damaged: event log: event seq 9 (tool.called) has a payload that is not JSON (+3 more)"
    )


def test_doctor_lists_the_first_findings_and_counts_the_rest(copy_of: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor lists SHOWN_FINDINGS (20) findings of a task and counts the rest (here 5 of 12)."""
    import graphs.cli.doctor as doctor_cli

    assert doctor_cli.SHOWN_FINDINGS == 20
    monkeypatch.setattr(doctor_cli, "SHOWN_FINDINGS", 5)
    db = copy_of
    _sql("UPDATE taskctx_events SET kind = 'tool.exploded' WHERE seq > 1")(db)
    res = _invoke(["doctor", "cor-1", "--db", db])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines() == [
        "task cor-1: 12 problems",
        *[f"  - event log: event seq {s} has an unknown kind 'tool.exploded'" for s in range(2, 7)],
        "  - and 7 more",
        "1 of 1 task damaged: restore the database from a backup, or start a damaged task again under a new --task-id",
    ]


def test_a_gap_and_a_payload_its_kind_does_not_allow_get_one_judgement(copy_of: str, tmp_path: Path) -> None:
    """A deleted row and a payload its kind does not allow: report, resume and inspect give one
    judgement (:func:`graphs.diagnosis.inspectable`): inspect cannot show the task, and each names
    the row that blocks it (seq 13), not only the gap."""
    db = copy_of
    _sql("DELETE FROM taskctx_events WHERE seq = 7")(db)
    _alter_payload("tool.result.received", lambda p: {**p, "status": "exploded"}, 1)(db)
    report = _invoke(["report", "cor-1", "--db", db, "--html", str(tmp_path / "r.html")])
    resume = _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")])
    shown = _invoke(["inspect", "cor-1", "--db", db])
    block = (
        "seq 13 (tool.result.received) has a payload its kind does not allow "
        "(status: Input should be 'ok', 'error' or 'denied')"
    )
    gap = "event seq 7 is missing (seq 6 is followed by 8)"
    doctor = f"run `taskctx doctor cor-1{_db_opt(db)}` for every finding"
    hint = f"{doctor}; restore the database from a backup, or start the task again under a new --task-id"
    assert report.exit_code == 2 and _one_line_error(report) == (
        f"error: task 'cor-1': the event log is damaged: {gap}, and {block}; {hint}; inspect cannot show it either"
    )
    assert resume.exit_code == 2 and _one_line_error(resume) == (
        f"error: task 'cor-1' is damaged: event log: {gap} (+1 more), among them {block}; {hint}; "
        "inspect cannot show it either"
    )
    assert shown.exit_code == 2
    assert shown.stderr == (
        f"warning: task cor-1 is damaged: event log: {gap}\n"
        f"warning: task cor-1 is damaged: event log: {block}\n"
        f"error: task 'cor-1' is damaged (event log: {gap}) and cannot be shown ({block} blocks it); {doctor}\n"
    )


def test_doctor_compares_the_checkpoint_with_a_damaged_log_too(copy_of: str, tmp_path: Path) -> None:
    """A missing row does not hide an altered request (valid schema, seq 1): doctor names the gap
    and the checkpoint's disagreement with the fold of the rows it still has, in a part the left-out
    row's kind does not change (identity); the gap alone is one finding."""
    db = copy_of
    _sql("DELETE FROM taskctx_events WHERE seq = 7")(db)
    gap = "  - event log: event seq 7 is missing (seq 6 is followed by 8)"
    res = _invoke(["doctor", "cor-1", "--db", db])
    assert res.output.splitlines()[:2] == ["task cor-1: 1 problem", gap]
    _alter_payload("task.created", lambda p: {**p, "original_request": "delete every upload"}, 0)(db)
    res = _invoke(["doctor", "cor-1", "--db", db])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines()[:3] == [
        "task cor-1: 2 problems",
        gap,
        "  - checkpoint: its state differs from the fold of the log's readable rows up to seq 13 in identity, which "
        "the rows left out (tool.result.received) do not change: the log or the checkpoint was changed outside taskctx",
    ]


@pytest.mark.parametrize("damage", ["unknown kind", "unreadable payload"])
def test_inspect_json_carries_the_damage_and_exits_as_doctor(copy_of: str, damage: str) -> None:
    """``inspect --json`` of a damaged task: the damage is a field of the JSON (the findings, whether
    the state shown is the readable part, what to do) and the exit code is doctor's (2); a sound
    task's JSON has no such field and exits 0."""
    import json

    db = copy_of
    sound = _invoke(["inspect", "cor-1", "--db", db, "--json"])
    assert sound.exit_code == 0 and "damage" not in json.loads(sound.stdout)
    assert _invoke(["doctor", "cor-1", "--db", db]).exit_code == 0
    if damage == "unreadable payload":
        if "://" in db:
            pytest.skip("a payload that is not JSON: the SQLite text column only")
        _sql("UPDATE taskctx_events SET payload = '{not json' WHERE seq = 7")(db)
        what = "event seq 7 (tool.result.received) has a payload that is not JSON"
    else:
        _sql("UPDATE taskctx_events SET kind = 'bogus.kind' WHERE seq = 7")(db)
        what = "event seq 7 has an unknown kind 'bogus.kind'"
    doctor = _invoke(["doctor", "cor-1", "--db", db])
    res = _invoke(["inspect", "cor-1", "--db", db, "--json"])
    assert res.exit_code == doctor.exit_code == 2
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    out = json.loads(res.stdout)
    if damage == "unknown kind":
        assert out["identity"]["task_id"] == "cor-1" and out["events"]["cursor"] > 7  # the readable part
        assert out["damage"] == {
            "findings": [f"event log: {what}"],
            "inspectable": True,
            "message": f"task 'cor-1' is damaged; run `taskctx doctor cor-1{_db_opt(db)}` for every finding; "
            "restore the database from a backup, or start the task again under a new --task-id",
        }
        assert res.stderr == f"warning: task cor-1 is damaged: event log: {what}\n"
    else:
        line = (
            f"task 'cor-1': the event log is damaged: {what}; run `taskctx doctor cor-1{_db_opt(db)}` for every "
            "finding; restore the database from a backup, or start the task again under a new --task-id; "
            "inspect cannot show it either"
        )
        assert out == {
            "task_id": "cor-1",
            "state": None,
            "damage": {"findings": [f"event log: {what}"], "inspectable": False, "message": line},
        }
        assert res.stderr.splitlines()[-1] == f"error: {line}"


def test_every_event_row_deleted_is_damage_to_every_command(copy_of: str, tmp_path: Path) -> None:
    """The log lost all its rows, the checkpoint has folded 13 events: ``inspect`` (text and
    JSON), ``list`` and ``report`` judge it as ``doctor`` and ``resume`` do, never "not started"."""
    db = copy_of
    _sql("DELETE FROM taskctx_events")(db)
    finding = (
        "event log: ends at seq 0 but the checkpoint has folded 13 events: the last 13 events are missing from the log"
    )
    line = (
        f"task 'cor-1' is damaged: {finding}; run `taskctx doctor cor-1{_db_opt(db)}` for every finding; restore "
        "the database from a backup, or start the task again under a new --task-id; inspect cannot show it either"
    )
    doctor = _invoke(["doctor", "cor-1", "--db", db])
    assert doctor.exit_code == 2 and doctor.output.splitlines()[:2] == ["task cor-1: 1 problem", f"  - {finding}"]
    resume = _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")])
    assert resume.exit_code == 2 and _one_line_error(resume) == f"error: {line}"
    shown = _invoke(["inspect", "cor-1", "--db", db])
    assert shown.exit_code == 2 and shown.output == f"error: {line}\n"
    js = _invoke(["inspect", "cor-1", "--db", db, "--json"])
    assert js.exit_code == 2 and js.stderr == f"error: {line}\n"
    assert json.loads(js.stdout) == {
        "task_id": "cor-1",
        "state": None,
        "damage": {"findings": [finding], "inspectable": False, "message": line},
    }
    listed = _invoke(["list", "--db", db, "--json"])
    assert listed.exit_code == 0
    (row,) = json.loads(listed.stdout)
    assert (row["status"], row["events"], row["damaged"]) == ("damaged", 0, [finding])
    table = _invoke(["list", "--db", db])
    assert "not started" not in table.output
    assert table.output.splitlines()[-1] == f"task cor-1 is damaged: {finding}; see `taskctx doctor cor-1{_db_opt(db)}`"
    report = _invoke(["report", "cor-1", "--db", db, "--html", str(tmp_path / "r.html")])
    assert report.exit_code == 2 and report.output == f"error: {line}\n"
    assert not (tmp_path / "r.html").exists()


def test_the_events_table_dropped_is_one_judgement(copy_of: str, tmp_path: Path) -> None:
    """The table gone: every command names the damage with the same line. (On Postgres the resume
    re-creates the table empty: from then on it is the case of every row deleted, judged alike.)"""
    db = copy_of
    _sql("DROP TABLE taskctx_events")(db)
    if "://" in db:
        assert _invoke(["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")]).exit_code == 2
        test_every_event_row_deleted_is_damage_to_every_command(db, tmp_path)
        return
    outs = {
        cmd[0] + ("-json" if "--json" in cmd else ""): _invoke(cmd)
        for cmd in (
            ["doctor", "cor-1", "--db", db],
            ["resume", "cor-1", "--db", db, "--out", str(tmp_path / "runs")],
            ["inspect", "cor-1", "--db", db],
            ["inspect", "cor-1", "--db", db, "--json"],
            ["list", "--db", db],
            ["report", "cor-1", "--db", db, "--html", str(tmp_path / "r.html")],
        )
    }
    lines = {k: _one_line_error(r) for k, r in outs.items()}
    assert {r.exit_code for r in outs.values()} == {2}
    assert len(set(lines.values())) == 1, lines
    assert "table taskctx_events is missing" in lines["doctor"] and "restore it from a backup" in lines["doctor"]


def test_an_altered_request_is_damage_to_inspect_json_and_report_as_to_doctor(copy_of: str, tmp_path: Path) -> None:
    """A request altered to another valid text at seq 1: the fold no longer equals the checkpoint.
    ``doctor`` and ``resume`` say so; ``inspect`` (text and ``--json``) and ``report`` judge alike."""
    import json

    db = copy_of
    _alter_payload("task.created", lambda p: {**p, "original_request": "delete every upload"}, 0)(db)
    doctor = _invoke(["doctor", "cor-1", "--db", db])
    assert doctor.exit_code == 2 and doctor.output.splitlines()[0] == "task cor-1: 1 problem"
    finding = doctor.output.splitlines()[1].removeprefix("  - ")
    assert finding.startswith("checkpoint: its state differs from the event log's fold up to seq 13 in identity")
    res = _invoke(["inspect", "cor-1", "--db", db, "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["damage"]["findings"] == [finding]
    text = _invoke(["inspect", "cor-1", "--db", db])
    assert text.exit_code == 0 and text.stderr.splitlines()[0] == f"warning: task cor-1 is damaged: {finding}"
    page = tmp_path / "r.html"
    rep = _invoke(["report", "cor-1", "--db", db, "--html", str(page)])
    assert rep.exit_code == 2 and rep.stderr.startswith(f"error: task 'cor-1' is damaged: {finding}; ")
    assert not page.exists()
