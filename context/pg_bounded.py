"""psycopg connections that wait a bounded time for the server to answer.

A server that accepts connections but never answers (its processes stopped, a stalled VM, a
half-open network path) leaves a plain psycopg call waiting forever: psycopg has no client-side
statement timeout, and ``statement_timeout`` is the server's own. Every connection taskctx opens
is a :class:`BoundedConnection` given ``answer_wait`` (:data:`context.pg_server.SERVER_WAIT_SECONDS`):
each wait for the server (a statement, a commit, a pool's check) ends after that long with
:class:`NoAnswerError` and the connection closed. The connection attempt itself is bounded by
``connect_timeout``, and :func:`tcp_settings` has the kernel give up on a peer that stopped
acknowledging.

Imported only when a Postgres URL is opened (psycopg is optional, the postgres extra).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import psycopg

__all__ = ["BoundedConnection", "NoAnswerError", "tcp_settings"]


class NoAnswerError(psycopg.OperationalError):
    """The server did not answer within the bound; the connection was closed."""


def tcp_settings(seconds: float) -> dict[str, Any]:
    """The libpq settings that end a connection whose peer stopped acknowledging (a half-open path).

    Args:
        seconds: How long sent data may stay unacknowledged.

    Returns:
        ``keepalives`` on (idle 10 s, then every 5 s, 3 probes) and ``tcp_user_timeout`` of
        ``seconds`` in milliseconds; libpq ignores them on a Unix socket.
    """
    return {
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": max(1, int(seconds * 1000)),
    }


def _until(gen: Generator[Any, Any, Any], deadline: float, seconds: float) -> Generator[Any, Any, Any]:
    """``gen``, ended with :class:`NoAnswerError` once it is resumed after ``deadline``.

    psycopg's wait resumes the generator every few tenths of a second even when nothing arrived
    (that is how it notices Ctrl-C), so the check runs while the server is silent.
    """
    try:
        state = next(gen)
        while True:
            ready = yield state
            if time.monotonic() > deadline:
                gen.close()
                raise NoAnswerError(f"the server did not answer within {seconds:g} s")
            state = gen.send(ready)
    except StopIteration as stop:
        return stop.value


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait for the server is bounded.

    Attributes:
        answer_wait: Seconds a wait may last (None: no bound, as psycopg's own connection).
    """

    answer_wait: float | None = None

    @classmethod
    def connect(  # type: ignore[override]
        cls, conninfo: str = "", *, answer_wait: float | None = None, **kwargs: Any
    ) -> BoundedConnection:
        """A new connection, as ``psycopg.Connection.connect``, whose waits last ``answer_wait`` at most.

        Args:
            conninfo: The URL or conninfo string.
            answer_wait: Seconds each wait for the server may last (None: no bound).
            **kwargs: psycopg's and libpq's connection parameters (``connect_timeout`` bounds the
                connection attempt).

        Returns:
            The connection.

        Raises:
            psycopg.OperationalError: The connection failed or timed out.
        """
        conn = super().connect(conninfo, **kwargs)
        conn.answer_wait = answer_wait
        return conn

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        """The psycopg ``wait`` on ``gen``, ended after :attr:`answer_wait` seconds.

        Args:
            gen: psycopg's generator of the operation.
            *args: psycopg's other arguments (``interval``, ...).
            **kwargs: The same by name.

        Returns:
            What the operation returns.

        Raises:
            NoAnswerError: No answer within the bound; the connection is closed (its state is
                unknown), so a pool drops it.
        """
        seconds = self.answer_wait
        if seconds is None:
            return super().wait(gen, *args, **kwargs)
        try:
            return super().wait(_until(gen, time.monotonic() + seconds, seconds), *args, **kwargs)
        except NoAnswerError:
            self.close()
            raise
