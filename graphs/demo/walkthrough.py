"""The demo's course (``taskctx demo``): run the task, pause it, edit the config by hand, resume it.

:func:`run_demo` drives it on a :class:`graphs.Project`; :func:`demo_task_graph` rebuilds a demo
task's graph from its registry row (the ``"demo"`` task kind, registered on import).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context import InvalidInputError
from context.text import counted
from nodes.runtime import DEFAULT_BUDGET

from ..orchestrator import new_task
from ..project import Project, register_task_kind
from ..report.hints import command_hint
from ..runner import RunResult
from .scenario import DEMO_REQUEST, DEMO_STOP_AFTER, copy_sample, demo_model, demo_permissions, demo_tools, hand_edit

__all__ = ["demo_task_graph", "run_demo"]


def demo_task_graph(project: Project, task_id: str, spec: dict[str, Any]) -> Any:
    """The graph of a demo task, rebuilt from its registry row.

    Args:
        project: The task's project.
        task_id: The task.
        spec: Its registry row (``workspace``, ``receipts``, ``budget``).

    Returns:
        The demo's graph on the task's workspace copy.

    Raises:
        InvalidInputError: The row names no workspace (recorded by an older taskctx).
    """
    if not spec.get("workspace"):
        raise InvalidInputError(
            f"demo task {task_id!r} was recorded by an older taskctx without a workspace; "
            f"start a new one with `{command_hint('demo', None, project.path)}`"
        )
    ws = str(spec["workspace"])
    tools = demo_tools(ws, spec.get("receipts"))
    return project.graph(demo_model(), tools=tools, budget=int(spec.get("budget", DEFAULT_BUDGET)), workspace=ws)


register_task_kind("demo", demo_task_graph)


def run_demo(
    project: Project,
    task_id: str,
    workspace: Path,
    receipts: Path,
    *,
    approvals: Callable[[dict[str, Any]], dict[str, Any] | None],
    say: Callable[[str], None],
    on_event: Callable[[Any], None] | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    """Run the demo task: explore, pause after a few steps, a hand edit, resume with a new graph.

    Args:
        project: Where the task is recorded.
        task_id: The new task's id.
        workspace: Where the sample workspace is copied (must be empty or new).
        receipts: Where the workspace tools keep their command receipts.
        approvals: Answers the approval requests.
        say: Prints one line of the demo's narration.
        on_event: Called with every event recorded.
        on_request: Called with each approval request before it is answered.

    Returns:
        How the task ended (after the resume when it paused).

    Raises:
        InvalidInputError: ``workspace`` is not empty.
    """
    spec = project.stores.tasks.get(task_id)
    if spec is not None and spec.get("workspace") == str(workspace) and workspace.is_dir():
        shutil.rmtree(workspace)  # a start of this task that recorded nothing (killed at once): start it afresh
    try:
        copy_sample(workspace)
    except FileExistsError:
        raise InvalidInputError(f"--workspace {workspace} is not empty; pass an empty or new folder") from None
    project.stores.tasks.register(
        task_id, {"kind": "demo", "budget": DEFAULT_BUDGET, "workspace": str(workspace), "receipts": str(receipts)}
    )
    say(
        f"demo task {task_id} (scripted model, real workspace tools, SQLite at {project.path})\n"
        f"workspace: {workspace} (a copy of the bundled sample)\nrequest: {DEMO_REQUEST}"
    )
    graph = project.graph(demo_model(), tools=demo_tools(workspace, receipts), workspace=workspace)
    task = new_task(DEMO_REQUEST, task_id, permissions=demo_permissions())
    kw: dict[str, Any] = {"approvals": approvals, "on_event": on_event, "on_request": on_request, "prune": True}
    first = project.run(graph, task, max_steps=DEMO_STOP_AFTER, **kw)
    if not first.stopped_early:
        return first
    say(
        f"-- interrupted after {counted(first.state.progress.executor_steps, 'executor step')} "
        f"(checkpoint kept; next: {', '.join(first.next_nodes)}) --"
    )
    conf = hand_edit(workspace)
    say(
        f"-- while paused, a person edits {conf.relative_to(workspace).as_posix()} by hand (adds a comment line); "
        "resuming with a new graph --"
    )
    return project.resume(task_id, **kw)
