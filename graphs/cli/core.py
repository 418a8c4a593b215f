"""The ``taskctx`` typer app and what its commands share: options, errors, progress, :func:`main`.

An error is one line (:func:`fail`: ``error: ...``, exit code 2; :func:`model_failed`: a provider
failure, the run exported, exit code 3); :func:`describe` adds the commands that help to a
library error; :func:`event_printer` prints a run's events; :func:`finish` ends a run command.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from context import (
    BudgetError,
    DamagedStoreError,
    Event,
    InvalidInputError,
    LeaseHeldError,
    LeaseLostError,
    ModelCallError,
    ServerLostError,
    StoreOpenError,
    TaskctxError,
    UnknownTaskError,
)
from context.pg_store import is_postgres_url
from context.sqlite_db import LOCK_WAIT_SECONDS
from context.text import counted
from nodes.runtime import DEFAULT_BUDGET

from ..fork import CHILD_ID
from ..inspection import UnshowableTaskError
from ..project import (
    DEFAULT_OUT,
    NoCheckpointError,
    Project,
    UnregisteredTaskError,
    db_exists,
    open_project,
    register_task_kind,
)
from ..report.hints import command_hint, damage_line
from ..runner import RunResult

__all__ = [
    "DEFAULT_OUT",
    "EXIT_BAD_INPUT",
    "EXIT_MODEL_FAILED",
    "ApproveAllOpt",
    "DbOpt",
    "DenyAllOpt",
    "OutOpt",
    "SecretOpt",
    "app",
    "check_task_id",
    "console",
    "describe",
    "err",
    "event_printer",
    "fail",
    "fail_run",
    "finish",
    "main",
    "model_failed",
    "open_existing",
    "prepare_out",
    "record_stop",
    "state_dir",
]

# a demo task's graph is rebuilt by graphs.demo, imported when one is resumed (it loads the graph runtime)
register_task_kind("demo", "graphs.demo:demo_task_graph")

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="taskctx: structured task context for LangGraph agents."
)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOpt = Annotated[
    str, typer.Option("--db", help="SQLite file, or postgresql:// URL, of checkpoints, event log and artifacts.")
]
OutOpt = Annotated[Path, typer.Option("--out", help="Folder the run is exported to (<out>/<task_id>/).")]
SecretOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        help="A secret for the task, never stored or shown: NAME (from the environment variable NAME) or "
        "NAME=@FILE (repeatable); the agent writes {{secret:NAME}} and the tools get the value.",
    ),
]
#: exit status of bad input (a usage error, nothing run) and of a model provider failure (the
#: task is saved and resumable)
EXIT_BAD_INPUT = 2
EXIT_MODEL_FAILED = 3
#: exit status of a run refused because another live process runs the task (it holds the lease)
EXIT_TASK_BUSY = 4


def fail(msg: str) -> None:
    """Print ``error: <msg>`` (whitespace folded to one line) on stderr and exit with code 2.

    Args:
        msg: What went wrong and what to do.

    Raises:
        typer.Exit: Always, with :data:`EXIT_BAD_INPUT`.
    """
    err.print("error: " + " ".join(msg.split()), markup=False)
    raise typer.Exit(EXIT_BAD_INPUT)


def model_failed(project: Project, exc: ModelCallError, task_id: str, out: Path, db: str) -> None:
    """End a run whose model call failed at the provider: export, record the stop, say how to go on.

    The stop is kept in the task's registry row (reason ``"model"``) for ``list`` and ``inspect``.

    Args:
        project: The open project.
        exc: The provider's failure.
        task_id: The task.
        out: The export root.
        db: The ``--db`` the commands it names carry.

    Raises:
        typer.Exit: Always, with :data:`EXIT_MODEL_FAILED`.
    """
    saved = "nothing recorded before the failure"
    if project.stores.events.last_seq(task_id):
        saved = f"exported {project.export(task_id, out)}/"
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


def describe(
    exc: BaseException, db: str, task_id: str | None = None, out: Path | None = None, command: str = "resume"
) -> str:
    """The one line the CLI prints for an error, naming the commands that help with this ``--db``.

    Args:
        exc: The error (a taskctx error, a database or file error).
        db: The ``--db`` the commands carry.
        task_id: The task of a run command (a budget error then names the ``resume`` that goes on).
        out: The ``--out`` of a run command.
        command: The command that was refused (``approve``: a busy task's next step is to look at
            the request it waits on then, which may be a new one).

    Returns:
        The line (without ``error: ``).
    """
    if isinstance(exc, BudgetError) and task_id:
        return _budget_line(exc, db, task_id, out)
    if isinstance(exc, ServerLostError) and task_id:  # the command that continues, with this --db
        return str(exc).replace("`taskctx resume TASK --db URL`", f"`{command_hint('resume', task_id, db)}`")
    if isinstance(exc, UnregisteredTaskError):
        return (
            f"task {exc.task_id!r} in {exc.path} has {exc.events} events but no task registry row: it was run "
            "through the Python API, not a taskctx command (or its registry row was lost), so the CLI cannot "
            f"rebuild its graph; continue it with graphs.Project.resume, or see it with "
            f"`{command_hint('inspect', exc.task_id, exc.path)}`"
        )
    if isinstance(exc, NoCheckpointError):
        return (
            f"task {exc.task_id!r} has {exc.events} events in {db} but no checkpoint (the checkpoint tables were "
            "emptied or restored from an older backup), so it cannot be resumed; "
            f"`{command_hint('inspect', str(exc.task_id), db)}` still works; restore the database from a backup, "
            "or start the task again under a new --task-id"
        )
    if isinstance(exc, LeaseLostError):
        then = (
            f"let the other holder go on with the task; when it has ended, `{command_hint('resume', exc.task_id, db, out)}`"
            if exc.holder
            else f"`{command_hint('resume', exc.task_id, db, out)}` continues from what is recorded"
        )
        return f"{exc.what}; {then}"
    if isinstance(exc, LeaseHeldError):
        wait = (
            "run the task through one project (one store object), one run at a time, or wait for the other run to end"
            if exc.same_process
            else "wait for it to end (or stop it)"
        )
        then = (
            f"`{command_hint('approve', exc.task_id, db, out)}` (it shows the request the task waits on then, which "
            "may be a new one, before it answers)"
            if command == "approve"
            else f"`{command_hint('resume', exc.task_id, db, out)}`"
        )
        return (
            f"task {exc.task_id!r} is being run by {exc.by_whom}, {exc.holder}; nothing was run or recorded; "
            f"{wait}, then {then} (a holder that ended is taken over at once)"
        )
    if isinstance(exc, UnshowableTaskError):
        return f"{exc.what}; run `{command_hint('doctor', exc.task_id, db)}` for every finding"
    if isinstance(exc, DamagedStoreError):
        return damage_line(exc, db)
    if isinstance(exc, TaskctxError):
        return str(exc)
    if disk_full(exc):
        again = _again(db, task_id, out)
        return (
            f"database {db} cannot be written: the disk that holds it is full ({exc}); every event recorded "
            f"before is kept (nothing half written); free space on that file system, then run {again}"
        )
    if isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc):
        again = _again(db, task_id, out)
        return (
            f"database {db} is locked: another program has held a lock on the file for longer than the "
            f"{LOCK_WAIT_SECONDS} s wait (find it with `fuser {db}` or `lsof {db}`); nothing was lost; once it "
            f"lets go, run {again}: retrying continues"
        )
    if isinstance(exc, sqlite3.Error):
        return f"database {db} cannot be used: {exc}; check that the file and its folder are writable, or pass another --db"
    return f"{exc}; check the path and its permissions"


def _again(db: str, task_id: str | None, out: Path | None) -> str:
    """``the command again``, and the ``taskctx resume`` that continues ``task_id`` (when known)."""
    if not task_id:
        return "the command again"
    return f"the command again (`{command_hint('resume', task_id, db, out)}` continues the task)"


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full: SQLite's ``SQLITE_FULL`` or an ``OSError`` ``ENOSPC``.

    Args:
        exc: The error.

    Returns:
        True for "database or disk is full" (SQLite) and "No space left on device" (a file write).
    """
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def _budget_line(exc: BudgetError, db: str, task_id: str, out: Path | None) -> str:
    """A budget error with the ``resume --budget`` that continues the task."""
    if exc.minimum:
        if not exc.task_id:
            exc = exc.for_task(task_id)
        if exc.scope == "task":
            return (
                f"{exc}: `{command_hint('resume', task_id, db, out, '--budget', str(exc.minimum))}`; {exc.minimum} "
                f"carries every call of the task (its required blocks degrade to fit; the default --budget is {DEFAULT_BUDGET})"
            )
        return (
            f"{exc}: `{command_hint('resume', task_id, db, out, '--budget', str(exc.minimum))}`; {exc.minimum} is what "
            f"this call needs, later calls carry more context and may need more (the default --budget is {DEFAULT_BUDGET})"
        )
    return f"{exc}: `{command_hint('resume', task_id, db, out, '--budget', 'N')}` continues with a larger one"


