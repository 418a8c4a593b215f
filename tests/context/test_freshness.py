"""Freshness: facts record the files (path, sha256) and HEAD they rest on; a
write of the task, a re-read showing other bytes, a hand edit while paused or a HEAD move makes
them stale (``fact.stale``, folded by the reducer); prompts show them as stale and the executor's
delta names what to re-read; replay(events) == checkpoint."""

from __future__ import annotations

import hashlib
from pathlib import Path

from context import Finding, TaskContext, new_event, replay
from context.freshness import find_stale, world_version
from graphs import build_orchestrator, new_task, open_project, thread_config
from graphs.runner import run_graph
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.runtime import NodeEnv
from nodes.testing import complete, plan, review, tool_call

CONF_1M = "[proxy]\nlimit = 1m\n"
CONF_5M = "[proxy]\nlimit = 5m\n"
HEAD_A = "a" * 40
HEAD_B = "b" * 40


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ws(tmp_path: Path, git: bool = False) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "limit.txt").write_text(CONF_1M)
    (ws / "app.py").write_text("LIMIT = '1m'\n")
    if git:
        (ws / ".git" / "refs" / "heads").mkdir(parents=True)
        (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (ws / ".git" / "refs" / "heads" / "main").write_text(HEAD_A + "\n")
    return ws


def _model(after_pause: list) -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "planner": [plan(steps=["Inspect the config", "Look around", "Fix the limit"])],
            "executor": [
                tool_call("read_file", {"path": "limit.txt"}, id="r1"),
                complete("the config sets 1m", findings=["limit.txt sets limit = 1m"]),
                tool_call("list_dir", {"path": "."}, id="l1"),
                *after_pause,
            ],
            "reviewer": [review("approve", "done")],
        }
    )


def _run(tmp_path: Path, after_pause: list, *, edit=None, freshness: bool = True, git: bool = False):
    ws = _ws(tmp_path, git)
    project = open_project(str(tmp_path / "t.sqlite"))
    model = _model(after_pause)

    def graph():
        env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts, freshness=freshness)
        return build_orchestrator(model, tools=WorkspaceTools(ws), checkpointer=project.checkpointer, env=env)

    run_graph(graph(), project.stores, "t1", new_task("Fix the limit.", "t1"), stop_after=2)
    if edit is not None:
        edit(ws)
    run_graph(graph(), project.stores, "t1", None, resume=True)
    events = project.stores.events.read("t1")
    state = TaskContext.model_validate(graph().get_state(thread_config("t1")).values)
    prompts = {
        e.seq: project.stores.artifacts.get(e.payload["prompt_ref"]).decode()
        for e in events
        if e.kind == "context.built"
    }
    project.close()
    return events, state, prompts


def _hand_edit(ws: Path) -> None:
    (ws / "limit.txt").write_text(CONF_5M)


REREAD_THEN_DONE = [
    tool_call("read_file", {"path": "limit.txt"}, id="r2"),
    complete("looked around"),
    complete("nothing to fix: the limit is 5m now"),
]


