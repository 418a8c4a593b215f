"""``taskctx eval [--cases DIR] [--json] [--case ID] [--category C] [--off MECHANISM]``: run a folder of cases
(:func:`run_eval`) and print the report; exit code 0 when no case fails, 1 when one does, 2 on a
bad case file."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # (the harness loads the graph runtime: imported when a case runs, not by every command)
    from .harness import CaseResult
    from .printing import EvalReport

from .mechanisms import MECHANISMS

__all__ = ["eval_command", "run_eval"]


def run_eval(
    folder: str | Path | None = None,
    *,
    only: Iterable[str] | None = None,
    categories: Iterable[str] | None = None,
    budget: int | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    off: Iterable[str] = (),
) -> EvalReport:
    """Load and run every case of ``folder`` (default :func:`default_cases_dir`); ``only`` picks
    case ids (``CaseError`` names any that does not exist); ``off`` switches mechanisms off
    (names of :data:`~graphs.eval.harness.MECHANISMS`: their category's cases then fail;
    ``CaseError`` for an unknown one)."""
    from ..orchestrator import DEFAULT_DB, command_hint
    from .cases import CaseError, default_cases_dir, load_cases
    from .harness import check_off, run_case
    from .printing import EvalReport

    off = check_off(off)
    d = Path(folder) if folder is not None else default_cases_dir()
    cases = load_cases(d)
    ids, cats = set(only or ()), set(categories or ())
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


def eval_command(
    cases: Annotated[
        Path | None, typer.Option("--cases", help="Folder of case files (*.json); default tests/eval_cases.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print the report as JSON.")] = False,
    case_id: Annotated[list[str] | None, typer.Option("--case", help="Run only this case id (repeatable).")] = None,
    category: Annotated[
        list[str] | None, typer.Option("--category", help="Run only the cases of this category (repeatable).")
    ] = None,
    off: Annotated[
        list[str] | None,
        typer.Option(
            "--off",
            help=f"Switch a mechanism off ({', '.join(MECHANISMS)}) to see its category fail. Repeatable.",
        ),
    ] = None,
) -> None:
    """Run the scenario cases: pass rate per category and context statistics."""
    from .cases import CaseError

    try:
        rep = run_eval(cases, only=case_id, categories=category, off=off or ())
    except CaseError as exc:
        sys.stderr.write("error: " + " ".join(str(exc).split()) + "\n")
        raise typer.Exit(2) from exc
    if as_json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
    else:
        from .printing import format_report

        sys.stdout.write(format_report(rep) + "\n")
    if rep.failed:
        raise typer.Exit(1)
