"""Errors raised by taskctx: :class:`TaskctxError` and below.

Every message names the thing that is wrong and the fix. Input errors (:class:`InvalidInputError`)
and store errors (:class:`StoreError`) have their own branches (the docs draw the whole tree).
"""

from __future__ import annotations

import os

__all__ = [
    "ArtifactNotFoundError",
    "BudgetError",
    "ContextLengthError",
    "DamagedStoreError",
    "InvalidInputError",
    "InvalidRefError",
    "LeaseHeldError",
    "LeaseLostError",
    "LogAheadError",
    "ModelCallError",
    "ModelConfigError",
    "NotTaskctxDatabaseError",
    "SequenceConflictError",
    "ServerLostError",
    "StoreError",
    "StoreOpenError",
    "TaskctxError",
    "TrajectoryError",
    "UnknownTaskError",
]


class TaskctxError(RuntimeError):
    """Base of every error taskctx raises on purpose.

    A ``RuntimeError`` (and :class:`InvalidInputError` a ``ValueError`` too): the exception kinds
    LangGraph Server passes to its client with their message, and that LangGraph's default
    ``RetryPolicy`` does not retry.
    """


class InvalidInputError(TaskctxError, ValueError):
    """Input from a user or a file is wrong; the message says how to fix it."""


class TrajectoryError(InvalidInputError):
    """A recorded trajectory file is missing or malformed."""


class UnknownTaskError(InvalidInputError):
    """No task with this id has been recorded."""


class ModelConfigError(InvalidInputError):
    """A ``provider:model`` string cannot be turned into a chat model."""


class StoreError(TaskctxError):
    """The event log or the artifact store cannot be used."""


class ServerLostError(StoreError):
    """The database server went away during a command (it stopped, or the network did).

    Everything recorded before is kept; the task continues with ``taskctx resume`` once the server
    is back. The message is one line naming the server, the cause and that command.
    """


class StoreOpenError(StoreError):
    """The database file or URL cannot be opened."""


class NotTaskctxDatabaseError(StoreOpenError):
    """A database opened read-only (``inspect``, ``list``, ``report``) holds no taskctx tables."""


class SequenceConflictError(StoreError):
    """An append whose first sequence number does not follow the log's last one."""


class LeaseHeldError(StoreError):
    """Another live run holds the task's lease (:mod:`context.lease`).

    The holder is another process, or this one: another run through the same store object (two
    runs of one task at once), or a run through another store object.

    Args:
        task_id: The task.
        holder: The holder in words (``pid 41 on host h (last heartbeat 3 s ago)``).
        pid: The holder's process id.
        host: The holder's host name.
        same_process: The holder is this process.
        same_store: The holder is another run of this process through the same store object.
    """

    def __init__(
        self,
        task_id: str,
        holder: str,
        *,
        pid: int = 0,
        host: str = "",
        same_process: bool = False,
        same_store: bool = False,
    ) -> None:
        if same_store:
            message = (
                f"task {task_id!r} is being run by another run in this process, {holder}: a task runs one run at a "
                "time; wait for the other run to end (await it, or join its thread), then resume the task"
            )
        elif same_process:
            message = (
                f"task {task_id!r} is being run by another run in this process, {holder}: each store object "
                "(SqliteStores, PgStores, open_project) takes the task's lease on its own; run the task through "
                "one store (one project), one run at a time, or wait for the other run to end"
            )
        else:
            message = (
                f"task {task_id!r} is being run by another process, {holder}; wait for it to end or stop it, "
                "then run the command again (a holder that ended is taken over at once)"
            )
        super().__init__(message)
        self.task_id, self.holder, self.pid, self.host = task_id, holder, pid, host
        self.same_process, self.same_store = same_process or same_store, same_store

    @property
    def by_whom(self) -> str:
        """``"another run in this process"`` or ``"another process"``."""
        return "another run in this process" if self.same_process else "another process"

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only fields survive pickling
        return (_lease_held_error, (self.task_id, self.holder, self.pid, self.host, self.same_process, self.same_store))


