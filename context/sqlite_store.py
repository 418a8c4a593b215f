"""The SQLite stores: the event log, the artifact store and the task registry of one file.

Each masks every secret-shaped value before it writes (:mod:`context.secrets`) and checks what
it reads back (:mod:`context.store`). They live beside the LangGraph checkpointer's tables, on a
connection of their own, in WAL mode.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .artifact_refs import make_ref, parse_ref, slice_lines
from .errors import ArtifactNotFoundError, SequenceConflictError
from .events import Event
from .lease import TaskLeases
from .lineage import Lineage, chained, chained_count, lineage_of_row
from .secrets import masked_bytes, masked_events
from .sqlite_db import LOCK_WAIT_SECONDS, SqliteDb, rollback
from .store import (
    checked_artifact,
    contiguous,
    duplicate_message,
    event_row,
    events_sql,
    forget_append,
    lenient_events,
    note_append,
    number_events,
    packed,
    registry_spec,
    row_event,
    writer_words,
)
from .text import json_text

__all__ = ["ArtifactStore", "EventLog", "SqliteStores", "TaskRegistry"]


#: Rows :meth:`EventLog.iter` fetches from SQLite at a time.
_BATCH = 256


class EventLog:
    """Append-only event log per task (``task_id`` = LangGraph ``thread_id``), ``seq`` = 1, 2, ...

    ``append`` is one transaction and checks that its first ``seq`` follows the log's last one,
    so two writers can never interleave a task's events; while another live process holds the
    task's lease (:mod:`context.lease`) it is refused. A forked task's reads include its parent's
    prefix (:mod:`context.lineage`).

    Args:
        db: The open file.
        leases: The file's task leases (None: no fence).
    """

    def __init__(self, db: SqliteDb, leases: TaskLeases | None = None):
        self._db = db
        self._leases = leases
        self._lineage: dict[str, Lineage | None] = {}

    def last_seq(self, task_id: str) -> int:
        """The last ``seq`` of a task's log.

        Args:
            task_id: The task.

        Returns:
            The seq (0 for a log without events).
        """
        row = self._db.one("SELECT COALESCE(MAX(seq), 0) FROM taskctx_events WHERE task_id = ?", (task_id,))
        return int(row[0])

    def count(self, task_id: str) -> int:
        """How many rows a task's log holds (``last_seq`` when no row is missing or repeated).

        A fork's count holds its parent's prefix rows (:mod:`context.lineage`).

        Args:
            task_id: The task.
        """

        def own(tid: str, upto: int | None) -> int:
            sql = "SELECT COUNT(*) FROM taskctx_events WHERE task_id = ?" + ("" if upto is None else " AND seq <= ?")
            args = (tid,) if upto is None else (tid, upto)
            return int(self._db.one(sql, args)[0])

        return chained_count(self, own, task_id)

    def append(self, task_id: str, events: Sequence[Event]) -> list[Event]:
        """Append events atomically, secrets masked (:func:`context.secrets.masked_events`).

        Args:
            task_id: The task.
            events: The events; one that carries a ``seq`` must continue the log exactly, one
                with ``seq == 0`` gets the next number.

        Returns:
            The events as written (masked, ``seq`` set).

        Raises:
            SequenceConflictError: A ``seq`` does not continue the log, or an event is already in it.
            DamagedStoreError: The events continue past the log's end (it lost its last events).
            LeaseHeldError: Another live process holds the task's lease (:class:`LeaseLostError`: this
                process held it and lost it; it writes nothing more for the task).
        """
        if not events:
            return []
        events = masked_events(events)
        with self._db.lock:
            conn = self._db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if self._leases is not None:
                    self._leases.check(conn, task_id)
                last = self.last_seq(task_id)
                conflict = any(e.seq and e.seq != last + 1 + i for i, e in enumerate(events))
                writer = writer_words(self._db.path, self, task_id, last) if conflict else None
                out = number_events(task_id, events, last, writer)
                for e in out:
                    dup = conn.execute("SELECT task_id, seq FROM taskctx_events WHERE id = ?", (e.id,)).fetchone()
                    if dup is not None:
                        raise SequenceConflictError(duplicate_message(e, dup[0], dup[1]))
                    conn.execute("INSERT INTO taskctx_events VALUES (?,?,?,?,?,?,?,?,?)", event_row(task_id, e))
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            note_append(self._db.path, self, task_id, out[-1].seq)
        if self._leases is not None:
            self._leases.recorded(task_id, out)
        return out

    def discard_fork(self, task_id: str) -> bool:
        """Remove a fork that failed before it was done: a log that is one ``task.forked`` row and nothing else.

        Args:
            task_id: The child task.

        Returns:
            True when its row was removed; False when its log is not a lone ``task.forked`` (nothing removed).
        """
        with self._db.lock:
            conn = self._db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute("SELECT kind FROM taskctx_events WHERE task_id = ?", (task_id,)).fetchall()
                lone = [r[0] for r in rows] == ["task.forked"]
                if lone:
                    conn.execute("DELETE FROM taskctx_events WHERE task_id = ?", (task_id,))
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            if lone:
                self._lineage.pop(task_id, None)
                forget_append(self._db.path, task_id)
        return lone

    def read(
        self,
        task_id: str,
        after: int = 0,
        limit: int | None = None,
        kinds: Sequence[str] | None = None,
        *,
        damaged_rows: dict[int, list[str]] | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Event]:
        """The events of a task after a seq, in order.

        Args:
            task_id: The task.
            after: Only events with ``seq > after``.
            limit: At most this many events (with ``kinds``: of the matching ones).
            kinds: Only events of these kinds, filtered in SQL (the other payloads are never
                read or parsed).
            damaged_rows: For a check of the whole log: nothing raises; a row that does not
                parse is skipped and its findings kept here under its seq
                (:func:`~context.store.lenient_events`), and a gap is left to the caller (``check_events``
                names it).
            fields: With ``kinds``: each payload holds only these top-level keys, extracted in
                SQL (a key the payload lacks is ``None``): a view that sums a few numbers of
                many large events.

        Returns:
            The events.

        Raises:
            DamagedStoreError: Without ``damaged_rows``: an unfiltered read has a gap, or a kind
                or payload does not parse (:func:`~context.store.row_event`, :func:`~context.store.contiguous`).
        """
        return list(self.iter(task_id, after, limit, kinds, damaged_rows=damaged_rows, fields=fields))

    def iter(
        self,
        task_id: str,
        after: int = 0,
        limit: int | None = None,
        kinds: Sequence[str] | None = None,
        *,
        damaged_rows: dict[int, list[str]] | None = None,
        fields: Sequence[str] | None = None,
    ) -> Iterator[Event]:
        """As :meth:`read`, one event at a time, fetched in batches (the log is never held whole).

        A forked task's log is its parent's rows up to the fork seq, read where they are, then its
        own (:func:`context.lineage.chained`).

        Args:
            task_id: The task.
            after: Only events with ``seq > after``.
            limit: At most this many events (with ``kinds``: of the matching ones).
            kinds: Only events of these kinds, filtered in SQL (the other payloads are never
                read or parsed).
            damaged_rows: For a check of the whole log: nothing raises; a row that does not
                parse is skipped and its findings kept here under its seq
                (:func:`~context.store.lenient_events`), and a gap is left to the caller (``check_events``
                names it).
            fields: With ``kinds``: each payload holds only these top-level keys, extracted in
                SQL (a key the payload lacks is ``None``): a view that sums a few numbers of
                many large events.

        Yields:
            The events.

        Raises:
            DamagedStoreError: As :meth:`read`.
        """

        def own(tid: str, start: int, upto: int | None, lim: int | None) -> Iterator[Event]:
            return self._own(tid, start, upto, lim, kinds, damaged_rows, fields)

        yield from chained(self, own, task_id, after, limit)

    def _own(
        self,
        task_id: str,
        after: int,
        upto: int | None,
        limit: int | None,
        kinds: Sequence[str] | None,
        damaged_rows: dict[int, list[str]] | None,
        fields: Sequence[str] | None,
    ) -> Iterator[Event]:
        """The task's own rows with ``after < seq <= upto`` (a fork's prefix is its parent's: :meth:`iter`)."""
        pre: tuple[object, ...] = ()
        payload = "payload"
        if fields is not None:
            payload = f"json_object({', '.join(['?, payload -> ?'] * len(fields))})"
            pre = tuple(x for f in fields for x in (f, f"$.{f}"))
        kinds = None if kinds is None else [kinds] if isinstance(kinds, str) else list(kinds)
        if kinds is not None and not kinds:
            return
        raw = self._pages(task_id, after, upto, limit, kinds or (), payload, pre)
        if damaged_rows is not None:
            yield from lenient_events(task_id, raw, damaged_rows)
            return
        rows = (row_event(task_id, row) for row in raw)
        yield from (rows if kinds is not None else contiguous(task_id, rows, after))

    def _pages(
        self,
        task_id: str,
        after: int,
        upto: int | None,
        limit: int | None,
        kinds: Sequence[str],
        payload: str,
        pre: tuple[object, ...],
    ) -> Iterator[Any]:
        """The rows in pages of ``_BATCH`` by seq, each read whole holding the lock.

        No statement stays open between pages: an open read on the shared connection would pin an
        old snapshot, and another thread's append on it would then fail at once ("database is locked").
        """
        left = limit
        while left is None or left > 0:
            page = _BATCH if left is None else min(left, _BATCH)
            sql, args = events_sql("?", payload, task_id, after, upto, page, kinds)
            rows = self._db.all(sql, (*pre, *args))
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1][0]  # (the seq as stored: a damaged row is named by the reader, not here)
            left = None if left is None else left - len(rows)

    def lineage(self, task_id: str) -> Lineage | None:
        """Where a forked task's log comes from (:mod:`context.lineage`), from its first own row.

        Args:
            task_id: The task.

        Returns:
            Its parent and fork seq; None when it is not a fork (or has no events).

        Raises:
            DamagedStoreError: Its ``task.forked`` row does not parse or is out of place.
        """
        if task_id in self._lineage:
            return self._lineage[task_id]
        row = self._db.one(
            "SELECT seq, kind, payload FROM taskctx_events WHERE task_id = ? ORDER BY seq LIMIT 1", (task_id,)
        )
        out = lineage_of_row(task_id, row)
        if row is not None:  # a task's first row never changes: known for good
            self._lineage[task_id] = out
        return out

    def task_ids(self) -> list[str]:
        """The ids of the tasks with events, sorted."""
        rows = self._db.all("SELECT DISTINCT task_id FROM taskctx_events ORDER BY task_id")
        return [r[0] for r in rows]


