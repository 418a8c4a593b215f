"""Custom roles with a typed result: a tester between the executor and the reviewer records
``role.reported``; its items reach the reviewer's and the re-plan's prompts (quoted as its claim),
the reviewer's issues reach the re-plan, ``inspect`` and the report show both, and the log folds
to the checkpoint."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from rich.console import Console

import graphs
import nodes
from context import TaskContext, replay
from graphs.report import build_report, render_view
from nodes.testing import complete, plan, review, tool_call

KV = {"a": "1"}

STALE = "get('a') after put('a', '2') returned '1'"
KEYERROR = "delete('b') raised KeyError instead of returning False"
REVIEW_ISSUE = "fix the two failures the tester found before approving"


class KVTools:
    """A ToolExecutor with one read-only tool: ``kv_get``."""

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("kv_get", "Read a key.", {"key": {"type": "string"}}, ["key"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> nodes.ToolOutcome:
        return nodes.ToolOutcome("ok", f"{arguments['key']} = {KV.get(arguments['key'])}")


class TesterRenderer:
    """The tester sees the core layer and the findings, nothing else."""

    role = "tester"

    def render(self, ctx: TaskContext, env: nodes.NodeEnv, tools: Sequence[dict[str, Any]]) -> nodes.Rendered:
        cands = nodes.core_blocks(ctx, env, constraints=False, permissions=False)
        return nodes.assemble(
            role=self.role, env=env, system="You are the tester.", candidates=cands, layout=["msg:core"], tools=tools
        )


def _model() -> nodes.ScriptedChatModel:
    return nodes.ScriptedChatModel(
        script={
            "planner": [
                plan("Implement the KV store"),
                plan("Fix the stale read and delete()", reason="the tester's failures"),
            ],
            "executor": [
                tool_call("kv_get", {"key": "a"}, id="g-1"),
                complete("implemented", findings=["a = 1"]),
                complete("fixed both"),
            ],
            "tester": [
                tool_call(
                    "submit_report",
                    {"verdict": "fail", "summary": "KV check failed", "items": [STALE, KEYERROR], "refs": ["g-1"]},
                ),
                tool_call("submit_report", {"verdict": "pass", "summary": "all 12 KV checks pass"}),
            ],
            "reviewer": [
                review("revise", "the tester reports two failures", [REVIEW_ISSUE]),
                review("approve", "the tester passes"),
            ],
        }
    )


def _graph(model: nodes.ScriptedChatModel, env: nodes.NodeEnv) -> Any:
    tools = KVTools()
    g = StateGraph(TaskContext)
    g.add_node("planner", graphs.make_planner_node(model, env))
    g.add_node("executor", graphs.make_executor_node(model, env, tools))
    g.add_node("tools", graphs.make_tool_node(env, tools))
    g.add_node("tester", nodes.make_role_node("tester", model, env, TesterRenderer()))
    g.add_node("reviewer", graphs.make_reviewer_node(model, env))
    g.add_node("recovery", graphs.make_recovery_node(model, env))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", graphs.after_planner)
    g.add_conditional_edges(
        "executor",
        graphs.after_executor,
        {"tools": "tools", "recovery": "recovery", "executor": "executor", "reviewer": "tester", END: END},
    )
    g.add_conditional_edges("tools", graphs.after_tools)
    g.add_edge("tester", "reviewer")
    g.add_conditional_edges("reviewer", graphs.after_reviewer)
    g.add_conditional_edges("recovery", graphs.after_recovery)
    return graphs.compile_graph(g, checkpointer=InMemorySaver(serde=graphs.checkpoint_serde()))


def _run(tid: str, **env_kw: Any) -> tuple[TaskContext, list[Any], nodes.NodeEnv]:
    env = nodes.NodeEnv.sqlite(":memory:", **env_kw)
    graph = _graph(_model(), env)
    cfg = graphs.thread_config(tid)
    graph.invoke(graphs.new_task("Build a small KV store with get, put and delete.", tid), cfg, durability="sync")
    state = TaskContext.model_validate(graph.get_state(cfg).values)
    events = env.events.read(tid)
    assert replay(events) == state  # the log folds to the checkpointed state
    return state, events, env


def _prompt(env: nodes.NodeEnv, events: list[Any], role: str, n: int) -> str:
    built = [e for e in events if e.kind == "context.built" and e.payload["role"] == role][n - 1]
    return env.artifacts.get(built.payload["prompt_ref"]).decode()


def _seq(events: list[Any], kind: str, n: int = 1) -> int:
    return [e.seq for e in events if e.kind == kind][n - 1]


def test_the_testers_report_and_the_reviewers_issues_reach_the_replan() -> None:
    state, events, env = _run("kv1")
    assert state.control.status == "completed"
    t1, r1 = _seq(events, "role.reported"), _seq(events, "review.completed")
    tester = (
        f"## Report of tester (role.reported #{t1}, plan v1), the role's claim:\n"
        f'<external_content source="agent:tester report #{t1}">\n'
        "verdict: fail\nsummary: KV check failed\n"
        f"- {STALE}\n- {KEYERROR}\nrefs: g-1\n</external_content>"
    )
    reviewer = (
        f"## Report of reviewer (review.completed #{r1}, plan v1), the role's claim:\n"
        f'<external_content source="agent:reviewer report #{r1}">\n'
        "verdict: revise\nsummary: the tester reports two failures\n"
        f"- {REVIEW_ISSUE}\n</external_content>"
    )
    replan = _prompt(env, events, "planner", 2)
    assert tester in replan and reviewer in replan
    assert replan.index(tester) < replan.index(reviewer)  # in log order
    assert tester in _prompt(env, events, "reviewer", 1)  # the reviewer takes the tester's report
    assert reviewer not in _prompt(env, events, "reviewer", 2)  # ... never its own
    assert "Report of" not in _prompt(env, events, "planner", 1)
    # each is its own agent_claim block of the manifest, chosen within the budget
    (built,) = [e for e in events if e.kind == "context.built" and e.payload["role"] == "planner"][1:]
    blocks = {b["id"]: b for b in built.payload["blocks"]}
    for bid in (f"report.tester.{t1}", f"report.reviewer.{r1}"):
        assert (blocks[bid]["trust"], blocks[bid]["priority"], blocks[bid]["included"]) == ("agent_claim", "high", True)
    # the state keeps both reports of the tester and both reviews, in log order
    assert [(r.role, r.verdict, r.seq) for r in state.progress.reports] == [
        ("tester", "fail", t1),
        ("reviewer", "revise", r1),
        ("tester", "pass", _seq(events, "role.reported", 2)),
        ("reviewer", "approve", _seq(events, "review.completed", 2)),
    ]
    assert state.progress.reports[0].items == [STALE, KEYERROR]
    assert state.progress.reports[0].refs == ["g-1"]


def test_with_the_projection_off_the_replan_sees_only_the_review_summary() -> None:
    _, events, env = _run("kv2", reports=False)
    replan = _prompt(env, events, "planner", 2)
    assert "Report of" not in replan
    assert STALE not in replan and REVIEW_ISSUE not in replan
    assert "revise: the tester reports two failures" in replan  # what the planner saw before reports


def test_inspect_and_the_report_show_the_reports() -> None:
    state, events, _ = _run("kv3")
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_jupyter=False, force_terminal=False, color_system=None)
    render_view(console, graphs.TaskView("kv3", state, events))
    view = buf.getvalue()
    t1 = _seq(events, "role.reported")
    start = view.index("Role reports")
    section = view[start : view.index("\nEvidence\n", start)].strip().splitlines()
    r1, t2, r2 = _seq(events, "review.completed"), _seq(events, "role.reported", 2), _seq(events, "review.completed", 2)
    assert section == [
        "Role reports",
        f"- tester #{t1} (role.reported, plan v1), its claim (agent_claim):",
        f'<external_content source="agent:tester report #{t1}">',
        "verdict: fail",
        "summary: KV check failed",
        f"- {STALE}",
        f"- {KEYERROR}",
        "refs: g-1",
        "</external_content>",
        f"- reviewer #{r1} (review.completed, plan v1), its claim (agent_claim):",
        f'<external_content source="agent:reviewer report #{r1}">',
        "verdict: revise",
        "summary: the tester reports two failures",
        f"- {REVIEW_ISSUE}",
        "</external_content>",
        f"- tester #{t2} (role.reported, plan v2), its claim (agent_claim):",
        f'<external_content source="agent:tester report #{t2}">',
        "verdict: pass",
        "summary: all 12 KV checks pass",
        "</external_content>",
        f"- reviewer #{r2} (review.completed, plan v2), its claim (agent_claim):",
        f'<external_content source="agent:reviewer report #{r2}">',
        "verdict: approve",
        "summary: the tester passes",
        "</external_content>",
    ]
    page = build_report(events)
    row = (
        f'<tr><td class="num">{t1}</td><td class="kind">tester</td><td class="kind">role.reported</td>'
        '<td class="kind">v1</td><td class="kind">fail</td><td class="text">KV check failed'
    )
    assert row in page
    table = page[page.index('<table id="reports-table">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr><td") == 4  # every report of the log
    assert "<br>- delete(&#x27;b&#x27;) raised KeyError instead of returning False</td>" in table


@pytest.mark.parametrize("verdict", ["fail\nnow", "x" * 41])
def test_a_verdict_of_two_lines_or_too_long_is_refused_naming_the_field(verdict: str) -> None:
    env = nodes.NodeEnv.sqlite(":memory:")
    run = nodes.NodeRun(env, graphs.new_task("t", "v1"), "tester", None)
    with pytest.raises(Exception) as got:
        nodes.report(run, verdict)
    assert "verdict" in str(got.value)


def _view(state: TaskContext, events: list[Any], full: bool) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_jupyter=False, force_terminal=False, color_system=None)
    render_view(console, graphs.TaskView("many", state, events), full=full, db="x.sqlite")
    return [ln for ln in buf.getvalue().splitlines() if ln.startswith(("- tester #", "(5 reports"))]


def test_inspect_shows_the_window_and_all_lists_every_report() -> None:
    from context import new_event

    evs = [new_event("task.created", {"task_id": "many", "original_request": "x", "schema_version": 3}, actor="user")]
    evs += [new_event("role.reported", {"role": "tester", "verdict": f"v{i}"}, actor="agent") for i in range(5)]
    events = [e.model_copy(update={"seq": i}) for i, e in enumerate(evs, start=1)]
    state = replay(events)
    assert _view(state, events, full=False) == [
        "(5 reports, the last of each role here; `taskctx inspect many --all --db x.sqlite` lists every one)",
        "- tester #4 (role.reported, plan v0), its claim (agent_claim):",
        "- tester #5 (role.reported, plan v0), its claim (agent_claim):",
        "- tester #6 (role.reported, plan v0), its claim (agent_claim):",
    ]
    assert _view(state, events, full=True)[0] == "- tester #2 (role.reported, plan v0), its claim (agent_claim):"
    assert len(_view(state, events, full=True)) == 5
