"""Code and data that changed between runs. The event log and the checkpoint
carry a data schema version; data of a newer version is refused, a schema-0 task (recorded before
versions) resumes by its tested migration; a checkpoint whose fields the code no longer reads the
same way is refused (its state is not the log's fold); a replay's trajectory is fingerprinted and
``resume`` refuses another file under the same task id."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import SqliteStores, replay
from context.models import SCHEMA_VERSION, Progress
from graphs import open_project
from graphs.cli import app

TRAJ = [
    {"id": "sv-1", "task": "Look around.\nDo not modify setup.py.", "n_steps": 5, "meta": {}},
    *[
        {
            "step": i,
            "thought": f"look {i}",
            "action": json.dumps({"name": "cat", "arguments": {"path": f"f{i}.py"}}),
            "observation": f"f{i} body\n" * 4,
        }
        for i in range(1, 6)
    ],
]


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, Path]:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in TRAJ) + "\n", encoding="utf-8")
    db = tmp_path / "s.sqlite"
    res = CliRunner().invoke(app, ["replay", str(f), "--db", str(db), "--out", str(tmp_path / "o"), "--max-steps", "2"])
    assert res.exit_code == 0, res.output
    return db, f


def _resume(db: Path, tmp_path: Path) -> Any:
    return CliRunner().invoke(app, ["resume", "sv-1", "--db", str(db), "--out", str(tmp_path / "o")])


def test_the_task_records_its_schema_version(started: tuple[Path, Path]) -> None:
    db, _ = started
    events = SqliteStores(db).events.read("sv-1")
    assert events[0].payload["schema_version"] == SCHEMA_VERSION == 4
    assert replay(events).events.schema_version == 4
    with open_project(db) as p:
        tup = p.checkpointer.get_tuple({"configurable": {"thread_id": "sv-1"}})
        assert tup.checkpoint["channel_values"]["events"].schema_version == 4


def _put_checkpoint(db: Path, **parts: Any) -> None:
    """A new latest checkpoint of sv-1 whose parts are replaced (stands for data another version of
    the code wrote, or a state edited behind the log)."""
    with open_project(db) as p:
        cfg = {"configurable": {"thread_id": "sv-1", "checkpoint_ns": ""}}
        tup = p.checkpointer.get_tuple(cfg)
        cp = dict(tup.checkpoint)
        cp["channel_values"] = {**cp["channel_values"], **parts}
        cp["id"] = cp["id"][:-4] + "ffff"  # sorts after the current one
        p.checkpointer.put(tup.config, cp, tup.metadata, {})


def test_a_renamed_field_read_as_its_default_is_refused_not_reset(started: tuple[Path, Path], tmp_path: Path) -> None:
    db, _ = started
    # the old code's checkpoint, read by code whose field was renamed: executor_steps comes back as 0
    with open_project(db) as p:
        old = p.checkpointer.get_tuple({"configurable": {"thread_id": "sv-1"}}).checkpoint["channel_values"]
    assert old["progress"].executor_steps == 2
    _put_checkpoint(db, progress=Progress(**{**old["progress"].model_dump(), "executor_steps": 0}))
    before = SqliteStores(db).events.last_seq("sv-1")
    res = _resume(db, tmp_path)
    assert res.exit_code == 2, res.output
    assert "checkpoint: its state differs from the event log's fold up to seq" in res.output
    assert "in progress" in res.output
    assert SqliteStores(db).events.last_seq("sv-1") == before  # nothing ran on it


@pytest.mark.parametrize("where", ["log", "checkpoint"])
def test_data_of_a_newer_schema_is_refused_with_a_named_error(
    started: tuple[Path, Path], tmp_path: Path, where: str
) -> None:
    db, _ = started
    if where == "log":
        conn = sqlite3.connect(db)
        p = json.loads(conn.execute("SELECT payload FROM taskctx_events WHERE seq = 1").fetchone()[0])
        conn.execute("UPDATE taskctx_events SET payload = ? WHERE seq = 1", (json.dumps({**p, "schema_version": 7}),))
        conn.commit()
        conn.close()
    else:
        with open_project(db) as pr:
            ev = pr.checkpointer.get_tuple({"configurable": {"thread_id": "sv-1"}}).checkpoint["channel_values"][
                "events"
            ]
        _put_checkpoint(db, events=ev.model_copy(update={"schema_version": 7}))
    res = _resume(db, tmp_path)
    assert res.exit_code == 2
    name = "event log: recorded" if where == "log" else "checkpoint: written"
    assert (
        f"{name} with taskctx data schema 7, newer than this taskctx's ({SCHEMA_VERSION}): upgrade taskctx"
        in " ".join(res.output.split())
    )


def test_a_schema_0_task_resumes_by_its_migration(started: tuple[Path, Path], tmp_path: Path) -> None:
    """Schema 0 -> 1: a task recorded before versions (no schema_version, no constraint_sources)
    resumes unchanged and stays schema 0."""
    db, _ = started
    conn = sqlite3.connect(db)
    p = json.loads(conn.execute("SELECT payload FROM taskctx_events WHERE seq = 1").fetchone()[0])
    del p["schema_version"], p["constraint_sources"]
    conn.execute("UPDATE taskctx_events SET payload = ? WHERE seq = 1", (json.dumps(p),))
    conn.commit()
    conn.close()
    with open_project(db) as pr:
        vals = pr.checkpointer.get_tuple({"configurable": {"thread_id": "sv-1"}}).checkpoint["channel_values"]
    # what the old code's checkpoint held: no version, no constraint sources (read as their defaults)
    _put_checkpoint(
        db,
        events=vals["events"].model_copy(update={"schema_version": 0}),
        identity=vals["identity"].model_copy(update={"constraint_sources": {}}),
    )
    res = _resume(db, tmp_path)
    assert res.exit_code == 0, res.output
    events = SqliteStores(db).events.read("sv-1")
    state = replay(events)
    assert state.control.status == "completed" and state.events.schema_version == 0
    assert state.progress.executor_steps == 5


def test_resume_refuses_a_trajectory_that_changed(started: tuple[Path, Path], tmp_path: Path) -> None:
    db, f = started
    spec = SqliteStores(db).tasks.get("sv-1")
    assert spec is not None and len(str(spec["sha256"])) == 64
    f.write_text(f.read_text(encoding="utf-8").replace("f3 body", "f3 BODY"), encoding="utf-8")
    before = SqliteStores(db).events.last_seq("sv-1")
    res = _resume(db, tmp_path)
    assert res.exit_code == 2
    line = " ".join(res.output.split())
    assert f"the trajectory {f} changed since task 'sv-1' was started from it" in line
    assert "restore it, or replay the new file under a new --task-id" in line and "taskctx resume" not in line
    assert SqliteStores(db).events.last_seq("sv-1") == before
    shutil.copy(f, tmp_path / "copy.jsonl")  # the same bytes back: resumes
    f.write_text(f.read_text(encoding="utf-8").replace("f3 BODY", "f3 body"), encoding="utf-8")
    assert _resume(db, tmp_path).exit_code == 0
