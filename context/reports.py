"""Role reports: what a role found (a verdict, a summary, items, refs), kept as a bounded window.

A role records its report as ``role.reported`` (the built-in reviewer's ``review.completed`` is
its report too, in data of schema 3 and later); the reducer keeps the last
:data:`~context.windows.REPORTS_PER_ROLE` reports of each role in ``progress.reports``, each with at most
:data:`~context.windows.REPORT_ITEMS_KEPT` items (the event log keeps every report whole). Renderers quote them as
the role's claim (``agent_claim``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .windows import REPORTS_PER_ROLE

__all__ = ["RoleReport", "keep_report"]


class RoleReport(BaseModel):
    """One role's report as the state keeps it: who, against which plan, what it found.

    ``role`` is the node that recorded it (the app's name for it); ``verdict``, ``summary``,
    ``items`` and ``refs`` are the role's words (a model's, or a check's output), so prompts quote
    them as its claim. ``seq`` is the event that recorded it (``role.reported`` or
    ``review.completed``), ``plan_version`` the plan it was made against.
    """

    model_config = ConfigDict(extra="forbid")

    role: str
    seq: int
    kind: str = "role.reported"
    verdict: str = ""
    summary: str = ""
    #: The first :data:`~context.windows.REPORT_ITEMS_KEPT` items (issues, failing checks...).
    items: list[str] = Field(default_factory=list)
    #: How many items the report has (the log's event has every one).
    items_total: int = 0
    #: Artifact refs, finding ids or other pointers the report rests on.
    refs: list[str] = Field(default_factory=list)
    step_id: str | None = None
    plan_version: int = 0


def keep_report(reports: list[RoleReport], new: RoleReport) -> list[RoleReport]:
    """``reports`` with ``new`` appended and its role's older reports cut to the window.

    Args:
        reports: The state's reports, in log order.
        new: The report just folded.

    Returns:
        The reports in log order, at most :data:`~context.windows.REPORTS_PER_ROLE` of each role.
    """
    out = [*reports, new]
    same = [i for i, r in enumerate(out) if r.role == new.role]
    drop = set(same[: max(0, len(same) - REPORTS_PER_ROLE)])
    return [r for i, r in enumerate(out) if i not in drop]
