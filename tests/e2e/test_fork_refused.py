"""A fork that fails writes nothing (no child events, registry row, checkpoint or workspace copy),
and a fork point past the end of the parent's log is refused naming its last seq or step."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphs.demo  # noqa: F401  (the demo task kind)
import graphs.fork as fork_module
from graphs import open_project
from graphs.cli import app

runner = CliRunner()


@pytest.fixture
def demo_db(tmp_path: Path) -> str:
    """The demo task d1 run to the end (10 executor steps, 69 events)."""
    db = str(tmp_path / "t.sqlite")
    r = runner.invoke(app, ["demo", "--db", db, "--out", str(tmp_path / "runs"), "--task-id", "d1", "--approve-all"])
    assert r.exit_code == 0, r.output
    return db


def test_a_fork_point_past_the_end_is_refused_naming_the_last_seq_and_step(demo_db: str) -> None:
    past = runner.invoke(app, ["fork", "d1", "--at", "70", "--db", demo_db])
    assert past.exit_code == 2
    assert past.stderr.strip() == (
        "error: task 'd1': seq 70 is past the end of its log, which ends at seq 69; fork at a seq from 1 to 69 "
        "(--at SEQ; taskctx inspect d1 --all shows them)"
    )
    step = runner.invoke(app, ["fork", "d1", "--at-step", "11", "--db", demo_db])
    assert step.exit_code == 2
    assert step.stderr.strip() == (
        "error: task 'd1': --at-step 11 is past its last executor step, step 10 (it ends at seq 63); fork at a "
        "step from 1 to 10"
    )
    with open_project(demo_db) as p:
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.task_ids() == ["d1"]


def test_project_fork_names_its_own_arguments_not_the_cli_flags(demo_db: str) -> None:
    """``Project.fork``'s refusals name ``at=`` and ``at_step=``, as a Python caller wrote them,
    and a fork point that is not an int is refused as such."""
    from context import InvalidInputError

    with open_project(demo_db) as p:
        cases = {
            (70, None): "task 'd1': seq 70 is past the end of its log, which ends at seq 69; fork at a seq from 1 to "
            "69 (at=SEQ; taskctx inspect d1 --all shows them)",
            (None, 11): "task 'd1': at_step=11 is past its last executor step, step 10 (it ends at seq 63); fork "
            "at a step from 1 to 10",
            (None, None): "fork at a seq (at=SEQ) or at the end of an executor step (at_step=N), one of them",
            (None, 0): "task 'd1': at_step=0 is before its first executor step; its last is step 10 (it ends at seq "
            "63); fork at a step from 1 to 10",
            ("7", None): "at='7' is not a whole number; give an int",
            (True, None): "at=True is not a whole number; give an int",
            (None, 7.0): "at_step=7.0 is not a whole number; give an int",
            (62, None): "task 'd1': seq 62 is inside a run of node 'tools' (its events go on to seq 63); fork "
            "where a node run ends: at=63, or a seq before that run",
        }
        for (at, at_step), message in cases.items():
            with pytest.raises(InvalidInputError) as refused:
                p.fork("d1", at=at, at_step=at_step)
            assert str(refused.value) == message
        assert p.stores.events.task_ids() == ["d1"]


def test_inspect_all_lists_the_fork_points_and_only_they_fork(demo_db: str) -> None:
    """``inspect --all`` (which the fork errors point to) lists every seq where a node run ends,
    and these are exactly the seqs ``fork_point`` takes."""
    from context import InvalidInputError

    out = runner.invoke(app, ["inspect", "d1", "--all", "--db", demo_db])
    assert out.exit_code == 0, out.output
    lines = out.output.split("Fork points (where a node run ends: taskctx fork d1 --at SEQ)\n")[1].splitlines()
    listed = [m.split(" ") for ln in lines for m in ln.strip().split(", ")]
    assert listed[:4] == [["#3", "planner"], ["#6", "executor"], ["#7", "tools"], ["#9", "executor"]]
    assert listed[-1] == ["#69", "reviewer"] and len(listed) == 26
    with open_project(demo_db) as p:
        takes = []
        for seq in range(1, 70):
            try:
                takes.append((seq, fork_module.fork_point(p.stores.events, "d1", at=seq).node))
            except InvalidInputError:
                pass
    assert takes == [(int(seq[1:]), node) for seq, node in listed]


def test_a_fork_that_fails_writes_nothing(demo_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> tuple[str, ...]:
        raise OSError("disk full")

    with open_project(demo_db) as p:
        ws = Path(str(p.stores.tasks.get("d1")["workspace"]))
        receipts = Path(str(p.stores.tasks.get("d1")["receipts"]))
        monkeypatch.setattr(fork_module, "_checkpoint", refused)
        with pytest.raises(OSError, match="disk full"):
            p.fork("d1", at_step=5, new_task_id="c1", workspace_at_fork=True)
        given = tmp_path / "given"
        given.mkdir()
        with pytest.raises(OSError, match="disk full"):
            p.fork("d1", at_step=5, new_task_id="c2", workspace_at_fork=True, workspace=given)
        assert given.is_dir() and list(given.iterdir()) == []  # a folder given is emptied, not removed
        for child in ("c1", "c2"):
            assert p.stores.events.last_seq(child) == 0
            assert p.stores.events.lineage(child) is None
            assert p.stores.tasks.get(child) is None
            assert p.checkpointer.get_tuple({"configurable": {"thread_id": child}}) is None
        assert not (ws.parent / "c1").exists() and not (receipts.parent / "c1").exists()
        assert p.stores.events.task_ids() == ["d1"]
        monkeypatch.undo()
        # the same fork, retried once the cause is gone: made as if the first try never happened
        r = p.fork("d1", at_step=5, new_task_id="c1", workspace_at_fork=True)
        assert (r.fork_seq, r.restored, p.stores.events.last_seq("c1")) == (28, ["proxy/nginx.conf"], 29)
        assert p.stores.events.lineage("c1").parent == "d1"


def test_a_workspace_copy_refused_writes_nothing(demo_db: str, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine\n")
    r = runner.invoke(
        app,
        [
            "fork",
            "d1",
            "--at-step",
            "5",
            "--task-id",
            "c1",
            "--workspace-at-fork",
            "--workspace",
            str(tmp_path / "full"),
            "--db",
            demo_db,
        ],
    )
    assert r.exit_code == 2
    assert "is not empty; pass an empty or new folder for the child's workspace" in r.stderr
    with open_project(demo_db) as p:
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.get("c1") is None
        assert p.checkpointer.get_tuple({"configurable": {"thread_id": "c1"}}) is None
    assert [f.name for f in (tmp_path / "full").iterdir()] == ["x"]


@pytest.mark.postgres
def test_a_failed_fork_is_taken_back_on_postgres(pg_db: str) -> None:
    from context import new_event
    from context.lineage import fork_log
    from context.pg_store import open_stores

    st = open_stores(pg_db)
    try:
        st.events.append("p", [new_event("task.created", {"task_id": "p", "original_request": "x"}, actor="user")])
        fork_log(st.events, "p", "c", 1)
        assert st.events.discard_fork("p") is False  # not a lone task.forked: nothing removed
        assert st.events.discard_fork("c") is True
        assert (st.events.last_seq("c"), st.events.lineage("c"), st.events.last_seq("p")) == (0, None, 1)
        assert fork_log(st.events, "p", "c", 1).seq == 2  # the same fork made again
    finally:
        st.close()


def test_a_workspace_copy_that_fails_leaves_the_given_folder_empty_and_names_the_file(
    demo_db: str, tmp_path: Path
) -> None:
    import os

    with open_project(demo_db) as p:
        ws = Path(str(p.stores.tasks.get("d1")["workspace"]))
    os.mkfifo(ws / "docs" / "zz.fifo")
    given = tmp_path / "given"
    given.mkdir()
    args = ["fork", "d1", "--at-step", "5", "--task-id", "c1", "--workspace-at-fork", "--db", demo_db]
    r = runner.invoke(app, [*args, "--workspace", str(given)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"error: task 'd1': docs/zz.fifo in its workspace {ws} could not be copied: is a named pipe; move it out "
        "of the workspace and fork again, or fork without the workspace copy (no --workspace-at-fork, or "
        "workspace_at_fork=False): the child then shares the workspace"
    )
    assert given.is_dir() and list(given.iterdir()) == []  # as it was: the same command can run again
    default = runner.invoke(app, args)
    assert default.exit_code == 2 and "docs/zz.fifo" in default.stderr
    assert not (ws.parent / "c1").exists()
    with open_project(demo_db) as p:
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.get("c1") is None
        assert p.checkpointer.get_tuple({"configurable": {"thread_id": "c1"}}) is None
    (ws / "docs" / "zz.fifo").unlink()
    again = runner.invoke(app, [*args, "--workspace", str(given)])
    assert again.exit_code == 0, again.output
    assert (given / "proxy" / "nginx.conf").is_file()


def test_a_workspace_copy_in_the_parents_workspace_is_refused_naming_both(demo_db: str) -> None:
    with open_project(demo_db) as p:
        ws = Path(str(p.stores.tasks.get("d1")["workspace"])).resolve()
    before = sorted(str(f.relative_to(ws)) for f in ws.rglob("*"))
    args = ["fork", "d1", "--at-step", "5", "--task-id", "c1", "--workspace-at-fork", "--db", demo_db]
    for dest, where in ((ws / "sub", "is inside"), (ws, "is"), (ws.parent, "holds")):
        r = runner.invoke(app, [*args, "--workspace", str(dest)])
        assert r.exit_code == 2
        assert r.stderr.strip() == (
            f"error: the child's workspace {dest} {where} the workspace of task 'd1', {ws}, which a fork only "
            "reads; give a folder outside it"
        )
    assert sorted(str(f.relative_to(ws)) for f in ws.rglob("*")) == before  # no sub/ made
    with open_project(demo_db) as p:
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.get("c1") is None
        assert p.checkpointer.get_tuple({"configurable": {"thread_id": "c1"}}) is None


def test_a_workspace_copy_in_another_tasks_workspace_is_refused_naming_it(demo_db: str) -> None:
    """Not the parent's only: a sibling's (a child with its own copy) or any task's workspace."""
    args = ["fork", "d1", "--at-step", "5", "--workspace-at-fork", "--db", demo_db]
    assert runner.invoke(app, [*args, "--task-id", "s1"]).exit_code == 0  # a copy beside d1's
    with open_project(demo_db) as p:
        sib = Path(str(p.stores.tasks.get("s1")["workspace"])).resolve()
    before = sorted(str(f.relative_to(sib)) for f in sib.rglob("*"))
    for dest, where in ((sib / "docs" / "x", "is inside"), (sib, "is")):
        r = runner.invoke(app, [*args, "--task-id", "s2", "--workspace", str(dest)])
        assert r.exit_code == 2
        assert r.stderr.strip() == (
            f"error: the child's workspace {dest} {where} the workspace of task 's1', {sib}, another task's; "
            "give a folder outside every task's workspace"
        )
    assert sorted(str(f.relative_to(sib)) for f in sib.rglob("*")) == before
    with open_project(demo_db) as p:
        assert sorted(p.stores.events.task_ids()) == ["d1", "s1"] and p.stores.tasks.get("s2") is None