def _lease_held_error(
    task_id: str, holder: str, pid: int, host: str, same_process: bool = False, same_store: bool = False
) -> LeaseHeldError:
    return LeaseHeldError(task_id, holder, pid=pid, host=host, same_process=same_process, same_store=same_store)


class LeaseLostError(LeaseHeldError):
    """This process held the task's lease and lost it while running the task (:mod:`context.lease`).

    Another holder took the lease over (this process was thought gone: e.g. paused past the
    lease's expiry, as seen from another host), or the lease row was removed. The append that
    found it out was refused: what this process had recorded stays, and it wrote nothing after.

    Args:
        task_id: The task.
        holder: The holder now in words; ``""`` when no one holds it (the row was removed).
        pid: The new holder's process id (0: none).
        host: The new holder's host name (``""``: none).
        seq: The last event this process appended under the lease (0: none).
        kind: That event's kind.
        step: The last plan step those events named (``""``: none).
    """

    def __init__(
        self, task_id: str, holder: str, *, pid: int = 0, host: str = "", seq: int = 0, kind: str = "", step: str = ""
    ) -> None:
        super().__init__(task_id, holder, pid=pid, host=host)
        self.seq, self.kind, self.step, self.lost_by = seq, kind, step, os.getpid()
        self.args = (f"{self.what}; {self.next_step}",)

    @property
    def what(self) -> str:
        """What happened and what is recorded, without the next step (the CLI adds its own)."""
        now = f"{self.holder} has the task now" if self.holder else "no one holds it now (its lease row was removed)"
        if self.seq:
            step = f", plan step {self.step}" if self.step else ""
            kept = f"what it recorded stays: events up to seq {self.seq} ({self.kind}{step})"
        else:
            kept = "it had recorded no event under this lease"
        return (
            f"task {self.task_id!r}: this process (pid {self.lost_by}) lost its lease on the task while running it: "
            f"{now}; {kept}; this process wrote no event after that (this append was refused)"
        )

    @property
    def next_step(self) -> str:
        """The Python caller's next step."""
        if self.holder:
            return "let the other holder go on with the task; when it has ended, resume the task to continue"
        return "resume the task to continue from what is recorded"

    def __reduce__(self) -> tuple[object, ...]:
        return (_lease_lost_error, (self.task_id, self.holder, self.pid, self.host, self.seq, self.kind, self.step))


def _lease_lost_error(task_id: str, holder: str, pid: int, host: str, seq: int, kind: str, step: str) -> LeaseLostError:
    return LeaseLostError(task_id, holder, pid=pid, host=host, seq=seq, kind=kind, step=step)


class LogAheadError(StoreError):
    """A node started from a checkpoint the task's event log has moved past.

    Either a node before it appended events without returning them as its state update (the
    message names that node and the fix), or the graph was started from an older checkpoint
    (time travel, a fork): the log is append-only per task, so only the latest checkpoint can be
    continued.
    """


class DamagedStoreError(StoreError):
    """Data read back from a store fails a check.

    An event sequence with a gap, an unknown kind or a payload its kind does not allow, artifact
    bytes that do not match their content hash, a registry row that is not JSON, a checkpoint the
    event log does not give back. The message says what is damaged, where, and what to do.

    Args:
        message: The whole message.
        problems: Every finding, one line each (default: the message).
        task_id: The damaged task, when the store knows it (``context.store.damaged``).
        what: The message without what to do, so a caller can name the commands with its own
            ``--db`` (``graphs.report.hints.damage_line``); default: the message.
        inspectable: Whether ``taskctx inspect`` can still show the task (None: not known).
    """

    def __init__(
        self,
        message: str,
        problems: list[str] | None = None,
        *,
        task_id: str | None = None,
        what: str | None = None,
        inspectable: bool | None = None,
    ):
        super().__init__(message)
        self.problems = list(problems or [message])
        self.task_id = task_id
        self.what = what if what is not None else message
        self.inspectable = inspectable


class ArtifactNotFoundError(StoreError):
    """An artifact ref whose content is not in the store."""


class InvalidRefError(TaskctxError):
    """A string that is not a valid ``artifact://sha256:<hex>[#L<a>-<b>]`` ref."""