def test_a_hand_edit_while_paused_marks_the_facts_resting_on_the_file_stale_on_resume(tmp_path):
    events, state, prompts = _run(tmp_path, REREAD_THEN_DONE, edit=_hand_edit)
    kinds = [e.kind for e in events]
    i = kinds.index("resume.started")
    stale = [e.payload for e in events if e.kind == "fact.stale"]
    # recorded right after resume.started, by the first node that runs: one per fact on limit.txt
    assert kinds[i + 1 : i + 1 + len(stale)] == ["fact.stale"] * 3
    assert [(p["fact_id"], p["fact_kind"], p["path"], p["old_sha"], p["new_sha"], p["cause"]) for p in stale] == [
        ("s1.f1", "finding", "limit.txt", sha(CONF_1M), sha(CONF_5M), "resume"),
        ("step:s1", "step", "limit.txt", sha(CONF_1M), sha(CONF_5M), "resume"),
        ("r1", "evidence", "limit.txt", sha(CONF_1M), sha(CONF_5M), "resume"),
    ]
    # the executor's first prompt after the resume names what to re-read and marks the facts
    first = min(s for s in prompts if s > events[i].seq)
    p = prompts[first]
    assert "Re-read before acting (facts resting on them are stale): limit.txt" in p
    assert f"- finding s1.f1: limit.txt changed while paused ({sha(CONF_1M)[:12]} -> {sha(CONF_5M)[:12]})" in p
    assert f"Last step s1 (success) [STALE: limit.txt changed while paused ({sha(CONF_1M)[:12]} ->" in p
    # the re-read saw the new bytes: nothing left to re-read, the facts stay stale
    assert state.to_reread() == []
    assert [m.fact_id for m in state.evidence.stale_facts] == ["s1.f1", "step:s1", "r1"]
    assert state.evidence.world == {"limit.txt": sha(CONF_5M)}
    assert state.evidence.world_version == world_version({"limit.txt": sha(CONF_5M)}, None)
    assert replay(events) == state


def test_the_reviewer_sees_the_finding_marked_stale(tmp_path):
    events, state, prompts = _run(tmp_path, REREAD_THEN_DONE, edit=_hand_edit)
    reviewer = [
        e.payload["prompt_ref"] for e in events if e.kind == "context.built" and e.payload["role"] == "reviewer"
    ]
    assert len(reviewer) == 1
    p = prompts[[e.seq for e in events if e.kind == "context.built" and e.payload["role"] == "reviewer"][0]]
    assert f"- finding s1.f1 (evidence: {state.evidence.findings[0].evidence_refs[0]}) [STALE: limit.txt changed" in p


def test_without_a_change_nothing_is_stale_and_prompts_say_nothing_about_it(tmp_path):
    events, state, prompts = _run(tmp_path, REREAD_THEN_DONE)
    assert [e for e in events if e.kind == "fact.stale"] == []
    assert prompts  # (the check below must have prompts to look at)
    assert not any("STALE" in p or "Stale facts" in p or "Re-read before" in p for p in prompts.values())
    assert state.evidence.stale_facts == []
    assert replay(events) == state


def test_switched_off_a_hand_edit_goes_unnoticed(tmp_path):
    events, state, prompts = _run(tmp_path, REREAD_THEN_DONE, edit=_hand_edit, freshness=False)
    assert [e for e in events if e.kind == "fact.stale"] == []
    assert not any("Re-read before" in p for p in prompts.values())


PATCH = "--- a/limit.txt\n+++ b/limit.txt\n@@ -1,2 +1,2 @@\n [proxy]\n-limit = 1m\n+limit = 10m\n"


def test_a_patch_of_the_task_itself_makes_the_facts_stale_without_a_reread(tmp_path):
    after = [tool_call("apply_patch", {"patch": PATCH}, id="p1"), complete("patched"), complete("done")]
    events, state, prompts = _run(tmp_path, after)
    new = sha(CONF_1M.replace("1m", "10m"))
    stale = [e.payload for e in events if e.kind == "fact.stale"]
    assert [(p["fact_id"], p["path"], p["new_sha"], p["cause"]) for p in stale] == [
        ("s1.f1", "limit.txt", new, "write"),
        ("step:s1", "limit.txt", new, "write"),
        ("r1", "limit.txt", new, "write"),
    ]
    mod = [e.payload for e in events if e.kind == "file.modified"]
    assert [(m["path"], m["sha256"]) for m in mod] == [("limit.txt", new)]
    assert state.to_reread() == []  # the task wrote those bytes itself
    assert state.stale("s1.f1")[0].needs_reread is False
    assert replay(events) == state


