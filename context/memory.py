"""Durable memory across tasks: the records kept in LangGraph's long-term store, pure.

A fact the user confirmed (``memory.confirmed``) outlives its task: it is written to the
long-term store (a LangGraph ``BaseStore``, wired in :mod:`nodes.memory_source` and
:mod:`graphs.memory_store`) as a :class:`MemoryRecord` under the namespace ``("memory", <namespace>)``
(``user`` or ``project``), keyed by :func:`memory_key`, with its provenance (the task it was
confirmed in, when, by whom, the confirming event) and, where it rests on files, their
``path`` + ``sha256`` at confirmation time (:class:`FileStamp`). ``memory.forgotten`` removes it.

**Supersession is recorded when it happens.** Confirming a record marks every other record of
its subject (:attr:`MemoryRecord.group`) ``superseded_by`` its key, in the store. Forgetting the
newer record leaves the mark: a correction that is forgotten does not reinstate the fact it
corrected (the user said it was wrong); nothing of that subject is current until the user
confirms one again (the same text again is the same key: it is current again and marks the
others). Both the store writes (:mod:`nodes.memory_source`) and the rebuild from the events
(:func:`records_from_events`) go through :func:`store_writes`, so the marks follow from the
events alone.

A new task loads the records relevant to its request (``memory.loaded``: a list of
:class:`LoadedMemory`, each with what made it stale and which newer record supersedes it);
they enter its core layer as trusted memory, with provenance shown.

Nothing here touches a store: :func:`store_writes` is what one confirmation event writes,
:func:`records_from_events` folds the confirmation events of any number of logs into the
store's contents (how ``taskctx memory rebuild`` restores it), :func:`supersession` says which
record replaces which, :func:`lexical_score` is the relevance used when no embedding function is
configured.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .events import Event

__all__ = [
    "MEMORY_LOG",
    "MEMORY_NAMESPACES",
    "FileStamp",
    "LoadedMemory",
    "MemoryKind",
    "MemoryNamespace",
    "MemoryRecord",
    "StaleFile",
    "lexical_score",
    "memory_key",
    "record_of",
    "records_from_events",
    "store_writes",
    "supersession",
    "words",
]

MemoryKind = Literal["fact", "preference", "convention"]
MemoryNamespace = Literal["user", "project"]
#: The namespaces a memory may live in (the store's namespace is ``("memory", <name>)``).
MEMORY_NAMESPACES: tuple[MemoryNamespace, ...] = ("user", "project")
#: The event log stream of confirmations made outside any task (``taskctx memory confirm``
#: without ``--task``). Not a valid task id (task ids never start with ``~``), so it never
#: clashes with one; :func:`context.list_tasks` leaves it out.
MEMORY_LOG = "~memory"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileStamp(_M):
    """A file a memory rests on: its workspace-relative ``path`` and the ``sha256`` (64 hex) of
    its bytes when the memory was confirmed."""

    path: str
    sha256: str


class MemoryRecord(_M):
    """One durable memory as the store holds it (the store item's ``value`` is
    ``record.model_dump(mode="json")``).

    ``key``: :func:`memory_key` of namespace, kind and text. ``subject``: what the memory is
    about; a newer record with the same subject supersedes an older one (empty: the key itself,
    so nothing supersedes it by accident). Provenance: ``task_id`` (the task it was confirmed in,
    or ``None``), ``event_id`` and ``confirmed_at`` (ISO-8601 UTC) of its ``memory.confirmed``
    event, ``confirmed_by`` (who confirmed it, e.g. ``user``). ``files``: what it rests on.
    ``superseded_by``: the key of the record of the same subject confirmed after it (set when
    that one was confirmed; it stays when that one is forgotten), ``None``: not superseded."""

    key: str
    namespace: MemoryNamespace = "project"
    kind: MemoryKind = "fact"
    text: str
    subject: str = ""
    task_id: str | None = None
    event_id: str = ""
    confirmed_at: str = ""
    confirmed_by: str = "user"
    files: list[FileStamp] = Field(default_factory=list)
    superseded_by: str | None = None

    @property
    def group(self) -> str:
        """The supersession group: ``namespace/subject`` (the key when there is no subject)."""
        return f"{self.namespace}/{self.subject or self.key}"


class StaleFile(_M):
    """A file a memory rests on whose bytes changed since it was confirmed: ``recorded`` is the
    sha256 then, ``current`` the sha256 now (``""``: the file is gone, as in :mod:`context.freshness`)."""

    path: str
    recorded: str
    current: str


class LoadedMemory(MemoryRecord):
    """A record a task loaded (``memory.loaded``): ``stale`` lists the files that changed since
    it was confirmed (empty: fresh); ``superseded_by`` is the key of the newer record of the same
    subject, also loaded (``None``: current); ``score`` is its relevance to the request (lexical:
    matching words; semantic: the store's similarity)."""

    stale: list[StaleFile] = Field(default_factory=list)
    score: float = 0.0


def memory_key(namespace: str, kind: str, text: str) -> str:
    """``m_<12 hex>``: sha256 of ``namespace\\nkind\\ntext``. The same fact confirmed twice is
    one record (its provenance the latest); a rebuild from the events gives the same keys."""
    return "m_" + hashlib.sha256(f"{namespace}\n{kind}\n{text}".encode()).hexdigest()[:12]


_WORD = re.compile(r"[a-z0-9_]+(?:[.\-/][a-z0-9_]+)*")
#: Words too common to make a memory relevant.
_STOP = frozenset(
    "the a an and or of to in on at for is are be it its this that with as by from into not no do does "
    "what which who how when where why was were has have had will would can could should may must all any "
    "we you i our your they them their there here then than so if but".split()
)


def words(text: str) -> set[str]:
    """The lower-case words of ``text`` (dotted or slashed names kept whole and also split), less
    stop words and single characters."""
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        out.add(w)
        out.update(re.split(r"[.\-/]", w))
    return {w for w in out if len(w) > 1 and w not in _STOP}


def lexical_score(query: str, record: MemoryRecord) -> float:
    """How much the query and the record (text, subject, file paths) share: the words they have
    in common over the words of the smaller of the two (0..1, 4 decimals; the overlap
    coefficient, so a long request does not dilute a short memory). 0.0 when they share none
    (the record is not relevant)."""
    mine = words(" ".join([record.text, record.subject, *(f.path for f in record.files)]))
    theirs = words(query)
    if not mine or not theirs:
        return 0.0
    return round(len(mine & theirs) / min(len(mine), len(theirs)), 4)


def supersession(records: Iterable[MemoryRecord]) -> dict[str, str]:
    """``{older key: newer key}``: the ``superseded_by`` each record carries (recorded when the
    newer one was confirmed; kept when that one is forgotten, so its key may be gone from the
    store), and, among records carrying none (written before the mark existed), within each group
    (:attr:`MemoryRecord.group`) the one confirmed last (``confirmed_at``, then ``event_id``)
    supersedes the others."""
    records = list(records)
    out = {r.key: r.superseded_by for r in records if r.superseded_by}
    groups: dict[str, list[MemoryRecord]] = {}
    for r in records:
        if not r.superseded_by:
            groups.setdefault(r.group, []).append(r)
    for rs in groups.values():
        newest = max(rs, key=lambda r: (r.confirmed_at, r.event_id))
        out.update({r.key: newest.key for r in rs if r.key != newest.key})
    return out


#: ``(namespace, key)`` of a stored record.
StoreKey = tuple[str, str]


def store_writes(
    e: Event, log: str, group: Callable[[MemoryRecord], Iterable[MemoryRecord]]
) -> tuple[list[MemoryRecord], list[StoreKey]]:
    """What the event ``e`` of the log ``log`` writes to the store: ``(records to put, (namespace,
    key) to delete)``; nothing for a kind other than ``memory.confirmed`` / ``memory.forgotten``
    (working memory is never promoted without a confirmation). A confirmation puts its record
    (:func:`record_of`, not superseded) and marks every other record of its group not marked by
    it yet ``superseded_by`` it; ``group(record)`` gives the stored records of the record's
    :attr:`~MemoryRecord.group` (from the caller's store, or a dict during a rebuild). A forget
    deletes the record and nothing else (the records it superseded stay superseded)."""
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
    """The store's contents as the confirmation events of ``logs`` (task id -> its events; the
    :data:`MEMORY_LOG` stream among them) leave them: ``{(namespace, key): record}``.

    Events are applied in time order (``timestamp``, then log, then ``seq``) by
    :func:`store_writes`: a ``memory.confirmed`` puts its record (a second confirmation of the
    same key replaces the first) and marks the older ones of its subject superseded, a
    ``memory.forgotten`` deletes one. No other event changes the store."""
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
    """The :class:`MemoryRecord` a ``memory.confirmed`` event ``e`` of the log ``log`` writes:
    its provenance task is the payload's ``task_id``, else the log's task (``None`` for
    :data:`MEMORY_LOG`)."""
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
