"""``taskctx replay``, ``resume`` and ``run``: start a task or continue one.

``taskctx replay``, ``resume`` and ``run``: start a task (from a recorded trajectory, or with a
real chat model on a workspace) or continue one from its last checkpoint.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from pathlib import Path
from typing import Annotated

import typer

from context import InvalidInputError, ModelCallError, Permissions, TaskctxError, load_trajectory
from context.text import counted
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

from ..orchestrator import new_task
from ..project import DEFAULT_DB, Project, open_project
from ..report.hints import command_hint
from ..runner import EXPORT_MARK, ResumePoint, RunResult
from ..task_kinds import trajectory_sha256
from ..task_secrets import parse_secret_options
from .approve import answerer, show_request
from .budget_options import BudgetCapOpt, BudgetOpt, budget_cap_of, budget_floor, budget_tokens, task_model
from .core import (
    DEFAULT_OUT,
    ApproveAllOpt,
    DbOpt,
    DenyAllOpt,
    OutOpt,
    SecretOpt,
    check_task_id,
    console,
    event_printer,
    fail,
    fail_run,
    finish,
    model_failed,
    open_existing,
    prepare_out,
    state_dir,
)

__all__ = ["replay", "resume", "run"]

MaxStepsOpt = Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N executor steps.")]


def replay(
    file: Annotated[Path, typer.Argument(help="A recorded trajectory (.jsonl).")],
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Thread/task id (default: the trajectory id).")
    ] = None,
    max_steps: MaxStepsOpt = None,
    budget: BudgetOpt = None,
    budget_cap: BudgetCapOpt = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Run the whole graph over a recorded trajectory (replay model + replay tools)."""
    cap = budget_cap_of(budget, budget_cap)
    budget = budget or str(DEFAULT_BUDGET)
    tid = task_id  # (named in a budget error's hint)
    project: Project | None = None
    try:
        traj = load_trajectory(file)
        tid = check_task_id(task_id if task_id is not None else traj.id)
        prepare_out(out)
        project = open_project(db)
        _refuse_existing(project, tid, db, out, f"continue it with `{command_hint('resume', tid, db, out)}` or")
        spec = {"kind": "replay", "source": str(Path(file).resolve()), "sha256": trajectory_sha256(Path(file))}
        from nodes import ReplayChatModel, ReplayTools

        model = ReplayChatModel(trajectory=traj)
        tokens = budget_tokens(budget, model, cap)
        project.stores.tasks.register(tid, {**spec, "budget": tokens})
        graph = project.graph(model, tools=ReplayTools(traj), budget=tokens)
        said = _said_budget(tokens, budget, cap)
        console.print(f"replay {traj.id}: {len(traj.steps)} recorded steps, {said}, task {tid}", markup=False)
        result = project.run(
            graph, new_task(traj.request, tid), max_steps=max_steps, on_event=event_printer(), prune=True
        )
        finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, tid, out)
    finally:
        _close(project)


def _refuse_existing(project: Project, task_id: str, db: str, out: Path, how: str) -> None:
    """Fail (one line, exit 2) when ``task_id`` already has events: a start never reuses a task."""
    if project.stores.events.last_seq(task_id):
        fail(f"task {task_id!r} already exists in {db}; {how} pick another --task-id")


