"""What every store backend shares: the protocols, the rows, the checks on read, the damage.

The SQLite stores (:mod:`context.sqlite_store`) and the Postgres ones (:mod:`context.pg_store`)
number events, write and read ``taskctx_events`` rows and pack artifact bytes the same way, and
raise the same ``DamagedStoreError`` when what they read back fails a check.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from .artifact_refs import ArtifactRef
from .errors import DamagedStoreError, SequenceConflictError
from .events import PAYLOAD_MODELS, Event
from .text import json_text

__all__ = [
    "ARTIFACT_TEXT",
    "REPAIR_TEXT",
    "ArtifactStoreProtocol",
    "EventLogProtocol",
    "checked_artifact",
    "contiguous",
    "damaged",
    "duplicate_message",
    "event_row",
    "events_sql",
    "forget_append",
    "gap_finding",
    "lenient_events",
    "note_append",
    "number_events",
    "packed",
    "registry_spec",
    "row_event",
    "unpacked",
    "writer_words",
]


class EventLogProtocol(Protocol):
    """What the nodes need of an event log (:class:`EventLog`, ``PgEventLog``)."""

    def append(self, task_id: str, events: Sequence[Event]) -> list[Event]:
        """Append events atomically; return them as written (masked, ``seq`` set)."""
        ...

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
        """The events of a task after a seq, in order."""
        ...

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
        ...

    def last_seq(self, task_id: str) -> int:
        """The last ``seq`` of a task's log (0 for none)."""
        ...

    def count(self, task_id: str) -> int:
        """How many rows a task's log holds."""
        ...

    def task_ids(self) -> list[str]:
        """The ids of the tasks with events, sorted."""
        ...


class ArtifactStoreProtocol(Protocol):
    """What the nodes need of an artifact store (:class:`ArtifactStore`, ``PgArtifactStore``)."""

    def put(self, data: bytes | str) -> str:
        """Store bytes (secrets masked); return their ref."""
        ...

    def get(self, ref: str) -> bytes:
        """The bytes of a ref, or of its ``#L<a>-<b>`` line slice."""
        ...


#: The last event each event log object of this process appended, by (database, task):
#: ``(id(log), seq)``. Tells a conflicting writer in this process from another process's.
_APPENDED: dict[tuple[str, str], tuple[int, int]] = {}
_APPENDED_LOCK = threading.Lock()


def note_append(database: str, log: object, task_id: str, seq: int) -> None:
    """Remember that ``log`` (an event log object of this process) appended ``task_id``'s events up to ``seq``.

    Args:
        database: The database the log writes (a path or a URL without its password).
        log: The event log object.
        task_id: The task.
        seq: The last ``seq`` it appended.
    """
    with _APPENDED_LOCK:
        _APPENDED[(database, task_id)] = (id(log), seq)


def forget_append(database: str, task_id: str) -> None:
    """Forget what :func:`note_append` remembered of ``task_id`` (its log was removed).

    Args:
        database: The database (as given to :func:`note_append`).
        task_id: The task.
    """
    with _APPENDED_LOCK:
        _APPENDED.pop((database, task_id), None)


def writer_words(database: str, log: object, task_id: str, last: int) -> str:
    """Who wrote ``task_id``'s last event (at ``last``), in words, for a conflict's message.

    Args:
        database: The database.
        log: The event log object whose append conflicted.
        task_id: The task.
        last: The log's last ``seq`` as the conflicting append read it.

    Returns:
        ``"another run in this process (on the same store)"``, ``"another store of this process
        on the same database"``, or ``"another process"``.
    """
    with _APPENDED_LOCK:
        got = _APPENDED.get((database, task_id))
    if got is None or got[1] != last:
        return "another process"
    if got[0] == id(log):
        return "another run in this process (on the same store: e.g. two invoke/ainvoke of one thread_id at once)"
    return "another store of this process on the same database"


