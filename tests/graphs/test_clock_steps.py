"""Time is not order: a clock that steps back or forward between (or within) runs leaves a sound
task. Resumes complete, ``doctor`` says ok with a ``clock_step`` note, ``inspect`` notes it.

The clock is moved where every event gets its timestamp (``context.events.utc_now``, which
``new_event`` reads at each call).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import context
import context.events
import graphs
import nodes
from graphs.cli import app
from nodes.attempts import attempt_of
from nodes.testing import complete, plan, review, tool_call


class Shout:
    def schemas(self):
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool):
        return False

    def execute(self, call_id, tool, arguments):
        return arguments["text"].upper()


def _model() -> nodes.ScriptedChatModel:
    return nodes.ScriptedChatModel(
        script={
            "planner": [plan("Shout hello", "Shout bye", "Shout again")],
            "executor": [
                *(tool_call("shout", {"text": "hello"}, id="c1"), complete("shouted hello")),
                *(tool_call("shout", {"text": "bye"}, id="c2"), complete("shouted bye")),
                *(tool_call("shout", {"text": "again"}, id="c3"), complete("shouted again")),
            ],
            "reviewer": [review("approve", "all were shouted")],
        }
    )


def _clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    def now() -> str:
        t = datetime.now(UTC) + offset
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    monkeypatch.setattr(context.events, "utc_now", now)


@pytest.mark.parametrize(
    "offsets",
    [
        # a first run 1 h fast, the clock corrected before the resume
        (timedelta(hours=1), timedelta(0), timedelta(0)),
        # a resume on a clock 5 s behind, then the right clock again
        (timedelta(0), timedelta(seconds=-5), timedelta(0)),
        # steps forward only (a laptop waking): never a note
        (timedelta(0), timedelta(hours=2), timedelta(days=1)),
    ],
    ids=["fast-then-corrected", "resume-behind", "forward-only"],
)
def test_clock_steps_leave_a_sound_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offsets: tuple[timedelta, ...]
) -> None:
    db = str(tmp_path / "t.sqlite")
    project = graphs.open_project(db)
    g = project.graph(_model(), tools=Shout())
    _clock(monkeypatch, offsets[0])
    first = project.run(g, "Shout hello, bye, again.", task_id="t1", max_steps=1)
    assert first.stopped_early and first.state.progress.executor_steps == 1
    _clock(monkeypatch, offsets[1])
    second = project.resume("t1", graph=g, max_steps=1)
    assert second.stopped_early and second.state.progress.executor_steps == 2
    _clock(monkeypatch, offsets[2])
    done = project.resume("t1", graph=g)
    assert done.state.control.status == "completed" and done.state.progress.executor_steps == 3
    events = project.stores.events.read("t1")
    kinds = [e.kind for e in events]
    assert kinds.count("resume.started") == 2 and kinds[-1] == "task.completed"
    backs = [e for a, e in zip(events, events[1:]) if e.timestamp < a.timestamp]
    project.close()

    r = CliRunner().invoke(app, ["doctor", "t1", "--db", db])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == f"task t1: ok ({len(events)} events; started through the Python API)"
    notes = lines[1:]
    if offsets[1] >= offsets[0] and offsets[2] >= offsets[1]:  # forward only
        assert backs == [] and notes == []
    else:
        assert len(backs) == 1  # the first event dated by the slower clock
        e = backs[0]
        assert notes == [
            f"  note: clock_step: seq {e.seq} ({e.kind}) is dated {e.timestamp}, "
            f"{_gap(events[e.seq - 2].timestamp, e.timestamp)} before seq {e.seq - 1} "
            "(the clock that recorded it stepped back; the log's order is its seq, not damage)"
        ]
        assert e.kind == "resume.started"
    shown = CliRunner().invoke(app, ["inspect", "t1", "--db", db])
    assert shown.exit_code == 0 and "is damaged" not in shown.output
    assert ("note: task t1: clock_step: seq" in shown.output) == bool(backs)


def _gap(before: str, after: str) -> str:
    def t(s: str) -> float:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    return f"{t(before) - t(after):.3f} s"


def test_a_step_back_inside_one_run_is_noted_not_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock steps back 30 s between two node runs of one run (an NTP step mid-run)."""
    db = str(tmp_path / "t.sqlite")
    project = graphs.open_project(db)
    g = project.graph(_model(), tools=Shout())
    calls = {"n": 0}

    def now() -> str:
        calls["n"] += 1
        t = datetime.now(UTC) - (timedelta(seconds=30) if calls["n"] > 6 else timedelta(0))
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    monkeypatch.setattr(context.events, "utc_now", now)
    done = project.run(g, "Shout hello, bye, again.", task_id="t2")
    assert done.state.control.status == "completed"
    events = project.stores.events.read("t2")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    (step,) = [e for a, e in zip(events, events[1:]) if e.timestamp < a.timestamp]
    assert step.seq == 7
    project.close()
    r = CliRunner().invoke(app, ["doctor", "t2", "--db", db])
    assert r.exit_code == 0, r.output
    gap = _gap(events[5].timestamp, step.timestamp)
    assert 29.0 < float(gap.split()[0]) <= 30.0
    assert r.output.splitlines()[1:] == [
        f"  note: clock_step: seq 7 ({step.kind}) is dated {step.timestamp}, {gap} before seq 6 "
        "(the clock that recorded it stepped back; the log's order is its seq, not damage)"
    ]


