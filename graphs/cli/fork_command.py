"""``taskctx fork``: a new task that starts from a task's state at an earlier seq or executor step.

A thin layer over :func:`graphs.fork.fork_task` (what :meth:`graphs.Project.fork` runs); ``taskctx resume <new id>``
runs the child on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from context import TaskctxError
from context.text import counted

from ..fork import ForkResult, fork_task
from ..fork_workspace import NOT_UNDONE, no_workspace, shared_side_effects
from ..project import DEFAULT_DB, Project
from ..report.hints import command_hint
from .core import DbOpt, check_task_id, console, fail, fail_run, open_existing

__all__ = ["fork", "fork_lines"]


def fork_lines(r: ForkResult, db: str, after_fork: list[str], none: str | None = None) -> list[str]:
    """What ``taskctx fork`` prints of a fork it made.

    Args:
        r: The fork.
        db: The ``--db``.
        after_fork: The parent's side effects after the fork (:func:`graphs.fork_workspace.shared_side_effects`).
        none: The workspace line of a task that has no workspace (:func:`graphs.fork_workspace.no_workspace`).

    Returns:
        The lines: the child and its fork point, the next nodes, the workspace (restored files,
        those left and why, or the parent's side effects after the fork), how to run it on.
    """
    out = [
        f"forked {r.parent} at seq {r.fork_seq} into {r.task_id} "
        f"({counted(r.state.progress.executor_steps, 'executor step')} done; next: {', '.join(r.next_nodes) or 'nothing'})"
    ]
    if r.workspace is not None:
        out.append(f"workspace: {r.workspace} (a copy; the parent's own changes after the fork undone)")
        out += [f"  restored {p}" for p in r.restored]
        out += [f"  left {p}: {why}" for p, why in sorted(r.left.items())]
    elif none is not None:
        out.append(none)
    elif after_fork:
        out.append(f"workspace: shared with {r.parent}; these {NOT_UNDONE}:")
        out += [f"  {line}" for line in after_fork]
    out.append(f"run it on: {command_hint('resume', r.task_id, db)}")
    return out


def fork(
    task_id: Annotated[str, typer.Argument(help="The task to fork (it is only read).")],
    at: Annotated[
        int | None, typer.Option("--at", min=1, help="Fork after this seq (inspect --all shows them); a node's end.")
    ] = None,
    at_step: Annotated[int | None, typer.Option("--at-step", min=1, help="Fork at the end of executor step N.")] = None,
    new_id: Annotated[
        str | None, typer.Option("--task-id", help="The new task's id (default <task>-fork-<seq>).")
    ] = None,
    why: Annotated[str, typer.Option("--why", help="Why, in words (recorded in task.forked).")] = "",
    workspace_at_fork: Annotated[
        bool,
        typer.Option(
            "--workspace-at-fork",
            metavar="",
            help="Give the new task a copy of the workspace with the parent's own changes after the fork undone.",
        ),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Where that copy goes (default: beside the parent's, named by the new id)."),
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Fork a task at an earlier seq (--at) or executor step (--at-step) into a new task; resume runs it on.

    The new task's log is the parent's up to the fork point (referenced, not copied), then
    task.forked; the parent is never changed.
    """
    if (at is None) == (at_step is None):
        fail("give one fork point: --at SEQ (an event's seq, as inspect --all shows it) or --at-step N")
    if workspace is not None and not workspace_at_fork:
        fail(
            f"--workspace {workspace} is where the copy of --workspace-at-fork goes, and that is not given; add "
            "--workspace-at-fork, or drop --workspace to share the parent's workspace"
        )
    project: Project | None = None
    try:
        if new_id is not None:
            check_task_id(new_id)
        project = open_existing(db)
        r = fork_task(  # Project.fork, its errors naming the flags
            project,
            task_id,
            at=at,
            at_step=at_step,
            new_task_id=new_id,
            why=why,
            workspace_at_fork=workspace_at_fork,
            workspace=workspace,
            id_name="--task-id",
        )
        none = None if r.workspace is not None else no_workspace(project.stores.tasks.get(r.task_id), r.parent)
        shared = [] if r.workspace or none else shared_side_effects(project.stores, r.parent, r.fork_seq, r.state)
        for line in fork_lines(r, db, shared, none):
            console.print(line, markup=False)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, task_id, None)
    finally:
        if project is not None:
            project.close()