def check_task_id(task_id: str) -> str:
    """Check a ``--task-id``: it names a thread and an export folder.

    Args:
        task_id: 1-128 letters, digits, '-', '_' or '.', not starting with '.' or '-'.

    Returns:
        ``task_id``.

    Raises:
        InvalidInputError: Anything else (a path separator, ``..``, a leading ``-``, nothing).
    """
    if not CHILD_ID.fullmatch(task_id):  # the one rule for a task id that names folders
        raise InvalidInputError(
            f"--task-id {task_id[:60]!r} is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' "
            "(not starting with '.' or '-')"
        )
    return task_id


def prepare_out(out: Path) -> Path:
    """Create the export folder now, so an unwritable ``--out`` fails before the run, not after.

    Args:
        out: The export root.

    Returns:
        ``out``.

    Raises:
        InvalidInputError: It cannot be written.
    """
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


def event_printer() -> Callable[[Event], None]:
    """The progress printer of a run command: one line per event a person follows.

    Returns:
        A function to pass as ``on_event``.
    """

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


def finish(project: Project, result: RunResult, out: Path, db: str) -> None:
    """End a run command: export the run, print how it ended and what to run next, close the project.

    Closing now checkpoints SQLite's write-ahead log, so a read-only command run next finds the
    file as it will stay.

    Args:
        project: The open project (closed here).
        result: How the run ended.
        out: The export root.
        db: The ``--db`` the commands it names carry.

    Raises:
        typer.Exit: With code 1 when the task ended failed (after the export and the line).
    """
    try:
        folder = project.export(result.task_id, out)
    finally:
        project.close()
    s = result.state
    req = result.waiting
    if req is not None:
        console.print(
            f"waiting for approval of {req.get('tool')} (call {req.get('call_id')}, {req.get('risk')} risk). "
            f"Approve with: {command_hint('approve', result.task_id, db, out, *_request_words(req))} "
            "(or add --edit JSON, --reject REASON or --respond TEXT to that command)",
            markup=False,
        )
    elif result.stopped_early:
        console.print(
            f"stopped after {counted(s.progress.executor_steps, 'executor step')}; next: {', '.join(result.next_nodes)}."
            f" Continue with: {command_hint('resume', result.task_id, db, out)}",
            markup=False,
        )
    else:
        console.print(
            f"task {result.task_id}: {s.control.status}; {counted(s.progress.executor_steps, 'executor step')}, "
            f"{counted(s.events.cursor, 'event')}",
            markup=False,
        )
    console.print(
        f"exported {folder}/ (trace.jsonl, state.json, context_pack.md, manifests.jsonl, calls.jsonl, costs.json)",
        markup=False,
    )
    if req is None and not result.stopped_early and s.control.status == "failed":
        raise typer.Exit(1)