def test_a_workspace_folder_without_workspace_at_fork_is_refused(demo_db: str, tmp_path: Path) -> None:
    from context import InvalidInputError

    dest = tmp_path / "w1"
    r = runner.invoke(
        app, ["fork", "d1", "--at-step", "5", "--task-id", "w1", "--workspace", str(dest), "--db", demo_db]
    )
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"error: --workspace {dest} is where the copy of --workspace-at-fork goes, and that is not given; add "
        "--workspace-at-fork, or drop --workspace to share the parent's workspace"
    )
    with open_project(demo_db) as p:
        with pytest.raises(InvalidInputError) as refused:
            p.fork("d1", at_step=5, new_task_id="w1", workspace=dest)
        assert str(refused.value) == (
            f"workspace={str(dest)!r} is where the copy of workspace_at_fork=True goes, and that is not given; pass "
            "workspace_at_fork=True too, or drop workspace= to share the parent's workspace"
        )
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.get("w1") is None
    assert not dest.exists()


def test_a_child_id_that_looks_like_an_option_is_refused(demo_db: str) -> None:
    r = runner.invoke(app, ["fork", "d1", "--at-step", "5", "--task-id", "-x", "--db", demo_db])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "error: --task-id '-x' is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' (not starting "
        "with '.' or '-')"
    )
    with open_project(demo_db) as p:
        assert p.stores.events.task_ids() == ["d1"] and p.stores.tasks.task_ids() == ["d1"]


