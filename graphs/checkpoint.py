"""Checkpointer setup: a serializer that knows the TaskContext's classes, and pruning: a
thread keeps only its latest checkpoint (:func:`prune_thread`, :class:`PruningSqliteSaver`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import context.models as _models

__all__ = ["CHECKPOINT_TYPES", "PRUNE_EVERY", "PruningSqliteSaver", "checkpoint_serde", "prune_thread"]

#: ``(module, class)`` of every model a TaskContext checkpoint holds.
CHECKPOINT_TYPES: list[tuple[str, str]] = [
    ("context.models", name) for name in _models.__all__ if isinstance(getattr(_models, name), type)
]


def checkpoint_serde() -> JsonPlusSerializer:
    """A serializer for any LangGraph checkpointer (``InMemorySaver(serde=checkpoint_serde())``)
    that loads TaskContext parts without the "unregistered type" warning; works the same with
    ``LANGGRAPH_STRICT_MSGPACK=true``."""
    return JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)


#: Supersteps between two prunes of a thread's checkpoints while :func:`graphs.runner.run_graph` runs
#: with ``prune=True`` (and once more when the run ends).
PRUNE_EVERY = 50


def prune_thread(checkpointer: Any, thread_id: str) -> bool:
    """Keep only the latest checkpoint of ``thread_id`` (with its pending writes) and delete the
    rest, with the saver's own ``prune(strategy="keep_latest")``: LangGraph's on Postgres, the
    same contract on SQLite (:class:`PruningSqliteSaver`). Returns False, changing nothing, for a
    saver without ``prune`` (``InMemorySaver``). The event log is the task's source of truth and
    time travel is refused, so older checkpoints are a cache nothing reads back."""
    try:
        checkpointer.prune([thread_id], strategy="keep_latest")
    except NotImplementedError:
        return False
    return True


try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError:  # pragma: no cover - a dependency of taskctx
    SqliteSaver = object  # type: ignore[assignment,misc]


class PruningSqliteSaver(SqliteSaver):  # type: ignore[misc,valid-type]
    """``SqliteSaver`` with ``prune(thread_ids, strategy=...)``, the contract of
    ``BaseCheckpointSaver.prune`` that ``PostgresSaver`` implements and ``SqliteSaver`` 3.1 does
    not: ``"keep_latest"`` keeps each namespace's latest checkpoint (the one ``get_tuple`` loads)
    and its writes, deletes the others and their writes, and clears the kept one's parent;
    ``"delete"`` removes the threads. One transaction per call. taskctx uses no ``DeltaChannel``,
    so the latest checkpoint holds the whole state. Raises ``TypeError`` for a single ``str`` and
    ``ValueError`` for another strategy."""

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
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
