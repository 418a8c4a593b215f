"""The Postgres checkpointer for ``--db postgresql://...``: a pooled saver that retries dropped connections."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from context import ServerLostError, StoreOpenError, pg_server
from context.pg_server import (
    forget_lost,
    known_lost,
    lost_server_message,
    mark_lost,
    quiet_pool_reconnects,
    server_unreachable,
)
from context.pg_store import SCHEMA_LOCK, redact_url

from .checkpoint import ThreadedAsyncSaver

__all__ = ["CHECKPOINTER_APPLICATION_NAME", "RetryingPostgresSaver", "open_postgres_checkpointer"]

T = TypeVar("T")

CHECKPOINTER_APPLICATION_NAME = "taskctx-checkpointer"

try:  # optional: pip install 'taskctx[postgres]'
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

    from context.pg_bounded import BoundedConnection, NoAnswerError, tcp_settings
except ImportError:  # pragma: no cover - depends on the install
    PostgresSaver = object  # type: ignore[assignment,misc]
    psycopg = None  # type: ignore[assignment]


class RetryingPostgresSaver(ThreadedAsyncSaver, PostgresSaver):  # type: ignore[misc,valid-type]
    """``PostgresSaver`` whose calls are retried on a fresh connection when the connection drops.

    Its async methods run the (retried) sync ones in a worker thread on the same pool
    (:class:`graphs.checkpoint.ThreadedAsyncSaver`), so ``ainvoke``/``astream`` work on it too.

    A connection that drops during a call raises ``psycopg.OperationalError``; every write of
    ``PostgresSaver`` is an upsert or ``ON CONFLICT DO NOTHING``, so a retried write cannot
    duplicate anything.

    Args:
        conn: The connection pool.
        pipe: A pipeline, as ``PostgresSaver`` takes it.
        serde: The serializer (:func:`graphs.checkpoint.checkpoint_serde`).
    """

    retries: int = 3

    def __init__(self, conn: Any, pipe: Any = None, serde: Any = None) -> None:
        super().__init__(conn, pipe, serde)
        # shared with the shallow copies LangGraph makes (``with_allowlist``)
        self._retried = [0]
        if isinstance(conn, ConnectionPool):
            # each call takes its own pooled connection: PostgresSaver's per-instance lock (there
            # for a single shared connection) would serialise all threads of a worker for nothing
            self.lock = contextlib.nullcontext()  # type: ignore[assignment]

    def _retry(self, fn: Callable[[], T]) -> T:
        """``fn()``, retried on a dropped connection; a server that does not answer is one line.

        A wait for a pooled connection that ran out (the pool's timeout,
        :data:`context.pg_server.SERVER_WAIT_SECONDS`) is not retried: the server is asked
        directly, and when it does not answer :class:`context.ServerLostError` names it. So is a
        query the server did not answer within that time (:class:`context.pg_bounded.NoAnswerError`).
        """
        delay = 0.05
        url = _conninfo(self.conn)
        for attempt in range(self.retries + 1):
            if (cause := known_lost(url)) is not None:  # found lost before: no second wait
                raise ServerLostError(lost_server_message(redact_url(url), cause))
            try:
                return fn()
            except psycopg.OperationalError as exc:
                # no connection within the wait, or a query the server never answered: ask it at once
                if isinstance(exc, PoolTimeout | NoAnswerError) or attempt >= self.retries:
                    if (cause := server_unreachable(url)) is not None:
                        mark_lost(url, cause)
                        raise ServerLostError(lost_server_message(redact_url(url), cause)) from exc
                    raise
                self._retried[0] += 1
                time.sleep(delay)
                delay *= 4
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def retried(self) -> int:
        """Calls retried after a dropped connection so far (diagnostics)."""
        return self._retried[0]

    def get_tuple(self, config):  # type: ignore[no-untyped-def]
        """``PostgresSaver.get_tuple``, retried when the connection drops."""
        return self._retry(lambda: super(RetryingPostgresSaver, self).get_tuple(config))

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def]
        """``PostgresSaver.put``, retried when the connection drops."""
        return self._retry(lambda: super(RetryingPostgresSaver, self).put(config, checkpoint, metadata, new_versions))

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[no-untyped-def]
        """``PostgresSaver.put_writes``, retried when the connection drops."""
        return self._retry(lambda: super(RetryingPostgresSaver, self).put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id):  # type: ignore[no-untyped-def]
        """``PostgresSaver.delete_thread``, retried when the connection drops."""
        return self._retry(lambda: super(RetryingPostgresSaver, self).delete_thread(thread_id))

    def prune(self, thread_ids, *, strategy="keep_latest"):  # type: ignore[no-untyped-def]
        """``PostgresSaver.prune``, retried when the connection drops."""
        return self._retry(lambda: super(RetryingPostgresSaver, self).prune(thread_ids, strategy=strategy))

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[Any]:  # type: ignore[no-untyped-def]
        # retried only until the first item is out (a half-consumed listing is not replayed)
        """``PostgresSaver.list``, retried until its first item is out (a half-consumed listing is not replayed)."""
        return iter(
            self._retry(
                lambda: list(super(RetryingPostgresSaver, self).list(config, filter=filter, before=before, limit=limit))
            )
        )


def _conninfo(conn: Any) -> str:
    """The URL of a pool or connection (a pool's ``conninfo``; a connection's ``info.dsn``)."""
    return str(getattr(conn, "conninfo", None) or conn.info.dsn)


def open_postgres_checkpointer(
    url: str, *, serde: Any = None, max_size: int = 4, check: bool = True, readonly: bool = False
) -> tuple[RetryingPostgresSaver, Any]:
    """A set-up :class:`RetryingPostgresSaver` on a new connection pool, and the pool.

    The pool checks each connection before handing it out, so one the server dropped while idle is
    replaced; ``setup()`` runs under a session advisory lock so several workers can start on a
    fresh database at once. Connections carry ``application_name=taskctx-checkpointer``.

    Args:
        url: The ``postgresql://`` URL.
        serde: The serializer.
        max_size: The pool's size: each call of the saver takes its own connection, so this bounds
            the concurrent checkpoint reads and writes of one worker.
        check: Check connections before handing them out (False: tests of the retry path only).
        readonly: No ``setup()`` (no DDL) and read-only sessions; for ``inspect``, ``list`` and
            ``report``.

    Returns:
        ``(saver, pool)``: close the pool when done.

    Raises:
        StoreOpenError: The server cannot be reached, or another worker's set-up did not finish
            in time.
    """
    if psycopg is None:  # pragma: no cover
        raise StoreOpenError(
            f"--db {redact_url(url)} needs langgraph-checkpoint-postgres and psycopg: pip install 'taskctx[postgres]'"
        )
    kwargs = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "application_name": CHECKPOINTER_APPLICATION_NAME,
        "connect_timeout": 10,
        "answer_wait": pg_server.SERVER_WAIT_SECONDS,
        **tcp_settings(pg_server.SERVER_WAIT_SECONDS),
    }
    quiet_pool_reconnects()
    if readonly:
        return _open_readonly(url, kwargs, serde=serde, max_size=max_size, check=check)
    return _open_and_set_up(url, kwargs, serde=serde, max_size=max_size, check=check)


def _open_readonly(
    url: str, kwargs: dict[str, Any], *, serde: Any, max_size: int, check: bool
) -> tuple[RetryingPostgresSaver, Any]:
    """The saver on a pool of read-only sessions, without ``setup()``."""
    kwargs["options"] = "-c default_transaction_read_only=on"
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs=kwargs,
        connection_class=BoundedConnection,
        open=False,
        timeout=pg_server.SERVER_WAIT_SECONDS,
        check=ConnectionPool.check_connection if check else None,
        name="taskctx-checkpointer",
    )
    try:
        pool.open(wait=True, timeout=30)
    except Exception as exc:
        pool.close()
        raise StoreOpenError(
            f"cannot open the checkpointer at {redact_url(url)}: {' '.join(str(exc).split())}; "
            "check the URL and that the server runs"
        ) from exc
    forget_lost(url)  # it answered just now
    return RetryingPostgresSaver(pool, serde=serde), pool


def _open_and_set_up(
    url: str, kwargs: dict[str, Any], *, serde: Any, max_size: int, check: bool
) -> tuple[RetryingPostgresSaver, Any]:
    """The saver on a new pool, its tables set up under a session advisory lock."""
    try:
        wait = pg_server.SERVER_WAIT_SECONDS
        with BoundedConnection.connect(
            url, autocommit=True, connect_timeout=10, answer_wait=wait, **tcp_settings(wait)
        ) as lock_conn:
            # poll, never wait inside a statement: setup() runs CREATE INDEX CONCURRENTLY, which
            # waits for every open transaction, including a blocked pg_advisory_lock (deadlock)
            deadline = time.monotonic() + 120
            while not lock_conn.execute("SELECT pg_try_advisory_lock(%s)", (SCHEMA_LOCK + 1,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise StoreOpenError(
                        f"timed out waiting for another worker to set up the checkpointer tables in {redact_url(url)}"
                    )
                time.sleep(0.05)
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max_size,
                kwargs=kwargs,
                connection_class=BoundedConnection,
                open=True,
                timeout=pg_server.SERVER_WAIT_SECONDS,
                check=ConnectionPool.check_connection if check else None,
                name="taskctx-checkpointer",
            )
            try:
                saver = RetryingPostgresSaver(pool, serde=serde)
                saver.setup()
            except BaseException:
                pool.close()
                raise
            lock_conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK + 1,))
            forget_lost(url)  # it answered just now
    except psycopg.Error as exc:
        raise StoreOpenError(
            f"cannot open the checkpointer at {redact_url(url)}: {' '.join(str(exc).split())}; "
            "check the URL and that the server runs"
        ) from exc
    return saver, pool
