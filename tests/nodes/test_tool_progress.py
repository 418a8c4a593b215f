"""A tool call's progress records (``custom`` stream) use one stream writer, looked up once per
call, however many output lines the tool reports; without ``custom`` nothing is sent."""

from __future__ import annotations

from typing import Any

import langgraph.config
import pytest
from langgraph.checkpoint.memory import InMemorySaver

import graphs
import nodes
from nodes.testing import complete, plan, review, tool_call
from nodes.tools import report_progress


class Tail:
    """One read-only tool, ``tail``, that reports each of its output lines as it goes."""

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("tail", "Follow a log.", {"n": {"type": "integer"}}, ["n"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        lines = [f"line {i}\n" for i in range(arguments["n"])]
        for line in lines:
            report_progress("tool.output", call_id, tool, line=line)
        return "".join(lines)


def _graph() -> Any:
    model = nodes.ScriptedChatModel(
        script={
            "planner": [plan("Follow the log")],
            "executor": [tool_call("tail", {"n": 40}, id="c1"), tool_call("tail", {"n": 2}, id="c2"), complete("ok")],
            "reviewer": [review("approve", "followed")],
        }
    )
    return graphs.build_orchestrator(model, tools=Tail(), checkpointer=InMemorySaver(serde=graphs.checkpoint_serde()))


@pytest.mark.parametrize("mode", ["custom", "updates"])
def test_the_stream_writer_is_looked_up_once_per_tool_call(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    looked_up: list[int] = []
    real = langgraph.config.get_stream_writer

    def counting() -> Any:
        looked_up.append(1)
        return real()

    monkeypatch.setattr(langgraph.config, "get_stream_writer", counting)
    g = _graph()
    chunks = list(g.stream(graphs.new_task("Follow the log.", "p1"), graphs.thread_config("p1"), stream_mode=mode))
    assert len(looked_up) == 2  # two calls, 42 output lines
    if mode == "updates":
        assert all(isinstance(c, dict) and "kind" not in c for c in chunks)
        return
    assert [c["kind"] for c in chunks] == ["tool.started", *["tool.output"] * 40, "tool.finished"] + [
        "tool.started",
        "tool.output",
        "tool.output",
        "tool.finished",
    ]
    assert chunks[1] == {"kind": "tool.output", "call_id": "c1", "tool": "tail", "line": "line 0\n"}
    assert chunks[-1] == {"kind": "tool.finished", "call_id": "c2", "tool": "tail", "status": "ok", "output_chars": 14}


def test_outside_a_graph_run_progress_goes_nowhere() -> None:
    assert Tail().execute("c0", "tail", {"n": 2}) == "line 0\nline 1\n"  # (no run: nothing raised)
