"""The event log, artifact store and task registry on Postgres (``--db postgresql://...``).

Same interface as :class:`context.store.SqliteStores` (``.events``, ``.artifacts``, ``.tasks``,
``.close()``, ``.path``) and the same tables (``taskctx_events``, ``taskctx_artifacts``,
``taskctx_tasks``), for several worker processes on one database:

* ``EventLog.append`` is one transaction that first takes a per-task transaction-scoped advisory
  lock (``pg_advisory_xact_lock``), then checks that the events continue the log exactly
  (``SequenceConflictError`` otherwise) and inserts them; the ``(task_id, seq)`` primary key and
  the unique event ``id`` back the check up. Writers of different tasks never wait for each other.
* Every call runs on a connection from a ``psycopg_pool.ConnectionPool`` that checks a connection
  before handing it out, and is retried (3 times, short backoff) when the connection drops
  (``psycopg.OperationalError``, e.g. ``pg_terminate_backend`` or a server restart). An append
  whose COMMIT was sent but not acknowledged is recognised on retry by its event ids and not
  written twice.
* Connections carry ``application_name=taskctx-store`` (visible in ``pg_stat_activity``).

psycopg is imported lazily: ``context`` works without it; opening a ``postgresql://`` URL
without it raises ``StoreOpenError`` naming the package to install. This module never imports
langgraph or langchain.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .errors import (
    ArtifactNotFoundError,
    NotTaskctxDatabaseError,
    SequenceConflictError,
    StoreError,
    StoreOpenError,
)
from .events import Event
from .secrets import masked_bytes, masked_events
from .store import (
    TASKCTX_TABLES,
    SqliteStores,
    checked_artifact,
    contiguous,
    duplicate_message,
    event_row,
    lenient_events,
    make_ref,
    not_taskctx_message,
    number_events,
    packed,
    parse_ref,
    registry_spec,
    row_event,
    schema_sql,
    slice_lines,
)
from .text import json_text

__all__ = [
    "APPLICATION_NAME",
    "PgArtifactStore",
    "PgEventLog",
    "PgStores",
    "PgTaskRegistry",
    "SCHEMA_LOCK",
    "is_postgres_url",
    "open_stores",
    "redact_url",
]

T = TypeVar("T")

#: ``application_name`` of the stores' connections.
APPLICATION_NAME = "taskctx-store"

_URL_RE = re.compile(r"^postgres(ql)?(\+\w+)?://", re.I)
#: classid of every advisory lock taskctx takes (objid = a hash of the task id).
_LOCK_CLASS = 0x7A5C
#: key of the advisory lock the stores' schema set-up takes (graphs: +1 the checkpointer's, +2 the memory store's).
SCHEMA_LOCK = 0x7A5C0001

_SCHEMA = schema_sql(bigint="BIGINT", blob="BYTEA")


def is_postgres_url(db: object) -> bool:
    """True for ``postgresql://...`` / ``postgres://...`` strings."""
    return isinstance(db, str) and bool(_URL_RE.match(db.strip()))


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def _lock_key(task_id: str) -> int:
    """A stable signed 32-bit key for the task's advisory lock."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:4], "big", signed=True)


def _plain_url(url: str) -> str:
    """psycopg wants ``postgresql://``; accept SQLAlchemy-style ``postgresql+psycopg://`` too."""
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
        try:
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreOpenError(
                f"--db {redact_url(url)} needs psycopg: pip install 'taskctx[postgres]' "
                "(psycopg[binary], psycopg-pool, langgraph-checkpoint-postgres)"
            ) from exc
        self._psycopg = psycopg
        self._pool_timeout = PoolTimeout
        self.url = _plain_url(url)
        self.path = redact_url(self.url)
        self.retries = retries
        #: calls retried after a dropped connection (diagnostics)
        self.retried = 0
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": APPLICATION_NAME,
            "connect_timeout": connect_timeout,
        }
        if readonly:  # every transaction of these sessions is read-only: no DDL, no writes
            kwargs["options"] = "-c default_transaction_read_only=on"
        try:
            # one direct connection first: a clear error for a wrong URL, and the schema (or,
            # read-only, the check that the taskctx tables exist)
            with psycopg.connect(self.url, **kwargs) as conn:
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
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max_size,
            kwargs=kwargs,
            open=True,
            timeout=30,
            check=ConnectionPool.check_connection if check else None,
            name="taskctx-store",
        )

    def run(self, fn: Callable[[Any, int], T]) -> T:
        """``fn(conn, attempt)`` on a pooled connection; retried when the connection drops."""
        psycopg = self._psycopg
        delay = 0.05
        for attempt in range(self.retries + 1):
            try:
                with self.pool.connection() as conn:
                    return fn(conn, attempt)
            except self._pool_timeout as exc:  # every pooled connection busy: not a dropped one
                raise StoreError(
                    f"no free connection to {self.path}: all {self.pool.max_size} pooled connections stayed busy "
                    f"for {self.pool.timeout:g} s (or the server refuses new ones: check its max_connections)"
                ) from exc
            except psycopg.OperationalError as exc:
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
    """Append-only event log per task on Postgres (see module doc)."""

    def __init__(self, db: _Pg):
        self._db = db

    def last_seq(self, task_id: str) -> int:
        def q(conn: Any, _: int) -> int:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM taskctx_events WHERE task_id = %s", (task_id,)
            ).fetchone()
            return int(row[0])

        return self._db.run(q)

    def count(self, task_id: str) -> int:
        """How many rows ``task_id``'s log holds (``last_seq`` when no row is missing or repeated)."""

        def q(conn: Any, _: int) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM taskctx_events WHERE task_id = %s", (task_id,)).fetchone()[0])

        return self._db.run(q)

    def append(self, task_id: str, events: Sequence[Event]) -> list[Event]:
        """Append ``events`` atomically, secrets masked (:func:`context.secrets.masked_events`);
        returns them as written (masked, ``seq`` set).

        Events that carry a ``seq`` must continue the log exactly (``SequenceConflictError``
        otherwise); events with ``seq == 0`` get the next numbers.
        """
        if not events:
            return []
        events = masked_events(events)
        ids = [e.id for e in events]

        def tx(conn: Any, attempt: int) -> list[Event]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, _lock_key(task_id)))
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
                out = number_events(task_id, events, int(row[0]))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO taskctx_events VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        [event_row(task_id, e) for e in out],
                    )
                return out

        try:
            return self._db.run(tx)
        except self._db._psycopg.errors.UniqueViolation as exc:  # the lock makes this a backstop only
            raise SequenceConflictError(
                f"task {task_id!r}: a concurrent append took these sequence numbers ({exc.diag.message_primary}); "
                "run one writer per thread_id"
            ) from exc

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
        """Events of ``task_id`` with ``seq > after``, in order; with ``kinds``, only events of
        those kinds (``kind IN (...)`` in SQL; ``limit`` counts the matching events). Checked as
        :meth:`context.store.EventLog.iter` checks (``DamagedStoreError``; with ``damaged_rows``
        nothing raises; ``fields``: only these payload keys, extracted in SQL: see there)."""
        args: tuple[Any, ...] = ()
        payload = "payload"
        if fields is not None:
            payload = f"json_build_object({', '.join(['%s::text, payload::json -> %s::text'] * len(fields))})::text"
            args = tuple(x for f in fields for x in (f, f))
        sql = (
            f"SELECT seq, id, kind, timestamp, actor, {payload}, causation_id, correlation_id "
            "FROM taskctx_events WHERE task_id = %s AND seq > %s"
        )
        args += (task_id, after)
        if kinds is not None:
            kinds = [kinds] if isinstance(kinds, str) else list(kinds)
            if not kinds:
                return []
            sql += f" AND kind IN ({', '.join(['%s'] * len(kinds))})"
            args += tuple(kinds)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT %s"
            args += (limit,)

        def q(conn: Any, _: int) -> list[Event]:
            if damaged_rows is not None:
                return list(lenient_events(task_id, conn.execute(sql, args).fetchall(), damaged_rows))
            rows = (row_event(task_id, r) for r in conn.execute(sql, args).fetchall())
            return list(rows if kinds is not None else contiguous(task_id, rows, after))

        return self._db.run(q)

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
        """As :meth:`read`, one event at a time."""
        yield from self.read(task_id, after, limit, kinds, damaged_rows=damaged_rows, fields=fields)

    def task_ids(self) -> list[str]:
        def q(conn: Any, _: int) -> list[str]:
            return [
                r[0] for r in conn.execute("SELECT DISTINCT task_id FROM taskctx_events ORDER BY task_id").fetchall()
            ]

        return self._db.run(q)


