"""``taskctx resume`` checks a long log in bounded cost
(:func:`graphs.diagnosis.quick_diagnose`; the whole-log check stays in ``taskctx doctor``), and
artifact rows are stored zlib-compressed when that is shorter (old raw rows read unchanged)."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context import DamagedStoreError, SqliteStores
from context.artifact_refs import make_ref
from context.store import packed, unpacked
from graphs import diagnosis as doctor
from graphs.cli import app
from graphs.diagnosis import diagnose, quick_diagnose
from graphs.project import Project

TRAJ = [
    {"id": "long-1", "task": "Find where the config is read.", "n_steps": 4, "meta": {}},
    *[
        {
            "step": i,
            "thought": f"look {i}",
            "action": json.dumps({"name": "cat", "arguments": {"path": f"f{i}.py"}}),
            "observation": f"line one of f{i}\n" * (3 + i),
        }
        for i in range(1, 5)
    ],
]


@pytest.fixture()
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Task long-1 stopped after 3 executor steps; every log counts as long (over 3 events)."""
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in TRAJ) + "\n", encoding="utf-8")
    path = tmp_path / "d.sqlite"
    res = CliRunner().invoke(
        app, ["replay", str(f), "--db", str(path), "--out", str(tmp_path / "runs"), "--max-steps", "3"]
    )
    assert res.exit_code == 0, res.output
    monkeypatch.setattr(doctor, "FULL_CHECK_EVENTS", 3)
    return path


def _findings(path: Path) -> tuple[list[str] | None, list[str]]:
    project = Project(str(path), readonly=True)
    try:
        st, cp = project.stores, project.checkpointer
        return quick_diagnose(st, cp, "long-1"), diagnose(st, cp, "long-1", artifacts=False)
    finally:
        project.close()


def _sql(path: Path, sql: str) -> None:
    c = sqlite3.connect(path)
    c.execute(sql)
    c.commit()
    c.close()


def test_a_healthy_long_log_passes_the_bounded_check(db: Path) -> None:
    assert _findings(db) == ([], [])


def test_a_missing_middle_row_is_found_by_the_row_count(db: Path) -> None:
    c = sqlite3.connect(db)
    last = c.execute("SELECT MAX(seq) FROM taskctx_events").fetchone()[0]
    c.close()
    _sql(db, "DELETE FROM taskctx_events WHERE seq = 7")
    quick, full = _findings(db)
    assert quick == [
        f"event log: holds {last - 1} rows but its seqs run from 1 to {last}: a row is missing or repeated"
    ]
    assert full == ["event log: event seq 7 is missing (seq 6 is followed by 8)"]


def test_missing_last_rows_are_found_against_the_checkpoint_cursor(db: Path) -> None:
    _sql(db, "DELETE FROM taskctx_events WHERE seq > (SELECT MAX(seq) - 2 FROM taskctx_events)")
    quick, full = _findings(db)
    assert quick is not None and len(quick) == 1
    assert quick[0].endswith("the last 2 events are missing from the log") and quick == full


def test_an_altered_payload_before_the_cursor_is_left_to_the_doctor(db: Path) -> None:
    """The bounded check's stated limit: a payload changed before the checkpoint's cursor keeps
    the seqs whole, so only the full fold (``taskctx doctor``) finds it."""
    c = sqlite3.connect(db)
    seq, payload = c.execute(
        "SELECT seq, payload FROM taskctx_events WHERE kind = 'tool.result.received' ORDER BY seq LIMIT 1"
    ).fetchone()
    c.execute(
        "UPDATE taskctx_events SET payload = ? WHERE seq = ?",
        (json.dumps({**json.loads(payload), "result_summary": "nothing here"}), seq),
    )
    c.commit()
    c.close()
    quick, full = _findings(db)
    assert quick == []
    assert len(full) == 1 and full[0].startswith("checkpoint: its state differs from the event log's fold up to seq")


