"""Views of a long task: the report pages its long sections and every item stays reachable
(``--full``); ``inspect`` shows the state's windows and ``--all`` lists every plan step and error
from the log (context.all_plan_steps, context.all_errors)."""

from __future__ import annotations

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


def test_inspect_shows_the_windows_and_all_lists_every_step_and_error(tmp_path) -> None:
    from typer.testing import CliRunner

    from context.store import SqliteStores
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
