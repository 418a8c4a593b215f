"""Views of a long task: the report pages its long sections and every item stays reachable
(``--full``); ``inspect`` shows the state's windows and ``--all`` lists every plan step and error
from the log (context.all_plan_steps, context.all_errors)."""

from __future__ import annotations

import html as _html
import json
import re

from context import all_errors, all_plan_steps, new_event, replay
from graphs.report.page import PAGE_HEAD, PAGE_TAIL, build_report


def _long_task(n: int) -> list:
    steps = [{"id": f"s{i}", "title": f"Step {i}"} for i in range(1, n + 1)]
    ev = [
        new_event("task.created", {"task_id": "lv", "original_request": "Do every step."}, actor="user"),
        new_event("plan.created", {"steps": steps}, actor="agent"),
    ]
    for i in range(1, n + 1):
        ev += [
            new_event("step.started", {"step_id": f"s{i}"}, actor="agent"),
            new_event("error.occurred", {"error_id": f"err-{i}", "source": "step", "step_id": f"s{i}"}, actor="system"),
            new_event("step.completed", {"step_id": f"s{i}", "summary": f"s{i} done"}, actor="agent"),
            new_event("error.resolved", {"error_id": f"err-{i}", "resolution": f"fixed in s{i}"}, actor="system"),
        ]
    return [e.model_copy(update={"seq": seq}) for seq, e in enumerate(ev, start=1)]


def test_everything_left_out_of_the_state_is_read_back_from_the_log() -> None:
    ev = _long_task(150)
    ctx = replay(ev)
    assert len(ctx.errors.error_history) == 10 and ctx.plan.done_folded == 130
    errs = all_errors(ev)
    assert [e.id for e in errs] == [f"err-{i}" for i in range(1, 151)]
    assert errs[0].resolution == "fixed in s1" and errs[0].step_id == "s1"
    steps = all_plan_steps(ctx, ev)
    assert [s.id for s in steps] == [f"s{i}" for i in range(1, 151)]
    assert {s.status for s in steps} == {"done"} and steps[0].title == "Step 1"


def test_a_long_report_pages_its_sections_and_full_shows_every_row() -> None:
    ev = _long_task(150)  # 602 events
    page = build_report(ev)
    rows = re.findall(r'<tr data-kind="', page)
    assert len(rows) == PAGE_HEAD + PAGE_TAIL
    left = len(ev) - PAGE_HEAD - PAGE_TAIL
    assert f"... {left:,} events not shown here; every one is in the event log: `taskctx report lv --full`" in page
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page).group(1))
    assert (data["events"], data["events_shown"]) == (602, 500)
    # every error in the errors table (from the log, not the state's window of 10)
    table = page.split('id="errors-table"')[1].split("</table>")[0]
    assert table.count('<tr class="resolved">') == 150
    full = build_report(ev, full=True)
    assert len(re.findall(r'<tr data-kind="', full)) == 602 and "not shown here" not in full
    # the commands the page names carry the database it was written from
    other = build_report(ev, db="runs/other db.sqlite")
    assert (
        f"... {left:,} events not shown here; every one is in the event log: "
        "`taskctx report lv --full --db 'runs/other db.sqlite'` shows them all; "
        "`taskctx inspect lv --all --db 'runs/other db.sqlite'` lists plan and errors"
    ) in _html.unescape(other)


def test_inspect_shows_the_windows_and_all_lists_every_step_and_error(tmp_path) -> None:
    from typer.testing import CliRunner

    from context.sqlite_store import SqliteStores
    from graphs.cli import app

    db = tmp_path / "lv.sqlite"
    stores = SqliteStores(db)
    stores.events.append("lv", _long_task(150))
    stores.close()
    runner = CliRunner()
    short = runner.invoke(app, ["inspect", "lv", "--db", str(db)])
    assert short.exit_code == 0, short.output
    hint = f"`taskctx inspect lv --all --db {db}`"  # (built by command_hint: extra words, then --db)
    assert f"   s1-s130 [done] 130 steps (titles and results in the event log); {hint} lists them" in short.output
    assert (
        f"(150 errors, 150 resolved; the 140 resolved before these are in the event log: {hint} lists every one)"
        in short.output
    )
    assert "- err-1 [" not in short.output and "- err-141 [resolved: fixed in s141]" in short.output
    full = runner.invoke(app, ["inspect", "lv", "--db", str(db), "--all"])
    assert full.exit_code == 0, full.output
    assert "- err-1 [resolved: fixed in s1] step in s1: " in full.output
    assert "   s1 [done] Step 1" in full.output and "s1-s130 [done]" not in full.output