class ArtifactStore:
    """Content-addressed store of bytes (``artifact://sha256:<hex>``), exact but for secrets.

    ``get(ref)`` returns the bytes stored, or the lines a ``#L<start>-<end>`` fragment names
    (1-based, inclusive).
    """

    def __init__(self, db: SqliteDb):
        self._db = db

    def put(self, data: bytes | str) -> str:
        """Store bytes with their secrets masked (:func:`context.secrets.masked_bytes`).

        Storing bytes already there writes nothing (and compresses nothing: the digest is looked
        up first).

        Args:
            data: The bytes; a ``str`` is stored as UTF-8, losslessly (a lone surrogate as its
                ``surrogatepass`` bytes: :func:`context.text.to_bytes`).

        Returns:
            The ref of what was stored (``artifact://sha256:<hex>`` of the masked bytes).
        """
        raw = masked_bytes(data)
        ref = make_ref(raw)
        with self._db.lock:
            conn = self._db.conn
            if conn.execute("SELECT 1 FROM taskctx_artifacts WHERE digest = ?", (ref.digest,)).fetchone() is None:
                conn.execute("INSERT INTO taskctx_artifacts VALUES (?,?,?)", (ref.digest, len(raw), packed(raw)))
        return str(ref)

    def get(self, ref: str) -> bytes:
        """The bytes stored for a ref (secrets masked at ``put``), or its line slice.

        Args:
            ref: ``artifact://sha256:<hex>``, optionally with ``#L<a>-<b>``.

        Returns:
            The bytes, or lines ``a..b`` of them.

        Raises:
            InvalidRefError: ``ref`` is not a ref.
            ArtifactNotFoundError: Nothing is stored for it.
            DamagedStoreError: The bytes stored do not match the ref's hash (:func:`checked_artifact`).
        """
        r = parse_ref(ref)
        row = self._db.one(  # (as a blob: a row rewritten as text may hold bytes that are not UTF-8)
            "SELECT CAST(data AS BLOB), size FROM taskctx_artifacts WHERE digest = ?", (r.digest,)
        )
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}; check --db")
        data = checked_artifact(r, row[0], self._db.path, row[1])
        return data if r.start is None else slice_lines(data, r.start, r.end or r.start)

    def size(self, ref: str) -> int:
        """The recorded size of a ref's bytes.

        Args:
            ref: The artifact ref.

        Returns:
            The size in bytes, as recorded at ``put``.

        Raises:
            ArtifactNotFoundError: Nothing is stored for it.
        """
        r = parse_ref(ref)
        row = self._db.one("SELECT size FROM taskctx_artifacts WHERE digest = ?", (r.digest,))
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}")
        return int(row[0])


