"""What ``taskctx inspect`` shows of a task's model calls: the cost totals, and ``--calls``, one row per call."""

from __future__ import annotations

from rich.console import Console

from context.calls import CallTotals, ModelCall
from context.text import escape_controls

from ..costs import totals_line

__all__ = ["render_calls", "render_totals"]


def render_totals(console: Console, totals: CallTotals) -> None:
    """The ``Cost`` section: one line per role, then the task's.

    Args:
        console: Where to print.
        totals: The task's totals (:meth:`graphs.Project.model_call_totals`).
    """
    console.print("\n[bold]Cost[/bold]")
    for role, t in totals.roles.items():
        console.print(f"- {totals_line(role, t)}", markup=False)
    console.print(totals_line("task", totals.task), markup=False)


def _usd(c: ModelCall) -> str:
    if c.cost is None or c.cost.usd is None:
        return "n/a"
    return f"${c.cost.usd:.6f}" + ("*" if c.cost.estimated else "")


def render_calls(console: Console, calls: list[ModelCall]) -> None:
    """One line per model call: role, step, model, tokens, the provider's usage, latency, cost, dropped blocks.

    Args:
        console: Where to print.
        calls: The task's priced calls (:meth:`graphs.Project.model_calls`).
    """
    console.print("\n[bold]Model calls[/bold] (cost * : estimated from counted tokens)")
    for c in calls:
        u = c.usage
        used = (
            f"provider {u.input_tokens:,} in, {u.output_tokens:,} out, {u.cache_read:,} cache read, "
            f"{u.cache_creation:,} cache write"
            if u
            else f"{c.reply_tokens or 0:,} reply tokens counted"
        )
        ms = "-" if c.latency_ms is None else f"{c.latency_ms:,} ms"
        line = (
            f"- call {c.call} {c.role} (step {c.step_id or '-'}, {c.model or 'model not recorded'}): "
            f"{c.prompt_tokens:,} prompt tokens ({c.cached_prefix_tokens:,} cached prefix); {used}; {ms}; "
            f"{_usd(c)}; dropped: {', '.join(c.dropped) or '-'}"
        )
        console.print(escape_controls(line), markup=False)
