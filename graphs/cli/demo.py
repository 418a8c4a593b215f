"""``taskctx demo``: the offline demo (:mod:`graphs.demo`) on a fresh copy of the sample
workspace, interrupted after a few steps, the sample's config edited by hand while paused, and
resumed with a new graph (which finds the facts drawn from the old config stale)."""

from __future__ import annotations

import functools
import shutil
import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from context import InvalidInputError, TaskctxError
from nodes.runtime import DEFAULT_BUDGET

from ..orchestrator import DEFAULT_DB, build_orchestrator, new_task
from ..report.hints import command_hint
from ..runner import run_with_approvals
from .approve import _answerer, _show_request
from .core import (
    DEFAULT_OUT,
    ApproveAllOpt,
    DbOpt,
    DenyAllOpt,
    OutOpt,
    _check_task_id,
    _event_printer,
    _fail,
    _fail_run,
    _finish,
    _graph_for,
    _open,
    _prepare_out,
    _state_dir,
    console,
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
    import uuid

    from ..demo import (
        DEMO_REQUEST,
        DEMO_STOP_AFTER,
        copy_sample,
        demo_model,
        demo_permissions,
        demo_tools,
        hand_edit,
    )

    tid = task_id  # (named in a budget error's hint)
    try:
        tid = _check_task_id(task_id) if task_id is not None else f"demo-{uuid.uuid4().hex[:6]}"
        answer = _answerer(approve_all, deny_all)
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; pick another --task-id")
        ws = (workspace or _state_dir(db) / "workspaces" / tid).resolve()
        spec = project.stores.tasks.get(tid)
        if spec is not None and spec.get("workspace") == str(ws) and ws.is_dir():
            shutil.rmtree(ws)  # a start of this task that recorded nothing (killed at once): start it afresh
        try:
            copy_sample(ws)
        except FileExistsError:
            raise InvalidInputError(f"--workspace {ws} is not empty; pass an empty or new folder") from None
        receipts = _state_dir(db) / "receipts" / tid
        project.stores.tasks.register(
            tid, {"kind": "demo", "budget": DEFAULT_BUDGET, "workspace": str(ws), "receipts": str(receipts)}
        )
        console.print(
            f"demo task {tid} (scripted model, real workspace tools, SQLite at {db})\n"
            f"workspace: {ws} (a copy of the bundled sample)\nrequest: {DEMO_REQUEST}",
            markup=False,
        )
        g = build_orchestrator(
            demo_model(),
            tools=demo_tools(ws, receipts),
            checkpointer=project.checkpointer,
            stores=project.stores,
            memory=project.memory(ws),
        )
        first = run_with_approvals(
            g,
            project.stores,
            tid,
            new_task(DEMO_REQUEST, tid, permissions=demo_permissions()),
            answer=answer,
            stop_after=DEMO_STOP_AFTER,
            on_event=_event_printer(),
            prune=True,
            on_request=functools.partial(_show_request, db=db),
        )
        if first.stopped_early:
            console.print(
                f"-- interrupted after {first.state.progress.executor_steps} executor steps "
                f"(checkpoint kept; next: {', '.join(first.next_nodes)}) --",
                markup=False,
            )
            conf = hand_edit(ws)
            console.print(
                f"-- while paused, a person edits {conf.relative_to(ws).as_posix()} by hand (adds a comment line); "
                "resuming with a new graph --",
                markup=False,
            )
            g2, _ = _graph_for(project, tid)
            result = run_with_approvals(
                g2,
                project.stores,
                tid,
                None,
                answer=answer,
                resume=True,
                on_event=_event_printer(),
                prune=True,
                on_request=functools.partial(_show_request, db=db),
            )
        else:
            result = first
        try:
            _finish(project, result, out, db)  # (exit 1 when the task failed)
        finally:
            console.print(f"inspect it: {command_hint('inspect', tid, db)}", markup=False)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail_run(exc, db, tid, out)
