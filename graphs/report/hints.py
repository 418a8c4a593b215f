"""The ``taskctx`` command lines that messages and views suggest, and the CLI's line for damage.

The library raises errors that carry data (a task id, what is damaged, whether ``inspect`` can
still show it) and say what to do in words; the command line, the HTML report and the text
views name the commands, with the ``--db`` and ``--out`` in use, from here.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from context import DamagedStoreError
from context.pg_store import redact_url

from ..project import DEFAULT_DB, DEFAULT_OUT

__all__ = ["ARTIFACT_HINT", "REPAIR_HINT", "command_hint", "damage_line", "repair_hint"]

#: What to do about a damaged task (``{doctor}``: the doctor command line to name).
REPAIR_HINT = (
    "run `{doctor}` for every finding; restore the database from a backup, or start the "
    "task again under a new --task-id"
)
#: What to do about a damaged artifact (``{doctor}``: the doctor command line to name).
ARTIFACT_HINT = "restore the database from a backup (`{doctor}` lists every damaged artifact)"


def command_hint(
    command: str, task_id: str | None, db: str | Path = DEFAULT_DB, out: str | Path | None = None, *extra: str
) -> str:
    """The ``taskctx`` command line a message suggests, quoted for a POSIX shell.

    Args:
        command: The subcommand, e.g. ``"resume"``.
        task_id: Its task argument; None for a command that takes none (``demo``).
        db: The database; named as ``--db DB`` (a URL without its password) unless it is
            :data:`~graphs.project.DEFAULT_DB`.
        out: The export folder; named as ``--out OUT`` unless None (the command takes no
            ``--out``) or :data:`~graphs.project.DEFAULT_OUT`.
        *extra: Words put after the task id, as given (e.g. ``"--budget", "2261"``).

    Returns:
        The line, e.g. ``taskctx resume t1 --budget 2261 --db x.sqlite --out runs``.
    """
    words = ["taskctx", command, *([task_id] if task_id is not None else []), *extra]
    if str(db) != DEFAULT_DB:
        words += ["--db", redact_url(str(db))]
    if out is not None and Path(out) != DEFAULT_OUT:
        words += ["--out", str(out)]
    return shlex.join(words)


def repair_hint(task_id: str, inspectable: bool | None = None, db: str | Path = DEFAULT_DB) -> str:
    """What to do about damage to a task, naming ``taskctx doctor`` (and ``inspect`` when it works).

    Args:
        task_id: The damaged task.
        inspectable: Whether ``taskctx inspect`` still shows the task (None: not known, not said).
        db: The database the commands name (``--db`` when not the default).

    Returns:
        :data:`REPAIR_HINT` with the doctor command, then what ``inspect`` can still do.
    """
    hint = REPAIR_HINT.format(doctor=command_hint("doctor", task_id, db))
    if inspectable is True:
        hint += f"; `{command_hint('inspect', task_id, db)}` still shows what can be read"
    elif inspectable is False:
        hint += "; inspect cannot show it either"
    return hint


def damage_line(exc: DamagedStoreError, db: str | Path = DEFAULT_DB) -> str:
    """The one line the CLI prints for a damaged store: the damage, then the commands that help.

    Args:
        exc: The error; its ``what``, ``task_id`` and ``inspectable`` are used.
        db: The database the commands name.

    Returns:
        ``exc.what`` and :func:`repair_hint` (for a damaged artifact, :data:`ARTIFACT_HINT`);
        ``str(exc)`` when the error carries nothing beyond its message.
    """
    if exc.what == str(exc):  # nothing but the damage: nothing to name
        return str(exc)
    if exc.task_id is None:  # an artifact: doctor checks every task's
        return f"{exc.what}; {ARTIFACT_HINT.format(doctor=command_hint('doctor', None, db))}"
    return f"{exc.what}; {repair_hint(exc.task_id, exc.inspectable, db)}"
