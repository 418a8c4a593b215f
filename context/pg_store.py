"""The event log, artifact store and task registry on Postgres (``--db postgresql://...``).

The same interface and tables as :class:`context.sqlite_store.SqliteStores`, for several worker
processes on one database: an append takes a per-task advisory lock, every call runs on a checked
pooled connection and is retried when the connection drops. psycopg is imported when a URL is
opened, so ``context`` works without it.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from . import pg_server
from .db_schema import TASKCTX_TABLES, not_taskctx_message, schema_sql
from .errors import (
    NotTaskctxDatabaseError,
    SequenceConflictError,
    ServerLostError,
    StoreError,
    StoreOpenError,
)
from .events import Event
from .lease import TaskLeases
from .lineage import Lineage, chained, chained_count, lineage_of_row
from .pg_server import (
    forget_lost,
    known_lost,
    lost_server_message,
    mark_lost,
    quiet_pool_reconnects,
    server_unreachable,
)
from .pg_tables import PgArtifactStore, PgTaskRegistry
from .secrets import masked_events
from .sqlite_store import SqliteStores
from .store import (
    contiguous,
    duplicate_message,
    event_row,
    events_sql,
    forget_append,
    lenient_events,
    note_append,
    number_events,
    row_event,
    writer_words,
)

__all__ = [
    "APPLICATION_NAME",
    "SCHEMA_LOCK",
    "PgArtifactStore",
    "PgEventLog",
    "PgStores",
    "PgTaskRegistry",
    "is_postgres_url",
    "open_stores",
    "redact_url",
]

_T = TypeVar("_T")

#: ``application_name`` of the stores' connections.
APPLICATION_NAME = "taskctx-store"

_URL_RE = re.compile(r"^postgres(ql)?(\+\w+)?://", re.I)
#: classid of every advisory lock taskctx takes (objid = a hash of the task id).
_LOCK_CLASS = 0x7A5C
#: The advisory lock key the stores take while creating their schema; the Postgres
#: checkpointer and long-term store setup (``graphs``) take ``SCHEMA_LOCK + 1`` and ``+ 2``.
SCHEMA_LOCK = 0x7A5C0001

_SCHEMA = schema_sql(bigint="BIGINT", blob="BYTEA", real="DOUBLE PRECISION")


def is_postgres_url(db: object) -> bool:
    """Whether a ``--db`` value is a Postgres URL.

    Args:
        db: The value (any object; only a string can be a URL).

    Returns:
        True for ``postgresql://...`` / ``postgres://...`` strings.
    """
    return isinstance(db, str) and bool(_URL_RE.match(db.strip()))


def redact_url(url: str) -> str:
    """A URL fit for messages.

    Args:
        url: A database URL.

    Returns:
        ``url`` with its password replaced by ``***``.
    """
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def _lock_key(task_id: str) -> int:
    """A stable signed 32-bit key for the task's advisory lock."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:4], "big", signed=True)


def _plain_url(url: str) -> str:
    """The URL as psycopg wants it (``postgresql://``; SQLAlchemy-style ``postgresql+psycopg://`` too)."""
    return re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url.strip(), flags=re.I)


