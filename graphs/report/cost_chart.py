"""The report's cost chart: what each model call cost, by role, its cached and uncached input apart."""

from __future__ import annotations

import math
from collections.abc import Sequence

from context.calls import CallTotals, ModelCall

from .approval import html_text as _e
from .chart import role_colors

__all__ = ["cost_chart_html", "cost_parts"]

#: The colour of the output tokens' part of a bar.
OUTPUT_COLOR = "#555"


def cost_parts(c: ModelCall, dollars: bool) -> tuple[float, float, float]:
    """A call's cost as ``(uncached input, cached input, output)``.

    Args:
        c: A priced call.
        dollars: In US dollars (the call's price); else in input-token units (its prompt under the
            cache rule; no output part).

    Returns:
        The three parts (uncached includes the tokens written to the cache).
    """
    k = c.cost
    if k is None:
        return 0.0, 0.0, 0.0
    if not dollars:
        return k.units - k.units_cached, k.units_cached, 0.0
    return k.usd_uncached or 0.0, k.usd_cached or 0.0, k.usd_output or 0.0


def _ticks(top: float, most: int = 5) -> list[float]:
    """Round tick values from 0 to the first at or above ``top`` (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    k = 10 ** math.floor(math.log10(top / most))
    step = next(m * k for m in (1, 2, 2.5, 5, 10) if top / (m * k) <= most)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _label(v: float, dollars: bool) -> str:
    if not dollars:
        return f"{v:,.0f}"
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


def _bars(
    calls: Sequence[ModelCall], dollars: bool, colors: dict[str, str], x0: int, bw: float, y: object
) -> list[str]:
    out = []
    for i, c in enumerate(calls):
        unc, cached, output = cost_parts(c, dollars)
        x = x0 + i * bw
        gap = min(2.0, bw / 5)
        tip = (
            f"call {c.call} {c.role} step {c.step_id or '-'}: "
            + (f"${(c.cost.usd or 0):.6f}" if dollars and c.cost else f"{unc + cached:,.1f} input-token units")
            + (" (estimated)" if c.cost and c.cost.estimated else "")
            + f"; uncached {_label(unc, dollars)}, cached {_label(cached, dollars)}"
            + (f", output {_label(output, dollars)}" if dollars else "")
        )
        col = colors[c.role]
        parts = [f'<g class="cost-bar" data-call="{c.call}" data-role="{_e(c.role)}"><title>{_e(tip)}</title>']
        base = 0.0
        for cls, v, fill, opacity in (
            ("cached", cached, col, 1.0),
            ("uncached", unc, col, 0.45),
            ("output", output, OUTPUT_COLOR, 0.8),
        ):
            if v <= 0:
                continue
            y1, y2 = y(base + v), y(base)  # type: ignore[operator]
            parts.append(
                f'<rect class="{cls}" x="{x + gap / 2:.1f}" y="{y1:.1f}" width="{bw - gap:.1f}" '
                f'height="{y2 - y1:.1f}" fill="{fill}" fill-opacity="{opacity}"/>'
            )
            base += v
        out.append("".join(parts) + "</g>")
    return out


def cost_chart_html(calls: Sequence[ModelCall], totals: CallTotals, *, height: int = 220) -> str:
    """An inline SVG bar chart of each model call's cost, and a table of the totals per role.

    One bar per call, coloured by role (the token chart's colours): its cached input (dark), its
    uncached input (light; tokens written to the cache included) and, in US dollars, its output
    (grey). In US dollars when every call has a price; otherwise in input-token units (the bench's
    measure: the prompt under its provider's cache rule). Estimated costs (from counted tokens,
    no provider usage) are marked in the tooltip and the table.

    Args:
        calls: The run's priced calls, in order.
        totals: Their totals (:func:`context.calls.call_totals`).
        height: The SVG's height in pixels.

    Returns:
        The chart, its legend and the table as HTML.
    """
    if not calls:
        return '<p class="muted">No model call recorded yet.</p>'
    dollars = all(c.cost is not None and c.cost.usd is not None for c in calls)
    n = len(calls)
    left, top, bottom = 64, 12, 40
    plot_w = max(480, min(900, n * 28), n * 4)
    plot_h = height - top - bottom
    top_val = max(max(sum(cost_parts(c, dollars)) for c in calls), 1e-9)
    ticks = _ticks(top_val)
    top_val = ticks[-1]

    def y(v: float) -> float:
        return top + plot_h * (1 - v / top_val)

    width = left + plot_w + 16
    unit = "US dollars" if dollars else "input-token units"
    parts = [
        f'<svg id="cost-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="cost per model call, {unit}">'
    ]
    for v in ticks:
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>'
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{_label(v, dollars)}</text>'
        )
    colors = role_colors([{"role": c.role} for c in calls])
    parts += _bars(calls, dollars, colors, left, plot_w / n, y)
    every = max(1, math.ceil(n / 15))  # at most 15 call numbers under the bars
    parts += [
        f'<text class="cost-xtick" x="{left + (i + 0.5) * plot_w / n:.1f}" y="{y(0) + 14:.1f}" text-anchor="middle" '
        f'font-size="10">{c.call}</text>'
        for i, c in enumerate(calls)
        if c.call % every == 0
    ]
    parts.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#333"/>'
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle" font-size="11">model call</text>'
        f'<text x="12" y="{top + plot_h / 2:.0f}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.0f})">{unit}</text></svg>'
    )
    legend = " ".join(f'<span class="swatch" style="background:{col}"></span>{_e(r)}' for r, col in colors.items())
    legend += " · darker: cached input · lighter: uncached input" + (
        f' · <span class="swatch" style="background:{OUTPUT_COLOR}"></span>output' if dollars else ""
    )
    basis = (
        "US dollars at the price table's prices (list prices unless overridden)"
        if dollars
        else "input-token units (a cached token at the cache rule's price; no price for the model: "
        "give --prices or --priced-as for dollars)"
    )
    estimated = sum(1 for c in calls if c.cost is not None and c.cost.estimated)
    note = f"; {estimated} of {n} calls estimated from counted tokens (no provider usage)" if estimated else ""
    return (
        f'<p class="muted" id="cost-basis">{_e(basis + note)}.</p><div class="chart">'
        + "".join(parts)
        + f'</div><p class="legend">{legend}</p>'
        + _totals_table(totals, dollars)
    )


def _totals_table(totals: CallTotals, dollars: bool) -> str:
    head = "<tr><th>role</th><th>calls</th><th>prompt tokens</th><th>cached prefix</th><th>provider in / out / cache read / write</th><th>cost</th></tr>"
    rows = [head]
    for name, t in [*totals.roles.items(), ("task", totals.task)]:
        usage = (
            f"{t.input_tokens:,} / {t.output_tokens:,} / {t.cache_read:,} / {t.cache_creation:,}"
            if t.usage_calls
            else "-"
        )
        cost = (f"${t.usd:.6f}" if t.usd is not None else "n/a") if dollars else f"{t.units:,.1f} units"
        if t.estimated:
            cost += f" ({t.estimated} estimated)"
        rows.append(
            f'<tr class="cost-row" data-role="{_e(name)}"><td>{_e(name)}</td><td>{t.calls}</td>'
            f"<td>{t.prompt_tokens:,}</td><td>{t.cached_prefix_tokens:,}</td><td>{usage}</td><td>{_e(cost)}</td></tr>"
        )
    return f'<table id="cost-totals">{"".join(rows)}</table>'
