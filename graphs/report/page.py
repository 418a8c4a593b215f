"""The HTML report of a run (``taskctx report TASK_ID --html FILE``): one static page.

The page is built from the task's event log only (never from the artifact store, so raw tool
output and the prompts' text stay out of it; refs are shown as text): the goal and the request,
a prompt-token chart (inline SVG: prompt tokens per model call, the cached prefix shaded, the
budget as a line), the plan, pending approvals, errors (open and resolved), each model call's
manifest (every block in or out, why, its tokens), the tool calls with their recorded (compressed)
results and the event timeline. One self-contained
file: no external script, style sheet or font. Its inline script adds a filter to the timeline
and sets ``document.body.dataset.ready = "1"``; a script error is caught and listed in the page
(``#js-errors``, ``data-js-errors`` on ``<body>``), so a headless browser can check both.

``build_report(events)`` returns the HTML; ``write_report(stores, task_id, path)`` writes it
(:mod:`graphs.report.command` is the typer command, registered by the CLI as ``report``).
"""

from __future__ import annotations

import html as _html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from context import Event, TaskContext, UnknownTaskError, replay, summarize_event

__all__ = ["ROLE_COLORS", "build_report", "token_chart_svg", "write_report"]

ROLE_COLORS = {"planner": "#6f42c1", "executor": "#1f77b4", "reviewer": "#2ca02c", "recovery": "#d62728"}
_OTHER_COLOR = "#7f7f7f"


def _e(x: Any) -> str:
    return _html.escape("" if x is None else str(x), quote=True)


