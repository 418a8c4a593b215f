"""A finished case run: what the harness leaves behind and the checks read."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

from context import Event, SqliteStores, TaskContext
from context.pg_store import PgStores

from ..project import Project

__all__ = ["FinishedRun"]


@dataclass
class FinishedRun:
    """One case run after its last segment, with the stores it ran on (still open).

    Attributes:
        case_id: The case's id (also its task id).
        reserve_for_output: The case's ``reserve_for_output`` (tokens), for the budget checks.
        events: The task's event log, in order.
        state: The final TaskContext (the checkpointed state, else the log folded).
        prompts: Prompt texts read so far, by artifact ref (filled by the checks).
        executed: The call ids the scripted tools really ran, in order.
        raw: The raw output of each call that ran, by call id.
        stores: The run's event log and artifact store.
        checkpoints: Checkpoints saved in the task's thread.
        inject_seq: The sequence number of the first injected event, or None.
        run_error: Why the run stopped short (``Type: message``), or None.
        project: The project the stores belong to (closed after the checks).
        tmp: The run's temporary folder (removed after the checks).
    """

    case_id: str
    reserve_for_output: int
    events: list[Event]
    state: TaskContext
    prompts: dict[str, str]
    executed: list[str]
    raw: dict[str, str]
    stores: SqliteStores | PgStores
    checkpoints: int
    inject_seq: int | None
    run_error: str | None
    project: Project
    tmp: tempfile.TemporaryDirectory[str]
