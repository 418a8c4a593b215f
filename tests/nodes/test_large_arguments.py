"""Large tool-call arguments. Once a call has run, its arguments are compressed
in transcripts like outputs (head, tail, size, the ``artifact://`` ref of the full arguments),
so a large write never leaves the task stuck after its side effect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import COMMAND_LIMIT, Permissions, SqliteStores, replay
from context.compression import HEAD_CHARS, TAIL_CHARS, arguments_ref, compress_arguments
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, review, tool_call


@pytest.mark.parametrize("size", [20_000, 60_000])
def test_a_large_write_then_a_listing_fits_the_budget_and_finishes(tmp_path: Path, size: int) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    content = "".join(f"line {i:05d} of the generated page\n" for i in range(size // 32 + 1))[:size]
    model = ScriptedChatModel(
        script={
            "planner": [plan("Write the page")],
            "executor": [
                tool_call("write_file", {"path": "docs/page.md", "content": content}, id="w1"),
                tool_call("list_dir", {"path": "docs"}, id="l1"),
                complete("written"),
            ],
            "reviewer": [review("approve")],
        }
    )
    stores = SqliteStores(":memory:")
    g = build_orchestrator(
        model,
        tools=WorkspaceTools(ws, receipts_dir=tmp_path / "r"),
        stores=stores,
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
        budget=8_000,
    )
    r = run_graph(
        g, stores, "big", new_task("Write docs/page.md.", "big", permissions=Permissions(file_scopes=["docs/**"]))
    )
    assert r.state.control.status == "completed", r.state.errors
    assert (ws / "docs" / "page.md").read_text() == content
    events = stores.events.read("big")
    assert replay(events) == r.state
    built = [e for e in events if e.kind == "context.built" and e.payload["role"] == "executor"]
    assert len(built) == 3 and all(e.payload["prompt_tokens"] <= 7_000 for e in built)
    args = json.dumps({"path": "docs/page.md", "content": content})
    called = next(e for e in events if e.kind == "tool.called")
    ref = arguments_ref(called.payload["arguments"])
    assert json.loads(stores.artifacts.get(ref))["content"] == content  # the full arguments, exact
    last = stores.artifacts.get(built[-1].payload["prompt_ref"]).decode()
    omitted = size - HEAD_CHARS - TAIL_CHARS
    assert f"[... {omitted} of {size} chars omitted; full arguments: {ref}]" in last
    assert json.dumps(content[:100])[1:-1] in last and len(args) > COMMAND_LIMIT


def test_compress_arguments_shapes() -> None:
    small = json.dumps({"path": "a", "content": "x" * 100})
    assert compress_arguments(small) == (small, False)
    many = json.dumps({"a": "y" * 3_000, "b": "z" * 1_000, "n": 3, "list": ["q" * 10]})
    text, changed = compress_arguments(many)
    out = json.loads(text)
    ref = arguments_ref(many)
    assert changed and out["n"] == 3 and out["list"] == ["q" * 10]
    assert out["a"] == "y" * 1_200 + f"\n[... 600 of 3000 chars omitted; full arguments: {ref}]\n" + "y" * 1_200
    assert out["b"] == "z" * 1_000  # not over head + tail: kept
    medium = json.dumps({f"k{i}": "m" * 2_000 for i in range(3)})  # no value over head + tail
    t, c = compress_arguments(medium)
    assert (
        c
        and t
        == medium[:1_200]
        + f"\n[... {len(medium) - 2_400} of {len(medium)} chars omitted; full arguments: {arguments_ref(medium)}]\n"
        + medium[-1_200:]
    )
    not_json = "w" * 5_000
    t, c = compress_arguments(not_json)
    assert c and t.startswith("w" * 1_200 + "\n[... 2600 of 5000 chars omitted; full arguments: artifact://sha256:")
