"""Why a state edit or a run's input is refused: the messages of :mod:`graphs.edits`."""

from __future__ import annotations

from typing import Any

from context import InvalidInputError, TaskContext
from nodes.attempts import attempt_of

from .time_travel import ForeignStateError

__all__ = ["check_owner", "past_events", "refuse_id_edit", "refuse_no_task"]


def past_events(task_id: str, cursor: int, past: list[Any]) -> str:
    """Why a state edit is refused when the log holds events past the checkpoint's cursor."""
    span = f"seq {past[0].seq}" if len(past) == 1 else f"seq {past[0].seq}-{past[-1].seq}"
    runs = {attempt_of(e.causation_id) for e in past}
    asked = [e for e in past if e.kind == "permission.requested"]
    if asked and not any(e.kind in ("permission.granted", "permission.denied") for e in past):
        what = f"call {asked[-1].payload.get('call_id')} of {asked[-1].payload.get('tool')}"
        return (
            f"update_state: task {task_id!r} waits for an approval ({what}, asked at seq {asked[-1].seq}); its "
            "node's run ends with the answer, so an edit now would split that run: answer it first "
            "(Command(resume=...), or taskctx approve), then edit; to edit before a call is asked, interrupt "
            "before the tools node (interrupt_before=['tools'])"
        )
    if len(runs) == 1 and (run := next(iter(runs))) is not None and run[0] == cursor:
        return (
            f"update_state: node {run[1]!r} of task {task_id!r} has run on this checkpoint (seq {cursor}) and "
            f"appended events ({span}) but its run has not ended (it is in flight, or stopped before its "
            "checkpoint was written): resume the task to finish that run, then edit it"
        )
    return (
        f"update_state: the event log of task {task_id!r} is at seq {past[-1].seq} but this checkpoint knows "
        f"seq {cursor} (the log has moved past it: {span}); edit the task's latest state (a config without "
        "checkpoint_id)"
    )


def check_owner(thread_id: str, state: Any, what: str) -> None:
    """Refuse a run of thread ``thread_id`` whose state (``what``) is another task's (new, or past its start)."""
    ident = state.identity if isinstance(state, TaskContext) else (state or {}).get("identity")
    evs = state.events if isinstance(state, TaskContext) else (state or {}).get("events")
    owner = getattr(ident, "task_id", None) if not isinstance(ident, dict) else ident.get("task_id")
    cursor = getattr(evs, "cursor", 0) if not isinstance(evs, dict) else evs.get("cursor", 0)
    if not owner or owner == thread_id:
        return
    if not cursor:
        raise InvalidInputError(
            f"thread {thread_id!r}: {what} starts task {owner!r}, but a task runs on the thread of its own id "
            f"(its events, checkpoints and resume are found by it): run it with "
            f"graphs.thread_config({owner!r}), or start it as new_task(..., task_id={thread_id!r})"
        )
    raise ForeignStateError(
        f"thread {thread_id!r}: {what} holds the state of task {owner!r} at seq {cursor} (a task's state "
        f"copied to another thread, e.g. update_state or an input of an older state of {owner!r}); a thread "
        f"is one task, and a task's state is the fold of its own event log, so this state cannot run here: "
        f"fork task {owner!r} at seq {cursor} to go on from it as a new task (taskctx fork {owner} --at {cursor})"
    )


def refuse_id_edit(thread_id: str, values: Any, editable: str) -> None:
    """Refuse an edit (not a whole state: no ``events`` part) that changes the task's id.

    Args:
        thread_id: The thread the edit is on (the task's id).
        values: The values given to ``update_state``.
        editable: The fields a user may edit, as words.

    Raises:
        InvalidInputError: ``values`` sets ``identity.task_id`` to another id.
    """
    if not isinstance(values, dict) or "events" in values or not isinstance(values.get("identity"), dict):
        return
    given = values["identity"].get("task_id")
    if given is not None and given != thread_id:
        raise InvalidInputError(
            f"update_state: identity.task_id cannot be edited (it is {thread_id!r}, the thread's id, and {given!r} "
            f"was given): a task's id is its thread's; to go on as another task, fork it (update_state at an "
            f"earlier checkpoint, or configurable.fork_task_id); the fields a user may edit: {editable}"
        )


def refuse_no_task(thread_id: str, values: Any, events: int) -> None:
    """Refuse an edit of a thread that holds no task: no checkpoint, and no events of its id.

    A whole new task for the thread (``graphs.new_task(request, thread_id)``) is not an edit and passes.

    Args:
        thread_id: The thread.
        values: The values given to ``update_state``.
        events: How many events the log holds for the thread's id.

    Raises:
        InvalidInputError: The thread holds no task and ``values`` is not one for it.
    """
    ident = values.get("identity") if isinstance(values, dict) else getattr(values, "identity", None)
    owner = ident.get("task_id") if isinstance(ident, dict) else getattr(ident, "task_id", None)
    if events or owner == thread_id:
        return
    raise InvalidInputError(
        f"update_state: thread {thread_id!r} holds no task (no checkpoint, no events), so there is nothing to "
        f"edit and nothing was written; start a task on it with invoke(graphs.new_task(request, {thread_id!r}), "
        "config), then edit it"
    )
