"""graphs.eval: ``taskctx eval``, deterministic scenario cases for the ways context fails.

A case (:class:`Case`, one JSON file) drives the real default graph with a scripted model and
tools on throwaway stores, through crashes and resumes, then checks what the run left behind
(:data:`CHECKS`). :func:`run_eval` runs a folder of them; :class:`EvalReport` prints the result.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from .cases import CATEGORIES, Case, CaseError, Turn, default_cases_dir, expand, load_case, load_cases
    from .checks import CHECKS, Check
    from .harness import STAT_KEYS, CaseResult, run_case
    from .printing import EvalReport, format_report
    from .scripted import CaseTools
    from .suite import run_eval

# imported on first use (PEP 562): ``import graphs.eval`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "CATEGORIES": ".cases",
        "Case": ".cases",
        "CaseError": ".cases",
        "Turn": ".cases",
        "default_cases_dir": ".cases",
        "expand": ".cases",
        "load_case": ".cases",
        "load_cases": ".cases",
        "CHECKS": ".checks",
        "Check": ".checks",
        "run_eval": ".suite",
        "STAT_KEYS": ".harness",
        "CaseResult": ".harness",
        "run_case": ".harness",
        "EvalReport": ".printing",
        "format_report": ".printing",
        "CaseTools": ".scripted",
    },
)

__all__ = [
    "CATEGORIES",
    "CHECKS",
    "STAT_KEYS",
    "Case",
    "CaseError",
    "CaseResult",
    "CaseTools",
    "Check",
    "EvalReport",
    "Turn",
    "default_cases_dir",
    "expand",
    "format_report",
    "load_case",
    "load_cases",
    "run_case",
    "run_eval",
]
