"""graphs.cli: the ``taskctx`` command line (typer + rich); entry point ``graphs.cli:main``.

Commands: ``demo``, ``replay``, ``resume``, ``inspect``, ``run``, ``approve``, ``bench``, ``tokens``,
``eval``, ``report``. Every run exports ``<out>/<task_id>/`` (trace.jsonl, state.json, context_pack.md,
manifests.jsonl). Bad input prints one line naming the problem and the fix, and exits with code
2; nothing already recorded is changed.

A run command opens the stores and the checkpointer (``graphs.open_project``), builds the graph
(``graphs.build_orchestrator``) and drives it (``graphs.runner``); it prints the events as they
are recorded and answers the approval interrupts::

    events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events
      |                                                                        |
      +--> common._event_printer (one line per event)     interrupt() <--------+
                                                          approve._answerer: --approve-all,
                                                          --deny-all, the terminal, or pending

Modules (the commands are registered below, in the order ``--help`` lists them):

- :mod:`.common`: the typer ``app``, :func:`main`, the shared options and helpers;
- :mod:`.tasks`: ``replay``, ``resume``, ``run``;
- :mod:`.approve`: ``approve`` and how approval requests are shown and answered;
- :mod:`.inspect`: ``inspect`` (the view is :func:`graphs.report.render_state`);
- :mod:`.demo`: ``demo`` (the scenario is :mod:`graphs.demo`);
- ``bench``, ``tokens``, ``eval``, ``report``: the commands of :mod:`graphs.bench` (``tokens``:
  :mod:`graphs.bench.tokens`), :mod:`graphs.eval`,
  :mod:`graphs.report`.
"""

from ..bench import bench
from ..bench.tokens import tokens_command
from ..eval import eval_command
from ..report import report_command
from . import approve, demo, inspect, tasks
from .common import app, main

app.command("bench")(bench)
app.command("tokens")(tokens_command)
app.command("report")(report_command)
app.command("eval")(eval_command)
app.command()(tasks.replay)
app.command()(tasks.resume)
app.command()(inspect.inspect)
app.command()(approve.approve)
app.command()(tasks.run)
app.command()(demo.demo)

__all__ = ["app", "main"]