def resume(
    task_id: Annotated[str, typer.Argument(help="The task (thread) to continue.")],
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Stop after N more executor steps.")
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            callback=budget_floor,
            help=f"New prompt budget in tokens (at least the {DEFAULT_RESERVE} reserved for the answer), or auto: "
            "the window of the task's model, capped by --budget-cap.",
        ),
    ] = None,
    budget_cap: BudgetCapOpt = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1, help="New per-request model timeout in seconds (run tasks).")
    ] = None,
    approve_all: ApproveAllOpt = False,
    deny_all: DenyAllOpt = False,
    secret: SecretOpt = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Continue a task from its last checkpoint (records resume.started; never redoes a finished step).

    Approvals are answered as in ``run``/``demo``: --approve-all, --deny-all, the terminal, or
    left pending for ``taskctx approve`` (the flags of the first run are not remembered).
    """
    cap = budget_cap_of(budget, budget_cap, resume=True)
    project: Project | None = None
    try:
        answer = answerer(approve_all, deny_all)
        project = open_existing(db)
        prepare_out(out)
        secrets = parse_secret_options(secret)
        result = project.resume(
            task_id,
            secrets=secrets,
            max_steps=max_steps,
            approvals=answer,
            budget=_resume_budget(project, task_id, budget, cap),
            timeout=timeout,
            on_resume=functools.partial(_say_resume, task_id),
            on_event=event_printer(),
            on_request=functools.partial(show_request, db=db),
            prune=True,
        )
        if result.already_finished:
            _already_finished(project, result, out)
        finish(project, result, out, db)
    except ModelCallError as exc:
        assert project is not None  # (a model is called only once the project is open)
        model_failed(project, exc, task_id, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, task_id, out)
    finally:
        _close(project)


def _said_budget(tokens: int, budget: str, cap: int) -> str:
    """``budget 16000 tokens (auto: the model's window, cost target 16000)``: the budget a command runs with."""
    return f"budget {tokens} tokens" + (f" (auto: the model's window, cost target {cap})" if budget == "auto" else "")


def _resume_budget(project: Project, task_id: str, budget: str | None, cap: int) -> int | None:
    """The budget of ``resume --budget`` in tokens; ``auto`` from the model of the task's registry row.

    None: no ``--budget`` (the row's budget stays), or a task without a row (the resume names it).
    """
    if budget is None:
        return None
    if budget != "auto":
        return int(budget)
    spec = project.stores.tasks.get(task_id)
    if spec is None:
        return None
    tokens = budget_tokens(budget, task_model(task_id, spec), cap)
    console.print(f"task {task_id}: {_said_budget(tokens, budget, cap)}", markup=False)
    return tokens


def _say_resume(task_id: str, at: ResumePoint) -> None:
    """The line a resume prints before it runs: the checkpoint, the steps done, the next nodes."""
    console.print(
        f"resume {task_id} at checkpoint {at.checkpoint_id} "
        f"({counted(at.executor_steps, 'executor step')} done; next: {', '.join(at.next_nodes)})",
        markup=False,
    )


def _already_finished(project: Project, result: RunResult, out: Path) -> None:
    """``resume`` of a finished task: export it (only what the export lacks), say so; exit 1 when it failed."""
    task_id, status = result.task_id, result.state.control.status
    mark = Path(out) / task_id / EXPORT_MARK
    before = mark.read_bytes() if mark.is_file() else None
    folder = project.export(task_id, out)
    # a current export is left as it is (its mark unchanged): say so, not "exported"
    said = "export current:" if before is not None and mark.read_bytes() == before else "exported"
    console.print(f"task {task_id} is already finished ({status}); nothing to resume; {said} {folder}/", markup=False)
    raise typer.Exit(1 if status == "failed" else 0)


def run(
    request: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="Folder the agent works in.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    budget: BudgetOpt = None,
    budget_cap: BudgetCapOpt = None,
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
    secret: SecretOpt = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Drive the graph with a real chat model (any LangChain provider), on --workspace DIR.

    The provider client retries 429, 5xx and connection errors (2 retries, backoff, honouring
    retry-after) and gives each request --timeout seconds (default 60). A failure that remains
    prints one line naming it and the ``taskctx resume TASK_ID`` that continues, exports the run
    up to the failure and exits 3 (bad input exits 2).
    """
    if not model:
        fail(
            "no model given: pass --model provider:name (e.g. openai:gpt-4o); to run offline use "
            f"`{command_hint('demo', None, db, out)}` or `{command_hint('replay', 'FILE', db, out)}`"
        )
    perms = Permissions(
        denied_tools=list(deny_tool or []),
        requires_approval=list(require_approval or []),
        file_scopes=list(scope or []),
    )
    cap = budget_cap_of(budget, budget_cap)
    spec = {
        "kind": "run",
        "model": model,
        "budget": budget or str(DEFAULT_BUDGET),
        "budget_cap": cap,
        "timeout": timeout,
    }
    how = (approve_all, deny_all, list(secret or []))
    _run_task(request, spec, workspace, task_id, list(constraint or []), perms, max_steps, how, db, out)


def _run_task(
    request: str,
    spec: dict[str, object],
    workspace: Path | None,
    task_id: str | None,
    constraints: list[str],
    permissions: Permissions,
    max_steps: int | None,
    how: tuple[bool, bool, list[str]],
    db: str,
    out: Path,
) -> None:
    """The body of ``taskctx run``: check, register the task, build its graph, run it, finish.

    ``how``: ``--approve-all``, ``--deny-all`` and the ``--secret`` options.
    """
    tid = task_id  # (named in a budget error's hint)
    project: Project | None = None
    try:
        from nodes import resolve_model

        chat = resolve_model(str(spec["model"]))  # a bad spec fails here, before anything is recorded
        spec["budget"] = budget_tokens(str(spec["budget"]), chat, int(str(spec.pop("budget_cap"))))
        secrets = parse_secret_options(how[2])
        tid = check_task_id(task_id) if task_id is not None else f"task-{uuid.uuid4().hex[:8]}"
        prepare_out(out)
        project = open_project(db)
        if project.stores.events.last_seq(tid):
            fail(
                f"task {tid!r} already exists in {db}; use `{command_hint('resume', tid, db, out)}` or another --task-id"
            )
        answer = answerer(how[0], how[1])
        if workspace is not None and not workspace.is_dir():
            raise InvalidInputError(f"--workspace {workspace} is not a folder; pass the folder the agent works in")
        where = {"workspace": str(workspace.resolve()) if workspace else None}
        project.stores.tasks.register(tid, {**spec, **where, "receipts": str(state_dir(db) / "receipts" / tid)})
        graph = project.task_graph(tid)
        result = project.run(
            graph,
            request,
            task_id=tid,
            constraints=constraints,
            permissions=permissions,
            secrets=secrets,
            max_steps=max_steps,
            approvals=answer,
            on_event=event_printer(),
            on_request=functools.partial(show_request, db=db),
            prune=True,
        )
        finish(project, result, out, db)
    except ModelCallError as exc:
        assert project is not None  # (a model is called only once the project is open)
        model_failed(project, exc, str(tid), out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, tid, out)
    finally:
        _close(project)


def _close(project: Project | None) -> None:
    """Close what a run command opened, also after a failure.

    Close what a run command opened (its connections and pool), also after a failure, so a
    command run in-process (tests, notebooks) leaves no connection for the garbage collector
    to close at some later moment (closing a writable SQLite connection checkpoints its WAL).
    """
    if project is not None:
        project.close()
