"""``taskctx inspect TASK_ID [--json] [--all] [--calls]``: a task's state as a person reads it.

The data is :meth:`graphs.Project.inspect` (a :class:`graphs.TaskView`), the text view
:func:`graphs.report.render_view`. Read-only: the database is opened with ``mode=ro`` (SQLite)
or read-only sessions (Postgres) and nothing is created or changed.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Annotated, Any

import typer

from context import DamagedStoreError, TaskctxError, call_totals

from ..costs import call_row
from ..diagnosis import clock_notes
from ..inspection import TaskView, UnshowableTaskError
from ..project import DEFAULT_DB
from ..report.calls_text import render_calls, render_totals
from ..report.hints import command_hint
from .core import (
    EXIT_BAD_INPUT,
    DbOpt,
    console,
    describe,
    err,
    fail,
    open_existing,
)
from .price_options import PricedAsOpt, PricesOpt, price_options

__all__ = ["inspect", "stop_line"]


def inspect(
    task_id: Annotated[str, typer.Argument(help="The task to show.")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print the TaskContext as JSON.")] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            metavar="",
            help="List every plan step and every error, from the event log (not only the state's window).",
        ),
    ] = False,
    calls: Annotated[
        bool,
        typer.Option(
            "--calls",
            metavar="",
            help="Show one row per model call (tokens, provider usage, latency, cost, dropped blocks); "
            "with --json, print them as JSON.",
        ),
    ] = False,
    prices: PricesOpt = None,
    priced_as: PricedAsOpt = None,
) -> None:
    """Print a task's state as a person reads it (read-only; a damaged log: a warning per finding first)."""
    try:
        table = price_options(prices, priced_as)
        project = open_existing(db, readonly=True)
        try:
            try:
                # --json keeps the whole fold (a checkpoint's dicts come back in another key order)
                view = project.inspect(task_id, full=show_all or as_json)
            except UnshowableTaskError as exc:
                _warn(task_id, exc.shown_findings)
                if as_json and not calls:  # a script reads the damage in the JSON, not a traceback
                    _json_damage(task_id, None, [*exc.shown_findings, exc.what], describe(exc, db))
                raise
            except DamagedStoreError as exc:
                if as_json and not calls:
                    found = [exc.what] if exc.problems == [str(exc)] else exc.problems
                    _json_damage(task_id, None, found, describe(exc, db))
                raise
            if not view.started:
                _not_started(view, db, as_json)
                return
            _warn(task_id, view.findings)
            for note in clock_notes(project.stores, task_id):  # noted, never damage
                err.print(f"note: task {task_id}: {note}", markup=False)
            if calls:
                _calls(project, task_id, as_json, table, priced_as)
                return
            if as_json:
                assert view.state is not None
                if view.findings:
                    _json_damage(task_id, view.state, view.findings, damaged_hint(task_id, db))
                sys.stdout.write(view.state.model_dump_json(indent=2) + "\n")
                return
            _render(view, db, show_all, project.model_call_totals(task_id, prices=table, priced_as=priced_as))
            if show_all and not view.findings:  # (a damaged log's steps are not fork points)
                _fork_points(task_id, project.stores.events.read(task_id))
        finally:
            project.close()
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail(describe(exc, db))


def _calls(project: Any, task_id: str, as_json: bool, prices: dict[str, Any], priced_as: str | None) -> None:
    """``--calls``: the table of the task's model calls and its totals, or (``--json``) the calls and totals as JSON."""
    found = project.model_calls(task_id, prices=prices, priced_as=priced_as)
    totals = call_totals(found)
    if as_json:
        out = {"calls": [call_row(c) for c in found], "totals": totals.model_dump(mode="json")}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    render_calls(console, found)
    render_totals(console, totals)


def damaged_hint(task_id: str, db: str) -> str:
    """What to do about a task that is damaged but still shows (the ``damage.message`` of ``--json``)."""
    return (
        f"task {task_id!r} is damaged; run `{command_hint('doctor', task_id, db)}` for every finding; restore the "
        "database from a backup, or start the task again under a new --task-id"
    )


