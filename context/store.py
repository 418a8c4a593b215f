"""The event log and the artifact store, in their own SQLite tables and connection.

* :class:`EventLog`: append-only, per task (``thread_id`` = ``task_id``), ``seq`` = 1, 2, ...
  ``append`` is one transaction and checks that its first ``seq`` follows the log's last one
  (``SequenceConflictError`` otherwise), so two writers can never interleave a task's events.
* :class:`ArtifactStore`: content-addressed bytes. ``put(data) -> "artifact://sha256:<hex>"``;
  ``get(ref)`` returns the bytes stored, or the lines a ``#L<start>-<end>`` fragment names
  (1-based, inclusive).

Both stores (and the Postgres ones) mask every secret-shaped value before they write anything:
``append`` the strings of each payload (:func:`context.secrets.masked_events`; the events it
returns, which the nodes fold, are the masked ones), ``put`` the bytes
(:func:`context.secrets.masked_bytes`; the ref hashes the masked bytes). That is the one masking
pass: every reader gets masked bytes.

Both live in the project's SQLite file (default ``.taskctx/taskctx.sqlite``) beside the
LangGraph checkpointer's tables, on a connection of their own, in WAL mode. A checkpoint never
re-serialises history (DESIGN.md "Durability"; measured: an append-only list in graph state costs
O(n²) bytes).

Errors: ``StoreOpenError`` (file cannot be opened: names the path), ``SequenceConflictError``,
``ArtifactNotFoundError``, ``InvalidRefError``.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .errors import (
    ArtifactNotFoundError,
    DamagedStoreError,
    InvalidRefError,
    NotTaskctxDatabaseError,
    SequenceConflictError,
    StoreOpenError,
)
from .events import PAYLOAD_MODELS, Event
from .secrets import masked_bytes, masked_events
from .text import json_text

__all__ = [
    "ArtifactRef",
    "ArtifactStore",
    "EventLog",
    "EventLogProtocol",
    "ArtifactStoreProtocol",
    "SqliteStores",
    "TASKCTX_TABLES",
    "TaskRegistry",
    "connect_readonly",
    "parse_ref",
    "make_ref",
    "slice_lines",
]

_REF_RE = re.compile(r"^artifact://sha256:([0-9a-f]{64})(?:#L(\d+)-(\d+))?$")


@dataclass(frozen=True)
class ArtifactRef:
    """A parsed ``artifact://sha256:<hex>[#L<start>-<end>]`` ref (lines 1-based, inclusive)."""

    digest: str
    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        base = f"artifact://sha256:{self.digest}"
        return base if self.start is None else f"{base}#L{self.start}-{self.end}"

    def with_lines(self, start: int, end: int) -> ArtifactRef:
        return ArtifactRef(self.digest, start, end)


def parse_ref(ref: str) -> ArtifactRef:
    """Parse a ref; raises ``InvalidRefError`` naming the expected form."""
    m = _REF_RE.match(ref.strip())
    if not m:
        raise InvalidRefError(f"not an artifact ref: {ref!r}; expected artifact://sha256:<64 hex>[#L<start>-<end>]")
    start = int(m.group(2)) if m.group(2) else None
    end = int(m.group(3)) if m.group(3) else None
    if start is not None and (start < 1 or end is None or end < start):
        raise InvalidRefError(f"bad line range in {ref!r}: need 1 <= start <= end")
    return ArtifactRef(m.group(1), start, end)


def make_ref(data: bytes) -> ArtifactRef:
    return ArtifactRef(hashlib.sha256(data).hexdigest())


