"""Opening a SQLite file for taskctx: read-write (WAL, the schema created) or read-only."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from .db_schema import TASKCTX_TABLES, not_taskctx_message, schema_sql
from .errors import NotTaskctxDatabaseError, StoreOpenError

__all__ = ["LOCK_WAIT_SECONDS", "SqliteDb", "connect_readonly", "read_only_media", "rollback", "sqlite_tables"]

#: Seconds a connection waits for another one's lock on the file before "database is locked".
LOCK_WAIT_SECONDS = 30


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back ``conn``'s open transaction; nothing when SQLite ended it already.

    SQLite rolls a transaction back itself on some errors (``SQLITE_FULL``: the disk is full),
    and a ``ROLLBACK`` then fails with "no transaction is active", an error that would hide the
    real one.

    Args:
        conn: An autocommit connection (``isolation_level=None``).
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


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
            self.lock = threading.RLock()
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=LOCK_WAIT_SECONDS
            )
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise _write_open_error(self.path, exc) from exc
        self.lock = threading.RLock()

    def one(self, sql: str, args: tuple[object, ...] = ()) -> Any:
        """The first row of a query, read holding :attr:`lock` (one thread at a time on the connection)."""
        with self.lock:
            return self.conn.execute(sql, args).fetchone()

    def all(self, sql: str, args: tuple[object, ...] = ()) -> list[Any]:
        """Every row of a query, read holding :attr:`lock`."""
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()


def _write_open_error(path: str, exc: BaseException) -> StoreOpenError:
    """The error of a read-write open that failed, naming its cause: damage, read-only media, other."""
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in str(exc) or "not a database" in str(exc)):
        return StoreOpenError(
            f"the taskctx database at {path} is damaged ({exc}): restore it from a backup, or pass another --db"
        )
    if path != ":memory:" and read_only_media(path):
        return StoreOpenError(
            f"cannot write the taskctx database at {path}: it is on read-only media (or its folder is not writable "
            f"by this user: {exc}); inspect, list, doctor and report still read it; to run the task, copy the file "
            "(with any -wal beside it) to a writable folder and pass that --db"
        )
    return StoreOpenError(
        f"cannot open the taskctx database at {path}: {exc}; "
        "pass --db with a writable file path (its folder is created)"
    )


def connect_readonly(path: str) -> sqlite3.Connection:
    """Open an existing SQLite file read-only (``file:...?mode=ro`` URI).

    It never creates the file, a table or a journal mode. On read-only media, where ``mode=ro``
    cannot make the ``-shm`` a WAL file needs, a file with no pending write-ahead log (no
    ``-wal``, or an empty one) is opened ``immutable=1``.

    Args:
        path: The SQLite file.

    Returns:
        The connection (autocommit, usable from any thread).

    Raises:
        StoreOpenError: The file does not exist, is a damaged SQLite file ("malformed":
            truncated, pages overwritten), or cannot be read (a read-only folder with a pending
            write-ahead log; the cause named).
        NotTaskctxDatabaseError: The file is not a SQLite database.
    """
    p = Path(path)
    if not p.is_file():
        raise StoreOpenError(f"no database at {path}; pass the --db the task was started with")
    try:
        return _checked(path, _connect_uri(p, "?mode=ro"))
    except sqlite3.OperationalError as exc:  # mode=ro still needs the -shm beside a WAL file: a read-only folder
        if _wal_pending(p):
            raise StoreOpenError(
                f"cannot read the taskctx database at {path}: {exc}, and its write-ahead log ({p.name}-wal, "
                f"{Path(str(p) + '-wal').stat().st_size} bytes) holds changes not yet in the file, which only a "
                "writable folder can replay; copy the file with its -wal to a writable folder and pass that --db"
            ) from exc
    try:  # nothing pending: the file is the whole database, and immutable=1 reads it without -shm or locks
        return _checked(path, _connect_uri(p, "?mode=ro&immutable=1"))
    except sqlite3.OperationalError as exc:
        raise StoreOpenError(
            f"cannot read the taskctx database at {path}: {exc}; check --db and its permissions"
        ) from exc


def _connect_uri(p: Path, query: str) -> sqlite3.Connection:
    return sqlite3.connect(
        p.resolve().as_uri() + query, uri=True, check_same_thread=False, isolation_level=None, timeout=LOCK_WAIT_SECONDS
    )


def _wal_pending(p: Path) -> bool:
    """Whether the file's write-ahead log holds frames (a ``-wal`` file of nonzero size)."""
    try:
        return Path(str(p) + "-wal").stat().st_size > 0
    except OSError:
        return False


def _checked(path: str, conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` once its tables can be listed; a file that is not SQLite, or a damaged one, is named so.

    Raises:
        sqlite3.OperationalError: The file cannot be read (e.g. its ``-shm`` cannot be made).
    """
    try:
        sqlite_tables(conn)
    except sqlite3.OperationalError as exc:
        conn.close()
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            raise
        return _not_sqlite(path, exc)
    except sqlite3.DatabaseError as exc:  # "file is not a database", or a damaged one
        conn.close()
        return _not_sqlite(path, exc)
    return conn


def _not_sqlite(path: str, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
    if "malformed" in str(exc):  # a SQLite file that lost pages (truncated, overwritten)
        raise StoreOpenError(
            f"the taskctx database at {path} is damaged ({exc}): restore it from a backup, or pass another --db"
        ) from exc
    raise NotTaskctxDatabaseError(not_taskctx_message(path)) from exc


def read_only_media(path: str) -> bool:
    """Whether a SQLite file cannot be written where it is (read-only media, or no write permission).

    A read-only mount, or a folder or file this process may not write.

    Args:
        path: The file.

    Returns:
        True when the file or its folder is not writable.
    """
    p = Path(path).resolve()
    folder = p.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        pass
    return not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK))


def sqlite_tables(conn: sqlite3.Connection) -> set[str]:
    """The tables of a SQLite database.

    Args:
        conn: A connection to it.

    Returns:
        The names of its tables.
    """
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
