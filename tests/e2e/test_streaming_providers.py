"""Streaming with the real provider clients (langchain-openai, langchain-anthropic) against the
loopback stubs' server-sent events (``tests/provider_stub.py``): tokens arrive as they are sent,
and each call's usage and cache figures are recorded as for a call that does not stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from langgraph.checkpoint.memory import InMemorySaver

import graphs
import nodes
from context import SqliteStores
from nodes.testing import complete, plan, review, tool_call

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")

from provider_stub import Stub  # noqa: E402
from run_compare import comparable  # noqa: E402

MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-6"}


class Shout:
    """One read-only tool, ``shout``."""

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        return arguments["text"].upper()


def script() -> dict[str, list[Any]]:
    return {
        "planner": [plan("Shout hello", goal="hello shouted")],
        "executor": [
            tool_call("shout", {"text": "hello there"}, content="Shout hello at once."),
            complete("shouted hello", findings=["HELLO THERE came back"]),
        ],
        "reviewer": [review("approve", "it was shouted")],
    }


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL", "LANGSMITH_TRACING"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    yield monkeypatch


def run(wire: str, monkeypatch: pytest.MonkeyPatch, how: str) -> tuple[Any, list[Any], Stub]:
    """Run the task on a fresh stub: ``invoke``, ``stream`` (``messages`` and ``updates``) or
    ``streaming`` (a model made with ``streaming=True``, run with ``invoke``).
    Returns ``(its comparable log and state, the stream's chunks, the stub)``."""
    with Stub(wire, script()) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL" if wire == "openai" else "ANTHROPIC_API_URL", stub.url)
        model = nodes.resolve_model(MODELS[wire], **({"streaming": True} if how == "streaming" else {}))
        stores = SqliteStores(":memory:")
        saver = InMemorySaver(serde=graphs.checkpoint_serde())
        g = graphs.build_orchestrator(model, tools=Shout(), checkpointer=saver, stores=stores)
        task, cfg = graphs.new_task("Shout hello.", "p1"), graphs.thread_config("p1")
        chunks = list(g.stream(task, cfg, stream_mode=["messages", "updates"])) if how == "stream" else []
        if how != "stream":
            g.invoke(task, cfg)
        got = comparable(stores.events.read("p1"), g.get_state(cfg).values)
        stores.close()
    return got, chunks, stub


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_streamed_calls_send_tokens_and_record_usage(clean_env: pytest.MonkeyPatch, wire: str) -> None:
    invoked, _, plain = run(wire, clean_env, "invoke")
    streamed, chunks, stub = run(wire, clean_env, "stream")
    assert not any(r.get("stream") for r in plain.requests)
    assert [r.get("stream") for r in stub.requests] == [True] * 4
    if wire == "openai":  # the usage chunk is asked for
        assert [r["stream_options"] for r in stub.requests] == [{"include_usage": True}] * 4
    assert streamed[1]["control"]["status"] == "completed"
    assert streamed == invoked  # the same log, usage and cache figures included
    usage = [e["payload"]["usage"] for e in streamed[0] if e["kind"] == "context.built"]
    if wire == "openai":
        assert usage == [
            {"input_tokens": 1000 + n, "output_tokens": 20, "cache_read": 512, "cache_creation": 0} for n in range(1, 5)
        ]
    else:  # LangChain's input_tokens = uncached + cache read + cache write
        assert usage == [
            {"input_tokens": 1000 + n, "output_tokens": 20, "cache_read": 900, "cache_creation": 0} for n in range(1, 5)
        ]
    tokens = [
        (meta["langgraph_node"], meta["role"], meta["role_call"], c.text)
        for kind, (c, meta) in (x for x in chunks if x[0] == "messages")
        if isinstance(c, AIMessageChunk) and c.text
    ]
    assert tokens == [
        ("executor", "executor", 1, "Shout"),
        ("executor", "executor", 1, " hello"),
        ("executor", "executor", 1, " at"),
        ("executor", "executor", 1, " once."),
    ]
    args = [
        tc["args"]
        for _, (c, meta) in (x for x in chunks if x[0] == "messages")
        if meta["role"] == "executor" and meta["role_call"] == 1
        for tc in c.tool_call_chunks
    ]
    assert len(args) > 1 and "".join(a or "" for a in args) == '{"text": "hello there"}'


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_model_made_with_streaming_true_records_what_invoke_records(clean_env: pytest.MonkeyPatch, wire: str) -> None:
    invoked, _, _ = run(wire, clean_env, "invoke")
    streamed, _, stub = run(wire, clean_env, "streaming")
    assert [r.get("stream") for r in stub.requests] == [True] * 4
    assert streamed == invoked
