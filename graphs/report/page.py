"""The HTML report of a run (``taskctx report``): one static, self-contained page built from the event log."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from context import (
    DamagedStoreError,
    Event,
    TaskContext,
    UnknownTaskError,
    all_errors,
    all_plan_steps,
    all_reports,
    call_totals,
    model_calls,
    replay,
    summarize_event,
)
from context.freshness import stale_line
from context.lineage import NOT_RUN_KINDS, fork_status
from context.store import REPAIR_TEXT
from context.trajectory import request_goal
from context.verify import check_events

from ..costs import Prices, price_calls
from ..project import DEFAULT_DB
from .approval import approval_html, html_text, inspect_hint
from .chart import token_chart_svg
from .cost_chart import cost_chart_html
from .hints import command_hint

__all__ = ["PAGE_HEAD", "PAGE_TAIL", "build_report", "write_report"]


_e = html_text


def _wrappable(x: Any) -> str:
    """``x`` HTML-escaped, with a line-break opportunity (``<wbr>``) after each "/" and "|".

    Paths and patterns wrap between their parts rather than inside a name; a short part with a
    hyphen (``-l``, ``--db``) is kept whole (``span.nw``: browsers break after a hyphen).
    """
    out = []
    for word in re.split(r"( +)", "" if x is None else str(x)):
        parts = [p for p in re.split(r"(?<=[/|])", word) if p]
        out.append(
            "<wbr>".join(f'<span class="nw">{_e(p)}</span>' if "-" in p and len(p) <= 40 else _e(p) for p in parts)
        )
    return "".join(out)


#: A long section of the report (tool calls, manifests, timeline) shows its first ``PAGE_HEAD``
#: and last ``PAGE_TAIL`` rows and says how many are between (``taskctx report --full``: all).
PAGE_HEAD = 100
PAGE_TAIL = 400


def _paged(rows: list[str], what: str, cols: int, full: bool, hint: str) -> list[str]:
    """``rows`` cut to the first ``PAGE_HEAD`` and last ``PAGE_TAIL`` (unless ``full``).

    With one row saying how many of ``what`` are left out and where they are.
    """
    if full or len(rows) <= PAGE_HEAD + PAGE_TAIL:
        return rows
    left = len(rows) - PAGE_HEAD - PAGE_TAIL
    note = (
        f'<tr class="omitted"><td colspan="{cols}" class="muted">... {left:,} {what} not shown here '
        f"({PAGE_HEAD} first, {PAGE_TAIL} last shown); every one is in the event log: {hint}</td></tr>"
    )
    return [*rows[:PAGE_HEAD], note, *rows[-PAGE_TAIL:]]


def _calls(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [dict(e.payload, seq=e.seq, timestamp=e.timestamp) for e in events if e.kind == "context.built"]


def _list(items: Sequence[str], empty: str = "(none)") -> str:
    if not items:
        return f'<p class="muted">{_e(empty)}</p>'
    return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _approvals(ctx: TaskContext, events: Sequence[Event], db: str | Path = DEFAULT_DB) -> str:
    """The pending approval and the approval history, arguments shown in full.

    On each request and where an answer changed them; a cut view names ``inspect --json`` with
    ``db`` (:func:`.approval.inspect_hint`).
    """
    a = ctx.control.pending_approval
    task = ctx.identity.task_id
    out = []
    if a is not None:
        out.append(
            f'<div class="pending" id="pending-approval"><b>Pending approval</b> (risk {_e(a.risk)}, call '
            f"<code>{_e(a.call_id)}</code>): {_e(a.reason)}"
            + approval_html(a.tool, a.arguments, full_hint=inspect_hint(task, db))
            + "</div>"
        )
    else:
        out.append('<p class="muted" id="pending-approval">No approval pending.</p>')
    hist = [e for e in events if e.kind.startswith("permission.")]
    if hist:
        rows = []
        asked: dict[str, str] = {}
        for e in hist:
            p = e.payload
            rows.append(
                f'<tr class="perm"><td class="num">{e.seq}</td><td class="kind">{_e(e.kind)}</td>'
                f'<td class="kind">{_e(p.get("tool"))}</td><td class="kind">{_e(p.get("call_id"))}</td>'
                f"<td>{_e(p.get('reason'))}</td></tr>"
            )
            args = p.get("arguments", "{}")
            if e.kind == "permission.requested" or (p.get("call_id") in asked and asked[p.get("call_id")] != args):
                asked[p.get("call_id")] = args
                hint = f"event #{e.seq} in the run's trace.jsonl"
                rows.append(
                    f'<tr class="args"><td></td><td colspan="4">'
                    f"{approval_html(str(p.get('tool')), args, full_hint=hint)}</td></tr>"
                )
        out.append(
            '<div class="scroll"><table id="approval-history"><tr><th>seq</th><th>event</th><th>tool</th>'
            "<th>call</th><th>reason</th></tr>" + "".join(rows) + "</table></div>"
        )
    return "".join(out)


def _errors(ctx: TaskContext, events: Sequence[Event]) -> str:
    rows = []
    for err in all_errors(events):  # every error, from the log (the state keeps a window)
        r = err if err.resolution is not None else None
        state = f"resolved: {r.resolution}" if r else "open"
        rows.append(
            f'<tr class="{"resolved" if r else "open"}"><td class="kind">{_e(err.id)}</td>'
            f'<td class="state">{_wrappable(state)}</td>'
            f'<td class="kind">{_e(err.source)}</td><td class="kind">{_e(err.step_id or "-")}</td>'
            f'<td class="kind">{_e(err.call_id or "-")}</td>'
            f'<td class="text">{_wrappable(err.message)}</td></tr>'
        )
    failed = [e for e in events if e.kind == "task.completed" and e.payload.get("status") == "failed"]
    out = []
    if rows:
        out.append(
            '<div class="scroll"><table id="errors-table"><tr><th>id</th><th>state</th><th>source</th><th>step</th><th>call</th>'
            "<th>message</th></tr>" + "".join(rows) + "</table></div>"
        )
    else:
        out.append('<p class="muted">No error recorded.</p>')
    for e in failed:
        out.append(f'<p class="open">task failed: {_e(e.payload.get("summary"))}</p>')
    return "".join(out)


def _reports(events: Sequence[Event]) -> str:
    """Every role report of the log (``role.reported``, the reviewer's ``review.completed``): the role's claim."""
    rows = [
        f'<tr><td class="num">{r.seq}</td><td class="kind">{_e(r.role)}</td><td class="kind">{_e(r.kind)}</td>'
        f'<td class="kind">v{r.plan_version}{_e(" " + r.step_id) if r.step_id else ""}</td>'
        f'<td class="kind">{_e(r.verdict)}</td><td class="text">{_wrappable(r.summary)}'
        + "".join(f"<br>- {_wrappable(i)}" for i in r.items)
        + (f"<br>(and {r.items_total - len(r.items)} more items in the event)" if r.items_total > len(r.items) else "")
        + f'</td><td class="text">{_wrappable(", ".join(r.refs))}</td></tr>'
        for r in all_reports(events)
    ]
    if not rows:
        return '<p class="muted">No role reported.</p>'
    return (
        '<p class="muted">What each role reported: its claim (agent_claim), as the prompts quote it.</p>'
        '<div class="scroll"><table id="reports-table"><tr><th>seq</th><th>role</th><th>event</th><th>plan</th>'
        "<th>verdict</th><th>summary and items</th><th>refs</th></tr>" + "".join(rows) + "</table></div>"
    )


def _manifests(calls: Sequence[dict[str, Any]], full: bool = False, hint: str = "") -> str:
    if not calls:
        return '<p class="muted">No model call recorded yet.</p>'
    out = []
    skip = range(0) if full or len(calls) <= PAGE_HEAD + PAGE_TAIL else range(PAGE_HEAD, len(calls) - PAGE_TAIL)
    for n, c in enumerate(calls):
        if n in skip:
            if n == skip.start:
                out.append(
                    f'<p class="muted omitted">... the manifests of {len(skip):,} calls not shown here; every one is '
                    f"in the event log (context.built): {hint}</p>"
                )
            continue
        blocks = c.get("blocks") or []
        rows = "".join(
            f'<tr class="{"in" if b["included"] else "out"}"><td class="kind"><code>{_e(b["id"])}</code></td>'
            f'<td class="kind">{_e(b["layer"])}</td><td class="kind">{_e(b["kind"])}</td>'
            f'<td class="kind">{_e(b["trust"])}</td><td class="num">{_e(b["priority"])}</td>'
            f'<td class="num">{b["tokens"]}</td><td class="kind">{"in" if b["included"] else "out"}'
            f"{' (compressed)' if b.get('compressed') else ''}</td>"
            f"<td>{_e(b['reason'])}</td></tr>"
            for b in blocks
        )
        out.append(
            f'<details class="manifest" id="call-{c["call"]}" data-role="{_e(c["role"])}"><summary>call {c["call"]}: '
            f"<b>{_e(c['role'])}</b> step {_e(c.get('step_id') or '-')}: {c['prompt_tokens']:,} prompt tokens of "
            f"{c['budget']:,} (cached prefix {c['cached_prefix_tokens']:,}); blocks {c.get('blocks_in', 0)} in / "
            f"{c.get('blocks_out', 0)} out{' ; transcript restarted' if c.get('transcript_reset') else ''}"
            + (
                f"; provider: {u['input_tokens']:,} input tokens ({u['input_tokens'] - c['prompt_tokens']:+,} vs "
                f"counted), cache read {u['cache_read']:,}, cache write {u['cache_creation']:,}, "
                f"{u['output_tokens']:,} output"
                if (u := c.get("usage"))
                else ""
            )
            + (f"; rebuilt: {_e(c['rebuilt'])}" if c.get("rebuilt") else "")
            + "</summary>"
            f'<p class="muted">prompt as sent: <code class="ref">{_e(c.get("prompt_ref") or "-")}</code></p>'
            '<div class="scroll"><table><tr><th>block</th><th>layer</th><th>kind</th><th>trust</th><th>priority</th>'
            f"<th>tokens</th><th>in/out</th><th>why</th></tr>{rows}</table></div></details>"
        )
    return "".join(out)


def _tool_args(tool: str, arguments: str, seq: int) -> str:
    """A tool call's arguments in the tool-call table: inline JSON when short (120 chars or less).

    Else a ``<details>`` whose summary is the approval view's title and whose body is the view.
    """
    if len(arguments) <= 120:  # may wrap after a "/" or "|" (paths, patterns), not inside a name
        return f"<code>{_e(tool)}</code> <code>{_wrappable(arguments)}</code>"
    view = approval_html(tool, arguments, full_hint=f"event #{seq} in the run's trace.jsonl")
    return (
        f"<details><summary><code>{_e(tool)}</code> ({len(arguments):,} chars of arguments)</summary>{view}</details>"
    )


def _tool_calls(events: Sequence[Event], limit: int = 2000, full: bool = False, hint: str = "") -> str:
    """Each tool call with its result summary as recorded.

    Compressed; the raw output stays in the artifact store, named by its ref.
    """
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    rows = []
    for e in events:
        if e.kind != "tool.called":
            continue
        p = e.payload
        r = results.get(p["call_id"], {})
        summary = r.get("result_summary", "")
        size = f" ({r.get('raw_chars', 0):,} chars)" if r.get("raw_ref") else ""
        if len(summary) > limit:
            summary = summary[:limit] + f"\n[... {len(summary) - limit} more chars in the event log]"
        rows.append(
            f'<tr data-call-id="{_e(p["call_id"])}"><td class="kind"><code>{_e(p["call_id"])}</code></td>'
            f'<td class="kind">{_e(p.get("step_id"))}</td>'
            f'<td class="args">{_tool_args(p["tool"], p["arguments"], e.seq)}</td>'
            f"<td>{_e(r.get('status', 'pending'))}"
            f"{' (compressed)' if r.get('compressed') else ''}</td><td><pre>{_e(summary)}</pre>"
            f'<span class="muted ref">{_e(r.get("raw_ref") or "")}{size}'
            "</span></td></tr>"
        )
    if not rows:
        return '<p class="muted">No tool call recorded.</p>'
    return (
        '<div class="scroll"><table id="tool-calls"><tr><th>call</th><th>step</th><th>tool and arguments</th>'
        f"<th>status</th><th>result (as it enters prompts) and raw ref</th></tr>"
        f"{''.join(_paged(rows, 'tool calls', 5, full, hint))}</table></div>"
    )


def _summary(e: Event) -> str:
    """The timeline's summary of ``e``: :func:`context.summarize_event`.

    Except that ``task.created`` shows the request's goal (its first meaningful line).
    """
    if e.kind == "task.created":
        return request_goal(str(e.payload.get("original_request") or ""))
    return summarize_event(e)


def _timeline(events: Sequence[Event], full: bool = False, hint: str = "") -> str:
    """The event table: seq, time, actor, kind, summary; plus the filter box.

    Time of day, the full timestamp when the date is not the first event's. Paged like the other
    long sections (``full``: every event).
    """
    day = events[0].timestamp[:10] if events else ""

    def when(ts: str) -> str:
        short = ts[11:] if ts[:10] == day and len(ts) > 11 else ts
        return f'<td class="kind" title="{_e(ts)}">{_e(short)}</td>'

    shown = events if full or len(events) <= PAGE_HEAD + PAGE_TAIL else [*events[:PAGE_HEAD], *events[-PAGE_TAIL:]]
    cells = [
        f'<tr data-kind="{_e(e.kind)}" data-actor="{_e(e.actor)}"><td class="num">{e.seq}</td>'
        f'{when(e.timestamp)}<td class="kind">{_e(e.actor)}</td>'
        f'<td class="kind"><code>{_e(e.kind)}</code></td><td class="text">{_wrappable(_summary(e))}</td></tr>'
        for e in shown
    ]
    if len(shown) < len(events):
        cells.insert(
            PAGE_HEAD,
            f'<tr class="omitted"><td colspan="5" class="muted">... {len(events) - len(shown):,} events not shown '
            f"here; every one is in the event log: {hint}</td></tr>",
        )
    rows = "".join(cells)
    return (
        '<p><label>filter <input id="filter" type="search" placeholder="kind, actor or text"></label> '
        '<span id="shown"></span></p>'
        f'<div class="scroll"><table id="timeline"><thead><tr><th>seq</th><th>time (UTC, {_e(day)})</th><th>actor</th>'
        f"<th>kind</th><th>summary</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
h1{font-size:22px;margin-bottom:4px;overflow-wrap:anywhere} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.scroll{overflow-x:auto;margin:8px 0} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f6f6f6;white-space:nowrap} .num{text-align:right;white-space:nowrap} .muted{color:#777}
td.kind,.nowrap,.nw{white-space:nowrap} td.state{min-width:14em;max-width:20em} .ref{overflow-wrap:anywhere} td.text{min-width:16em;overflow-wrap:anywhere}
tr.out{color:#999} tr.open td,.open{color:#b00020} tr.resolved td{color:#2b7a2b} pre{white-space:pre-wrap;
overflow-wrap:anywhere;background:#f8f8f8;padding:8px;border:1px solid #eee}
.pending{background:#fff4ce;padding:8px;border:1px solid #e0c060}
.swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px} details{margin:4px 0}
summary{cursor:pointer} #js-errors{color:#b00020} .status{font-weight:bold}
td pre{max-height:18em;overflow:auto;margin:0 0 4px} #tool-calls td:last-child{max-width:680px;min-width:16em}
#tool-calls td.args{min-width:10em;max-width:420px;overflow-wrap:normal}
.chart{overflow-x:auto} #token-chart{max-width:100%;height:auto;display:block}
pre.approval{max-height:36em;overflow:auto;margin:4px 0} .approval-title{margin-top:6px}
.approval-note{font-weight:bold;margin:2px 0} pre.approval .ln{display:inline-block;min-width:3.5em;padding-right:1em;
text-align:right;color:#999;user-select:none} .dadd{color:#116329;background:#e6ffec} .ddel{color:#b31d28;background:#ffebe9}
.dhunk{color:#6f42c1} .dfile{font-weight:bold}
"""

_HEAD_JS = """window.__reportErrors=[];window.addEventListener("error",function(e){
window.__reportErrors.push(String(e.message||e.error||e));});"""

_BODY_JS = """(function(){
function fail(m){var ul=document.getElementById("js-errors");var li=document.createElement("li");
li.textContent=m;ul.appendChild(li);ul.hidden=false;document.body.dataset.jsErrors=String(ul.children.length);}
try{
 var rows=Array.prototype.slice.call(document.querySelectorAll("#timeline tbody tr:not(.omitted)"));
 var shown=document.getElementById("shown");
 function apply(){var q=document.getElementById("filter").value.toLowerCase();var n=0;
  rows.forEach(function(r){var hit=!q||r.textContent.toLowerCase().indexOf(q)>=0;r.hidden=!hit;if(hit)n++;});
  shown.textContent=q?n+" of "+rows.length+" match":"all shown";}
 document.getElementById("filter").addEventListener("input",apply);apply();
 var data=JSON.parse(document.getElementById("report-data").textContent);
 if(data.events_shown!==rows.length){throw new Error("timeline has "+rows.length+" rows, should show "+data.events_shown);}
 if(data.calls_shown!==document.querySelectorAll("details.manifest").length){throw new Error("manifest count mismatch");}
 document.getElementById("js-summary").textContent=data.calls+" model calls, "
  +data.prompt_tokens.toLocaleString("en")+" prompt tokens in all";
}catch(e){fail(String(e&&e.message||e));}
(window.__reportErrors||[]).forEach(fail);
document.body.dataset.jsErrors=String(document.getElementById("js-errors").children.length);
document.body.dataset.ready="1";
})();"""


def _plan(ctx: TaskContext, events: Sequence[Event]) -> str:
    """The plan table: every plan step of the log, the current one marked."""
    plan_rows = "".join(
        f'<tr><td class="kind">{_e(s.id)}{" ←" if s.id == ctx.plan.current_step_id else ""}</td>'
        f'<td class="kind">{_e(s.status)}</td>'
        f"<td>{_e(s.title)}</td><td>{_e(', '.join(s.depends_on))}</td><td>{_e(s.expected_output)}</td></tr>"
        for s in all_plan_steps(ctx, events)
    )
    if not plan_rows:
        return '<p class="muted">(no plan yet)</p>'
    head = "<tr><th>step</th><th>status</th><th>title</th><th>after</th><th>expected</th></tr>"
    return '<div class="scroll"><table>' + head + plan_rows + "</table></div>"


def _data_json(ctx: TaskContext, events: Sequence[Event], calls: list[dict[str, Any]], full: bool) -> str:
    """The page's ``#report-data`` JSON: counts, tokens, status and calls per role."""
    data = {
        "task_id": ctx.identity.task_id,
        "events": len(events),
        "calls": len(calls),
        "events_shown": len(events) if full else min(len(events), PAGE_HEAD + PAGE_TAIL),
        "calls_shown": len(calls) if full else min(len(calls), PAGE_HEAD + PAGE_TAIL),
        "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
        "cached_prefix_tokens": sum(c["cached_prefix_tokens"] for c in calls),
        "status": ctx.control.status,
        "roles": dict(Counter(c["role"] for c in calls)),
    }
    return json.dumps(data, sort_keys=True).replace("</", "<\\/")


def _cost_section(events: Sequence[Event], prices: Prices, priced_as: str | None) -> str:
    """The "Cost per model call" section: the calls priced, their chart and totals."""
    priced = price_calls(model_calls(events), prices, priced_as)
    return f"<h2>Cost per model call</h2>\n{cost_chart_html(priced, call_totals(priced))}"


def _findings(ctx: TaskContext) -> list[str]:
    """One line per finding: its statement, its refs, and its stale mark when it has one."""
    return [
        f"{f.id}: {f.statement} [{', '.join(f.evidence_refs) or 'no refs'}]"
        + (f" [{stale_line(ctx, f.id)}]" if ctx.stale(f.id) else "")
        for f in ctx.evidence.findings
    ]


def _lineage(events: Sequence[Event], children: Sequence[tuple[str, int]]) -> str:
    """The "Lineage" section: the parent and fork point of a fork, the tasks forked from it ("" : none)."""
    rows = [
        f"<li>forked from <code>{_e(e.payload['parent_task_id'])}</code> at seq {e.payload['fork_seq']}"
        + (f": {_e(e.payload['why'])}" if e.payload.get("why") else "")
        + "</li>"
        for e in events
        if e.kind == "task.forked"
    ][-1:]
    rows += [f"<li>forked into <code>{_e(c)}</code> at seq {seq}</li>" for c, seq in children]
    return f'<h2>Lineage</h2><ul id="lineage">{"".join(rows)}</ul>\n' if rows else ""


def _shown_status(ctx: TaskContext, events: Sequence[Event]) -> TaskContext:
    """``ctx`` with the status the page shows: ``forked`` for a fork not run yet (:func:`context.lineage.fork_status`)."""
    forked = max((e.seq for e in events if e.kind == "task.forked"), default=None)  # its own: the last
    if forked is None:
        return ctx
    status = fork_status(ctx.control.status, all(e.kind in NOT_RUN_KINDS for e in events if e.seq >= forked))
    return ctx.model_copy(update={"control": ctx.control.model_copy(update={"status": status})})


def build_report(
    events: Sequence[Event],
    *,
    title: str | None = None,
    full: bool = False,
    db: str | Path = DEFAULT_DB,
    prices: Prices = None,
    priced_as: str | None = None,
    children: Sequence[tuple[str, int]] = (),
) -> str:
    """The HTML page of a task's run, from its event log only.

    Never from the artifact store: raw tool output and the prompts' text stay out of it. The page:
    goal and request, the token chart, the cost chart (:func:`.cost_chart.cost_chart_html`), the
    plan, approvals, errors, findings, role reports, each model call's manifest, the tool calls and
    the event timeline; one self-contained file (no external script, style sheet or font). Its
    inline script sets ``document.body.dataset.ready = "1"`` and lists a script error in
    ``#js-errors`` (``data-js-errors`` on ``<body>``), so a headless browser can check both.

    Args:
        events: The task's event log, in order.
        title: The page's title; default from the task.
        full: Show every row of the long sections (default: the first ``PAGE_HEAD`` and last
            ``PAGE_TAIL``, and how many are left out).
        db: The database the commands the page names need (``--db`` when not the default).
        prices: The price table of the cost chart (:data:`graphs.costs.Prices`; default the list prices).
        priced_as: Price every call as this model (:func:`nodes.prices.price_call`).
        children: The tasks forked from it, ``(child id, fork seq)`` (its parent is in its log).

    Returns:
        The HTML.
    """
    if not events:
        raise UnknownTaskError("no events for this task; nothing to report")
    ctx = _shown_status(replay(events), events)
    ident = ctx.identity
    calls = _calls(events)
    kinds = Counter(e.kind for e in events)
    roles = Counter(c["role"] for c in calls)
    total_prompt = sum(c["prompt_tokens"] for c in calls)
    total_cached = sum(c["cached_prefix_tokens"] for c in calls)
    goal = ident.interpreted_goal or request_goal(ident.original_request)
    hint = (
        f"`{command_hint('report', ident.task_id, db, None, '--full')}` shows them all; "
        f"`{command_hint('inspect', ident.task_id, db, None, '--all')}` lists plan and errors"
    )
    page_title = title or f"taskctx report: {ident.task_id}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{_e(page_title)}</title><style>{_CSS}</style><script>{_HEAD_JS}</script></head>
<body data-task-id="{_e(ident.task_id)}" data-status="{_e(ctx.control.status)}" data-ready="0">
<h1>{_e(page_title)}</h1>
<p>status <span class="status" id="status">{_e(ctx.control.status)}</span> · plan v{ctx.plan.version} ({_e(ctx.plan.status)})
 · {len(events)} events from <span class="nowrap">{_e(events[0].timestamp)}</span> to <span class="nowrap">{_e(events[-1].timestamp)}</span> · <span id="js-summary">(script not run)</span></p>
<ul id="js-errors" hidden></ul>
<h2>Goal</h2><p id="goal">{_e(goal or "(not interpreted yet)")}</p>
<h2>Original request (verbatim)</h2><pre id="request">{_e(ident.original_request)}</pre>
<h2>Success criteria</h2>{_list(ident.success_criteria)}
<h2>Constraints</h2>{_list(ident.constraints)}
{_lineage(events, children)}<h2>Prompt tokens per model call</h2>
<p>{len(calls)} calls ({", ".join(f"{r} {n}" for r, n in sorted(roles.items())) or "none"}); {total_prompt:,} prompt tokens,
 {total_cached:,} of them in a cached prefix ({(total_cached / total_prompt if total_prompt else 0):.1%}).</p>
{token_chart_svg(calls)}
{_cost_section(events, prices, priced_as)}
<h2>Plan</h2>{_plan(ctx, events)}
<h2>Approvals</h2>{_approvals(ctx, events, db)}
<h2>Errors</h2>{_errors(ctx, events)}
<h2>Findings</h2>{_list(_findings(ctx))}
<h2>Role reports</h2>{_reports(events)}
<h2>Tool calls</h2>{_tool_calls(events, full=full, hint=hint)}
<h2>Manifests (one per model call)</h2>{_manifests(calls, full, hint)}
<h2>Event timeline</h2>
<p class="muted">{", ".join(f'<span class="nowrap">{_e(k)} {n}</span>' for k, n in sorted(kinds.items()))}</p>
{_timeline(events, full, hint)}
<script type="application/json" id="report-data">{_data_json(ctx, events, calls, full)}</script>
<script>{_BODY_JS}</script>
</body></html>
"""


def write_report(
    stores: Any,
    task_id: str,
    path: str | Path,
    *,
    full: bool = False,
    db: str | Path = DEFAULT_DB,
    prices: Prices = None,
    priced_as: str | None = None,
) -> Path:
    """Write the report of ``task_id`` to ``path``.

    Args:
        stores: The stores (``stores.events``).
        task_id: The task.
        path: The HTML file.
        full: Show every row (see :func:`build_report`).
        db: The database the commands the page names need.
        prices: As in :func:`build_report`.
        priced_as: As in :func:`build_report`.

    Returns:
        ``path``.

    Raises:
        DamagedStoreError: The log is damaged (:func:`context.verify.check_events`).
        UnknownTaskError: No such task.
    """
    events = stores.events.read(task_id)
    if not events:
        known = ", ".join(stores.events.task_ids()) or "none"
        raise UnknownTaskError(f"no task {task_id!r} in this database (tasks: {known})")
    found = check_events(events)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        what = f"task {task_id!r} is damaged: {found[0]}{more}; no report written"
        raise DamagedStoreError(f"{what}; {REPAIR_TEXT}", found, task_id=task_id, what=what)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    from context.lineage import children_of

    kids = children_of(stores.events, task_id)
    page = build_report(events, full=full, db=db, prices=prices, priced_as=priced_as, children=kids)
    out.write_text(page, encoding="utf-8")
    return out