def slice_lines(data: bytes, start: int, end: int) -> bytes:
    """Lines ``start..end`` (1-based, inclusive) of ``data``, with their line endings, byte-exact."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[start - 1 : end])


class EventLogProtocol(Protocol):
    def append(self, task_id: str, events: Sequence[Event]) -> list[Event]: ...
    def read(
        self,
        task_id: str,
        after: int = 0,
        limit: int | None = None,
        kinds: Sequence[str] | None = None,
        *,
        damaged_rows: dict[int, list[str]] | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Event]: ...
    def iter(
        self,
        task_id: str,
        after: int = 0,
        limit: int | None = None,
        kinds: Sequence[str] | None = None,
        *,
        damaged_rows: dict[int, list[str]] | None = None,
        fields: Sequence[str] | None = None,
    ) -> Iterator[Event]: ...
    def last_seq(self, task_id: str) -> int: ...
    def count(self, task_id: str) -> int: ...
    def task_ids(self) -> list[str]: ...


class ArtifactStoreProtocol(Protocol):
    def put(self, data: bytes | str) -> str: ...
    def get(self, ref: str) -> bytes: ...


def number_events(task_id: str, events: Sequence[Event], last: int) -> list[Event]:
    """``events`` numbered to continue a log whose last ``seq`` is ``last``; an event that already
    carries another ``seq`` raises ``SequenceConflictError`` (another writer got there first), or
    ``DamagedStoreError`` when the first one is past ``last + 1`` (the log lost its last events)."""
    out: list[Event] = []
    for i, e in enumerate(events):
        want = last + 1 + i
        if e.seq and e.seq > want and i == 0:
            raise damaged(
                task_id,
                "the event log",
                f"it ends at seq {last} but this run continues from seq {e.seq - 1}: "
                f"{e.seq - want} event{'s are' if e.seq - want > 1 else ' is'} missing from its end",
            )
        if e.seq and e.seq != want:
            raise SequenceConflictError(
                f"task {task_id!r}: event {e.kind} has seq {e.seq} but the log expects {want}; "
                "another process is writing this task: run one writer per thread_id"
            )
        out.append(e if e.seq == want else e.model_copy(update={"seq": want}))
    return out


def event_row(task_id: str, e: Event) -> tuple[object, ...]:
    """The ``taskctx_events`` row of a numbered event (same column order in SQLite and Postgres)."""
    return (
        task_id,
        e.seq,
        e.id,
        e.kind,
        e.timestamp,
        e.actor,
        json_text(e.payload, sort_keys=True),
        e.causation_id,
        e.correlation_id,
    )


#: What to do about a damaged task, in words: the end of every ``DamagedStoreError`` message of a
#: task (the CLI names its commands instead, with its ``--db``: ``graphs.report.hints``).
REPAIR_TEXT = "restore the database from a backup, or start the task again under a new task id"
#: What to do about a damaged artifact, in words.
ARTIFACT_TEXT = "restore the database from a backup"


def damaged(task_id: str, where: str, what: str, *, inspectable: bool | None = True) -> DamagedStoreError:
    """A ``DamagedStoreError``: ``task <id>: <where> is damaged: <what>; <what to do>``.

    Args:
        task_id: The damaged task.
        where: The part of the store, e.g. ``"the event log"``.
        what: What is wrong, one line.
        inspectable: Whether the task's view can still be shown (None: not known).

    Returns:
        The error, with ``task_id``, ``what`` (the message without what to do) and
        ``inspectable`` set for a caller that names its own commands.
    """
    head = f"task {task_id!r}: {where} is damaged: {what}"
    return DamagedStoreError(
        f"{head}; {REPAIR_TEXT}",
        [f"{where.removeprefix('the ')}: {what}"],
        task_id=task_id,
        what=head,
        inspectable=inspectable,
    )


def row_event(task_id: str, row: Sequence[Any]) -> Event:
    """The event of a ``taskctx_events`` row (``seq, id, kind, timestamp, actor, payload,
    causation_id, correlation_id``), unvalidated (fast) but checked for what would make every
    reader fail: a kind that is not an event kind, a payload that is not a JSON object
    (``DamagedStoreError`` naming the seq)."""
    seq = int(row[0])
    if row[2] not in PAYLOAD_MODELS:
        raise damaged(task_id, "the event log", f"event seq {seq} has an unknown kind {str(row[2])[:60]!r}")
    try:
        payload = json.loads(row[5])
    except (TypeError, ValueError) as exc:
        raise damaged(
            task_id, "the event log", f"event seq {seq} ({row[2]}) has a payload that is not JSON", inspectable=False
        ) from exc
    if not isinstance(payload, dict):
        raise damaged(
            task_id,
            "the event log",
            f"event seq {seq} ({row[2]}) has a payload that is not an object",
            inspectable=False,
        )
    return Event.model_construct(
        seq=seq,
        id=row[1],
        kind=row[2],
        timestamp=row[3],
        actor=row[4],
        payload=payload,
        causation_id=row[6],
        correlation_id=row[7],
    )


def contiguous(task_id: str, events: Iterator[Event], after: int) -> Iterator[Event]:
    """``events`` (an unfiltered read after seq ``after``), checked to number ``after+1,
    after+2, ...`` without a gap: a missing or reordered row raises ``DamagedStoreError``."""
    want = after + 1
    for e in events:
        if e.seq != want:
            raise damaged(task_id, "the event log", gap_finding(want, e.seq))
        want += 1
        yield e


def gap_finding(want: int, found: int) -> str:
    """What a read that expected seq ``want`` and found ``found`` says (no ``event log:`` prefix):
    ``event seq 7 is missing (seq 6 is followed by 8)``, or ``event seq 5 appears after seq 5``."""
    if found > want:
        after_what = f"seq {want - 1} is followed by {found}" if want > 1 else f"the log starts at seq {found}"
        return f"event seq {want} is missing ({after_what})"
    return f"event seq {found} appears after seq {want - 1}"


def lenient_events(task_id: str, rows: Iterable[Sequence[Any]], damaged_rows: dict[int, list[str]]) -> Iterator[Event]:
    """The events of ``rows`` (as :func:`row_event` reads them) that parse; a row that does not is
    skipped and its findings kept in ``damaged_rows`` under its seq, so a check of the whole log
    (``taskctx doctor``) goes on past it and names every damaged row, not only the first."""
    for row in rows:
        try:
            yield row_event(task_id, row)
        except DamagedStoreError as exc:
            damaged_rows.setdefault(int(row[0]), []).extend(exc.problems)


def duplicate_message(e: Event, task_id: str, seq: int) -> str:
    return (
        f"event {e.id} ({e.kind}) is already in the log as {task_id}#{seq}; "
        "build a new event (new_event) instead of appending the same one twice"
    )


def schema_sql(*, bigint: str, blob: str) -> str:
    """The DDL of taskctx's three tables (events, tasks, artifacts), with the backend's names
    for a 64-bit integer and a byte string (SQLite ``INTEGER``/``BLOB``, Postgres
    ``BIGINT``/``BYTEA``); SQLite and Postgres stores share it."""
    return f"""
