"""A full disk and a lock held too long name their real cause, with real SQLite errors."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from context import SqliteStores, new_event
from context.sqlite_db import LOCK_WAIT_SECONDS
from graphs.cli.core import describe, disk_full


def _created(n: int = 0) -> object:
    return new_event("task.created", {"task_id": "t1", "original_request": "do it " + "x" * n}, actor="user")


def test_a_full_disk_during_an_append_names_the_disk_and_keeps_every_event(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    stores = SqliteStores(db)
    stores.events.append("t1", [_created()])
    conn = stores.events._db.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # no page more: SQLite's SQLITE_FULL
    with pytest.raises(sqlite3.OperationalError) as got:
        stores.events.append("t1", [_created(200_000)])
    assert str(got.value) == "database or disk is full"  # not the failed ROLLBACK's "no transaction is active"
    assert got.value.sqlite_errorcode == sqlite3.SQLITE_FULL
    assert [e.seq for e in stores.events.read("t1")] == [1]
    assert not conn.in_transaction
    stores.close()
    assert disk_full(got.value)
    assert describe(got.value, str(db), task_id="t1") == (
        f"database {db} cannot be written: the disk that holds it is full (database or disk is full); every event "
        f"recorded before is kept (nothing half written); free space on that file system, then run the command "
        f"again (`taskctx resume t1 --db {db}` continues the task)"
    )
    again = SqliteStores(db)
    assert [e.seq for e in again.events.append("t1", [_created()])] == [2]  # the space back: it continues
    again.close()


def test_enospc_of_a_file_write_is_the_full_disk_too() -> None:
    exc = OSError(errno.ENOSPC, "No space left on device")
    assert disk_full(exc)
    assert describe(exc, "x.sqlite") == (
        "database x.sqlite cannot be written: the disk that holds it is full ([Errno 28] No space left on device); "
        "every event recorded before is kept (nothing half written); free space on that file system, then run "
        "the command again"
    )


def test_a_lock_held_longer_than_the_wait_names_the_other_program(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    stores = SqliteStores(db)
    stores.events.append("t1", [_created()])
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program's lock
    stores.events._db.conn.execute("PRAGMA busy_timeout = 100")  # the wait, short for the test
    with pytest.raises(sqlite3.OperationalError) as got:
        stores.events.append("t1", [_created()])
    assert str(got.value) == "database is locked"
    holder.execute("ROLLBACK")
    holder.close()
    assert describe(got.value, str(db), task_id="t1") == (
        f"database {db} is locked: another program has held a lock on the file for longer than the "
        f"{LOCK_WAIT_SECONDS} s wait (find it with `fuser {db}` or `lsof {db}`); nothing was lost; once it lets "
        f"go, run the command again (`taskctx resume t1 --db {db}` continues the task): retrying continues"
    )
    assert [e.seq for e in stores.events.append("t1", [_created()])] == [2]  # retrying continues
    stores.close()
