"""graphs.bench: ``taskctx bench``, recorded trajectories replayed through five context strategies.

Strategies (see :mod:`graphs.bench.strategies`): naive append-all, SWE-agent observation masking
(``LastNObservations(n=5)``), LangChain tool-result clearing (``ClearToolUsesEdit(keep=3)``
triggered at the budget), deepagents-style threshold summarisation (85% / keep 10%, extractive
stand-in summary of fixed size) and taskctx itself (the real graph and executor renderer).

All token counts are o200k_base (``context.tokens``, the taskctx graph's default counter) over
the messages plus the tool schemas, as ``nodes.message_tokens.message_tokens`` counts them. Per trajectory and in total:

* ``input_tokens``: sum of prompt tokens over executor calls; ``peak``: largest prompt;
* ``cached``: longest common prefix, in whole messages (tool schemas first), with the previous
  call (``nodes.runtime.fingerprints`` / ``cached_prefix_tokens``); ``effective cost`` =
  uncached + 0.1 × cached;
* ``over_budget``: calls whose prompt passes the budget;
* ``retention``: share of calls holding the original request verbatim and every hard
  constraint (``context.extract_constraints``); ``floor`` (taskctx only): share of executor
  calls with the core layer, the working state and the last 3 steps (thought, action and
  compressed observation with its ref; an observation shown whole needs no ref); ``orphans``:
  tool results without their call;
* ``restorability``: share of compressed observations whose ref returns the recorded
  observation byte-exact (taskctx); baselines that elide observations have nothing to restore
  from (reported as 0 when they elided any, n/a otherwise);
* orchestrator overhead (reduce + build + render, model time excluded) per executor step on the
  real runs and on a synthetic run (labelled synthetic), and checkpoint bytes (the TaskContext
  serialised with the checkpointer's serde; mean of the 100 states around each point) at 100 /
  1,000 / 5,000 events of a synthetic run.

taskctx also makes planner / reviewer / recovery calls. Its executor sends ``complete_step`` with
each plan step's last recorded action (the step completes when that action succeeds), and alone
only when that action failed; its main row counts every executor call and a separate row
``taskctx (all roles)`` adds the other roles.

Where it sits in the pipeline: the baselines build LangChain message lists themselves; taskctx is
the real graph, replaying the trajectory::

    recorded trajectory (*.jsonl, context.load_trajectory)
      |-- strategies.baseline_calls: naive | masking | clearing | summarization (messages per step)
      '-- strategies.run_taskctx: the real graph on in-memory stores
            events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events
                                                                      ReplayChatModel   ReplayTools
            its executor ``context.built`` events (manifest + stored prompt) are the calls
      --> metrics.py: Stats per (trajectory, strategy)
      --> overhead.py: reducer + builder + renderer timed again over the log; checkpoint bytes
      --> runner.run_bench: BenchResult --> table.py: results.md   plots.py: the two PNGs
                                        --> outputs.py: results.csv (``taskctx bench``: graphs.cli.bench)

``taskctx tokens`` (:mod:`.tokens`) measures the counters against o200k_base.
Scale (``--scale 100,1000[,10000]``, :mod:`.scale`): the shared ponyc run repeated with its errors
to N executor steps, replayed by ``taskctx replay`` in a child process on SQLite (checkpoints
pruned) and stopped one step before the end, then resumed one step (the resume start-up),
resumed to the end, resumed again (finished) and inspected, each a new process: disk bytes per
step by table, state, time per step, each process's CPU time and peak RSS, the resume start-up
(process start to the ``resume.started`` of its first new step; the whole process beside it),
finished-resume and inspect times (``scale.md``, ``scale.csv``, ``scale.png``).

Modules: :mod:`.strategies` (the five strategies), :mod:`.metrics` (:class:`Stats`),
:mod:`.overhead` (timings, synthetic trajectory, checkpoint bytes), :mod:`.replays`
(:func:`run_bench`, :class:`BenchResult`), :mod:`.table` (``results.md``), :mod:`.plots`
(``prompt_tokens.png``, ``effective_cost.png``), :mod:`.outputs` (:func:`write_outputs`; the
``bench`` typer command is :mod:`graphs.cli.bench`),
:mod:`.bound` (the optimistic bound), :mod:`.split` (the two-fold split, the bound's and the
short runs' sections), :mod:`.stress` (the synthetic stress set), :mod:`.defaults` (``DEFAULT_DIR``, the commands' default folder). Imports the wiring (``graphs.build_orchestrator``, ``graphs.runner``,
``graphs.checkpoint``); the wiring never imports it.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from .metrics import Stats
    from .outputs import DEFAULT_OUT, write_outputs
    from .overhead import Timing, synthetic_trajectory
    from .replays import DEFAULT_DIR, BenchResult, run_bench
    from .scale import ScaleRow, repeat_trajectory, run_scale
    from .strategies import BASELINES, STRATEGIES, Call, TaskctxRun, baseline_calls, run_taskctx
    from .table import markdown, targets

# imported on first use (PEP 562): ``import graphs.bench`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "DEFAULT_OUT": ".outputs",
        "write_outputs": ".outputs",
        "Stats": ".metrics",
        "Timing": ".overhead",
        "synthetic_trajectory": ".overhead",
        "DEFAULT_DIR": ".replays",
        "BenchResult": ".replays",
        "run_bench": ".replays",
        "ScaleRow": ".scale",
        "repeat_trajectory": ".scale",
        "run_scale": ".scale",
        "BASELINES": ".strategies",
        "STRATEGIES": ".strategies",
        "Call": ".strategies",
        "TaskctxRun": ".strategies",
        "baseline_calls": ".strategies",
        "run_taskctx": ".strategies",
        "markdown": ".table",
        "targets": ".table",
    },
)

__all__ = [
    "BASELINES",
    "DEFAULT_DIR",
    "DEFAULT_OUT",
    "STRATEGIES",
    "BenchResult",
    "Call",
    "ScaleRow",
    "Stats",
    "TaskctxRun",
    "Timing",
    "baseline_calls",
    "markdown",
    "repeat_trajectory",
    "run_bench",
    "run_scale",
    "run_taskctx",
    "synthetic_trajectory",
    "targets",
    "write_outputs",
]
