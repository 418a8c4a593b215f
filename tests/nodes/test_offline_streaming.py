"""The offline models stream as providers do, and answer from the call's metadata however called.

langchain-core calls a model's ``_stream`` without the run manager that carries the call's
metadata; the scripted model must still pick the role's answer (``role``, ``role_call``), whether
it is invoked, streamed, or invoked under a streaming callback (what ``stream_mode="messages"``
attaches).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from nodes import ScriptedChatModel
from nodes.testing import ARGS_CHUNK, reply_chunks, text_pieces, tool_call

META = {"metadata": {"role": "executor", "role_call": 2}}


def model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "executor": [
                tool_call("read", {"path": "a"}, id="x0"),
                tool_call("write", {"path": "notes/b.md", "content": "né\n" * 4}, id="x1", content="Write it  down."),
            ]
        }
    )


def added(chunks: list[Any]) -> AIMessageChunk:
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    return total


def test_text_pieces_are_words_with_their_spaces() -> None:
    assert text_pieces("Write it  down.") == ["Write", " it", "  down."]
    assert text_pieces("  lead\ntrail ") == ["  lead", "\ntrail", " "]
    assert text_pieces("") == []


def test_reply_chunks_add_up_to_the_reply() -> None:
    ai = model().script["executor"][1]  # type: ignore[index]
    chunks = reply_chunks(ai)
    args = json.dumps(ai.tool_calls[0]["args"])
    assert [c.content for c in chunks[:3]] == ["Write", " it", "  down."]
    calls = [c.tool_call_chunks[0] for c in chunks[3:]]
    assert [(t["name"], t["id"]) for t in calls[:2]] == [("write", "x1"), (None, None)]
    assert [t["args"] for t in calls] == [args[k : k + ARGS_CHUNK] for k in range(0, len(args), ARGS_CHUNK)]
    total = added(chunks)
    assert total.content == ai.content and total.tool_calls == ai.tool_calls
    assert [c.content for c in reply_chunks(AIMessage(content=""))] == [""]


def test_stream_astream_and_invoke_answer_from_the_calls_metadata() -> None:
    msgs = [HumanMessage("go")]
    streamed = list(model().stream(msgs, config=META))
    assert len(streamed) > 4
    total = added(streamed)
    assert (total.content, total.tool_calls[0]["id"]) == ("Write it  down.", "x1")

    async def astream() -> list[Any]:
        return [c async for c in model().astream(msgs, config=META)]

    assert added(asyncio.run(astream())).tool_calls == total.tool_calls
    assert model().invoke(msgs, config=META).tool_calls == total.tool_calls
    assert asyncio.run(model().ainvoke(msgs, config=META)).tool_calls == total.tool_calls


def test_invoke_in_a_node_streamed_with_messages_keeps_the_role() -> None:
    """``stream_mode="messages"`` attaches a streaming handler: ``invoke`` then runs ``_stream``."""
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        ids: list[str]

    m = model()

    def call(state: State) -> State:
        return {"ids": [c["id"] for c in m.invoke([HumanMessage("go")], config=META).tool_calls]}

    g = StateGraph(State)
    g.add_node("call", call)
    g.add_edge(START, "call")
    chunks = list(g.compile().stream({"ids": []}, stream_mode=["messages", "values"]))
    pairs = [data for kind, data in chunks if kind == "messages"]
    tokens = [(c.content, meta["role"], meta["role_call"]) for c, meta in pairs]
    assert tokens[:3] == [("Write", "executor", 2), (" it", "executor", 2), ("  down.", "executor", 2)]
    assert chunks[-1] == ("values", {"ids": ["x1"]})