def _request_words(req: dict[str, Any]) -> tuple[str, ...]:
    """``("--request", id)`` of a request that has an id (the answer is then bound to it), else ``()``."""
    return ("--request", str(req["request_id"])) if req.get("request_id") else ()


def record_stop(db: str, task_id: str, stop: dict[str, Any]) -> None:
    """Keep why a registered task stopped in its registry row, for ``list`` and ``inspect``.

    The next ``resume`` or ``approve`` removes it. A task without a registry row, or a database
    that cannot be written, is left as it is (the error line the caller prints is what matters).

    Args:
        db: The database.
        task_id: The task.
        stop: ``{"reason": "budget" | "model", "message", "budget" (the smallest budget of the
            failing call; budget stops only), "out"}``.
    """
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


def fail_run(
    exc: BaseException, db: str, task_id: str | None, out: Path | None = None, command: str = "resume"
) -> None:
    """:func:`fail` for a run command, with the line of :func:`describe`.

    A ``BudgetError`` of a registered task is also kept in its registry row (:func:`record_stop`).

    Args:
        exc: The error that stopped the command.
        db: The ``--db``.
        task_id: The task (None: not known yet).
        out: The ``--out``.
        command: The command (its name in the line's next step, :func:`describe`).

    Raises:
        typer.Exit: Always, with :data:`EXIT_BAD_INPUT` (:data:`EXIT_TASK_BUSY` when another
            process runs the task).
    """
    if isinstance(exc, LeaseHeldError):
        err.print("error: " + " ".join(describe(exc, db, task_id, out, command).split()), markup=False)
        raise typer.Exit(EXIT_TASK_BUSY)
    if isinstance(exc, BudgetError) and task_id:
        if exc.minimum and not exc.task_id:
            exc = exc.for_task(task_id)
        stop: dict[str, Any] = {"reason": "budget", "message": str(exc), "budget": exc.minimum}
        record_stop(db, task_id, stop | ({"out": str(out)} if out is not None else {}))
    fail(describe(exc, db, task_id, out, command))


