"""The tool node's permission decision for one call (:func:`assess`), made in code, never by prompt wording."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from context import Permissions
from context.literals import RiskLevel

__all__ = ["ALWAYS_ALLOWED", "Decision", "PolicyError", "assess"]

#: Tools handled by the tool node itself that only read the task's own records.
ALWAYS_ALLOWED = frozenset({"read_artifact", "search_history"})

#: A secret's mask as the stores write it (``context.secrets.MASK_FORMAT``).
_MASK = re.compile(r"\[REDACTED:[a-z0-9_]+\]")


class PolicyError(Exception):
    """A call refused by a tool policy; ``str(exc)`` is the reason, one line."""


@dataclass(frozen=True)
class Decision:
    """The permission decision for one call.

    Attributes:
        allowed: Whether the call may run.
        risk: ``low``, ``medium`` or ``high``.
        reason: Why (the refusal, or what makes it risky).
        needs_approval: Whether the user must approve it first.
        paths: Workspace-relative paths the call writes, resolved.
    """

    allowed: bool
    risk: RiskLevel = "low"
    reason: str = ""
    needs_approval: bool = False
    #: Workspace-relative paths the call touches (resolved), for the record.
    paths: tuple[str, ...] = field(default_factory=tuple)


def _tool_names(schemas: Iterable[dict[str, Any]]) -> set[str]:
    out = set()
    for s in schemas:
        fn = s.get("function", s)
        if isinstance(fn, dict) and fn.get("name"):
            out.add(str(fn["name"]))
    return out


def assess(tool: str, args: dict[str, Any], perms: Permissions, tools: Any) -> Decision:
    """The permission decision for one call, before anything runs.

    In order: ``denied_tools`` wins; then ``allowed_tools`` when set (``read_artifact`` and
    ``search_history`` are always allowed); the tool must be one the executor was offered; a call
    with side effects whose arguments hold a secret's mask (``[REDACTED:<kind>]``) is refused (it
    would write the mask where a value was meant); then the executor's own ``check`` gives the
    risk or refuses. Approval is needed for a tool in ``requires_approval`` or a ``high`` risk.

    Args:
        tool: The tool's name.
        args: The call's arguments.
        perms: The task's permissions.
        tools: The task's tool executor.

    Returns:
        The decision.
    """
    if tool in perms.denied_tools:
        return Decision(False, "high", f"{tool} is in denied_tools")
    if perms.allowed_tools and tool not in perms.allowed_tools and tool not in ALWAYS_ALLOWED:
        return Decision(False, "high", f"{tool} is not in allowed_tools")
    offered = _tool_names(tools.schemas()) | ALWAYS_ALLOWED
    if tool not in offered:
        return Decision(False, "high", f"{tool} is not a tool of this task")
    masked = _MASK.search(json.dumps(args, ensure_ascii=False))
    if masked and tools.has_side_effects(tool):
        return Decision(
            False,
            "high",
            f"the arguments hold a masked secret ({masked.group(0)}): secrets never enter the task's records, so this "
            "would write the mask in place of the value; read the secret from the environment inside the command, "
            "or use a value not shaped like a credential",
        )
    risk: RiskLevel = "low"
    reason, paths = "", ()
    check = getattr(tools, "check", None)
    if check is not None:
        try:
            risk, reason, paths = check(tool, args, list(perms.file_scopes))
        except PolicyError as exc:
            return Decision(False, "high", str(exc))
    elif tools.has_side_effects(tool):
        risk, reason = "medium", f"{tool} has side effects"
    needs = tool in perms.requires_approval or risk == "high"
    if tool in perms.requires_approval:
        reason = f"{tool} requires approval (task permissions)" + (f"; {reason}" if reason else "")
    return Decision(True, risk, reason, needs, tuple(paths))
