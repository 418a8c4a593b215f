"""Where a task's secrets come from: ``--secret NAME`` (the environment), ``NAME=@FILE``, or the API.

taskctx never writes a secret's value (:mod:`context.held_secrets`): a run holds it, and a resume
takes it again, given (``--secret``, ``Project.resume(secrets=...)``) or from the environment
variable of its name. The names a task uses are its placeholders in the request and constraints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from context import InvalidInputError, TaskContext
from context.held_secrets import MissingSecretError, check_secret, task_secrets

__all__ = ["parse_secret_options", "read_secret_file", "secrets_to_resume", "task_secret_names"]


def read_secret_file(path: str | Path) -> str:
    """A secret's value from a file: its bytes (not UTF-8 ones kept, ``surrogateescape``), one final newline dropped.

    Args:
        path: The file.

    Returns:
        The value.

    Raises:
        InvalidInputError: The file cannot be read.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInputError(
            f"secret file {path} cannot be read ({exc.strerror or exc}); pass a readable file"
        ) from exc
    text = data.decode("utf-8", "surrogateescape")
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def parse_secret_options(options: list[str] | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secrets of ``--secret`` options: ``NAME`` (the environment variable NAME) or ``NAME=@FILE``.

    Args:
        options: The options' values.
        environ: The environment (default ``os.environ``).

    Returns:
        Name -> value.

    Raises:
        InvalidInputError: A name is not valid (checked first), a variable is not set, a file cannot
            be read, or a value is written on the command line (it would be in the shell's history
            and the process list).
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for opt in options or []:
        name, sep, source = opt.partition("=")
        try:
            check_secret(name)  # the name first: a name no secret can have is no variable to look up
        except InvalidInputError as exc:
            raise InvalidInputError(f"--secret {name}: {exc}") from None
        if not sep:
            if name not in env:
                raise InvalidInputError(
                    f"--secret {name}: the environment variable {name} is not set; set it, or pass --secret {name}=@FILE"
                )
            out[name] = env[name]
        elif source.startswith("@"):
            out[name] = read_secret_file(source[1:])
        else:
            raise InvalidInputError(
                f"--secret {name}=...: a value on the command line would be kept in the shell's history and shown "
                f"in the process list; pass --secret {name} (from the environment variable {name}) or "
                f"--secret {name}=@FILE"
            )
    return out


def task_secret_names(ctx: TaskContext) -> list[str]:
    """The secrets a task uses: the placeholders of its request, constraints and criteria.

    Args:
        ctx: The task's state.

    Returns:
        The names, in first-seen order.
    """
    ident = ctx.identity
    return task_secrets(ident.original_request, ident.constraints, ident.success_criteria)


def secrets_to_resume(
    ctx: TaskContext, given: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The values a resume of a task holds: each of its secrets given, else from the environment variable of its name.

    Args:
        ctx: The task's state.
        given: Name -> value given for the resume.
        environ: The environment (default ``os.environ``).

    Returns:
        Name -> value of every secret the task uses (given ones it does not use too).

    Raises:
        MissingSecretError: A secret the task uses has no value (named, with the fix).
    """
    env = os.environ if environ is None else environ
    out = dict(given or {})
    missing = []
    for name in task_secret_names(ctx):
        if name in out:
            continue
        if name in env:
            out[name] = env[name]
        else:
            missing.append(name)
    if missing:
        raise MissingSecretError(_missing_message(ctx.identity.task_id, missing))
    return out


def _missing_message(task_id: str, missing: list[str]) -> str:
    """What a resume lacking secrets says: the names, in the singular or the plural, and the fix."""
    opts = " ".join(f"--secret {n}" for n in missing)
    if len(missing) == 1:
        (name,) = missing
        return (
            f"task {task_id} uses the secret {name}, whose value taskctx never stores; set the environment "
            f"variable {name}, or pass {opts} (from the environment) or --secret {name}=@FILE "
            "(API: resume(..., secrets={...}))"
        )
    names = ", ".join(missing[:-1]) + f" and {missing[-1]}"
    return (
        f"task {task_id} uses the secrets {names}, whose values taskctx never stores; set the environment "
        f"variables {names}, or pass {opts} (from the environment) or --secret NAME=@FILE for each "
        "(API: resume(..., secrets={...}))"
    )
