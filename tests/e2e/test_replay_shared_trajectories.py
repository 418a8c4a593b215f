"""Every shared trajectory replays to completion through the real graph, and:

* every model call of every role holds the original request verbatim and stays within the budget;
* ``replay(events)`` over the SQLite log equals the checkpointed TaskContext;
* the event log holds each recorded step exactly once.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from context import TaskContext, load_trajectory, replay
from graphs.orchestrator import build_orchestrator, new_task
from graphs.project import open_project
from graphs.runner import export_run, run_graph
from nodes import DEFAULT_BUDGET, RECORDED_THOUGHT, ReplayChatModel, ReplayTools


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    p = open_project(str(tmp_path_factory.mktemp("db") / "taskctx.sqlite"))
    yield p
    p.close()


def test_shared_trajectories_present(trajectories_dir: Path) -> None:
    assert len(sorted(trajectories_dir.glob("*.jsonl"))) == 16


def test_trajectory_replays_within_budget(trajectory_file: Path, project, tmp_path) -> None:
    traj = load_trajectory(trajectory_file)
    g = build_orchestrator(
        ReplayChatModel(trajectory=traj),
        tools=ReplayTools(traj),
        checkpointer=project.checkpointer,
        stores=project.stores,
    )
    result = run_graph(g, project.stores, traj.id, new_task(traj.request, traj.id))
    assert result.finished and result.state.control.status == "completed"
    assert result.state.progress.executor_steps == len(traj.steps)
    # the goal is the request's first meaningful line; the recorded thoughts are labelled as such
    assert result.state.identity.interpreted_goal == traj.goal
    findings = [f.statement for f in result.state.evidence.findings]
    assert findings and all(
        f.startswith(RECORDED_THOUGHT + " ") or re.fullmatch(r"recorded steps \d+-\d+ replayed", f) for f in findings
    )
    assert any(f.startswith(RECORDED_THOUGHT) for f in findings) == any(s.thought.strip() for s in traj.steps)

    events = project.stores.events.read(traj.id)
    # the log's fold equals the checkpointed state
    snap = TaskContext.model_validate(g.get_state({"configurable": {"thread_id": traj.id}}).values)
    assert replay(events) == snap == result.state
    # inspect and the report show that goal and the labelled findings
    from rich.console import Console

    from graphs.inspection import TaskView
    from graphs.report import build_report, render_view

    buf = io.StringIO()
    render_view(Console(file=buf, width=10_000), TaskView(snap.identity.task_id, snap, events))
    text = buf.getvalue().splitlines()
    g = text.index("Goal")  # the planner's reading of the request: quoted as its claim
    assert text[g + 1 : g + 5] == [
        "as the planner wrote it (agent_claim):",
        '<external_content source="agent:planner goal">',
        traj.goal,
        "</external_content>",
    ]
    # each finding: "- finding <id> (<provenance>) [<refs>]:", then its text quoted as the agent's claim
    starts = [i + 2 for i, ln in enumerate(text) if ln.startswith("- finding ")]
    shown = ["\n".join(text[i : text.index("</external_content>", i)]) for i in starts]
    assert shown == findings[-8:]
    page = build_report(events)
    assert f'<p id="goal">{html.escape(traj.goal)}</p>' in page
    assert all(f"<li>{html.escape(f'{x.id}: {x.statement}')} [" in page for x in snap.evidence.findings)
    # each recorded step exactly once
    called = Counter(e.payload["call_id"] for e in events if e.kind == "tool.called")
    results = Counter(e.payload["call_id"] for e in events if e.kind == "tool.result.received")
    expected = {f"rec-{i}": 1 for i in range(1, len(traj.steps) + 1)}
    assert dict(called) == expected and dict(results) == expected

    # manifests: every call of every role holds the request verbatim and fits the budget
    out = export_run(project.stores, traj.id, tmp_path)
    lines = [json.loads(x) for x in (out / "manifests.jsonl").read_text().splitlines()]
    built = [e for e in events if e.kind == "context.built"]
    assert len(lines) == len(built) > len(traj.steps)
    assert {m["role"] for m in lines} >= {"planner", "executor", "reviewer"}
    for m, e in zip(lines, built):
        assert m["budget"] == DEFAULT_BUDGET
        assert m["prompt_tokens"] <= m["budget"]
        assert any(b["id"] == "core.request" and b["included"] for b in m["blocks"])
        prompt = project.stores.artifacts.get(e.payload["prompt_ref"]).decode("utf-8")
        assert traj.request in prompt
    # no tool result without its call in any executor prompt
    for e in built:
        if e.payload["role"] != "executor":
            continue
        prompt = project.stores.artifacts.get(e.payload["prompt_ref"]).decode("utf-8")
        for section in prompt.split("\n\n### ")[1:]:
            if section.startswith("tool (tool_call_id="):
                cid = section.split("tool_call_id=", 1)[1].split(")", 1)[0]
                assert f"(id={cid})" in prompt
