"""The ordinary LangGraph calls a newcomer makes on a taskctx graph end in a named error or a
correct continuation, never in a task left ``running`` with nothing recorded:

a new input on a thread that holds a task, ``invoke(None)`` on an unknown thread,
``update_state(as_node=...)`` that would strand the task, ``Command(goto=...)`` to a node the
graph lacks, a custom node that raises (with interrupts and ``RetryPolicy`` left to LangGraph),
a partial dict update, and a stream the caller stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt

from context import InvalidInputError, TaskContext, UnknownTaskError, replay
from graphs import checkpoint_serde, compile_graph, new_task, open_project, routing, thread_config
from graphs.diagnosis import diagnose
from graphs.orchestrator import NoTools
from nodes import NodeEnv, ScriptedChatModel, make_executor_node, make_planner_node, make_reviewer_node
from nodes.testing import complete, plan, review

#: A whole run of the default graph, in event kinds.
RUN = [
    "task.created",
    "context.built",
    "plan.created",
    "step.started",
    "context.built",
    "step.completed",
    "checkpoint.created",
    "context.built",
    "review.completed",
    "task.completed",
]
NODES = "'executor', 'planner', 'reviewer', 'tester'"


def _script() -> dict[str, Any]:
    return {"planner": [plan("Do it")], "executor": [complete("done")], "reviewer": [review("approve", "fine")]}


def _kinds(events: list[Any]) -> list[str]:
    return [e.kind for e in events]


def _project_graph(tmp_path: Path) -> tuple[Any, Any]:
    project = open_project(tmp_path / "t.sqlite")
    return project.graph(ScriptedChatModel(script=_script())), project


def _custom(tester: Any, *, retry: RetryPolicy | None = None) -> tuple[Any, NodeEnv]:
    """planner -> executor -> a plain LangGraph ``tester`` -> reviewer, compiled with ``compile_graph``."""
    model = ScriptedChatModel(script=_script())
    env = NodeEnv.sqlite(":memory:")
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, NoTools()))
    g.add_node("tester", tester, retry_policy=retry)
    g.add_node("reviewer", make_reviewer_node(model, env))
    g.add_edge(START, "planner")
    g.add_edge("planner", "executor")
    g.add_edge("executor", "tester")
    g.add_edge("tester", "reviewer")
    g.add_conditional_edges("reviewer", routing.after_reviewer)
    return compile_graph(g, checkpointer=InMemorySaver(serde=checkpoint_serde())), env


def _state(graph: Any, tid: str) -> TaskContext:
    return TaskContext.model_validate(graph.get_state(thread_config(tid)).values)


def test_a_new_input_on_a_thread_with_a_task_is_refused_before_any_checkpoint(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    cfg = thread_config("t1")
    graph.invoke(new_task("Do it", "t1"), cfg, interrupt_before=["reviewer"])
    before = graph.get_state(cfg)
    seen = project.stores.events.read("t1")
    with pytest.raises(InvalidInputError) as ei:
        graph.invoke(new_task("Something else", "t1"), cfg)
    assert str(ei.value) == (
        "thread 't1' already holds task 't1' (running); a new input would start the graph again over that task's "
        "event log, so nothing was run or written; to continue task 't1' call invoke(None, config) (or "
        "Command(resume=...) when it waits for an answer); to start a new task use a new thread_id "
        "(graphs.thread_config(<new task id>))"
    )
    after = graph.get_state(cfg)
    assert after.config == before.config and after.next == ("reviewer",)
    assert project.stores.events.read("t1") == seen
    graph.invoke(None, cfg)  # the task is still resumable
    assert _kinds(project.stores.events.read("t1")) == RUN
    assert _state(graph, "t1").control.status == "completed"
    with pytest.raises(InvalidInputError) as ei:  # an ended task: a new thread_id is the fix
        graph.invoke(new_task("Something else", "t1"), cfg)
    assert str(ei.value) == (
        "thread 't1' already holds task 't1' (completed); a new input would start the graph again over that "
        "task's event log, so nothing was run or written; task 't1' has ended; to start a new task use a new "
        "thread_id (graphs.thread_config(<new task id>))"
    )
    assert _kinds(project.stores.events.read("t1")) == RUN
    project.close()


def test_resuming_an_unknown_thread_names_it(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    message = (
        "thread 'nope' has no checkpoint and no task of that id has events, so {} has nothing to continue; check "
        "the thread_id (taskctx list shows the tasks), or start a task on it with "
        "invoke(graphs.new_task(request, 'nope'), config)"
    )
    with pytest.raises(UnknownTaskError) as ei:
        graph.invoke(None, thread_config("nope"))
    assert str(ei.value) == message.format("invoke(None, config)")
    with pytest.raises(UnknownTaskError) as ei:
        asyncio.run(graph.ainvoke(Command(resume="yes"), thread_config("nope")))
    assert str(ei.value) == message.format("Command(resume=...)")
    assert project.checkpointer.get_tuple(thread_config("nope")) is None
    project.close()


def test_update_state_as_a_node_whose_edges_end_the_task_is_refused(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    cfg = thread_config("t2")
    graph.invoke(new_task("Do it", "t2"), cfg, interrupt_before=["reviewer"])
    before = graph.get_state(cfg)
    with pytest.raises(InvalidInputError) as ei:
        graph.update_state(cfg, {"identity": {"interpreted_goal": "Do it well"}}, as_node="reviewer")
    assert str(ei.value) == (
        "update_state(as_node='reviewer') would leave task 't2' running with no next node: the graph continues "
        "from the edges of 'reviewer' as if it had just run, and they send the task to END (the task has not "
        "finished); nothing was recorded; leave as_node out (the default: it would continue at 'reviewer'), or "
        "name the node whose edges lead where the task should go"
    )
    assert graph.get_state(cfg).config == before.config
    assert "state.edited" not in _kinds(project.stores.events.read("t2"))
    # as the executor (whose router sends a finished step to the reviewer): the task goes on
    graph.update_state(cfg, {"identity": {"interpreted_goal": "Do it well"}}, as_node="executor")
    assert graph.get_state(cfg).next == ("reviewer",)
    graph.invoke(None, cfg)
    events = project.stores.events.read("t2")
    assert _kinds(events) == [*RUN[:7], "state.edited", "resume.started", *RUN[7:]]  # (an edit: a resume)
    assert events[7].payload["as_node"] == "executor"
    assert _state(graph, "t2").identity.interpreted_goal == "Do it well"
    project.close()


def _refused_at_tester(graph: Any, env: NodeEnv, tid: str, message: str) -> list[Any]:
    """The task failed at the tester on ``message``; the checkpoint is the log's fold."""
    events = env.events.read(tid)
    assert _kinds(events) == [*RUN[:7], "error.occurred", "task.completed"]
    assert events[-2].payload == {
        "error_id": "err-1",
        "source": "graph:tester",
        "message": message,
        "step_id": None,
        "call_id": None,
    }
    assert events[-1].payload == {"status": "failed", "summary": message}
    assert {e.causation_id for e in events[-2:]} == {f"{tid}#7:tester"}
    state = _state(graph, tid)
    assert state.control.status == "failed" and replay(events) == state
    assert graph.get_state(thread_config(tid)).next == ()
    assert diagnose(env.stores, graph.checkpointer, tid) == []
    return events