class TaskRegistry:
    """How each task was started (JSON spec: kind, source, model, budget).

    ``resume`` rebuilds the same graph from it.
    """

    def __init__(self, db: SqliteDb):
        self._db = db

    def register(self, task_id: str, spec: dict[str, object]) -> None:
        """Record (or replace) how a task was started.

        Args:
            task_id: The task.
            spec: Its start spec (JSON-serialisable).
        """
        with self._db.lock:
            self._db.conn.execute(
                "INSERT OR REPLACE INTO taskctx_tasks VALUES (?, ?)", (task_id, json_text(spec, sort_keys=True))
            )

    def unregister(self, task_id: str) -> None:
        """Remove a task's row (a fork that failed takes back what it wrote); none is fine.

        Args:
            task_id: The task.
        """
        with self._db.lock:
            self._db.conn.execute("DELETE FROM taskctx_tasks WHERE task_id = ?", (task_id,))

    def get(self, task_id: str) -> dict[str, object] | None:
        """How a task was started.

        Args:
            task_id: The task.

        Returns:
            Its spec, or None when it was not registered.

        Raises:
            DamagedStoreError: Its row is not a JSON object (:func:`registry_spec`).
        """
        row = self._db.one("SELECT spec FROM taskctx_tasks WHERE task_id = ?", (task_id,))
        return None if row is None else registry_spec(task_id, row[0])

    def task_ids(self) -> list[str]:
        """Ids of the registered tasks, sorted."""
        rows = self._db.all("SELECT task_id FROM taskctx_tasks ORDER BY task_id")
        return [r[0] for r in rows]


