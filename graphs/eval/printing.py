"""What ``taskctx eval`` prints: the :class:`EvalReport` of a run of cases, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases import CATEGORIES
from .harness import STAT_KEYS, CaseResult

__all__ = ["EvalReport", "format_report"]


@dataclass
class EvalReport:
    """The results of a run of cases, from the folder ``folder``.

    Attributes:
        folder: The folder of cases.
        results: One result per case run, in order.
    """

    folder: Path
    results: list[CaseResult]

    @property
    def failed(self) -> list[CaseResult]:
        """The results that failed."""
        return [r for r in self.results if r.status == "failed"]

    def by_category(self) -> dict[str, dict[str, int]]:
        """Cases, passed, failed and pending per category, in :data:`CATEGORIES` order.

        Returns:
            Category -> counts.
        """
        out: dict[str, dict[str, int]] = {}
        for cat in CATEGORIES:
            rs = [r for r in self.results if r.case.category == cat]
            out[cat] = {
                "cases": len(rs),
                "passed": sum(r.status == "passed" for r in rs),
                "failed": sum(r.status == "failed" for r in rs),
                "pending": sum(r.status == "pending" for r in rs),
            }
        return out

    def stats(self) -> dict[str, int]:
        """The context statistics summed over every case.

        Returns:
            :data:`STAT_KEYS` -> total.
        """
        tot = dict.fromkeys(STAT_KEYS, 0)
        for r in self.results:
            for k, v in r.stats.items():
                tot[k] += v
        return tot

    def to_json(self) -> dict[str, Any]:
        """The report as ``taskctx eval --json`` prints it.

        Returns:
            ``{cases_dir, total, categories (with pass_rate), stats, cases}``.
        """
        cats = self.by_category()
        return {
            "cases_dir": str(self.folder),
            "total": {
                "cases": len(self.results),
                "passed": sum(r.passed for r in self.results),
                "failed": len(self.failed),
                "pending": sum(r.status == "pending" for r in self.results),
            },
            "categories": {k: {**v, "pass_rate": _rate(v)} for k, v in cats.items()},
            "stats": self.stats(),
            "cases": [
                {
                    "id": r.case.id,
                    "category": r.case.category,
                    "file": r.path.name if r.path else None,
                    "status": r.status,
                    "failures": r.failures,
                    "note": r.note,
                    "stats": r.stats,
                    "seconds": round(r.seconds, 3),
                }
                for r in self.results
            ],
        }


def _rate(v: dict[str, int]) -> float | None:
    ran = v["passed"] + v["failed"]
    return round(v["passed"] / ran, 4) if ran else None


def format_report(rep: EvalReport) -> str:
    """The report as ``taskctx eval`` prints it: pass rate per category, statistics, failures.

    Args:
        rep: The report.

    Returns:
        The text.
    """
    folder = Path(rep.folder)
    try:
        folder = folder.resolve().relative_to(Path.cwd().resolve())  # as the user would type it
    except ValueError:
        pass
    n = len(rep.results)
    lines = [f"taskctx eval: {n} case{'' if n == 1 else 's'} from {folder}", ""]
    lines.append(f"{'category':<12} {'cases':>5} {'passed':>6} {'failed':>6} {'pending':>7} {'pass rate':>9}")
    cats = rep.by_category()
    for k, v in cats.items():
        rate = _rate(v)
        lines.append(
            f"{k:<12} {v['cases']:>5} {v['passed']:>6} {v['failed']:>6} {v['pending']:>7} "
            f"{'-' if rate is None else f'{rate:.0%}':>9}"
        )
    tot = rep.to_json()["total"]
    ran = tot["passed"] + tot["failed"]
    total_rate = f"{tot['passed'] / ran:.0%}" if ran else "-"
    lines.append(
        f"{'total':<12} {tot['cases']:>5} {tot['passed']:>6} {tot['failed']:>6} {tot['pending']:>7} {total_rate:>9}"
    )
    lines += ["", "context statistics"]
    lines += [f"  {k:<24} {v:>8,}" for k, v in rep.stats().items()]
    pend = [r for r in rep.results if r.status == "pending"]
    if pend:
        lines += ["", "pending (not run until the feature is there):"]
        lines += [f"  {r.case.id}: {r.note}" for r in pend]
    if rep.failed:
        lines += ["", "failed:"]
        for r in rep.failed:
            lines.append(f"  {r.case.id} ({r.case.category}, {r.path.name if r.path else '-'}):")
            lines += [f"    - {x}" for x in r.failures[:8]]
            if len(r.failures) > 8:
                lines.append(f"    - ... {len(r.failures) - 8} more")
    return "\n".join(lines)
