"""Which model calls a check looks at: a run's ``context.built`` events, numbered per role and filtered."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from context import Event

from .finished import FinishedRun

__all__ = ["CallsSel", "CheckModel", "ModelCall", "SelectingCheck", "model_calls", "prompt_of", "select_calls", "where"]


class CheckModel(BaseModel):
    """The base of every check kind's model (unknown fields are an error)."""

    model_config = ConfigDict(extra="forbid")


CallsSel = Literal["all", "first", "last", "after_first_reset"] | list[int]


class SelectingCheck(CheckModel):
    """The model calls a check looks at (the fields every selecting check kind shares)."""

    #: Whose model calls: a role, or ``*`` for every role.
    role: str = "executor"
    #: ``all``, ``first``, ``last``, ``after_first_reset`` or role-call numbers (1-based, negative from the end).
    calls: CallsSel = "all"
    #: Only calls made after at least this many tool results.
    min_steps: int = 0
    #: Only calls made after the first injected event (see ``inject``).
    after_inject: bool = False
    #: Only calls made before the event of this kind (first occurrence), e.g. ``permission.granted``.
    before_event: str | None = None


@dataclass
class ModelCall:
    """One model call of a run: its ``context.built`` event and where it was.

    Attributes:
        event: The ``context.built`` event.
        role: The role that called.
        role_call: Its call number for that role (1-based).
        steps_before: Tool results before it.
        reset: Whether it restarted the executor's transcript.
    """

    event: Event
    role: str
    role_call: int
    steps_before: int
    reset: bool


def model_calls(run: FinishedRun) -> list[ModelCall]:
    """Every model call of a run, numbered per role.

    Args:
        run: The finished run.

    Returns:
        The calls, in order.
    """
    out: list[ModelCall] = []
    steps = 0
    per_role: Counter[str] = Counter()
    for e in run.events:
        if e.kind == "tool.result.received":
            steps += 1
        elif e.kind == "context.built":
            role = e.payload["role"]
            per_role[role] += 1
            out.append(ModelCall(e, role, per_role[role], steps, bool(e.payload.get("transcript_reset"))))
    return out


def select_calls(run: FinishedRun, sel: SelectingCheck) -> list[ModelCall]:
    """The model calls a selecting check looks at.

    Args:
        run: The finished run.
        sel: The check's selection fields.

    Returns:
        The calls selected, in order.
    """
    calls = [c for c in model_calls(run) if sel.role == "*" or c.role == sel.role]
    if sel.min_steps:
        calls = [c for c in calls if c.steps_before >= sel.min_steps]
    if sel.after_inject:
        calls = [c for c in calls if run.inject_seq is not None and c.event.seq > run.inject_seq]
    if sel.before_event:
        first = next((e.seq for e in run.events if e.kind == sel.before_event), None)
        if first is not None:
            calls = [c for c in calls if c.event.seq < first]
    if sel.calls == "all":
        return calls
    if sel.calls == "first":
        return calls[:1]
    if sel.calls == "last":
        return calls[-1:]
    if sel.calls == "after_first_reset":
        idx = next((i for i, c in enumerate(calls) if c.reset), None)
        return [] if idx is None else calls[idx:]
    by_n = {c.role_call: c for c in calls}
    n = len(calls)
    out = []
    for k in sel.calls:
        c = by_n.get(k) if k > 0 else (calls[n + k] if -n <= k < 0 else None)
        if c is not None:
            out.append(c)
    return out


def prompt_of(run: FinishedRun, c: ModelCall) -> str:
    """The prompt a model call stored (read once per run).

    Args:
        run: The finished run.
        c: The call.

    Returns:
        The prompt text, ``""`` when the call stored none.
    """
    ref = c.event.payload.get("prompt_ref")
    if not ref:
        return ""
    if ref not in run.prompts:
        run.prompts[ref] = run.stores.artifacts.get(ref).decode("utf-8")
    return run.prompts[ref]


def where(c: ModelCall) -> str:
    """Where a call was, for a failure line: ``<role> call <n> (after <k> tool results)``.

    Args:
        c: The call.

    Returns:
        The text.
    """
    return f"{c.role} call {c.role_call} (after {c.steps_before} tool results)"
