"""``taskctx report``: the HTML page of a run, checked as text and in headless Chromium.

The run: a scripted task whose test command fails once (recovery records the error and retries,
a later success resolves it), stopped after its third executor step; then a pending approval
is recorded. Tool output carries HTML/JS that must be shown as text, never run. The browser test
loads the file with ``chromium --headless --dump-dom`` and reads the DOM after the page's script
ran: the goal is shown, ``data-ready="1"`` (the script ran to its end), ``data-js-errors="0"``
and an empty ``#js-errors`` (no script error; a control page with a broken script shows that the
check can fail), and the planted script did not run. Without Chromium the browser tests skip
with the install command, unless ``TASKCTX_REQUIRE_CHROMIUM=1`` (set in .ci/run) makes that a failure.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

GOAL = "The report test suite passes on an empty input"
INJECTION = (
    '<script>document.body.dataset.pwned="1"</script></table><img src=x onerror="document.body.dataset.pwned=2">'
)


#: The file the pending approval of ``rep-2`` would write: markup and an escape sequence in it
#: must be shown as text; its last line must be shown.
CALC_PY = (
    "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
    + "</pre><script>bad()</script>\x1b[2J\nLAST = 1\n"
)


class Tools:
    """``run_tests`` fails the first time, then passes; ``read_file`` returns hostile HTML."""

    def __init__(self) -> None:
        self.runs = 0

    def schemas(self) -> list[dict[str, Any]]:
        from nodes import function_schema

        return [
            function_schema("read_file", "Read a file.", {"path": {"type": "string"}}, ["path"]),
            function_schema("run_tests", "Run the tests.", {}),
        ]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        from nodes import ToolOutcome

        if tool == "read_file":
            return ToolOutcome("ok", f"<h1>page</h1>\n{INJECTION}\n", "file_read", "page.html")
        self.runs += 1
        if call_id == "t-1":
            return ToolOutcome(
                "error", "Traceback (most recent call last):\nAssertionError: empty input\n1 failed", "command"
            )
        return ToolOutcome("ok", "3 passed in 0.01s", "command")


def _model() -> Any:
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, recover, review, tool_call

    return ScriptedChatModel(
        script={
            "planner": [plan("Read the page", "Run the tests", goal=GOAL, criteria=["3 tests pass"])],
            "executor": [
                tool_call("read_file", {"path": "page.html"}, id="r-1"),
                complete("read the page", findings=["page.html holds inline markup"]),
                tool_call("run_tests", {}, id="t-1"),
                tool_call("run_tests", {}, id="t-2"),
                complete("tests pass", findings=["3 tests pass"]),
            ],
            "recovery": [recover("retry", "flaky first run; run again")],
            "reviewer": [review("approve", "ok")],
        }
    )


@pytest.fixture(scope="module")
def run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite project with one finished task (``rep-1``) and one waiting for approval (``rep-2``)."""
    from context import new_event
    from context.events import PermissionEvent
    from graphs import build_orchestrator, new_task, open_project
    from graphs.runner import run_graph

    db = tmp_path_factory.mktemp("report") / "taskctx.sqlite"
    project = open_project(db)
    g = build_orchestrator(_model(), tools=Tools(), checkpointer=project.checkpointer, stores=project.stores)
    done = run_graph(
        g, project.stores, "rep-1", new_task("Make the report tests pass.\nDo not modify tests/.", "rep-1")
    )
    assert done.state.control.status == "completed"
    assert [e.id for e in done.state.errors.resolved_errors] == ["err-1"]
    g2 = build_orchestrator(_model(), tools=Tools(), checkpointer=project.checkpointer, stores=project.stores)
    part = run_graph(g2, project.stores, "rep-2", new_task("Make the report tests pass.", "rep-2"), stop_after=1)
    assert part.stopped_early
    project.stores.events.append(
        "rep-2",
        [
            new_event(
                "permission.requested",
                PermissionEvent(
                    call_id="w-1",
                    tool="write_file",
                    arguments=json.dumps({"content": CALC_PY, "path": "calc.py"}),
                    risk="high",
                    reason="writes a file outside the step's scope",
                ),
                actor="system",
                correlation_id="rep-2",
            )
        ],
    )
    project.close()
    return db