class SqliteStores:
    """The event log, artifact store and task registry of one SQLite file, on one connection.

    ``SqliteStores(":memory:")`` gives throwaway stores for tests. The project's file (default
    ``.taskctx/taskctx.sqlite``) also holds the LangGraph checkpointer's tables.

    Args:
        path: The SQLite file (its folder is created), or ``":memory:"``.
        readonly: Open an existing file with a ``mode=ro`` URI and create nothing; writes then
            raise ``sqlite3.OperationalError``.

    Raises:
        StoreOpenError: The file cannot be opened or created (read-only: it is missing).
        NotTaskctxDatabaseError: Read-only, the file holds no taskctx tables.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False):
        self._db = SqliteDb(path, readonly=readonly)
        self.path = self._db.path
        #: the task leases (:mod:`context.lease`): one writer per task
        self.leases = TaskLeases(None if readonly or self.path == ":memory:" else self._connect, "sqlite")
        self.events = EventLog(self._db, self.leases)
        self.artifacts = ArtifactStore(self._db)
        self.tasks = TaskRegistry(self._db)

    @property
    def lock(self) -> threading.RLock:
        """The lock every access of the stores' connection holds, reentrant (another connection may share it)."""
        return self._db.lock

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A new connection to the file, closed at the end (the leases' own, one per use)."""
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=LOCK_WAIT_SECONDS)
        try:
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
