"""The built-in task kinds: how the graph of a ``replay`` or ``run`` task is rebuilt from its registry row.

:meth:`graphs.Project.task_graph` looks a task's kind up in :data:`TASK_KINDS` (:func:`register_task_kind`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context import InvalidInputError, load_trajectory
from nodes.runtime import DEFAULT_BUDGET

__all__ = [
    "TASK_KINDS",
    "KindBuilder",
    "builder_of",
    "register_task_kind",
    "replay_task_graph",
    "run_task_graph",
    "trajectory_sha256",
]

#: Builds the graph of a registered task: ``(project, task_id, spec) -> graph``.
KindBuilder = Callable[[Any, str, dict[str, Any]], Any]
#: The task kinds :meth:`Project.task_graph` can rebuild, by the registry row's ``kind``: a
#: builder, or the ``"module:name"`` of one (imported when a task of that kind is rebuilt).
TASK_KINDS: dict[str, KindBuilder | str] = {}


def register_task_kind(kind: str, builder: KindBuilder | str) -> None:
    """Teach :meth:`Project.task_graph` to rebuild the graph of tasks whose registry row has ``kind``.

    Args:
        kind: The registry row's ``kind`` (built in: ``"replay"``, ``"run"``; ``graphs.demo``
            registers ``"demo"`` when imported, the CLI names it on start-up).
        builder: ``(project, task_id, spec) -> graph``, or its ``"module:name"``.
    """
    TASK_KINDS[kind] = builder


def builder_of(kind: str) -> KindBuilder | None:
    """The builder registered for a task kind.

    Args:
        kind: The registry row's ``kind``.

    Returns:
        Its builder (a ``"module:name"`` is imported now), or None.
    """
    builder = TASK_KINDS.get(kind)
    if isinstance(builder, str):
        module, name = builder.split(":")
        builder = getattr(importlib.import_module(module), name)
    return builder


def trajectory_sha256(path: Path) -> str:
    """The sha256 hex digest of a trajectory file's bytes (a replay's fingerprint).

    Args:
        path: The trajectory file.

    Returns:
        The digest; ``""`` when it is not a readable file.
    """
    from nodes.workspace.paths import file_sha256  # (nodes.workspace loads the tool node: only when hashing)

    return file_sha256(path)


def replay_task_graph(project: Any, task_id: str, spec: dict[str, Any]) -> Any:
    """The graph of a ``replay`` task: the replay model and tools over its trajectory file.

    Args:
        project: The task's :class:`graphs.Project`.
        task_id: The task.
        spec: Its registry row (``source``, ``sha256``, ``budget``).

    Returns:
        The graph.

    Raises:
        InvalidInputError: The trajectory file changed since the task started from it.
    """
    from nodes import ReplayChatModel, ReplayTools

    source = Path(str(spec["source"]))
    want = spec.get("sha256")
    if want and source.is_file() and trajectory_sha256(source) != want:
        raise InvalidInputError(
            f"the trajectory {spec['source']} changed since task {task_id!r} was started from it (sha256 "
            f"{str(want)[:12]}... then, {trajectory_sha256(source)[:12]}... now): a resume replays "
            "the same file; restore it, or replay the new file under a new --task-id"
        )
    traj = load_trajectory(str(spec["source"]))
    budget = int(spec.get("budget", DEFAULT_BUDGET))
    return project.graph(ReplayChatModel(trajectory=traj), tools=ReplayTools(traj), budget=budget)


def run_task_graph(project: Any, task_id: str, spec: dict[str, Any]) -> Any:
    """The graph of a ``run`` task: its chat model, on its workspace when it has one.

    Args:
        project: The task's :class:`graphs.Project`.
        task_id: The task.
        spec: Its registry row (``model``, ``timeout``, ``retries``, ``budget``, ``workspace``).

    Returns:
        The graph.
    """
    from nodes import WorkspaceTools, resolve_model
    from nodes.chat_models import DEFAULT_RETRIES, DEFAULT_TIMEOUT

    tools = None
    if spec.get("workspace"):
        tools = WorkspaceTools(
            str(spec["workspace"]), receipts_dir=spec.get("receipts"), artifacts=project.stores.artifacts
        )
        tools.strict_resolution = True
    chat = resolve_model(
        str(spec["model"]),
        timeout=float(spec.get("timeout") or DEFAULT_TIMEOUT),
        max_retries=int(spec.get("retries", DEFAULT_RETRIES)),
    )
    budget = int(spec.get("budget", DEFAULT_BUDGET))
    return project.graph(chat, tools=tools, budget=budget, workspace=spec.get("workspace"))


register_task_kind("replay", replay_task_graph)
register_task_kind("run", run_task_graph)
