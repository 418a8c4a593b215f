"""State changed behind the event log. ``graph.update_state`` from outside a node
(LangGraph Studio's state editor) is recorded as ``state.edited`` (actor, changed fields) and
folded, or refused; either way the log and the checkpoint agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import InvalidInputError, SqliteStores, TaskContext, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.diagnosis import diagnose
from graphs.runner import export_run, run_graph, thread_config
from nodes import ScriptedChatModel, ToolOutcome
from nodes.testing import complete, plan, review, tool_call
from nodes.tools import function_schema

REQUEST = "Tidy the scripts.\nDo not touch the migrations folder."


class Probe:
    def schemas(self):  # type: ignore[no-untyped-def]
        return [function_schema("probe", "Probe.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict) -> ToolOutcome:  # type: ignore[type-arg]
        return ToolOutcome("ok", f"probe {call_id} ok\n")


def _graph(stores: SqliteStores):  # type: ignore[no-untyped-def]
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe twice")],
            "executor": [tool_call("probe", {}, id="p1"), tool_call("probe", {}, id="p2"), complete("done")],
            "reviewer": [review("approve")],
        }
    )
    saver = InMemorySaver(serde=checkpoint_serde())
    return build_orchestrator(model, tools=Probe(), stores=stores, checkpointer=saver)


def test_an_edit_that_removes_the_constraint_is_recorded_and_everything_agrees(tmp_path: Path) -> None:
    stores = SqliteStores(":memory:")
    g = _graph(stores)
    first = run_graph(g, stores, "e1", new_task(REQUEST, "e1"), stop_after=1)
    assert first.state.identity.constraints == ["Do not touch the migrations folder."]
    cfg = thread_config("e1")
    ident = TaskContext.model_validate(g.get_state(cfg).values).identity
    g.update_state(cfg, {"identity": ident.model_copy(update={"constraints": []})})
    edits = [e for e in stores.events.read("e1") if e.kind == "state.edited"]
    assert [(e.actor, e.payload) for e in edits] == [
        ("user", {"changes": {"identity": {"constraints": []}}, "as_node": None})
    ]
    done = run_graph(g, stores, "e1", None, resume=True)
    assert done.state.control.status == "completed" and done.state.identity.constraints == []
    events = stores.events.read("e1")
    assert replay(events) == done.state
    out = export_run(stores, "e1", tmp_path)
    assert json.loads((out / "state.json").read_text())["identity"]["constraints"] == []
    assert diagnose(stores, g.checkpointer, "e1") == []
    # the prompts after the edit no longer carry it; the ones before did
    built = [e for e in events if e.kind == "context.built" and e.payload["role"] == "executor"]
    texts = [stores.artifacts.get(e.payload["prompt_ref"]).decode() for e in built]
    assert "- Do not touch the migrations folder." in texts[0]
    assert "- Do not touch the migrations folder." not in texts[-1]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"progress": {"executor_steps": 0}}, "the 'progress' part is derived from the event log and cannot be edited"),
        ({"identity": {"original_request": "Something else."}}, "identity.original_request is recorded by the task's"),
        ({"events": {"cursor": 0}}, "the 'events' part is derived from the event log"),
        ({"budget": 3}, "'budget' is not a part of the TaskContext"),
    ],
)
def test_edits_of_derived_fields_are_refused_and_nothing_changes(values: dict, message: str) -> None:  # type: ignore[type-arg]
    stores = SqliteStores(":memory:")
    g = _graph(stores)
    run_graph(g, stores, "e2", new_task(REQUEST, "e2"), stop_after=1)
    cfg = thread_config("e2")
    before = (g.get_state(cfg).values, stores.events.last_seq("e2"))
    with pytest.raises(InvalidInputError, match="update_state: ") as ei:
        g.update_state(cfg, values)
    assert message in str(ei.value) and "editable: identity.constraint_sources" in str(ei.value)
    assert (g.get_state(cfg).values, stores.events.last_seq("e2")) == before


def test_a_memory_and_permission_edit_as_dicts_is_recorded() -> None:
    stores = SqliteStores(":memory:")
    g = _graph(stores)
    run_graph(g, stores, "e3", new_task(REQUEST, "e3"), stop_after=1)
    cfg = thread_config("e3")
    g.update_state(cfg, {"memory": {"user_preferences": ["short answers"]}, "permissions": {"denied_tools": ["rm"]}})
    e = stores.events.read("e3")[-1]
    assert e.kind == "state.edited" and e.payload["changes"] == {
        "memory": {"user_preferences": ["short answers"]},
        "permissions": {"denied_tools": ["rm"]},
    }
    st = TaskContext.model_validate(g.get_state(cfg).values)
    assert st.memory.user_preferences == ["short answers"] and st.permissions.denied_tools == ["rm"]
    assert st == replay(stores.events.read("e3"))


def test_the_docs_list_of_editable_fields_is_the_codes() -> None:
    """docs/concepts/taskcontext.md lists exactly ``EDITABLE_FIELDS``, in ``editable_fields()`` order."""
    import re

    from graphs.edits import editable_fields

    page = (Path(__file__).resolve().parents[2] / "docs/concepts/taskcontext.md").read_text(encoding="utf-8")
    listed = page.split("<!-- editable-fields -->")[1].split("<!-- /editable-fields -->")[0]
    assert re.findall(r"`([a-z_]+\.[a-z_]+)`", listed) == editable_fields().split(", ")
    assert "identity.criteria_sources" in editable_fields().split(", ")
