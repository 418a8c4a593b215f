"""Checkpointer set-up: a serializer that knows the TaskContext's classes, and pruning to the latest checkpoint."""

from __future__ import annotations

import asyncio
import enum
import sqlite3
import threading
import typing
from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import UUID

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from context import TaskContext

__all__ = [
    "CHECKPOINT_TYPES",
    "PRUNE_EVERY",
    "CheckpointSerializer",
    "PruningSqliteSaver",
    "ThreadedAsyncSaver",
    "adopt_checkpoint_serde",
    "checkpoint_serde",
    "checkpoint_types",
    "keep_ids_after",
    "open_readonly_checkpointer",
    "prune_thread",
]


def checkpoint_types(root: type[BaseModel] = TaskContext) -> list[tuple[str, str]]:
    """``(module, class)`` of ``root`` and of every pydantic model and enum its fields can hold, at any depth.

    Args:
        root: The state schema (default: the TaskContext).

    Returns:
        The pairs, sorted.
    """
    found: set[tuple[str, str]] = set()
    seen: set[Any] = set()

    def walk(tp: Any) -> None:
        if tp in seen:
            return
        seen.add(tp)
        for arg in typing.get_args(tp):  # list[X], dict[str, X], X | None, Annotated[X, ...], Literal[...]
            walk(arg)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            found.add((tp.__module__, tp.__qualname__))
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            found.add((tp.__module__, tp.__qualname__))
            for f in tp.model_fields.values():
                walk(f.annotation)

    walk(root)
    return sorted(found)


#: ``(module, class)`` of every model a TaskContext checkpoint holds (:func:`checkpoint_types`).
CHECKPOINT_TYPES: list[tuple[str, str]] = checkpoint_types()


class CheckpointSerializer(JsonPlusSerializer):
    """LangGraph's ``JsonPlusSerializer`` with the TaskContext's classes on its msgpack allowlist.

    What :func:`checkpoint_serde` returns; a class of its own so :func:`adopt_checkpoint_serde`
    can tell a saver that already has it.

    Args:
        pickle_fallback: Whether values msgpack cannot encode are pickled (and pickles loaded).
    """

    def __init__(self, *, pickle_fallback: bool = False):
        super().__init__(pickle_fallback=pickle_fallback, allowed_msgpack_modules=CHECKPOINT_TYPES)


def checkpoint_serde(pickle_fallback: bool = False) -> CheckpointSerializer:
    """A serializer for any LangGraph checkpointer that knows the TaskContext's classes.

    Loads TaskContext parts without the "unregistered type" warning, the same with
    ``LANGGRAPH_STRICT_MSGPACK=true``: ``InMemorySaver(serde=checkpoint_serde())``. Other types
    than LangGraph's safe ones and :data:`CHECKPOINT_TYPES` are not rebuilt (their data is loaded).

    Args:
        pickle_fallback: Whether values msgpack cannot encode are pickled (and pickles loaded).

    Returns:
        The serializer.
    """
    return CheckpointSerializer(pickle_fallback=pickle_fallback)


def adopt_checkpoint_serde(checkpointer: Any) -> bool:
    """Give a checkpointer made elsewhere (LangGraph Server's) the serializer of :func:`checkpoint_serde`.

    LangGraph Server builds its checkpointer's serializer from ``langgraph.json``'s
    ``allowed_json_modules`` and ``pickle_fallback`` only: its ``allowed_msgpack_modules`` does not
    reach it, so every TaskContext part it loads logs "Deserializing unregistered type" (with
    ``LANGGRAPH_STRICT_MSGPACK=true``: "Blocked deserialization"). The graph factory calls this on
    the checkpointer the server hands it. Its ``pickle_fallback`` is kept; the stored bytes are
    the same (the serializer writes what LangGraph's writes).

    Args:
        checkpointer: A LangGraph checkpointer (anything with a ``serde`` attribute), or None.

    Returns:
        True when its serializer was replaced; False when it had it already or is not a
        ``JsonPlusSerializer`` (an encrypting or custom one is left as it is).
    """
    serde = getattr(checkpointer, "serde", None)
    if not isinstance(serde, JsonPlusSerializer) or isinstance(serde, CheckpointSerializer):
        return False
    checkpointer.serde = checkpoint_serde(pickle_fallback=bool(serde.pickle_fallback))
    return True


#: Supersteps between two prunes of a thread's checkpoints while :func:`graphs.runner.run_graph` runs
#: with ``prune=True`` (and once more when the run ends).
PRUNE_EVERY = 50


def prune_thread(checkpointer: Any, thread_id: str) -> bool:
    """Keep only the latest checkpoint of ``thread_id``, with its pending writes, and delete the rest.

    With the saver's own ``prune(strategy="keep_latest")``: LangGraph's on Postgres, the same
    contract on SQLite (:class:`PruningSqliteSaver`). The event log is the task's source of truth
    and the state at any seq is its fold, so older checkpoints are a cache nothing needs:
    ``get_state_history`` derives every step from the log (:mod:`graphs.time_travel`).

    Args:
        checkpointer: A LangGraph checkpointer.
        thread_id: The task's thread.

    Returns:
        True when pruned; False, changing nothing, for a saver without ``prune`` (``InMemorySaver``).
    """
    try:
        checkpointer.prune([thread_id], strategy="keep_latest")
    except NotImplementedError:
        return False
    return True