def number_events(task_id: str, events: Sequence[Event], last: int, writer: str | None = None) -> list[Event]:
    """Number events to continue a log.

    Args:
        task_id: The task whose log it is.
        events: The events to append (``seq`` 0, or the seq each must have).
        last: The log's last ``seq`` (0 for a new log; a new fork's starts after its ``task.forked``
            event's ``fork_seq``).
        writer: Who wrote the log's last event, in words (:func:`writer_words`; None: another process).

    Returns:
        The events with ``seq`` ``last + 1, last + 2, ...``.

    Raises:
        SequenceConflictError: An event carries another ``seq`` (another writer got there first).
        DamagedStoreError: The first event is past ``last + 1`` (the log lost its last events).
    """
    if not last and events and events[0].kind == "task.forked":  # a fork's first own row follows its prefix
        last = int(events[0].payload["fork_seq"])
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
                f"{writer or 'another process'} is writing this task: run one writer per thread_id"
            )
        out.append(e if e.seq == want else e.model_copy(update={"seq": want}))
    return out


def event_row(task_id: str, e: Event) -> tuple[object, ...]:
    """The ``taskctx_events`` row of a numbered event (same column order in SQLite and Postgres).

    Args:
        task_id: The task whose log it is in.
        e: The event, ``seq`` set.

    Returns:
        ``(task_id, seq, id, kind, timestamp, actor, payload JSON text, causation_id,
        correlation_id)``.
    """
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


def events_sql(
    mark: str,
    payload: str,
    task_id: str,
    after: int,
    upto: int | None,
    limit: int | None,
    kinds: Sequence[str],
) -> tuple[str, tuple[object, ...]]:
    """The query of one task's own ``taskctx_events`` rows (SQLite and Postgres alike).

    Args:
        mark: The backend's parameter mark (``?`` or ``%s``).
        payload: The payload column's expression (``payload``, or one that extracts fields).
        task_id: The task.
        after: Only rows with ``seq > after``.
        upto: Only rows with ``seq <= upto`` (None: to the end).
        limit: At most this many rows (None: all).
        kinds: Only rows of these kinds (empty: every kind).

    Returns:
        ``(sql, args)``: the columns :func:`row_event` reads, in seq order; ``args`` follow any
        the payload expression takes.
    """
    sql = (
        f"SELECT seq, id, kind, timestamp, actor, {payload}, causation_id, correlation_id "
        f"FROM taskctx_events WHERE task_id = {mark} AND seq > {mark}"
    )
    args: tuple[object, ...] = (task_id, after)
    if upto is not None:
        sql, args = sql + f" AND seq <= {mark}", (*args, upto)
    if kinds:
        sql, args = sql + f" AND kind IN ({', '.join([mark] * len(kinds))})", (*args, *kinds)
    sql += " ORDER BY seq"
    if limit is not None:
        sql, args = sql + f" LIMIT {mark}", (*args, limit)
    return sql, args


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
    """The event of a ``taskctx_events`` row, unvalidated (fast) but checked.

    Args:
        task_id: The task whose log it is.
        row: ``(seq, id, kind, timestamp, actor, payload, causation_id, correlation_id)``.

    Returns:
        The event, its payload not validated against its kind.

    Raises:
        DamagedStoreError: What would make every reader fail: a kind that is not an event kind,
            a payload that is not a JSON object (the message names the seq).
    """
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
    """Check that the events of an unfiltered read have no gap.

    Args:
        task_id: The task whose log it is.
        events: An unfiltered read after seq ``after``.
        after: The seq the read started after.

    Yields:
        The events, numbered ``after + 1, after + 2, ...``.

    Raises:
        DamagedStoreError: A row is missing or out of order.
    """
    want = after + 1
    for e in events:
        if e.seq != want:
            raise damaged(task_id, "the event log", gap_finding(want, e.seq))
        want += 1
        yield e


def gap_finding(want: int, found: int) -> str:
    """The finding of a read that expected one seq and found another.

    Args:
        want: The seq expected.
        found: The seq found.

    Returns:
        ``event seq 7 is missing (seq 6 is followed by 8)``, or ``event seq 5 appears after seq
        5`` (no ``event log:`` prefix).
    """
    if found > want:
        after_what = f"seq {want - 1} is followed by {found}" if want > 1 else f"the log starts at seq {found}"
        return f"event seq {want} is missing ({after_what})"
    return f"event seq {found} appears after seq {want - 1}"


