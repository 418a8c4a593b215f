"""Context policies: what the builder adds because a situation always needs it.

A model asks for what it knows it lacks; it cannot ask for what it does not know it lacks. A
:class:`ContextPolicy` is a small declarative rule: when the role, the step kind, the tools in
play and the recent events match, add the blocks of each relation in ``add`` (:data:`RELATIONS`).
Pure: this module only decides which relations a situation needs (the nodes resolve them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .models import TaskContext

__all__ = [
    "DEFAULT_POLICIES",
    "RELATIONS",
    "ContextPolicy",
    "Situation",
    "StepKind",
    "default_policies",
    "fired",
    "merge_policies",
    "situation",
    "step_kind",
]

StepKind = Literal["explore", "fix", "verify", "revisit", "recovery"]
#: The relations a policy may add: ``finding_evidence`` (the evidence of the findings in play),
#: ``latest_result:<tool>`` (the latest result of that tool; ``test``: the latest command that ran
#: tests), ``diff`` (the changes the task made), ``failing_error`` (the full output of the failing
#: call), ``last_checkpoint`` (the last good checkpoint and the state there), ``stale_facts``
#: (the facts the workspace no longer backs).
RELATIONS = ("finding_evidence", "latest_result:", "diff", "failing_error", "last_checkpoint", "stale_facts")
_VERIFY = re.compile(r"\b(verify|verifies|check|checks|confirm|confirms|re-check|recheck|validate|test)\b", re.I)
_WRITES = frozenset({"write_file", "apply_patch"})


class ContextPolicy(BaseModel):
    """One rule: when its conditions match, add the blocks of its relations.

    ``name``: the manifest reason is ``policy:<name>``; ``priority``: the added blocks' priority
    (``high``, ``normal`` or ``low``: never ``required``, so the budget may drop them);
    ``roles``, ``step_kinds``, ``tools``, ``events``: the conditions (empty: any); ``add``: the
    relations. A bad relation or priority raises ``pydantic.ValidationError`` naming it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    roles: tuple[str, ...] = ()
    step_kinds: tuple[StepKind, ...] = ()
    tools: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    add: tuple[str, ...] = Field(min_length=1)
    priority: Literal["high", "normal", "low"] = "high"
    description: str = ""

    @field_validator("add")
    @classmethod
    def _relations(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for r in v:
            if r not in RELATIONS and not (r.startswith("latest_result:") and len(r) > len("latest_result:")):
                raise ValueError(
                    f"unknown relation {r!r}; use one of finding_evidence, latest_result:<tool>, diff, "
                    "failing_error, last_checkpoint, stale_facts"
                )
        return v


class Situation(BaseModel):
    """What a policy's conditions are matched against.

    The role about to be prompted, the step kind (:func:`step_kind`), the tools in play (the
    running step's calls), the event kinds in the recent window (``events.recent``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    step_kind: StepKind
    tools: tuple[str, ...] = ()
    events: tuple[str, ...] = ()


def step_kind(ctx: TaskContext, role: str) -> StepKind:
    """The kind of a situation, first match wins.

    ``recovery`` (the recovery role), ``fix`` (the running step wrote or patched a file),
    ``revisit`` (the step works on a stale fact, or the plan was revised), ``verify`` (the step's
    objective says verify, check, confirm, re-check, validate or test), else ``explore``.

    Args:
        ctx: The task's state.
        role: The role about to be prompted.

    Returns:
        The step kind.
    """
    if role == "recovery":
        return "recovery"
    sid = ctx.plan.current_step_id
    calls = [r for r in ctx.evidence.recent_tool_calls if sid is not None and r.step_id == sid]
    if any(r.tool in _WRITES and r.status == "ok" for r in calls):
        return "fix"
    if ctx.to_reread() or ctx.plan.status == "revising":
        return "revisit"
    step = ctx.step(sid)
    text = " ".join(
        x for x in (step.title if step else "", ctx.current_step.objective if ctx.current_step else "") if x
    )
    if _VERIFY.search(text):
        return "verify"
    return "explore"


def situation(ctx: TaskContext, role: str) -> Situation:
    """The situation of a role's next prompt.

    Args:
        ctx: The task's state.
        role: The role about to be prompted.

    Returns:
        Its :class:`Situation`.
    """
    sid = ctx.plan.current_step_id
    tools = [r.tool for r in ctx.evidence.recent_tool_calls if sid is not None and r.step_id == sid]
    return Situation(
        role=role,
        step_kind=step_kind(ctx, role),
        tools=tuple(dict.fromkeys(tools)),
        events=tuple(dict.fromkeys(e.kind for e in ctx.events.recent)),
    )


def fired(policies: Iterable[ContextPolicy], sit: Situation) -> list[ContextPolicy]:
    """The policies a situation meets.

    Args:
        policies: The policies in force.
        sit: The situation.

    Returns:
        Those whose conditions ``sit`` meets, highest priority first (stable).
    """
    rank = {"high": 0, "normal": 1, "low": 2}
    out = [
        p
        for p in policies
        if (not p.roles or sit.role in p.roles)
        and (not p.step_kinds or sit.step_kind in p.step_kinds)
        and (not p.tools or any(t in sit.tools for t in p.tools))
        and (not p.events or any(k in sit.events for k in p.events))
    ]
    return sorted(out, key=lambda p: rank[p.priority])


#: The defaults (each ``description`` says what it adds, and when).
DEFAULT_POLICIES: tuple[ContextPolicy, ...] = (
    ContextPolicy(
        name="verify_adds_evidence",
        roles=("executor", "planner"),
        step_kinds=("verify", "revisit"),
        add=("finding_evidence",),
        description="verifying or revisiting a finding adds its evidence",
    ),
    ContextPolicy(
        name="fix_adds_tests_and_diff",
        roles=("executor",),
        step_kinds=("fix",),
        add=("latest_result:test", "diff"),
        description="a fix step (write or patch) adds the latest test result and the current diff",
    ),
    ContextPolicy(
        name="change_adds_diff_and_stale",
        events=("file.modified", "fact.stale"),
        add=("diff", "stale_facts"),
        priority="normal",
        description="a change of files or HEAD adds the diff and the list of stale facts",
    ),
    ContextPolicy(
        name="recovery_adds_error_and_checkpoint",
        roles=("recovery",),
        add=("failing_error", "last_checkpoint"),
        description="recovery adds the failing call's error in full and the last good checkpoint",
    ),
)


def default_policies() -> list[ContextPolicy]:
    """A copy of :data:`DEFAULT_POLICIES` as a list (to extend or filter)."""
    return list(DEFAULT_POLICIES)


def merge_policies(base: Sequence[ContextPolicy], extra: Sequence[ContextPolicy]) -> list[ContextPolicy]:
    """Add policies to a set, overriding by name.

    Args:
        base: The policies so far (e.g. :func:`default_policies`).
        extra: A user's policies.

    Returns:
        ``base`` with each policy of ``extra`` replacing the one of the same name, or appended.
    """
    names = {p.name: p for p in extra}
    out = [names.pop(p.name, p) for p in base]
    return out + [p for p in extra if p.name in names]
