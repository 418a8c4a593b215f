"""Context policies: declarative rules that add what a situation always needs;
each added block's manifest reason is ``policy:<name>``; the budget applies to them; users add
and override policies per role."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from context.policy import DEFAULT_POLICIES, ContextPolicy, Situation, fired, merge_policies
from graphs import build_orchestrator, new_task, open_project
from graphs.runner import run_graph
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, recover, review, tool_call

TEST_ARGV = ["python", "-m", "unittest", "-q", "test_limit.py"]
TEST_PY = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_limit(self):\n        self.assertIn('10m', open('limit.txt').read())\n"
#: The same test, with 120 lines of output before it fails: its latest run is a large block.
NOISY_TEST_PY = TEST_PY.replace(
    "    def test_limit(self):\n",
    "    def test_limit(self):\n        print('\\n'.join(f'checked case {i}: limit' for i in range(120)))\n",
)
PATCH = "--- a/limit.txt\n+++ b/limit.txt\n@@ -1 +1 @@\n-limit = 1m\n+limit = 10m\n"


def _run(tmp_path: Path, executor: list, *, policies=None, reviewer=None, budget: int = 8000, test_py: str = TEST_PY):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "limit.txt").write_text("limit = 1m\n")
    (ws / "test_limit.py").write_text(test_py)
    project = open_project(str(tmp_path / "t.sqlite"))
    model = ScriptedChatModel(
        script={
            "planner": [plan(steps=["Run the tests", "Fix the limit"])],
            "executor": executor,
            "reviewer": reviewer or [review("approve", "done")],
            "recovery": [recover("retry", "the test fails as expected before the fix; go on")],
        }
    )
    g = build_orchestrator(
        model,
        tools=WorkspaceTools(ws),
        checkpointer=project.checkpointer,
        stores=project.stores,
        policies=policies,
        budget=budget,
    )
    run_graph(g, project.stores, "t1", new_task("Raise the limit to 10m.", "t1"))
    events = project.stores.events.read("t1")
    built = [e.payload for e in events if e.kind == "context.built"]
    prompts = [project.stores.artifacts.get(b["prompt_ref"]).decode() for b in built]
    project.close()
    return built, prompts


FIX = [
    tool_call("run_command", {"argv": TEST_ARGV}, id="t1"),
    complete("the test fails: limit is 1m"),
    tool_call("apply_patch", {"patch": PATCH}, id="p1"),
    complete("limit raised"),
]


def _blocks(b: dict) -> dict[str, dict]:
    return {x["id"]: x for x in b["blocks"]}


def test_a_fix_step_adds_the_latest_test_result_and_the_diff(tmp_path):
    built, prompts = _run(tmp_path, FIX)
    # the executor call after the patch (step s2 wrote a file: a fix step)
    i = max(k for k, b in enumerate(built) if b["role"] == "executor")
    assert built[i]["step_id"] == "s2"
    blocks = _blocks(built[i])
    assert (
        blocks["policy.latest_result.test"]["reason"] == "policy:fix_adds_tests_and_diff; fits (high, external_content)"
    )
    assert blocks["policy.diff"]["reason"] == "policy:fix_adds_tests_and_diff; fits (high, agent_claim)"
    p = prompts[i]
    assert "## The latest test run: t1 run_command" in p
    assert "## Changes this task made (diffs as applied)" in p
    assert "-limit = 1m\n+limit = 10m" in p
    # before anything was written, no policy fired (explore step s1; step s2 before its patch)
    assert [(b["role"], b["step_id"], [k for k in _blocks(b) if k.startswith("policy.")]) for b in built[:i]] == [
        ("planner", None, []),
        ("executor", "s1", []),
        ("recovery", "s1", []),  # the failing output was short: already whole in the prompt
        ("executor", "s1", []),
        ("executor", "s2", []),
    ]
    # the reviewer gets the diff: a file changed (the change policy)
    assert (
        _blocks(built[-1])["policy.diff"]["reason"] == "policy:change_adds_diff_and_stale; fits (normal, agent_claim)"
    )


def test_switched_off_no_policy_block_is_added(tmp_path):
    built, prompts = _run(tmp_path, FIX, policies=[])
    assert [x["id"] for b in built for x in b["blocks"] if x["id"].startswith("policy.")] == []
    assert not any("## Changes this task made" in p for p in prompts)


def test_a_user_policy_for_the_reviewer_adds_the_latest_test_run(tmp_path):
    mine = ContextPolicy(name="review_sees_tests", roles=("reviewer",), add=("latest_result:test",))
    built, prompts = _run(tmp_path, FIX, policies=[*DEFAULT_POLICIES, mine])
    rv = [b for b in built if b["role"] == "reviewer"][-1]
    assert (
        _blocks(rv)["policy.latest_result.test"]["reason"] == "policy:review_sees_tests; fits (high, external_content)"
    )


def test_an_override_by_name_replaces_the_default(tmp_path):
    quiet = ContextPolicy(name="change_adds_diff_and_stale", roles=("planner",), add=("diff",), priority="low")
    merged = merge_policies(DEFAULT_POLICIES, [quiet])
    assert [p.name for p in merged] == [p.name for p in DEFAULT_POLICIES]
    assert merged[2] is quiet
    built, _ = _run(tmp_path, FIX, policies=merged)
    rv = [b for b in built if b["role"] == "reviewer"][-1]
    assert "policy.diff" not in _blocks(rv)  # the default would have added it to the reviewer


def test_the_budget_applies_to_policy_blocks(tmp_path):
    low = [p.model_copy(update={"priority": "low"}) for p in DEFAULT_POLICIES]
    built, _ = _run(tmp_path, FIX, policies=low, budget=3000, test_py=NOISY_TEST_PY)
    got = [(x["id"], x["included"], x["reason"]) for b in built for x in b["blocks"] if x["id"].startswith("policy.")]
    # the test output names the temporary folder: its token count (and so what is left) varies with the
    # path's length; the block is dropped because it needs more than is left
    m = re.fullmatch(
        r"policy:fix_adds_tests_and_diff; dropped: over budget \(low, external_content; needs (\d+), (\d+) left\)",
        got[0][2],
    )
    assert m and int(m[1]) > int(m[2])
    assert got == [
        ("policy.latest_result.test", False, got[0][2]),
        ("policy.diff", True, "policy:fix_adds_tests_and_diff; fits (low, agent_claim)"),
        ("policy.diff", True, "policy:change_adds_diff_and_stale; fits (low, agent_claim)"),
    ]


def test_conditions_and_validation():
    sit = Situation(role="executor", step_kind="fix", tools=("apply_patch",), events=("file.modified",))
    assert [p.name for p in fired(DEFAULT_POLICIES, sit)] == ["fix_adds_tests_and_diff", "change_adds_diff_and_stale"]
    sit = Situation(role="recovery", step_kind="recovery")
    assert [p.name for p in fired(DEFAULT_POLICIES, sit)] == ["recovery_adds_error_and_checkpoint"]
    sit = Situation(role="executor", step_kind="explore")
    assert fired(DEFAULT_POLICIES, sit) == []
    with pytest.raises(ValidationError, match="unknown relation 'the_logs'; use one of finding_evidence"):
        ContextPolicy(name="x", add=("the_logs",))
    with pytest.raises(ValidationError):
        ContextPolicy(name="x", add=("diff",), priority="required")


def _recovery_prompt(policies):
    """The recovery prompt over a failed read after checkpoint cp-7 (step s1 done, s2 running)."""
    from context import new_event, replay
    from nodes import NodeEnv, RecoveryRenderer
    from nodes.runtime import prompt_text
    from nodes.schemas import DECIDE_RECOVERY

    env = NodeEnv.sqlite(policies=policies)
    ev = [
        new_event("task.created", {"task_id": "t", "original_request": "Fix it."}, actor="user"),
        new_event(
            "plan.created", {"steps": [{"id": "s1", "title": "Read"}, {"id": "s2", "title": "Fix"}]}, actor="agent"
        ),
        new_event("step.started", {"step_id": "s1", "objective": "Read"}, actor="agent"),
        new_event("step.completed", {"step_id": "s1", "summary": "read"}, actor="agent"),
        new_event("checkpoint.created", {"checkpoint_id": "cp-7"}, actor="system"),
        new_event("step.started", {"step_id": "s2", "objective": "Fix"}, actor="agent"),
        new_event(
            "tool.called", {"call_id": "c1", "step_id": "s2", "tool": "read_file", "arguments": "{}"}, actor="agent"
        ),
        new_event("tool.result.received", {"call_id": "c1", "status": "error", "result_summary": "boom"}, actor="tool"),
    ]
    r = RecoveryRenderer().render(replay(ev), env, [DECIDE_RECOVERY])
    return prompt_text(r.messages), {e.id: e for e in r.manifest.entries}


def test_the_recovery_prompt_shows_the_last_good_checkpoint_once():
    text, entries = _recovery_prompt(None)
    assert text.count("## Last good checkpoint") == 1
    assert "## Last good checkpoint\ncheckpoint cp-7; completed steps: s1; current step: s2\n" in text
    # the policy's block stands in for the renderer's own, and the manifest says so
    assert entries["policy.last_checkpoint"].included
    assert (
        entries["policy.last_checkpoint"].reason
        == "policy:recovery_adds_error_and_checkpoint; fits (high, trusted_app)"
    )
    assert not entries["recovery.checkpoint"].included
    assert entries["recovery.checkpoint"].reason == "superseded by policy.last_checkpoint (trusted_app)"


def test_without_the_policy_the_renderer_shows_its_own_checkpoint_block():
    text, entries = _recovery_prompt([])
    assert text.count("## Last good checkpoint") == 1
    assert "## Last good checkpoint\ncheckpoint: cp-7; completed steps: s1; current step: s2" in text
    assert "policy.last_checkpoint" not in entries
    assert (entries["recovery.checkpoint"].included, entries["recovery.checkpoint"].reason) == (
        True,
        "fits (high, trusted_app)",
    )


def test_one_executor_render_reads_the_task_calls_once(tmp_path, monkeypatch):
    """The executor renders a prompt up to ``keep_last`` + 1 times (digests, restarts): the
    policy blocks read the task's calls from the log once per render, not twice per pass."""
    from context.sqlite_store import EventLog
    from nodes.render.executor import ExecutorRenderer

    reads: list[tuple[str, ...]] = []
    per_render: list[tuple[int, int]] = []  # (passes, reads of the calls) per executor render
    read, render, one_pass = EventLog.read, ExecutorRenderer.render, ExecutorRenderer._render

    def counting_read(self, task_id, after=0, **kw):
        reads.append(tuple(kw.get("kinds") or ()))
        return read(self, task_id, after=after, **kw)

    passes = [0]

    def counting_pass(self, *a, **kw):
        passes[0] += 1
        return one_pass(self, *a, **kw)

    def counting_render(self, ctx, env, tools):
        passes[0], start = 0, len(reads)
        r = render(self, ctx, env, tools)
        per_render.append((passes[0], reads[start:].count(("tool.called", "tool.result.received"))))
        return r

    monkeypatch.setattr(EventLog, "read", counting_read)
    monkeypatch.setattr(ExecutorRenderer, "render", counting_render)
    monkeypatch.setattr(ExecutorRenderer, "_render", counting_pass)
    # 3,000 tokens (the task needs 2,978 at its start) and a test with 120 lines of output: the fix step's prompt (the test output, the diff and the latest test run)
    # does not fit whole, so the last render takes several passes
    built, _ = _run(tmp_path, FIX, budget=3000, test_py=NOISY_TEST_PY)
    fired_at = [
        k
        for k, b in enumerate(b for b in built if b["role"] == "executor")
        if any(x["id"] == "policy.diff" for x in b["blocks"])
    ]
    assert fired_at == [len(per_render) - 1]
    assert per_render[-1][0] > 1 and per_render[-1][1] == 1
    assert [n for _, n in per_render[:-1]] == [0] * (len(per_render) - 1)