def open_existing(db: str, *, readonly: bool = False) -> Project:
    """Open the database of a command that needs an existing one (all but those that start a task).

    A missing file, or one without the taskctx tables, stays as it was (the check opens it
    read-only).

    Args:
        db: The ``--db``.
        readonly: Keep it read-only after the check.

    Returns:
        The open project.

    Raises:
        StoreOpenError: ``db`` is a directory.
        UnknownTaskError: There is no database at ``db``.
        NotTaskctxDatabaseError: It holds no taskctx tables.
    """
    if not is_postgres_url(db) and Path(db).is_dir():
        raise StoreOpenError(f"--db {db} is a directory; give a file path such as {Path(db) / 'taskctx.sqlite'}")
    if not db_exists(db):
        raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
    if readonly:
        return open_project(db, readonly=True)
    if not is_postgres_url(db) and db != ":memory:":
        open_project(db, readonly=True).close()  # NotTaskctxDatabaseError before anything is created
    return open_project(db)


ApproveAllOpt = Annotated[
    bool, typer.Option("--approve-all", metavar="", help="Approve every approval request (scripts).")
]
DenyAllOpt = Annotated[bool, typer.Option("--deny-all", metavar="", help="Reject every approval request (scripts).")]


def state_dir(db: str) -> Path:
    """Where a task's workspace copy and command receipts live: beside the SQLite file.

    Args:
        db: The ``--db``.

    Returns:
        The SQLite file's folder; ``.taskctx`` for a URL.
    """
    return Path(".taskctx") if "://" in db else Path(db).resolve().parent


def _tracing_may_be_on() -> bool:
    """Whether LangSmith tracing may be on in this process.

    False when LangSmith tracing cannot be on: langsmith not imported yet in this process (so
    nothing configured it in code) and none of ``LANGSMITH_TRACING[_V2]``/``LANGCHAIN_TRACING[_V2]``
    set. Otherwise True, and langsmith's own check (in :func:`graphs.tracing.tracing_session`)
    decides. Spares every command without tracing the import of langsmith.
    """
    if "langsmith" in sys.modules:
        return True
    names = (f"{ns}_{v}" for ns in ("LANGSMITH", "LANGCHAIN") for v in ("TRACING_V2", "TRACING"))
    return any(os.environ.get(n, "").strip() for n in names)


def main() -> None:
    """The ``taskctx`` entry point: the typer app, inside a tracing session when tracing may be on.

    With LangSmith tracing on (:func:`graphs.tracing.tracing_session`) and no network, one
    ``tracing: ...`` line goes to stderr and the uploads are waited for a few seconds at exit.
    """
    if not _tracing_may_be_on():
        app()
        return
    from ..tracing import tracing_session

    with tracing_session(notify=lambda line: err.print(line, markup=False)):
        app()
