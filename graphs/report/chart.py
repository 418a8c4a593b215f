"""The report's token chart: prompt tokens per model call as an inline SVG bar chart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .approval import html_text as _e

__all__ = ["CUSTOM_ROLE_COLORS", "ROLE_COLORS", "role_colors", "token_chart_svg"]

ROLE_COLORS = {"planner": "#6f42c1", "executor": "#1f77b4", "reviewer": "#2ca02c", "recovery": "#d62728"}


#: Colours of custom roles, in the order they first call a model (then grey).
CUSTOM_ROLE_COLORS = ("#ff7f0e", "#17becf", "#bcbd22", "#e377c2", "#8c564b")


_OTHER_COLOR = "#7f7f7f"


def role_colors(calls: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Role -> bar colour for the roles of ``calls``.

    The built-in roles' :data:`ROLE_COLORS` first, then each custom role in the order of its first
    call, from :data:`CUSTOM_ROLE_COLORS` (grey once they run out).

    Args:
        calls: The ``context.built`` payloads of the run.

    Returns:
        Role -> CSS colour.
    """
    seen = list(dict.fromkeys(str(c["role"]) for c in calls))
    out = {r: col for r, col in ROLE_COLORS.items() if r in seen}
    custom = [r for r in seen if r not in ROLE_COLORS]
    for i, r in enumerate(custom):
        out[r] = CUSTOM_ROLE_COLORS[i] if i < len(CUSTOM_ROLE_COLORS) else _OTHER_COLOR
    return out


def _tick_step(n: int, most: int = 15) -> int:
    """The smallest of 1, 2, 5, 10, 20, 25, 50, 100, ... with at most ``most`` multiples in 1..``n``.

    The x labels of ``n`` calls.
    """
    k = 0
    while True:
        for m in (1, 2, 5, 10, 20, 25, 50):
            step = m * 10**k
            if n // step <= most:
                return step
        k += 2


