"""Run the bench: every trajectory through the five strategies (:mod:`.strategies`), scored by
:mod:`.metrics`, plus the overhead and checkpoint measures of :mod:`.overhead`; returns a
:class:`BenchResult`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from context import BudgetError, Trajectory, extract_constraints, load_trajectory

from .bound import bound_stats
from .metrics import Stats, _stats, _taskctx_stats
from .overhead import Timing, _checkpoint_sizes, _overhead, _timing, synthetic_trajectory
from .strategies import BASELINES, STRATEGIES, TaskctxRun, baseline_calls, run_taskctx
from .stress import StressRow, run_stress

__all__ = ["BenchResult", "DEFAULT_DIR", "run_bench"]

from .defaults import DEFAULT_DIR as DEFAULT_DIR  # (re-exported: graphs.bench.replays.DEFAULT_DIR)


@dataclass
class BenchResult:
    budget: int
    trajectories: list[str]
    steps: dict[str, int]
    rows: list[Stats]  # one per (trajectory, strategy), strategies in STRATEGIES order
    totals: dict[str, Stats]  # per strategy, plus "taskctx (all roles)"
    series: dict[str, dict[str, list[int]]]  # trajectory -> strategy -> prompt tokens per call
    other_roles: dict[str, dict[str, int]]  # trajectory -> role -> calls (taskctx non-executor)
    overhead: list[Timing] = field(default_factory=list)
    checkpoint: dict[int, int] = field(default_factory=dict)  # events -> bytes
    checkpoint_parts: dict[int, dict[str, int]] = field(default_factory=dict)
    finished: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0
    #: trajectory -> the optimistic bound over its taskctx executor calls (:mod:`.bound`)
    bound: dict[str, Stats] = field(default_factory=dict)
    #: the stress set (:mod:`.stress`), when run (``stress=True``)
    stress: list[StressRow] = field(default_factory=list)

    @property
    def strategies(self) -> list[str]:
        return [s for s in STRATEGIES if s in self.totals]

    def stats(self, trajectory: str, strategy: str) -> Stats:
        return next(r for r in self.rows if r.trajectory == trajectory and r.strategy == strategy)


def _run_taskctx(t: Trajectory, budget: int) -> TaskctxRun:
    try:
        return run_taskctx(t, budget)
    except BudgetError as exc:
        raise BudgetError(f"trajectory {t.id} ({len(t.steps)} steps) does not fit --budget {budget}: {exc}") from exc


def run_bench(
    dir: str | Path = DEFAULT_DIR,
    budget: int = 8_000,
    *,
    limit: int | None = None,
    only: list[str] | None = None,
    synthetic_events: int = 1_000,
    checkpoint_events: tuple[int, ...] = (100, 1_000, 5_000),
    stress: bool = False,
) -> BenchResult:
    """Run every trajectory in ``dir`` (``only``: these ids; ``limit``: the first N) through the
    five strategies, plus the synthetic overhead and checkpoint measures.
    ``synthetic_events=0`` / ``checkpoint_events=()`` skip those; ``stress=True`` adds the
    stress set (:mod:`.stress`, about a minute)."""
    from nodes import ReplayTools

    t_start = time.perf_counter()
    d = Path(dir)
    if d.is_file():
        paths = [d]  # one trajectory
    elif d.is_dir():
        paths = sorted(p for p in d.glob("*.jsonl") if p.is_file())
    else:
        raise FileNotFoundError(f"trajectory folder not found: {d.resolve()}; pass DIR (default {DEFAULT_DIR})")
    trajs = [load_trajectory(p) for p in paths]
    if only:
        trajs = [t for t in trajs if t.id in only]
    if limit is not None:
        trajs = trajs[:limit]
    if not trajs:
        raise FileNotFoundError(
            f"no trajectories (*.jsonl) to run in {d.resolve()}; pass a folder of recorded "
            f"runs or one .jsonl file (default {DEFAULT_DIR})"
        )
    rows: list[Stats] = []
    series: dict[str, dict[str, list[int]]] = {}
    other: dict[str, dict[str, int]] = {}
    finished: dict[str, bool] = {}
    bound: dict[str, Stats] = {}
    totals = {s: Stats("TOTAL", s) for s in [*STRATEGIES, "taskctx (all roles)"]}
    real_times: list[float] = []
    real_same = 0
    real_events = 0
    for t in trajs:
        constraints = extract_constraints(t.request)
        tools = ReplayTools(t).schemas()
        series[t.id] = {}
        for s in BASELINES:
            calls = baseline_calls(t, s, budget, tools)
            st = _stats(t.id, s, calls, budget, t.request, constraints)
            rows.append(st)
            totals[s].add(st)
            series[t.id][s] = [c.prompt_tokens for c in calls]
        run = _run_taskctx(t, budget)
        finished[t.id] = run.finished
        ex, allr = _taskctx_stats(run, budget, constraints)
        rows.append(ex)
        totals["taskctx"].add(ex)
        totals["taskctx (all roles)"].add(allr)
        series[t.id]["taskctx"] = [c.prompt_tokens for c in run.calls]
        bound[t.id] = bound_stats(run)
        roles: dict[str, int] = {}
        for c in run.other_calls:
            roles[c.role] = roles.get(c.role, 0) + 1
        other[t.id] = roles
        times, _, same = _overhead(run, budget)
        real_times += times
        real_same += same
        real_events += len(run.events)
        run.stores.close()
    overhead = [
        _timing(
            f"real runs ({len(trajs)} trajectories, {real_events} events in all)", real_times, real_events, real_same
        )
    ]
    cp: dict[int, int] = {}
    cp_parts: dict[int, dict[str, int]] = {}
    need = max([synthetic_events, *checkpoint_events], default=0)
    if need:
        # about 3.3 events per executor step when no error occurs; run until the log is long enough
        n_steps = max(10, int(need / 3.2) + 10)
        run = _run_taskctx(synthetic_trajectory(n_steps), budget)
        if synthetic_events:
            lo = int(synthetic_events * 0.9)
            times, _, same = _overhead(run, budget, window=(lo, synthetic_events))
            overhead.append(
                _timing(
                    f"SYNTHETIC run, executor steps at {lo}-{synthetic_events} events", times, synthetic_events, same
                )
            )
            times, _, same = _overhead(run, budget, window=(0, synthetic_events))
            overhead.append(
                _timing(
                    f"SYNTHETIC run, all executor steps up to {synthetic_events} events", times, synthetic_events, same
                )
            )
        if checkpoint_events:
            cp, cp_parts = _checkpoint_sizes(run.events, checkpoint_events)
        run.stores.close()
    stress_rows = run_stress(budget) if stress else []
    return BenchResult(
        budget=budget,
        trajectories=[t.id for t in trajs],
        steps={t.id: len(t.steps) for t in trajs},
        rows=rows,
        totals=totals,
        series=series,
        other_roles=other,
        overhead=overhead,
        checkpoint=cp,
        checkpoint_parts=cp_parts,
        finished=finished,
        seconds=round(time.perf_counter() - t_start, 1),
        bound=bound,
        stress=stress_rows,
    )
