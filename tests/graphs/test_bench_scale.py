"""The scale bench's resume start-up reading: the first event a resume appends and its time."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from graphs.bench.scale import first_new_event, last_seq


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "s.sqlite"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE taskctx_events (task_id TEXT, seq INTEGER, kind TEXT, timestamp TEXT)")
    c.executemany(
        "INSERT INTO taskctx_events VALUES (?, ?, ?, ?)",
        [
            ("t", 1, "task.created", "2026-12-01T06:00:00.000Z"),
            ("t", 2, "tool.called", "2026-12-01T06:00:01.250Z"),
            ("t", 3, "resume.started", "2026-12-01T07:10:05.125Z"),
            ("t", 4, "context.built", "2026-12-01T07:10:05.300Z"),
            ("u", 9, "task.created", "2026-12-01T08:00:00.000Z"),
        ],
    )
    c.commit()
    c.close()
    return db


def test_first_new_event_is_the_kind_and_epoch_seconds_of_the_event_after_seq(tmp_path: Path) -> None:
    db = _db(tmp_path)
    assert last_seq(db, "t") == 4
    assert last_seq(db, "nobody") == 0
    kind, at = first_new_event(db, "t", 2)
    assert kind == "resume.started"
    assert at == datetime(2026, 12, 1, 7, 10, 5, 125000, tzinfo=UTC).timestamp() == 1796109005.125
    with pytest.raises(RuntimeError, match=r"resume of 't' appended no event after seq 4"):
        first_new_event(db, "t", 4)