class _Pg:
    """A checked connection pool plus the retry rule every store call goes through."""

    def __init__(
        self,
        url: str,
        *,
        max_size: int = 4,
        check: bool = True,
        retries: int = 3,
        connect_timeout: int = 10,
        readonly: bool = False,
    ):
        try:  # (imported here: psycopg is optional, the postgres extra)
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout

            from .pg_bounded import BoundedConnection, NoAnswerError, tcp_settings
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreOpenError(
                f"--db {redact_url(url)} needs psycopg: pip install 'taskctx[postgres]' "
                "(psycopg[binary], psycopg-pool, langgraph-checkpoint-postgres)"
            ) from exc
        self._psycopg = psycopg
        self._pool_timeout = PoolTimeout
        self._no_answer = NoAnswerError
        self.url = _plain_url(url)
        self.path = redact_url(self.url)
        self.retries = retries
        #: calls retried after a dropped connection (diagnostics)
        self.retried = 0
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": APPLICATION_NAME,
            "connect_timeout": connect_timeout,
            "answer_wait": pg_server.SERVER_WAIT_SECONDS,
            **tcp_settings(pg_server.SERVER_WAIT_SECONDS),
        }
        if readonly:  # every transaction of these sessions is read-only: no DDL, no writes
            kwargs["options"] = "-c default_transaction_read_only=on"
        try:
            # one direct connection first: a clear error for a wrong URL, and the schema (or,
            # read-only, the check that the taskctx tables exist)
            with BoundedConnection.connect(self.url, **kwargs) as conn:
                if readonly:
                    found = conn.execute(
                        "SELECT " + ", ".join("to_regclass(%s)" for _ in TASKCTX_TABLES), TASKCTX_TABLES
                    ).fetchone()
                    if found is None or any(t is None for t in found):
                        raise NotTaskctxDatabaseError(not_taskctx_message(self.path))
                else:
                    with conn.transaction():
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                        conn.execute(_SCHEMA)
        except psycopg.Error as exc:
            raise StoreOpenError(
                f"cannot open the taskctx database at {self.path}: {' '.join(str(exc).split())}; "
                "check the URL (postgresql://user[:password]@host:port/dbname) and that the server runs"
            ) from exc
        forget_lost(self.url)  # it answered just now
        quiet_pool_reconnects()
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max_size,
            kwargs=kwargs,
            connection_class=BoundedConnection,
            open=True,
            timeout=pg_server.SERVER_WAIT_SECONDS,
            check=ConnectionPool.check_connection if check else None,
            name="taskctx-store",
        )

    def run(self, fn: Callable[[Any, int], _T]) -> _T:
        """``fn(conn, attempt)`` on a pooled connection; retried when the connection drops."""
        psycopg = self._psycopg
        delay = 0.05
        for attempt in range(self.retries + 1):
            if (cause := known_lost(self.url)) is not None:  # found lost before: no second wait
                raise ServerLostError(lost_server_message(self.path, cause))
            try:
                with self.pool.connection() as conn:
                    return fn(conn, attempt)
            except self._pool_timeout as exc:  # no connection within the wait: a lost server, or a busy pool
                if (cause := server_unreachable(self.url)) is not None:
                    mark_lost(self.url, cause)
                    raise ServerLostError(lost_server_message(self.path, cause)) from exc
                raise StoreError(
                    f"no free connection to {self.path}: all {self.pool.max_size} pooled connections stayed busy "
                    f"for {self.pool.timeout:g} s (or the server refuses new ones: check its max_connections)"
                ) from exc
            except psycopg.OperationalError as exc:
                # a query the server never answered: ask it at once (a retry would wait again)
                if attempt >= self.retries or isinstance(exc, self._no_answer):
                    if (cause := server_unreachable(self.url)) is not None:
                        mark_lost(self.url, cause)
                        raise ServerLostError(lost_server_message(self.path, cause)) from exc
                if attempt >= self.retries:
                    raise StoreError(
                        f"lost the connection to {self.path} {self.retries + 1} times: "
                        f"{' '.join(str(exc).split())}; check that the server runs"
                    ) from exc
                self.retried += 1
                time.sleep(delay)
                delay *= 4
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self.pool.close()