def test_reread_cause_when_the_file_changed_during_the_run(tmp_path):
    class Editing(WorkspaceTools):
        """A person edits limit.txt while the list_dir call runs."""

        def _t_list_dir(self, call_id, a, scopes):
            (self.root / "limit.txt").write_text(CONF_5M)
            return super()._t_list_dir(call_id, a, scopes)

    ws = _ws(tmp_path)
    project = open_project(str(tmp_path / "t.sqlite"))
    env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
    g = build_orchestrator(_model(REREAD_THEN_DONE), tools=Editing(ws), checkpointer=project.checkpointer, env=env)
    run_graph(g, project.stores, "t1", new_task("Fix the limit.", "t1"))
    events = project.stores.events.read("t1")
    stale = [e.payload for e in events if e.kind == "fact.stale"]
    assert [(p["fact_id"], p["cause"]) for p in stale] == [("s1.f1", "reread"), ("step:s1", "reread"), ("r1", "reread")]
    kinds = [e.kind for e in events]
    r2 = next(i for i, e in enumerate(events) if e.kind == "tool.result.received" and e.payload["call_id"] == "r2")
    assert kinds[r2 + 1 : r2 + 4] == ["fact.stale"] * 3  # recorded with the re-read's result
    state = TaskContext.model_validate(g.get_state(thread_config("t1")).values)
    assert replay(events) == state
    project.close()


def test_a_head_move_while_paused_marks_every_fact_of_the_old_head(tmp_path):
    def move(ws: Path) -> None:
        (ws / ".git" / "refs" / "heads" / "main").write_text(HEAD_B + "\n")

    events, state, prompts = _run(tmp_path, REREAD_THEN_DONE, edit=move, git=True)
    stale = [e.payload for e in events if e.kind == "fact.stale"]
    assert [(p["fact_id"], p["path"], p["old_sha"], p["new_sha"], p["cause"]) for p in stale] == [
        ("s1.f1", "HEAD", HEAD_A, HEAD_B, "head"),
        ("step:s1", "HEAD", HEAD_A, HEAD_B, "head"),
        ("r1", "HEAD", HEAD_A, HEAD_B, "head"),
        ("l1", "HEAD", HEAD_A, HEAD_B, "head"),
    ]
    assert state.evidence.head == HEAD_B  # the re-read after the resume saw the new HEAD
    assert state.to_reread() == []
    assert replay(events) == state


def test_a_fact_resting_on_two_files_is_stale_when_one_changes():
    ctx = replay(
        [
            new_event("task.created", {"task_id": "t", "original_request": "r"}, actor="user"),
            new_event("plan.created", {"steps": [{"id": "s1", "title": "x"}]}, actor="agent"),
            new_event(
                "step.completed",
                {
                    "step_id": "s1",
                    "findings": [{"id": "s1.f1", "statement": "a and b agree", "rests_on": {"a": "1", "b": "2"}}],
                },
                actor="agent",
            ),
        ]
    )
    assert find_stale(ctx, {"a": "1", "b": "3"}, "resume") == [
        {"fact_id": "s1.f1", "fact_kind": "finding", "path": "b", "old_sha": "2", "new_sha": "3", "cause": "resume"}
    ]
    assert find_stale(ctx, {"a": "1", "b": "2"}, "resume") == []


def test_inspect_and_the_report_mark_the_stale_finding(tmp_path):
    from rich.console import Console

    from graphs.inspection import TaskView
    from graphs.report.inspect_text import render_view
    from graphs.report.page import build_report

    events, state, _ = _run(tmp_path, REREAD_THEN_DONE, edit=_hand_edit)
    console = Console(width=200, record=True, color_system=None)
    render_view(console, TaskView(state.identity.task_id, state, events))
    text = console.export_text()
    old, new = sha(CONF_1M)[:12], sha(CONF_5M)[:12]
    assert f"- finding s1.f1 (agent_claim) [{state.evidence.findings[0].evidence_refs[0]}] [STALE: limit.txt" in text
    assert f"- finding s1.f1: limit.txt changed while paused ({old} -> {new})" in text
    # the Evidence list marks the stale tool output too (the "Stale facts" list names it)
    r1 = next(r for r in state.evidence.recent_tool_calls if r.id == "r1")
    assert f"- r1 read_file -> ok  {r1.raw_ref} [STALE: limit.txt changed while paused ({old} -> {new})]" in text
    assert f"- output of call r1: limit.txt changed while paused ({old} -> {new})" in text
    r2 = next(r for r in state.evidence.recent_tool_calls if r.id == "r2")
    assert f"- r2 read_file -> ok  {r2.raw_ref}\n" in text  # the re-read is current
    html = build_report(events)
    assert f"[STALE: limit.txt changed while paused ({old} -&gt; {new})]" in html