class _Counted(Shout):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def execute(self, call_id, tool, arguments):
        self.calls.append(call_id)
        return super().execute(call_id, tool, arguments)


def _process_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    """A new process on a clock ``offset`` off: event timestamps and LangGraph's checkpoint ids
    (``time.time_ns``) move; LangGraph's in-process memory of its last id is gone."""
    import time

    from langgraph.checkpoint.base import id as ids

    base_ns, base = _REAL_CLOCK
    shift = int(offset.total_seconds() * 1e9)
    monkeypatch.setattr(time, "time_ns", lambda: base_ns() + shift)
    monkeypatch.setattr(time, "time", lambda: base() + offset.total_seconds())
    monkeypatch.setattr(ids, "_last_v6_timestamp", None)
    _clock(monkeypatch, offset)


def _real_clock() -> tuple[Any, Any]:
    import time

    return time.time_ns, time.time


_REAL_CLOCK = _real_clock()


@pytest.mark.parametrize("prune", [False, True], ids=["kept", "pruned"])
@pytest.mark.parametrize(
    "offsets",
    [(timedelta(hours=1), timedelta(0), timedelta(0)), (timedelta(0), timedelta(seconds=-60), timedelta(seconds=-60))],
    ids=["fast-then-corrected", "resumes-behind"],
)
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_whole_clock_step_back_between_runs_continues_the_task(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    backend: str,
    offsets: tuple[timedelta, ...],
    prune: bool,
) -> None:
    """Each run is a process on its own clock, which moves LangGraph's checkpoint ids too: the
    resumes on the slower clock still write the checkpoint every later resume loads."""
    from graphs.diagnosis import diagnose

    db = str(tmp_path / "t.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_db")
    tools = _Counted()
    project = graphs.open_project(db)
    g = project.graph(_model(), tools=tools)
    _process_clock(monkeypatch, offsets[0])
    first = project.run(g, "Shout hello, bye, again.", task_id="t1", max_steps=1, prune=prune)
    assert first.stopped_early and first.state.progress.executor_steps == 1
    assert tools.calls == ["c1"]
    _process_clock(monkeypatch, offsets[1])
    second = project.resume("t1", graph=g, max_steps=1, prune=prune)
    assert second.stopped_early and second.state.progress.executor_steps == 2
    assert [c.id for c in second.state.evidence.recent_tool_calls] == ["c1", "c2"]
    assert tools.calls == ["c1", "c2"]
    _process_clock(monkeypatch, offsets[2])
    done = project.resume("t1", graph=g, prune=prune)
    assert done.state.control.status == "completed" and done.state.progress.executor_steps == 3
    assert tools.calls == ["c1", "c2", "c3"]
    events = project.stores.events.read("t1")
    snap = g.get_state({"configurable": {"thread_id": "t1"}})
    assert snap.values["events"].cursor == events[-1].seq == done.state.events.cursor
    assert diagnose(project.stores, project.checkpointer, "t1") == []
    project.close()


def test_doctor_names_a_task_stranded_by_a_clock_step_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task an earlier taskctx stranded (its ids not kept monotonic): doctor and resume name the cause."""
    import graphs.checkpoint

    monkeypatch.setattr(graphs.checkpoint, "keep_ids_after", lambda checkpoint_id: None)
    db = str(tmp_path / "t.sqlite")
    project = graphs.open_project(db)
    g = project.graph(_model(), tools=Shout())
    _process_clock(monkeypatch, timedelta(hours=1))
    project.run(g, "Shout hello, bye, again.", task_id="t1", max_steps=1)
    _process_clock(monkeypatch, timedelta(0))
    stranded = project.resume("t1", graph=g, max_steps=1)
    assert stranded.state.progress.executor_steps == 1  # what LangGraph loads back: the older checkpoint
    events = project.stores.events.read("t1")
    tup = project.checkpointer.get_tuple({"configurable": {"thread_id": "t1"}})
    cursor = tup.checkpoint["channel_values"]["events"].cursor
    later = next(e for e in events[cursor:] if (a := attempt_of(e.causation_id)) is not None and a[0] > cursor)
    project.close()
    finding = (
        f"checkpoint: the latest one ({tup.config['configurable']['checkpoint_id']}) has folded {cursor} events, "
        f"but seq {later.seq} ({later.kind}) and after were recorded by node runs on a later checkpoint that sorts "
        "below it: LangGraph names checkpoints by the time of the clock that wrote them and loads the greatest, so "
        "a run on a clock that was ahead (then set back) hides the checkpoints written after it; resume would "
        "continue from the older one"
    )
    r = CliRunner().invoke(app, ["doctor", "t1", "--db", db])
    assert r.exit_code == 2, r.output
    assert r.output.splitlines()[:2] == ["task t1: 1 problem", f"  - {finding}"]
    project = graphs.open_project(db)
    with pytest.raises(context.DamagedStoreError) as err:
        project.resume("t1", graph=project.graph(_model(), tools=Shout()))
    assert err.value.problems == [finding]
    project.close()
