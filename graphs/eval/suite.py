"""Run a folder of eval cases (:func:`run_eval`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the harness loads the graph runtime: imported when a case runs, not by every command)
    from .harness import CaseResult
    from .printing import EvalReport

__all__ = ["run_eval"]


def run_eval(
    folder: str | Path | None = None,
    *,
    only: Iterable[str] | None = None,
    categories: Iterable[str] | None = None,
    budget: int | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    off: Iterable[str] = (),
) -> EvalReport:
    """Load and run every case of a folder.

    Args:
        folder: The folder of cases; default :func:`default_cases_dir`.
        only: Run only the cases with these ids.
        categories: Run only the cases of these categories.
        budget: A token budget overriding each case's.
        on_result: Called with each result as it comes.
        off: Mechanisms switched off (:data:`~graphs.eval.harness.MECHANISMS`): their category's
            cases then fail.

    Returns:
        The report.

    Raises:
        CaseError: A case does not load, an id of ``only`` or a category does not exist, or a mechanism is unknown.
    """
    # (imported here: the harness loads the graph runtime; the eval command loads this module at start-up)
    from ..project import DEFAULT_DB
    from ..report.hints import command_hint
    from .cases import CaseError, default_cases_dir, load_cases
    from .harness import check_off, run_case
    from .printing import EvalReport

    off = check_off(off)
    d = Path(folder) if folder is not None else default_cases_dir()
    cases = load_cases(d)
    ids, cats = set(only or ()), set(categories or ())
    bad = sorted(cats - {c.category for _, c in cases})
    if bad:
        have = ", ".join(sorted({c.category for _, c in cases}))
        raise CaseError(f"no case of category {', '.join(bad)} in {d}; use one of {have}")
    unknown = sorted(ids - {c.id for _, c in cases})
    if unknown:
        cases_opt = ("--cases", str(d)) if folder is not None else ()
        listing = command_hint("eval", None, DEFAULT_DB, None, *cases_opt, "--json")
        raise CaseError(f"no case with id {', '.join(unknown)} in {d}; `{listing}` lists the case ids")
    results = []
    for p, c in cases:
        if (ids and c.id not in ids) or (cats and c.category not in cats):
            continue
        r = run_case(c, p, budget=budget, off=off)
        results.append(r)
        if on_result:
            on_result(r)
    return EvalReport(d, results)
