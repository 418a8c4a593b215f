"""Run the bench (:func:`run_bench`): every trajectory through the five strategies, and the synthetic measures."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from context import BudgetError, Trajectory, extract_constraints, load_trajectory
from nodes import ReplayTools

from .bound import bound_stats
from .metrics import Stats, strategy_stats, taskctx_stats
from .overhead import Timing, checkpoint_sizes, measure_overhead, synthetic_trajectory, timing
from .strategies import BASELINES, STRATEGIES, TaskctxRun, baseline_calls, run_taskctx
from .stress import StressRow, run_stress

__all__ = ["BenchResult", "DEFAULT_DIR", "run_bench"]

from .defaults import DEFAULT_DIR as DEFAULT_DIR  # (re-exported: graphs.bench.replays.DEFAULT_DIR)
from .defaults import trajectory_files


@dataclass
class BenchResult:
    """What ``taskctx bench`` measured; :mod:`.table` and :mod:`.outputs` write it.

    ``rows``: one :class:`Stats` per (trajectory, strategy); ``totals``: per strategy, plus
    ``taskctx (all roles)``; ``series``: trajectory -> strategy -> prompt tokens per call;
    ``checkpoint``: events -> checkpoint bytes; ``bound``: the optimistic bound per trajectory.
    """

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
    #: trajectory -> the smallest budget (tokens) its refused call needs: the runs that do not fit
    #: ``budget`` (not measured; not in ``trajectories``)
    too_large: dict[str, int] = field(default_factory=dict)
    #: trajectory -> its executor steps, for the runs of ``too_large``
    too_large_steps: dict[str, int] = field(default_factory=dict)
    #: the agent rows (:mod:`.agents`), when run (``agents=True``): row -> totals
    agent_totals: dict[str, Stats] = field(default_factory=dict)

    @property
    def strategies(self) -> list[str]:
        """The strategies measured, in :data:`STRATEGIES` order."""
        return [s for s in STRATEGIES if s in self.totals]

    def stats(self, trajectory: str, strategy: str) -> Stats:
        """The stats of one strategy over one trajectory.

        Args:
            trajectory: The trajectory's id.
            strategy: The strategy's name.

        Returns:
            The stats.
        """
        return next(r for r in self.rows if r.trajectory == trajectory and r.strategy == strategy)


def _run_taskctx(t: Trajectory, budget: int) -> TaskctxRun:
    try:
        return run_taskctx(t, budget)
    except BudgetError as exc:
        raise BudgetError(
            f"trajectory {t.id} ({len(t.steps)} steps) does not fit --budget {budget}: {exc}",
            role=exc.role,
            required=exc.required,
            reserve=exc.reserve,
            budget=budget,
        ) from exc


def _load(d: Path, only: list[str] | None, limit: int | None) -> list[Trajectory]:
    """The trajectories of ``d`` (a folder of ``*.jsonl`` or one file), filtered by ``only`` and ``limit``.

    Raises:
        FileNotFoundError: ``d`` does not exist, holds no trajectory to run, or a broken link.
        TrajectoryError: A file of ``d`` cannot be read as a trajectory.
    """
    if d.is_file():
        paths = [d]  # one trajectory
    elif d.is_dir():
        paths = trajectory_files(d)  # a broken link is named, not left out; an unreadable file too
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
    return trajs


@dataclass
class _Replays:
    """What the replays of the recorded runs add up to, trajectory by trajectory."""

    budget: int
    agents: bool = False
    rows: list[Stats] = field(default_factory=list)
    agent_totals: dict[str, Stats] = field(default_factory=dict)
    totals: dict[str, Stats] = field(
        default_factory=lambda: {s: Stats("TOTAL", s) for s in [*STRATEGIES, "taskctx (all roles)"]}
    )
    series: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    other: dict[str, dict[str, int]] = field(default_factory=dict)
    finished: dict[str, bool] = field(default_factory=dict)
    bound: dict[str, Stats] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    same: int = 0
    events: int = 0
    #: trajectory -> the budget it needs: the runs taskctx refused (measured by no strategy)
    too_large: dict[str, int] = field(default_factory=dict)

    def add(self, t: Trajectory) -> bool:
        """Run ``t`` through taskctx and the baselines and add what they measure.

        Returns:
            False when ``t`` does not fit the budget (recorded in :attr:`too_large`, nothing measured).
        """
        try:
            run = _run_taskctx(t, self.budget)
        except BudgetError as exc:
            self.too_large[t.id] = exc.minimum
            return False
        constraints = extract_constraints(t.request)
        tools = ReplayTools(t).schemas()
        self.series[t.id] = {}
        for s in BASELINES:
            calls = baseline_calls(t, s, self.budget, tools)
            st = strategy_stats(t.id, s, calls, self.budget, t.request, constraints)
            self.rows.append(st)
            self.totals[s].add(st)
            self.series[t.id][s] = [c.prompt_tokens for c in calls]
        self.finished[t.id] = run.finished
        ex, allr = taskctx_stats(run, self.budget, constraints)
        self.rows.append(ex)
        self.totals["taskctx"].add(ex)
        self.totals["taskctx (all roles)"].add(allr)
        self.series[t.id]["taskctx"] = [c.prompt_tokens for c in run.calls]
        self.bound[t.id] = bound_stats(run)
        if self.agents:
            from .agents import AGENT_ROWS, agent_stats  # (a real create_agent per row: imported when asked for)

            for row in AGENT_ROWS:
                st = agent_stats(t, row, self.budget, constraints)
                self.rows.append(st)
                self.agent_totals.setdefault(row, Stats("TOTAL", row)).add(st)
        roles: dict[str, int] = {}
        for c in run.other_calls:
            roles[c.role] = roles.get(c.role, 0) + 1
        self.other[t.id] = roles
        times, _, same = measure_overhead(run.stores, run.events, t, self.budget)
        self.times += times
        self.same += same
        self.events += len(run.events)
        run.stores.close()
        return True


def _synthetic(
    budget: int, synthetic_events: int, checkpoint_events: tuple[int, ...]
) -> tuple[list[Timing], dict[int, int], dict[int, dict[str, int]]]:
    """The overhead timings and checkpoint bytes of a synthetic run long enough for both."""
    overhead: list[Timing] = []
    cp: dict[int, int] = {}
    cp_parts: dict[int, dict[str, int]] = {}
    need = max([synthetic_events, *checkpoint_events], default=0)
    if not need:
        return overhead, cp, cp_parts
    # about 3.3 events per executor step when no error occurs; run until the log is long enough
    n_steps = max(10, int(need / 3.2) + 10)
    t = synthetic_trajectory(n_steps)
    run = _run_taskctx(t, budget)
    if synthetic_events:
        lo = int(synthetic_events * 0.9)
        times, _, same = measure_overhead(run.stores, run.events, t, budget, window=(lo, synthetic_events))
        overhead.append(
            timing(f"SYNTHETIC run, executor steps at {lo}-{synthetic_events} events", times, synthetic_events, same)
        )
        times, _, same = measure_overhead(run.stores, run.events, t, budget, window=(0, synthetic_events))
        overhead.append(
            timing(f"SYNTHETIC run, all executor steps up to {synthetic_events} events", times, synthetic_events, same)
        )
    if checkpoint_events:
        cp, cp_parts = checkpoint_sizes(run.events, checkpoint_events)
    run.stores.close()
    return overhead, cp, cp_parts


def run_bench(
    dir: str | Path = DEFAULT_DIR,
    budget: int = 8_000,
    *,
    limit: int | None = None,
    only: list[str] | None = None,
    synthetic_events: int = 1_000,
    checkpoint_events: tuple[int, ...] = (100, 1_000, 5_000),
    stress: bool = False,
    agents: bool = False,
) -> BenchResult:
    """Run every trajectory through the five strategies, plus the synthetic measures.

    Args:
        dir: A folder of recorded runs (``*.jsonl``) or one such file.
        budget: The token budget of every strategy.
        limit: Run only the first N trajectories.
        only: Run only the trajectories with these ids.
        synthetic_events: Events of the synthetic run the overhead is timed on (0: skip).
        checkpoint_events: Event counts at which checkpoint bytes are measured (empty: skip).
        stress: Add the stress set (:mod:`.stress`, about a minute).
        agents: Add the agent rows (:mod:`.agents`): each run through a real ``create_agent`` agent
            with TaskContextMiddleware, SummarizationMiddleware and ContextEditingMiddleware.

    Returns:
        The :class:`BenchResult`.

    Raises:
        FileNotFoundError: ``dir`` does not exist or holds no trajectory.
        BudgetError: No trajectory fits ``budget`` (one that does not is a row of
            :attr:`BenchResult.too_large`, with the budget it needs; the others are measured).
    """
    t_start = time.perf_counter()
    loaded = _load(Path(dir), only, limit)
    rep = _Replays(budget, agents=agents)
    trajs = [t for t in loaded if rep.add(t)]
    if not trajs:
        need = ", ".join(f"{k} needs {v:,}" for k, v in rep.too_large.items())
        raise BudgetError(f"no trajectory of {dir} fits --budget {budget} ({need}); rerun with a larger --budget")
    label = f"real runs ({len(trajs)} trajectories, {rep.events} events in all)"
    overhead = [timing(label, rep.times, rep.events, rep.same)]
    synthetic, cp, cp_parts = _synthetic(budget, synthetic_events, checkpoint_events)
    stress_rows = run_stress(budget) if stress else []
    return BenchResult(
        budget=budget,
        trajectories=[t.id for t in trajs],
        steps={t.id: len(t.steps) for t in trajs},
        rows=rep.rows,
        totals=rep.totals,
        series=rep.series,
        other_roles=rep.other,
        overhead=overhead + synthetic,
        checkpoint=cp,
        checkpoint_parts=cp_parts,
        finished=rep.finished,
        seconds=round(time.perf_counter() - t_start, 1),
        bound=rep.bound,
        stress=stress_rows,
        too_large=rep.too_large,
        too_large_steps={t.id: len(t.steps) for t in loaded if t.id in rep.too_large},
        agent_totals=rep.agent_totals,
    )