def test_inspect_shows_the_numbers_of_the_transcript_restarts(tmp_path) -> None:
    from typer.testing import CliRunner

    from context.sqlite_store import SqliteStores
    from graphs.cli import app

    def built(call: int, reset: object) -> object:
        p = {"call": call, "role": "executor", "budget": 8000, "prompt_tokens": 1000 + call, "transcript_reset": reset}
        return new_event("context.built", p | {"keep_last": 3 if reset else 0}, actor="system")

    def numbers(removed: int, **kw: object) -> dict:
        return {"reason": "cost", "removed": removed, "resent": 456, "expected_saving": 78.94, "horizon": 12} | kw

    ev = [
        new_event("task.created", {"task_id": "tr", "original_request": "Restart."}, actor="user"),
        built(1, False),
        built(2, True),  # a log written before the numbers were recorded
        built(3, numbers(1234, rule="flat")),
        built(4, False),
        built(5, numbers(2345, reason="budget", expected_saving=-12.5, horizon=4, digests=2)),
        built(6, numbers(3456, rule="openai-auto")),
    ]
    db = tmp_path / "tr.sqlite"
    stores = SqliteStores(db)
    stores.events.append("tr", [e.model_copy(update={"seq": s}) for s, e in enumerate(ev, start=1)])
    stores.close()
    lines = {
        3: "- call 3: transcript restarted (cost): removed 1,234 tokens, resent 456; expected saving 78.9 per call "
        "over 12 calls, flat pricing",
        5: "- call 5: transcript restarted (budget): removed 2,345 tokens, resent 456; expected saving -12.5 per call "
        "over 4 calls; 2 of the kept calls as digests",
        6: "- call 6: transcript restarted (cost): removed 3,456 tokens, resent 456; expected saving 78.9 per call "
        "over 12 calls, openai-auto pricing",
    }
    runner = CliRunner()
    short = runner.invoke(app, ["inspect", "tr", "--db", str(db)], env={"COLUMNS": "200"})
    assert short.exit_code == 0, short.output
    view = short.stdout.split("Model calls by role\n")[1].split("\n\n")[0].splitlines()
    assert view == [
        "- executor: 6 calls (1, 2, 3, 4, 5, 6); 6,021 prompt tokens; manifests: 0 blocks in, 0 out",
        f"executor transcript restarts: 4, the last 3 (`taskctx inspect tr --all --db {db}` lists every one):",
        lines[3],
        lines[5],
        lines[6],
    ]
    full = runner.invoke(app, ["inspect", "tr", "--db", str(db), "--all"], env={"COLUMNS": "200"})
    view = full.stdout.split("Model calls by role\n")[1].split("\n\n")[0].splitlines()
    assert view[1:] == [
        "executor transcript restarts: 4",
        "- call 2: transcript restarted (no numbers in this log)",
        lines[3],
        lines[5],
        lines[6],
    ]


def test_an_error_of_no_step_is_shown_without_one(tmp_path) -> None:
    # a graph's error (a router's bad route) belongs to no step and no call: no "in None"
    from typer.testing import CliRunner

    from context.sqlite_store import SqliteStores
    from graphs.cli import app

    db = tmp_path / "g.sqlite"
    stores = SqliteStores(db)
    stores.events.append(
        "g",
        [
            new_event("task.created", {"task_id": "g", "original_request": "Do it."}, actor="user"),
            new_event(
                "error.occurred",
                {"error_id": "err-1", "source": "graph", "message": "router 'route' sent the task to 'reveiwer'"},
                actor="system",
            ),
        ],
    )
    events = stores.events.read("g")
    stores.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", "g", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "- err-1 [open] graph: router 'route' sent the task to 'reveiwer'" in shown.output
    html = build_report(events)
    row = html[html.index('<td class="kind">err-1</td>') :].split("</tr>")[0]
    assert '<td class="kind">graph</td><td class="kind">-</td><td class="kind">-</td>' in row and "None" not in row
