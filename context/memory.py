"""Durable memory across tasks: the records LangGraph's long-term store holds, pure.

A fact the user confirmed (``memory.confirmed``) outlives its task as a :class:`MemoryRecord`
under the namespace ``("memory", <namespace>)``, keyed by :func:`memory_key`, with its provenance
and the files it rests on. :mod:`context.memory_writes` says what each event writes; nothing
here touches a store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    """A file a memory rests on: its workspace-relative ``path`` and its ``sha256`` (64 hex) then."""

    path: str
    sha256: str


class MemoryRecord(_M):
    """One durable memory as the store holds it (the item's ``value`` is its JSON dump).

    ``key``: :func:`memory_key` of namespace, kind and text. ``subject``: what the memory is
    about; a newer record with the same subject supersedes an older one (empty: the key itself,
    so nothing supersedes it by accident). Provenance: ``task_id`` (the task it was confirmed in,
    or ``None``), ``event_id`` and ``confirmed_at`` (ISO-8601 UTC) of its ``memory.confirmed``
    event, ``confirmed_by`` (who confirmed it, e.g. ``user``). ``files``: what it rests on.
    ``superseded_by``: the key of the record of the same subject confirmed after it (set when
    that one was confirmed; it stays when that one is forgotten), ``None``: not superseded.
    """

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
    """A file a memory rests on whose bytes changed since it was confirmed.

    ``recorded`` is the sha256 then, ``current`` the sha256 now (``""``: the file is gone, as in
    :mod:`context.freshness`).
    """

    path: str
    recorded: str
    current: str


class LoadedMemory(MemoryRecord):
    """A record a task loaded (``memory.loaded``), with what makes it stale and its relevance.

    ``stale`` lists the files that changed since it was confirmed (empty: fresh);
    ``superseded_by`` is the key of the newer record of the same subject, also loaded (``None``:
    current); ``score`` is its relevance to the request (lexical: matching words; semantic: the
    store's similarity).
    """

    stale: list[StaleFile] = Field(default_factory=list)
    score: float = 0.0


def memory_key(namespace: str, kind: str, text: str) -> str:
    r"""The key of a memory: the same fact confirmed twice is one record.

    Args:
        namespace: ``user`` or ``project``.
        kind: ``fact``, ``preference`` or ``convention``.
        text: What the memory says.

    Returns:
        ``m_<12 hex>``: the sha256 of ``namespace\nkind\ntext``, so a rebuild from the events gives
        the same keys.
    """
    return "m_" + hashlib.sha256(f"{namespace}\n{kind}\n{text}".encode()).hexdigest()[:12]


_WORD = re.compile(r"[a-z0-9_]+(?:[.\-/][a-z0-9_]+)*")
#: Words too common to make a memory relevant.
_STOP = frozenset(
    "the a an and or of to in on at for is are be it its this that with as by from into not no do does "
    "what which who how when where why was were has have had will would can could should may must all any "
    "we you i our your they them their there here then than so if but".split()
)


def words(text: str) -> set[str]:
    """The words a relevance score compares.

    Args:
        text: Any text.

    Returns:
        Its lower-case words (dotted or slashed names kept whole and also split), less stop words
        and single characters.
    """
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        out.add(w)
        out.update(re.split(r"[.\-/]", w))
    return {w for w in out if len(w) > 1 and w not in _STOP}


def lexical_score(query: str, record: MemoryRecord) -> float:
    """How relevant a record is to a query, by the words they share (no embedding function).

    Args:
        query: The task's request.
        record: The record (its text, subject and file paths are compared).

    Returns:
        The words in common over the words of the smaller of the two (the overlap coefficient, so
        a long request does not dilute a short memory), 0..1 rounded to 4 decimals; 0.0 when they
        share none (the record is not relevant).
    """
    mine = words(" ".join([record.text, record.subject, *(f.path for f in record.files)]))
    theirs = words(query)
    if not mine or not theirs:
        return 0.0
    return round(len(mine & theirs) / min(len(mine), len(theirs)), 4)


def supersession(records: Iterable[MemoryRecord]) -> dict[str, str]:
    """Which record replaces which.

    Args:
        records: The stored records.

    Returns:
        ``{older key: newer key}``: the ``superseded_by`` each record carries (recorded when the
        newer one was confirmed; kept when that one is forgotten, so its key may be gone from the
        store), and, among records carrying none (written before the mark existed), within each
        group (:attr:`MemoryRecord.group`) the one confirmed last (``confirmed_at``, then
        ``event_id``) supersedes the others.
    """
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