def test_a_command_that_rewrites_a_file_makes_the_facts_resting_on_it_stale(tmp_path):
    """``run_command`` says nothing about the files it changes: the tool node fingerprints the
    task's world after it and records ``file.modified`` (with the new sha) and ``fact.stale``."""
    rewrite = (
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_rewrite(self):\n        open('limit.txt', 'w').write('[proxy]\\nlimit = 2m\\n')\n"
    )
    after = [
        tool_call("run_command", {"argv": ["python", "-m", "unittest", "-q", "test_rewrite.py"]}, id="c1"),
        complete("looked around"),
        complete("done"),
    ]

    def add_test(ws: Path) -> None:
        (ws / "test_rewrite.py").write_text(rewrite)

    events, state, _ = _run(tmp_path, after, edit=add_test)
    new = sha("[proxy]\nlimit = 2m\n")
    mod = [(e.payload["path"], e.payload["call_id"], e.payload["sha256"]) for e in events if e.kind == "file.modified"]
    assert mod == [("limit.txt", "c1", new)]
    stale = [(e.payload["fact_id"], e.payload["cause"], e.payload["new_sha"]) for e in events if e.kind == "fact.stale"]
    assert stale == [("s1.f1", "write", new), ("step:s1", "write", new), ("r1", "write", new)]
    assert state.progress.changed_artifacts == ["limit.txt"]
    assert replay(events) == state


def test_the_reducer_folds_fact_stale_and_a_read_of_the_new_bytes_clears_the_reread():
    def ev(kind, payload, actor="system"):
        return new_event(kind, payload, actor=actor)

    ctx = replay(
        [
            ev("task.created", {"task_id": "t", "original_request": "r"}, "user"),
            ev("tool.called", {"call_id": "c1", "tool": "read_file"}, "agent"),
            ev("tool.result.received", {"call_id": "c1", "reads": {"a.txt": "old"}, "head": HEAD_A}, "tool"),
            ev(
                "fact.stale",
                {
                    "fact_id": "c1",
                    "fact_kind": "evidence",
                    "path": "a.txt",
                    "old_sha": "old",
                    "new_sha": "new",
                    "cause": "resume",
                },
            ),
        ]
    )
    assert ctx.evidence.recent_tool_calls[0].reads == {"a.txt": "old"}
    assert (ctx.evidence.world, ctx.evidence.head) == ({"a.txt": "old"}, HEAD_A)
    assert [(m.fact_id, m.seq, m.needs_reread) for m in ctx.evidence.stale_facts] == [("c1", 4, True)]
    assert ctx.to_reread() == ["a.txt"]
    again = replay(
        [
            ev("tool.called", {"call_id": "c2", "tool": "read_file"}, "agent"),
            ev("tool.result.received", {"call_id": "c2", "reads": {"a.txt": "new"}}, "tool"),
        ],
        ctx,
    )
    assert again.to_reread() == [] and again.evidence.world == {"a.txt": "new"}
    assert again.evidence.stale_facts[0].needs_reread is False
    # the task's own write: it knows the bytes (file.modified with the sha), no re-read needed
    wrote = replay(
        [
            ev("file.modified", {"path": "a.txt", "sha256": "newer"}, "tool"),
            ev(
                "fact.stale",
                {
                    "fact_id": "c2",
                    "fact_kind": "evidence",
                    "path": "a.txt",
                    "old_sha": "new",
                    "new_sha": "newer",
                    "cause": "write",
                },
            ),
        ],
        again,
    )
    assert wrote.evidence.stale_facts[-1].needs_reread is False and wrote.to_reread() == []
    assert wrote.evidence.world_version == world_version({"a.txt": "newer"}, HEAD_A) != again.evidence.world_version