def _y_ticks(top: float, most: int = 5) -> list[int]:
    """Round y tick values from 0 up to ``top``.

    Multiples of the smallest step 1, 2, 2.5 or 5 times a power of ten that gives at most ``most``
    ticks above 0.
    """
    k = 10 ** max(0, math.floor(math.log10(max(top, 1))) - 1)
    while True:
        for m in (1, 2, 2.5, 5):
            step = m * k
            if step >= 1 and top // step <= most and float(step).is_integer():
                return [int(i * step) for i in range(int(top // step) + 1)]
        k *= 10


@dataclass(frozen=True)
class _Frame:
    """The token chart's geometry (pixels): the plot's left and top edges, size and bar width."""

    left: int
    top: int
    plot_w: int
    plot_h: int
    #: Tokens at the top of the plot.
    top_val: float
    n: int

    @property
    def right(self) -> int:
        """The plot's right edge."""
        return self.left + self.plot_w

    @property
    def bw(self) -> float:
        """A bar's width: the bars fill the plot."""
        return self.plot_w / self.n  # the bars fill the plot, left..right

    @property
    def gap(self) -> float:
        """The gap between two bars."""
        return min(2.0, self.bw / 5)

    def y(self, v: float) -> float:
        """The y pixel of ``v`` tokens."""
        return self.top + self.plot_h * (1 - v / self.top_val)


def _bar(f: _Frame, i: int, c: dict[str, Any], color: str) -> str:
    """Call ``c`` (the ``i``-th) as its bar: prompt tokens, the cached prefix darker, a tooltip."""
    x, bw, gap, y = f.left + i * f.bw, f.bw, f.gap, f.y
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
    return (
        f'<g class="bar" data-call="{c["call"]}" data-role="{_e(c["role"])}"><title>{_e(tip)}</title>'
        f'<rect x="{x + gap / 2:.1f}" y="{y(pt):.1f}" width="{bw - gap:.1f}" height="{y(0) - y(pt):.1f}" fill="{color}" '
        f'fill-opacity="0.45"/>'
        f'<rect x="{x + gap / 2:.1f}" y="{y(cp):.1f}" width="{bw - gap:.1f}" height="{y(0) - y(cp):.1f}" fill="{color}"/>'
        + (
            # the provider's cache_read beside the predicted cached prefix: a black tick
            f'<line class="provider-cache" x1="{x + gap / 2:.1f}" x2="{x + bw - gap / 2:.1f}" '
            f'y1="{y(u["cache_read"]):.1f}" y2="{y(u["cache_read"]):.1f}" stroke="#000" stroke-width="2"/>'
            if u
            else ""
        )
        + "</g>"
    )


def _budget_path(f: _Frame, calls: Sequence[dict[str, Any]]) -> str:
    """The budget: one path from the plot's left edge to its right edge, stepping where it changed."""
    path = []
    for i, c in enumerate(calls):
        yy = f"{f.y(c['budget']):.1f}"
        x0 = f.left + i * f.bw
        path.append(f"M{x0:.1f},{yy}" if i == 0 else f"L{x0:.1f},{yy}")
        if i + 1 < f.n and calls[i + 1]["budget"] != c["budget"]:
            path.append(f"L{x0 + f.bw:.1f},{yy}")
    path.append(f"L{f.right},{f.y(calls[-1]['budget']):.1f}")
    return f'<path class="budget" d="{" ".join(path)}" fill="none" stroke="#333" stroke-dasharray="4,3"/>'


def _x_axis(f: _Frame, calls: Sequence[dict[str, Any]]) -> list[str]:
    """The x axis and its ticks at the call numbers :func:`_tick_step` picks."""
    base = f.y(0)
    parts = [f'<line class="x-axis" x1="{f.left}" x2="{f.right}" y1="{base:.1f}" y2="{base:.1f}" stroke="#333"/>']
    step = _tick_step(f.n)
    ticks = [i for i, c in enumerate(calls) if c["call"] % step == 0]  # indexes of labelled calls
    for i in ticks:
        cx = f.left + i * f.bw + f.bw / 2
        parts.append(
            f'<g class="xtick"><line x1="{cx:.1f}" x2="{cx:.1f}" y1="{base:.1f}" y2="{base + 4:.1f}" stroke="#333"/>'
            f'<text x="{cx:.1f}" y="{base + 15:.1f}" text-anchor="middle" font-size="10">{calls[i]["call"]}</text></g>'
        )
    return parts


def token_chart_svg(calls: Sequence[dict[str, Any]], *, height: int = 240) -> str:
    """An inline SVG bar chart of prompt tokens per model call (a note when there is none).

    One bar per model call (prompt tokens; the cached prefix is the darker lower part), coloured
    by role (:func:`role_colors`: custom roles get colours of their own and a legend entry); the
    budget as one dashed line across the whole plot (a step where a call's budget changed); x
    ticks at the call numbers that are multiples of 1, 2, 5, 10, 20, 25, 50, ... (the smallest
    giving at most 15 labels), y grid at round values (:func:`_y_ticks`). The SVG scales down to
    the page width (``viewBox``).

    Args:
        calls: The ``context.built`` payloads of the run, in order (``call``, ``role``,
            ``prompt_tokens``, ``cached_prefix_tokens``, ``budget``; ``usage`` when the provider
            reported it).
        height: The SVG's height in pixels.

    Returns:
        The chart and its legend as HTML.
    """
    if not calls:
        return '<p class="muted">No model call recorded yet.</p>'
    n = len(calls)
    top, bottom = 12, 44
    plot_w = max(480, min(900, n * 28), n * 4)  # wider than 900 px (it scrolls) only past 225 calls
    top_val = max(max(c["budget"] for c in calls), max(c["prompt_tokens"] for c in calls), 1)
    f = _Frame(left=56, top=top, plot_w=plot_w, plot_h=height - top - bottom, top_val=top_val, n=n)
    left, right, plot_h = f.left, f.right, f.plot_h
    width = right + 16
    colors = role_colors(calls)
    parts = [
        f'<svg id="token-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="prompt tokens per model call">'
    ]
    for v in _y_ticks(top_val):
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{f.y(v):.1f}" y2="{f.y(v):.1f}" stroke="#e5e5e5"/>'
            f'<text x="{left - 6}" y="{f.y(v) + 4:.1f}" text-anchor="end" font-size="10">{int(v):,}</text>'
        )
    parts += [_bar(f, i, c, colors[str(c["role"])]) for i, c in enumerate(calls)]
    parts.append(_budget_path(f, calls))
    parts += _x_axis(f, calls)
    parts.append(
        f'<text x="{(left + right) / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">model call</text>'
        f'<text x="12" y="{top + plot_h / 2:.0f}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.0f})">prompt tokens</text></svg>'
    )
    legend = " ".join(
        f'<span class="swatch" style="background:{col}"></span>{_e(role)}' for role, col in colors.items()
    )
    provider = " · black tick: the provider's cache read" if any(c.get("usage") for c in calls) else ""
    return (
        '<div class="chart">'
        + "".join(parts)
        + f'</div><p class="legend">{legend} · darker: cached prefix{provider} · dashed: budget</p>'
    )