def lenient_events(task_id: str, rows: Iterable[Sequence[Any]], damaged_rows: dict[int, list[str]]) -> Iterator[Event]:
    """Read rows as events, skipping the damaged ones (a check of the whole log goes on past them).

    Args:
        task_id: The task whose log it is.
        rows: ``taskctx_events`` rows (as :func:`row_event` reads them).
        damaged_rows: Filled in: seq -> the findings of each row that does not parse.

    Yields:
        The events of the rows that parse.
    """
    for row in rows:
        try:
            yield row_event(task_id, row)
        except DamagedStoreError as exc:
            damaged_rows.setdefault(int(row[0]), []).extend(exc.problems)


def duplicate_message(e: Event, task_id: str, seq: int) -> str:
    """The message for an event appended a second time.

    Args:
        e: The event appended again.
        task_id: The task whose log holds it.
        seq: Its seq there.

    Returns:
        One line naming where it is and the fix (build a new event).
    """
    return (
        f"event {e.id} ({e.kind}) is already in the log as {task_id}#{seq}; "
        "build a new event (new_event) instead of appending the same one twice"
    )


def packed(raw: bytes) -> bytes:
    """What an artifact row stores for some bytes.

    Args:
        raw: The bytes (the row's ``size`` is always ``len(raw)``; the ref hashes ``raw``).

    Returns:
        Their zlib stream when that is shorter, else ``raw`` itself.
    """
    z = zlib.compress(raw, 6)
    return z if len(z) < len(raw) else raw


def unpacked(stored: bytes, size: int | None) -> bytes:
    """The raw bytes of an artifact row (the inverse of :func:`packed`).

    Args:
        stored: The row's data.
        size: The row's recorded size in bytes (None: not known).

    Returns:
        The decompressed bytes when the row is shorter than its size and holds one whole zlib
        stream (nothing after it); anything else, and rows written before compression, as
        stored (the caller checks the hash).
    """
    if size is None or len(stored) >= size:
        return stored
    d = zlib.decompressobj()
    try:
        out = d.decompress(stored)
    except zlib.error:
        return stored
    return out if d.eof and not d.unused_data else stored


def checked_artifact(ref: ArtifactRef, stored: Any, where: str, size: int | None = None) -> bytes:
    """The bytes stored for a ref, checked against its content hash.

    Args:
        ref: The parsed ref.
        stored: The row's data column: bytes, or text where the row was rewritten as text;
            zlib-packed when shorter than ``size`` (:func:`packed`).
        where: The database (its path or redacted URL), named in the error.
        size: The row's recorded size in bytes (None: not known).

    Returns:
        The raw bytes.

    Raises:
        DamagedStoreError: The bytes do not match the ref's hash (the message names the ref and
            the database).
    """
    data = stored.encode("utf-8", "surrogateescape") if isinstance(stored, str) else bytes(stored)
    data = unpacked(data, size)
    if hashlib.sha256(data).hexdigest() != ref.digest:
        what = (
            f"the artifact store of {where} is damaged: the bytes stored for artifact://sha256:{ref.digest} "
            f"({len(data)} bytes) do not match their hash"
        )
        raise DamagedStoreError(f"{what}; {ARTIFACT_TEXT}", what=what)
    return data


def registry_spec(task_id: str, text: Any) -> dict[str, object]:
    """A ``taskctx_tasks`` row's spec, checked.

    Args:
        task_id: The task.
        text: The row's spec column.

    Returns:
        The spec.

    Raises:
        DamagedStoreError: The spec is not a JSON object.
    """
    try:
        spec = json.loads(text)
    except (TypeError, ValueError):
        spec = None
    if not isinstance(spec, dict):
        raise damaged(task_id, "the task registry", "its row (how the task was started) is not a JSON object")
    return spec