def _cli(args: list[str]) -> Any:
    from graphs.cli.report import report_command

    app = typer.Typer()
    app.command("report")(report_command)
    app.command("noop")(lambda: None)  # two commands, so "report" is a sub-command as in taskctx
    return CliRunner().invoke(app, ["report", *args])


def test_report_page_content(run_db: Path, tmp_path: Path) -> None:
    from context import SqliteStores

    out = tmp_path / "r" / "rep-1.html"
    res = _cli(["rep-1", "--html", str(out), "--db", str(run_db)])
    assert res.exit_code == 0, res.output
    assert "report of rep-1" in res.output
    page = out.read_text(encoding="utf-8")
    stores = SqliteStores(run_db)
    events = stores.events.read("rep-1")
    calls = [e.payload for e in events if e.kind == "context.built"]
    # goal, request, timeline (one row per event), one manifest per call, chart bars per call
    assert f'<p id="goal">{GOAL}</p>' in page
    assert "Make the report tests pass.\nDo not modify tests/." in page
    assert page.count('<tr data-kind="') == len(events)
    assert page.count('<details class="manifest"') == len(calls) == 8
    assert page.count('<g class="bar"') == len(calls)
    for c in calls:
        assert f'id="call-{c["call"]}"' in page
        for b in c["blocks"]:
            assert f"<code>{html.escape(b['id'])}</code>" in page
    assert "dropped: over budget" not in page or any(not b["included"] for c in calls for b in c["blocks"])
    # errors: err-1 recorded and resolved
    assert re.search(
        r'<tr class="resolved"><td class="kind">err-1</td><td class="state">resolved: later call <span class="nw">t-2</span>',
        page,
    )
    assert "No approval pending." in page
    # hostile tool output is escaped (the summary shows as text), no external resource is referenced
    assert INJECTION not in page and html.escape(INJECTION, quote=True)[:40] in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    # the artifact store is never read: raw output appears only as the event log's summary
    raw_refs = [e.payload["raw_ref"] for e in events if e.kind == "tool.result.received"]
    assert all(r in page for r in raw_refs)


