"""A Postgres server that accepts connections and never answers is bounded, without a real server.

Loopback listeners (``tests/pg_hung.py``): one completes the startup handshake and then never
answers, so a statement waits on an open connection; one never sends a byte, so a new connection
waits. The bounds asserted are the configured ones (``SERVER_WAIT_SECONDS``, ``connect_timeout``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from pg_hung import answered_then_silent, silent_server  # noqa: E402

from context import pg_server  # noqa: E402
from context.pg_bounded import BoundedConnection, NoAnswerError, tcp_settings  # noqa: E402


def test_a_statement_the_server_never_answers_ends_with_no_answer_and_a_closed_connection() -> None:
    listener, port = answered_then_silent()
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        conn = BoundedConnection.connect(url, autocommit=True, answer_wait=0.5)
        assert conn.answer_wait == 0.5
        with pytest.raises(NoAnswerError) as info:
            conn.execute("SELECT 1")
        assert str(info.value) == "the server did not answer within 0.5 s"
        assert conn.closed
    finally:
        listener.close()


def test_without_answer_wait_it_is_psycopg_s_own_unbounded_connection() -> None:
    listener, port = answered_then_silent()
    try:
        conn = BoundedConnection.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True)
        assert conn.answer_wait is None and not conn.closed
        conn.close()
    finally:
        listener.close()


def test_a_server_that_accepts_and_never_answers_is_unreachable_after_the_connect_timeout() -> None:
    listener, port = silent_server()
    try:
        assert pg_server.server_unreachable(f"postgresql://postgres@127.0.0.1:{port}/postgres", timeout=2) == (
            "connect timed out"
        )
    finally:
        listener.close()


def test_a_server_that_answers_the_handshake_only_is_unreachable_too() -> None:
    listener, port = answered_then_silent()
    try:  # the probe's SELECT 1 waits as long as its connect: no answer is a cause, not a hang
        assert pg_server.server_unreachable(f"postgresql://postgres@127.0.0.1:{port}/postgres", timeout=2) == (
            "no answer to a query"
        )
    finally:
        listener.close()


def test_tcp_settings_follow_the_wait() -> None:
    assert tcp_settings(0.5) == {
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 500,
    }


def test_a_lost_server_line_for_a_hung_server() -> None:
    assert pg_server.lost_server_message("postgresql://app@db:5432/t", "connect timed out") == (
        "lost the Postgres server at postgresql://app@db:5432/t: connect timed out (no answer within 30 s); every "
        "event recorded before is kept; start the server (or restore the network), then continue with "
        "`taskctx resume TASK --db URL` (a command that only reads: run it again)"
    )


def test_a_server_found_hung_just_now_is_not_asked_again_but_a_refusing_one_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pg_server, "_LOST", {})
    monkeypatch.setattr(pg_server, "_CONFIRMED", {})
    asked: list[str] = []
    monkeypatch.setattr(pg_server, "server_unreachable", lambda url: asked.append(url) or "connection refused")
    pg_server.mark_lost("postgresql://app@db:5432/a", "connect timed out")
    assert pg_server.known_lost("postgresql://app@db:5432/b") == "connect timed out" and asked == []
    monkeypatch.setattr(pg_server, "_SLOW_FRESH_SECONDS", 0.0)
    assert pg_server.known_lost("postgresql://app@db:5432/a") == "connection refused"
    assert asked == ["postgresql://app@db:5432/a"]
    assert pg_server.known_lost("postgresql://app@db:5432/a") == "connection refused" and len(asked) == 2