def _json_damage(task_id: str, state: Any, findings: list[str], message: str) -> None:
    """``inspect --json`` of a damaged task: the state with a ``damage`` field, then exit 2 (as doctor).

    The JSON is the state's (``null`` when it cannot be shown) with ``damage``: ``findings`` (one
    line each), ``inspectable`` (the state shown is the readable part) and ``message`` (what to do).
    """
    out = json.loads(state.model_dump_json()) if state is not None else {"task_id": task_id, "state": None}
    out["damage"] = {"findings": list(findings), "inspectable": state is not None, "message": message}
    sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    if state is not None:
        raise typer.Exit(EXIT_BAD_INPUT)


def _warn(task_id: str, findings: list[str]) -> None:
    """One ``warning:`` line on stderr per finding about the task's damage."""
    for f in findings:
        err.print(f"warning: task {task_id} is damaged: {f}", markup=False)


def _not_started(view: TaskView, db: str, as_json: bool) -> None:
    """Say that a registered task has not started.

    A registered task whose first node failed before it recorded anything: one line (its
    input state with ``--json``, when a checkpoint holds it).
    """
    spec, task_id = view.spec or {}, view.task_id
    line = (
        f"task {task_id}: not started ({spec.get('kind')} task, budget {spec.get('budget')}): no events "
        f"yet (its first node failed, or is still running); continue it with "
        f"`{command_hint('resume', task_id, db)}` (--budget N to change the budget)"
    )
    if stop_line(spec, task_id, db):
        line = f"task {task_id}: not started; {stop_line(spec, task_id, db)}"
    if not as_json:
        console.print(line, markup=False)
    elif view.input_state is not None:  # the input it was started with
        sys.stdout.write(view.input_state.model_dump_json(indent=2) + "\n")
    else:
        fail(line)


def _fork_points(task_id: str, events: list[Any]) -> None:
    """The seqs where a node run or an edit ends, with its node: where ``taskctx fork --at SEQ`` may fork."""
    from ..time_travel import log_steps  # (imports LangGraph: not at the CLI's start-up)

    steps = log_steps(events)
    console.print(f"\nFork points (where a node run ends: taskctx fork {task_id} --at SEQ)", markup=False)
    marks = [f"#{s.seq} {s.node or 'edit'}" for s in steps]
    for i in range(0, len(marks), 8):
        console.print("  " + ", ".join(marks[i : i + 8]), markup=False, soft_wrap=True)


def _render(view: TaskView, db: str, show_all: bool, totals: Any) -> None:
    """The text view, the calls' totals, then why a run command stopped the task (while it is not finished)."""
    from ..report import render_view
    from ..report.approval import inspect_hint

    render_view(console, view, full=show_all, full_hint=inspect_hint(view.task_id, db), db=db)
    render_totals(console, totals)
    stopped = stop_line(view.spec or {}, view.task_id, db)
    assert view.state is not None
    if stopped and view.state.control.status not in ("completed", "failed"):
        console.print(stopped, markup=False)


def stop_line(spec: dict[str, Any], task_id: str, db: str) -> str | None:
    """Why a run command stopped a task, and the ``taskctx resume`` that continues it.

    Args:
        spec: The task's registry row (its ``stopped``: a budget stop names its smallest
            budget, a model failure only resumes).
        task_id: The task.
        db: The ``--db`` (the resume also carries the ``--out`` the run used).

    Returns:
        ``stopped: <message>; continue with `taskctx resume ...```, or None when it was not stopped.
    """
    stop = spec.get("stopped")
    if not isinstance(stop, dict):
        return None
    extra = ("--budget", str(stop["budget"])) if stop.get("reason") == "budget" and stop.get("budget") else ()
    return f"stopped: {stop.get('message')}; continue with `{command_hint('resume', task_id, db, stop.get('out'), *extra)}`"