# a hand edit while the task waits for an approval (taskctx approve, Command(resume=...)) ---------------
APP_NEW = "LIMIT = '5m'\n"


def _approval_run(tmp_path: Path, executor_after: list, edit, answers: list[str]):
    """Read limit.txt (a finding on it), then ask to write a file (write_file needs approval);
    ``edit`` runs while the task waits; each answer in ``answers`` continues it, as
    ``taskctx approve`` does (``Command(resume=...)`` naming the request)."""
    from langgraph.types import Command

    from context import Permissions

    ws = _ws(tmp_path)
    project = open_project(str(tmp_path / "t.sqlite"))
    model = ScriptedChatModel(
        script={
            "planner": [plan(steps=["Inspect the config", "Fix the limit"])],
            "executor": [
                tool_call("read_file", {"path": "limit.txt"}, id="r1"),
                complete("the config sets 1m", findings=["limit.txt sets limit = 1m"]),
                *executor_after,
            ],
            "reviewer": [review("approve", "done")],
        }
    )

    def graph():
        env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
        return build_orchestrator(model, tools=WorkspaceTools(ws), checkpointer=project.checkpointer, env=env)

    task = new_task("Fix the limit.", "t1", permissions=Permissions(requires_approval=["write_file"]))
    r = run_graph(graph(), project.stores, "t1", task)
    edit(ws)
    for action in answers:
        assert r.waiting is not None
        r = run_graph(
            graph(), project.stores, "t1", Command(resume={"action": action, "request_id": r.waiting["request_id"]})
        )
    events = project.stores.events.read("t1")
    state = TaskContext.model_validate(graph().get_state(thread_config("t1")).values)
    project.close()
    return events, state, ws


def test_a_hand_edit_while_waiting_for_approval_is_stale_before_the_approved_call_acts(tmp_path):
    """Old code: the edit surfaced after the approved write ran, as cause ``write`` and a
    ``file.modified`` of limit.txt blamed on the write of app.py."""
    after = [
        tool_call("write_file", {"path": "app.py", "content": APP_NEW}, id="w1"),
        complete("fixed"),
        complete("ok"),
    ]
    events, state, ws = _approval_run(tmp_path, after, _hand_edit, ["approve"])
    stale = [
        (e.payload["fact_id"], e.payload["path"], e.payload["old_sha"], e.payload["new_sha"], e.payload["cause"])
        for e in events
        if e.kind == "fact.stale"
    ]
    assert stale == [
        ("s1.f1", "limit.txt", sha(CONF_1M), sha(CONF_5M), "approval"),
        ("step:s1", "limit.txt", sha(CONF_1M), sha(CONF_5M), "approval"),
        ("r1", "limit.txt", sha(CONF_1M), sha(CONF_5M), "approval"),
    ]
    kinds = [e.kind for e in events]
    req = kinds.index("permission.requested")
    # recorded when the answer arrived (a new graph object: a resume), before the approved call was
    # granted and ran
    assert kinds[req + 1 : req + 7] == ["resume.started"] + ["fact.stale"] * 3 + [
        "permission.granted",
        "tool.result.received",
    ]
    # the task's write is app.py only; limit.txt is not blamed on it
    assert [(e.payload["path"], e.payload["call_id"]) for e in events if e.kind == "file.modified"] == [
        ("app.py", "w1")
    ]
    assert (ws / "app.py").read_text() == APP_NEW and (ws / "limit.txt").read_text() == CONF_5M
    assert state.to_reread() == ["limit.txt"]
    assert replay(events) == state


