"""A password in the request: the tools get it, nothing stored or shown holds it, also after a kill -9 and resume.

The child process runs a task whose request says ``Password: <value>`` (found by the detector, held
as ``CREDENTIAL``) with a second secret given through the API (``PIN``: CJK and a byte that is not
UTF-8, ``open_project(secrets=...)``). Its scripted tools check the value they receive and echo it
back, once whole and once split across two lines. The child kills itself with SIGKILL inside the
second call; a resume without ``CREDENTIAL`` in the environment is refused before anything runs,
and one with it finishes the task. The database file (with its -wal), the export folder, the
``inspect`` output and what the loopback LangSmith received hold neither value in any form.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from langsmith_loopback import Ingest
from typer.testing import CliRunner

from context.sqlite_store import SqliteStores
from graphs import open_project
from graphs.cli import app

#: The loopback LangSmith's fixtures (langsmith_loopback, no_remote_network).
pytest_plugins = ["langsmith_loopback"]

PASSWORD = "Tr0ub4dor&3-horse"
PIN = "密码-Zürich-\udcff-42"  # \udcff: the byte 0xff (not UTF-8), as os.environ and surrogateescape read it
REQUEST = f"Log in to the staging app as admin. Password: {PASSWORD} then unlock the vault with the PIN."

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import context, graphs, nodes
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from nodes.testing import complete, plan, review, tool_call

    db, task_id, where = sys.argv[1], sys.argv[2], sys.argv[3]
    want_pw, want_pin = os.environ["WANT_PW"], os.environ["WANT_PIN"]

    class Vault:
        def schemas(self):
            return [
                nodes.function_schema("login", "Log in.", {"user": {"type": "string"}, "password": {"type": "string"}},
                                      ["user", "password"]),
                nodes.function_schema("unlock", "Unlock the vault.", {"pin": {"type": "string"}}, ["pin"]),
            ]

        def has_side_effects(self, tool):
            return False

        def execute(self, call_id, tool, arguments):
            if where == "tool" and call_id == "c2":
                os.kill(os.getpid(), signal.SIGKILL)
            value = arguments["password"] if tool == "login" else arguments["pin"]
            ok = value == (want_pw if tool == "login" else want_pin)
            return (f"{tool}: {'accepted' if ok else 'REJECTED'}\\nserver echo: {value}\\n"
                    f"wrapped: {value[:5]}\\n{value[5:]}\\n")

    model = nodes.ScriptedChatModel(script={
        "planner": [plan("Log in", "Unlock the vault")],
        "executor": [
            tool_call("login", {"user": "admin", "password": "{{secret:CREDENTIAL}}"}, id="c1"),
            complete("logged in"),
            tool_call("unlock", {"pin": "{{secret:PIN}}"}, id="c2"),
            complete("unlocked"),
        ],
        "reviewer": [review("approve", "logged in and unlocked")],
    })
    project = graphs.open_project(db, secrets={"PIN": want_pin})
    graph = project.graph(model, tools=Vault(), memory=False)
    try:
        if where == "resume":
            result = project.resume(task_id, graph=graph)
        else:
            result = project.run(graph, os.environ["REQUEST"], task_id=task_id)
        print(result.state.control.status)
    except context.MissingSecretError as exc:
        print(f"refused: {exc}")
        sys.exit(2)
    finally:
        wait_for_all_tracers()
        project.close()
    """
)


def _child(db: Path, where: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "CREDENTIAL"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(db), "k1", where],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**base, "LANGGRAPH_STRICT_MSGPACK": "true", "WANT_PW": PASSWORD, "WANT_PIN": PIN, **env},
    )


def _forms(value: str) -> list[bytes]:
    """Every form in which a value could reach a file or a request body."""
    raw = value.encode("utf-8", "surrogateescape")
    replaced = value.replace("\udcff", "\ufffd")
    return [
        raw,
        replaced.encode(),
        json.dumps(replaced).encode(),  # JSON, ensure_ascii (\\u5bc6...)
        json.dumps(replaced, ensure_ascii=False).encode(),
        value[:5].encode("utf-8", "surrogateescape") + b"\n" + value[5:].encode("utf-8", "surrogateescape"),
        value[5:].encode("utf-8", "surrogateescape"),  # the second part of the split echo
    ]


