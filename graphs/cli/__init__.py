"""graphs.cli: the ``taskctx`` command line (typer + rich), a thin layer over :class:`graphs.Project`.

Entry point ``graphs.cli:main``. Commands: ``demo``, ``replay``, ``run``, ``resume``, ``fork``, ``approve``,
``inspect``, ``list``, ``report``, ``doctor``, ``memory``, ``bench``, ``tokens``, ``eval``. Every run
exports ``<out>/<task_id>/``; bad input prints one line naming the problem and the fix and exits
with code 2; a model call that failed at the provider exits with code 3 and says how to resume.
What the commands share is in :mod:`.core`; the command lines they suggest in
:mod:`graphs.report.hints`.
"""

from typing import Annotated

import typer

from . import approve, bench, demo, doctor, fork_command, inspect, listing, memory_commands, report, tasks
from . import eval as eval_
from .core import app, main


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            is_eager=True,
            callback=listing.version_callback,
            help="Print taskctx's version and exit.",
        ),
    ] = False,
) -> None:
    """taskctx: structured task context for LangGraph agents."""
    if ctx.invoked_subcommand:  # the root run of a trace is named after it (graphs.tracing.TRACE_COMMAND)
        from ..tracing import TRACE_COMMAND

        token = TRACE_COMMAND.set(ctx.invoked_subcommand)
        ctx.call_on_close(lambda: TRACE_COMMAND.reset(token))  # (a command run in-process leaves no trace name)


app.command("bench")(bench.bench)
app.command("tokens")(bench.tokens_command)
app.command("report")(report.report_command)
app.command("eval")(eval_.eval_command)
app.command()(tasks.replay)
app.command()(tasks.resume)
app.command()(fork_command.fork)
app.command()(inspect.inspect)
app.command("list")(listing.list_command)
app.command()(approve.approve)
app.command()(tasks.run)
app.command()(demo.demo)
app.command()(doctor.doctor)
app.add_typer(memory_commands.memory_app, name="memory")

__all__ = ["app", "main"]