class BudgetError(TaskctxError):
    """The required blocks alone do not fit the token budget.

    All counts are tokens, by the task's one counter (:mod:`context.tokens`); :attr:`minimum` =
    ``required + reserve`` is the smallest budget with which this call fits (0 for a
    ``BudgetError(msg)`` without the numbers).

    Args:
        message: The message (default: one built from the numbers).
        role: The role whose call it is ("" when unknown).
        task_id: The task ("" when unknown; with it the message says ``rerun with --budget N``).
        required: Tokens of the required blocks plus the fixed overhead of the call (system
            message, tool schemas, message framing).
        reserve: Tokens kept for the model's answer.
        budget: The budget that was too small (tokens).
        scope: ``"call"``: what one call needs; ``"task"``: what every call of the task needs
            with its required blocks degraded (checked at task start, before any side effect).
    """

    def __init__(
        self,
        message: str = "",
        *,
        role: str = "",
        task_id: str = "",
        required: int = 0,
        reserve: int = 0,
        budget: int = 0,
        scope: str = "call",
    ) -> None:
        self.role, self.task_id = role, task_id
        self.required, self.reserve, self.budget = required, reserve, budget
        self.scope = scope
        super().__init__(message or self._message())

    @property
    def minimum(self) -> int:
        """The smallest budget (tokens) with which the call fits: ``required + reserve``."""
        return self.required + self.reserve

    def _message(self) -> str:
        who = self.role or "prompt"
        n = self.minimum
        if self.scope == "task":
            task = f"task {self.task_id}" if self.task_id else "the task"
            return (
                f"{task} needs a budget of at least {n} tokens, refused at its start before any side effect: "
                f"its request and the floor of every {who} call, degraded, take {self.required} + reserve "
                f"{self.reserve}; the budget {self.budget} is too small, rerun with --budget {n} or more"
            )
        if self.task_id:
            return (
                f"{who} of task {self.task_id} needs at least {n} tokens: required blocks {self.required} + "
                f"reserve {self.reserve}; rerun with --budget {n} or more"
            )
        return (
            f"{who} needs at least {n} tokens: required blocks {self.required} + reserve {self.reserve}; "
            f"the budget {self.budget} is too small, raise it to {n} or more"
        )

    def for_task(self, task_id: str) -> BudgetError:
        """The same error naming a task.

        Args:
            task_id: The task.

        Returns:
            A new error whose message says ``rerun with --budget N``.
        """
        return BudgetError(
            role=self.role,
            task_id=task_id,
            required=self.required,
            reserve=self.reserve,
            budget=self.budget,
            scope=self.scope,
        )

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only fields survive pickling
        args = (str(self), self.role, self.task_id, self.required, self.reserve, self.budget, self.scope)
        return (_budget_error, args)


def _budget_error(
    message: str, role: str, task_id: str, required: int, reserve: int, budget: int, scope: str = "call"
) -> BudgetError:
    return BudgetError(
        message, role=role, task_id=task_id, required=required, reserve=reserve, budget=budget, scope=scope
    )


class ModelCallError(TaskctxError):
    """A model call failed at the provider, after the client's own retries.

    Nothing of the failed call is recorded, so ``taskctx resume`` repeats it.

    Args:
        cause: One line naming it (``authentication failed (401): ...``, ``timed out after 60
            s``...).
        status: The HTTP status (``None`` for a connection failure or a timeout).
        role: The role whose call failed (named in the message).
    """

    def __init__(self, cause: str, *, status: int | None = None, role: str | None = None) -> None:
        super().__init__(f"{role} model call failed: {cause}" if role else f"model call failed: {cause}")
        self.cause = cause
        self.status = status
        self.role = role

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only fields survive pickling
        return (_model_call_error, (type(self), self.cause, self.status, self.role))


def _model_call_error(cls: type[ModelCallError], cause: str, status: int | None, role: str | None) -> ModelCallError:
    return cls(cause, status=status, role=role)


class ContextLengthError(ModelCallError):
    """The provider refused the prompt as longer than the model's context window."""