def test_a_damaged_event_after_the_cursor_is_found(db: Path) -> None:
    c = sqlite3.connect(db)
    cols = [r[1] for r in c.execute("PRAGMA table_info(taskctx_events)")]
    row = dict(zip(cols, c.execute("SELECT * FROM taskctx_events ORDER BY seq DESC LIMIT 1").fetchone()))
    row.update(seq=row["seq"] + 1, id="ev-added", kind="tool.exploded")
    c.execute(f"INSERT INTO taskctx_events ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})", list(row.values()))
    c.commit()
    c.close()
    quick, _ = _findings(db)
    assert quick is not None and len(quick) == 1 and "unknown kind 'tool.exploded'" in quick[0]


def test_artifacts_are_stored_compressed_when_shorter(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "a.sqlite")
    text = b"the same prompt line\n" * 200
    ref = stores.artifacts.put(text)
    short = stores.artifacts.put(b"ab")
    data, size = stores._db.conn.execute(
        "SELECT data, size FROM taskctx_artifacts WHERE digest = ?", (ref.split(":")[-1],)
    ).fetchone()
    assert size == 4200 and data == zlib.compress(text, 6) and len(data) < 100
    assert stores.artifacts.get(ref) == text and stores.artifacts.get(short) == b"ab"
    assert stores.artifacts.get(ref + "#L2-3") == b"the same prompt line\n" * 2
    assert ref == str(make_ref(text))  # the ref hashes the raw bytes
    assert stores._db.conn.execute("SELECT data FROM taskctx_artifacts WHERE size = 2").fetchone()[0] == b"ab"
    stores.close()


def test_an_old_uncompressed_row_reads_unchanged(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "a.sqlite")
    text = b"x = 1\n" * 100
    ref = make_ref(text)
    stores._db.conn.execute("INSERT INTO taskctx_artifacts VALUES (?,?,?)", (ref.digest, len(text), text))
    assert stores.artifacts.get(str(ref)) == text
    stores.close()


def test_bytes_after_the_compressed_stream_are_damage(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "a.sqlite")
    text = b"the same prompt line\n" * 200
    ref = stores.artifacts.put(text)
    stores._db.conn.execute("UPDATE taskctx_artifacts SET data = data || X'0A'")
    with pytest.raises(DamagedStoreError, match="do not match their hash"):
        stores.artifacts.get(ref)
    stores.close()


def test_packed_and_unpacked() -> None:
    raw = b"abc" * 100
    assert packed(raw) == zlib.compress(raw, 6) and unpacked(packed(raw), len(raw)) == raw
    assert packed(b"a") == b"a" and unpacked(b"a", 1) == b"a"
    assert unpacked(b"not zlib", 100) == b"not zlib"  # returned as stored; the hash check rejects it


def test_inspect_of_a_long_log_shows_what_the_full_fold_shows(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over FULL_CHECK_EVENTS, ``inspect`` starts from the checkpoint (checked, the tail folded
    on) and reads only the kinds it lists: the same page as the whole-log fold."""
    import graphs.inspection as inspect_cmd

    starts: list[bool] = []  # did inspect start from the checkpoint (quick_state gave a state)?

    def spy(*a, **kw):
        out = doctor.quick_state(*a, **kw)
        starts.append(out is not None and out[0] is not None)
        return out

    monkeypatch.setattr(inspect_cmd, "quick_state", spy)
    args = ["inspect", "long-1", "--db", str(db)]
    fast = CliRunner().invoke(app, args)
    assert starts == [True]  # the fast path ran (else both pages would come from the full fold)
    monkeypatch.setattr(doctor, "FULL_CHECK_EVENTS", 10**9)
    full = CliRunner().invoke(app, args)
    assert starts == [True, False]
    assert fast.exit_code == full.exit_code == 0
    assert fast.output == full.output and "Model calls by role" in fast.output


def test_count_and_compressed_artifacts(stores) -> None:
    text = b"the same prompt line\n" * 200
    ref = stores.artifacts.put(text)
    assert stores.artifacts.get(ref) == text and stores.artifacts.size(ref) == 4200
    assert stores.artifacts.get(ref + "#L2-3") == b"the same prompt line\n" * 2
    assert stores.events.count("no-such-task") == 0