class PgEventLog:
    """Append-only event log per task on Postgres.

    An append is one transaction that first takes a per-task transaction-scoped advisory lock
    (``pg_advisory_xact_lock``), so writers of different tasks never wait for each other; the
    ``(task_id, seq)`` primary key and the unique event ``id`` back the check up. An append whose
    COMMIT was sent but not acknowledged is recognised on retry by its event ids and not written
    twice.
    """

    def __init__(self, db: _Pg, leases: TaskLeases | None = None):
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

        def q(conn: Any, _: int) -> int:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM taskctx_events WHERE task_id = %s", (task_id,)
            ).fetchone()
            return int(row[0])

        return self._db.run(q)

    def count(self, task_id: str) -> int:
        """How many rows a task's log holds (``last_seq`` when no row is missing or repeated).

        Args:
            task_id: The task.
        """

        def own(tid: str, upto: int | None) -> int:
            sql = "SELECT COUNT(*) FROM taskctx_events WHERE task_id = %s" + ("" if upto is None else " AND seq <= %s")
            args = (tid,) if upto is None else (tid, upto)
            return int(self._db.run(lambda conn, _: conn.execute(sql, args).fetchone()[0]))

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
            StoreError: The connection dropped more times than the retries allow.
            LeaseHeldError: Another live process holds the task's lease (:class:`LeaseLostError`: this
                process held it and lost it; it writes nothing more for the task).
        """
        if not events:
            return []
        events = masked_events(events)
        ids = [e.id for e in events]

        def tx(conn: Any, attempt: int) -> list[Event]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, _lock_key(task_id)))
                if self._leases is not None:
                    self._leases.check(conn, task_id)
                found = conn.execute(
                    "SELECT id, task_id, seq FROM taskctx_events WHERE id = ANY(%s)", (ids,)
                ).fetchall()
                if found:
                    where = {r[0]: (r[1], int(r[2])) for r in found}
                    if attempt > 0 and len(where) == len(ids) and all(where[i][0] == task_id for i in ids):
                        # the COMMIT of an earlier attempt went through before the connection dropped
                        seqs = [where[i][1] for i in ids]
                        return [e.model_copy(update={"seq": s}) for e, s in zip(events, seqs)]
                    first = next(e for e in events if e.id in where)
                    raise SequenceConflictError(duplicate_message(first, *where[first.id]))
                row = conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM taskctx_events WHERE task_id = %s", (task_id,)
                ).fetchone()
                last = int(row[0])
                conflict = any(e.seq and e.seq != last + 1 + i for i, e in enumerate(events))
                writer = writer_words(self._db.path, self, task_id, last) if conflict else None
                out = number_events(task_id, events, last, writer)
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO taskctx_events VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        [event_row(task_id, e) for e in out],
                    )
                return out

        try:
            written = self._db.run(tx)
        except self._db._psycopg.errors.UniqueViolation as exc:  # the lock makes this a backstop only
            raise SequenceConflictError(
                f"task {task_id!r}: a concurrent append took these sequence numbers ({exc.diag.message_primary}); "
                "run one writer per thread_id"
            ) from exc
        note_append(self._db.path, self, task_id, written[-1].seq)
        if self._leases is not None:
            self._leases.recorded(task_id, written)
        return written

    def discard_fork(self, task_id: str) -> bool:
        """Remove a fork that failed before it was done: a log that is one ``task.forked`` row and nothing else.

        Args:
            task_id: The child task.

        Returns:
            True when its row was removed; False when its log is not a lone ``task.forked`` (nothing removed).
        """

        def tx(conn: Any, _: int) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, _lock_key(task_id)))
                rows = conn.execute("SELECT kind FROM taskctx_events WHERE task_id = %s", (task_id,)).fetchall()
                if [r[0] for r in rows] != ["task.forked"]:
                    return False
                conn.execute("DELETE FROM taskctx_events WHERE task_id = %s", (task_id,))
                return True

        lone = bool(self._db.run(tx))
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
        """The events of a task after a seq, in order, checked as the SQLite log checks them.

        Args:
            task_id: The task.
            after: Only events with ``seq > after``.
            limit: At most this many events (with ``kinds``: of the matching ones).
            kinds: Only events of these kinds, filtered in SQL (the other payloads are never
                read or parsed).
            damaged_rows: As the SQLite log's (nothing raises; damaged rows kept here by seq).
            fields: With ``kinds``: each payload holds only these top-level keys, extracted in SQL.

        Returns:
            The events (a fork's: its parent's prefix, then its own).

        Raises:
            DamagedStoreError: Without ``damaged_rows``: an unfiltered read has a gap, or a kind
                or payload does not parse.
        """
        return list(self.iter(task_id, after, limit, kinds, damaged_rows=damaged_rows, fields=fields))

    def _own(
        self,
        task_id: str,
        after: int,
        upto: int | None,
        limit: int | None,
        kinds: Sequence[str] | None,
        damaged_rows: dict[int, list[str]] | None,
        fields: Sequence[str] | None,
    ) -> list[Event]:
        """The task's own rows with ``after < seq <= upto`` (a fork's prefix is its parent's: :meth:`iter`)."""
        pre: tuple[Any, ...] = ()
        payload = "payload"
        if fields is not None:
            payload = f"json_build_object({', '.join(['%s::text, payload::json -> %s::text'] * len(fields))})::text"
            pre = tuple(x for f in fields for x in (f, f))
        kinds = None if kinds is None else [kinds] if isinstance(kinds, str) else list(kinds)
        if kinds is not None and not kinds:
            return []
        sql, args = events_sql("%s", payload, task_id, after, upto, limit, kinds or ())
        args = (*pre, *args)

        def q(conn: Any, _: int) -> list[Event]:
            if damaged_rows is not None:
                return list(lenient_events(task_id, conn.execute(sql, args).fetchall(), damaged_rows))
            rows = (row_event(task_id, r) for r in conn.execute(sql, args).fetchall())
            return list(rows if kinds is not None else contiguous(task_id, rows, after))

        return self._db.run(q)

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
        sql = "SELECT seq, kind, payload FROM taskctx_events WHERE task_id = %s ORDER BY seq LIMIT 1"
        row = self._db.run(lambda conn, _: conn.execute(sql, (task_id,)).fetchone())
        out = lineage_of_row(task_id, row)
        if row is not None:  # a task's first row never changes: known for good
            self._lineage[task_id] = out
        return out

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
        """As :meth:`read` (its arguments), one event at a time, each segment read whole.

        A fork's prefix is its parent's rows (:func:`context.lineage.chained`).

        Yields:
            The events.
        """

        def own(tid: str, start: int, upto: int | None, lim: int | None) -> Iterator[Event]:
            return iter(self._own(tid, start, upto, lim, kinds, damaged_rows, fields))

        yield from chained(self, own, task_id, after, limit)

    def task_ids(self) -> list[str]:
        """The ids of the tasks with events, sorted."""

        def q(conn: Any, _: int) -> list[str]:
            return [
                r[0] for r in conn.execute("SELECT DISTINCT task_id FROM taskctx_events ORDER BY task_id").fetchall()
            ]

        return self._db.run(q)