def _calls(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [dict(e.payload, seq=e.seq, timestamp=e.timestamp) for e in events if e.kind == "context.built"]


def token_chart_svg(calls: Sequence[dict[str, Any]], *, height: int = 220) -> str:
    """An inline SVG bar chart: one bar per model call (prompt tokens; the cached prefix is the
    darker lower part), coloured by role, the budget as a dashed line. Empty text if no calls."""
    if not calls:
        return '<p class="muted">No model call recorded yet.</p>'
    n = len(calls)
    bw = max(4, min(28, 900 // n))
    left, top, bottom = 56, 12, 28
    width = left + max(n * bw, 480) + 16
    top_val = max(max(c["budget"] for c in calls), max(c["prompt_tokens"] for c in calls), 1)
    plot_h = height - top - bottom

    def y(v: float) -> float:
        return top + plot_h * (1 - v / top_val)

    parts = [
        f'<svg id="token-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="prompt tokens per model call">'
    ]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        v = top_val * frac
        parts.append(
            f'<line x1="{left}" x2="{width - 8}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>'
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{int(v):,}</text>'
        )
    for i, c in enumerate(calls):
        x = left + i * bw
        color = ROLE_COLORS.get(c["role"], _OTHER_COLOR)
        pt, cp = c["prompt_tokens"], min(c["cached_prefix_tokens"], c["prompt_tokens"])
        tip = (
            f"call {c['call']} {c['role']} step {c.get('step_id') or '-'}: {pt} prompt tokens, "
            f"{cp} cached prefix, budget {c['budget']}"
            + (" (transcript restarted)" if c.get("transcript_reset") else "")
            + (
                f"; provider: {u['input_tokens']} input tokens ({u['input_tokens'] - pt:+d} vs counted), "
                f"{u['cache_read']} cache read"
                if (u := c.get("usage"))
                else ""
            )
        )
        parts.append(
            f'<g class="bar" data-call="{c["call"]}" data-role="{_e(c["role"])}"><title>{_e(tip)}</title>'
            f'<rect x="{x + 1}" y="{y(pt):.1f}" width="{bw - 2}" height="{y(0) - y(pt):.1f}" fill="{color}" '
            f'fill-opacity="0.45"/>'
            f'<rect x="{x + 1}" y="{y(cp):.1f}" width="{bw - 2}" height="{y(0) - y(cp):.1f}" fill="{color}"/>'
            + (
                # the provider's cache_read beside the predicted cached prefix: a black tick
                f'<line class="provider-cache" x1="{x + 1}" x2="{x + bw - 1}" y1="{y(u["cache_read"]):.1f}" '
                f'y2="{y(u["cache_read"]):.1f}" stroke="#000" stroke-width="2"/>'
                if u
                else ""
            )
            + "</g>"
        )
        b = c["budget"]
        parts.append(
            f'<line class="budget" x1="{x}" x2="{x + bw}" y1="{y(b):.1f}" y2="{y(b):.1f}" stroke="#333" '
            f'stroke-dasharray="3,2"/>'
        )
    parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#333"/>')
    parts.append(f'<text x="{left}" y="{height - 10}" font-size="10">model call 1 … {n}</text></svg>')
    legend = " ".join(
        f'<span class="swatch" style="background:{col}"></span>{_e(role)}'
        for role, col in ROLE_COLORS.items()
        if any(c["role"] == role for c in calls)
    )
    provider = " · black tick: the provider's cache read" if any(c.get("usage") for c in calls) else ""
    return "".join(parts) + f'<p class="legend">{legend} · darker: cached prefix{provider} · dashed: budget</p>'


def _list(items: Sequence[str], empty: str = "(none)") -> str:
    if not items:
        return f'<p class="muted">{_e(empty)}</p>'
    return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _approvals(ctx: TaskContext, events: Sequence[Event]) -> str:
    a = ctx.control.pending_approval
    out = []
    if a is not None:
        out.append(
            f'<div class="pending" id="pending-approval"><b>Pending approval</b>: <code>{_e(a.tool)}</code> '
            f"{_e(a.arguments)} (risk {_e(a.risk)}, call {_e(a.call_id)})<br>{_e(a.reason)}</div>"
        )
    else:
        out.append('<p class="muted" id="pending-approval">No approval pending.</p>')
    hist = [e for e in events if e.kind.startswith("permission.")]
    if hist:
        out.append(
            "<table><tr><th>seq</th><th>event</th><th>tool</th><th>call</th><th>reason</th></tr>"
            + "".join(
                f"<tr><td>{e.seq}</td><td>{_e(e.kind)}</td><td>{_e(e.payload.get('tool'))}</td>"
                f"<td>{_e(e.payload.get('call_id'))}</td><td>{_e(e.payload.get('reason'))}</td></tr>"
                for e in hist
            )
            + "</table>"
        )
    return "".join(out)


def _errors(ctx: TaskContext, events: Sequence[Event]) -> str:
    resolved = {r.id: r for r in ctx.errors.resolved_errors}
    rows = []
    for err in ctx.errors.error_history:
        r = resolved.get(err.id)
        state = f"resolved: {r.resolution}" if r else "open"
        rows.append(
            f'<tr class="{"resolved" if r else "open"}"><td>{_e(err.id)}</td><td>{_e(state)}</td>'
            f"<td>{_e(err.source)}</td><td>{_e(err.step_id)}</td><td>{_e(err.call_id)}</td>"
            f"<td>{_e(err.message)}</td></tr>"
        )
    failed = [e for e in events if e.kind == "task.completed" and e.payload.get("status") == "failed"]
    out = []
    if rows:
        out.append(
            "<table><tr><th>id</th><th>state</th><th>source</th><th>step</th><th>call</th><th>message</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    else:
        out.append('<p class="muted">No error recorded.</p>')
    for e in failed:
        out.append(f'<p class="open">task failed: {_e(e.payload.get("summary"))}</p>')
    return "".join(out)


def _manifests(calls: Sequence[dict[str, Any]]) -> str:
    if not calls:
        return '<p class="muted">No model call recorded yet.</p>'
    out = []
    for c in calls:
        blocks = c.get("blocks") or []
        rows = "".join(
            f'<tr class="{"in" if b["included"] else "out"}"><td><code>{_e(b["id"])}</code></td><td>{_e(b["layer"])}</td>'
            f'<td>{_e(b["kind"])}</td><td>{_e(b["trust"])}</td><td>{_e(b["priority"])}</td><td class="num">{b["tokens"]}</td>'
            f"<td>{'in' if b['included'] else 'out'}{' (compressed)' if b.get('compressed') else ''}</td>"
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
            f'<p class="muted">prompt as sent: <code>{_e(c.get("prompt_ref") or "-")}</code></p>'
            "<table><tr><th>block</th><th>layer</th><th>kind</th><th>trust</th><th>priority</th><th>tokens</th>"
            f"<th>in/out</th><th>why</th></tr>{rows}</table></details>"
        )
    return "".join(out)


def _tool_calls(events: Sequence[Event], limit: int = 2000) -> str:
    """Each tool call with its result summary as recorded (compressed; the raw output stays in
    the artifact store, named by its ref)."""
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
            f'<tr data-call-id="{_e(p["call_id"])}"><td><code>{_e(p["call_id"])}</code></td><td>{_e(p.get("step_id"))}</td>'
            f"<td><code>{_e(p['tool'])}</code> {_e(p['arguments'])}</td><td>{_e(r.get('status', 'pending'))}"
            f"{' (compressed)' if r.get('compressed') else ''}</td><td><pre>{_e(summary)}</pre>"
            f'<span class="muted">{_e(r.get("raw_ref") or "")}{size}'
            "</span></td></tr>"
        )
    if not rows:
        return '<p class="muted">No tool call recorded.</p>'
    return (
        '<table id="tool-calls"><tr><th>call</th><th>step</th><th>tool and arguments</th><th>status</th>'
        f"<th>result (as it enters prompts) and raw ref</th></tr>{''.join(rows)}</table>"
    )


def _timeline(events: Sequence[Event]) -> str:
    rows = "".join(
        f'<tr data-kind="{_e(e.kind)}" data-actor="{_e(e.actor)}"><td class="num">{e.seq}</td><td>{_e(e.timestamp)}</td>'
        f"<td>{_e(e.actor)}</td><td><code>{_e(e.kind)}</code></td><td>{_e(summarize_event(e))}</td></tr>"
        for e in events
    )
    return (
        '<p><label>filter <input id="filter" type="search" placeholder="kind, actor or text"></label> '
        '<span id="shown"></span></p>'
        '<table id="timeline"><thead><tr><th>seq</th><th>time (UTC)</th><th>actor</th><th>kind</th><th>summary</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:8px 0} td,th{border-bottom:1px solid #eee;padding:3px 6px;
text-align:left;vertical-align:top} th{background:#f6f6f6} .num{text-align:right} .muted{color:#777}
tr.out{color:#999} tr.open td,.open{color:#b00020} tr.resolved td{color:#2b7a2b} pre{white-space:pre-wrap;
background:#f8f8f8;padding:8px;border:1px solid #eee} .pending{background:#fff4ce;padding:8px;border:1px solid #e0c060}
.swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px} details{margin:4px 0}
summary{cursor:pointer} #js-errors{color:#b00020} .status{font-weight:bold}
td pre{max-height:18em;overflow:auto;margin:0 0 4px} td{overflow-wrap:anywhere} #tool-calls td:last-child{max-width:680px}
"""

_HEAD_JS = """window.__reportErrors=[];window.addEventListener("error",function(e){
window.__reportErrors.push(String(e.message||e.error||e));});"""

_BODY_JS = """(function(){
function fail(m){var ul=document.getElementById("js-errors");var li=document.createElement("li");
li.textContent=m;ul.appendChild(li);ul.hidden=false;document.body.dataset.jsErrors=String(ul.children.length);}
try{
 var rows=Array.prototype.slice.call(document.querySelectorAll("#timeline tbody tr"));
 var shown=document.getElementById("shown");
 function apply(){var q=document.getElementById("filter").value.toLowerCase();var n=0;
  rows.forEach(function(r){var hit=!q||r.textContent.toLowerCase().indexOf(q)>=0;r.hidden=!hit;if(hit)n++;});
  shown.textContent=n+" of "+rows.length+" events";}
 document.getElementById("filter").addEventListener("input",apply);apply();
 var data=JSON.parse(document.getElementById("report-data").textContent);
 if(data.events!==rows.length){throw new Error("timeline has "+rows.length+" rows, log has "+data.events);}
 if(data.calls!==document.querySelectorAll("details.manifest").length){throw new Error("manifest count mismatch");}
 document.getElementById("js-summary").textContent=data.events+" events, "+data.calls+" model calls, "
  +data.prompt_tokens+" prompt tokens in all";
}catch(e){fail(String(e&&e.message||e));}
(window.__reportErrors||[]).forEach(fail);
document.body.dataset.jsErrors=String(document.getElementById("js-errors").children.length);
document.body.dataset.ready="1";
})();"""


def build_report(events: Sequence[Event], *, title: str | None = None) -> str:
    """The HTML page of a task's run from its event log (see module doc)."""
    if not events:
        raise UnknownTaskError("no events for this task; nothing to report")
    ctx = replay(events)
    ident = ctx.identity
    calls = _calls(events)
    kinds = Counter(e.kind for e in events)
    roles = Counter(c["role"] for c in calls)
    total_prompt = sum(c["prompt_tokens"] for c in calls)
    total_cached = sum(c["cached_prefix_tokens"] for c in calls)
    goal = ident.interpreted_goal or (ident.original_request.splitlines() or [""])[0]
    plan_rows = "".join(
        f"<tr><td>{_e(s.id)}{' ←' if s.id == ctx.plan.current_step_id else ''}</td><td>{_e(s.status)}</td>"
        f"<td>{_e(s.title)}</td><td>{_e(', '.join(s.depends_on))}</td><td>{_e(s.expected_output)}</td></tr>"
        for s in ctx.plan.steps
    )
    findings = [f"{f.id}: {f.statement} [{', '.join(f.evidence_refs) or 'no refs'}]" for f in ctx.evidence.findings]
    data = {
        "task_id": ident.task_id,
        "events": len(events),
        "calls": len(calls),
        "prompt_tokens": total_prompt,
        "cached_prefix_tokens": total_cached,
        "status": ctx.control.status,
        "roles": dict(roles),
    }
    data_json = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    page_title = title or f"taskctx report: {ident.task_id}"
    first, last = events[0].timestamp, events[-1].timestamp
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{_e(page_title)}</title><style>{_CSS}</style><script>{_HEAD_JS}</script></head>
<body data-task-id="{_e(ident.task_id)}" data-status="{_e(ctx.control.status)}" data-ready="0">
<h1>{_e(page_title)}</h1>
<p>status <span class="status" id="status">{_e(ctx.control.status)}</span> · plan v{ctx.plan.version} ({_e(ctx.plan.status)})
 · {len(events)} events from {_e(first)} to {_e(last)} · <span id="js-summary">(script not run)</span></p>
<ul id="js-errors" hidden></ul>
<h2>Goal</h2><p id="goal">{_e(goal or "(not interpreted yet)")}</p>
<h2>Original request (verbatim)</h2><pre id="request">{_e(ident.original_request)}</pre>
<h2>Success criteria</h2>{_list(ident.success_criteria)}
<h2>Constraints</h2>{_list(ident.constraints)}
<h2>Prompt tokens per model call</h2>
<p>{len(calls)} calls ({", ".join(f"{r} {n}" for r, n in sorted(roles.items())) or "none"}); {total_prompt:,} prompt tokens,
 {total_cached:,} of them in a cached prefix ({(total_cached / total_prompt if total_prompt else 0):.1%}).</p>
{token_chart_svg(calls)}
<h2>Plan</h2>{"<table><tr><th>step</th><th>status</th><th>title</th><th>after</th><th>expected</th></tr>" + plan_rows + "</table>" if plan_rows else '<p class="muted">(no plan yet)</p>'}
<h2>Approvals</h2>{_approvals(ctx, events)}
<h2>Errors</h2>{_errors(ctx, events)}
<h2>Findings</h2>{_list(findings)}
<h2>Tool calls</h2>{_tool_calls(events)}
<h2>Manifests (one per model call)</h2>{_manifests(calls)}
<h2>Event timeline</h2>
<p class="muted">{_e(", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))}</p>
{_timeline(events)}
<script type="application/json" id="report-data">{data_json}</script>
<script>{_BODY_JS}</script>
</body></html>
"""


def write_report(stores: Any, task_id: str, path: str | Path) -> Path:
    """Write the report of ``task_id`` (from ``stores.events``) to ``path``; returns the path."""
    events = stores.events.read(task_id)
    if not events:
        known = ", ".join(stores.events.task_ids()) or "none"
        raise UnknownTaskError(f"no task {task_id!r} in this database (tasks: {known})")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(events), encoding="utf-8")
    return out
