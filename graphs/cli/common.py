"""The ``taskctx`` typer app and what its commands share: the options, the one-line error
(``_fail``: prints ``error: ...``, exits with code 2; ``_model_failed``: a provider failure, two
lines, the run exported, exit code 3), the event printer, the graph of a recorded
task (``_graph_for``), the export at the end of a run (``_finish``), and :func:`main`."""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from context import (
    BudgetError,
    Event,
    InvalidInputError,
    ModelCallError,
    TaskctxError,
    UnknownTaskError,
    load_trajectory,
)
from context.pg_store import redact_url
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools

from ..orchestrator import DEFAULT_DB, Project, build_orchestrator, open_project
from ..runner import RunResult, export_run

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="taskctx: structured task context for LangGraph agents."
)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOpt = Annotated[
    str, typer.Option("--db", help="SQLite file, or postgresql:// URL, of checkpoints, event log and artifacts.")
]
OutOpt = Annotated[Path, typer.Option("--out", help="Folder the run is exported to (<out>/<task_id>/).")]
DEFAULT_OUT = Path(".taskctx/runs")


#: exit status of bad input (a usage error, nothing run) and of a model provider failure (the
#: task is saved and resumable)
EXIT_BAD_INPUT = 2
EXIT_MODEL_FAILED = 3


def _fail(msg: str) -> None:
    err.print("error: " + " ".join(msg.split()), markup=False)
    raise typer.Exit(EXIT_BAD_INPUT)


def _model_failed(project: Project, exc: ModelCallError, task_id: str, out: Path, db: str) -> None:
    """A model call failed at the provider: export the run up to the failure, print the cause and
    the command that continues, exit :data:`EXIT_MODEL_FAILED`."""
    saved = "nothing recorded before the failure"
    if project.stores.events.last_seq(task_id):
        saved = f"exported {export_run(project.stores, task_id, out)}/"
    err.print("error: " + " ".join(str(exc).split()), markup=False)
    err.print(
        f"task {task_id} is saved ({saved}); continue it with: taskctx resume {task_id}{_db_opt(db)}", markup=False
    )
    raise typer.Exit(EXIT_MODEL_FAILED)


def _db_opt(db: str) -> str:
    """`` --db DB`` for a hint (empty for the default), quoted for a shell, password hidden."""
    return f" --db {shlex.quote(redact_url(db))}" if db != DEFAULT_DB else ""


def _describe(exc: BaseException, db: str, task_id: str | None = None) -> str:
    """One line for an error: taskctx errors as they are (a budget error with the command that
    continues the task); database and file errors named."""
    if isinstance(exc, BudgetError) and task_id:
        return f"{exc}: `taskctx resume {task_id} --budget N{_db_opt(db)}` continues with a larger one"
    if isinstance(exc, TaskctxError):
        return str(exc)
    if isinstance(exc, sqlite3.Error):
        return f"database {db} cannot be used: {exc}; check that the file and its folder are writable, or pass another --db"
    return f"{exc}; check the path and its permissions"


_TASK_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def _check_task_id(task_id: str) -> str:
    """Task ids name a thread and an export folder: 1-128 of letters, digits, '-', '_', '.',
    not starting with '.' (so no path separators, no '..', nothing empty)."""
    if not _TASK_ID.fullmatch(task_id):
        raise InvalidInputError(
            f"--task-id {task_id[:60]!r} is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' "
            "(not starting with '.')"
        )
    return task_id


