"""``taskctx bench`` on a folder of the user's own: a run too large for the budget is a row, the rest are measured.

The folder is made in tmp from two shared runs (symlinks): ``moatless-django-15695`` (11 steps, a
short request) fits 3,000 tokens; ``openhands-ponyc-4595`` (23 steps, a 5,653-character request)
does not, and the folder lacks ``openhands-ponyc-4588``, the run the scale legs repeat by default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context import BudgetError, load_trajectory
from graphs.bench import run_bench
from graphs.bench.scale import SCALE_TRAJECTORY, run_scale, scale_run
from graphs.bench.strategies import STRATEGIES, run_taskctx
from graphs.bench.table import markdown
from graphs.cli import app

FITS, TOO_LARGE = "moatless-django-15695", "openhands-ponyc-4595"
BUDGET = 3_000


@pytest.fixture(scope="module")
def folder(trajectories_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("own-runs")
    for tid in (FITS, TOO_LARGE):
        src = trajectories_dir / f"{tid}.jsonl"
        if not src.is_file():
            pytest.skip(f"shared trajectory {src} not found")
        (d / src.name).symlink_to(src)
    return d


@pytest.fixture(scope="module")
def needed(folder: Path) -> int:
    """The budget the large run needs, as taskctx itself says when it refuses it."""
    with pytest.raises(BudgetError) as info:
        run_taskctx(load_trajectory(folder / f"{TOO_LARGE}.jsonl"), BUDGET)
    return info.value.minimum


def test_a_run_too_large_is_a_row_and_the_rest_are_measured(folder: Path, needed: int) -> None:
    r = run_bench(folder, BUDGET, synthetic_events=0, checkpoint_events=())
    assert needed > BUDGET
    assert r.trajectories == [FITS] and r.too_large == {TOO_LARGE: needed}
    assert r.too_large_steps == {TOO_LARGE: 23}
    assert sorted({s.trajectory for s in r.rows}) == [FITS]
    assert [s.strategy for s in r.rows] == list(STRATEGIES)
    assert r.stats(FITS, "taskctx").calls == 11 and r.finished == {FITS: True}
    md = markdown(r)
    assert f"| {TOO_LARGE} | 23 | no: does not fit --budget 3,000 | {needed:,} |" in md
    assert f"| {TOO_LARGE} | 23 | - | - | - | - | - | does not fit --budget 3,000: needs {needed:,} |" in md
    assert md.startswith("# taskctx bench: 1 trajectories, budget 3,000 tokens\n\n1 more do not fit the budget")


def test_no_run_fits_names_each_run_and_the_budget_it_needs(folder: Path, needed: int) -> None:
    with pytest.raises(BudgetError) as info:
        run_bench(folder, BUDGET, only=[TOO_LARGE], synthetic_events=0, checkpoint_events=())
    assert str(info.value) == (
        f"no trajectory of {folder} fits --budget 3000 ({TOO_LARGE} needs {needed:,}); rerun with a larger --budget"
    )


def test_scale_legs_take_their_run_from_the_folder(folder: Path, tmp_path: Path) -> None:
    assert not (folder / f"{SCALE_TRAJECTORY}.jsonl").exists()
    assert scale_run(folder) == folder / f"{TOO_LARGE}.jsonl"  # the longest (23 steps > 11)
    assert scale_run(folder, exclude={TOO_LARGE}) == folder / f"{FITS}.jsonl"
    assert scale_run(folder, exclude={TOO_LARGE, FITS}) is None
    assert scale_run(folder / f"{FITS}.jsonl") == folder / f"{FITS}.jsonl"
    (tmp_path / "empty").mkdir()
    assert run_scale(tmp_path / "empty", ()) == [] and run_scale(tmp_path / "empty", (100,)) == []
    assert run_scale(tmp_path / "missing", ()) == []  # no legs: no run is looked for


def test_cli_bench_on_a_folder_of_own_runs(folder: Path, tmp_path: Path, needed: int) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app, ["bench", str(folder), "--budget", str(BUDGET), "--scale", "", "--synthetic", "0", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert f"| {TOO_LARGE} | 23 | no: does not fit --budget 3,000 | {needed:,} |" in r.output
    assert "scale legs skipped" not in r.output and "## Scale" not in r.output
    assert sorted(p.name for p in out.iterdir()) == [
        "effective_cost.png",
        "prompt_tokens.png",
        "results.csv",
        "results.md",
    ]
    md = (out / "results.md").read_text(encoding="utf-8")
    assert f"| {FITS} | 11 |" in md and "## Runs that do not fit --budget 3,000" in md


def test_a_request_with_a_password_is_retained_with_its_placeholder(folder: Path, tmp_path: Path) -> None:
    """Retention counts the request verbatim with its secret as the placeholder; no prompt holds the value."""
    lines = (folder / f"{FITS}.jsonl").read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    head["task"] += "\nThe staging admin password: Tr0ub4dor&3-horse"
    (tmp_path / f"{FITS}.jsonl").write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n", encoding="utf-8")
    traj = load_trajectory(tmp_path / f"{FITS}.jsonl")
    assert traj.request.endswith("password: Tr0ub4dor&3-horse")
    r = run_bench(tmp_path, 8_000, synthetic_events=0, checkpoint_events=())
    tc = r.stats(FITS, "taskctx")
    assert tc.retention == 1.0 and tc.calls == 11
    run = run_taskctx(traj, 8_000)
    assert run.request == traj.request.replace("Tr0ub4dor&3-horse", "{{secret:CREDENTIAL}}")
    prompts = [c.text for c in run.calls + run.other_calls]
    assert all(run.request in p for p in prompts) and not any("Tr0ub4dor" in p for p in prompts)
    run.stores.close()


def test_a_broken_link_to_a_run_is_named_not_skipped(folder: Path, tmp_path: Path) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    (d / f"{FITS}.jsonl").symlink_to(folder / f"{FITS}.jsonl")
    gone = tmp_path / "moved-away.jsonl"
    (d / "lost.jsonl").symlink_to(gone)
    r = CliRunner().invoke(app, ["bench", str(d), "--scale", "", "--synthetic", "0", "--out", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"error: {d / 'lost.jsonl'} is a symlink to {gone}, which does not exist; fix the link or remove it "
        f"(every *.jsonl in {d} is a recorded run)"
    )
    assert list((tmp_path / "out").iterdir()) == []  # nothing measured, nothing written
