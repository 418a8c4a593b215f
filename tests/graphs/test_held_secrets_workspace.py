"""Held secrets with the real workspace tools: a secret in a file's name and content, a command's argv, its receipt.

The tools get the values (the file on disk has the real name and bytes); the log, the artifacts,
the receipts and the export hold only placeholders; a resume takes the request's password again
from the environment, or is refused naming it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from context import InvalidInputError, MissingSecretError
from graphs import open_project
from graphs.task_secrets import parse_secret_options, read_secret_file
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, review, tool_call

PW = "Tr0ub4dor&3-horse"
TAG = "Zq9-密钥-77"  # a secret in a file's name, CJK included
REQUEST = f"Log in as admin. Password: {PW} and keep a note of it."


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "planner": [plan("Write the note", "Check it")],
            "executor": [
                tool_call(
                    "write_file",
                    {"path": "notes-{{secret:FILE_TAG}}.txt", "content": "pass={{secret:CREDENTIAL}}\n"},
                    id="c1",
                ),
                complete("wrote the note"),
                tool_call("list_dir", {}, id="c2"),
                tool_call("run_command", {"argv": ["echo", "{{secret:CREDENTIAL}}"]}, id="c3"),
                complete("checked"),
            ],
            "reviewer": [review("approve", "the note is there")],
        }
    )


def test_workspace_tools_get_the_values_and_only_placeholders_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIAL", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    project = open_project(tmp_path / "db.sqlite", secrets={"FILE_TAG": TAG})
    tools = WorkspaceTools(ws, receipts_dir=tmp_path / "receipts", artifacts=project.stores.artifacts)
    graph = project.graph(_model(), tools=tools, memory=False)
    approve = lambda req: {"action": "approve"}  # noqa: E731
    first = project.run(graph, REQUEST, task_id="t1", approvals=approve, max_steps=1)
    assert first.stopped_early and (ws / f"notes-{TAG}.txt").read_text(encoding="utf-8") == f"pass={PW}\n"

    with pytest.raises(MissingSecretError, match="task t1 uses the secret CREDENTIAL, whose value taskctx never"):
        project.resume("t1", graph=graph, approvals=approve)
    monkeypatch.setenv("CREDENTIAL", PW)  # the same environment variable: the resume takes it
    done = project.resume("t1", graph=graph, approvals=approve)
    assert done.state.control.status == "completed"

    events = project.stores.events.read("t1")
    assert [e.payload["path"] for e in events if e.kind == "file.modified"] == ["notes-{{secret:FILE_TAG}}.txt"]
    raw = {
        e.payload["call_id"]: project.stores.artifacts.get(e.payload["raw_ref"]).decode()
        for e in events
        if e.kind == "tool.result.received"
    }
    assert raw["c2"] == "notes-{{secret:FILE_TAG}}.txt\n"
    assert raw["c3"] == "$ echo {{secret:CREDENTIAL}}\n{{secret:CREDENTIAL}}\n[exit code 0]\n"
    assert [e.payload["tool"] for e in events if e.kind == "tool.called"] == ["write_file", "list_dir", "run_command"]
    assert project.export("t1", tmp_path / "export").is_dir()
    project.close()

    receipts = list((tmp_path / "receipts").rglob("*.json"))
    assert len(receipts) == 1 and '"argv": ["echo", "{{secret:CREDENTIAL}}"]' in receipts[0].read_text()
    kept = [p for p in tmp_path.rglob("*") if p.is_file() and ws not in p.parents]
    assert len(kept) > 5
    for p in kept:
        data = p.read_bytes()
        assert PW.encode() not in data and TAG.encode() not in data, p


def test_secret_options_from_the_environment_or_a_file(tmp_path: Path) -> None:
    f = tmp_path / "pin"
    f.write_bytes("密码-".encode() + b"\xff-42\n")
    assert read_secret_file(f) == "密码-\udcff-42"
    assert parse_secret_options(["API_KEY", f"PIN=@{f}"], {"API_KEY": "k-123456"}) == {
        "API_KEY": "k-123456",
        "PIN": "密码-\udcff-42",
    }
    with pytest.raises(InvalidInputError, match="--secret API_KEY: the environment variable API_KEY is not set"):
        parse_secret_options(["API_KEY"], {})
    with pytest.raises(InvalidInputError, match="a value on the command line would be kept in the shell's history"):
        parse_secret_options(["API_KEY=k-123456"], {})
    with pytest.raises(InvalidInputError, match=f"secret file {tmp_path / 'none'} cannot be read"):
        parse_secret_options([f"PIN=@{tmp_path / 'none'}"], {})


def test_the_live_stream_of_a_command_shows_the_placeholder(tmp_path: Path) -> None:
    from context.held_secrets import hold_secrets
    from graphs import new_task, thread_config

    ws = tmp_path / "ws"
    ws.mkdir()
    model = ScriptedChatModel(
        script={
            "planner": [plan("Echo it")],
            "executor": [
                tool_call("run_command", {"argv": ["echo", "{{secret:CREDENTIAL}}"]}, id="c1"),
                complete("ok"),
            ],
            "reviewer": [review("approve", "echoed")],
        }
    )
    with open_project(tmp_path / "db.sqlite") as project:
        graph = project.graph(model, tools=WorkspaceTools(ws, receipts_dir=tmp_path / "r"), memory=False)
        with hold_secrets({"CREDENTIAL": PW}):
            task = new_task("Echo {{secret:CREDENTIAL}} once.", "s1")
            chunks = list(graph.stream(task, thread_config("s1"), stream_mode="custom"))
    lines = [c["line"] for c in chunks if c["kind"] == "tool.output"]
    assert lines == ["{{secret:CREDENTIAL}}\n"]
    assert PW not in repr(chunks)


def test_a_missing_secret_is_named_in_the_singular_or_the_plural() -> None:
    from graphs import new_task
    from graphs.task_secrets import secrets_to_resume

    one = new_task("Log in with {{secret:CREDENTIAL}}.", "t1")
    with pytest.raises(MissingSecretError) as err:
        secrets_to_resume(one, {}, {})
    assert str(err.value) == (
        "task t1 uses the secret CREDENTIAL, whose value taskctx never stores; set the environment variable "
        "CREDENTIAL, or pass --secret CREDENTIAL (from the environment) or --secret CREDENTIAL=@FILE "
        "(API: resume(..., secrets={...}))"
    )
    three = new_task("Use {{secret:CREDENTIAL}}, {{secret:MY_TOKEN}} and {{secret:PIN}}.", "t2")
    with pytest.raises(MissingSecretError) as err:
        secrets_to_resume(three, {"PIN": "4242-x"}, {})
    assert str(err.value) == (
        "task t2 uses the secrets CREDENTIAL and MY_TOKEN, whose values taskctx never stores; set the environment "
        "variables CREDENTIAL and MY_TOKEN, or pass --secret CREDENTIAL --secret MY_TOKEN (from the environment) "
        "or --secret NAME=@FILE for each (API: resume(..., secrets={...}))"
    )
    with pytest.raises(MissingSecretError, match=r"the secrets CREDENTIAL, MY_TOKEN and PIN, whose values"):
        secrets_to_resume(three, {}, {})


def test_a_secret_name_is_checked_before_its_variable_is_looked_up() -> None:
    with pytest.raises(InvalidInputError) as err:
        parse_secret_options(["bad-name"], {})
    assert str(err.value) == (
        "--secret bad-name: secret name 'bad-name' is not valid: use letters, digits and _ (not starting with a "
        "digit), up to 64 characters, e.g. DB_PASSWORD"
    )
    with pytest.raises(InvalidInputError, match=r"^--secret 9LIVES: secret name '9LIVES' is not valid"):
        parse_secret_options(["9LIVES=@/nonexistent"], {"9LIVES": "x"})
