"""A Postgres server that went away: how long taskctx waits for it, and the one line that says so.

Both connection pools (the stores' and the checkpointer's) wait at most :data:`SERVER_WAIT_SECONDS`
for a connection, and every connection waits at most as long for an answer
(:class:`context.pg_bounded.BoundedConnection`: a server that accepts connections but never answers).
When a wait ends, or a call keeps losing its connection, :func:`server_unreachable` asks the server
directly: no answer is a lost server (:func:`lost_server_message`), not a busy pool.
The pools' own reconnect warnings are not printed (:func:`quiet_pool_reconnects`): the one line is.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

__all__ = [
    "SERVER_WAIT_SECONDS",
    "forget_lost",
    "known_lost",
    "lost_server_message",
    "mark_lost",
    "quiet_pool_reconnects",
    "server_unreachable",
]

#: Seconds a pooled call waits for a connection (and a retried call retries), and a connection waits
#: for an answer (a statement, a commit, a pool's check), before the server is asked directly
#: whether it is there.
SERVER_WAIT_SECONDS = 30.0

#: (text in psycopg's error, cause shown), first match wins.
_CAUSES = (
    ("Connection refused", "connection refused"),
    ("could not translate host name", "host name not resolved"),
    ("Name or service not known", "host name not resolved"),
    ("timeout expired", "connect timed out"),
    ("did not answer within", "no answer to a query"),
    ("No route to host", "no route to host"),
    ("Network is unreachable", "network unreachable"),
    ("the database system is shutting down", "the server is shutting down"),
    ("the database system is starting up", "the server is starting up"),
    ("the database system is in recovery mode", "the server is in recovery"),
    ("terminating connection due to administrator command", "the server ended the connection"),
)


def _cause(message: str) -> str:
    for needle, cause in _CAUSES:
        if needle in message:
            return cause
    text = " ".join(message.split())
    return re.sub(r"^connection failed: ", "", text)[:160]


def server_unreachable(url: str, *, timeout: int = 3) -> str | None:
    """Whether the server of ``url`` answers a new connection now, and if not why.

    Args:
        url: The ``postgresql://`` URL.
        timeout: Seconds to wait for the connection, and then for the answer to ``SELECT 1``.

    Returns:
        None when it answers; else the cause in a few words (``connection refused``, ...).
    """
    import psycopg  # (the postgres extra: only a Postgres store calls this)

    from .pg_bounded import BoundedConnection, tcp_settings

    try:
        with BoundedConnection.connect(
            url, connect_timeout=timeout, autocommit=True, answer_wait=timeout, **tcp_settings(timeout)
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return _cause(str(exc))
    return None


#: The servers found lost (host, port) and why: a later call asks the server at once instead of
#: waiting for the pool again, so one lost server costs one wait, not one per call.
_LOST: dict[tuple[str, str], str] = {}

#: Causes whose probe itself waits (a server that accepts connections and does not answer), and
#: how long after a probe found one the server is taken as still lost without asking again: the
#: calls a command makes while ending would each wait out a probe.
_SLOW_CAUSES = ("connect timed out", "no answer to a query")
_SLOW_FRESH_SECONDS = 10.0
_CONFIRMED: dict[tuple[str, str], float] = {}


def _server(url: str) -> tuple[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        d = conninfo_to_dict(re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url))
    except Exception:  # noqa: BLE001 - a URL psycopg cannot parse is its own key
        return (url, "")
    return (str(d.get("host") or ""), str(d.get("port") or "5432"))


def mark_lost(url: str, cause: str) -> None:
    """Note that the server of ``url`` was found lost (``cause``), for :func:`known_lost`.

    Args:
        url: The ``postgresql://`` URL.
        cause: Why (:func:`server_unreachable`).
    """
    _LOST[_server(url)] = cause
    _CONFIRMED[_server(url)] = time.monotonic()


def forget_lost(url: str) -> None:
    """Clear the mark of :func:`mark_lost`: the server of ``url`` just answered a new connection.

    Args:
        url: The ``postgresql://`` URL.
    """
    _LOST.pop(_server(url), None)
    _CONFIRMED.pop(_server(url), None)


def known_lost(url: str) -> str | None:
    """For a server found lost before: whether it is still lost (asked now, no pool wait).

    A server whose probe timed out (it accepts connections and does not answer) less than
    ``_SLOW_FRESH_SECONDS`` (10 s) ago is taken as still lost without asking: each probe of it waits.

    Args:
        url: The ``postgresql://`` URL.

    Returns:
        The cause when it was found lost and still does not answer; None otherwise (never found
        lost, or back: the mark is cleared).
    """
    key = _server(url)
    if key not in _LOST:
        return None
    if _LOST[key] in _SLOW_CAUSES and time.monotonic() - _CONFIRMED.get(key, 0.0) < _SLOW_FRESH_SECONDS:
        return _LOST[key]
    cause = server_unreachable(url)
    if cause is None:
        _LOST.pop(key, None)
    else:
        _LOST[key] = cause
        _CONFIRMED[key] = time.monotonic()
    return cause


def lost_server_message(where: str, cause: str) -> str:
    """The one line for a Postgres server that went away during a command.

    Args:
        where: The server (the redacted URL: no password).
        cause: Why (:func:`server_unreachable`).

    Returns:
        ``lost the Postgres server at ...: <cause>; ...`` naming what is kept and what to do.
    """
    return (
        f"lost the Postgres server at {where}: {cause} (no answer within {SERVER_WAIT_SECONDS:g} s); every event "
        "recorded before is kept; start the server (or restore the network), then continue with "
        "`taskctx resume TASK --db URL` (a command that only reads: run it again)"
    )


class _NoReconnectNoise(logging.Filter):
    """On the ``psycopg.pool`` logger: drop the warnings of failed reconnects (the one line says it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is printed: not a failed (re)connect attempt's warning."""
        msg = record.getMessage()
        return not (record.levelno == logging.WARNING and msg.startswith(("error connecting", "reconnection attempt")))


_FILTER: Any = None


def quiet_pool_reconnects() -> None:
    """Keep psycopg_pool's warnings about failed reconnects off stderr (once per process)."""
    global _FILTER
    if _FILTER is None:
        _FILTER = _NoReconnectNoise()
        logging.getLogger("psycopg.pool").addFilter(_FILTER)
