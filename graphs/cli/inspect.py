"""``taskctx inspect TASK_ID [--json]``: a task's state as a person reads it (the view is
:func:`graphs.report.render_state`)."""

from __future__ import annotations

import sqlite3
import sys
from typing import Annotated

import typer

from context import TaskctxError, UnknownTaskError

from ..orchestrator import DEFAULT_DB, db_exists
from .common import DbOpt, _describe, _fail, _open, console

__all__ = ["inspect"]


def inspect(
    task_id: Annotated[str, typer.Argument(help="The task to show.")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print the TaskContext as JSON.")] = False,
) -> None:
    """Print a task's state as a person reads it."""
    from ..report import render_state

    try:
        if not db_exists(db):
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = _open(db)
        events = project.stores.events.read(task_id)
        if not events:
            raise UnknownTaskError(
                f"no task {task_id!r} in {db} (tasks: {', '.join(project.stores.events.task_ids()) or 'none'})"
            )
        from context import replay as fold

        ctx = fold(events)
        if as_json:
            sys.stdout.write(ctx.model_dump_json(indent=2) + "\n")
            return
        snap = project.checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
        checkpoints = [
            c.config["configurable"]["checkpoint_id"]
            for c in project.checkpointer.list({"configurable": {"thread_id": task_id}}, limit=5)
        ]
        render_state(console, ctx, events, checkpoints, snap is not None)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db))
