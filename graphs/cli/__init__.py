"""graphs.cli: the ``taskctx`` command line (typer + rich); entry point ``graphs.cli:main``.

Commands: ``demo``, ``replay``, ``resume``, ``inspect``, ``list``, ``run``, ``approve``, ``bench``,
``tokens``, ``eval``, ``report``, ``doctor``, ``memory`` (``list|show|confirm|forget|rebuild``);
``taskctx --version``. Every run exports ``<out>/<task_id>/``
(trace.jsonl, state.json, context_pack.md, manifests.jsonl). Bad input prints one line naming the
problem and the fix, and exits with code 2; a model call that failed at the provider exits with
code 3 and says how to resume; nothing already recorded is changed.

A run command opens the stores and the checkpointer (``graphs.open_project``), builds the graph
(``graphs.build_orchestrator``) and drives it (``graphs.runner``); it prints the events as they
are recorded and answers the approval interrupts::

    events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events
      |                                                                        |
      +--> common._event_printer (one line per event)     interrupt() <--------+
                                                          approve._answerer: --approve-all,
                                                          --deny-all, the terminal, or pending

Modules (``--help`` lists ``bench``, ``report`` and ``eval`` first: their modules register them on
import; then the commands registered below, in this order):

- :mod:`.common`: the typer ``app``, :func:`main`, the shared options and helpers;
- :mod:`.tasks`: ``replay``, ``resume``, ``run``;
- :mod:`.approve`: ``approve`` and how approval requests are shown and answered;
- :mod:`.inspect`: ``inspect`` (the view is :func:`graphs.report.render_state`);
- :mod:`.listing`: ``list`` (rows from :func:`context.list_tasks`, the one source of "which
  tasks exist") and ``--version``;
- :mod:`.demo`: ``demo`` (the scenario is :mod:`graphs.demo`);
- :mod:`.doctor`: ``doctor`` (the checks are :mod:`graphs.diagnosis`);
- :mod:`.memory`: ``memory list|show|confirm|forget|rebuild`` (the API is :mod:`graphs.memory_store`);
- ``bench``, ``tokens``, ``eval``, ``report``: the commands of :mod:`graphs.bench` (``tokens``:
  :mod:`graphs.bench.token_counters`), :mod:`graphs.eval`, :mod:`graphs.report`.
"""

from typing import Annotated

import typer

from . import approve, demo, doctor, inspect, listing, tasks
from .bench import bench, tokens_command
from .core import app, main
from .eval import eval_command
from .memory_commands import memory_app
from .report import report_command
from .core import app, main


@app.callback()
def _root(
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


app.command("bench")(bench)
app.command("tokens")(tokens_command)
app.command("report")(report_command)
app.command("eval")(eval_command)
app.command()(tasks.replay)
app.command()(tasks.resume)
app.command()(inspect.inspect)
app.command("list")(listing.list_command)
app.command()(approve.approve)
app.command()(tasks.run)
app.command()(demo.demo)
app.command()(doctor.doctor)
app.add_typer(memory_app, name="memory")

__all__ = ["app", "main"]
