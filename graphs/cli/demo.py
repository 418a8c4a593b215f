"""``taskctx demo``: the offline demo.

``taskctx demo``: the offline demo (:func:`graphs.demo.run_demo`) on a fresh copy of the sample
workspace, interrupted after a few steps, edited by hand while paused, and resumed.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from pathlib import Path
from typing import Annotated

import typer

from context import TaskctxError

from ..project import DEFAULT_DB, open_project
from ..report.hints import command_hint
from .approve import answerer, show_request
from .core import (
    DEFAULT_OUT,
    ApproveAllOpt,
    DbOpt,
    DenyAllOpt,
    OutOpt,
    check_task_id,
    console,
    event_printer,
    fail,
    fail_run,
    finish,
    prepare_out,
    state_dir,
)

__all__ = ["demo"]


def demo(
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", help="Where the sample workspace is copied (default: workspaces/<task_id> beside --db)."
        ),
    ] = None,
    approve_all: ApproveAllOpt = False,
    deny_all: DenyAllOpt = False,
) -> None:
    """Offline demo on a real sample workspace: explore, refused outside scope, interrupt, hand edit, resume (stale finding, re-read), approved fix, failing test, recovery, tests green, review."""
    from ..demo import run_demo  # (the demo's scripted model and tools load the graph runtime)

    tid = task_id  # (named in a budget error's hint)
    try:
        tid = check_task_id(task_id) if task_id is not None else f"demo-{uuid.uuid4().hex[:6]}"
        answer = answerer(approve_all, deny_all)
        prepare_out(out)
        project = open_project(db)
        if project.stores.events.last_seq(tid):
            fail(f"task {tid!r} already exists in {db}; pick another --task-id")
        ws = (workspace or state_dir(db) / "workspaces" / tid).resolve()
        result = run_demo(
            project,
            tid,
            ws,
            state_dir(db) / "receipts" / tid,
            approvals=answer,
            say=lambda line: console.print(line, markup=False),
            on_event=event_printer(),
            on_request=functools.partial(show_request, db=db),
        )
        try:
            finish(project, result, out, db)  # (exit 1 when the task failed)
        finally:
            console.print(f"inspect it: {command_hint('inspect', tid, db)}", markup=False)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, tid, out)
