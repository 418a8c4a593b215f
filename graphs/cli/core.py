"""The ``taskctx`` typer app and what its commands share: the options, the one-line error
(``_fail``: prints ``error: ...``, exits with code 2; ``_model_failed``: a provider failure, two
lines, the run exported, exit code 3), the event printer, the graph of a recorded
task (``_graph_for``), the export at the end of a run (``_finish``), and :func:`main`."""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from context import (
    BudgetError,
    DamagedStoreError,
    Event,
    InvalidInputError,
    ModelCallError,
    TaskctxError,
    UnknownTaskError,
    find_task,
    load_trajectory,
)
from context.pg_store import is_postgres_url
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

from ..orchestrator import DEFAULT_OUT as DEFAULT_OUT  # (the commands' --out default, re-exported)
from ..orchestrator import Project, build_orchestrator, db_exists, open_project
from ..report.hints import command_hint, damage_line
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


#: exit status of bad input (a usage error, nothing run) and of a model provider failure (the
#: task is saved and resumable)
EXIT_BAD_INPUT = 2
EXIT_MODEL_FAILED = 3


def _fail(msg: str) -> None:
    err.print("error: " + " ".join(msg.split()), markup=False)
    raise typer.Exit(EXIT_BAD_INPUT)


def _model_failed(project: Project, exc: ModelCallError, task_id: str, out: Path, db: str) -> None:
    """A model call failed at the provider: export the run up to the failure, keep the stop in
    the task's registry entry (:func:`_record_stop`, reason ``"model"``), print the cause and the
    command that continues, exit :data:`EXIT_MODEL_FAILED`."""
    saved = "nothing recorded before the failure"
    if project.stores.events.last_seq(task_id):
        saved = f"exported {export_run(project.stores, task_id, out)}/"
    message = " ".join(str(exc).split())
    spec = project.stores.tasks.get(task_id)
    if spec is not None:
        project.stores.tasks.register(
            task_id, {**spec, "stopped": {"reason": "model", "message": message, "out": str(out)}}
        )
    err.print("error: " + message, markup=False)
    err.print(
        f"task {task_id} is saved ({saved}); continue it with: {command_hint('resume', task_id, db, out)}", markup=False
    )
    raise typer.Exit(EXIT_MODEL_FAILED)


def _describe(exc: BaseException, db: str, task_id: str | None = None, out: Path | None = None) -> str:
    """One line for an error: taskctx errors as they are (a budget error with the command that
    continues the task, :func:`graphs.orchestrator.command_hint`); database and file errors named."""
    if isinstance(exc, BudgetError) and task_id and exc.minimum:
        if not exc.task_id:
            exc = exc.for_task(task_id)
        return (
            f"{exc}: `{command_hint('resume', task_id, db, out, '--budget', str(exc.minimum))}`; {exc.minimum} is what "
            f"this call needs, later calls carry more context and may need more (the default --budget is {DEFAULT_BUDGET})"
        )
    if isinstance(exc, BudgetError) and task_id:
        return f"{exc}: `{command_hint('resume', task_id, db, out, '--budget', 'N')}` continues with a larger one"
    if isinstance(exc, DamagedStoreError):
        return damage_line(exc, db)
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


def _first_line(text: Any) -> str:
    """The first non-blank line of ``text`` (a recorded tool result), control characters escaped."""
    from context.text import escape_controls

    line = next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")
    return escape_controls(line)


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
                + ")"
                # a refusal's text is what the executor is told (e.g. "not run: ... Re-read ..."): its first line
                + (
                    f": {first[:200]}"
                    if p["status"] != "ok" and (first := _first_line(p.get("result_summary")))
                    else ""
                ),
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
            "fact.stale",
            "memory.loaded",
            "memory.confirmed",
            "memory.forgotten",
        ) or (e.kind == "permission.granted" and e.actor == "user"):
            from context import summarize_event

            console.print(f"  [{e.seq}] {e.kind}: {summarize_event(e)}", markup=False)

    return show


def trajectory_sha256(path: Path) -> str:
    """The sha256 hex digest of a trajectory file's bytes (a replay's fingerprint; ``""`` when
    it is not a readable file): :func:`nodes.workspace.paths.file_sha256`."""
    from nodes.workspace.paths import file_sha256  # (nodes.workspace loads the tool node: only when hashing)

    return file_sha256(path)


