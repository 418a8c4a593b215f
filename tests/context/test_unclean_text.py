"""Text that is not clean UTF-8 at every boundary where text becomes bytes.

A lone UTF-16 surrogate (``"\\ud835"``, half of a math-bold letter) in a tool's output, a
trajectory's observation, a request or a payload is stored losslessly where bytes are kept (the
artifact store), replaced by U+FFFD where it must be text (event payloads, prompts, exports), and
never crashes a run, which therefore never re-runs the tool on resume.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import SqliteStores, new_event, replay
from context.text import clean, escape_controls, from_bytes, json_text, shown, to_bytes
from graphs import build_orchestrator, new_task, open_project
from graphs.checkpoint import checkpoint_serde
from graphs.runner import export_run, run_graph
from nodes import ScriptedChatModel, ToolOutcome
from nodes.testing import complete, plan, recover, review, tool_call
from nodes.tools import function_schema

SCRAPED = "title: \ud835 bold"


class ScrapeTools:
    """A custom tool whose output holds a lone surrogate; counts its runs."""

    def __init__(self, output: Any = SCRAPED, raises: BaseException | None = None):
        self.output = output
        self.raises = raises
        self.runs = 0

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("scrape", "Scrape a page.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.runs += 1
        if self.raises is not None:
            raise self.raises
        return ToolOutcome("ok", self.output)


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "planner": [plan("Scrape the page")],
            "executor": [tool_call("scrape", {"url": "https://example.com"}, id="c1"), complete("scraped")],
            "reviewer": [review("approve")],
            "recovery": [recover("stop", "the tool failed")],
        }
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_tool_output_with_a_lone_surrogate_is_stored_exactly_and_the_run_finishes(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    db = str(tmp_path / "t.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_db")
    tools = ScrapeTools()
    with open_project(db) as project:
        g = build_orchestrator(_model(), tools=tools, checkpointer=project.checkpointer, stores=project.stores)
        r = run_graph(g, project.stores, "u1", new_task("Scrape the title.", "u1"))
        assert r.finished and r.state.control.status == "completed"
        assert tools.runs == 1
        events = project.stores.events.read("u1")
        res = next(e for e in events if e.kind == "tool.result.received")
        assert res.payload["status"] == "ok"
        assert res.payload["result_summary"] == "title: \ufffd bold"  # text: replaced
        assert res.payload["raw_chars"] == len(SCRAPED) == 13
        raw = project.stores.artifacts.get(res.payload["raw_ref"])
        assert raw == b"title: \xed\xa0\xb5 bold"  # bytes: exact (surrogatepass)
        assert from_bytes(raw) == SCRAPED
        assert replay(events) == r.state
        # a resume does not run the tool again
        again = run_graph(g, project.stores, "u1", None, resume=True)
        assert again.state.control.status == "completed" and tools.runs == 1
        out = export_run(project.stores, "u1", tmp_path / "runs")
        assert "title: \ufffd bold" in (out / "trace.jsonl").read_text(encoding="utf-8")


def test_a_tool_that_raises_while_its_output_is_recorded_is_an_error_result_not_a_rerun(tmp_path: Path) -> None:
    tools = ScrapeTools(output="payload")
    stores = SqliteStores(tmp_path / "e.sqlite")

    put = stores.artifacts.put

    def full(data: Any) -> str:  # the tool's output fails to be stored (stands for any failure while recording)
        if data == "payload":
            raise OSError(28, "No space left on device")
        return put(data)

    stores.artifacts.put = full  # type: ignore[method-assign]
    g = build_orchestrator(_model(), tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    r = run_graph(g, stores, "u2", new_task("Scrape.", "u2"))
    res = [e for e in stores.events.read("u2") if e.kind == "tool.result.received"]
    assert tools.runs == 1 and len(res) == 1
    assert res[0].payload["status"] == "error" and res[0].payload["raw_ref"] is None
    assert res[0].payload["result_summary"] == (
        "error: the output of scrape could not be recorded (OSError: [Errno 28] No space left on device)"
    )
    assert r.state.evidence.recent_tool_calls[0].status == "error"


def test_a_tool_that_raises_a_surrogate_message_is_an_error_result(tmp_path: Path) -> None:
    tools = ScrapeTools(raises=ValueError("bad title \udc80"))
    stores = SqliteStores(":memory:")
    g = build_orchestrator(_model(), tools=tools, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    run_graph(g, stores, "u3", new_task("Scrape.", "u3"))
    res = next(e for e in stores.events.read("u3") if e.kind == "tool.result.received")
    assert res.payload["status"] == "error"
    assert res.payload["result_summary"] == "error: tool scrape raised ValueError: bad title \ufffd"
    assert (
        stores.artifacts.get(res.payload["raw_ref"]) == b"error: tool scrape raised ValueError: bad title \xed\xb2\x80"
    )


def test_a_request_and_payloads_with_surrogates_never_reach_the_stores_unencodable(tmp_path: Path) -> None:
    task = new_task("Fix \ud800 the title.\nDo not touch \udfff docs.", "u4")
    assert task.identity.original_request == "Fix \ufffd the title.\nDo not touch \ufffd docs."
    assert task.identity.constraints == ["Do not touch \ufffd docs."]
    e = new_event("memory.proposed", {"text": "a\ud835b", "kind": "fact"}, actor="agent")
    assert e.payload["text"] == "a\ufffdb"
    # the store layer itself takes any str: an escape in the payload's JSON text
    stores = SqliteStores(tmp_path / "s.sqlite")
    raw = e.model_construct(**{**e.model_dump(), "payload": {"text": "a\ud835b", "kind": "fact"}})
    stores.events.append("u4", [raw])
    row = stores._db.conn.execute("SELECT payload FROM taskctx_events").fetchone()[0]
    assert row == '{"kind": "fact", "text": "a\\ud835b"}'
    assert stores.events.read("u4")[0].payload["text"] == "a\ud835b"
    stores.tasks.register("u4", {"kind": "run", "note": "\udc80"})
    assert stores.tasks.get("u4") == {"kind": "run", "note": "\udc80"}
    assert stores.artifacts.get(stores.artifacts.put("\ud835\udc01")) == b"\xed\xa0\xb5\xed\xb0\x81"


def test_a_trajectory_with_a_surrogate_in_an_observation_replays_to_completion(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from graphs.cli import app

    lines = [
        {"id": "sur-1", "task": "Look at the page.", "n_steps": 2, "meta": {}},
        {"step": 1, "thought": "read", "action": '{"name": "cat", "arguments": {"path": "a"}}', "observation": "x"},
        {"step": 2, "thought": "again", "action": "ls", "observation": "title \ud800 end"},
    ]
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")  # json escapes: valid UTF-8
    db = tmp_path / "r.sqlite"
    res = CliRunner().invoke(app, ["replay", str(f), "--db", str(db), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    st = SqliteStores(db)
    events = st.events.read("sur-1")
    assert events[-1].kind == "task.completed"
    obs = [e for e in events if e.kind == "tool.result.received"][-1]
    assert "title \ufffd end" in obs.payload["result_summary"]
    assert st.artifacts.get(obs.payload["raw_ref"]) == b"title \xed\xa0\x80 end"


def test_text_helpers_round_trip_and_show() -> None:
    for s in ["plain", "caf\u00e9 \u4e2d", "\ud835", "\udc80\udcff", "a\ud835\udc01b", "\x00\x1b[2J"]:
        assert from_bytes(to_bytes(s)) == s
        # JSON reads an escaped high+low pair as the one character it encodes
        assert json.loads(json_text(s)) == (s if "\ud835\udc01" not in s else "a\U0001d401b")
        json_text(s).encode("utf-8")  # always encodable
        shown(to_bytes(s)).encode("utf-8")
    assert json_text({"k": "\ud835"}) == '{"k": "\\ud835"}'
    assert from_bytes(b"\xff\xfeok") == "\ufffd\ufffdok"
    assert clean("a\ud835b") == "a\ufffdb"
    assert escape_controls("ok\tline\nnext\x1b[31mred\u202eevil\x00\ud800") == (
        "ok\tline\nnext\\x1b[31mred\\u202eevil\\x00\ufffd"
    )


def test_inspect_the_report_and_approval_prompts_show_controls_and_bidi_overrides_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rich.console import Console

    from graphs.cli.approve import show_request as _show_request
    from graphs.inspection import TaskView
    from graphs.report import render_view
    from graphs.report.page import build_report

    evs = [
        new_event(
            "task.created",
            {"task_id": "c1", "original_request": "Fix it\x1b[2J now.\nDo not run rm\u202eslmx.exe"},
            actor="user",
        ).model_copy(update={"seq": 1})
    ]
    con = Console(record=True, width=200)
    render_view(con, TaskView("c1", replay(evs), evs))
    text = con.export_text()
    assert "Fix it\\x1b[2J now." in text and "Do not run rm\\u202eslmx.exe" in text
    assert "\x1b" not in text and "\u202e" not in text
    page = build_report(evs)
    assert "Fix it\\x1b[2J now." in page and "\u202e" not in page
    _show_request({"tool": "run_command", "arguments": {"command": "ls\u202e"}, "risk": "high", "reason": "r\x07"})
    out = capsys.readouterr().out
    assert "ls\\u202e" in out and "r\\x07" in out and "\x07" not in out
