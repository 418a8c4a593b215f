"""A Postgres server that hangs (accepts TCP, never answers) during a run: one line, nothing lost.

The stores and the checkpointer reach the test server through a loopback proxy
(``tests/pg_hung.py``) that is made to hang the way a stopped server, a stalled VM or a half-open
path does: open connections and new ones are accepted, nothing is answered. The next call ends
with :class:`context.ServerLostError` naming the server, the cause (``connect timed out``), that
every event recorded before is kept, and ``taskctx resume``. The bounds are the configured ones
(every connection a :class:`context.pg_bounded.BoundedConnection` waiting
:data:`context.pg_server.SERVER_WAIT_SECONDS`, 1 s here; the probe's 3 s connect timeout), not
timed. Once the proxy forwards again, the log holds every event written before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from pg_hung import HungProxy

from context import ServerLostError, new_event, pg_server
from context.pg_bounded import BoundedConnection
from context.pg_store import PgStores

pytestmark = pytest.mark.postgres

TS = "2026-01-01T00:00:00.000Z"


def call(i: int) -> Any:
    return new_event(
        "tool.called", {"call_id": f"c{i}", "tool": "bash", "arguments": f'{{"n": {i}}}'}, actor="agent", timestamp=TS
    )


@pytest.fixture
def hung(pg_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HungProxy, str]]:
    """A proxy to a fresh database, its URL; the wait 1 s, no server marked lost before."""
    monkeypatch.setattr(pg_server, "SERVER_WAIT_SECONDS", 1.0)
    monkeypatch.setattr(pg_server, "_LOST", {})
    monkeypatch.setattr(pg_server, "_CONFIRMED", {})
    parts = urlsplit(pg_db)
    proxy = HungProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    user = f"{parts.username}@" if parts.username else ""
    yield proxy, urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
    proxy.close()


def _line(url: str) -> str:
    return (
        f"lost the Postgres server at {url}: connect timed out (no answer within 1 s); every event recorded "
        "before is kept; start the server (or restore the network), then continue with "
        "`taskctx resume TASK --db URL` (a command that only reads: run it again)"
    )


def test_a_hung_server_ends_a_store_call_with_the_lost_server_line(hung: tuple[HungProxy, str]) -> None:
    proxy, url = hung
    stores = PgStores(url)
    try:
        assert stores.pool.connection_class is BoundedConnection and stores.pool.timeout == 1.0
        assert stores.pool.kwargs["answer_wait"] == 1.0 and stores.pool.kwargs["tcp_user_timeout"] == 1000
        assert stores.pool.kwargs["keepalives"] == 1
        stores.events.append("t1", [call(1), call(2)])
        proxy.hang()
        with pytest.raises(ServerLostError) as info:
            stores.events.append("t1", [call(3)])
        assert str(info.value) == _line(url)
        with pytest.raises(ServerLostError) as again:  # found lost just now: not asked again, the same line
            stores.events.last_seq("t1")
        assert str(again.value) == _line(url)
    finally:
        stores.close()
    proxy.resume()
    back = PgStores(url)
    try:
        assert [(e.seq, e.payload["call_id"]) for e in back.events.read("t1")] == [(1, "c1"), (2, "c2")]
    finally:
        back.close()


def test_a_hung_server_ends_a_checkpointer_call_with_the_lost_server_line(hung: tuple[HungProxy, str]) -> None:
    from graphs.checkpoint import checkpoint_serde
    from graphs.postgres import open_postgres_checkpointer

    proxy, url = hung
    saver, pool = open_postgres_checkpointer(url, serde=checkpoint_serde())
    try:
        assert pool.connection_class is BoundedConnection and pool.kwargs["answer_wait"] == 1.0
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        assert saver.get_tuple(config) is None
        proxy.hang()
        with pytest.raises(ServerLostError) as info:
            saver.get_tuple(config)
        assert str(info.value) == _line(url)
    finally:
        pool.close()
