"""Secrets the agent uses but never sees: the values a run holds, sealed as placeholders everywhere.

A secret the user gives for a task (``--secret NAME``, ``Project.run(secrets=...)``, or found in
the request by the detector of :mod:`context.secrets`) is *held* by the process for the run
(:func:`hold_secrets`): never written anywhere. While held, :func:`context.secrets.mask_secrets`
(the one masking pass of the stores, exports and traces) first replaces each of its values by its
placeholder ``{{secret:NAME}}`` (:func:`seal_secrets`), so the log, the artifacts, every prompt,
export, trace and ``inspect`` show the placeholder. A tool's arguments get the values back at
execution time only (:func:`reveal_secrets`), and what the tool returns is sealed again by the
store. A value is found as written, and also broken across lines (a tool that wraps its output),
and with the bytes that are not UTF-8 read as U+FFFD (a tool output decoded with ``replace``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .errors import InvalidInputError

__all__ = [
    "MIN_SECRET_CHARS",
    "PLACEHOLDER_FORMAT",
    "MissingSecretError",
    "check_secret",
    "held_spans",
    "hold_secrets",
    "in_placeholder",
    "placeholder",
    "placeholder_names",
    "reveal_secrets",
    "seal_secrets",
    "secret_note",
    "task_secrets",
]

#: How a secret is shown wherever it would be stored or shown.
PLACEHOLDER_FORMAT = "{{{{secret:{name}}}}}"
#: The shortest value held: a shorter one would be sealed wherever its characters occur.
MIN_SECRET_CHARS = 4
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PLACEHOLDER = re.compile(r"\{\{secret:([A-Za-z_][A-Za-z0-9_]{0,63})\}\}")


class MissingSecretError(InvalidInputError):
    """A task uses a secret whose value this run was not given (taskctx never stores one)."""


_lock = threading.Lock()
_held: dict[str, str] = {}  # name -> value, while a run holds it
_count: dict[str, int] = {}  # name -> how many holders
_pattern: list[re.Pattern[str] | None] = [None]  # the held values, longest first (None: none held)
_by_form: dict[str, str] = {}  # every form of a value (as written, U+FFFD for non-UTF-8) -> name


def placeholder(name: str) -> str:
    """The placeholder of a secret.

    Args:
        name: The secret's name (letters, digits, ``_``; not starting with a digit).

    Returns:
        ``{{secret:NAME}}``.
    """
    return PLACEHOLDER_FORMAT.format(name=name)


def placeholder_names(text: str) -> list[str]:
    """The names of the placeholders in a text, in first-seen order, each once.

    Args:
        text: Any text.

    Returns:
        The names.
    """
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(text)))


def in_placeholder(text: str, start: int, end: int) -> bool:
    """Whether the span ``[start, end)`` of ``text`` overlaps a placeholder (which is never masked).

    Args:
        text: The text.
        start: First character offset.
        end: Offset past the last character.

    Returns:
        True when a ``{{secret:NAME}}`` overlaps the span.
    """
    if "{{secret:" not in text:
        return False
    lo = max(0, start - 80)
    return any(m.start() + lo < end and m.end() + lo > start for m in _PLACEHOLDER.finditer(text[lo : end + 80]))


def _forms(value: str) -> list[str]:
    """The forms a value is sealed in: as written, and with each lone surrogate (a byte that is not UTF-8) as U+FFFD."""
    out = [value]
    replaced = re.sub(r"[\ud800-\udfff]", "\ufffd", value)
    if replaced != value:
        out.append(replaced)
    return out


def _compile() -> None:
    """Rebuild the pattern of the held values (called with the lock held)."""
    _by_form.clear()
    for name, value in _held.items():
        for form in _forms(value):
            _by_form.setdefault(form, name)
    if not _by_form:
        _pattern[0] = None
        return
    # each character of a value may be followed by a line break (a wrapped line); longest first
    alts = [r"(?:\r?\n)?".join(re.escape(c) for c in form) for form in sorted(_by_form, key=len, reverse=True)]
    _pattern[0] = re.compile("|".join(alts))


def check_secret(name: str, value: str | None = None) -> None:
    """Refuse a secret whose name is not valid or whose value is too short to seal safely.

    Args:
        name: The name.
        value: The value (None: check the name only, before the value is looked up).

    Raises:
        InvalidInputError: Named, with the fix.
    """
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            f"secret name {name!r} is not valid: use letters, digits and _ (not starting with a digit), "
            "up to 64 characters, e.g. DB_PASSWORD"
        )
    if value is None:
        return
    if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_CHARS:
        raise InvalidInputError(
            f"secret {name} is shorter than {MIN_SECRET_CHARS} characters: it would be sealed wherever those "
            "characters occur; give the whole secret"
        )


@contextmanager
def hold_secrets(secrets: Mapping[str, str]) -> Iterator[None]:
    """Hold secrets in this process for a run: while held, every masking pass seals their values.

    Args:
        secrets: Name -> value (the value as the tools need it).

    Yields:
        Nothing; on exit the values are dropped (unless another holder holds the same name).

    Raises:
        InvalidInputError: A name is not valid, a value is too short, or another run of this
            process holds the name with another value.
    """
    items = dict(secrets)
    for name, value in items.items():
        check_secret(name, value)
    with _lock:
        for name, value in items.items():
            if name in _held and _held[name] != value:
                raise InvalidInputError(
                    f"secret {name} is held by another run of this process with another value; give it another name"
                )
        for name, value in items.items():
            _held[name] = value
            _count[name] = _count.get(name, 0) + 1
        _compile()
    try:
        yield
    finally:
        with _lock:
            for name in items:
                _count[name] -= 1
                if not _count[name]:
                    del _count[name], _held[name]
            _compile()


def held_spans(text: str) -> list[tuple[int, int]]:
    """Where held values occur in a text (a cut inside one splits a secret).

    Args:
        text: Any text.

    Returns:
        ``(start, end)`` character offsets, in order.
    """
    pat = _pattern[0]
    return [] if pat is None else [m.span() for m in pat.finditer(text)]


def seal_secrets(text: str) -> tuple[str, int]:
    """Replace every held value in a text by its placeholder (the line breaks inside it kept after it).

    Args:
        text: Any text.

    Returns:
        The sealed text and the number of values sealed.
    """
    pat = _pattern[0]
    if pat is None:
        return text, 0
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        found = m.group(0)
        bare = found.replace("\r", "").replace("\n", "")
        name = _by_form.get(bare)
        if name is None:  # (the pattern changed under us: another run let go of it)
            return found
        count += 1
        return placeholder(name) + "".join(c for c in found if c in "\r\n")

    return pat.sub(repl, text), count


def reveal_secrets(obj: Any, names: Collection[str] | None = None) -> Any:
    """A tool's arguments with every placeholder replaced by the held value: at execution time only.

    Args:
        obj: Dicts, lists, strings, numbers (dict keys are left as they are).
        names: The secrets the task uses (:func:`task_secrets`): another run's held secret is
            not this task's to use (None: every held one).

    Returns:
        ``obj`` with the values in place of their placeholders.

    Raises:
        MissingSecretError: A placeholder names a secret this run does not hold, or one not in
            ``names``.
    """
    if isinstance(obj, str):
        if "{{secret:" not in obj:
            return obj

        def repl(m: re.Match[str]) -> str:
            value = _held.get(m.group(1)) if names is None or m.group(1) in names else None
            if value is None:
                known = ", ".join(sorted(_held if names is None else set(names) & set(_held))) or "none"
                raise MissingSecretError(
                    f"the arguments name the secret {m.group(1)}, which this task was not given (its secrets: "
                    f"{known}); use one of those placeholders, or give the task the secret (--secret {m.group(1)})"
                )
            return value

        return _PLACEHOLDER.sub(repl, obj)
    if isinstance(obj, dict):
        return {k: reveal_secrets(v, names) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(reveal_secrets(v, names) for v in obj)
    return obj


def task_secrets(request: str, constraints: Iterable[str] = (), criteria: Iterable[str] = ()) -> list[str]:
    """The secrets a task uses: the placeholders of its request, constraints and criteria.

    Args:
        request: The task's request, as recorded.
        constraints: Its hard constraints.
        criteria: Its success criteria.

    Returns:
        The names, in first-seen order.
    """
    return placeholder_names("\n".join([request, *constraints, *criteria]))


def secret_note(name: str) -> str:
    """The constraint that tells the agent a secret is there to use: how to write it, not its value.

    Args:
        name: The secret's name.

    Returns:
        The constraint's text (it names the placeholder; a resume finds the task's secrets by it).
    """
    return (
        f"The secret {name} is given for this task: write {placeholder(name)} in a tool's arguments where its "
        "value belongs (the tool gets the value; it is never shown)."
    )
