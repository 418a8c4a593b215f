"""What the memory events write to the long-term store, and the store rebuilt from them.

Confirming a record marks every other record of its subject ``superseded_by`` it; forgetting
deletes one record and nothing else. The nodes' store writes and ``taskctx memory rebuild`` both
go through :func:`store_writes`, so the store follows from the events alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .events import Event
from .memory import MEMORY_LOG, FileStamp, MemoryRecord, memory_key

__all__ = ["StoreKey", "record_of", "records_from_events", "store_writes"]

#: ``(namespace, key)`` of a stored record.
StoreKey = tuple[str, str]


def store_writes(
    e: Event, log: str, group: Callable[[MemoryRecord], Iterable[MemoryRecord]]
) -> tuple[list[MemoryRecord], list[StoreKey]]:
    """What one event writes to the store.

    A confirmation puts its record (:func:`record_of`, not superseded) and marks every other
    record of its group not marked by it yet ``superseded_by`` it. A forget deletes the record and
    nothing else (the records it superseded stay superseded). No other kind writes anything
    (working memory is never promoted without a confirmation).

    Args:
        e: The event (``memory.confirmed`` or ``memory.forgotten``; any other writes nothing).
        log: The id of the log it is in (a task id, or :data:`~context.memory.MEMORY_LOG`).
        group: The stored records of a record's :attr:`~context.memory.MemoryRecord.group` (from
            the caller's store, or a dict during a rebuild).

    Returns:
        ``(records to put, (namespace, key) to delete)``.
    """
    if e.kind == "memory.forgotten":
        return [], [(str(e.payload["namespace"]), str(e.payload["key"]))]
    if e.kind != "memory.confirmed":
        return [], []
    r = record_of(e, log)
    marked = [
        x.model_copy(update={"superseded_by": r.key})
        for x in group(r)
        if x.key != r.key and x.group == r.group and x.superseded_by != r.key
    ]
    return [r, *marked], []


def records_from_events(logs: Mapping[str, Iterable[Event]]) -> dict[StoreKey, MemoryRecord]:
    """The store's contents as the confirmation events leave them (``taskctx memory rebuild``).

    Events are applied in time order (``timestamp``, then log, then ``seq``) by
    :func:`store_writes`: a ``memory.confirmed`` puts its record (a second confirmation of the
    same key replaces the first) and marks the older ones of its subject superseded, a
    ``memory.forgotten`` deletes one. No other event changes the store.

    Args:
        logs: Task id -> its events; the :data:`~context.memory.MEMORY_LOG` stream among them.

    Returns:
        ``{(namespace, key): record}``.
    """
    ordered = sorted(
        ((e.timestamp, tid, e.seq, e) for tid, evs in logs.items() for e in evs),
        key=lambda t: (t[0], t[1], t[2]),
    )
    out: dict[StoreKey, MemoryRecord] = {}
    for _, tid, _, e in ordered:
        put, delete = store_writes(e, tid, lambda r: [x for x in out.values() if x.group == r.group])
        for x in put:
            out[(x.namespace, x.key)] = x
        for k in delete:
            out.pop(k, None)
    return out


def record_of(e: Event, log: str) -> MemoryRecord:
    """The record a ``memory.confirmed`` event writes.

    Args:
        e: The ``memory.confirmed`` event.
        log: The id of the log it is in.

    Returns:
        The :class:`~context.memory.MemoryRecord`; its provenance task is the payload's
        ``task_id``, else the log's task (``None`` for :data:`~context.memory.MEMORY_LOG`).
    """
    p = e.payload
    task = p.get("task_id") or (None if log == MEMORY_LOG else log)
    return MemoryRecord(
        key=memory_key(p["namespace"], p["kind"], p["text"]),
        namespace=p["namespace"],
        kind=p["kind"],
        text=p["text"],
        subject=p.get("subject", ""),
        task_id=task,
        event_id=e.id,
        confirmed_at=e.timestamp,
        confirmed_by=p.get("confirmed_by", "user"),
        files=[FileStamp.model_validate(f) for f in p.get("files", [])],
    )
