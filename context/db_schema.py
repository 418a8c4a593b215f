"""taskctx's tables (events, tasks, artifacts; the task leases), shared by SQLite and Postgres."""

from __future__ import annotations

__all__ = ["TASKCTX_TABLES", "not_taskctx_message", "schema_sql"]

#: The tables every taskctx database holds (SQLite and Postgres).
TASKCTX_TABLES = ("taskctx_events", "taskctx_tasks", "taskctx_artifacts")


def schema_sql(*, bigint: str, blob: str, real: str = "REAL") -> str:
    """The DDL of taskctx's tables.

    Args:
        bigint: The backend's name for a 64-bit integer (SQLite ``INTEGER``, Postgres ``BIGINT``).
        blob: Its name for a byte string (SQLite ``BLOB``, Postgres ``BYTEA``).
        real: Its name for a double (SQLite ``REAL``, Postgres ``DOUBLE PRECISION``).

    Returns:
        ``CREATE TABLE IF NOT EXISTS`` statements for the three tables and the task leases
        (:mod:`context.lease`), which a database made before them gains when opened read-write.
    """
    return f"""
CREATE TABLE IF NOT EXISTS taskctx_events (
    task_id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    actor TEXT NOT NULL,
    payload TEXT NOT NULL,
    causation_id TEXT,
    correlation_id TEXT,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS taskctx_tasks (
    task_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS taskctx_artifacts (
    digest TEXT PRIMARY KEY,
    size {bigint} NOT NULL,
    data {blob} NOT NULL
);
CREATE TABLE IF NOT EXISTS taskctx_leases (
    task_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid {bigint} NOT NULL,
    started TEXT NOT NULL,
    token TEXT NOT NULL,
    heartbeat {real} NOT NULL,
    expires {real} NOT NULL
);
"""


def not_taskctx_message(path: str) -> str:
    """The one line for a database that holds no taskctx tables (read-only open).

    Args:
        path: The database's path or redacted URL.

    Returns:
        ``<path> is not a taskctx database (no taskctx tables); pass the --db ...``.
    """
    return f"{path} is not a taskctx database (no taskctx tables); pass the --db a task was started with"