def test_an_approved_write_of_a_file_edited_while_waiting_is_not_run_and_put_up_again(tmp_path):
    """The approved arguments were made against bytes the file no longer has: not run (the
    person's edit survives), the result names the change; the executor re-reads and writes
    again, which is put up again."""
    edited = "[proxy]\nlimit = 5m\n# set by hand\n"
    fixed = "[proxy]\nlimit = 10m\n# set by hand\n"
    after = [
        tool_call("write_file", {"path": "limit.txt", "content": "[proxy]\nlimit = 10m\n"}, id="w1"),
        tool_call("read_file", {"path": "limit.txt"}, id="r2"),
        tool_call("write_file", {"path": "limit.txt", "content": fixed}, id="w2"),
        complete("fixed"),
        complete("ok"),
    ]
    events, state, ws = _approval_run(
        tmp_path, after, lambda ws: (ws / "limit.txt").write_text(edited), ["approve", "approve"]
    )
    old, new = sha(CONF_1M), sha(edited)
    change = f"limit.txt changed while waiting for approval ({old[:12]} -> {new[:12]})"
    denied = [e for e in events if e.kind == "permission.denied"]
    assert [(e.actor, e.payload["call_id"], e.payload["reason"]) for e in denied] == [
        ("system", "w1", f"approved by the user, but {change}; not run")
    ]
    w1 = next(e.payload for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == "w1")
    assert (w1["status"], w1["result_summary"]) == (
        "denied",
        f"not run: {change}, after these arguments were made. Re-read limit.txt and make the change again on "
        "its current bytes (it will be put up for approval again).",
    )
    assert [e.payload["call_id"] for e in events if e.kind == "permission.requested"] == ["w1", "w2"]
    assert [e.payload["call_id"] for e in events if e.kind == "permission.granted"] == ["w2"]
    assert [(e.payload["path"], e.payload["call_id"]) for e in events if e.kind == "file.modified"] == [
        ("limit.txt", "w2")
    ]
    assert [(e.payload["fact_id"], e.payload["cause"]) for e in events if e.kind == "fact.stale"] == [
        ("s1.f1", "approval"),
        ("step:s1", "approval"),
        ("r1", "approval"),
        ("r2", "write"),
    ]
    assert (ws / "limit.txt").read_text() == fixed
    assert replay(events) == state


def test_a_node_rerun_after_the_answer_records_the_change_once(tmp_path):
    """LangGraph re-runs a node from its first line: the fingerprint after an approval answer is
    idempotent (a second attempt over the same state finds the marks already recorded)."""
    from nodes.runtime import NodeRun

    events, state, _ = _approval_run(
        tmp_path,
        [tool_call("write_file", {"path": "app.py", "content": APP_NEW}, id="w1"), complete("fixed"), complete("ok")],
        _hand_edit,
        ["approve"],
    )
    assert [e.kind for e in events].count("fact.stale") == 3
    env = NodeEnv.sqlite()
    env.workspace = WorkspaceTools(tmp_path / "ws")
    again, changes = NodeRun(env, state, "tools", None).fingerprint_events("approval")
    assert again == [] and changes == {"limit.txt": sha(CONF_5M)}


# a finding rests on the files it is about --------------------------------------------------------
def test_a_finding_rests_on_the_files_it_names_of_a_grep_over_several(tmp_path):
    """A grep hits limit.txt and app.py: the finding naming limit.txt rests on it alone (an
    edit of app.py leaves it current); the finding naming no file rests on both (stale)."""
    ws = _ws(tmp_path)
    project = open_project(str(tmp_path / "t.sqlite"))
    model = ScriptedChatModel(
        script={
            "planner": [plan(steps=["Find the limits", "Look around", "Fix"])],
            "executor": [
                tool_call("grep", {"pattern": "1m", "path": "."}, id="g1"),
                complete("found", findings=["limit.txt sets limit = 1m", "the limit is 1m everywhere"]),
                tool_call("list_dir", {"path": "."}, id="l1"),
                complete("looked"),
                complete("done"),
            ],
            "reviewer": [review("approve", "done")],
        }
    )

    def graph():
        env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
        return build_orchestrator(model, tools=WorkspaceTools(ws), checkpointer=project.checkpointer, env=env)

    run_graph(graph(), project.stores, "t1", new_task("Fix the limit.", "t1"), stop_after=2)
    (ws / "app.py").write_text("LIMIT = '2m'\n")
    run_graph(graph(), project.stores, "t1", None, resume=True)
    events = project.stores.events.read("t1")
    state = TaskContext.model_validate(graph().get_state(thread_config("t1")).values)
    project.close()
    app, conf = sha("LIMIT = '1m'\n"), sha(CONF_1M)
    assert [(f.id, f.rests_on) for f in state.evidence.findings] == [
        ("s1.f1", {"limit.txt": conf}),
        ("s1.f2", {"app.py": app, "limit.txt": conf}),
    ]
    stale = [(e.payload["fact_id"], e.payload["path"], e.payload["cause"]) for e in events if e.kind == "fact.stale"]
    assert stale == [("s1.f2", "app.py", "resume"), ("step:s1", "app.py", "resume"), ("g1", "app.py", "resume")]
    assert state.stale("s1.f1") == []
    assert replay(events) == state