def _graph_for(project: Project, task_id: str, *, spec: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """The graph a task was started with, rebuilt from its registry entry; ``UnknownTaskError``
    (from :func:`context.find_task`) for a task the database does not know, and for one that
    has events but no registry entry (run through the Python API, or its registry row was lost:
    the data cannot tell them apart; ``taskctx doctor`` lists it as a finding). ``spec``: the
    registry row when the caller has already read and checked it (no fold of the log then)."""
    if spec is None:
        spec = find_task(project.stores, task_id).spec
    if spec is None:
        raise UnknownTaskError(
            f"task {task_id!r} in {project.path} has {project.stores.events.last_seq(task_id)} events but no task "
            "registry row: it was run through the Python API, not a taskctx command (or its registry row was "
            "lost), so the CLI cannot rebuild its graph; continue it with graphs.run_graph, or see it with "
            f"`{command_hint('inspect', task_id, project.path)}`"
        )
    if "stopped" in spec:  # it continues now: the stop is no longer the last word
        spec = {k: v for k, v in spec.items() if k != "stopped"}
        project.stores.tasks.register(task_id, spec)
    from nodes import ReplayChatModel, ReplayTools

    budget = int(spec.get("budget", DEFAULT_BUDGET))
    kind = spec.get("kind")
    if kind == "replay":
        want = spec.get("sha256")
        if want and Path(str(spec["source"])).is_file() and trajectory_sha256(Path(str(spec["source"]))) != want:
            raise InvalidInputError(
                f"the trajectory {spec['source']} changed since task {task_id!r} was started from it (sha256 "
                f"{str(want)[:12]}... then, {trajectory_sha256(Path(str(spec['source'])))[:12]}... now): a resume replays "
                "the same file; restore it, or replay the new file under a new --task-id"
            )
        traj = load_trajectory(str(spec["source"]))
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj),
            tools=ReplayTools(traj),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
            memory=project.memory(),
        )
    elif kind == "demo":
        from ..demo import demo_model, demo_tools

        if not spec.get("workspace"):
            raise InvalidInputError(
                f"demo task {task_id!r} was recorded by an older taskctx without a workspace; "
                f"start a new one with `{command_hint('demo', None, project.path)}`"
            )
        g = build_orchestrator(
            demo_model(),
            tools=demo_tools(str(spec["workspace"]), spec.get("receipts")),
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
            memory=project.memory(str(spec["workspace"])),
        )
    elif kind == "run":
        tools = None
        if spec.get("workspace"):
            from nodes import WorkspaceTools

            tools = WorkspaceTools(str(spec["workspace"]), receipts_dir=spec.get("receipts"))
            tools.strict_resolution = True
        from nodes import resolve_model
        from nodes.chat_models import DEFAULT_RETRIES, DEFAULT_TIMEOUT

        chat = resolve_model(
            str(spec["model"]),
            timeout=float(spec.get("timeout") or DEFAULT_TIMEOUT),
            max_retries=int(spec.get("retries", DEFAULT_RETRIES)),
        )
        g = build_orchestrator(
            chat,
            tools=tools,
            checkpointer=project.checkpointer,
            stores=project.stores,
            budget=budget,
            memory=project.memory(spec.get("workspace")),  # type: ignore[arg-type]
        )
    else:
        raise InvalidInputError(f"task {task_id!r} has an unknown kind {kind!r} in {project.path}")
    return g, spec


def _finish(project: Project, result: RunResult, out: Path, db: str) -> None:
    """Export the run, print how it ended and what to run next; a task that ended with
    ``control.status == "failed"`` exits with code 1 (after the export and the line). The
    project is closed (its SQLite write-ahead log checkpointed now, not whenever the connection
    is garbage-collected, so a read-only command run next finds the file as it will stay)."""
    try:
        folder = export_run(project.stores, result.task_id, out)
    finally:
        project.close()
    s = result.state
    req = result.waiting
    if req is not None:
        console.print(
            f"waiting for approval of {req.get('tool')} (call {req.get('call_id')}, {req.get('risk')} risk). "
            f"Approve with: {command_hint('approve', result.task_id, db, out)} "
            "(or add --edit JSON, --reject REASON or --respond TEXT to that command)",
            markup=False,
        )
    elif result.stopped_early:
        console.print(
            f"stopped after {s.progress.executor_steps} executor steps; next: {', '.join(result.next_nodes)}."
            f" Continue with: {command_hint('resume', result.task_id, db, out)}",
            markup=False,
        )
    else:
        console.print(
            f"task {result.task_id}: {s.control.status}; {s.progress.executor_steps} executor steps, "
            f"{s.events.cursor} events",
            markup=False,
        )
    console.print(f"exported {folder}/ (trace.jsonl, state.json, context_pack.md, manifests.jsonl)", markup=False)
    if req is None and not result.stopped_early and s.control.status == "failed":
        raise typer.Exit(1)


