"""``taskctx bench`` on two small shared trajectories: structural values only (no timing, no targets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs.bench import run_bench, write_outputs
from graphs.bench.strategies import BASELINES, STRATEGIES

SMALL = ["moatless-django-15695", "moatless-matplotlib-23299"]  # 11 and 17 steps, both with compressed outputs


@pytest.fixture(scope="module")
def result(trajectories_dir: Path):
    if not all((trajectories_dir / f"{t}.jsonl").is_file() for t in SMALL):
        pytest.skip(f"shared trajectories {SMALL} not found under {trajectories_dir}")
    return run_bench(trajectories_dir, 8_000, only=SMALL, synthetic_events=200, checkpoint_events=(100, 200))


def test_five_strategies_and_call_counts(result) -> None:
    assert result.strategies == list(STRATEGIES) and len(result.strategies) == 5
    assert sorted(result.trajectories) == sorted(SMALL)
    for tid in SMALL:
        n = result.steps[tid]
        for s in BASELINES:
            assert result.stats(tid, s).calls == n, (tid, s)
            assert len(result.series[tid][s]) == n
        # taskctx: every recorded action once; complete_step rides on each plan step's last action
        # (10 actions per step), so no call of its own when that action succeeded
        assert result.stats(tid, "taskctx").calls == n
        assert result.finished[tid]


def test_taskctx_cheaper_than_naive_and_sound(result) -> None:
    for tid in SMALL:
        naive, tc = result.stats(tid, "naive"), result.stats(tid, "taskctx")
        assert naive.input_tokens > tc.input_tokens
        assert tc.orphans == 0
        assert tc.compressed and tc.compressed > 0
        assert tc.restorability == 1.0
        assert tc.retention == 1.0 and tc.floor == 1.0
    for s in [*STRATEGIES, "taskctx (all roles)"]:
        assert result.totals[s].orphans == 0
    assert result.totals["taskctx"].restorability == 1.0
    # masking elides observations once more than 5 exist; naive never does
    assert result.totals["naive"].elided == 0 and result.totals["masking"].elided > 0
    assert set(result.checkpoint) == {100, 200} and all(b > 0 for b in result.checkpoint.values())
    assert [o.steps > 0 for o in result.overhead] == [True, True, True]


def test_files_written(result, tmp_path) -> None:
    files = write_outputs(result, tmp_path / "bench")
    names = {f.name for f in files}
    assert names == {"results.md", "results.csv", "prompt_tokens.png", "effective_cost.png"}
    for f in files:
        assert f.is_file() and f.stat().st_size > 0
    md = (tmp_path / "bench" / "results.md").read_text()
    for s in STRATEGIES:
        assert f"| {s} |" in md
    lines = (tmp_path / "bench" / "results.csv").read_text().splitlines()
    # header, per-trajectory rows, totals (+ all-roles), the optimistic bound per trajectory
    assert len(lines) == 1 + len(SMALL) * 5 + 6 + len(SMALL)
    assert sum(1 for ln in lines if ",optimistic bound," in ln) == len(SMALL)
    assert (tmp_path / "bench" / "prompt_tokens.png").read_bytes()[:4] == b"\x89PNG"


def test_bound_and_split(result) -> None:
    from graphs.bench.split import half_totals, halves, split_markdown

    for tid in SMALL:
        b, tc = result.bound[tid], result.stats(tid, "taskctx")
        # one bound call per executor call, never dearer than taskctx's call, under every rule
        assert b.calls == tc.calls and b.input_tokens < tc.input_tokens
        assert all(b.costs[k] < tc.costs[k] for k in tc.costs) and b.effective_cost < tc.effective_cost
    # both runs are moatless ones: one in each half
    assert halves(result.trajectories) == {"A": ["moatless-django-15695"], "B": ["moatless-matplotlib-23299"]}
    a = half_totals(result, ["moatless-django-15695"])
    assert a["taskctx"].effective_cost == result.stats("moatless-django-15695", "taskctx").effective_cost
    md = "\n".join(split_markdown(result))
    assert "### Half A (1 runs): moatless-django-15695" in md and "### Half B (1 runs): moatless-matplotlib-23299" in md