class PgArtifactStore:
    """Content-addressed store of bytes (``artifact://sha256:<hex>``) on Postgres, secrets masked
    at ``put`` as in :class:`context.store.ArtifactStore`."""

    def __init__(self, db: _Pg):
        self._db = db

    def put(self, data: bytes | str) -> str:
        """Store ``data`` with its secrets masked and return its ref; storing bytes already there
        writes nothing (``ON CONFLICT DO NOTHING``; they are masked and compressed again). A ``str`` is stored as UTF-8,
        losslessly: a lone surrogate as its ``surrogatepass`` bytes (:func:`context.text.to_bytes`)."""
        raw = masked_bytes(data)
        ref = make_ref(raw)
        self._db.run(
            lambda conn, _: conn.execute(
                "INSERT INTO taskctx_artifacts VALUES (%s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                (ref.digest, len(raw), packed(raw)),
            )
        )
        return str(ref)

    def _row(self, ref: str, col: str) -> tuple[Any, Any]:
        r = parse_ref(ref)
        row = self._db.run(
            lambda conn, _: conn.execute(
                f"SELECT {col} FROM taskctx_artifacts WHERE digest = %s", (r.digest,)
            ).fetchone()
        )
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}; check --db")
        return r, row

    def get(self, ref: str) -> bytes:
        """The exact bytes of ``ref``, or of its ``#L<a>-<b>`` line slice; checked against the
        ref's hash (``DamagedStoreError``)."""
        r, row = self._row(ref, "data, size")
        data = checked_artifact(r, row[0], self._db.path, row[1])
        return data if r.start is None else slice_lines(data, r.start, r.end or r.start)

    def size(self, ref: str) -> int:
        return int(self._row(ref, "size")[1][0])