def test_a_taken_child_id_is_refused_naming_the_callers_argument(demo_db: str) -> None:
    from context import InvalidInputError
    from graphs import thread_config

    r = runner.invoke(app, ["fork", "d1", "--at-step", "5", "--task-id", "d1", "--db", demo_db])
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: task 'd1' already exists in {demo_db}; pick another --task-id"
    with open_project(demo_db) as p:
        with pytest.raises(InvalidInputError) as api:
            p.fork("d1", at_step=5, new_task_id="d1")
        assert str(api.value) == f"task 'd1' already exists in {demo_db}; pick another new_task_id"
        g = p.task_graph("d1")
        old = [s for s in g.get_state_history(thread_config("d1")) if s.next == ("executor",)][-1]
        with pytest.raises(InvalidInputError) as tt:
            g.invoke(None, {"configurable": {**old.config["configurable"], "fork_task_id": "d1"}})
        assert str(tt.value) == f"task 'd1' already exists in {demo_db}; pick another fork_task_id"
        assert p.stores.events.task_ids() == ["d1"]


def test_a_registered_fork_whose_registry_row_is_lost_is_damage(demo_db: str) -> None:
    r = runner.invoke(app, ["fork", "d1", "--at-step", "5", "--task-id", "c1", "--db", demo_db])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["doctor", "c1", "--db", demo_db]).stdout.splitlines()[0] == "task c1: ok (29 events)"
    with open_project(demo_db) as p:
        p.stores._db.conn.execute("DELETE FROM taskctx_tasks WHERE task_id = 'c1'")
    doc = runner.invoke(app, ["doctor", "c1", "--db", demo_db])
    assert doc.exit_code == 2
    assert doc.stdout.splitlines()[:2] == [
        "task c1: 1 problem",
        "  - task registry: no row for this task (how it was started is lost): it can be inspected, not resumed",
    ]
