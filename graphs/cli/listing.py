"""``taskctx list``: every task of a database, and ``taskctx --version``.

``taskctx list [--db DB] [--json]``: every task of a database, one row each (read-only), and
``taskctx --version``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from context import TaskctxError, TaskInfo

from ..project import DEFAULT_DB
from ..report.hints import command_hint
from .core import DbOpt, console, describe, fail, open_existing

__all__ = ["list_command", "version_callback"]


def _stopped(t: TaskInfo) -> str | None:
    """Why a task that is not finished stopped, or None.

    Why a task that is not finished stopped (``"budget"``, ``"model"``), from its registry
    entry (``spec["stopped"]``, kept by the run command that failed, also when it failed before
    recording anything); else None.
    """
    stop = (t.spec or {}).get("stopped")
    if isinstance(stop, dict) and t.status not in ("completed", "failed"):
        return str(stop.get("reason"))
    return None


def _cost(project: Any, t: TaskInfo) -> dict[str, Any]:
    """``{"calls": totals}`` of a task's model calls (list prices), or nothing for a damaged or unstarted one."""
    if t.damage or not t.events:
        return {}
    try:
        return {"calls": project.model_call_totals(t.task_id).task.model_dump(mode="json")}
    except TaskctxError:
        return {}


def list_command(
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="Print a JSON list of {task_id, status, executor_steps, last_activity, events, registered, calls}"
            " (calls: the model calls' totals and cost at list prices; and stopped: the reason, for a task a run"
            " command stopped; damaged: the findings, for a damaged task; parent and fork_seq, for a fork;"
            " children: [{task_id, fork_seq}], for a task forked from).",
        ),
    ] = False,
) -> None:
    """List the tasks of a database, most recent activity first (read-only).

    One row per task: id, status, executor steps, last activity (UTC timestamp of its last
    event); tasks not started yet come last. A damaged task is listed as ``damaged`` with a line
    under the table naming its first finding (``--json``: ``damaged``, every finding).
    """
    costs: dict[str, dict[str, Any]] = {}
    try:
        project = open_existing(db, readonly=True)
        try:
            tasks = project.tasks()
            if as_json:
                costs = {t.task_id: _cost(project, t) for t in tasks}
        finally:
            project.close()
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail(describe(exc, db))
        return
    if as_json:
        rows = [{**t.as_json(), **({"stopped": _stopped(t)} if _stopped(t) else {}), **costs[t.task_id]} for t in tasks]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not tasks:
        console.print(f"no tasks in {project.path}", markup=False)
        return
    table = Table(title=f"tasks in {project.path}", title_justify="left")
    table.add_column("task")
    table.add_column("status")
    table.add_column("executor steps", justify="right")
    table.add_column("last activity (UTC)")
    for t in tasks:
        status = t.status if t.registered or t.damage else f"{t.status} (Python API)"
        if _stopped(t):
            status = f"stopped: {_stopped(t)}"
        table.add_row(t.task_id, status, "-" if t.damage else str(t.executor_steps), t.last_activity or "-")
    console.print(table)
    for t in tasks:
        if t.parent is not None:
            console.print(f"task {t.task_id} was forked from {t.parent} at seq {t.fork_seq}", markup=False)
    for t in tasks:
        if t.damage:
            more = f" (+{len(t.damage) - 1} more)" if len(t.damage) > 1 else ""
            console.print(
                f"task {t.task_id} is damaged: {t.damage[0]}{more}; see `{command_hint('doctor', t.task_id, db)}`",
                markup=False,
            )


def version_callback(value: bool) -> None:
    """``--version``: print ``taskctx <version>`` (the installed distribution's) and exit 0."""
    if value:
        from importlib.metadata import version

        console.print(f"taskctx {version('taskctx')}", markup=False)
        raise typer.Exit()