CREATE TABLE IF NOT EXISTS taskctx_events (
    task_id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    actor TEXT NOT NULL,
    payload TEXT NOT NULL,
    causation_id TEXT,
    correlation_id TEXT,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS taskctx_tasks (
    task_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS taskctx_artifacts (
    digest TEXT PRIMARY KEY,
    size {bigint} NOT NULL,
    data {blob} NOT NULL
);
"""


_SCHEMA = schema_sql(bigint="INTEGER", blob="BLOB")


#: The tables every taskctx database holds (SQLite and Postgres).
TASKCTX_TABLES = ("taskctx_events", "taskctx_tasks", "taskctx_artifacts")


def not_taskctx_message(path: str) -> str:
    """The one line for a database that holds no taskctx tables (read-only open)."""
    return f"{path} is not a taskctx database (no taskctx tables); pass the --db a task was started with"


class _Sqlite:
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
        self.conn.close()


def connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection to the existing SQLite file ``path`` (``file:...?mode=ro`` URI):
    it never creates the file, a table or a journal mode. Raises ``StoreOpenError`` when the file
    does not exist or is a damaged SQLite file ("malformed": truncated, pages overwritten) and
    ``NotTaskctxDatabaseError`` when it is not a SQLite database."""
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
    """Names of the tables in the SQLite database of ``conn``."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}


#: Rows :meth:`EventLog.iter` fetches from SQLite at a time.
_BATCH = 256


class EventLog:
    """Append-only event log per task, on its own SQLite connection."""

    def __init__(self, db: _Sqlite):
        self._db = db

    def last_seq(self, task_id: str) -> int:
        row = self._db.conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM taskctx_events WHERE task_id = ?", (task_id,)
        ).fetchone()
        return int(row[0])

    def count(self, task_id: str) -> int:
        """How many rows ``task_id``'s log holds (``last_seq`` when no row is missing or repeated)."""
        row = self._db.conn.execute("SELECT COUNT(*) FROM taskctx_events WHERE task_id = ?", (task_id,)).fetchone()
        return int(row[0])

    def append(self, task_id: str, events: Sequence[Event]) -> list[Event]:
        """Append ``events`` atomically, secrets masked (:func:`context.secrets.masked_events`);
        returns them as written (masked, ``seq`` set).

        Events that carry a ``seq`` must continue the log exactly (``SequenceConflictError``
        otherwise); events with ``seq == 0`` get the next numbers.
        """
        if not events:
            return []
        events = masked_events(events)
        with self._db.lock:
            conn = self._db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = number_events(task_id, events, self.last_seq(task_id))
                for e in out:
                    dup = conn.execute("SELECT task_id, seq FROM taskctx_events WHERE id = ?", (e.id,)).fetchone()
                    if dup is not None:
                        raise SequenceConflictError(duplicate_message(e, dup[0], dup[1]))
                    conn.execute("INSERT INTO taskctx_events VALUES (?,?,?,?,?,?,?,?,?)", event_row(task_id, e))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return out

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
        those kinds (filtered in SQL: the other payloads are never read or parsed; ``limit``
        counts the matching events). ``damaged_rows``, ``fields``: see :meth:`iter`."""
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
        """As :meth:`read`, one event at a time, fetched from SQLite in batches (the log is never
        held whole). ``fields`` (with ``kinds``): each payload holds only these top-level keys
        (extracted in SQL, the rest never read into Python; a key the payload lacks is ``None``):
        a view that sums a few numbers of many large events (``taskctx inspect``'s model calls). An unfiltered read checks that the seqs follow ``after`` without a gap, and
        every read that kinds and payloads parse (``DamagedStoreError`` otherwise:
        :func:`row_event`, :func:`contiguous`). With ``damaged_rows`` (a check of the whole log)
        nothing raises: a row that does not parse is skipped and named there under its seq
        (:func:`lenient_events`), and a gap is left to the caller (``check_events`` names it)."""
        args: tuple[object, ...] = ()
        payload = "payload"
        if fields is not None:
            payload = f"json_object({', '.join(['?, payload -> ?'] * len(fields))})"
            args = tuple(x for f in fields for x in (f, f"$.{f}"))
        sql = (
            f"SELECT seq, id, kind, timestamp, actor, {payload}, causation_id, correlation_id "
            "FROM taskctx_events WHERE task_id = ? AND seq > ?"
        )
        args += (task_id, after)
        if kinds is not None:
            kinds = [kinds] if isinstance(kinds, str) else list(kinds)
            if not kinds:
                return
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += tuple(kinds)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        cur = self._db.conn.execute(sql, args)
        raw = (row for batch in iter(lambda: cur.fetchmany(_BATCH), []) for row in batch)
        if damaged_rows is not None:
            yield from lenient_events(task_id, raw, damaged_rows)
            return
        rows = (row_event(task_id, row) for row in raw)
        yield from (rows if kinds is not None else contiguous(task_id, rows, after))

    def task_ids(self) -> list[str]:
        rows = self._db.conn.execute("SELECT DISTINCT task_id FROM taskctx_events ORDER BY task_id").fetchall()
        return [r[0] for r in rows]


def packed(raw: bytes) -> bytes:
    """What an artifact row stores for ``raw``: its zlib stream when that is shorter, else
    ``raw`` itself (the row's ``size`` is always ``len(raw)``; the ref hashes ``raw``)."""
    z = zlib.compress(raw, 6)
    return z if len(z) < len(raw) else raw


def unpacked(stored: bytes, size: int | None) -> bytes:
    """The raw bytes of a row holding ``stored`` with the recorded ``size``: a row shorter than
    its size holds one whole zlib stream (nothing after it); anything else, and rows written
    before compression, are returned as stored (the caller checks the hash)."""
    if size is None or len(stored) >= size:
        return stored
    d = zlib.decompressobj()
    try:
        out = d.decompress(stored)
    except zlib.error:
        return stored
    return out if d.eof and not d.unused_data else stored


def checked_artifact(ref: ArtifactRef, stored: Any, where: str, size: int | None = None) -> bytes:
    """The bytes ``stored`` for ``ref`` (a column value: bytes, or text where the row was
    rewritten as text; zlib-packed when shorter than ``size``, see :func:`packed`), checked
    against its content hash (``DamagedStoreError`` naming the ref and the database otherwise)."""
    data = stored.encode("utf-8", "surrogateescape") if isinstance(stored, str) else bytes(stored)
    data = unpacked(data, size)
    if hashlib.sha256(data).hexdigest() != ref.digest:
        what = (
            f"the artifact store of {where} is damaged: the bytes stored for artifact://sha256:{ref.digest} "
            f"({len(data)} bytes) do not match their hash"
        )
        raise DamagedStoreError(f"{what}; {ARTIFACT_TEXT}", what=what)
    return data


class ArtifactStore:
    """Content-addressed store of bytes (``artifact://sha256:<hex>``), exact but for secrets."""

    def __init__(self, db: _Sqlite):
        self._db = db

    def put(self, data: bytes | str) -> str:
        """Store ``data`` with its secrets masked (:func:`context.secrets.masked_bytes`) and return
        the ref of what was stored; storing bytes already there writes nothing (and compresses
        nothing: the digest is looked up first). A ``str`` is stored as UTF-8, losslessly: a lone
        surrogate as its ``surrogatepass`` bytes (:func:`context.text.to_bytes`)."""
        raw = masked_bytes(data)
        ref = make_ref(raw)
        with self._db.lock:
            conn = self._db.conn
            if conn.execute("SELECT 1 FROM taskctx_artifacts WHERE digest = ?", (ref.digest,)).fetchone() is None:
                conn.execute("INSERT INTO taskctx_artifacts VALUES (?,?,?)", (ref.digest, len(raw), packed(raw)))
        return str(ref)

    def get(self, ref: str) -> bytes:
        """The bytes stored for ``ref`` (secrets masked at ``put``), or its ``#L<a>-<b>`` line slice; bytes that do not
        match the ref's hash raise ``DamagedStoreError`` (:func:`checked_artifact`)."""
        r = parse_ref(ref)
        row = self._db.conn.execute(  # (as a blob: a row rewritten as text may hold bytes that are not UTF-8)
            "SELECT CAST(data AS BLOB), size FROM taskctx_artifacts WHERE digest = ?", (r.digest,)
        ).fetchone()
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}; check --db")
        data = checked_artifact(r, row[0], self._db.path, row[1])
        return data if r.start is None else slice_lines(data, r.start, r.end or r.start)

    def size(self, ref: str) -> int:
        r = parse_ref(ref)
        row = self._db.conn.execute("SELECT size FROM taskctx_artifacts WHERE digest = ?", (r.digest,)).fetchone()
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}")
        return int(row[0])


class TaskRegistry:
    """How each task was started (JSON spec: kind, source, model, budget), so ``resume`` can
    rebuild the same graph."""

    def __init__(self, db: _Sqlite):
        self._db = db

    def register(self, task_id: str, spec: dict[str, object]) -> None:
        with self._db.lock:
            self._db.conn.execute(
                "INSERT OR REPLACE INTO taskctx_tasks VALUES (?, ?)", (task_id, json_text(spec, sort_keys=True))
            )

    def get(self, task_id: str) -> dict[str, object] | None:
        row = self._db.conn.execute("SELECT spec FROM taskctx_tasks WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else registry_spec(task_id, row[0])

    def task_ids(self) -> list[str]:
        """Ids of the registered tasks, sorted."""
        rows = self._db.conn.execute("SELECT task_id FROM taskctx_tasks ORDER BY task_id").fetchall()
        return [r[0] for r in rows]


def registry_spec(task_id: str, text: Any) -> dict[str, object]:
    """A ``taskctx_tasks`` row's spec, checked: a JSON object (``DamagedStoreError`` otherwise)."""
    try:
        spec = json.loads(text)
    except (TypeError, ValueError):
        spec = None
    if not isinstance(spec, dict):
        raise damaged(task_id, "the task registry", "its row (how the task was started) is not a JSON object")
    return spec


class SqliteStores:
    """The event log and artifact store of one SQLite file, sharing one connection.

    ``SqliteStores(":memory:")`` gives throwaway stores for tests. ``readonly=True`` opens an
    existing file with a ``mode=ro`` URI and creates nothing (raises ``StoreOpenError`` for a
    missing file, ``NotTaskctxDatabaseError`` for a file without the taskctx tables); writes
    then raise ``sqlite3.OperationalError``.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False):
        self._db = _Sqlite(path, readonly=readonly)
        self.path = self._db.path
        self.events = EventLog(self._db)
        self.artifacts = ArtifactStore(self._db)
        self.tasks = TaskRegistry(self._db)

    def close(self) -> None:
        self._db.close()
