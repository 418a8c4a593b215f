"""The fork legs of ``taskctx bench --fork`` (:mod:`graphs.bench.fork_bench`): the synthetic parent
is a sound log of N executor steps, a fork of it writes one event row and one checkpoint, and the
bytes a fork writes do not grow with the parent's length (times are measured by the bench only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import InvalidInputError, replay
from context.verify import check_events
from graphs.bench.fork_bench import (
    EARLY_STEP,
    ForkRow,
    fork_markdown,
    parse_fork_legs,
    run_leg,
    synthetic_task,
)
from graphs.project import open_project


def test_the_synthetic_parent_is_a_sound_log_of_n_steps(tmp_path: Path) -> None:
    with open_project(tmp_path / "s.sqlite") as p:
        last = synthetic_task(p.stores, "t", 60)
        events = p.stores.events.read("t")
    assert last == len(events) == 3 + 3 * 60
    assert check_events(events) == []
    state = replay(events)
    assert state.progress.executor_steps == 60
    assert [e.causation_id for e in events[-3:]] == ["t#180:executor", "t#180:executor", "t#182:tools"]
    assert len(state.evidence.recent_tool_calls) <= 22  # the transcript restarts every 20 steps


def test_a_fork_writes_the_same_bytes_whatever_the_parents_length(tmp_path: Path) -> None:
    short, long = run_leg(EARLY_STEP + 10, tmp_path, 1), run_leg(4 * EARLY_STEP, tmp_path, 1)
    assert (short.events, long.events) == (3 + 3 * 60, 3 + 3 * 200)
    # forked at the same step: the same rows but for the ids, times and counts' digits in them
    assert abs(long.early_bytes - short.early_bytes) < 100
    assert abs(long.end_bytes - short.end_bytes) < 100
    with open_project(tmp_path / f"fork-{4 * EARLY_STEP}.sqlite") as p:
        assert p.stores.events.count("end-0") == 3 + 3 * 200 + 1
        own = p.conn.execute("SELECT COUNT(*) FROM taskctx_events WHERE task_id = 'end-0'").fetchone()[0]
        assert own == 1


def test_the_legs_parse_and_print() -> None:
    assert parse_fork_legs("100, 1000,10000") == (100, 1_000, 10_000)
    assert parse_fork_legs("") == ()
    with pytest.raises(InvalidInputError, match=r"--fork takes executor steps above 50, comma-separated; got '20'"):
        parse_fork_legs("100,20")
    table = fork_markdown([ForkRow(100, 303, 51.4, 6342, 77.0, 8213, 169.6, 8204)])
    assert table.splitlines()[-1] == "| 100 | 303 | 51 | 6,342 | 77 | 8,213 | 170 | 8,204 |"