def _prepare_out(out: Path) -> Path:
    """Create the export folder now, so an unwritable --out fails before the run, not after."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".taskctx-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InvalidInputError(f"--out {out} is not writable ({exc.strerror}); pass another --out") from exc
    return out


def _event_printer(total: int | None = None):
    def show(e: Event) -> None:
        p = e.payload
        if e.kind == "context.built":
            console.print(
                f"  call {p['call']:>3} {p['role']:<9} step {p['step_id'] or '-':<4} prompt {p['prompt_tokens']:>5} tok"
                f" (budget {p['budget']}, cached prefix {p['cached_prefix_tokens']:>5})"
                f" blocks {p['blocks_in']} in / {p['blocks_out']} out"
                + ("  [transcript restarted]" if p["transcript_reset"] else "")
                + (
                    f"; provider: {u['input_tokens']} in (cache read {u['cache_read']}, written {u['cache_creation']}),"
                    f" {u['output_tokens']} out"
                    if (u := p.get("usage"))
                    else ""
                )
                + (f"  [rebuilt: {p['rebuilt']}]" if p.get("rebuilt") else ""),
                markup=False,
            )
        elif e.kind == "tool.result.received":
            console.print(
                f"      tool result {p['call_id']}: {p['status']} ({p['raw_chars']} chars"
                + (", compressed" if p["compressed"] else "")
                + ")",
                markup=False,
            )
        elif e.kind in (
            "plan.created",
            "plan.updated",
            "step.started",
            "step.completed",
            "error.occurred",
            "error.resolved",
            "recovery.decided",
            "review.completed",
            "task.completed",
            "resume.started",
            "permission.requested",
            "permission.denied",
        ) or (e.kind == "permission.granted" and e.actor == "user"):
            from context import summarize_event

            console.print(f"  [{e.seq}] {e.kind}: {summarize_event(e)}", markup=False)

    return show


def _graph_for(project: Project, task_id: str) -> tuple[Any, dict[str, Any]]:
    spec = project.stores.tasks.get(task_id)
    if spec is None:
        raise UnknownTaskError(
            f"no task {task_id!r} in {project.path}; check the id and --db (tasks: "
            f"{', '.join(project.stores.events.task_ids()) or 'none'})"
        )
    budget = int(spec.get("budget", DEFAULT_BUDGET))
    kind = spec.get("kind")
    if kind == "replay":
        traj = load_trajectory(str(spec["source"]))
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj),
            tools=ReplayTools(traj),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
        )
    elif kind == "demo":
        from ..demo import demo_model, demo_tools

        if not spec.get("workspace"):
            raise InvalidInputError(
                f"demo task {task_id!r} was recorded by an older taskctx without a workspace; "
                "start a new one with `taskctx demo`"
            )
        g = build_orchestrator(
            demo_model(),
            tools=demo_tools(str(spec["workspace"]), spec.get("receipts")),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
        )
    elif kind == "run":
        tools = None
        if spec.get("workspace"):
            from nodes import WorkspaceTools

            tools = WorkspaceTools(str(spec["workspace"]), receipts_dir=spec.get("receipts"))
            tools.strict_resolution = True
        from nodes import resolve_model
        from nodes.models import DEFAULT_RETRIES, DEFAULT_TIMEOUT

        chat = resolve_model(
            str(spec["model"]),
            timeout=float(spec.get("timeout") or DEFAULT_TIMEOUT),
            max_retries=int(spec.get("retries", DEFAULT_RETRIES)),
        )
        g = build_orchestrator(
            chat, tools=tools, checkpointer=project.checkpointer, stores=project.stores, budget=budget
        )
    else:
        raise InvalidInputError(f"task {task_id!r} has an unknown kind {kind!r} in {project.path}")
    return g, spec


def _finish(project: Project, result: RunResult, out: Path, db: str) -> None:
    folder = export_run(project.stores, result.task_id, out)
    s = result.state
    req = result.waiting
    if req is not None:
        console.print(
            f"waiting for approval of {req.get('tool')} (call {req.get('call_id')}, {req.get('risk')} risk). "
            f"Answer with: taskctx approve {result.task_id}{_db_opt(db)} "
            "[--edit JSON | --reject REASON | --respond TEXT]",
            markup=False,
        )
    elif result.stopped_early:
        console.print(
            f"stopped after {s.progress.executor_steps} executor steps; next: {', '.join(result.next_nodes)}."
            f" Continue with: taskctx resume {result.task_id}{_db_opt(db)}",
            markup=False,
        )
    else:
        console.print(
            f"task {result.task_id}: {s.control.status}; {s.progress.executor_steps} executor steps, "
            f"{s.events.cursor} events",
            markup=False,
        )
    console.print(f"exported {folder}/ (trace.jsonl, state.json, context_pack.md, manifests.jsonl)", markup=False)


def _open(db: str) -> Project:
    return open_project(db)


ApproveAllOpt = Annotated[bool, typer.Option("--approve-all", help="Approve every approval request (scripts).")]
DenyAllOpt = Annotated[bool, typer.Option("--deny-all", help="Reject every approval request (scripts).")]


def _state_dir(db: str) -> Path:
    """Where a task's workspace copy and command receipts live: beside the SQLite file."""
    return Path(".taskctx") if "://" in db else Path(db).resolve().parent


def main() -> None:
    app()