def test_report_pending_approval_and_errors(run_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep-2.html"
    assert _cli(["rep-2", "--html", str(out), "--db", str(run_db)]).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert (
        '<div class="pending" id="pending-approval"><b>Pending approval</b> (risk high, call <code>w-1</code>): '
        "writes a file outside the step&#x27;s scope"
        '<div class="approval-title"><code>write_file calc.py (1,262 bytes, 122 lines)</code></div>'
        '<pre class="approval" data-lexer="python"><span class="ln">1</span>def f0(x):\n'
    ) in page
    # the whole file, its markup escaped, the escape sequence shown as text, the last line present
    assert '<span class="ln">121</span>&lt;/pre&gt;&lt;script&gt;bad()&lt;/script&gt;\\x1b[2J\n' in page
    assert '<span class="ln">122</span>LAST = 1</pre></div>' in page
    assert "\x1b" not in page and "<script>bad()" not in page
    assert "writes a file outside the step&#x27;s scope" in page
    assert 'data-status="waiting_user"' in page


def test_report_bad_input(run_db: Path, tmp_path: Path) -> None:
    res = _cli(["nope", "--html", str(tmp_path / "x.html"), "--db", str(run_db)])
    assert res.exit_code == 2 and "no task 'nope'" in res.output and "rep-1" in res.output
    assert not (tmp_path / "x.html").exists()
    res = _cli(["rep-1", "--html", str(tmp_path / "x.html"), "--db", str(tmp_path / "missing.sqlite")])
    assert res.exit_code == 2 and "no database at" in res.output
    assert not (tmp_path / "missing.sqlite").exists()


def test_taskctx_report_command(run_db: Path, tmp_path: Path) -> None:
    """The real ``taskctx`` app runs ``report``."""
    from graphs.cli import app

    assert "report" in [c.name or c.callback.__name__ for c in app.registered_commands]
    out = tmp_path / "cli.html"
    res = CliRunner().invoke(app, ["report", "rep-1", "--db", str(run_db), "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert f'<p id="goal">{GOAL}</p>' in out.read_text(encoding="utf-8")


# ---- headless Chromium ----------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Set by .ci/run: there a missing browser is a failure, not a skip.
REQUIRE_CHROMIUM = os.environ.get("TASKCTX_REQUIRE_CHROMIUM", "") not in ("", "0", "false")


def test_chromium_present_when_required() -> None:
    if REQUIRE_CHROMIUM:
        assert CHROMIUM, "TASKCTX_REQUIRE_CHROMIUM is set but chromium is not on PATH: apt-get install -y chromium"


def _dump_dom(page: Path, profile: Path) -> tuple[str, str]:
    assert CHROMIUM, "chromium not on PATH"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
            "--disable-extensions",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _body_attrs(dom: str) -> dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


@pytest.mark.browser  # skips without Chromium (tests/conftest.py)
def test_report_in_headless_chromium(run_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep-1.html"
    assert _cli(["rep-1", "--html", str(out), "--db", str(run_db)]).exit_code == 0
    dom, log = _dump_dom(out, tmp_path / "profile")
    body = _body_attrs(dom)
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    assert body.get("data-js-errors") == "0", re.search(r'<ul id="js-errors".*?</ul>', dom, re.S).group(0)
    assert re.search(r'<ul id="js-errors" hidden="">\s*</ul>', dom)
    assert "Uncaught" not in log, log[-2000:]
    assert "data-pwned" not in dom, "script text from tool output ran"
    assert f'<p id="goal">{GOAL}</p>' in dom
    # the script filled in the summary from the embedded data (DOM after scripts, not the file)
    assert re.search(r'<span id="js-summary">8 model calls, [\d,]+ prompt tokens in all</span>', dom)
    assert '<span id="shown">all shown</span>' in dom


@pytest.mark.browser  # skips without Chromium (tests/conftest.py)
def test_headless_check_catches_script_errors(run_db: Path, tmp_path: Path) -> None:
    """Control: a page whose script throws is reported as such (the check above can fail)."""
    out = tmp_path / "rep-1.html"
    assert _cli(["rep-1", "--html", str(out), "--db", str(run_db)]).exit_code == 0
    broken = tmp_path / "broken.html"
    broken.write_text(
        out.read_text(encoding="utf-8").replace('id="filter"', 'id="filter-renamed"', 1), encoding="utf-8"
    )
    dom, _ = _dump_dom(broken, tmp_path / "profile2")
    body = _body_attrs(dom)
    assert body.get("data-ready") == "1" and body.get("data-js-errors") == "1"
    assert re.search(r'<ul id="js-errors"><li>[^<]*(null|filter)[^<]*</li></ul>', dom), dom[:3000]


# ---- layout at 1400 and 800 px (headless Chromium) ----------------------------------------------
#: Appended to a copy of the page: measures the laid-out page and writes the facts as JSON into
#: ``<pre id="layout">``. Words: runs of characters other than space, "-", "/" and "|" (where a
#: line may break: hyphens, paths, patterns) of at most 30 chars in table cells outside ``<pre>``
#: (longer runs are refs and hashes, which may break anywhere); a word is broken when its glyphs
#: lie on more than one line.
_LAYOUT_JS = r"""<script>window.addEventListener("load",function(){
var broken=[],words=0;
document.querySelectorAll("td, th").forEach(function(cell){
 var w=document.createTreeWalker(cell,NodeFilter.SHOW_TEXT,null);var n;
 while((n=w.nextNode())){
  if(n.parentElement.closest("pre"))continue;
  var re=/[^\s\/|-]+/g,m;
  while((m=re.exec(n.data))){
   if(m[0].length>30)continue;
   var r=document.createRange();r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);
   var tops={};Array.prototype.forEach.call(r.getClientRects(),function(x){if(x.width>0)tops[Math.round(x.top)]=1;});
   var k=Object.keys(tops).length;if(k)words++;if(k>1)broken.push(m[0]);
  }
 }
});
var hyph=[];
document.querySelectorAll("td.args code, td.text").forEach(function(cell){
 var w=document.createTreeWalker(cell,NodeFilter.SHOW_TEXT,null);var n;
 while((n=w.nextNode())){
  var re=/[^\s\/|]*-[^\s\/|]*/g,m;
  while((m=re.exec(n.data))){
   if(m[0].length>30||m[0]==="-")continue;
   var r=document.createRange();r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);
   var tops={};Array.prototype.forEach.call(r.getClientRects(),function(x){if(x.width>0)tops[Math.round(x.top)]=1;});
   if(Object.keys(tops).length>1)hyph.push(m[0]);
  }
 }
});
var errTable=document.querySelector("#errors-table");
var errBox=errTable?errTable.parentElement:null;
var lineH=function(td){var r=document.createRange();r.selectNodeContents(td);var tops={};
 Array.prototype.forEach.call(r.getClientRects(),function(x){if(x.width>0)tops[Math.round(x.top)]=1;});
 return Object.keys(tops).length;};
var stateLines=errTable?Math.max.apply(null,Array.prototype.map.call(errTable.querySelectorAll("td.state"),lineH)):0;
var ticks=Array.prototype.map.call(document.querySelectorAll("#token-chart .xtick text"),function(t){
 var b=t.getBoundingClientRect();return {label:t.textContent,left:b.left,right:b.right,width:b.width};});
var overlap=ticks.some(function(t,i){return i>0&&t.left<ticks[i-1].right;});
var bud=document.querySelector("#token-chart path.budget").getBBox();
var axis=document.querySelector("#token-chart line.x-axis");
var data=JSON.parse(document.getElementById("report-data").textContent);
var count=(document.body.innerText.match(new RegExp("\\b"+data.events+" events\\b","g"))||[]).length;
var pre=document.createElement("pre");pre.id="layout";
pre.textContent=JSON.stringify({words:words,broken:broken,ticks:ticks.map(function(t){return t.label;}),
 tick_overlap:overlap,tick_width:Math.min.apply(null,ticks.map(function(t){return t.width;}).concat([1e9])),
 budget:[bud.x,bud.x+bud.width],axis:[axis.x1.baseVal.value,axis.x2.baseVal.value],
 event_count_shown:count,page_overflow:document.documentElement.scrollWidth-window.innerWidth,
 hyphen_broken:hyph,errors_overflow:errBox?errBox.scrollWidth-errBox.clientWidth:null,state_lines:stateLines});
document.body.appendChild(pre);});</script>"""


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of ``taskctx demo --approve-all`` (61 events: approvals with patches, an error
    with a long message, long refs)."""
    from graphs.cli import app

    d = tmp_path_factory.mktemp("demo-report")
    r = CliRunner().invoke(
        app, ["demo", "--approve-all", "--db", str(d / "t.sqlite"), "--out", str(d / "runs"), "--task-id", "demo-1"]
    )
    assert r.exit_code == 0, r.output
    out = d / "demo-1.html"
    assert _cli(["demo-1", "--html", str(out), "--db", str(d / "t.sqlite")]).exit_code == 0
    return out


def _layout(page: Path, width: int, profile: Path, css: str = "") -> dict[str, Any]:
    probe = page.with_name(f"{page.stem}-{width}{'-css' if css else ''}.html")
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", f"<style>{css}</style>{_LAYOUT_JS}</body>"), encoding="utf-8")
    assert CHROMIUM, "chromium not on PATH"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},2000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="layout">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    return json.loads(html.unescape(m.group(1)))


@pytest.mark.browser  # skips without Chromium (tests/conftest.py)
@pytest.mark.parametrize("width", [1400, 800])
def test_report_layout_in_headless_chromium(demo_report: Path, tmp_path: Path, width: int) -> None:
    """At 1400 and 800 px: no word in a table cell wraps inside itself, the chart has x tick labels
    (call numbers, not overlapping), the budget line spans the plot (the x axis), the event count
    appears once, and the page itself does not scroll sideways (wide tables scroll in their box)."""
    lay = _layout(demo_report, width, tmp_path / "profile")
    assert lay["words"] > 500
    assert lay["broken"] == []
    assert lay["ticks"] == [str(i) for i in range(2, 17, 2)]  # 16 calls: a tick every 2
    assert not lay["tick_overlap"] and lay["tick_width"] > 0
    assert lay["budget"] == lay["axis"] == [56, 56 + 480]
    assert lay["event_count_shown"] == 1
    assert lay["page_overflow"] <= 0
    # hyphenated arguments (``-k``, ``--db``) never break at the hyphen; the Errors table fits its box
    # (its message wraps, not clipped behind a scroll) and no state cell wraps to more than 3 lines;
    assert lay["hyphen_broken"] == []
    assert lay["errors_overflow"] == 0
    assert 1 <= lay["state_lines"] <= 3


@pytest.mark.browser  # skips without Chromium (tests/conftest.py)
def test_layout_check_catches_words_broken_mid_way(demo_report: Path, tmp_path: Path) -> None:
    """Control: with the old cell style (break anywhere, no scrolling box) words break at 800 px."""
    css = "td{overflow-wrap:anywhere!important;white-space:normal!important}td.text{min-width:0!important}"
    lay = _layout(demo_report, 800, tmp_path / "profile", css)
    assert "permission.requested" in lay["broken"] or "tool.result.received" in lay["broken"], lay["broken"]


#: Every character that must never reach the page raw: bidi embeddings/overrides and isolates,
#: and the C0 controls other than newline and tab.
_RAW_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\x00-\x08\x0b-\x1f]")


def test_control_and_bidi_characters_never_reach_the_page_raw() -> None:
    """The timeline's ``tool.called`` summary used to carry a raw U+202E; every text sink of the
    page now escapes them (the approval block and the tool-call table always did)."""
    from context import new_event
    from context.events import PermissionEvent, TaskCreated, ToolCalled, ToolResultReceived
    from graphs.report import build_report

    bad = "a\u202eb\u202ac\u2066d\u2069e\x1b[2Jf\x07g\x00h\rk"
    args = json.dumps({"argv": ["ls", f"-l{bad}"], "path": f"x{bad}.txt"}, ensure_ascii=False)
    events = [
        new_event("task.created", TaskCreated(task_id="t1", original_request=f"list {bad}"), actor="user"),
        new_event("tool.called", ToolCalled(call_id="c1", tool="run_command", arguments=args), actor="agent"),
        new_event(
            "tool.result.received",
            ToolResultReceived(call_id="c1", result_summary=f"out {bad}\nline\ttwo"),
            actor="tool",
        ),
        new_event(
            "permission.requested",
            PermissionEvent(call_id="c1", tool="run_command", arguments=args, risk="high", reason=f"r {bad}"),
            actor="system",
        ),
    ]
    page = build_report([e.model_copy(update={"seq": i}) for i, e in enumerate(events, 1)])
    assert _RAW_CONTROLS.findall(page) == []
    # shown escaped, in the timeline too
    timeline = page[page.index('<table id="timeline"') :]
    row = re.search(r'<tr data-kind="tool.called".*?</tr>', timeline)
    assert row is not None
    assert "a\\u202eb\\u202ac\\u2066d\\u2069e\\u001b[2Jf\\u0007g\\u0000h\\rk" in row.group()
    assert "\n" in page and "line\ttwo" in page  # newline and tab are kept


def test_round_y_ticks_and_the_goal_in_the_timeline() -> None:
    """A budget of 4,138 used to give y ticks 1,034 / 2,069 / ...; a request that opens with an
    ``<uploaded_files>`` preamble used to show that in the timeline's ``task.created`` row."""
    from context import new_event
    from context.events import TaskCreated
    from graphs.report import build_report, token_chart_svg

    calls = [
        {"call": i, "role": "executor", "budget": 4_138, "prompt_tokens": 1_500 + i, "cached_prefix_tokens": 900}
        for i in range(1, 4)
    ]
    svg = token_chart_svg(calls)
    labels = re.findall(r'text-anchor="end" font-size="10">([\d,]+)</text>', svg)
    assert labels == ["0", "1,000", "2,000", "3,000", "4,000"]
    request = (
        "<uploaded_files>\n/workspace/ponyc\n</uploaded_files>\nI've uploaded a C code repository in the "
        "directory ponyc. Consider the following issue description:\n\n<issue_description>\n"
        "Incorrect aliasing of iso when using match\nI don't think a field should be consumable\n"
        "</issue_description>\n"
    )
    page = build_report([new_event("task.created", TaskCreated(task_id="t1", original_request=request), actor="user")])
    row = re.search(r'<tr data-kind="task.created".*?</tr>', page)
    assert row is not None
    assert row.group().endswith('<td class="text">Incorrect aliasing of iso when using match</td></tr>')
