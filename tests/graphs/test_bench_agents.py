"""The bench's agent rows: each recorded run through a real create_agent agent, one middleware a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import extract_constraints, load_trajectory
from graphs.bench.agents import AGENT_ROWS, agent_stats, agents_markdown, run_agent
from graphs.bench.metrics import strategy_stats
from graphs.bench.strategies import baseline_calls
from nodes import ReplayTools

RUN = "moatless-django-15695"


@pytest.fixture(scope="module")
def traj(trajectories_dir: Path):
    p = trajectories_dir / f"{RUN}.jsonl"
    if not p.is_file():
        pytest.skip(f"shared trajectory {RUN} not found under {trajectories_dir}")
    return load_trajectory(p)


def test_the_real_middleware_classes_match_the_simulated_rows(traj) -> None:
    # the agent rows run LangChain's classes in a real agent; the baseline rows apply the same
    # classes to a simulated history: both give the same prompts, token for token
    cons = extract_constraints(traj.request)
    tools = ReplayTools(traj).schemas()
    for row, base in ((AGENT_ROWS[1], "summarization"), (AGENT_ROWS[2], "clearing")):
        a = run_agent(traj, row, 8_000)
        b = baseline_calls(traj, base, 8_000, tools)
        assert len(a.calls) == len(b) == len(traj.steps)
        assert [c.prompt_tokens for c in a.calls] == [c.prompt_tokens for c in b], row
        sa = strategy_stats(traj.id, row, a.calls, 8_000, traj.request, cons)
        sb = strategy_stats(traj.id, base, b, 8_000, traj.request, cons)
        assert (sa.effective_cost, sa.retained, sa.over_budget) == (sb.effective_cost, sb.retained, sb.over_budget)


def test_the_taskctx_middleware_row_keeps_the_request_and_the_budget(traj) -> None:
    cons = extract_constraints(traj.request)
    st = agent_stats(traj, AGENT_ROWS[0], 8_000, cons)
    assert st.calls == len(traj.steps)
    assert st.over_budget == 0 and st.peak_prompt_tokens <= 8_000 - 1_000
    assert st.retained == st.calls and st.orphans == 0
    assert st.compressed and st.restored == st.compressed  # every compressed output back byte-exact from its ref
    naive = strategy_stats(
        traj.id, "naive", baseline_calls(traj, "naive", 8_000, ReplayTools(traj).schemas()), 8_000, traj.request, cons
    )
    assert st.input_tokens < naive.input_tokens
    md = agents_markdown(
        {AGENT_ROWS[0]: st, "taskctx": st}, {"A": [traj.id]}, {traj.id: {AGENT_ROWS[0]: st, "taskctx": st}}
    )
    assert f"| {AGENT_ROWS[0]} | {st.calls} | {st.effective_cost:,.0f} | 1.000 |" in "\n".join(md)
    assert "| A | 1 | 1.000 | 0 | 100.0% | yes |" in md
