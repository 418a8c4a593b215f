"""The calls of a run with real provider clients (langchain-openai, langchain-anthropic) against
the loopback stubs of ``tests/provider_stub.py``: ``Project.model_calls`` holds the provider's
usage per call, the model's name and provider, and the cost from the list prices, by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphs
from graphs.cli import app
from graphs.demo.scenario import DEMO_REQUEST, SAMPLE_WORKSPACE

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")

from provider_stub import Stub, sample_script  # noqa: E402

MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5"}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_model_calls_carry_the_provider_usage_and_its_cost(
    wire: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL", "LANGSMITH_TRACING"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    shutil.copytree(SAMPLE_WORKSPACE, tmp_path / "ws")
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "db.sqlite"
    args = ["run", DEMO_REQUEST, "--model", MODELS[wire], "--workspace", str(tmp_path / "ws"), "--task-id", "t1"]
    with Stub(wire, sample_script()) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL" if wire == "openai" else "ANTHROPIC_API_URL", stub.url)
        res = CliRunner().invoke(app, [*args, "--approve-all", "--db", str(db), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    with graphs.open_project(db) as project:
        calls = project.model_calls("t1")
        totals = project.model_call_totals("t1")
    assert [c.role for c in calls] == ["planner", "executor", "executor", "executor", "reviewer"]
    name = MODELS[wire].split(":")[1]
    assert {(c.model, c.provider) for c in calls} == {(name, wire)}
    n = range(1, 6)  # the stub's n-th answer reports 1000 + n input tokens, 20 output
    if wire == "openai":  # 512 cached; gpt-4o-mini: $0.15 in, $0.075 cached, $0.60 out per 1M
        usage = [(1000 + i, 20, 512, 0) for i in n]
        want = [((1000 + i - 512) * 0.15 + 512 * 0.075 + 20 * 0.6) / 1e6 for i in n]
    else:  # 900 read from the cache; claude-sonnet-4-5: $3 in, $0.30 cache read, $15 out per 1M
        usage = [(1000 + i, 20, 900, 0) for i in n]
        want = [((100 + i) * 3 + 900 * 0.3 + 20 * 15) / 1e6 for i in n]
    assert [
        (c.usage.input_tokens, c.usage.output_tokens, c.usage.cache_read, c.usage.cache_creation)
        for c in calls
        if c.usage
    ] == usage
    assert [c.cost.usd for c in calls if c.cost] == pytest.approx(want)
    assert {(c.cost.estimated, c.cost.price) for c in calls if c.cost} == {(False, name)}
    t = totals.task
    assert (t.calls, t.usage_calls, t.input_tokens, t.output_tokens) == (5, 5, 5015, 100)
    assert t.cache_read == 5 * usage[0][2] and t.usd == pytest.approx(sum(want))
    assert totals.roles["executor"].usd == pytest.approx(sum(want[1:4]))
    assert totals.roles["executor"].prompt_tokens == sum(c.prompt_tokens for c in calls[1:4])
