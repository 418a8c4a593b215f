"""``taskctx replay``, ``resume`` and ``run``: start a task (from a recorded trajectory, or with a
real chat model on a workspace) or continue one from its last checkpoint."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from context import (
    DamagedStoreError,
    InvalidInputError,
    ModelCallError,
    TaskContext,
    TaskctxError,
    UnknownTaskError,
    find_task,
    load_trajectory,
)
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

from ..diagnosis import Checked, ensure_sound
from ..orchestrator import DEFAULT_DB, Project, build_orchestrator, new_task
from ..report.hints import command_hint
from ..runner import EXPORT_MARK, export_run, run_graph, run_with_approvals, thread_config
from .approve import _answerer, _show_request
from .core import (
    DEFAULT_OUT,
    ApproveAllOpt,
    BudgetOpt,
    DbOpt,
    DenyAllOpt,
    OutOpt,
    _budget_floor,
    _check_task_id,
    _event_printer,
    _fail,
    _fail_run,
    _finish,
    _graph_for,
    _model_failed,
    _open,
    _open_existing,
    _prepare_out,
    _state_dir,
    console,
    trajectory_sha256,
)

__all__ = ["replay", "resume", "run"]


def replay(
    file: Annotated[Path, typer.Argument(help="A recorded trajectory (.jsonl).")],
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Thread/task id (default: the trajectory id).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N executor steps.")] = None,
    budget: BudgetOpt = DEFAULT_BUDGET,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Run the whole graph over a recorded trajectory (replay model + replay tools)."""
    from nodes import ReplayChatModel, ReplayTools

    tid = task_id  # (named in a budget error's hint)
    project: Project | None = None
    try:
        traj = load_trajectory(file)
        tid = _check_task_id(task_id if task_id is not None else traj.id)
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(
                f"task {tid!r} already exists in {db}; continue it with `{command_hint('resume', tid, db, out)}` "
                "or pick another --task-id"
            )
        project.stores.tasks.register(
            tid,
            {
                "kind": "replay",
                "source": str(Path(file).resolve()),
                "sha256": trajectory_sha256(Path(file)),
                "budget": budget,
            },
        )
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj),
            tools=ReplayTools(traj),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
            memory=project.memory(),
        )
        console.print(
            f"replay {traj.id}: {len(traj.steps)} recorded steps, budget {budget} tokens, task {tid}", markup=False
        )
        result = run_graph(
            g,
            project.stores,
            tid,
            new_task(traj.request, tid),
            stop_after=max_steps,
            on_event=_event_printer(),
            prune=True,
        )
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail_run(exc, db, tid, out)
    finally:
        _close(project)


