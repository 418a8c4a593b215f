"""Real provider clients (langchain-openai, langchain-anthropic) against loopback servers that
speak the OpenAI Chat Completions and Anthropic Messages wire formats.

Each stub is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (an ephemeral port), answering per
role from a script of ``AIMessage``s (the role is read from the system prompt), or with a queued
fault (an HTTP error, a hang). It records every request body, and closes itself (a hang is
bounded: it waits at most 10 s, and is released when the server closes). No network.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import SqliteStores
from graphs.cli import app
from graphs.demo.scenario import DEMO_REQUEST, SAMPLE_WORKSPACE

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")

from provider_stub import (  # noqa: E402
    ANTHROPIC_401,
    OPENAI_401,
    OPENAI_429,
    OPENAI_500,
    OPENAI_LONG,
    Stub,
    sample_script,
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL", "LANGSMITH_TRACING"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _point(monkeypatch: pytest.MonkeyPatch, stub: Stub) -> None:
    if stub.wire == "openai":
        monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
    else:
        monkeypatch.setenv("ANTHROPIC_API_URL", stub.url)


MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-6"}


def _run(tmp: Path, wire: str, *extra: str, task_id: str = "t1") -> Any:
    args = ["run", DEMO_REQUEST, "--model", MODELS[wire], "--workspace", str(tmp / "ws"), "--task-id", task_id]
    args += ["--approve-all", "--db", str(tmp / "db.sqlite"), "--out", str(tmp / "runs"), *extra]
    return CliRunner().invoke(app, args)


def _resume(tmp: Path, task_id: str = "t1") -> Any:
    args = ["resume", task_id, "--approve-all", "--db", str(tmp / "db.sqlite"), "--out", str(tmp / "runs")]
    return CliRunner().invoke(app, args)


def _events(tmp: Path, task_id: str = "t1") -> list[Any]:
    st = SqliteStores(tmp / "db.sqlite")
    try:
        return st.events.read(task_id)
    finally:
        st.close()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_run_fixes_the_sample_against_the_stub(env: Path, monkeypatch: pytest.MonkeyPatch, wire: str) -> None:
    with Stub(wire, sample_script()) as stub:
        _point(monkeypatch, stub)
        res = _run(env, wire)
    assert res.exit_code == 0, res.output
    assert "task t1: completed" in res.output
    assert "client_max_body_size 10m;" in (env / "ws/proxy/nginx.conf").read_text()
    evs = _events(env)
    assert [e.payload["status"] for e in evs if e.kind == "tool.result.received"] == ["ok", "ok"]
    assert [p["role"] for p in (e.payload for e in evs if e.kind == "context.built")] == [
        "planner",
        "executor",
        "executor",
        "executor",
        "reviewer",
    ]
    # usage as the provider reported it, per call, in the events and manifests.jsonl
    built = [e.payload for e in evs if e.kind == "context.built"]
    if wire == "openai":
        want = [
            {"input_tokens": 1000 + n, "output_tokens": 20, "cache_read": 512, "cache_creation": 0} for n in range(1, 6)
        ]
        assert [b["prompt_cache_key"] for b in stub.requests] == ["t1"] * 5  # one cache per task
    else:  # LangChain's input_tokens = uncached + cache read + cache write
        want = [
            {"input_tokens": 1000 + n, "output_tokens": 20, "cache_read": 900, "cache_creation": 0} for n in range(1, 6)
        ]
        for b in stub.requests:  # breakpoints: after the core layer (the first user message), at the tail
            assert b["cache_control"] == {"type": "ephemeral"} and "prompt_cache_key" not in b
            marked = [
                (i, j)
                for i, m in enumerate(b["messages"])
                if isinstance(m["content"], list)
                for j, blk in enumerate(m["content"])
                if "cache_control" in blk
            ]
            assert marked == [(0, 0)] and b["messages"][0]["content"][0]["text"].startswith(
                "## Original request (verbatim)\n"
            )
    assert [p["usage"] for p in built] == want
    lines = [json.loads(ln) for ln in (env / "runs/t1/manifests.jsonl").read_text().splitlines()]
    assert [ln["usage"] for ln in lines] == want
    assert "provider: 1001 in (cache read" in res.output
    counted = sum(p["prompt_tokens"] for p in built)
    res2 = CliRunner().invoke(app, ["inspect", "t1", "--db", str(env / "db.sqlite")])
    assert res2.exit_code == 0, res2.output
    assert (
        f"5 calls: 5,015 input tokens reported vs {counted:,} counted ({5015 - counted:+,}); "
        f"cache read {5 * want[0]['cache_read']:,}, cache write 0, output 100"
    ) in res2.output
    # the same totals folded into the state: inspect --json and state.json
    res3 = CliRunner().invoke(app, ["inspect", "t1", "--db", str(env / "db.sqlite"), "--json"])
    total = {"calls": 5, "input_tokens": 5015, "output_tokens": 100, "cache_read": 5 * want[0]["cache_read"]}
    total |= {"cache_creation": 0, "counted": counted}
    assert json.loads(res3.stdout)["progress"]["usage"] == total
    assert json.loads((env / "runs/t1/state.json").read_text())["progress"]["usage"] == total
    # every tool result sent back is paired with its call, ids in the provider's format
    last_exec = [b for b in stub.requests if Stub.role_of(b) == "executor"][-1]
    if wire == "openai":
        msgs = last_exec["messages"]
        called = [c["id"] for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
        assert called == answered == ["call_2_0", "call_3_0"]
        assert [t["function"]["name"] for t in last_exec["tools"]][:2] == ["list_dir", "read_file"]
    else:
        msgs = last_exec["messages"]
        used = [b["id"] for m in msgs if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
        results = [
            b["tool_use_id"]
            for m in msgs
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        assert used == results == ["toolu_2_0", "toolu_3_0"]
        # a reply of text + tool_use blocks goes back as blocks: the text once, the call as tool_use
        first = next(m for m in msgs if m["role"] == "assistant")
        assert [b["type"] for b in first["content"]] == ["text", "tool_use"]
        # (its own earlier words, quoted as its claim)
        assert first["content"][0]["text"] == (
            '<external_content source="agent:executor">\n'
            "Raise client_max_body_size to the app's 10 MiB.\n</external_content>"
        )
        assert [t["name"] for t in last_exec["tools"]][:2] == ["list_dir", "read_file"]


@pytest.mark.parametrize("wire,fault", [("openai", OPENAI_401), ("anthropic", ANTHROPIC_401)])
def test_wrong_key_is_one_line_and_exit_3(env: Path, monkeypatch: pytest.MonkeyPatch, wire: str, fault: Any) -> None:
    with Stub(wire, sample_script()) as stub:
        stub.faults = [fault]
        _point(monkeypatch, stub)
        res = _run(env, wire)
    assert res.exit_code == 3
    lines = res.output.strip().splitlines()
    assert lines[-2].startswith("error: planner model call failed: authentication failed (401): check the API key; ")
    assert lines[-1] == (
        "task t1 is saved (nothing recorded before the failure); continue it with: taskctx resume t1"
        f" --db {env / 'db.sqlite'} --out {env / 'runs'}"
    )
    assert "Traceback" not in res.output and _events(env) == []
    with Stub(wire, sample_script()) as stub:  # the right key: resume runs the task from the start
        _point(monkeypatch, stub)
        res = _resume(env)
    assert res.exit_code == 0, res.output
    assert "task t1: completed" in res.output


def test_401_mid_run_then_resume_finishes_once(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        _point(monkeypatch, stub)
        res = _run(env, "openai", "--max-steps", "1")
        assert res.exit_code == 0, res.output
        stub.faults = [OPENAI_401]
        res = _resume(env)
        assert res.exit_code == 3 and "authentication failed (401)" in res.output
        assert res.output.strip().splitlines()[-1] == (
            f"task t1 is saved (exported {env / 'runs' / 't1'}/); continue it with: taskctx resume t1"
            f" --db {env / 'db.sqlite'} --out {env / 'runs'}"
        )
        assert (env / "runs/t1/manifests.jsonl").read_text().count("\n") == 2
        # the stop is kept with the task: list and inspect say why and how to go on
        db = str(env / "db.sqlite")
        (row,) = json.loads(CliRunner().invoke(app, ["list", "--db", db, "--json"]).stdout)
        assert (row["status"], row["stopped"]) == ("running", "model")
        cause = res.output.strip().splitlines()[-2].removeprefix("error: ")
        assert cause.startswith("executor model call failed: authentication failed (401)")
        assert (
            CliRunner()
            .invoke(app, ["inspect", "t1", "--db", db])
            .stdout.endswith(f"stopped: {cause}; continue with `taskctx resume t1 --db {db} --out {env / 'runs'}`\n")
        )
        evs = _events(env)
        assert [e.kind for e in evs].count("context.built") == 2  # the failed call recorded nothing
        res = _resume(env)  # the server has recovered
    assert res.exit_code == 0, res.output
    assert "task t1: completed" in res.output
    (row,) = json.loads(CliRunner().invoke(app, ["list", "--db", str(env / "db.sqlite"), "--json"]).stdout)
    assert "stopped" not in row  # it went on: the stop is gone
    evs = _events(env)
    kinds = [e.kind for e in evs]
    # the failed resume recorded nothing (its resume.started goes with the call's output)
    assert kinds.count("resume.started") == 1 and kinds.count("context.built") == 5
    assert [e.payload["call_id"] for e in evs if e.kind == "tool.result.received"] == ["call_2_0", "call_3_0"]


def test_429_and_500_are_retried_by_the_client(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        stub.faults = [OPENAI_429, OPENAI_500]
        _point(monkeypatch, stub)
        res = _run(env, "openai")
    assert res.exit_code == 0, res.output
    assert len(stub.requests) == 5 + 2 and stub.requests[0] == stub.requests[1] == stub.requests[2]


def test_429_after_the_retries_is_one_line(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        stub.faults = [OPENAI_429] * 3
        _point(monkeypatch, stub)
        res = _run(env, "openai")
    assert res.exit_code == 3 and len(stub.requests) == 3
    assert res.output.strip().splitlines()[-2] == (
        "error: planner model call failed: rate limited (429) after the client's retries; Rate limit reached"
    )


@pytest.mark.slow
def test_hang_times_out(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        stub.faults = ["hang"] * 3
        _point(monkeypatch, stub)
        res = _run(env, "openai", "--timeout", "1")
    assert res.exit_code == 3 and len(stub.requests) == 3
    assert res.output.strip().splitlines()[-2] == (
        "error: planner model call failed: timed out (no answer within 1 s); raise --timeout"
    )


def test_connection_refused(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        url = stub.url
    monkeypatch.setenv("OPENAI_BASE_URL", url)  # closed: nothing listens there now
    res = _run(env, "openai")
    assert res.exit_code == 3
    assert res.output.strip().splitlines()[-2].startswith("error: planner model call failed: connection refused (")


def test_context_length_error_rebuilds_once_at_a_smaller_budget(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Stub("openai", sample_script()) as stub:
        stub.faults = [None, None, None, OPENAI_LONG]  # the executor's third call (None: answer)
        _point(monkeypatch, stub)
        res = _run(env, "openai")
    assert res.exit_code == 0, res.output
    built = [e.payload for e in _events(env) if e.kind == "context.built"]
    assert [p["rebuilt"] is not None for p in built] == [False, False, False, True, False]
    p = built[3]
    refused, sent = stub.requests[3], stub.requests[4]
    assert p["rebuilt"].startswith("context length exceeded (400): This model's maximum context length is 2000")
    assert f"rebuilt at budget {p['budget']:,} (was 8,000)" in p["rebuilt"] and p["budget"] < 8_000
    # the rebuild drops a droppable block (here the test output the fix policy added) and sends less
    (dropped,) = [b for b in p["blocks"] if not b["included"]]
    # (the test output names the tmp folder, so its size varies by a few tokens with the path)
    m = re.fullmatch(
        r"policy:fix_adds_tests_and_diff; dropped: over budget \(high, external_content; needs (\d+), (\d+) left\)",
        dropped["reason"],
    )
    assert (p["blocks_out"], dropped["id"]) == (1, "policy.latest_result.test")
    assert m and int(m[1]) == dropped["tokens"] > int(m[2])
    assert len(json.dumps(sent["messages"])) < len(json.dumps(refused["messages"]))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_repeated_and_odd_tool_call_ids_are_sent_in_the_provider_format(
    env: Path, monkeypatch: pytest.MonkeyPatch, wire: str
) -> None:
    """The model repeats an id that also has a character Anthropic refuses: taskctx records and
    sends back ids matching ^[a-zA-Z0-9_-]+$, unique, each tool result paired with its call."""
    import re

    with Stub(wire, sample_script(), ids="tc.1") as stub:
        _point(monkeypatch, stub)
        res = _run(env, wire)
    assert res.exit_code == 0, res.output
    ids = [e.payload["call_id"] for e in _events(env) if e.kind == "tool.called"]
    assert ids[0] == "tc_1" and ids[1].startswith("tc_1_") and len(set(ids)) == 2
    last = [b for b in stub.requests if Stub.role_of(b) == "executor"][-1]["messages"]
    if wire == "openai":
        sent = [c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        back = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    else:
        sent = [b["id"] for m in last if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
        back = [
            b["tool_use_id"]
            for m in last
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    assert sent == back == ids and all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in sent)
