"""Role reports in prompts: one block per report a renderer takes, quoted as the reporting role's claim.

A renderer declares which roles' reports it takes (``reports``: role names, ``"*"`` for every
other role); :func:`report_blocks` makes their blocks from ``progress.reports`` (the last
:data:`~context.windows.REPORTS_PER_ROLE` of each role), the newest of each role ranked first.
``NodeEnv.reports = False`` switches the projection off for every role.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from context import ContextBlock, TaskContext
from context.reports import RoleReport

from ..runtime import NodeEnv
from .base import block
from .quoting import quote_agent

__all__ = ["ALL_ROLES", "report_blocks", "report_quote", "report_text", "reports_taken", "role_label"]

#: In a renderer's ``reports``: the reports of every role but the renderer's own.
ALL_ROLES = "*"

#: A role name a header shows as it is (a node name); another shape is only in the quote's attribute.
_ROLE = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")


def report_quote(r: RoleReport) -> str:
    """The role's words of a report, quoted as its claim (``source="agent:<role> report #<seq>"``).

    Args:
        r: The report (``progress.reports``).

    Returns:
        The quote: its verdict, summary, items (and how many more the log has) and refs.
    """
    lines = [f"verdict: {r.verdict or '(none)'}"]
    if r.summary:
        lines.append(f"summary: {r.summary}")
    lines += [f"- {i}" for i in r.items]
    if r.items_total > len(r.items):
        lines.append(f"(and {r.items_total - len(r.items)} more items, in event #{r.seq} of the log)")
    if r.refs:
        lines.append("refs: " + ", ".join(r.refs))
    return quote_agent("\n".join(lines), source=f"{r.role} report #{r.seq}")


def role_label(role: str) -> str:
    """A role's name as a header may show it: the name, or a placeholder for another shape.

    Args:
        role: The reporting node's name.

    Returns:
        ``role`` when it is a plain name (letters, digits, ``_.:-``), else a placeholder (the
        name is then shown only inside the quote's attribute).
    """
    return role if _ROLE.fullmatch(role) else "(a role with an unusual name)"


def report_text(r: RoleReport) -> str:
    """A report as a prompt shows it: a header of the app's facts, then the role's words quoted.

    Args:
        r: The report (``progress.reports``).

    Returns:
        ``## Report of <role> (<kind> #<seq>, plan v<n>[, step <id>]), the role's claim:`` and
        :func:`report_quote`.
    """
    where = f"{r.kind} #{r.seq}, plan v{r.plan_version}" + (f", step {r.step_id}" if r.step_id else "")
    return f"## Report of {role_label(r.role)} ({where}), the role's claim:\n" + report_quote(r)


def reports_taken(ctx: TaskContext, role: str, takes: Sequence[str]) -> list[RoleReport]:
    """The reports of ``ctx`` that a renderer of ``role`` taking ``takes`` shows, in log order.

    Args:
        ctx: The state.
        role: The renderer's own role (``"*"`` does not take its own reports; naming it does).
        takes: Role names, or :data:`ALL_ROLES`.

    Returns:
        The reports.
    """
    named = set(takes)
    return [r for r in ctx.progress.reports if r.role in named or (ALL_ROLES in named and r.role != role)]


def report_blocks(
    ctx: TaskContext, env: NodeEnv, role: str, takes: Sequence[str], *, slot: str = "msg:state"
) -> list[ContextBlock]:
    """One ``report.<role>.<seq>`` block per report taken, ``agent_claim``, for the builder to fit.

    The newest report of each role is ``high`` priority, its older ones (the state keeps up to
    :data:`~context.windows.REPORTS_PER_ROLE`) ``normal``; newer ones rank first within each.

    Args:
        ctx: The state.
        env: The node environment (``env.reports`` False: no blocks).
        role: The renderer's role.
        takes: The roles whose reports it takes (names, or :data:`ALL_ROLES`).
        slot: The layout slot.

    Returns:
        The blocks, in log order.
    """
    if not env.reports:
        return []
    taken = reports_taken(ctx, role, takes)
    newest = {r.role: r.seq for r in taken}
    n = len(taken)
    return [
        block(
            env,
            f"report.{r.role}.{r.seq}",
            report_text(r),
            kind="state",
            layer="recent",
            source=f"{r.kind} #{r.seq}",
            priority="high" if newest[r.role] == r.seq else "normal",
            trust="agent_claim",
            relevance=(i + 1) / n,
            slot=slot,
        )
        for i, r in enumerate(taken)
    ]
