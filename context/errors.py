"""Errors raised by taskctx.

Every error names the thing that is wrong and the fix. The tree::

    TaskctxError
    ├── InvalidInputError          bad input from a user or a file
    │   ├── TrajectoryError        a recorded trajectory is missing or malformed
    │   ├── UnknownTaskError       no task with that id in the event log
    │   └── ModelConfigError       a model string that cannot be resolved
    ├── StoreError                 the event log or artifact store cannot be used
    │   ├── StoreOpenError         the database cannot be opened or created
    │   ├── SequenceConflictError  an append would break the per-task sequence
    │   ├── LogAheadError          the log holds events a checkpoint does not know (a fork)
    │   └── ArtifactNotFoundError  an ``artifact://`` ref that is not stored
    ├── InvalidRefError            an artifact ref that does not parse
    ├── BudgetError                required blocks alone exceed the token budget
    └── ModelCallError             the model provider failed a call (after the client's retries)
        └── ContextLengthError     the provider refused the prompt as too long for the model
"""

from __future__ import annotations

__all__ = [
    "ArtifactNotFoundError",
    "BudgetError",
    "InvalidInputError",
    "InvalidRefError",
    "LogAheadError",
    "ModelCallError",
    "ContextLengthError",
    "ModelConfigError",
    "SequenceConflictError",
    "StoreError",
    "StoreOpenError",
    "TaskctxError",
    "TrajectoryError",
    "UnknownTaskError",
]


class TaskctxError(Exception):
    """Base of every error taskctx raises on purpose."""


class InvalidInputError(TaskctxError):
    """Input from a user or a file is wrong; the message says how to fix it."""


class TrajectoryError(InvalidInputError):
    """A recorded trajectory file is missing or malformed."""


class UnknownTaskError(InvalidInputError):
    """No task with this id has been recorded."""


class ModelConfigError(InvalidInputError):
    """A ``provider:model`` string cannot be turned into a chat model."""


class StoreError(TaskctxError):
    """The event log or the artifact store cannot be used."""


class StoreOpenError(StoreError):
    """The database file or URL cannot be opened."""


class SequenceConflictError(StoreError):
    """An append whose first sequence number does not follow the log's last one."""


class LogAheadError(StoreError):
    """A node started from a checkpoint older than the task's event log (time travel / a fork):
    the log is append-only per task, so only the latest checkpoint can be continued."""


class ArtifactNotFoundError(StoreError):
    """An artifact ref whose content is not in the store."""


class InvalidRefError(TaskctxError):
    """A string that is not a valid ``artifact://sha256:<hex>[#L<a>-<b>]`` ref."""


class BudgetError(TaskctxError):
    """The required blocks alone do not fit the token budget."""


class ModelCallError(TaskctxError):
    """A model call failed at the provider, after the client's own retries: ``cause`` is one
    line naming it (``authentication failed (401): ...``, ``timed out after 60 s``...),
    ``status`` the HTTP status (``None`` for a connection failure or a timeout). Nothing of
    the failed call is recorded, so ``taskctx resume`` repeats it."""

    def __init__(self, cause: str, *, status: int | None = None, role: str | None = None) -> None:
        super().__init__(f"{role} model call failed: {cause}" if role else f"model call failed: {cause}")
        self.cause = cause
        self.status = status
        self.role = role


class ContextLengthError(ModelCallError):
    """The provider refused the prompt as longer than the model's context window."""
