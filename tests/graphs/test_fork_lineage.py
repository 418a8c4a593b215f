"""A fork's lineage where a person or a tracer reads it: the root run's LangSmith metadata and tags,
the HTML report's Lineage section (built from the log alone, the children given)."""

from __future__ import annotations

from context import SqliteStores, new_event
from context.lineage import fork_log
from graphs.report.page import build_report
from graphs.tracing import root_run_config


def test_the_root_run_of_a_fork_names_its_parent_and_a_parent_its_children() -> None:
    fork = root_run_config("c1", True, False, ["executor", "planner"], ("d1", 28))
    assert fork["tags"] == ["command:resume", "resume", "fork"]
    assert fork["metadata"] == {
        "thread_id": "c1",
        "session_id": "c1",
        "command": "resume",
        "roles": ["executor", "planner"],
        "parent_task_id": "d1",
        "fork_seq": 28,
    }
    parent = root_run_config("d1", False, False, ["planner"], None, ["c2", "c1"])
    assert parent["tags"] == ["command:run", "start"]
    assert parent["metadata"]["children"] == ["c1", "c2"] and "parent_task_id" not in parent["metadata"]


def test_the_report_of_a_fork_has_a_lineage_section() -> None:
    st = SqliteStores(":memory:")
    st.events.append("p", [new_event("task.created", {"task_id": "p", "original_request": "fix <it>"}, actor="user")])
    fork_log(st.events, "p", "c", 1, why="try <b>this</b>")
    page = build_report(st.events.read("c"), children=[("g", 2)])
    assert (
        '<h2>Lineage</h2><ul id="lineage"><li>forked from <code>p</code> at seq 1: try &lt;b&gt;this&lt;/b&gt;</li>'
        "<li>forked into <code>g</code> at seq 2</li></ul>"
    ) in page
    assert 'data-task-id="c"' in page
    assert "<h2>Lineage</h2>" not in build_report(st.events.read("p"))
