"""A run's LangGraph config: the thread, a resume's token, the registered mark; and the steps an update reports.

Shared by the sync runner (:mod:`graphs.runner`) and the async one (:mod:`graphs.arunner`).
"""

from __future__ import annotations

import uuid
from typing import Any

from context import TaskctxError, UnknownTaskError

from .diagnosis import REGISTERED_MARK, Checked

__all__ = ["RECURSION_LIMIT", "registered", "run_config", "thread_config", "tools_steps"]

#: Supersteps one invocation may take (a 50-step replay takes ~170).
RECURSION_LIMIT = 100_000


def registered(stores: Any, task_id: str) -> bool:
    """Whether the task has a registry row (a damaged row: False, ``ensure_sound`` names it).

    Args:
        stores: The stores.
        task_id: The task.

    Returns:
        True when the task registry knows the task.
    """
    try:
        return stores.tasks.get(task_id) is not None
    except TaskctxError:  # a damaged row: ensure_sound names it where it matters
        return False


def thread_config(task_id: str, **configurable: Any) -> dict[str, Any]:
    """The LangGraph run config of a task's thread.

    Args:
        task_id: The task; its thread id.
        **configurable: More ``configurable`` keys.

    Returns:
        ``{"configurable": {"thread_id": task_id, ...}, "recursion_limit": RECURSION_LIMIT}``.
    """
    return {"configurable": {"thread_id": task_id, **configurable}, "recursion_limit": RECURSION_LIMIT}


def run_config(graph: Any, stores: Any, task_id: str, resume: bool | None, checked: Checked | None) -> dict[str, Any]:
    """The run's config: the thread, a resume's token and checkpoint, the registered mark.

    Args:
        graph: The task's compiled graph.
        stores: The stores its nodes write to.
        task_id: The task; its thread id.
        resume: True: a resume (a token and the checkpoint it continues); False: not one (the
            graph does not decide); None: the graph decides (:mod:`graphs.edits`).
        checked: What the caller's ``ensure_sound`` returned (the graph's own check is then skipped).

    Returns:
        The LangGraph config (:func:`thread_config` with the keys above, and the registered mark).

    Raises:
        UnknownTaskError: ``resume`` of a thread that has no checkpoint.
    """
    extra: dict[str, Any] = {}
    if resume:
        snap = graph.get_state(thread_config(task_id))
        if not snap.values:
            raise UnknownTaskError(f"no task {task_id!r} in this database; check the task id and --db")
        extra["resume_token"] = uuid.uuid4().hex
        extra["resumed_from_checkpoint"] = snap.config.get("configurable", {}).get("checkpoint_id")
    if checked is not None:  # the graph's own resume check (graphs.edits) is not run again
        extra["__taskctx_checked"] = True
    if resume is False:  # the caller says: not a resume (graphs.edits does not decide)
        extra["__taskctx_not_resume"] = True
    config = thread_config(task_id, **extra)
    known = checked.spec is not None if checked is not None else registered(stores, task_id)
    if known:  # its checkpoints say so: doctor then misses a lost registry row
        config["metadata"] = {REGISTERED_MARK: True}
    return config


def tools_steps(update: dict[str, Any]) -> int | None:
    """The executor steps a ``tools`` node update reports.

    Args:
        update: One ``stream_mode="updates"`` chunk.

    Returns:
        ``progress.executor_steps`` of the ``tools`` node's update; None when it is not one.
    """
    if "tools" not in update:
        return None
    prog = (update["tools"] or {}).get("progress")
    return (
        prog.executor_steps if prog is not None and not isinstance(prog, dict) else (prog or {}).get("executor_steps")
    )