def _assert_nowhere(data: bytes, where: str) -> None:
    for value in (PASSWORD, PIN):
        for form in _forms(value):
            assert form not in data, (where, value, form)


def test_password_in_the_request_used_never_seen_across_kill_and_resume(
    langsmith_loopback: Ingest, no_remote_network: list[Any], tmp_path: Path
) -> None:
    db = tmp_path / "k.sqlite"
    killed = _child(db, "tool", tmp_path, REQUEST=REQUEST)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    wal = [p for p in tmp_path.glob("k.sqlite*")]
    assert {p.name for p in wal} >= {"k.sqlite", "k.sqlite-wal"}  # as the kill left them
    for p in wal:
        _assert_nowhere(p.read_bytes(), str(p))
    stores = SqliteStores(db)
    before = stores.events.read("k1")
    stores.close()
    assert [e.payload["call_id"] for e in before if e.kind == "tool.result.received"] == ["c1"]

    refused = _child(db, "resume", tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stdout == (
        "refused: task k1 uses the secret CREDENTIAL, whose value taskctx never stores; set the environment "
        "variable CREDENTIAL, or pass --secret CREDENTIAL (from the environment) or --secret CREDENTIAL=@FILE "
        "(API: resume(..., secrets={...}))\n"
    )
    stores = SqliteStores(db)
    assert len(stores.events.read("k1")) == len(before)  # nothing ran
    stores.close()

    resumed = _child(db, "resume", tmp_path, CREDENTIAL=PASSWORD)
    assert (resumed.returncode, resumed.stdout) == (0, "completed\n"), resumed.stderr

    stores = SqliteStores(db)
    events = stores.events.read("k1")
    created = events[0].payload
    assert created["original_request"] == (
        "Log in to the staging app as admin. Password: {{secret:CREDENTIAL}} then unlock the vault with the PIN."
    )
    assert [c for c in created["constraints"] if "{{secret:" in c] == [
        "The secret PIN is given for this task: write {{secret:PIN}} in a tool's arguments where its value "
        "belongs (the tool gets the value; it is never shown).",
        "The secret CREDENTIAL is given for this task: write {{secret:CREDENTIAL}} in a tool's arguments where "
        "its value belongs (the tool gets the value; it is never shown).",
    ]
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    assert sorted(results) == ["c1", "c2"]  # each once: c2 ran again after the kill, c1 did not
    assert [e.payload.get("call_id") for e in events if e.kind == "tool.called"] == ["c1", "c2"]
    raw = {cid: stores.artifacts.get(p["raw_ref"]).decode("utf-8", "surrogateescape") for cid, p in results.items()}
    assert raw["c1"] == ("login: accepted\nserver echo: {{secret:CREDENTIAL}}\nwrapped: {{secret:CREDENTIAL}}\n\n")
    assert raw["c2"] == "unlock: accepted\nserver echo: {{secret:PIN}}\nwrapped: {{secret:PIN}}\n\n"
    assert [p["status"] for p in results.values()] == ["ok", "ok"]
    prompts = [stores.artifacts.get(e.payload["prompt_ref"]) for e in events if e.payload.get("prompt_ref")]
    assert prompts and all(b"Password: {{secret:CREDENTIAL}}" in p for p in prompts)
    stores.close()

    out = tmp_path / "export"
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", "k1", "--db", str(db), "--all"])
    assert shown.exit_code == 0, shown.output
    assert "{{secret:CREDENTIAL}}" in shown.output
    with open_project(db, readonly=True) as project:
        folder = project.export("k1", out)
    assert (folder / "trace.jsonl").read_text(encoding="utf-8").count("{{secret:CREDENTIAL}}") > 0

    _assert_nowhere(shown.output.encode("utf-8", "surrogateescape"), "inspect")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"k.sqlite", "trace.jsonl", "state.json"}
    for p in files:
        _assert_nowhere(p.read_bytes(), str(p))
    body = langsmith_loopback.bodies()
    assert b"{{secret:CREDENTIAL}}" in body  # the trace holds the request, as the placeholder
    _assert_nowhere(body, "langsmith")
    assert not no_remote_network
