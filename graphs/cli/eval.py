"""``taskctx eval``: run the scenario cases and print the report.

``taskctx eval [--cases DIR] [--json] [--case ID] [--category C] [--off MECHANISM]``: run a folder of cases
(:func:`graphs.eval.suite.run_eval`) and print the report; exit code 0 when no case fails, 1 when one does, 2 on
a bad case file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..eval.mechanisms import MECHANISMS
from ..eval.suite import run_eval

__all__ = ["eval_command"]


def eval_command(
    cases: Annotated[
        Path | None,
        typer.Option("--cases", help="Folder of case files (*.json); default: the cases shipped with taskctx."),
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
    from ..eval.cases import CaseError

    try:
        rep = run_eval(cases, only=case_id, categories=category, off=off or ())
    except CaseError as exc:
        sys.stderr.write("error: " + " ".join(str(exc).split()) + "\n")
        raise typer.Exit(2) from exc
    if as_json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
    else:
        from ..eval.printing import format_report

        sys.stdout.write(format_report(rep) + "\n")
    if rep.failed:
        raise typer.Exit(1)
