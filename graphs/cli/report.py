"""``taskctx report TASK_ID [--html FILE] [--db DB]``: write the HTML page of a run (:mod:`graphs.report.page`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from context import DamagedStoreError, TaskctxError, UnknownTaskError, find_task

from ..diagnosis import ensure_sound
from ..project import DEFAULT_DB, open_project
from ..report.hints import command_hint, damage_line
from ..report.page import write_report
from .price_options import PricedAsOpt, PricesOpt, price_options

__all__ = ["report_command"]


def report_command(
    task_id: Annotated[str, typer.Argument(help="The task to report on.")],
    html: Annotated[
        Path | None, typer.Option("--html", help="HTML file to write (default .taskctx/runs/<task_id>/report.html).")
    ] = None,
    db: Annotated[str, typer.Option("--db", help="SQLite file of checkpoints, event log and artifacts.")] = DEFAULT_DB,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            metavar="",
            help="Every tool call, manifest and event (a long run's page shows the first 100 and last 400).",
        ),
    ] = False,
    prices: PricesOpt = None,
    priced_as: PricedAsOpt = None,
) -> None:
    """Write one static HTML page for a run: timeline, manifests, token and cost charts, approvals, errors.

    Reads the database read-only (nothing in it is created or changed); writes only the HTML file.
    """
    try:
        table = price_options(prices, priced_as)
        if "://" not in db and not Path(db).exists():
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = open_project(db, readonly=True)  # only the HTML file is written
        try:
            try:
                info = find_task(project.stores, task_id)  # the one answer to "which tasks exist" (and its error)
                # the checks resume runs (events the log lost, a payload the checkpoint disagrees with): damage
                ensure_sound(project.stores, project.checkpointer, task_id)
                if not info.started:
                    raise UnknownTaskError(
                        f"task {task_id!r} in {project.path} has not started (registered, no events): nothing to "
                        f"report yet; continue it with `{command_hint('resume', task_id, db)}`"
                    )
                target = html or Path(".taskctx/runs") / task_id / "report.html"
                out = write_report(project.stores, task_id, target, full=full, db=db, prices=table, priced_as=priced_as)
            except DamagedStoreError as exc:  # one judgement with inspect and resume (graphs.diagnosis)
                from ..diagnosis import judged

                raise judged(exc, project.stores) from None
        finally:
            project.close()
    except TaskctxError as exc:
        line = damage_line(exc, db) if isinstance(exc, DamagedStoreError) else str(exc)
        sys.stderr.write("error: " + " ".join(line.split()) + "\n")
        raise typer.Exit(2) from None
    except OSError as exc:
        sys.stderr.write(f"error: cannot write the report to {html}: {exc}; pass --html with a writable path\n")
        raise typer.Exit(2) from None
    typer.echo(f"report of {task_id}: {out} ({out.stat().st_size:,} bytes)")
