"""The ``--budget`` and ``--budget-cap`` options of ``taskctx replay``, ``run`` and ``resume``.

``--budget`` is a number of tokens (at least the answer's reserve) or ``auto``: the model's
context window from its profile, capped by ``--budget-cap`` (:func:`nodes.auto_budget`). A resume
resolves ``auto`` from the model its task was started with (its registry row).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from context import InvalidInputError, load_trajectory
from nodes.chat_models import AUTO_BUDGET_CAP
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

from .core import fail

__all__ = ["BudgetCapOpt", "BudgetOpt", "budget_cap_of", "budget_floor", "budget_tokens", "task_model"]

_WHOLE = re.compile(r"[+-]?\d+")


def budget_floor(value: str | int | None) -> str | int | None:
    """Check ``--budget`` while the options are parsed: tokens, at least the answer's reserve, or ``auto``.

    Args:
        value: The budget in tokens, or ``auto`` (None: not given).

    Returns:
        ``value`` (text: ``"8000"``, ``"auto"``), or None.

    Raises:
        typer.Exit: Neither a whole number nor ``auto``, or below ``nodes.DEFAULT_RESERVE``
            tokens (one line, code 2).
    """
    if value is None:
        return None
    text = str(value).strip()
    if text == "auto":
        return text
    if not _WHOLE.fullmatch(text):
        fail(
            f"--budget {text} is neither a number of tokens nor auto; pass --budget {DEFAULT_BUDGET} (tokens) or "
            "--budget auto (the model's context window, capped by --budget-cap)"
        )
    if int(text) < DEFAULT_RESERVE:
        fail(
            f"--budget {text} is below the minimum, {DEFAULT_RESERVE} tokens (the reserve for the model's answer); "
            f"pass at least --budget {DEFAULT_RESERVE} and the task says the budget it needs at its start "
            f"(the default is {DEFAULT_BUDGET}; --budget auto takes the model's context window)"
        )
    return str(int(text))


def budget_cap_of(budget: str | None, cap: int | None, *, resume: bool = False) -> int:
    """The cost target of ``--budget auto``; ``--budget-cap`` without ``auto`` is refused.

    Args:
        budget: What :func:`budget_floor` returned (None: no ``--budget`` given).
        cap: ``--budget-cap`` in tokens (None: not given).
        resume: For ``resume`` (no ``--budget`` keeps the task's budget, not the default).

    Returns:
        ``cap``, or ``nodes.AUTO_BUDGET_CAP`` tokens when not given.

    Raises:
        typer.Exit: ``--budget-cap`` given with a budget that is not ``auto`` (one line, code 2).
    """
    if cap is not None and budget != "auto":
        kept = "the task's own budget" if resume else f"the default, {DEFAULT_BUDGET} tokens"
        said = f"--budget {budget}" if budget is not None else f"no --budget (so {kept})"
        fail(
            f"--budget-cap {cap} is the cost target of --budget auto, and this command has {said}, so it would "
            f"be ignored; pass --budget auto --budget-cap {cap}, or drop --budget-cap"
        )
    return AUTO_BUDGET_CAP if cap is None else cap


def budget_tokens(value: str, model: Any, cap: int) -> int:
    """The budget of ``--budget`` in tokens: the number given, or the model's for ``auto``.

    Args:
        value: What :func:`budget_floor` returned (``"8000"``, ``"auto"``).
        model: The chat model the task runs with (its profile names its window).
        cap: ``--budget-cap``, the cost target of ``auto`` (tokens per call).

    Returns:
        The budget in tokens.

    Raises:
        ModelConfigError: ``auto`` and the model's profile names no context window.
    """
    if value != "auto":
        return int(value)
    from nodes import auto_budget

    return auto_budget(model, reserve_for_output=DEFAULT_RESERVE, cap=cap)


def task_model(task_id: str, spec: dict[str, Any]) -> Any:
    """The chat model a task was started with, from its registry row (for ``resume --budget auto``).

    Args:
        task_id: The task.
        spec: Its registry row: a ``run`` task's ``model``, a ``replay`` task's ``source``.

    Returns:
        The chat model (not called).

    Raises:
        InvalidInputError: The task's kind names no model here (a demo or custom kind).
        ModelConfigError: The ``run`` task's model spec cannot be resolved.
    """
    kind = spec.get("kind")
    if kind == "run" and spec.get("model"):
        from nodes import resolve_model

        return resolve_model(str(spec["model"]))
    if kind == "replay" and spec.get("source"):
        from nodes import ReplayChatModel

        return ReplayChatModel(trajectory=load_trajectory(str(spec["source"])))
    raise InvalidInputError(
        f"--budget auto needs the model task {task_id!r} runs with, and its kind {kind!r} names none here "
        f"(auto works for run and replay tasks); pass --budget N in tokens (the default is {DEFAULT_BUDGET})"
    )


BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        callback=budget_floor,
        help=f"Prompt budget in tokens (at least the {DEFAULT_RESERVE} reserved for the answer), or auto: the "
        f"model's context window from its profile, capped by --budget-cap; default {DEFAULT_BUDGET}.",
    ),
]


BudgetCapOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-cap",
        min=DEFAULT_RESERVE + 1,
        help=f"The cost target of --budget auto (only with it): the most tokens one call may take (prompt and "
        f"answer; default {AUTO_BUDGET_CAP}).",
    ),
]
