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
    │   ├── DamagedStoreError      what was read back fails its checks (rows missing, bytes
    │   │                          that do not match their hash, a checkpoint the log disagrees with)
    │   └── ArtifactNotFoundError  an ``artifact://`` ref that is not stored
    ├── InvalidRefError            an artifact ref that does not parse
    └── BudgetError                required blocks alone exceed the token budget
"""

from __future__ import annotations

__all__ = [
    "ArtifactNotFoundError",
    "BudgetError",
    "DamagedStoreError",
    "InvalidInputError",
    "InvalidRefError",
    "LogAheadError",
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


class DamagedStoreError(StoreError):
    """Data read back from a store fails a check: an event sequence with a gap, an unknown kind
    or a payload its kind does not allow, artifact bytes that do not match their content hash, a
    registry row that is not JSON, a checkpoint the event log does not give back. The message
    says what is damaged, where, and what to do; ``problems`` lists every finding."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems or [message])


class ArtifactNotFoundError(StoreError):
    """An artifact ref whose content is not in the store."""


class InvalidRefError(TaskctxError):
    """A string that is not a valid ``artifact://sha256:<hex>[#L<a>-<b>]`` ref."""


class BudgetError(TaskctxError):
    """The required blocks alone do not fit the token budget."""
