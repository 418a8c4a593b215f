"""graphs.bench: ``taskctx bench``, five context strategies replayed over recorded trajectories.

Naive append-all, SWE-agent observation masking, LangChain tool-result clearing, deepagents-style
summarisation and taskctx itself (the real graph), scored per trajectory and in total
(:class:`Stats`); plus overhead, checkpoint bytes, the optimistic bound, the split and scale legs,
and (``--agents``) the agent rows: each run through a real ``create_agent`` agent per middleware
(:mod:`.agents`).
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
