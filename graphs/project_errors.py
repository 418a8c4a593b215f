"""The errors of a project's task lookups: a task the database cannot rebuild or resume."""

from __future__ import annotations

from context import DamagedStoreError, InvalidInputError, UnknownTaskError

__all__ = ["NoCheckpointError", "ServerTaskError", "UnregisteredTaskError"]


class UnregisteredTaskError(UnknownTaskError):
    """A task with events but no registry row: its graph cannot be rebuilt from the database.

    Attributes:
        task_id: The task.
        path: The database (a URL without its password).
        events: How many events its log holds.
    """

    def __init__(self, task_id: str, path: str, events: int):
        """Say what the database holds of ``task_id``."""
        super().__init__(
            f"task {task_id!r} in {path} has {events} events but no task registry row: it was run through the "
            "Python API, not a taskctx command (or its registry row was lost), so its graph cannot be rebuilt; "
            "continue it with Project.resume(task_id, graph=...), or inspect it"
        )
        self.task_id, self.path, self.events = task_id, path, events


class NoCheckpointError(DamagedStoreError):
    """A registered task with events but no checkpoint: it can be inspected, not resumed.

    Attributes:
        events: How many events its log holds.
        path: The database (a URL without its password).
    """

    def __init__(self, task_id: str, path: str, events: int):
        """Say what the database holds of ``task_id``."""
        message = (
            f"task {task_id!r} has {events} events in {path} but no checkpoint (the checkpoint tables were emptied "
            "or restored from an older backup), so it cannot be resumed; its log can still be inspected; restore "
            "the database from a backup, or start the task again under a new task id"
        )
        super().__init__(message, task_id=task_id, inspectable=True)
        self.events, self.path = events, path


class ServerTaskError(InvalidInputError):
    """A task LangGraph Server runs, resumed from the database: its checkpoints are the Server's.

    Nothing is damaged: the database holds its event log, artifacts and registry row, and the
    Server's checkpointer its checkpoints.

    Attributes:
        task_id: The task (the Server's thread id).
        path: The database (a URL without its password).
    """

    def __init__(self, task_id: str, path: str):
        """Say where the task's checkpoints are and how to go on."""
        super().__init__(
            f"task {task_id!r} runs on LangGraph Server: its checkpoints are the Server's, not in {path}, so it is "
            "not resumed from here; continue it through the Server (client.runs.wait(thread_id, 'taskctx', "
            "input=None), or command={'resume': ...} when it waits for an approval), or fork it here to run it "
            f"with taskctx (taskctx fork {task_id} --at-step N); its log can be inspected"
        )
        self.task_id, self.path = task_id, path