def resume(
    task_id: Annotated[str, typer.Argument(help="The task (thread) to continue.")],
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Stop after N more executor steps.")
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            callback=_budget_floor,
            help=f"New prompt budget in tokens (at least the {DEFAULT_RESERVE} reserved for the answer).",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1, help="New per-request model timeout in seconds (run tasks).")
    ] = None,
    approve_all: Annotated[
        bool, typer.Option("--approve-all", metavar="", help="Approve every approval request (scripts).")
    ] = False,
    deny_all: Annotated[
        bool, typer.Option("--deny-all", metavar="", help="Reject every approval request (scripts).")
    ] = False,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Continue a task from its last checkpoint (records resume.started; never redoes a finished step).

    Approvals are answered as in ``run``/``demo``: --approve-all, --deny-all, the terminal, or
    left pending for ``taskctx approve`` (the flags of the first run are not remembered)."""
    project: Project | None = None
    try:
        answer = _answerer(approve_all, deny_all)
        project = _open_existing(db)
        _prepare_out(out)
        # refuse damaged data, never build on it (a long log: the bounded check, see doctor.quick_diagnose)
        checked = ensure_sound(project.stores, project.checkpointer, task_id, full=False)
        spec = (
            checked.spec  # (read by the check just above: not read, nor the log folded, again)
            if project.stores.events.last_seq(task_id)
            else find_task(project.stores, task_id).spec
        )
        if budget is not None and spec is not None:
            spec = {**spec, "budget": budget}
            project.stores.tasks.register(task_id, spec)
        if timeout is not None and spec is not None:
            spec = {**spec, "timeout": timeout}
            project.stores.tasks.register(task_id, spec)
        if checked.finished and spec is not None:
            # nothing left to run (every router ends on a finished state): no graph is built, and the
            # export writes only what it lacks (nothing when it is current)
            _already_finished(project, task_id, checked, out)
            return
        g, _ = _graph_for(project, task_id, spec=spec)
        snap = g.get_state(thread_config(task_id))
        status = TaskContext.model_validate(snap.values).control.status if snap.values else "idle"
        if not snap.values and project.stores.events.last_seq(task_id):
            raise DamagedStoreError(
                f"task {task_id!r} has {project.stores.events.last_seq(task_id)} events in {db} but no checkpoint "
                f"(the checkpoint tables were emptied or restored from an older backup), so it cannot be resumed; "
                f"`{command_hint('inspect', task_id, db)}` still works; restore the database from a backup, or start the task "
                "again under a new --task-id"
            )
        if not snap.values:
            raise UnknownTaskError(
                f"task {task_id!r} was registered but never started (no checkpoint yet); start it again with the "
                f"same command and --task-id {task_id}"
            )
        if not snap.next and not snap.tasks and status in ("completed", "failed"):
            _already_finished(project, task_id, checked, out)
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
            prune=True,
            on_request=functools.partial(_show_request, db=db),
            checked=checked,
        )
        _finish(project, result, out, db)
    except ModelCallError as exc:
        assert project is not None  # (a model is called only once the project is open)
        _model_failed(project, exc, task_id, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail_run(exc, db, task_id, out)
    finally:
        _close(project)


def _already_finished(project: Project, task_id: str, checked: Checked, out: Path) -> None:
    """``resume`` of a finished task: export it (only what the export lacks), say so; exit 1 when it failed."""
    status = checked.state.control.status if checked.state is not None else "completed"
    mark = Path(out) / task_id / EXPORT_MARK
    before = mark.read_bytes() if mark.is_file() else None
    folder = export_run(project.stores, task_id, out)
    # a current export is left as it is (its mark unchanged): say so, not "exported"
    said = "export current:" if before is not None and mark.read_bytes() == before else "exported"
    console.print(f"task {task_id} is already finished ({status}); nothing to resume; {said} {folder}/", markup=False)
    if status == "failed":
        raise typer.Exit(1)


def run(
    request: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="Folder the agent works in.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    budget: BudgetOpt = DEFAULT_BUDGET,
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
    constraint: Annotated[
        list[str] | None,
        typer.Option(
            "--constraint", help="A hard constraint, verbatim (repeatable); listed before any found in REQUEST."
        ),
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
            f"`{command_hint('demo', None, db, out)}` or `{command_hint('replay', 'FILE', db, out)}`"
        )
    tid = task_id  # (named in a budget error's hint)
    project: Project | None = None
    try:
        from nodes import resolve_model

        resolve_model(str(model))  # a bad spec fails here, before anything is recorded
        tid = _check_task_id(task_id) if task_id is not None else f"task-{uuid.uuid4().hex[:8]}"
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(
                f"task {tid!r} already exists in {db}; use `{command_hint('resume', tid, db, out)}` or another --task-id"
            )
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
            new_task(request, tid, constraints=list(constraint or []), permissions=perms),
            answer=answer,
            stop_after=max_steps,
            on_event=_event_printer(),
            prune=True,
            on_request=functools.partial(_show_request, db=db),
        )
        _finish(project, result, out, db)
    except ModelCallError as exc:
        assert project is not None  # (a model is called only once the project is open)
        _model_failed(project, exc, str(tid), out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail_run(exc, db, tid, out)
    finally:
        _close(project)


def _close(project: Project | None) -> None:
    """Close what a run command opened (its connections and pool), also after a failure, so a
    command run in-process (tests, notebooks) leaves no connection for the garbage collector
    to close at some later moment (closing a writable SQLite connection checkpoints its WAL)."""
    if project is not None:
        project.close()