def test_a_command_going_to_a_node_the_graph_lacks_fails_the_task() -> None:
    def tester(state: TaskContext) -> Command[Any]:
        return Command(goto="reveiwer")

    graph, env = _custom(tester)
    graph.invoke(new_task("Do it", "g1"), thread_config("g1"))
    _refused_at_tester(
        graph,
        env,
        "g1",
        "node 'tester' returned Command(goto='reveiwer'), but the graph has no node 'reveiwer' (LangGraph would "
        f"drop the route without a word); its nodes: {NODES}; go to one of them or END, and declare the targets: "
        "add_node('tester', ..., destinations=(...)) or type the node -> Command[Literal[...]]",
    )


def test_a_custom_node_that_raises_is_recorded_and_raised_and_a_resume_ends_failed() -> None:
    calls: list[int] = []

    def tester(state: TaskContext) -> dict[str, Any]:
        calls.append(1)
        raise RuntimeError("the KV check  crashed\non key 7")

    graph, env = _custom(tester)
    cfg = thread_config("x1")
    with pytest.raises(RuntimeError, match="the KV check"):
        graph.invoke(new_task("Do it", "x1"), cfg)
    message = "tester node failed: RuntimeError: the KV check crashed on key 7"
    events = env.events.read("x1")
    assert _kinds(events) == [*RUN[:7], "error.occurred", "task.completed"]
    assert events[-2].payload["source"] == "graph:tester" and events[-2].payload["message"] == message
    assert events[-1].payload == {"status": "failed", "summary": message}
    assert replay(events).control.status == "failed"
    # LangGraph keeps the checkpoint before the node, its error a pending write: the resume ends the
    # task failed as recorded, without running the node again
    assert [t.name for t in graph.get_state(cfg).tasks] == ["tester"]
    graph.invoke(None, cfg)
    assert calls == [1]
    assert env.events.read("x1") == events
    _refused_at_tester(graph, env, "x1", message)


def test_an_interrupt_in_a_custom_node_passes_through_unrecorded() -> None:
    def tester(state: TaskContext) -> dict[str, Any]:
        interrupt("run the slow check?")
        return {}

    graph, env = _custom(tester)
    cfg = thread_config("i1")
    graph.invoke(new_task("Do it", "i1"), cfg)
    snap = graph.get_state(cfg)
    assert snap.next == ("tester",) and snap.tasks[0].interrupts[0].value == "run the slow check?"
    assert _kinds(env.events.read("i1")) == RUN[:7]
    graph.invoke(Command(resume="yes"), cfg)
    assert _kinds(env.events.read("i1")) == RUN  # (the same graph object goes on: no resume.started)
    assert _state(graph, "i1").control.status == "completed"


