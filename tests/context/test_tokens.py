"""One token counter: exact o200k/cl100k offline, the upper-bound estimate, every count
through ``NodeEnv.count_tokens``, and Chinese tool outputs at budget 8,000."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from context import RecordedStep, SqliteStores, Trajectory
from context.tokens import counter_for_model, counter_name, encoding_counter, estimate_tokens
from graphs import build_orchestrator, new_task
from graphs.bench.token_counters import SAMPLES, corpus, measure
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import NodeEnv, ReplayChatModel, ReplayTools
from nodes.message_tokens import message_tokens, model_counter

O200K = encoding_counter("o200k_base")
CL100K = encoding_counter("cl100k_base")


def test_exact_encodings_offline() -> None:
    assert O200K("hello world") == 2 and CL100K("hello world") == 2
    assert O200K("<|endoftext|>") == 7  # special-token text counted as text
    zh = SAMPLES["sample:zh"]
    assert (len(zh), O200K(zh), CL100K(zh)) == (263, 173, 227)


def test_counter_for_model() -> None:
    names = {
        m: counter_name(counter_for_model(m))
        for m in (
            None,
            "openai:gpt-4o-mini",
            "openai:gpt-4",
            "openai:gpt-3.5-turbo",
            "openai:some-future-model",
            "gpt-4.1",
            "anthropic:claude-sonnet-4-6",
            "google_genai:gemini-2.5-pro",
        )
    }
    assert names == {
        None: "o200k_base",
        "openai:gpt-4o-mini": "o200k_base",
        "openai:gpt-4": "cl100k_base",
        "openai:gpt-3.5-turbo": "cl100k_base",
        "openai:some-future-model": "o200k_base",
        "gpt-4.1": "o200k_base",
        "anthropic:claude-sonnet-4-6": "estimate",
        "google_genai:gemini-2.5-pro": "estimate",
    }


def test_model_counter_from_langchain_params() -> None:
    from nodes import ScriptedChatModel

    assert counter_name(model_counter(ScriptedChatModel(script=[]))) == "o200k_base"
    assert counter_name(model_counter(ReplayChatModel(trajectory=Trajectory("t", "x", {})))) == "o200k_base"


def test_estimate_rule_and_bound() -> None:
    # letters 1 + n//4 (with its leading space), digits ceil(n/3), blanks ceil(n/4), other ASCII 1,
    # non-ASCII 1, beyond the BMP 3
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world") == 4  # "hello" 2, " world" 2
    assert estimate_tokens("1234567") == 3
    assert estimate_tokens("a    b") == 3  # "a" 1, "   " 1, " b" 1
    assert estimate_tokens("x = f(1);\n") == 9
    assert estimate_tokens("汉字😀") == 5
    for name, text in SAMPLES.items():
        assert estimate_tokens(text) >= O200K(text), name
    ratios = {r.counter: (round(r.lowest, 3), round(r.highest, 3)) for r in measure(list(SAMPLES.items()))}
    assert ratios["estimate"] == (1.446, 2.086)  # Japanese, Korean
    assert ratios["4 chars a token"] == (0.286, 0.526)  # the old rule undercounts CJK 2-3.5x


def test_message_tokens_use_the_given_counter() -> None:
    msgs = [
        SystemMessage(content="You are a helper."),
        HumanMessage(content="Fix the bug."),
        AIMessage(content="", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "c1"}]),
        ToolMessage(content="a.py\nb.py", tool_call_id="c1"),
    ]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    one = [O200K(t) + 3 for t in ("You are a helper.system", "Fix the bug.user")]
    calls = json.dumps([{"name": "bash", "args": {"command": "ls"}, "id": "c1"}])
    one += [O200K(calls + "assistant") + 3, O200K("a.py\nb.pyc1tool") + 3]
    assert message_tokens(msgs, O200K) == sum(one) == 54
    assert message_tokens(msgs, O200K, tools) == 54 + O200K(json.dumps(tools)) == 80
    assert message_tokens(msgs, len) == 132  # any str -> int counter: here characters


def test_openai_role_matches_langchain_core() -> None:
    """``openai_role`` gives every message class the role langchain-core's own (private) helper gives."""
    from langchain_core.messages import AIMessageChunk, ChatMessage, FunctionMessage
    from langchain_core.messages.utils import _get_message_openai_role

    from nodes.message_tokens import openai_role

    msgs = [
        AIMessage(content="a"),
        AIMessageChunk(content="a"),
        HumanMessage(content="h"),
        ToolMessage(content="t", tool_call_id="c1"),
        SystemMessage(content="s"),
        SystemMessage(content="s", additional_kwargs={"__openai_role__": "developer"}),
        FunctionMessage(content="f", name="fn"),
        ChatMessage(content="c", role="critic"),
    ]
    assert [openai_role(m) for m in msgs] == [_get_message_openai_role(m) for m in msgs]