class PgTaskRegistry:
    """How each task was started (JSON spec), so ``resume`` can rebuild the same graph."""

    def __init__(self, db: _Pg):
        self._db = db

    def register(self, task_id: str, spec: dict[str, object]) -> None:
        self._db.run(
            lambda conn, _: conn.execute(
                "INSERT INTO taskctx_tasks VALUES (%s, %s) ON CONFLICT (task_id) DO UPDATE SET spec = EXCLUDED.spec",
                (task_id, json_text(spec, sort_keys=True)),
            )
        )

    def get(self, task_id: str) -> dict[str, object] | None:
        row = self._db.run(
            lambda conn, _: conn.execute("SELECT spec FROM taskctx_tasks WHERE task_id = %s", (task_id,)).fetchone()
        )
        return None if row is None else registry_spec(task_id, row[0])

    def task_ids(self) -> list[str]:
        """Ids of the registered tasks, sorted."""
        rows = self._db.run(
            lambda conn, _: conn.execute("SELECT task_id FROM taskctx_tasks ORDER BY task_id").fetchall()
        )
        return [r[0] for r in rows]


class PgStores:
    """The event log, artifact store and task registry of one Postgres database.

    ``max_size``: connections in the pool (one process); ``check``: test each connection before
    use (turn off only to exercise the retry path in tests); ``retries`` per call.
    ``readonly=True``: no DDL, every session read-only (``default_transaction_read_only``);
    raises ``NotTaskctxDatabaseError`` when the taskctx tables are missing.
    """

    def __init__(self, url: str, *, max_size: int = 4, check: bool = True, retries: int = 3, readonly: bool = False):
        self._db = _Pg(url, max_size=max_size, check=check, retries=retries, readonly=readonly)
        self.path = self._db.path
        self.url = self._db.url
        self.events = PgEventLog(self._db)
        self.artifacts = PgArtifactStore(self._db)
        self.tasks = PgTaskRegistry(self._db)

    @property
    def retried(self) -> int:
        """Calls retried after a dropped connection so far (diagnostics)."""
        return self._db.retried

    @property
    def pool(self) -> Any:
        """The ``psycopg_pool.ConnectionPool`` (for diagnostics and tests)."""
        return self._db.pool

    def close(self) -> None:
        self._db.close()


def open_stores(db: str) -> SqliteStores | PgStores:
    """``PgStores`` for a ``postgresql://`` URL, else ``SqliteStores`` for a file path or ``:memory:``."""
    return PgStores(db) if is_postgres_url(db) else SqliteStores(db)
