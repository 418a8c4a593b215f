"""``taskctx inspect TASK_ID [--json]``: a task's state as a person reads it (the view is
:func:`graphs.report.render_state`). Read-only: the database is opened with ``mode=ro`` (SQLite)
or read-only sessions (Postgres) and nothing is created or changed."""

from __future__ import annotations

import sqlite3
import sys
from typing import Annotated, Any

import typer

from context import PAYLOAD_MODELS, DamagedStoreError, TaskContext, TaskctxError, TaskInfo, find_task
from context.verify import check_events

from ..diagnosis import quick_state, unshowable
from ..orchestrator import DEFAULT_DB
from ..report.hints import command_hint
from .core import DbOpt, _describe, _fail, _open_existing, console, err

__all__ = ["inspect"]


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
) -> None:
    """Print a task's state as a person reads it (read-only; a damaged log: a warning per finding first)."""

    try:
        project = _open_existing(db, readonly=True)
        try:
            damage: list[str] = []
            info: TaskInfo | None = None
            spec: dict[str, Any] | None = None
            try:
                if project.stores.events.last_seq(task_id):  # the log is checked and folded once, below
                    spec = project.stores.tasks.get(task_id)
                else:
                    info = find_task(project.stores, task_id)
                    spec = info.spec
            except DamagedStoreError as exc:  # said below, before what is left is shown
                damage = list(exc.problems)
            if info is not None and not info.started:  # registered; its first node failed before it recorded anything
                spec = info.spec or {}
                line = (
                    f"task {task_id}: not started ({spec.get('kind')} task, budget {spec.get('budget')}): no events "
                    f"yet (its first node failed, or is still running); continue it with "
                    f"`{command_hint('resume', task_id, db)}` (--budget N to change the budget)"
                )
                if _stop_line(spec, task_id, db):
                    line = f"task {task_id}: not started; {_stop_line(spec, task_id, db)}"
                snap = project.checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
                if not as_json:
                    console.print(line, markup=False)
                elif snap is not None and snap.checkpoint["channel_values"]:  # the input it was started with
                    channels = snap.checkpoint["channel_values"]
                    values = TaskContext.model_validate(
                        {k: channels[k] for k in TaskContext.model_fields if k in channels}
                    )
                    sys.stdout.write(values.model_dump_json(indent=2) + "\n")
                else:
                    _fail(line)
                return
            # a long log that passes the bounded check (doctor.quick_state): the checkpoint's state with
            # the tail folded on, and only the events the view lists (no whole-log read, check or fold);
            # --json keeps the fold (the checkpoint's dicts come back in another key order)
            fast = not (show_all or as_json or damage)
            quick = quick_state(project.stores, project.checkpointer, task_id) if fast else None
            if quick is not None and quick[0] is not None:
                ctx = quick[0]
                events = _view_events(project.stores.events, task_id)
                _render(project, console, ctx, events, task_id, db, spec, show_all)
                return
            try:
                events = project.stores.events.read(task_id)
                found = check_events(events)
            except DamagedStoreError as exc:  # a gap: show what is left, after saying so
                found = exc.problems
                events = project.stores.events.read(task_id, kinds=list(PAYLOAD_MODELS))
            found = damage + [f for f in found if f not in damage]
            if not events:
                raise DamagedStoreError(
                    f"task {task_id!r} is damaged ({found[0] if found else 'no event can be read'}) and cannot be "
                    f"shown; run `{command_hint('doctor', task_id, db)}` for every finding"
                )
            # one judgement with report and resume (graphs.diagnosis.unshowable): the row that blocks the view
            block = unshowable(project.stores, task_id) if found else None
            if block is not None and block not in found:
                found.append(block)
            for f in found:
                err.print(f"warning: task {task_id} is damaged: {f}", markup=False)
            from context import replay as fold

            try:
                if block is not None:
                    raise ValueError(block)
                ctx = fold(events)
            except Exception as exc:  # a payload its kind does not allow: nothing trustworthy to show
                raise DamagedStoreError(
                    f"task {task_id!r} is damaged ({found[0] if found else type(exc).__name__}) and cannot be shown"
                    + (f" ({block.removeprefix('event log: ')} blocks it)" if block and block != found[0] else "")
                    + f"; run `{command_hint('doctor', task_id, db)}` for every finding"
                ) from exc
            if as_json:
                sys.stdout.write(ctx.model_dump_json(indent=2) + "\n")
                return
            _render(project, console, ctx, events, task_id, db, spec, show_all)
        finally:
            project.close()
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db))


#: The kinds :func:`graphs.report.render_state` reads from the log (without ``--all``).
VIEW_KINDS = ["context.built", "permission.requested", "permission.denied", "permission.granted", "resume.started"]
#: What the view reads of a ``context.built`` payload (its model calls by role and provider usage;
#: not the manifest's blocks, most of each payload).
BUILT_FIELDS = ["role", "call", "prompt_tokens", "blocks_in", "blocks_out", "usage"]


def _view_events(log: Any, task_id: str) -> list[Any]:
    """The events the view lists, in seq order: the ``context.built`` ones with only
    :data:`BUILT_FIELDS` in their payloads (extracted in SQL), the others whole."""
    built = log.read(task_id, kinds=["context.built"], fields=BUILT_FIELDS)
    rest = log.read(task_id, kinds=[k for k in VIEW_KINDS if k != "context.built"])
    return sorted([*built, *rest], key=lambda e: e.seq)


def _render(
    project: Any,
    console: Any,
    ctx: TaskContext,
    events: list[Any],
    task_id: str,
    db: str,
    spec: dict[str, Any] | None,
    show_all: bool,
) -> None:
    from ..report import render_state
    from ..report.approval import inspect_hint

    snap = project.checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
    checkpoints = [
        c.config["configurable"]["checkpoint_id"]
        for c in project.checkpointer.list({"configurable": {"thread_id": task_id}}, limit=5)
    ]
    render_state(
        console, ctx, events, checkpoints, snap is not None, full_hint=inspect_hint(task_id, db), full=show_all, db=db
    )
    stopped = _stop_line(spec or {}, task_id, db)
    if stopped and ctx.control.status not in ("completed", "failed"):
        console.print(stopped, markup=False)


def _stop_line(spec: dict[str, Any], task_id: str, db: str) -> str | None:
    """``stopped: <message>; continue with `taskctx resume ...``` for a task a run command stopped
    (``spec["stopped"]``: a budget stop names its smallest budget, a model failure only resumes),
    with the ``--db`` and ``--out`` the run used; None when it was not stopped."""
    stop = spec.get("stopped")
    if not isinstance(stop, dict):
        return None
    extra = ("--budget", str(stop["budget"])) if stop.get("reason") == "budget" and stop.get("budget") else ()
    return f"stopped: {stop.get('message')}; continue with `{command_hint('resume', task_id, db, stop.get('out'), *extra)}`"
