"""``taskctx doctor [TASK_ID]``: check a task's stored data (read-only).

``taskctx doctor [TASK_ID]``: run every check of :mod:`graphs.diagnosis` on one task (or every
task in the database) and print what it found. Read-only, as ``inspect``, ``list`` and
``report``: the database is opened with ``mode=ro`` (SQLite) or read-only sessions (Postgres).
"""

from __future__ import annotations

import sqlite3
from typing import Annotated

import typer

from context import TaskctxError, UnknownTaskError
from context.catalog import unknown_task_message

from ..diagnosis import clock_notes, diagnose, on_server
from ..project import DEFAULT_DB
from .core import DbOpt, console, describe, fail, open_existing

__all__ = ["SHOWN_FINDINGS", "doctor"]

#: Findings listed per task (the rest counted: ``- and K more``).
SHOWN_FINDINGS = 20


def doctor(
    task_id: Annotated[str | None, typer.Argument(help="The task to check (default: every task).")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Check a task's stored data (event log, artifacts, task registry, checkpoint); exit 2 if damaged.

    Prints ``task <id>: ok (<n> events)`` (``; started through the Python API`` for a task with
    no registry row that no taskctx command ran: not damaged; ``; run by LangGraph Server ...`` for
    a task whose checkpoints are the Server's) or one line per finding (what is
    damaged and where; every finding, the first 20 listed and the rest counted). A step back of
    the clock that dated the events is a ``note: clock_step: ...`` line, not damage.
    """
    try:
        project = open_existing(db, readonly=True)
        found_db: list[str] = []
        conn = getattr(project.stores, "_db", None)
        if conn is not None and hasattr(conn, "conn"):
            rows = [r[0] for r in conn.conn.execute("PRAGMA quick_check").fetchall()]
            if rows != ["ok"]:
                found_db = [f"database: {r}" for r in rows[:5]]
        ids = [task_id] if task_id else _task_ids(project)
        if not ids:
            raise UnknownTaskError(f"no tasks in {db}")
        damaged = 0
        for line in found_db:
            console.print(line, markup=False)
        for tid in ids:
            if not project.stores.events.last_seq(tid) and project.stores.tasks.get(tid) is None:
                raise UnknownTaskError(unknown_task_message(tid, db, _task_ids(project)))
            found = diagnose(project.stores, project.checkpointer, tid, resumable=True)
            if found:
                damaged += 1
                console.print(f"task {tid}: {len(found)} problem{'s' if len(found) > 1 else ''}", markup=False)
                for f in found[:SHOWN_FINDINGS]:
                    console.print(f"  - {f}", markup=False)
                if len(found) > SHOWN_FINDINGS:
                    console.print(f"  - and {len(found) - SHOWN_FINDINGS} more", markup=False)
            else:
                n = project.stores.events.last_seq(tid)
                spec = project.stores.tasks.get(tid)
                api = "" if spec is not None or not n else "; started through the Python API"
                if on_server(spec):
                    api = "; run by LangGraph Server, whose checkpoints are not in this database: not checked"
                console.print(f"task {tid}: ok ({n} events{api})", markup=False)
            for note in clock_notes(project.stores, tid):  # noted, never damage
                console.print(f"  note: {note}", markup=False)
        if damaged or found_db:
            console.print(
                f"{damaged} of {len(ids)} task{'s' if len(ids) > 1 else ''} damaged: restore the database from a "
                "backup, or start a damaged task again under a new --task-id",
                markup=False,
            )
            raise typer.Exit(2)
        project.close()
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail(describe(exc, db, task_id))


def _task_ids(project: object) -> list[str]:
    """Every task id the event log or the registry knows.

    Every task id the event log or the registry knows (neither read beyond its ids); not the
    log of memory confirmations made outside a task (:data:`context.memory.MEMORY_LOG`).
    """
    from context.memory import MEMORY_LOG

    stores = project.stores  # type: ignore[attr-defined]
    return sorted((set(stores.events.task_ids()) | set(stores.tasks.task_ids())) - {MEMORY_LOG})
