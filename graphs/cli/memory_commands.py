"""``taskctx memory list|show|confirm|forget|rebuild``: the durable memories of a database.

``taskctx memory list|show|confirm|forget|rebuild``: the durable memories of a database (the
Python API is :mod:`graphs.memory_store`). ``confirm`` and ``forget`` record an event first
(``memory.confirmed``, ``memory.forgotten``), then write the long-term store; ``rebuild``
restores the store from those events.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from context import TaskctxError
from context.freshness import short_sha
from context.text import escape_controls

from ..project import DEFAULT_DB, Project, open_project
from ..report.hints import command_hint
from .core import DbOpt, console, describe, fail, open_existing

if TYPE_CHECKING:
    from ..memory_store import MemoryView

# (graphs.memory_store is imported by each command: it loads nodes.workspace and through it
# langgraph.types and langsmith, which `import graphs.cli` does not)

__all__ = ["memory_app"]

memory_app = typer.Typer(
    no_args_is_help=True,
    help="Durable memories across tasks: list, show, confirm, forget, rebuild (LangGraph's long-term store).",
)

WorkspaceOpt = Annotated[
    Path | None,
    typer.Option("--workspace", help="Folder the memories' files are checked against (stale when they changed)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON.")]


@contextmanager
def _database(db: str, *, create: bool = False) -> Iterator[Project]:
    """The database of one memory command, closed after it.

    The database ``db`` for one memory command, closed after it: it must exist (``create``:
    made when missing, as ``confirm`` does). A store error, here or in the command's body, ends
    the command with one line naming it (exit 2).
    """
    try:
        project = open_project(db) if create else open_existing(db)
        try:
            yield project
        finally:
            project.close()
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail(_error_line(exc, db))


def _error_line(exc: BaseException, db: str) -> str:
    """The line for a memory command's error.

    The line for a memory command's error: a key the store does not hold names ``taskctx
    memory list`` with the ``--db`` in use; any other error as :func:`describe` says it.
    """
    from ..memory_store import NoSuchMemoryError  # (every command has loaded it: not imported at start-up)

    if isinstance(exc, NoSuchMemoryError):
        return f"{exc.head}; `{command_hint('memory', None, db, None, 'list')}` shows the keys"
    return describe(exc, db)


def _say(text: str) -> None:
    r"""Print one line of recorded text, control characters escaped.

    Print one line of recorded text (a memory's text, subject, key, paths) as inspect does:
    control and bidirectional-control characters written as escapes (``\x1b``, ``\u202e``).
    """
    console.print(escape_controls(text), markup=False)


def _line(v: MemoryView) -> str:
    r = v.record
    gone = " (since forgotten)" if v.superseder_forgotten else ""
    marks = (["STALE"] if v.stale else []) + ([f"superseded by {v.superseded_by}{gone}"] if v.superseded_by else [])
    where = f"task {r.task_id}" if r.task_id else "no task"
    return (
        f"{r.key}  {r.namespace} {r.kind}{' [' + ', '.join(marks) + ']' if marks else ''}: {r.text}  "
        f"(confirmed by {r.confirmed_by}, {where}, {r.confirmed_at})"
    )


@memory_app.command("list")
def list_cmd(
    namespace: Annotated[str | None, typer.Option("--namespace", help="user or project (default: both).")] = None,
    workspace: WorkspaceOpt = None,
    db: DbOpt = DEFAULT_DB,
    as_json: JsonOpt = False,
) -> None:
    """List the stored memories, oldest confirmation first (superseded and stale ones marked)."""
    from ..memory_store import list_memories

    with _database(db) as project:
        views = list_memories(project, namespace=namespace, root=workspace)
    if as_json:
        sys.stdout.write(json.dumps([v.as_json() for v in views], indent=2) + "\n")
        return
    if not views:
        _say("no memories")
    for v in views:
        _say(_line(v))


@memory_app.command("show")
def show_cmd(
    key: Annotated[str, typer.Argument(help="The memory's key (m_<12 hex>, from `taskctx memory list`).")],
    workspace: WorkspaceOpt = None,
    db: DbOpt = DEFAULT_DB,
    as_json: JsonOpt = False,
) -> None:
    """Show one memory with its provenance and the files it rests on."""
    from ..memory_store import show_memory

    with _database(db) as project:
        v = show_memory(project, key, root=workspace)
    if as_json:
        sys.stdout.write(json.dumps(v.as_json(), indent=2) + "\n")
        return
    _say(_line(v))
    r = v.record
    _say(f"subject: {r.subject or '(none)'}; event: {r.event_id}")
    stale = {s.path: s for s in v.stale}
    for f in r.files:
        s = stale.get(f.path)
        now = f"; STALE: sha256 {short_sha(s.current)} now" if s else ""
        _say(f"file: {f.path} sha256 {short_sha(f.sha256)} when confirmed{now}")


@memory_app.command("confirm")
def confirm_cmd(
    text: Annotated[str, typer.Argument(help="The fact, preference or convention to remember.")],
    kind: Annotated[str, typer.Option("--kind", help="fact, preference or convention.")] = "fact",
    namespace: Annotated[str, typer.Option("--namespace", help="user or project.")] = "project",
    subject: Annotated[
        str, typer.Option("--subject", help="What it is about: a newer memory of the same subject supersedes it.")
    ] = "",
    supersedes: Annotated[
        str | None, typer.Option("--supersedes", help="The key of the memory this one replaces.")
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option("--file", help="A workspace file it rests on (repeatable): stale once its bytes change."),
    ] = None,
    workspace: WorkspaceOpt = None,
    task: Annotated[
        str | None, typer.Option("--task", help="The task it was confirmed in (its reads stamp the files).")
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Confirm a memory: records memory.confirmed, then writes it to the long-term store.

    With --task of a task started by a taskctx command that is stopped (not waiting for an
    approval, not running) or finished, the event goes into that task's own log and checkpoint (a
    working-memory item of the same text becomes durable); otherwise into the log's memory
    stream, with the task as provenance (a second line says so). A --db that does not
    exist yet is created (a new database holding this memory only).
    """
    from ..memory_store import confirm_memory

    with _database(db, create=True) as project:
        graph, last = None, 0
        if task and project.stores.tasks.get(task) is not None:
            last = project.stores.events.last_seq(task)
            graph = project.task_graph(task)
        r = confirm_memory(
            project,
            text,
            kind=kind,
            namespace=namespace,
            subject=subject,
            supersedes=supersedes,
            files=list(file or []),
            root=workspace,
            task_id=task,
            graph=graph,
        )
        taken = bool(task) and any(e.id == r.event_id for e in project.stores.events.read(str(task), after=last))
    _say(f"confirmed {r.key} ({r.namespace} {r.kind}): {r.text}")
    if graph is not None and not taken:
        _say(
            f"recorded in the log's ~memory stream with task {task} as provenance: the task's own log takes it "
            "only while the task is stopped or finished, not waiting for an approval or running"
        )


@memory_app.command("forget")
def forget_cmd(
    key: Annotated[str, typer.Argument(help="The memory's key (from `taskctx memory list`).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is forgotten (kept in the event).")] = "",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Forget a memory: records memory.forgotten, then deletes it from the long-term store."""
    from ..memory_store import forget_memory

    with _database(db) as project:
        r = forget_memory(project, key, reason=reason)
    _say(f"forgot {r.key}: {r.text}")


@memory_app.command("rebuild")
def rebuild_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Rebuild the long-term store from the confirmation events of every log."""
    from ..memory_store import rebuild_memory

    with _database(db) as project:
        n = rebuild_memory(project)
    _say(f"rebuilt the memory store from the event log: {n} memories")
