"""The CLI's line for a lost Postgres server names the command that continues this task, with its --db."""

from __future__ import annotations

from context import ServerLostError
from context.pg_server import lost_server_message
from graphs.cli.core import describe


def test_a_lost_server_line_names_the_resume_of_the_task() -> None:
    db = "postgresql://app@db.internal:5432/taskctx"
    exc = ServerLostError(lost_server_message(db, "connection refused"))
    assert describe(exc, db, "t1") == (
        f"lost the Postgres server at {db}: connection refused (no answer within 30 s); every event recorded "
        f"before is kept; start the server (or restore the network), then continue with `taskctx resume t1 --db {db}` "
        "(a command that only reads: run it again)"
    )
    assert "`taskctx resume TASK --db URL`" in describe(exc, db)  # no task: the generic form
