"""Durable memory on LangGraph's long-term store: what a task loads, and how confirmations reach the store.

:class:`MemorySource` wraps a ``BaseStore`` and the workspace root; records are
:class:`context.memory.MemoryRecord` values under ``("memory", "user")`` and ``("memory", "project")``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from context import Event
from context.memory import (
    MEMORY_NAMESPACES,
    LoadedMemory,
    MemoryRecord,
    StaleFile,
    lexical_score,
    supersession,
)
from context.memory_writes import store_writes

from .workspace.paths import file_sha256

__all__ = ["MemorySource", "namespace_of"]

#: Records fetched per store page while listing a namespace.
_PAGE = 500


def namespace_of(name: str) -> tuple[str, str]:
    """The store namespace of a memory namespace.

    Args:
        name: ``user`` or ``project``.

    Returns:
        ``("memory", name)``.
    """
    return ("memory", name)


@dataclass
class MemorySource:
    """The long-term store a graph's tasks load their memories from.

    :meth:`load` uses the store's semantic search when the store has an embedding index, else
    :func:`context.memory.lexical_score` over the namespace's records (nothing leaves the
    machine). Records are promoted only by confirmation events (:meth:`apply`).

    Attributes:
        store: A LangGraph ``BaseStore`` (``SqliteStore``, ``PostgresStore``, any other).
        root: The workspace the memories' files are checked against (None: no check, nothing is
            marked stale).
        limit: At most this many current memories are loaded per task, the most relevant.
        min_score: The least relevance a memory needs to be loaded (lexical: the share of its
            words the request has; semantic: the store's similarity).
    """

    store: Any
    root: Path | None = None
    limit: int = 8
    min_score: float = 0.2

    @property
    def search_kind(self) -> Literal["lexical", "semantic"]:
        """``semantic`` when the store has an embedding index, else ``lexical``."""
        return "semantic" if getattr(self.store, "index_config", None) else "lexical"

    # writing ------------------------------------------------------------------------------
    def apply(self, events: Iterable[Event], log: str) -> int:
        """Write the confirmation events among ``events`` to the store.

        As :func:`context.memory_writes.store_writes` says: ``memory.confirmed`` puts its record and marks the
        older records of its subject superseded, ``memory.forgotten`` deletes one.

        Args:
            events: Events of one log.
            log: That log: a task id, or :data:`context.memory.MEMORY_LOG`.

        Returns:
            How many events it applied.
        """
        n = 0
        for e in events:
            put, delete = store_writes(e, log, self.group)
            for r in put:
                self.store.put(namespace_of(r.namespace), r.key, r.model_dump(mode="json"))
            for ns, key in delete:
                self.store.delete(namespace_of(ns), key)
            n += bool(put or delete)
        return n

    def group(self, r: MemoryRecord) -> list[MemoryRecord]:
        """The stored records of ``r``'s supersession group, ``r`` itself among them when stored.

        Same namespace, same subject, or a record without one whose key is that subject; read by the
        store's ``filter`` on the subject and one ``get``, not by listing the namespace.

        Args:
            r: A record.

        Returns:
            The records.
        """
        ns = namespace_of(r.namespace)
        name = r.subject or r.key
        out = self._all(ns, filter={"subject": name})
        item = self.store.get(ns, name)
        if item is not None:
            out.append(MemoryRecord.model_validate(item.value))
        return [x for x in out if x.group == r.group]

    def _all(self, ns: tuple[str, ...], **kw: Any) -> list[MemoryRecord]:
        """Every record of the store namespace ``ns``, page by page (``kw``: the store's ``search`` filter)."""
        out: list[MemoryRecord] = []
        offset = 0
        while True:
            page = self.store.search(ns, limit=_PAGE, offset=offset, **kw)
            out += [MemoryRecord.model_validate(i.value) for i in page]
            if len(page) < _PAGE:
                return out
            offset += _PAGE

    def clear(self) -> int:
        """Delete every memory record (before a rebuild).

        Returns:
            How many were deleted.
        """
        recs = self.records()
        for r in recs:
            self.store.delete(namespace_of(r.namespace), r.key)
        return len(recs)

    # reading ------------------------------------------------------------------------------
    def records(self, namespaces: Sequence[str] = MEMORY_NAMESPACES) -> list[MemoryRecord]:
        """Every record of ``namespaces``, oldest confirmation first, then by key.

        Args:
            namespaces: Memory namespaces (``user``, ``project``).

        Returns:
            The records.
        """
        out = [r for ns in namespaces for r in self._all(namespace_of(ns))]
        return sorted(out, key=lambda r: (r.confirmed_at, r.key))

    def get(self, key: str) -> MemoryRecord | None:
        """The record with this key, in any namespace.

        Args:
            key: A memory key.

        Returns:
            The record, or None.
        """
        for ns in MEMORY_NAMESPACES:
            item = self.store.get(namespace_of(ns), key)
            if item is not None:
                return MemoryRecord.model_validate(item.value)
        return None

    def stale_files(self, r: MemoryRecord) -> list[StaleFile]:
        """The files of ``r`` whose workspace bytes differ from the recorded sha256.

        Args:
            r: A record.

        Returns:
            The stale files; none without a ``root``.
        """
        if self.root is None:
            return []
        out = []
        for f in r.files:
            now = file_sha256(self.root / f.path)
            if now != f.sha256:
                out.append(StaleFile(path=f.path, recorded=f.sha256, current=now))
        return out

    def _scored(self, request: str, records: Sequence[MemoryRecord]) -> list[tuple[float, MemoryRecord]]:
        if self.search_kind == "semantic":
            scored: list[tuple[float, MemoryRecord]] = []
            for ns in MEMORY_NAMESPACES:
                for item in self.store.search(namespace_of(ns), query=request, limit=max(self.limit * 4, 20)):
                    scored.append((round(float(item.score or 0.0), 4), MemoryRecord.model_validate(item.value)))
            return scored
        return [(lexical_score(request, r), r) for r in records]

    def load(self, request: str) -> list[LoadedMemory]:
        """The memories relevant to ``request``, most relevant first.

        At most ``limit`` current ones with ``score >= min_score``, each followed by the older records
        it supersedes (``superseded_by`` set). A record whose superseder was forgotten is not loaded
        (a forgotten correction does not reinstate what it corrected). Every record is checked
        against the workspace (``stale``).

        Args:
            request: The task's request.

        Returns:
            The loaded memories.
        """
        all_records = self.records()
        newer = supersession(all_records)
        by_key = {r.key: r for r in all_records}
        scored = [(s, r) for s, r in self._scored(request, all_records) if s >= self.min_score and r.key in by_key]
        # a relevant older record brings its newer one; the newer one is what is loaded
        best: dict[str, float] = {}
        for s, r in scored:
            head = newer.get(r.key, r.key)
            if head in by_key:  # else superseded by a memory since forgotten: nothing current to load
                best[head] = max(best.get(head, 0.0), s)
        heads = sorted(best, key=lambda k: (-best[k], by_key[k].confirmed_at, k))[: self.limit]
        out: list[LoadedMemory] = []
        for k in heads:
            group = [by_key[k]] + sorted(
                (r for r in all_records if newer.get(r.key) == k), key=lambda r: (r.confirmed_at, r.key), reverse=True
            )
            for r in group:
                out.append(
                    LoadedMemory(
                        **r.model_dump(exclude={"superseded_by"}),
                        stale=self.stale_files(r),
                        superseded_by=newer.get(r.key),
                        score=best[k] if r.key == k else 0.0,
                    )
                )
        return out
