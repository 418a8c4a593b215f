"""A log point's checkpoint id names a step of its task's log: one past the end, or on a thread
with no task, is refused on every path and nothing is written; one at the latest step is the
thread's latest state; an edit that changes nothing writes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from context import InvalidInputError
from graphs import open_project, thread_config
from graphs.diagnosis import diagnose
from graphs.time_travel import CheckpointInputError, point_checkpoint_id
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


def _at(tid: str, seq: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": point_checkpoint_id(seq)}}


def _written(project: Any, tid: str) -> tuple[Any, ...]:
    """Everything a call could write of the task: its events, its checkpoints, the tasks there are."""
    events = [(e.seq, e.kind) for e in project.stores.events.read(tid)]
    ckpts = [c.config["configurable"]["checkpoint_id"] for c in project.checkpointer.list(thread_config(tid))]
    return events, ckpts, sorted(project.stores.events.task_ids())


def _call(g: Any, how: str, cfg: dict[str, Any]) -> Any:
    edit = {"identity": {"constraints": ["c"]}}
    if how == "get_state":
        return g.get_state(cfg)
    if how == "update_state":
        return g.update_state(cfg, edit)
    if how == "invoke":
        return g.invoke(None, cfg)
    if how == "aget_state":
        return asyncio.run(g.aget_state(cfg))
    if how == "aupdate_state":
        return asyncio.run(g.aupdate_state(cfg, edit))
    return asyncio.run(g.ainvoke(None, cfg))


@pytest.mark.parametrize("how", ["get_state", "update_state", "invoke", "aget_state", "aupdate_state", "ainvoke"])
def test_a_log_point_past_the_end_is_refused_and_writes_nothing(tmp_path: Path, how: str) -> None:
    with open_project(str(tmp_path / "p.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="t1")
        last = project.stores.events.last_seq("t1")
        before = _written(project, "t1")
        for seq in (last + 1, 999):
            cfg = _at("t1", seq)
            with pytest.raises(CheckpointInputError) as err:
                _call(g, how, cfg)
            assert str(err.value) == (
                f"checkpoint {point_checkpoint_id(seq)} of task 't1' names seq {seq}, past the end of its log, which "
                f"ends at seq {last}; pick a step from get_state_history (each has a log-point id), or leave "
                "checkpoint_id out for the latest state"
            )
            assert isinstance(err.value, ValueError)  # (LangGraph Server shows its message)
        assert _written(project, "t1") == before
        assert diagnose(project.stores, project.checkpointer, "t1") == []


def test_a_log_point_on_a_thread_with_no_task_is_refused(tmp_path: Path) -> None:
    with open_project(str(tmp_path / "p.sqlite")) as project:
        g = project.graph(_model())
        with pytest.raises(CheckpointInputError) as err:
            g.update_state(_at("nobody", 3), {"identity": {"constraints": ["c"]}})
        assert str(err.value) == (
            f"checkpoint {point_checkpoint_id(3)} is a taskctx log point (seq 3), but thread 'nobody' has no task: "
            "there is no event log for it to name; start the task first, or use a checkpoint id from this thread's "
            "get_state_history"
        )
        assert list(project.checkpointer.list(thread_config("nobody"))) == []


def test_a_log_point_at_the_latest_step_edits_the_latest_state(tmp_path: Path) -> None:
    with open_project(str(tmp_path / "p.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="t1")
        last = project.stores.events.last_seq("t1")
        cfg = g.update_state(_at("t1", last), {"identity": {"constraints": ["c"]}})
        assert cfg["configurable"]["thread_id"] == "t1"
        assert [e.kind for e in project.stores.events.read("t1")][-1] == "state.edited"
        assert g.get_state(thread_config("t1")).values["identity"].constraints == ["c"]
        # the same edit again changes nothing and writes nothing of the part (it was written whole, reset)
        g.update_state(_at("t1", last + 1), {"identity": {"constraints": ["c"]}})
        g.update_state(thread_config("t1"), {"identity": {"constraints": ["c"]}})
        assert project.stores.events.last_seq("t1") == last + 1
        ident = g.get_state(thread_config("t1")).values["identity"]
        assert ident.constraints == ["c"] and ident.original_request == "Count the words."
        assert diagnose(project.stores, project.checkpointer, "t1") == []


def test_a_part_given_as_none_is_refused_naming_it(tmp_path: Path) -> None:
    with open_project(str(tmp_path / "p.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="t1")
        with pytest.raises(InvalidInputError, match=r"^update_state: plan: Input should be a valid dictionary"):
            g.update_state(thread_config("t1"), {"plan": None})
        assert diagnose(project.stores, project.checkpointer, "t1") == []


def test_a_refused_fork_from_a_graph_call_is_a_value_error(tmp_path: Path) -> None:
    """LangGraph Server shows a ValueError's (or RuntimeError's) message; any other's it hides."""
    with open_project(str(tmp_path / "p.sqlite")) as project:
        g = project.graph(_model())
        project.run(g, "Count the words.", task_id="t1")
        old = [s for s in g.get_state_history(thread_config("t1")) if s.next == ("executor",)][-1]
        conf = {**old.config["configurable"], "fork_task_id": "../x"}
        with pytest.raises(InvalidInputError, match=r"^fork_task_id '\.\./x' is not a valid task id") as err:
            g.invoke(None, {"configurable": conf})
        assert isinstance(err.value, ValueError)
