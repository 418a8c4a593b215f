"""A LangChain ``@tool`` with side effects, killed with SIGKILL around its call, runs once after resume.

The child runs ``Project.graph(model, tools=[read_log, kv_set], side_effects={"kv_set"})`` on a
SQLite project with an approval on ``kv_set`` and kills itself: after the tool returned and its
receipt was written (``after``), inside the tool after its side effect (``mid``: the receipt
says started), or before the tool ran (``before``). A second process builds the same graph and
resumes the thread. Exactly once is measured on the store the tool appends to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from context import SqliteStores, replay

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from langchain_core.tools import tool
    from context import Permissions
    from graphs import new_task, open_project
    from graphs.runner import run_with_approvals
    from nodes import LangChainTools, ScriptedChatModel
    from nodes.testing import complete, plan, review, tool_call

    db, store, mode, when = sys.argv[1:5]

    @tool
    def read_log(service: str) -> str:
        '''Read the last lines of a service's log.'''
        return f"{service}: upstream timed out\\n"

    @tool
    def kv_set(key: str, value: str) -> str:
        '''Set a key of the store.'''
        with open(store, "a") as fh:
            fh.write(f"{key}={value}\\n")
        if mode == "run" and when == "mid":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"set {key}={value}"

    if mode == "run" and when == "after":  # the tool returned, its receipt says finished
        finished = LangChainTools._finished
        def die(self, receipt, out):
            finished(self, receipt, out)
            if receipt is not None:  # kv_set's (read_log keeps none)
                os.kill(os.getpid(), signal.SIGKILL)
        LangChainTools._finished = die
    if mode == "run" and when == "before":  # granted, but killed before the receipt (and the tool)
        started = LangChainTools._started
        def die_first(self, task_id, call_id, tool, arguments):
            if tool == "kv_set":
                os.kill(os.getpid(), signal.SIGKILL)
            return started(self, task_id, call_id, tool, arguments)
        LangChainTools._started = die_first

    model = ScriptedChatModel(script={
        "planner": [plan("Read the log, then set the flag")],
        "executor": [tool_call("read_log", {"service": "api"}, id="r1"),
                     tool_call("kv_set", {"key": "maintenance", "value": "on"}, id="k1"),
                     complete("flag set")],
        "reviewer": [review("approve")],
    })
    project = open_project(db)
    graph = project.graph(model, tools=[read_log, kv_set], side_effects={"kv_set"}, memory=False)
    task = new_task("Set maintenance on.", "t1", permissions=Permissions(requires_approval=["kv_set"]))
    asked = []
    def answer(req):
        asked.append(req["reason"])
        return {"action": "approve"}
    r = run_with_approvals(graph, project.stores, "t1", task if mode == "run" else None, answer=answer)
    print(r.state.control.status)
    print("ASKED", asked)
    """
)


def _child(tmp_path: Path, mode: str, when: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "t.sqlite"), str(tmp_path / "store.txt"), mode, when],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("when", ["after", "before", "mid"])
def test_sigkill_around_a_langchain_tool_then_resume_runs_it_once(tmp_path: Path, when: str) -> None:
    killed = _child(tmp_path, "run", when)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    stores = SqliteStores(tmp_path / "t.sqlite")
    before = stores.events.read("t1")
    assert before[-1].kind == "permission.granted" and before[-1].payload["call_id"] == "k1"  # the marker, no result
    stores.close()
    store = tmp_path / "store.txt"
    ran_before = store.read_text().count("\n") if store.exists() else 0
    assert ran_before == (0 if when == "before" else 1)
    receipt = next((tmp_path / "receipts").glob("*.json"), None)
    status = json.loads(receipt.read_text())["status"] if receipt else None
    assert status == {"after": "finished", "mid": "started", "before": None}[when]

    resumed = _child(tmp_path, "resume", when)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    out = resumed.stdout.splitlines()
    assert out[0] == "completed", resumed.stdout
    stores = SqliteStores(tmp_path / "t.sqlite")
    events = stores.events.read("t1")
    assert [e.id for e in events[: len(before)]] == [e.id for e in before]  # nothing rewritten
    results = Counter(e.payload["call_id"] for e in events if e.kind == "tool.result.received")
    assert results == {"r1": 1, "k1": 1}
    result = next(e.payload for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == "k1")
    lines = store.read_text().splitlines()
    if when == "after":  # its receipt said finished: recorded from it, not run again
        assert lines == ["maintenance=on"] and out[1] == "ASKED []"
        assert result["result_summary"] == (
            "[recovered after an interruption: kv_set had finished before the interruption (its receipt)]\n"
            "set maintenance=on"
        )
    elif when == "before":  # no receipt: it never started, so it runs now, once
        assert lines == ["maintenance=on"] and out[1] == "ASKED []"
        assert result["result_summary"] == (
            "[run again after an interruption: kv_set never started (no receipt)]\nset maintenance=on"
        )
    else:  # started, never finished: put to the user ("run it again?"), run once more when approved
        assert out[1] == (
            "ASKED ['interrupted before its result was recorded: kv_set was cut off while running; "
            "it may have had effects; run it again?']"
        )
        assert lines == ["maintenance=on", "maintenance=on"]  # the user approved running it again
        assert result["result_summary"] == (
            "[run again after an interruption, approved by the user]\nset maintenance=on"
        )
    assert [e.kind for e in events].count("resume.started") == 1
    assert replay(events).control.status == "completed"
    stores.close()