class PgStores:
    """The event log, artifact store and task registry of one Postgres database.

    Connections carry ``application_name=taskctx-store`` (visible in ``pg_stat_activity``).

    Args:
        url: ``postgresql://user[:password]@host:port/dbname`` (``postgresql+psycopg://`` too).
        max_size: Connections in the pool (one process).
        check: Test each connection before use (turn off only to exercise the retry path in
            tests).
        retries: Retries per call after a dropped connection (short backoff).
        readonly: No DDL, every session read-only (``default_transaction_read_only``).

    Raises:
        StoreOpenError: psycopg is not installed, or the database cannot be reached.
        NotTaskctxDatabaseError: Read-only, the taskctx tables are missing.
    """

    def __init__(self, url: str, *, max_size: int = 4, check: bool = True, retries: int = 3, readonly: bool = False):
        self._db = _Pg(url, max_size=max_size, check=check, retries=retries, readonly=readonly)
        self.path = self._db.path
        self.url = self._db.url
        #: the task leases (:mod:`context.lease`): one writer per task
        self.leases = TaskLeases(None if readonly else self._connect, "postgres")
        self.events = PgEventLog(self._db, self.leases)
        self.artifacts = PgArtifactStore(self._db)
        self.tasks = PgTaskRegistry(self._db)

    def _connect(self) -> Any:
        """A new connection of the leases' own (a context manager that closes it)."""
        from .pg_bounded import BoundedConnection, tcp_settings

        wait = pg_server.SERVER_WAIT_SECONDS
        return BoundedConnection.connect(
            self.url,
            autocommit=True,
            application_name=APPLICATION_NAME,
            connect_timeout=10,
            answer_wait=wait,
            **tcp_settings(wait),
        )

    @property
    def retried(self) -> int:
        """Calls retried after a dropped connection so far (diagnostics)."""
        return self._db.retried

    @property
    def pool(self) -> Any:
        """The ``psycopg_pool.ConnectionPool`` (for diagnostics and tests)."""
        return self._db.pool

    def close(self) -> None:
        """Close the connection pool."""
        self._db.close()


def open_stores(db: str) -> SqliteStores | PgStores:
    """Open the stores of a database, SQLite or Postgres.

    Args:
        db: A ``postgresql://`` URL, a SQLite file path or ``":memory:"``.

    Returns:
        ``PgStores`` for a URL, else ``SqliteStores``.
    """
    return PgStores(db) if is_postgres_url(db) else SqliteStores(db)
