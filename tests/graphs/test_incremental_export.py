"""An export that is current is not written again, and one that is behind
gets only the new events; either way the folder holds the bytes a whole export writes.

A replay of a shared trajectory stopped after 3 executor steps is exported, continued to its
end and exported again into the same folder (appended) and into a fresh one (whole): the files
are equal byte for byte. Exporting the finished task again reads no event after the export's
cursor (nor the log before it: only the two rows whose ids the export noted) and writes
nothing: mtimes and bytes unchanged; ``taskctx resume`` of the finished task likewise.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from context import load_trajectory
from graphs.cli import app
from graphs.orchestrator import build_orchestrator, new_task
from graphs.project import open_project
from graphs.runner import EXPORT_MARK, export_run, run_graph
from nodes import ReplayChatModel, ReplayTools

FILES = ["calls.jsonl", "context_pack.md", "costs.json", "manifests.jsonl", "state.json", "trace.jsonl"]


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


class _Spy:
    """Wraps an event log: every ``read``/``iter`` call's (after, limit, kinds) and the seqs it returned."""

    def __init__(self, log: Any):
        self.log, self.calls = log, []

    def read(self, task_id: str, after: int = 0, limit: int | None = None, kinds: Any = None, **kw: Any) -> Any:
        got = self.log.read(task_id, after, limit, kinds, **kw)
        self.calls.append((after, limit, kinds, [e.seq for e in got]))
        return got

    def iter(self, task_id: str, after: int = 0, limit: int | None = None, kinds: Any = None, **kw: Any) -> Any:
        got = self.read(task_id, after, limit, kinds, **kw)
        return iter(got)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


def test_an_export_behind_gets_the_new_events_and_a_current_one_is_left_as_it_is(
    trajectories_dir: Path, tmp_path: Path
) -> None:
    traj = load_trajectory(trajectories_dir / "moatless-requests-863.jsonl")
    project = open_project(str(tmp_path / "t.sqlite"))
    try:
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj),
            tools=ReplayTools(traj),
            checkpointer=project.checkpointer,
            stores=project.stores,
        )
        run_graph(g, project.stores, "x1", new_task(traj.request, "x1"), stop_after=3)
        folder = export_run(project.stores, "x1", tmp_path / "a")
        mark = json.loads((folder / EXPORT_MARK).read_text())
        stopped_at = project.stores.events.last_seq("x1")
        assert mark["cursor"] == stopped_at and mark["task_id"] == "x1"
        pack_before = (folder / "context_pack.md").read_bytes()
        result = run_graph(g, project.stores, "x1", None, resume=True)
        assert result.finished
        last = project.stores.events.last_seq("x1")
        assert last > stopped_at
        spy = _Spy(project.stores.events)
        project.stores.events = spy
        export_run(project.stores, "x1", tmp_path / "a")  # appended
        project.stores.events = spy.log
        # the appending export read the two noted rows, then only the events after its cursor
        assert spy.calls == [
            (stopped_at - 1, 1, None, [stopped_at]),
            (0, 1, None, [1]),
            (stopped_at, None, None, list(range(stopped_at + 1, last + 1))),
        ]
        whole = export_run(project.stores, "x1", tmp_path / "b")
        assert [(p.name, p.read_bytes()) for p in sorted(whole.iterdir()) if p.name in FILES] == [
            (p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.name in FILES
        ]
        assert (folder / "context_pack.md").read_bytes() != pack_before  # the last executor prompt moved on
        assert json.loads((folder / EXPORT_MARK).read_text())["cursor"] == last

        # current: nothing written, nothing read after the cursor
        before = _snapshot(folder)
        spy = _Spy(project.stores.events)
        project.stores.events = spy
        assert export_run(project.stores, "x1", tmp_path / "a") == folder
        project.stores.events = spy.log
        assert spy.calls == [(last - 1, 1, None, [last]), (0, 1, None, [1]), (last, None, None, [])]
        assert _snapshot(folder) == before

        # an export folder that does not match its record (edited, or another log) is written whole
        (folder / "state.json").write_text("{}\n")
        export_run(project.stores, "x1", tmp_path / "a")
        assert (folder / "state.json").read_bytes() == (whole / "state.json").read_bytes()
        (folder / EXPORT_MARK).write_text(
            json.dumps({**json.loads((folder / EXPORT_MARK).read_text()), "first_id": "x"})
        )
        os.utime(folder / "trace.jsonl", ns=(0, 0))
        export_run(project.stores, "x1", tmp_path / "a")
        assert (folder / "trace.jsonl").stat().st_mtime_ns != 0
        assert (folder / "trace.jsonl").read_bytes() == (whole / "trace.jsonl").read_bytes()
    finally:
        project.close()


def test_resume_of_a_finished_task_leaves_a_current_export_as_it_is(trajectories_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    shutil.copy(trajectories_dir / "moatless-requests-863.jsonl", src)
    db, out = str(tmp_path / "t.sqlite"), tmp_path / "runs"
    r = CliRunner().invoke(app, ["replay", str(src), "--db", db, "--out", str(out), "--task-id", "f1"])
    assert r.exit_code == 0, r.output
    folder = out / "f1"
    assert sorted(p.name for p in folder.iterdir()) == sorted([EXPORT_MARK, *FILES])
    (said,) = [line for line in r.output.splitlines() if line.startswith("exported ")]
    named = said.removeprefix(f"exported {folder}/ (").removesuffix(")").split(", ")
    assert sorted(named) == FILES  # the line names every file the export wrote
    before = _snapshot(folder)
    r = CliRunner().invoke(app, ["resume", "f1", "--db", db, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output == f"task f1 is already finished (completed); nothing to resume; export current: {folder}/\n"
    assert _snapshot(folder) == before
    r = CliRunner().invoke(app, ["resume", "f1", "--db", db, "--out", str(tmp_path / "fresh")])
    assert r.output == (
        f"task f1 is already finished (completed); nothing to resume; exported {tmp_path / 'fresh' / 'f1'}/\n"
    )


def test_resume_reads_the_registry_row_once(trajectories_dir: Path, tmp_path: Path, monkeypatch: Any) -> None:
    """``taskctx resume`` of a stopped task reads its registry row once (the check reads it and
    passes it down: no second check in run_graph, no second read for the graph or the
    registered mark); the resumed run's checkpoints still carry the registered mark."""
    from context.sqlite_store import TaskRegistry
    from graphs.diagnosis import REGISTERED_MARK

    src = tmp_path / "t.jsonl"
    shutil.copy(trajectories_dir / "moatless-requests-863.jsonl", src)
    db, out = str(tmp_path / "t.sqlite"), tmp_path / "runs"
    r = CliRunner().invoke(
        app, ["replay", str(src), "--db", db, "--out", str(out), "--task-id", "s1", "--max-steps", "2"]
    )
    assert r.exit_code == 0, r.output
    reads: list[str] = []
    real = TaskRegistry.get

    def counted(self: Any, task_id: str) -> Any:
        reads.append(task_id)
        return real(self, task_id)

    monkeypatch.setattr(TaskRegistry, "get", counted)
    r = CliRunner().invoke(app, ["resume", "s1", "--db", db, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert reads == ["s1"]
    monkeypatch.undo()
    project = open_project(db)
    try:
        tup = project.checkpointer.get_tuple({"configurable": {"thread_id": "s1"}})
        assert tup.metadata[REGISTERED_MARK] is True
        assert tup.checkpoint["channel_values"]["control"].status == "completed"
    finally:
        project.close()
