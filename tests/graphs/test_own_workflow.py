"""A newcomer's own workflow: an executor that returns a plain ``str`` (or something
else), a custom graph missing a node its routers need, and custom roles in the views."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from context import SqliteStores, TaskContext, replay
from graphs import build_orchestrator, checkpoint_serde, new_task
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome, function_schema
from nodes.testing import complete, plan, recover, review, tool_call


class ReturnsAnything:
    """An executor whose ``execute`` returns ``value`` as it is (not always a ToolOutcome)."""

    def __init__(self, value: Any):
        self.value = value
        self.calls: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("probe", "Probe something.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        self.calls.append(call_id)
        return self.value


def _probe_run(tools: ReturnsAnything, tid: str) -> tuple[TaskContext, list[Any], SqliteStores]:
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe")],
            "executor": [tool_call("probe", {}, id="c-1"), complete("probed")],
            "recovery": [recover("retry", "try the step again")],
            "reviewer": [review("approve", "probed")],
        }
    )
    stores = SqliteStores(":memory:")
    g = build_orchestrator(model, tools=tools, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    result = run_graph(g, stores, tid, new_task("Probe it.", tid))
    events = stores.events.read(tid)
    assert replay(events) == result.state
    return result.state, events, stores


def test_execute_returning_a_str_is_an_ok_result() -> None:
    tools = ReturnsAnything("probe says 42\n")
    state, events, stores = _probe_run(tools, "str1")
    assert state.control.status == "completed"
    assert tools.calls == ["c-1"]
    (res,) = [e for e in events if e.kind == "tool.result.received"]
    assert res.payload["status"] == "ok"
    assert res.payload["raw_chars"] == len("probe says 42\n")
    assert stores.artifacts.get(res.payload["raw_ref"]) == b"probe says 42\n"
    assert [e.kind for e in events if e.kind.startswith("error.")] == []


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (b"probe says 42\n", "bytes"),
        (None, "NoneType"),
        ({"output": "42"}, "dict"),
        (ToolOutcome("ok", b"42"), "a ToolOutcome whose output is bytes"),  # type: ignore[arg-type]
    ],
)
def test_execute_returning_another_type_is_the_calls_error_result(value: Any, what: str) -> None:
    tools = ReturnsAnything(value)
    state, events, stores = _probe_run(tools, "bad1")
    msg = (
        f"error: ReturnsAnything.execute returned {what} for tool 'probe'; "
        'return a str (the output) or ToolOutcome("ok" or "error", output: str) from execute'
    )
    assert tools.calls == ["c-1"]  # run once; the task went on through recovery
    (res,) = [e for e in events if e.kind == "tool.result.received"]
    assert res.payload["status"] == "error"
    assert stores.artifacts.get(res.payload["raw_ref"]) == msg.encode()
    assert msg in res.payload["result_summary"]
    assert [e.kind for e in events if e.kind in ("error.occurred", "recovery.decided", "task.completed")] == [
        "error.occurred",
        "recovery.decided",
        "task.completed",
    ]
    assert state.control.status == "completed"
    assert state.errors.error_history[0].call_id == "c-1"
    assert state.errors.error_history[0].source == "tool:probe"


# --- 2. a custom graph is checked when it is compiled ----------------------------------------


def _builder(*, reviewer: bool, path_map: Any = None) -> Any:
    from langgraph.graph import START, StateGraph

    from graphs import routing
    from graphs.orchestrator import NoTools
    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    model = ScriptedChatModel(script={"planner": [plan("Do it")], "executor": [complete("done")]})
    env = NodeEnv.sqlite(":memory:")
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, NoTools()))
    g.add_node("tools", make_tool_node(env, NoTools()))
    g.add_node("recovery", make_recovery_node(model, env))
    g.add_conditional_edges("recovery", routing.after_recovery)
    if reviewer:
        g.add_node("reviewer", make_reviewer_node(model, env))
        g.add_conditional_edges("reviewer", routing.after_reviewer)
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", routing.after_planner)
    if path_map is None:
        g.add_conditional_edges("executor", routing.after_executor)
    else:
        g.add_conditional_edges("executor", routing.after_executor, path_map)
    g.add_conditional_edges("tools", routing.after_tools)
    return g


def test_routers_declare_their_targets() -> None:
    from graphs import routing
    from graphs.orchestrator import router_targets
    from graphs.routing import TARGETS

    assert TARGETS["after_executor"] == ("tools", "recovery", "executor", "reviewer", "__end__")
    assert router_targets(routing.after_reviewer) == ("planner", "__end__")
    assert router_targets(lambda s: "x") is None


def test_graph_without_the_reviewer_fails_at_compile_with_the_fix() -> None:
    from graphs import GraphWiringError, compile_graph

    g = _builder(reviewer=False)
    # LangGraph's own validation already refuses it (the router's Literal annotation is the path map)
    with pytest.raises(ValueError, match=r"^At 'executor' node, 'after_executor' branch found unknown target"):
        g.compile()
    with pytest.raises(GraphWiringError) as exc:
        compile_graph(_builder(reviewer=False))
    assert str(exc.value) == (
        "router after_executor (after node 'executor') can return 'reviewer', but the graph has no node 'reviewer'; "
        "add it (g.add_node('reviewer', nodes.make_reviewer_node(model, env))) or send 'reviewer' to a node you "
        "have with a path map: g.add_conditional_edges('executor', after_executor, {..., 'reviewer': 'other_node'})"
    )


def test_a_path_map_missing_a_router_target_fails_at_compile() -> None:
    from graphs import GraphWiringError, compile_graph

    g = _builder(reviewer=False, path_map=["tools", "executor", "reviewer", "recovery", "__end__"])
    with pytest.raises(GraphWiringError, match="has no node 'reviewer'; add it"):
        compile_graph(g)
    g = _builder(reviewer=True, path_map={"tools": "tools", "executor": "executor", "reviewer": "reviewer"})
    with pytest.raises(GraphWiringError) as exc:
        compile_graph(g)
    assert str(exc.value) == (
        "router after_executor (after node 'executor') can return 'recovery', but the path map of "
        "add_conditional_edges('executor', after_executor, ...) has no 'recovery' key; add 'recovery': "
        "<a node of the graph> to it, or leave the path map out"
    )
    ok = {
        "tools": "tools",
        "executor": "executor",
        "reviewer": "reviewer",
        "recovery": "reviewer",
        "__end__": "__end__",
    }
    compile_graph(_builder(reviewer=True, path_map=ok))  # every target mapped to a node it has


def test_default_graph_still_compiles_with_the_same_edges() -> None:
    g = build_orchestrator(ScriptedChatModel(script={}))
    edges = sorted((e.source, e.target) for e in g.get_graph().edges)
    assert edges == [
        ("__start__", "planner"),
        ("executor", "__end__"),
        ("executor", "executor"),
        ("executor", "recovery"),
        ("executor", "reviewer"),
        ("executor", "tools"),
        ("planner", "__end__"),
        ("planner", "executor"),
        ("recovery", "__end__"),
        ("recovery", "executor"),
        ("recovery", "planner"),
        ("reviewer", "__end__"),
        ("reviewer", "planner"),
        ("tools", "__end__"),
        ("tools", "executor"),
        ("tools", "recovery"),
        ("tools", "tools"),
    ]


# --- 3. a custom role is shown under its own name --------------------------------------------

CRITIC_SYSTEM = "You are the critic of a taskctx task. Name the weakest finding and call submit_note."
SUBMIT_NOTE = function_schema("submit_note", "Submit the note.", {"text": {"type": "string"}}, ["text"])


def _critic_node(model: Any, env: Any) -> Any:
    """A custom role ``critic`` built like the roles of ``nodes.roles`` (see notebook 04)."""
    from context.events import MemoryNoted
    from nodes import NodeRun
    from nodes.render.base import assemble, core_blocks

    def critic(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "critic", config)
        if run.replayed:
            return run.update()
        pre = run.resume_events()
        ctx = replay(pre, run.ctx)
        rendered = assemble(
            role="critic",
            env=env,
            system=CRITIC_SYSTEM,
            candidates=core_blocks(ctx, env),
            layout=["msg:core"],
            tools=[SUBMIT_NOTE],
        )
        built = run.context_built("critic", rendered, ctx.plan.current_step_id, ctx)
        ai = run.call_model(model, "critic", rendered, built, ctx)
        text = next(tc["args"]["text"] for tc in ai.tool_calls if tc["name"] == "submit_note")
        run.commit([*pre, built, run.make("memory.proposed", MemoryNoted(kind="fact", text=text))])
        return run.update()

    return critic


def _critic_task(db: str, tid: str) -> Any:
    """Run planner -> executor -> critic -> reviewer with the critic behind an interrupt, so the
    resume starts at the critic; returns the compiled graph and the project."""
    from langgraph.graph import END, START, StateGraph

    from graphs import compile_graph, open_project, routing
    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe")],
            "executor": [tool_call("probe", {}, id="c-1"), complete("probed", findings=["probe says 42"])],
            "critic": [tool_call("submit_note", {"text": "the one finding rests on one probe"})],
            "reviewer": [review("approve", "fine")],
        }
    )
    project = open_project(db)
    env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
    tools = ReturnsAnything("probe says 42\n")
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, tools))
    g.add_node("tools", make_tool_node(env, tools))
    g.add_node("recovery", make_recovery_node(model, env))
    g.add_node("critic", _critic_node(model, env), metadata={"role": "critic"})
    g.add_node("reviewer", make_reviewer_node(model, env))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", routing.after_planner)
    g.add_conditional_edges(
        "executor",
        routing.after_executor,
        {"tools": "tools", "recovery": "recovery", "executor": "executor", "reviewer": "critic", END: END},
    )
    g.add_conditional_edges("tools", routing.after_tools)
    g.add_conditional_edges("recovery", routing.after_recovery)
    g.add_edge("critic", "reviewer")
    g.add_conditional_edges("reviewer", routing.after_reviewer)
    graph = compile_graph(g, checkpointer=project.checkpointer, interrupt_before=["critic"])
    first = run_graph(graph, project.stores, tid, new_task("Probe it.", tid))
    assert first.next_nodes == ("critic",)
    return graph, project


def test_custom_role_in_resume_inspect_and_report(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import re

    from rich.console import Console
    from typer.testing import CliRunner

    import graphs.cli.core as cli_common
    from graphs.cli import app

    db, tid = str(tmp_path / "t.sqlite"), "crit1"
    graph, project = _critic_task(db, tid)
    cp = graph.get_state({"configurable": {"thread_id": tid}}).config["configurable"]["checkpoint_id"]
    buf = io.StringIO()
    monkeypatch.setattr(cli_common, "console", Console(file=buf, width=200, highlight=False))
    done = run_graph(graph, project.stores, tid, None, resume=True, on_event=cli_common.event_printer())
    project.close()
    assert done.state.control.status == "completed"
    assert done.state.memory.working_memory == ["the one finding rests on one probe"]
    out = buf.getvalue().splitlines()
    # resume's messages: the resume names the node that picked the task up, then its model call
    assert re.fullmatch(r"  \[\d+\] resume\.started: critic runs, from checkpoint " + re.escape(cp), out[0]), out
    assert re.fullmatch(r"  call +\d+ critic +step - +prompt +\d+ tok .*", out[1]), out

    events = SqliteStores(db).events.read(tid)
    calls = [e.payload for e in events if e.kind == "context.built"]
    assert [c["role"] for c in calls] == ["planner", "executor", "executor", "critic", "reviewer"]
    crit = calls[3]

    r = CliRunner().invoke(app, ["inspect", tid, "--db", db])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    sec = lines[lines.index("Model calls by role") + 1 : lines.index("Permissions") - 1]
    assert [ln.split(":")[0] for ln in sec] == ["- planner", "- executor", "- critic", "- reviewer"]
    assert sec[2] == (
        f"- critic: 1 call ({crit['call']}); {crit['prompt_tokens']:,} prompt tokens; "
        f"manifests: {crit['blocks_in']} blocks in, {crit['blocks_out']} out"
    )

    html_path = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", tid, "--db", db, "--html", str(html_path)])
    assert r.exit_code == 0, r.output
    page = html_path.read_text()
    legend = re.search(r'<p class="legend">(.*?)</p>', page).group(1)
    assert re.findall(r'background:(#[0-9a-f]{6})"></span>(\w+)', legend) == [
        ("#6f42c1", "planner"),
        ("#1f77b4", "executor"),
        ("#2ca02c", "reviewer"),
        ("#ff7f0e", "critic"),
    ]
    bar = re.search(rf'<g class="bar" data-call="{crit["call"]}" data-role="critic">.*?</g>', page).group(0)
    assert 'fill="#ff7f0e"' in bar
    assert f'id="call-{crit["call"]}" data-role="critic"><summary>call {crit["call"]}: <b>critic</b>' in page
