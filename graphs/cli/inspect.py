"""``taskctx inspect TASK_ID [--json]``: a task's state as a person reads it (the view is
:func:`graphs.report.render_state`)."""

from __future__ import annotations

import sqlite3
import sys
from typing import Annotated

import typer

from context import PAYLOAD_MODELS, DamagedStoreError, TaskctxError, UnknownTaskError
from context.verify import check_events

from ..orchestrator import DEFAULT_DB, db_exists
from .common import DbOpt, _describe, _fail, _open, console, err

__all__ = ["inspect"]


def inspect(
    task_id: Annotated[str, typer.Argument(help="The task to show.")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print the TaskContext as JSON.")] = False,
) -> None:
    """Print a task's state as a person reads it (a damaged log: a warning per finding first)."""
    from ..report import render_state

    try:
        if not db_exists(db):
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = _open(db)
        try:
            events = project.stores.events.read(task_id)
            found = check_events(events)
        except DamagedStoreError as exc:  # a gap: show what is left, after saying so
            found = exc.problems
            events = project.stores.events.read(task_id, kinds=list(PAYLOAD_MODELS))
        if not events:
            raise UnknownTaskError(
                f"no task {task_id!r} in {db} (tasks: {', '.join(project.stores.events.task_ids()) or 'none'})"
            )
        for f in found:
            err.print(f"warning: task {task_id} is damaged: {f}", markup=False)
        from context import replay as fold

        try:
            ctx = fold(events)
        except Exception as exc:  # a payload its kind does not allow: nothing trustworthy to show
            raise DamagedStoreError(
                f"task {task_id!r} is damaged ({found[0] if found else type(exc).__name__}) and cannot be shown; "
                f"run `taskctx doctor {task_id}` for every finding"
            ) from exc
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
