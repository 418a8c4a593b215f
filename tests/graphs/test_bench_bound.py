"""The optimistic bound reads ``outside = prompt_tokens - sum(included block tokens)`` from each
executor manifest (``graphs.bench.bound``), and the budget sums the same block tokens: each
included block's recorded tokens must be the tokens of exactly the text the prompt carries (after
the quoting of agent claims and the masking of secrets), or ``outside`` and the budget drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import load_trajectory
from graphs.bench.strategies import run_taskctx
from nodes.render.executor import ExecutorRenderer
from nodes.runtime import prompt_text

RUN = "moatless-django-15695"


def test_block_tokens_are_the_tokens_of_the_text_the_prompt_carries(
    trajectories_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trajectories_dir / f"{RUN}.jsonl"
    if not path.is_file():
        pytest.skip(f"shared trajectory {RUN} not found under {trajectories_dir}")
    seen: list[tuple[str, int, int, bool]] = []  # block id, recorded tokens, tokens of its text, in prompt
    missing: list[str] = []  # included blocks (any slot) whose text the prompt does not carry verbatim
    render = ExecutorRenderer.render

    def checked(self, ctx, env, tools):  # type: ignore[no-untyped-def]
        r = render(self, ctx, env, tools)
        prompt = prompt_text(r.messages, r.tools)
        tokens = {e.id: e.tokens for e in r.manifest.entries if e.included}
        missing.extend(b.id for b in r.blocks if b.id in tokens and b.text not in prompt)
        for b in r.blocks:
            if b.id in tokens and b.slot.startswith("msg:"):  # a "seq" block's tokens include its framing
                seen.append((b.id, tokens[b.id], env.count_tokens(b.text), b.text in prompt))
        return r

    monkeypatch.setattr(ExecutorRenderer, "render", checked)
    run = run_taskctx(load_trajectory(path), 8_000)
    assert len(run.calls) == 11
    assert missing == []
    assert [s for s in seen if s[1] != s[2] or not s[3]] == []
    # the quoted criteria ("Added by the planner:" + <external_content>) in all 11
    # prompts, and the checkpoint once the transcript restarted at executor call index 10
    assert [s[1] for s in seen if s[0] == "core.criteria"] == [37] * 11
    assert [s[1] for s in seen if s[0] == "state.checkpoint"] == [612]