def keep_ids_after(checkpoint_id: str | None) -> None:
    """Make the checkpoint ids LangGraph issues next in this process sort after ``checkpoint_id``.

    LangGraph names a checkpoint by a UUIDv6 of ``time.time_ns()`` (``langgraph.checkpoint.base.id``,
    monotonic within one process only) and every saver loads a thread's greatest id as its latest.
    A run on a clock that was ahead (1 h fast, then corrected) leaves ids a later run on the
    right clock would sort below: its checkpoints would never load again. After this call the
    next ids count on from ``checkpoint_id``'s time (one 100 ns tick each) until the clock passes it.

    Args:
        checkpoint_id: A stored checkpoint's id; None, or an id that is not a UUIDv6, changes nothing.
    """
    from langgraph.checkpoint.base import id as ids

    try:
        u = UUID(str(checkpoint_id))
    except ValueError:
        return
    if u.version != 6:
        return
    stamp = (((u.int >> 80) & 0xFFFFFFFFFFFF) << 12) | ((u.int >> 64) & 0x0FFF)
    with _IDS_LOCK:
        if ids._last_v6_timestamp is None or ids._last_v6_timestamp < stamp:
            ids._last_v6_timestamp = stamp


_IDS_LOCK = threading.Lock()


class ThreadedAsyncSaver:
    """The async methods of a LangGraph checkpointer, each running the saver's sync method in a worker thread.

    Mixed in before a sync saver (``SqliteSaver``, ``PostgresSaver``), it makes one checkpointer
    serve ``invoke``/``stream`` and ``ainvoke``/``astream`` alike: the sync method runs in
    ``asyncio.to_thread``, so the event loop never waits on the database. The saver's own lock
    (SQLite) or connection pool (Postgres) serialises or bounds the calls, as under ``invoke``.

    Its ``get_tuple`` also keeps the ids of the checkpoints written next above the one it loads
    (:func:`keep_ids_after`), so a run on a clock behind the last run's still writes the thread's latest.
    """

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``get_tuple``; the next checkpoint ids of this process sort after the loaded one's."""
        tup = super().get_tuple(config)  # type: ignore[misc]
        if tup is not None:
            keep_ids_after(tup.config["configurable"].get("checkpoint_id"))
        return tup

    async def aget_tuple(self, config: Any) -> Any:
        """``get_tuple`` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)  # type: ignore[attr-defined]

    async def alist(
        self, config: Any, *, filter: dict[str, Any] | None = None, before: Any = None, limit: int | None = None
    ) -> AsyncIterator[Any]:
        """``list`` in a worker thread, read whole, then yielded item by item."""
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))  # type: ignore[attr-defined]
        )
        for item in items:
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """``put`` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)  # type: ignore[attr-defined]

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """``put_writes`` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)  # type: ignore[attr-defined]

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)  # type: ignore[attr-defined]

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` in a worker thread."""
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))  # type: ignore[attr-defined]


try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError:  # pragma: no cover - a dependency of taskctx
    SqliteSaver = object  # type: ignore[assignment,misc]


class PruningSqliteSaver(ThreadedAsyncSaver, SqliteSaver):  # type: ignore[misc,valid-type]
    """``SqliteSaver`` with ``prune(thread_ids, strategy=...)``, as ``PostgresSaver`` has it, and the async methods.

    The contract of ``BaseCheckpointSaver.prune``, which ``SqliteSaver`` does not implement.
    taskctx uses no ``DeltaChannel``, so the latest checkpoint holds the whole state. The async
    methods (``aget_tuple``, ``aput``...) run the sync ones in a worker thread
    (:class:`ThreadedAsyncSaver`), so ``ainvoke``/``astream`` work on the same saver.
    """

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the threads ``thread_ids``, in one transaction.

        Args:
            thread_ids: The threads.
            strategy: ``keep_latest`` keeps each namespace's latest checkpoint (the one ``get_tuple``
                loads) and its writes, deletes the others and their writes, and clears the kept one's
                parent; ``delete`` removes the threads.

        Raises:
            TypeError: ``thread_ids`` is a single ``str``.
            ValueError: Another strategy.
        """
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        with self.cursor() as cur:
            for tid in (str(t) for t in thread_ids):
                if strategy == "delete":
                    cur.execute("DELETE FROM checkpoints WHERE thread_id = ?", (tid,))
                    cur.execute("DELETE FROM writes WHERE thread_id = ?", (tid,))
                    continue
                heads = cur.execute(
                    "SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? GROUP BY checkpoint_ns",
                    (tid,),
                ).fetchall()
                for ns, head in heads:
                    cur.execute(
                        "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?",
                        (tid, ns, head),
                    )
                    cur.execute(
                        "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?",
                        (tid, ns, head),
                    )
                    cur.execute(
                        "UPDATE checkpoints SET parent_checkpoint_id = NULL "
                        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                        (tid, ns, head),
                    )


def open_readonly_checkpointer(path: str, serde: Any) -> tuple[sqlite3.Connection, Any]:
    """A checkpointer that reads a SQLite file's checkpoints and never writes.

    Args:
        path: The SQLite file (opened ``mode=ro``: :func:`context.sqlite_db.connect_readonly`).
        serde: The checkpoint serializer.

    Returns:
        ``(connection, checkpointer)``: LangGraph's ``SqliteSaver`` never set up (its setup would
        create tables and set WAL mode), or an empty ``InMemorySaver`` when the file has no
        checkpoint tables (stores written through the Python API).

    Raises:
        StoreOpenError: The file cannot be read.
    """
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from context.sqlite_db import connect_readonly, sqlite_tables

    conn = connect_readonly(path)
    if {"checkpoints", "writes"} <= sqlite_tables(conn):
        saver = SqliteSaver(conn, serde=serde)
        saver.is_setup = True
        return conn, saver
    return conn, InMemorySaver(serde=serde)
