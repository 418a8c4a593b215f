"""Approvals through LangGraph ``interrupt()``: approve, edit, reject, respond; one interrupt per
tool-node run; nothing appended twice when the node re-runs on resume; a rejected call is never
put up again (no reject loop: the run re-plans, then stops)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context import Permissions, SqliteStores, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import pending_approval, run_graph, run_with_approvals, thread_config
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, recover, review, tool_call
from nodes.tools import REJECTED_AGAIN

CONF = {"path": "app/proxy.conf", "content": "client_max_body_size 10m;\n"}


def _graph(tmp_path: Path, script: dict[str, list[Any]], stores: SqliteStores | None = None):
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True, exist_ok=True)
    (root / "app" / "proxy.conf").write_text("client_max_body_size 1m;\n")
    stores = stores or SqliteStores(":memory:")
    tools = WorkspaceTools(root, receipts_dir=tmp_path / "receipts")
    g = build_orchestrator(
        ScriptedChatModel(script=script),
        tools=tools,
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
        stores=stores,
    )
    return g, stores, root


def _task(tid: str, **perm: Any):
    return new_task("Raise the proxy body-size limit.", tid, permissions=Permissions(file_scopes=["app/**"], **perm))


def test_rejecting_the_same_call_does_not_loop(tmp_path: Path) -> None:
    same = lambda messages, meta: tool_call("write_file", CONF, id=f"w{meta['role_call']}")  # noqa: E731
    g, stores, root = _graph(
        tmp_path,
        {
            "planner": [plan("Patch the config")] * 5,
            "executor": [same] * 50,
            "recovery": [recover("retry", "try again")] * 5,  # the model asks to retry; the node will not
            "reviewer": [review("approve")],
        },
    )
    asked: list[dict[str, Any]] = []

    def reject(req: dict[str, Any]) -> dict[str, Any]:
        asked.append(req)
        return {"action": "reject", "reason": "do not touch the proxy config"}

    r = run_with_approvals(g, stores, "rj", _task("rj"), answer=reject)
    events = stores.events.read("rj")
    kinds = [e.kind for e in events]
    # asked once; every repeat refused without asking; re-planned once, then stopped
    assert len(asked) == 1 and asked[0]["tool"] == "write_file" and asked[0]["risk"] == "high"
    assert kinds.count("permission.requested") == 1
    user_rejects = [e for e in events if e.kind == "permission.denied" and e.actor == "user"]
    repeats = [
        e for e in events if e.kind == "tool.result.received" and e.payload["result_summary"].startswith(REJECTED_AGAIN)
    ]
    assert len(user_rejects) == 1 and len(repeats) == 2
    assert [e.payload["decision"] for e in events if e.kind == "recovery.decided"] == ["replan", "stop"]
    assert kinds.count("plan.updated") == 1
    assert r.state.control.status == "failed" and r.finished
    assert (root / "app" / "proxy.conf").read_text() == "client_max_body_size 1m;\n"
    # the planner saw the rejection
    planner_prompts = [e for e in events if e.kind == "context.built" and e.payload["role"] == "planner"]
    second = stores.artifacts.get(planner_prompts[1].payload["prompt_ref"]).decode()
    assert "rejected by the user: do not touch the proxy config" in second
    assert len(events) < 60  # bounded


def test_approve_edit_and_respond(tmp_path: Path) -> None:
    g, stores, root = _graph(
        tmp_path,
        {
            "planner": [plan("Patch the config")],
            "executor": [
                tool_call("write_file", CONF, id="w1"),
                tool_call("write_file", {"path": "app/proxy.conf", "content": "client_max_body_size 99m;\n"}, id="w2"),
                tool_call("write_file", {"path": "app/other.conf", "content": "x\n"}, id="w3"),
                complete("done"),
            ],
            "reviewer": [review("approve")],
        },
    )
    answers = iter(
        [
            {"action": "edit", "arguments": {"path": "app/proxy.conf", "content": "client_max_body_size 20m;\n"}},
            {"action": "edit", "arguments": {"path": "../escape.conf", "content": "x\n"}},
            {"action": "respond", "message": "use 20m, already done; stop here"},
        ]
    )
    r = run_with_approvals(g, stores, "ed", _task("ed"), answer=lambda req: next(answers))
    assert r.state.control.status == "completed"
    assert (root / "app" / "proxy.conf").read_text() == "client_max_body_size 20m;\n"  # the edited call ran
    assert not (tmp_path / "escape.conf").exists() and not (root / "app" / "other.conf").exists()
    events = stores.events.read("ed")
    ctx = replay(events)
    w1 = next(c for c in ctx.evidence.recent_tool_calls if c.id == "w1")
    assert json.loads(w1.arguments)["content"] == "client_max_body_size 20m;\n" and w1.status == "ok"
    assert "the user edited the arguments before approving" in w1.result_summary
    denied = {e.payload["call_id"]: e for e in events if e.kind == "permission.denied"}
    assert denied["w2"].payload["reason"].startswith("edited arguments refused:") and denied["w2"].actor == "system"
    assert denied["w3"].actor == "user" and "use 20m, already done" in denied["w3"].payload["reason"]
    w3 = next(c for c in ctx.evidence.recent_tool_calls if c.id == "w3")
    assert w3.status == "denied" and "the user says: use 20m, already done; stop here" in w3.result_summary


def test_one_interrupt_per_node_and_nothing_appended_twice(tmp_path: Path) -> None:
    two = AIMessage(
        content="both",
        tool_calls=[
            {"name": "write_file", "args": CONF, "id": "a1", "type": "tool_call"},
            {
                "name": "write_file",
                "args": {"path": "app/second.conf", "content": "y\n"},
                "id": "a2",
                "type": "tool_call",
            },
        ],
    )
    g, stores, root = _graph(
        tmp_path, {"planner": [plan("Patch")], "executor": [two, complete("done")], "reviewer": [review("approve")]}
    )
    first = run_graph(g, stores, "one", _task("one"))
    assert first.waiting is not None and first.waiting["call_id"] == "a1"
    assert first.next_nodes == ("tools",)
    # resuming without an answer re-runs the node: it interrupts again, appends nothing new
    n = stores.events.last_seq("one")
    again = run_graph(g, stores, "one", None)
    assert again.waiting is not None and again.waiting["call_id"] == "a1"
    assert stores.events.last_seq("one") == n
    second = run_graph(g, stores, "one", Command(resume={"action": "approve"}))
    assert second.waiting is not None and second.waiting["call_id"] == "a2"  # the next node run asks for a2
    done = run_graph(g, stores, "one", Command(resume={"action": "approve"}))
    assert done.waiting is None and done.state.control.status == "completed"
    events = stores.events.read("one")
    for kind in ("permission.requested", "permission.granted", "tool.result.received"):
        assert sorted(e.payload["call_id"] for e in events if e.kind == kind) == ["a1", "a2"], kind
    assert (root / "app" / "second.conf").read_text() == "y\n"
    # nothing pending now: a Command(resume=...) would be a silent no-op, so callers check first
    assert pending_approval(g, "one") is None
    assert not g.get_state(thread_config("one")).interrupts


def test_requires_approval_list_and_low_risk_calls(tmp_path: Path) -> None:
    g, stores, root = _graph(
        tmp_path,
        {
            "planner": [plan("Look")],
            "executor": [
                tool_call("list_dir", {"path": "app"}, id="l1"),
                tool_call("read_file", {"path": "app/proxy.conf"}, id="r1"),
                complete("looked"),
            ],
            "reviewer": [review("approve")],
        },
    )
    seen: list[str] = []
    r = run_with_approvals(
        g,
        stores,
        "ra",
        _task("ra", requires_approval=["read_file"]),
        answer=lambda req: seen.append(req["call_id"]) or {"action": "approve"},
    )
    assert seen == ["r1"] and r.state.control.status == "completed"
    grants = [e for e in stores.events.read("ra") if e.kind == "permission.granted"]
    assert [(e.payload["call_id"], e.actor) for e in grants] == [("r1", "user")]


def test_cli_interactive_prompt(tmp_path: Path, monkeypatch) -> None:
    """In a terminal, ``taskctx demo`` asks at each approval: [a]pprove ... [q] stops and leaves it pending."""
    from typer.testing import CliRunner

    import graphs.cli.approve as approvals
    from graphs.cli import app

    answers = iter(["a", "q"])
    monkeypatch.setattr(approvals, "_interactive", lambda: True)
    monkeypatch.setattr(approvals.typer, "prompt", lambda *a, **k: next(answers))
    r = CliRunner().invoke(
        app, ["demo", "--db", str(tmp_path / "t.sqlite"), "--out", str(tmp_path / "o"), "--task-id", "i1"]
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.count("approval requested: apply_patch") == 2
    assert "waiting for approval of apply_patch (call d-fix2, high risk)" in r.stdout
    events = SqliteStores(tmp_path / "t.sqlite").events.read("i1")
    assert [
        (e.payload["call_id"], e.actor) for e in events if e.kind == "permission.granted" and e.actor == "user"
    ] == [("d-fix1", "user")]


class Crash(BaseException):
    """Stands in for a killed process (not an Exception: the tool node does not catch it)."""


def test_a_stored_answer_never_answers_a_later_question_after_a_crash(tmp_path: Path) -> None:
    """a1 and a2 both need approval; a1 is approved and the process dies inside it (after the
    write). On resume a1 is found done on disk; a2 must then be asked, not approved by a1's
    stored answer (LangGraph hands resume values to interrupt() calls by their order)."""
    crash = {"a1"}

    class Crashing(WorkspaceTools):
        def execute(self, call_id, tool, arguments, scopes=()):
            out = super().execute(call_id, tool, arguments, scopes)
            if call_id in crash:
                crash.discard(call_id)
                raise Crash(call_id)
            return out

    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "proxy.conf").write_text("client_max_body_size 1m;\n")
    two = AIMessage(
        content="both",
        tool_calls=[
            {"name": "write_file", "args": CONF, "id": "a1", "type": "tool_call"},
            {
                "name": "write_file",
                "args": {"path": "app/second.conf", "content": "y\n"},
                "id": "a2",
                "type": "tool_call",
            },
        ],
    )
    stores = SqliteStores(":memory:")
    g = build_orchestrator(
        ScriptedChatModel(
            script={"planner": [plan("Patch")], "executor": [two, complete("done")], "reviewer": [review("approve")]}
        ),
        tools=Crashing(root, receipts_dir=tmp_path / "receipts"),
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
        stores=stores,
    )
    first = run_graph(g, stores, "cr", _task("cr"))
    assert first.waiting is not None and first.waiting["call_id"] == "a1"
    try:
        run_graph(g, stores, "cr", Command(resume={"action": "approve", "request_id": first.waiting.get("request_id")}))
        raise AssertionError("the crash did not happen")
    except Crash:
        pass
    assert (root / "app" / "proxy.conf").read_text() == CONF["content"]
    resumed = run_graph(g, stores, "cr", None, resume=True)
    assert resumed.waiting is not None and resumed.waiting["call_id"] == "a2", resumed.waiting
    assert not (root / "app" / "second.conf").exists()  # not approved by a1's stored answer
    assert (
        first.waiting["request_id"].startswith("evt_") and resumed.waiting["request_id"] != first.waiting["request_id"]
    )
    events = stores.events.read("cr")
    a1 = next(e for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == "a1")
    assert a1.payload["result_summary"].startswith("[recovered after an interruption:")
    # an answer naming another request is not an answer to this one: a2 is asked again, nothing appended
    n = stores.events.last_seq("cr")
    stale = run_graph(g, stores, "cr", Command(resume={"action": "approve", "request_id": first.waiting["request_id"]}))
    assert stale.waiting is not None and stale.waiting["request_id"] == resumed.waiting["request_id"]
    assert stores.events.last_seq("cr") == n and not (root / "app" / "second.conf").exists()
    done = run_graph(
        g, stores, "cr", Command(resume={"action": "approve", "request_id": resumed.waiting["request_id"]})
    )
    assert done.waiting is None and done.state.control.status == "completed"
    assert (root / "app" / "second.conf").read_text() == "y\n"
    events = stores.events.read("cr")
    for kind in ("permission.requested", "permission.granted", "tool.result.received"):
        assert sorted(e.payload["call_id"] for e in events if e.kind == kind) == ["a1", "a2"], kind
    assert [e.actor for e in events if e.kind == "permission.granted"] == ["user", "user"]
    assert replay(events) == done.state


def test_an_edit_is_checked_against_the_tool_schema_at_the_prompt_and_in_approve(tmp_path: Path, monkeypatch) -> None:
    """A typo in an edit used to end the task (the policy refused the edited call); the prompt
    now shows the argument names, names what is wrong and asks again, and ``taskctx approve
    --edit`` refuses it in one line (exit 2) without recording anything."""
    from typer.testing import CliRunner

    import graphs.cli.approve as approvals
    from graphs.cli import app

    answers = iter(["a", "e", '{"pach": "x"}', "e", '{"patch": 5}', "e", "[1]", "q"])
    monkeypatch.setattr(approvals, "_interactive", lambda: True)
    monkeypatch.setattr(approvals.typer, "prompt", lambda *a, **k: next(answers))
    db = str(tmp_path / "t.sqlite")
    r = CliRunner().invoke(app, ["demo", "--db", db, "--out", str(tmp_path / "o"), "--task-id", "i1"])
    assert r.exit_code == 0, r.output
    assert next(answers, None) is None  # every answer was asked for
    # outside a terminal no line is padded with spaces (the diffs were, to 80 columns)
    assert [line for line in r.stdout.split("\n") if line != line.rstrip()] == []
    shown = CliRunner().invoke(app, ["inspect", "i1", "--db", db]).stdout
    assert "approval requested: apply_patch" in shown
    assert [line for line in shown.split("\n") if line != line.rstrip()] == []
    assert r.stdout.count("  apply_patch takes: patch (required); the current arguments have: patch\n") == 3
    assert "  apply_patch needs 'patch' (it takes: patch); try again\n" in r.stdout
    assert "  apply_patch argument 'patch' must be of type string, not int; try again\n" in r.stdout
    assert "  not a JSON object; try again\n" in r.stdout
    events = SqliteStores(db).events.read("i1")
    assert [
        e.payload["reason"] for e in events if e.kind == "permission.denied" and "edited" in e.payload["reason"]
    ] == []
    assert [e.kind for e in events][-1] == "permission.requested"  # still pending, nothing else recorded
    n = len(events)
    r = CliRunner().invoke(app, ["approve", "i1", "--db", db, "--edit", '{"patch": "x", "pth": "a"}'])
    assert r.exit_code == 2
    assert r.stderr == ("error: --edit: apply_patch has no argument 'pth' (it takes: patch); nothing was recorded\n")
    assert len(SqliteStores(db).events.read("i1")) == n


def test_check_edited_arguments() -> None:
    from graphs.cli.approve import check_edited_arguments

    params = {
        "type": "object",
        "properties": {"argv": {"type": "array"}, "timeout": {"type": ["integer", "null"]}, "note": {}},
        "required": ["argv"],
    }
    assert check_edited_arguments("run_command", params, {"argv": ["ls"], "timeout": None, "note": 3}) is None
    assert check_edited_arguments("run_command", params, {"argv": ["ls"], "timeout": True}) == (
        "run_command argument 'timeout' must be of type integer or null, not bool"
    )
    assert check_edited_arguments("run_command", params, {"argv": "ls"}) == (
        "run_command argument 'argv' must be of type array, not str"
    )
    assert check_edited_arguments("run_command", params, {}) == (
        "run_command needs 'argv' (it takes: argv, timeout, note)"
    )
    assert (
        check_edited_arguments("t", {"type": "object", "properties": {}, "additionalProperties": True}, {"x": 1})
        is None
    )
    assert check_edited_arguments("t", None, {"x": 1}) is None


def test_an_edit_resumed_through_the_python_api_is_checked_against_the_tool_schema(tmp_path: Path) -> None:
    """``Command(resume=...)`` from a Python (or LangGraph Server) caller goes through the same
    schema check as the CLI's ``--edit``, in the tool node: arguments that do not fit the tool
    are refused (``permission.denied``, a ``denied`` result naming the problem), never run."""
    g, stores, root = _graph(
        tmp_path,
        {
            "planner": [plan("Patch the config")],
            "executor": [tool_call("write_file", CONF, id="w1"), complete("left as it is")],
            "reviewer": [review("approve")],
        },
    )
    first = run_graph(g, stores, "api", _task("api"))
    assert first.waiting is not None and first.waiting["call_id"] == "w1"
    # an argument write_file does not take: the permission policy lets it through, the schema does not
    typo = {"path": "app/proxy.conf", "content": "client_max_body_size 20m;\n", "mode": "0777"}
    done = run_graph(g, stores, "api", Command(resume={"action": "edit", "arguments": typo}))
    assert done.waiting is None and done.state.control.status == "completed"
    assert (root / "app" / "proxy.conf").read_text() == "client_max_body_size 1m;\n"  # not run
    events = stores.events.read("api")
    denied = [(e.actor, e.payload["call_id"], e.payload["reason"]) for e in events if e.kind == "permission.denied"]
    assert denied == [
        ("system", "w1", "edited arguments refused: write_file has no argument 'mode' (it takes: path, content)")
    ]
    w1 = next(c for c in replay(events).evidence.recent_tool_calls if c.id == "w1")
    assert (w1.status, w1.result_summary) == (
        "denied",
        "refused by the tool node: the edited arguments do not fit the tool "
        "(write_file has no argument 'mode' (it takes: path, content)); not run",
    )
    assert [e.kind for e in events].count("permission.granted") == 0


def test_an_edit_while_an_approval_waits_names_the_request_and_what_to_do(tmp_path: Path) -> None:
    import pytest

    from context import InvalidInputError

    g, stores, _ = _graph(
        tmp_path,
        {
            "planner": [plan("Patch the config")],
            "executor": [tool_call("write_file", CONF, id="w1"), complete("done")],
            "reviewer": [review("approve")],
        },
    )
    cfg = thread_config("wt")
    g.invoke(_task("wt", requires_approval=["write_file"]), cfg)
    assert pending_approval(g, "wt") is not None
    asked = [e for e in stores.events.read("wt") if e.kind == "permission.requested"][-1]
    before = stores.events.last_seq("wt")
    with pytest.raises(InvalidInputError) as err:
        g.update_state(cfg, {"identity": {"constraints": ["keep 1m"]}})
    assert str(err.value) == (
        f"update_state: task 'wt' waits for an approval (call w1 of write_file, asked at seq {asked.seq}); its "
        "node's run ends with the answer, so an edit now would split that run: answer it first "
        "(Command(resume=...), or taskctx approve), then edit; to edit before a call is asked, interrupt "
        "before the tools node (interrupt_before=['tools'])"
    )
    assert stores.events.last_seq("wt") == before
    # answered, the edit is taken
    g.invoke(Command(resume={"action": "approve", "request_id": pending_approval(g, "wt")["request_id"]}), cfg)
    g.update_state(cfg, {"identity": {"constraints": ["keep 1m"]}})
    assert stores.events.read("wt")[-1].kind == "state.edited"