def _record_stop(db: str, task_id: str, stop: dict[str, Any]) -> None:
    """Keep why a registered task stopped in its registry entry (``spec["stopped"]``: ``{"reason":
    "budget" | "model", "message", "budget" (the smallest budget of the failing call; budget stops
    only), "out"}``), so ``list`` and ``inspect`` say why and how to go on; the next
    ``resume``/``approve`` removes it. A task without a registry entry, or a database that cannot
    be written, is left as it is (the error line the caller prints is what matters)."""
    try:
        project = open_project(db)
        try:
            spec = project.stores.tasks.get(task_id)
            if spec is not None:
                project.stores.tasks.register(task_id, {**spec, "stopped": stop})
        finally:
            project.close()
    except (TaskctxError, sqlite3.Error, OSError):
        pass


def _fail_run(exc: BaseException, db: str, task_id: str | None, out: Path | None = None) -> None:
    """``_fail`` for a run command: the line of :func:`_describe`, exit 2. A ``BudgetError`` of a
    registered task is also kept in its registry entry (:func:`_record_stop`, reason
    ``"budget"``)."""
    if isinstance(exc, BudgetError) and task_id:
        if exc.minimum and not exc.task_id:
            exc = exc.for_task(task_id)
        stop: dict[str, Any] = {"reason": "budget", "message": str(exc), "budget": exc.minimum}
        _record_stop(db, task_id, stop | ({"out": str(out)} if out is not None else {}))
    _fail(_describe(exc, db, task_id, out))


def _open(db: str) -> Project:
    return open_project(db)


def _open_existing(db: str, *, readonly: bool = False) -> Project:
    """The database of a command that needs an existing one (everything but the commands that
    start a task): a missing file or one without the taskctx tables is a one-line error and
    stays as it was (the check opens it read-only); ``readonly`` keeps it read-only after."""
    if not db_exists(db):
        raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
    if readonly:
        return open_project(db, readonly=True)
    if not is_postgres_url(db) and db != ":memory:":
        open_project(db, readonly=True).close()  # NotTaskctxDatabaseError before anything is created
    return open_project(db)


def _budget_floor(value: int | None) -> int | None:
    """``--budget`` below the reserve for the model's answer (``nodes.DEFAULT_RESERVE`` tokens)
    can hold no prompt at all: one line and exit 2 while the options are parsed."""
    if value is not None and value < DEFAULT_RESERVE:
        _fail(
            f"--budget {value} is below the {DEFAULT_RESERVE} tokens reserved for the model's answer, so no prompt "
            f"fits; pass --budget {DEFAULT_RESERVE} or more (a failing call names the smallest budget that works)"
        )
    return value


BudgetOpt = Annotated[
    int,
    typer.Option(
        "--budget",
        callback=_budget_floor,
        help=f"Prompt budget in tokens (at least the {DEFAULT_RESERVE} reserved for the answer).",
    ),
]


ApproveAllOpt = Annotated[
    bool, typer.Option("--approve-all", metavar="", help="Approve every approval request (scripts).")
]
DenyAllOpt = Annotated[bool, typer.Option("--deny-all", metavar="", help="Reject every approval request (scripts).")]


def _state_dir(db: str) -> Path:
    """Where a task's workspace copy and command receipts live: beside the SQLite file."""
    return Path(".taskctx") if "://" in db else Path(db).resolve().parent


def _tracing_may_be_on() -> bool:
    """False when LangSmith tracing cannot be on: langsmith not imported yet in this process (so
    nothing configured it in code) and none of ``LANGSMITH_TRACING[_V2]``/``LANGCHAIN_TRACING[_V2]``
    set. Otherwise True, and langsmith's own check (in :func:`graphs.tracing.tracing_session`)
    decides. Spares every command without tracing the import of langsmith (~0.3 s of CPU)."""
    if "langsmith" in sys.modules:
        return True
    names = (f"{ns}_{v}" for ns in ("LANGSMITH", "LANGCHAIN") for v in ("TRACING_V2", "TRACING"))
    return any(os.environ.get(n, "").strip() for n in names)


def main() -> None:
    """The ``taskctx`` entry point: the typer app inside :func:`graphs.tracing.tracing_session`
    (with LangSmith tracing on and no network: one ``tracing: ...`` line on stderr, at most 5 s
    of waiting for uploads at exit); without tracing, the app alone (:func:`_tracing_may_be_on`)."""
    if not _tracing_may_be_on():
        app()
        return
    from ..tracing import tracing_session

    with tracing_session(notify=lambda line: err.print(line, markup=False)):
        app()