def _zh(i: int, n: int) -> str:
    base = SAMPLES["sample:zh"]
    text = f"输出{i}：" + base * (n // len(base) + 1)
    return text[:n]


def _cjk_run(budget: int, env_counter=None, steps: list[RecordedStep] | None = None):
    steps = steps or [
        RecordedStep(
            step=i + 1,
            thought=f"读取第{i}个日志",
            action='{"name": "bash"}',
            observation=_zh(i, 3_900),
            tool="bash",
            arguments={"command": f"cat log{i}.txt"},
        )
        for i in range(6)
    ]
    t = Trajectory(id="cjk", task="检查六个日志文件并总结错误。", meta={}, steps=steps)
    stores = SqliteStores(":memory:")
    env = None
    if env_counter is not None:
        env = NodeEnv(events=stores.events, artifacts=stores.artifacts, budget=budget, count_tokens=env_counter)
    g = build_orchestrator(
        ReplayChatModel(trajectory=t),
        tools=ReplayTools(t),
        stores=stores,
        env=env,
        budget=budget,
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
    )
    run_graph(g, stores, t.id, new_task(t.request, t.id))
    built = [e.payload for e in stores.events.read(t.id) if e.kind == "context.built"]
    return stores, built


def test_cjk_outputs_stay_within_budget_by_o200k() -> None:
    """The reported case: six 3,900-character Chinese tool outputs (under the 4,000-character
    compression threshold), budget 8,000: every call's prompt fits, by o200k."""
    assert O200K(_zh(0, 3_900)) == 2_550
    stores, built = _cjk_run(8_000)
    execs = [p for p in built if p["role"] == "executor"]
    assert [p["prompt_tokens"] for p in execs] == [632, 3248, 5864, 6172, 4034, 6650]
    # the forced restart keeps the two older calls as digests (cheaper than a restart that the
    # next call would force again); the call after it reads the whole prompt from the cache
    assert [bool(p["transcript_reset"]) for p in execs] == [False, False, False, False, True, False]
    assert execs[4]["transcript_reset"] == {
        "reason": "budget",
        "removed": 2616,
        "resent": 782,
        "expected_saving": 194.7,
        "horizon": 2,
        "rule": "flat",
        "digests": 2,
    }
    assert execs[5]["cached_prefix_tokens"] == 4034
    for p in built:
        assert p["prompt_tokens"] <= 8_000 - 1_000
        # the stored prompt (every message's text, with headers) recounted independently
        assert O200K(stores.artifacts.get(p["prompt_ref"]).decode()) <= p["prompt_tokens"]


def test_env_counter_is_the_one_counter() -> None:
    """``NodeEnv(count_tokens=...)`` decides prompt_tokens, blocks and the fingerprints."""
    _, built = _cjk_run(8_000, env_counter=len)
    p = next(p for p in built if p["role"] == "executor")
    assert p["prompt_tokens"] == 2_481  # characters, not o200k's 632
    assert sum(int(f.rsplit(":", 1)[1]) for f in p["fingerprints"]) == 2_481
    assert sum(b["tokens"] for b in p["blocks"]) == 725


def test_tokens_command(tmp_path) -> None:
    from typer.testing import CliRunner

    from graphs.cli import app

    rows = [{"id": "t", "task": "x", "n_steps": 1, "meta": {}}]
    rows.append({"step": 1, "thought": None, "action": "ls", "observation": "drwxr-xr-x 2 root root 4096 x\n" * 10})
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert [w for w, _ in corpus(tmp_path)] == ["t.jsonl:1:observation", *SAMPLES]
    res = CliRunner().invoke(app, ["tokens", str(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "5 texts (4 CJK/Japanese/Korean/emoji samples), ratio = counter / o200k_base"
    assert lines[-1].startswith("estimate: worst under/over ratio ")
    res = CliRunner().invoke(app, ["tokens", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "is not a folder of trajectories" in res.output


@pytest.mark.parametrize(
    "text,tokens,joint",
    [  # joint: tokens where the text meets the schema's closing quote (merged into one with it or not)
        (_zh(0, 2_000), 1_310, 1),
        ("😀🎉" * 500, 1_500, 1),
        ("日本語のテキストです。" * 150, 1_200, 1),
        ("한국어 텍스트입니다. " * 150, 1_051, 0),
    ],
    ids=["zh", "emoji", "ja", "ko"],
)
def test_non_ascii_arguments_count_as_sent_not_as_json_escapes(text: str, tokens: int, joint: int) -> None:
    """A tool call's arguments are counted as the JSON the clients send (non-ASCII as itself): the
    arguments' text adds exactly its o200k tokens. (Counted with ``\\uXXXX`` escapes, the 2,000
    Chinese characters were 7,301 tokens, and a task writing them stopped on a budget error.)"""
    assert O200K(text) == tokens

    def call(content: str) -> AIMessage:
        return AIMessage(
            content="", tool_calls=[{"name": "write_file", "args": {"path": "a.md", "content": content}, "id": "c1"}]
        )

    assert message_tokens([call(text)], O200K) - message_tokens([call("")], O200K) == tokens
    schema = [{"type": "function", "function": {"name": "写文件", "description": text, "parameters": {}}}]
    empty = [{"type": "function", "function": {"name": "写文件", "description": "", "parameters": {}}}]
    assert message_tokens([], O200K, schema) - message_tokens([], O200K, empty) == tokens + joint


def test_six_chinese_files_written_fit_the_default_budget() -> None:
    """Six ``write_file`` calls of 2,000 Chinese characters each (1,310 o200k tokens) at budget
    8,000: the task completes, every prompt within the budget by o200k."""
    steps = [
        RecordedStep(
            step=i + 1,
            thought=f"写第{i}个文件",
            action='{"name": "write_file"}',
            observation="ok",
            tool="write_file",
            arguments={"path": f"docs/说明{i}.md", "content": _zh(i, 2_000)},
        )
        for i in range(6)
    ]
    stores, built = _cjk_run(8_000, steps=steps)
    assert stores.events.read("cjk")[-1].kind == "task.completed"
    assert max(p["prompt_tokens"] for p in built) <= 8_000 - 1_000
    for p in built:  # the stored prompt recounted independently never exceeds the count
        assert O200K(stores.artifacts.get(p["prompt_ref"]).decode()) <= p["prompt_tokens"]


def test_encoding_counter_loads_its_encoding_at_the_first_count_not_before() -> None:
    from context import tokens

    tokens._encoding.cache_clear()
    tokens.encoding_counter.cache_clear()
    count = tokens.encoding_counter("cl100k_base")
    assert tokens._encoding.cache_info().currsize == 0  # built, nothing loaded yet
    assert count("hello world") == 2
    assert tokens._encoding.cache_info().currsize == 1
    assert count("hello world, hello") == 4
    assert tokens._encoding.cache_info().currsize == 1  # loaded once
    with pytest.raises(ValueError, match="unknown encoding 'p50k_base': use one of"):
        tokens.encoding_counter("p50k_base")