def test_named_paths_and_about():
    from context.freshness import about, named_paths

    paths = ["proxy/nginx.conf", "app/upload.py", "lib/upload.py"]
    assert named_paths("app/upload.py accepts up to 10 MiB", paths) == ["app/upload.py"]
    assert named_paths("nginx.conf sets 1m.", paths) == ["proxy/nginx.conf"]  # the file name alone, a full stop after
    assert named_paths("upload.py reads the limit", paths) == ["app/upload.py", "lib/upload.py"]
    assert named_paths("upload.pyc, xupload.py, upload.py.bak, tests/app/upload.py", paths) == []
    assert about("nginx.conf sets 1m", {"proxy/nginx.conf": "1", "app/upload.py": "2"}) == {"proxy/nginx.conf": "1"}
    assert about("uploads fail", {"proxy/nginx.conf": "1", "app/upload.py": "2"}) == {
        "proxy/nginx.conf": "1",
        "app/upload.py": "2",
    }


def test_a_finding_citing_evidence_that_left_the_transcript_rests_on_its_reads_from_the_log():
    """The read of a.txt left the transcript (a restart); a later finding cites its artifact: its
    reads are read back from the log, so the finding still rests on a.txt."""
    from nodes.roles.completion import step_completed
    from nodes.runtime import NodeRun

    env = NodeEnv.sqlite()
    ref = env.artifacts.put("limit = 1m\n")

    def ev(kind, payload, actor="agent"):
        return new_event(kind, payload, actor=actor, correlation_id="t")

    events = [
        ev("task.created", {"task_id": "t", "original_request": "r"}, "user"),
        ev("plan.created", {"steps": [{"id": "s1", "title": "read"}, {"id": "s2", "title": "conclude"}]}),
        ev("step.started", {"step_id": "s1", "objective": "read"}),
        ev("tool.called", {"call_id": "c1", "step_id": "s1", "tool": "read_file", "arguments": '{"path": "a.txt"}'}),
        ev(
            "tool.result.received",
            {"call_id": "c1", "status": "ok", "raw_ref": ref, "reads": {"a.txt": "sha-a"}, "head": HEAD_A},
            "tool",
        ),
        ev("step.completed", {"step_id": "s1", "summary": "read"}),
        ev("step.started", {"step_id": "s2", "objective": "conclude"}),
        ev(
            "context.built",
            {"call": 1, "role": "executor", "budget": 8000, "prompt_tokens": 1, "transcript_reset": True},
            "system",
        ),
    ]
    events = env.events.append("t", [e.model_copy(update={"seq": i}) for i, e in enumerate(events, 1)])
    ctx = replay(events)
    assert ctx.evidence.recent_tool_calls == []  # c1 left the transcript
    run = NodeRun(env, ctx, "executor", None)
    finding = Finding(id="s2.f1", statement="a.txt sets 1m", evidence_refs=[ref])
    out = step_completed(run, ctx, "s2", "success", "concluded", [finding], [])
    done = next(e for e in out if e.kind == "step.completed").payload
    assert [(f["id"], f["rests_on"], f["head"]) for f in done["findings"]] == [("s2.f1", {"a.txt": "sha-a"}, HEAD_A)]
