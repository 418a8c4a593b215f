"""Inputs a newcomer gives by mistake: a task started twice under one id, a folder as --db, an unknown
eval category; each refused with its cause and the fix, nothing recorded changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from context import InvalidInputError, SqliteStores
from graphs import build_orchestrator, checkpoint_serde, new_task, open_project
from graphs.cli import app
from graphs.eval.cases import CaseError
from graphs.eval.suite import run_eval
from graphs.runner import run_graph
from nodes import ScriptedChatModel
from nodes.testing import complete, plan, review


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "planner": [plan("Count the words")],
            "executor": [complete("3 words")],
            "reviewer": [review("approve")],
        }
    )


def test_a_second_start_under_a_finished_tasks_id_is_refused_before_any_checkpoint(tmp_path: Path) -> None:
    db = str(tmp_path / "words.sqlite")
    with open_project(db) as project:
        g = build_orchestrator(_model(), checkpointer=project.checkpointer, stores=project.stores)
        first = run_graph(g, project.stores, "t2", new_task("Count the words.", "t2"))
        assert first.state.control.status == "completed"
        seq = project.stores.events.last_seq("t2")
        history = len(list(g.get_state_history({"configurable": {"thread_id": "t2"}})))
        g2 = build_orchestrator(_model(), checkpointer=project.checkpointer, stores=project.stores)
        with pytest.raises(InvalidInputError) as err:
            run_graph(g2, project.stores, "t2", new_task("Count the words.", "t2"))
        assert str(err.value) == (
            f"task 't2' already has {seq} events in this database: continue it with "
            "run_graph(graph, stores, 't2', None, resume=True) or Project.resume('t2'), "
            "or start the new task under another task id"
        )
        assert project.stores.events.last_seq("t2") == seq
        assert len(list(g2.get_state_history({"configurable": {"thread_id": "t2"}}))) == history
        snap = g2.get_state({"configurable": {"thread_id": "t2"}})
        assert snap.next == () and snap.values["control"].status == "completed"


def test_a_start_on_a_registered_task_without_events_still_runs(tmp_path: Path) -> None:
    stores = SqliteStores(str(tmp_path / "s.sqlite"))
    assert stores.events.last_seq("t3") == 0
    g = build_orchestrator(_model(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    assert run_graph(g, stores, "t3", new_task("Count the words.", "t3")).state.control.status == "completed"


@pytest.mark.parametrize("command", [["inspect", "t1"], ["list"], ["resume", "t1"], ["doctor"]])
def test_a_folder_as_db_is_named_a_folder(tmp_path: Path, command: list[str]) -> None:
    out = CliRunner().invoke(app, [*command, "--db", str(tmp_path)])
    assert out.exit_code == 2
    assert out.output.strip().splitlines()[-1] == (
        f"error: --db {tmp_path} is a directory; give a file path such as {tmp_path / 'taskctx.sqlite'}"
    )


def test_an_unknown_eval_category_names_the_categories() -> None:
    with pytest.raises(CaseError) as err:
        run_eval(categories=["nope"])
    msg = str(err.value)
    assert msg.startswith("no case of category nope in ") and "; use one of conflict, distortion, " in msg


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke"])
def test_a_new_task_on_another_tasks_thread_is_refused_naming_both_ids(tmp_path: Path, how: str) -> None:
    import asyncio

    from graphs import thread_config

    with open_project(str(tmp_path / "m.sqlite")) as project:
        g = build_orchestrator(_model(), checkpointer=project.checkpointer, stores=project.stores)
        task, cfg = new_task("Count the words.", "ma"), thread_config("mb")
        with pytest.raises(InvalidInputError) as err:
            if how == "invoke":
                g.invoke(task, cfg)
            elif how == "stream":
                list(g.stream(task, cfg, stream_mode="updates"))
            else:
                asyncio.run(g.ainvoke(task, cfg))
        assert str(err.value) == (
            "thread 'mb': the run's input starts task 'ma', but a task runs on the thread of its own id (its "
            "events, checkpoints and resume are found by it): run it with graphs.thread_config('ma'), or start "
            "it as new_task(..., task_id='mb')"
        )
        assert project.stores.events.last_seq("ma") == project.stores.events.last_seq("mb") == 0
        assert list(g.get_state_history(cfg)) == [] and list(g.get_state_history(thread_config("ma"))) == []
        # the same input on its own thread runs
        done = g.invoke(task, thread_config("ma"))
        assert done["control"].status == "completed"


@pytest.mark.parametrize("edit", [{"control": {"status": "completed"}}, {"plan": None}])
def test_a_refused_edit_of_an_earlier_checkpoint_makes_no_fork(tmp_path: Path, edit: dict) -> None:
    from graphs import thread_config

    with open_project(str(tmp_path / "f.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="tf")
        old = [s for s in g.get_state_history(thread_config("tf")) if s.next == ("executor",)][-1]
        seq = old.metadata["taskctx_seq"] if "taskctx_seq" in old.metadata else old.values["events"].cursor
        before = (sorted(project.stores.events.task_ids()), sorted(project.stores.tasks.task_ids()))
        with pytest.raises((InvalidInputError, ValueError)):
            g.update_state(old.config, edit)
        assert (sorted(project.stores.events.task_ids()), sorted(project.stores.tasks.task_ids())) == before
        assert list(project.checkpointer.list(thread_config(f"tf-fork-{seq}"))) == []
        # an edit that is allowed forks under the plain id (no "-2": nothing was left behind)
        cfg = g.update_state(old.config, {"identity": {"constraints": ["count twice"]}})
        assert cfg["configurable"]["thread_id"] == f"tf-fork-{seq}"


@pytest.mark.parametrize("bad", ["../x", "../../escape", "sp ace", "a/b", "", ".hidden", "-x"])
def test_a_fork_by_a_name_that_cannot_name_a_folder_is_refused(tmp_path: Path, bad: str) -> None:
    from graphs import thread_config

    with open_project(str(tmp_path / "h.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="th")
        before = sorted(project.stores.events.task_ids())
        with pytest.raises(InvalidInputError) as err:
            project.fork("th", at_step=1, new_task_id=bad, graph=g)
        assert str(err.value) == (
            f"new_task_id {bad!r} is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' (not starting "
            "with '.' or '-'): the child's workspace copy and receipts are named by it"
        )
        old = [s for s in g.get_state_history(thread_config("th")) if s.next == ("executor",)][-1]
        conf = {**old.config["configurable"], "fork_task_id": bad}
        with pytest.raises(InvalidInputError, match=r"^fork_task_id "):
            g.invoke(None, {"configurable": conf})
        assert sorted(project.stores.events.task_ids()) == before
