"""``taskctx replay``, ``resume`` and ``run``: start a task (from a recorded trajectory, or with a
real chat model on a workspace) or continue one from its last checkpoint."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from context import InvalidInputError, ModelCallError, TaskContext, TaskctxError, UnknownTaskError, load_trajectory
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools

from ..orchestrator import DEFAULT_DB, build_orchestrator, db_exists, new_task
from ..runner import export_run, run_graph, run_with_approvals, thread_config
from .approve import _answerer, _show_request
from .common import (
    DEFAULT_OUT,
    ApproveAllOpt,
    DbOpt,
    DenyAllOpt,
    OutOpt,
    _check_task_id,
    _db_opt,
    _describe,
    _event_printer,
    _fail,
    _finish,
    _graph_for,
    _model_failed,
    _open,
    _prepare_out,
    _state_dir,
    console,
)

__all__ = ["replay", "resume", "run"]


def replay(
    file: Annotated[Path, typer.Argument(help="A recorded trajectory (.jsonl).")],
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Thread/task id (default: the trajectory id).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N executor steps.")] = None,
    budget: Annotated[int, typer.Option("--budget", min=1000, help="Prompt budget in tokens.")] = DEFAULT_BUDGET,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Run the whole graph over a recorded trajectory (replay model + replay tools)."""
    tid = task_id  # (named in a budget error's hint)
    try:
        traj = load_trajectory(file)
        tid = _check_task_id(task_id if task_id is not None else traj.id)
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(
                f"task {tid!r} already exists in {db}; continue it with `taskctx resume {tid}{_db_opt(db)}` "
                "or pick another --task-id"
            )
        project.stores.tasks.register(tid, {"kind": "replay", "source": str(Path(file).resolve()), "budget": budget})
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj),
            tools=ReplayTools(traj),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
        )
        console.print(
            f"replay {traj.id}: {len(traj.steps)} recorded steps, budget {budget} tokens, task {tid}", markup=False
        )
        result = run_graph(
            g, project.stores, tid, new_task(traj.request, tid), stop_after=max_steps, on_event=_event_printer()
        )
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, tid))


def resume(
    task_id: Annotated[str, typer.Argument(help="The task (thread) to continue.")],
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Stop after N more executor steps.")
    ] = None,
    budget: Annotated[int | None, typer.Option("--budget", min=1000, help="New prompt budget in tokens.")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1, help="New per-request model timeout in seconds (run tasks).")
    ] = None,
    approve_all: Annotated[
        bool, typer.Option("--approve-all", help="Approve every approval request (scripts).")
    ] = False,
    deny_all: Annotated[bool, typer.Option("--deny-all", help="Reject every approval request (scripts).")] = False,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Continue a task from its last checkpoint (records resume.started; never redoes a finished step).

    Approvals are answered as in ``run``/``demo``: --approve-all, --deny-all, the terminal, or
    left pending for ``taskctx approve`` (the flags of the first run are not remembered)."""
    try:
        answer = _answerer(approve_all, deny_all)
        if not db_exists(db):
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        _prepare_out(out)
        project = _open(db)
        spec = project.stores.tasks.get(task_id)
        if budget is not None and spec is not None:
            spec = {**spec, "budget": budget}
            project.stores.tasks.register(task_id, spec)
        if timeout is not None and spec is not None:
            project.stores.tasks.register(task_id, {**spec, "timeout": timeout})
        g, _ = _graph_for(project, task_id)
        snap = g.get_state(thread_config(task_id))
        status = TaskContext.model_validate(snap.values).control.status if snap.values else "idle"
        if not snap.values:
            raise UnknownTaskError(
                f"task {task_id!r} was registered but never started (no checkpoint yet); start it again with the "
                f"same command and --task-id {task_id}"
            )
        if not snap.next and not snap.tasks and status in ("completed", "failed"):
            folder = export_run(project.stores, task_id, out)
            console.print(
                f"task {task_id} is already finished ({status}); nothing to resume; exported {folder}/", markup=False
            )
            return
        done = TaskContext.model_validate(snap.values).progress.executor_steps if snap.values else 0
        stop = done + max_steps if max_steps else None
        console.print(
            f"resume {task_id} at checkpoint {snap.config['configurable'].get('checkpoint_id')} "
            f"({done} executor steps done; next: {', '.join(snap.next)})",
            markup=False,
        )
        result = run_with_approvals(
            g,
            project.stores,
            task_id,
            None,
            answer=answer,
            stop_after=stop,
            resume=True,
            on_event=_event_printer(),
            on_request=_show_request,
        )
        _finish(project, result, out, db)
    except ModelCallError as exc:
        _model_failed(project, exc, task_id, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, task_id))


def run(
    request: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="Folder the agent works in.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    budget: Annotated[int, typer.Option("--budget", min=1000)] = DEFAULT_BUDGET,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1)] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one model request may take (the client retries 2 times).")
    ] = 60.0,
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="File scope glob under the workspace (repeatable).")
    ] = None,
    deny_tool: Annotated[
        list[str] | None, typer.Option("--deny-tool", help="A tool the agent may not use (repeatable).")
    ] = None,
    require_approval: Annotated[
        list[str] | None, typer.Option("--require-approval", help="A tool that needs approval (repeatable).")
    ] = None,
    approve_all: ApproveAllOpt = False,
    deny_all: DenyAllOpt = False,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Drive the graph with a real chat model (any LangChain provider), on --workspace DIR.

    The provider client retries 429, 5xx and connection errors (2 retries, backoff, honouring
    retry-after) and gives each request --timeout seconds (default 60). A failure that remains
    prints one line naming it and the ``taskctx resume TASK_ID`` that continues, exports the run
    up to the failure and exits 3 (bad input exits 2)."""
    import uuid

    if not model:
        _fail(
            "no model given: pass --model provider:name (e.g. openai:gpt-4o); to run offline use "
            "`taskctx demo` or `taskctx replay FILE`"
        )
    tid = task_id  # (named in a budget error's hint)
    try:
        from nodes import resolve_model

        resolve_model(str(model))  # a bad spec fails here, before anything is recorded
        tid = _check_task_id(task_id) if task_id is not None else f"task-{uuid.uuid4().hex[:8]}"
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; use `taskctx resume {tid}{_db_opt(db)}` or another --task-id")
        answer = _answerer(approve_all, deny_all)
        if workspace is not None and not workspace.is_dir():
            raise InvalidInputError(f"--workspace {workspace} is not a folder; pass the folder the agent works in")
        project.stores.tasks.register(
            tid,
            {
                "kind": "run",
                "model": model,
                "budget": budget,
                "timeout": timeout,
                "workspace": str(workspace.resolve()) if workspace else None,
                "receipts": str(_state_dir(db) / "receipts" / tid),
            },
        )
        g, _ = _graph_for(project, tid)
        from context import Permissions

        perms = Permissions(
            denied_tools=list(deny_tool or []),
            requires_approval=list(require_approval or []),
            file_scopes=list(scope or []),
        )
        result = run_with_approvals(
            g,
            project.stores,
            tid,
            new_task(request, tid, permissions=perms),
            answer=answer,
            stop_after=max_steps,
            on_event=_event_printer(),
            on_request=_show_request,
        )
        _finish(project, result, out, db)
    except ModelCallError as exc:
        _model_failed(project, exc, str(tid), out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, tid))