def test_a_retry_policy_retries_and_only_the_last_failure_is_recorded() -> None:
    attempts: list[int] = []

    def flaky(state: TaskContext) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("the KV store is restarting")
        return {}

    graph, env = _custom(flaky, retry=RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False))
    graph.invoke(new_task("Do it", "y1"), thread_config("y1"))
    assert len(attempts) == 2 and _kinds(env.events.read("y1")) == RUN

    tries: list[int] = []

    def broken(state: TaskContext) -> dict[str, Any]:
        tries.append(1)
        raise (ConnectionError if len(tries) < 4 else ValueError)(f"attempt {len(tries)}")

    policy = RetryPolicy(max_attempts=3, initial_interval=0.0, jitter=False)
    graph, env = _custom(broken, retry=policy)
    with pytest.raises(ConnectionError, match="attempt 3"):
        graph.invoke(new_task("Do it", "y2"), thread_config("y2"))
    events = env.events.read("y2")
    assert len(tries) == 3 and _kinds(events) == [*RUN[:7], "error.occurred", "task.completed"]
    assert events[-2].payload["message"] == "tester node failed: ConnectionError: attempt 3"

    # an error the policy does not retry (LangGraph's default retries no ValueError): recorded at once
    graph, env = _custom(broken, retry=policy)
    with pytest.raises(ValueError, match="attempt 4"):
        graph.invoke(new_task("Do it", "y3"), thread_config("y3"))
    assert (
        len(tries) == 4 and env.events.read("y3")[-2].payload["message"] == "tester node failed: ValueError: attempt 4"
    )


def test_a_partial_dict_update_names_only_the_fields_it_changes() -> None:
    def tester(state: TaskContext) -> dict[str, Any]:
        return {"identity": {"interpreted_goal": "HACKED"}}

    graph, env = _custom(tester)
    graph.invoke(new_task("Do it", "d1"), thread_config("d1"))
    _refused_at_tester(
        graph,
        env,
        "d1",
        "node 'tester' returned identity.interpreted_goal without an event recording it (the checkpoint would no "
        "longer be the event log's fold): a node changes the task only through the event log; record it as events "
        "with nodes.NodeRun (run.commit([...])) and return run.update(); to edit a task from outside a node, use "
        "graph.update_state (recorded as state.edited)",
    )


def test_a_stream_stopped_early_resumes_from_its_last_node(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    cfg = thread_config("s1")
    for _chunk in graph.stream(new_task("Do it", "s1"), cfg, stream_mode="messages"):
        break  # the planner's first token: the planner has run, the executor has not
    snap = graph.get_state(cfg)
    # LangGraph: the planner's update is a pending write of the step (applied on resume), so
    # nothing is left to run in it (next is empty) and the tasks say what ran
    assert snap.next == () and [(t.name, t.result is not None) for t in snap.tasks] == [("planner", True)]
    assert _kinds(project.stores.events.read("s1")) == RUN[:3]
    graph.invoke(None, cfg)
    assert _kinds(project.stores.events.read("s1")) == RUN  # the planner is not run again
    assert _state(graph, "s1").control.status == "completed"
    project.close()


def test_two_gathered_ainvokes_of_one_thread_name_the_run_in_this_process(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    cfg = thread_config("a1")

    async def both() -> list[Any]:
        runs = [graph.ainvoke(new_task("Do it", "a1"), cfg) for _ in range(2)]
        return list(await asyncio.gather(*runs, return_exceptions=True))

    results = asyncio.run(both())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and type(errors[0]).__name__ == "SequenceConflictError"
    assert str(errors[0]).endswith(
        "another run in this process (on the same store: e.g. two invoke/ainvoke of one thread_id at once) is "
        "writing this task: run one writer per thread_id"
    )
    assert _kinds(project.stores.events.read("a1")) == RUN  # the winner's run, nothing of the loser's
    project.close()


def test_an_async_stream_closed_early_reruns_the_cancelled_node_once(tmp_path: Path) -> None:
    graph, project = _project_graph(tmp_path)
    cfg = thread_config("s2")

    async def stop_then_resume() -> tuple[Any, list[str]]:
        stream = graph.astream(new_task("Do it", "s2"), cfg, stream_mode="messages")
        async with contextlib.aclosing(stream):
            async for _chunk in stream:
                break  # the planner's first token: closing the stream cancels the planner's run
        snap = await graph.aget_state(cfg)
        before = _kinds(project.stores.events.read("s2"))
        await graph.ainvoke(None, cfg)
        return snap, before

    snap, before = asyncio.run(stop_then_resume())
    # the cancelled planner recorded nothing and is the node to run next
    assert snap.next == ("planner",) and [(t.name, t.result) for t in snap.tasks] == [("planner", None)]
    assert before == []
    assert _kinds(project.stores.events.read("s2")) == RUN
    project.close()
