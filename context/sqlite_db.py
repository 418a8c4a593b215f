"""Opening a SQLite file for taskctx: read-write (WAL, the schema created) or read-only."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from .db_schema import TASKCTX_TABLES, not_taskctx_message, schema_sql
from .errors import NotTaskctxDatabaseError, StoreOpenError

__all__ = ["SqliteDb", "connect_readonly", "sqlite_tables"]

_SCHEMA = schema_sql(bigint="INTEGER", blob="BLOB")


class SqliteDb:
    """One SQLite file opened for taskctx: its connection, path and write lock.

    Args:
        path: The file (its folder is created), or ``":memory:"``.
        readonly: Open an existing file read-only (creates nothing).

    Raises:
        StoreOpenError: The file cannot be opened or created, is damaged, or (read-only) is
            missing or lost one of the taskctx tables.
        NotTaskctxDatabaseError: Read-only, the file holds no taskctx tables.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = str(path)
        self.readonly = readonly
        if readonly:
            self.conn = connect_readonly(self.path)
            missing = [t for t in TASKCTX_TABLES if t not in sqlite_tables(self.conn)]
            if missing:
                self.conn.close()
                if len(missing) < len(TASKCTX_TABLES):  # a taskctx database that lost a table
                    raise StoreOpenError(
                        f"the taskctx database at {self.path} is damaged (table {', '.join(missing)} is missing): "
                        "restore it from a backup, or pass another --db"
                    )
                raise NotTaskctxDatabaseError(not_taskctx_message(self.path))
            self.lock = threading.Lock()
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            if "malformed" not in str(exc) and "not a database" not in str(exc):
                raise StoreOpenError(
                    f"cannot open the taskctx database at {self.path}: {exc}; "
                    "pass --db with a writable file path (its folder is created)"
                ) from exc
            raise StoreOpenError(
                f"the taskctx database at {self.path} is damaged ({exc}): restore it from a backup, "
                "or pass another --db"
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise StoreOpenError(
                f"cannot open the taskctx database at {self.path}: {exc}; "
                "pass --db with a writable file path (its folder is created)"
            ) from exc
        self.lock = threading.Lock()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def connect_readonly(path: str) -> sqlite3.Connection:
    """Open an existing SQLite file read-only (``file:...?mode=ro`` URI).

    It never creates the file, a table or a journal mode.

    Args:
        path: The SQLite file.

    Returns:
        The connection (autocommit, usable from any thread).

    Raises:
        StoreOpenError: The file does not exist, or is a damaged SQLite file ("malformed":
            truncated, pages overwritten).
        NotTaskctxDatabaseError: The file is not a SQLite database.
    """
    p = Path(path)
    if not p.is_file():
        raise StoreOpenError(f"no database at {path}; pass the --db the task was started with")
    try:
        conn = sqlite3.connect(
            p.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False, isolation_level=None, timeout=30
        )
    except sqlite3.Error as exc:
        raise StoreOpenError(f"cannot open the taskctx database at {path} read-only: {exc}; check --db") from exc
    try:
        sqlite_tables(conn)
    except sqlite3.DatabaseError as exc:  # "file is not a database", or a damaged one
        conn.close()
        if "malformed" in str(exc):  # a SQLite file that lost pages (truncated, overwritten)
            raise StoreOpenError(
                f"the taskctx database at {path} is damaged ({exc}): restore it from a backup, or pass another --db"
            ) from exc
        raise NotTaskctxDatabaseError(not_taskctx_message(path)) from exc
    return conn


def sqlite_tables(conn: sqlite3.Connection) -> set[str]:
    """The tables of a SQLite database.

    Args:
        conn: A connection to it.

    Returns:
        The names of its tables.
    """
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
