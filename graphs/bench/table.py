"""``results.md``: the totals table, the targets (measured, never asserted) and per-trajectory tables."""

from __future__ import annotations

from nodes.pricing import HEADLINE, RULES

from .metrics import Stats
from .replays import BenchResult
from .split import LARGE_RUN, bound_markdown, halves, short_runs_markdown, split_markdown
from .strategies import CLEAR_KEEP, MASK_N, STRATEGIES, SUMMARY_CHARS
from .stress import stress_markdown

__all__ = ["markdown", "targets", "too_large_markdown"]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _table(stats: list[Stats], naive: Stats | None = None) -> list[str]:
    head = (
        "| strategy | calls | input tokens | peak prompt | cached prefix | cached share | effective cost | "
        "× naive | over budget | retention | floor | orphan tool results | restorability |"
    )
    out = [head, "|---|" + "---:|" * 12]
    for s in stats:
        ratio = f"{s.effective_cost / naive.effective_cost:.3f}" if naive and naive.effective_cost else "-"
        out.append(
            f"| {s.strategy} | {s.calls} | {s.input_tokens:,} | {s.peak_prompt_tokens:,} | "
            f"{s.cached_prefix_tokens:,} | {_pct(s.cached_share)} | {s.effective_cost:,.0f} | {ratio} | "
            f"{s.over_budget} | {_pct(s.retention)} | {_pct(s.floor)} | {s.orphans} | {_pct(s.restorability)} |"
        )
    return out


def targets(r: BenchResult) -> list[tuple[str, str, bool | None]]:
    """``(target, measured, met)`` for the bench's targets (never asserted in tests).

    Args:
        r: The bench result.

    Returns:
        One tuple per target (``met`` None when it does not apply).
    """
    return _cost_targets(r) + _quality_targets(r)


def _cost_targets(r: BenchResult) -> list[tuple[str, str, bool | None]]:
    """The targets on cost: against naive, masking and the bound, and the peak prompt."""
    T = r.totals
    tc, nv, mk = T["taskctx"], T["naive"], T["masking"]
    out: list[tuple[str, str, bool | None]] = []
    rn = tc.effective_cost / nv.effective_cost if nv.effective_cost else float("nan")
    rm = tc.effective_cost / mk.effective_cost if mk.effective_cost else float("nan")
    out.append(("effective cost ≤ 0.45× naive", f"{rn:.3f}× (executor calls only)", rn <= 0.45))
    out.append(("effective cost ≤ 0.27× masking", f"{rm:.3f}×", rm <= 0.27))
    ra = T["taskctx (all roles)"].effective_cost
    out.append(
        (
            "(same, all taskctx roles)",
            f"{ra / nv.effective_cost:.3f}× naive, {ra / mk.effective_cost:.3f}× masking",
            None,
        )
    )
    out.append(
        (
            "peak prompt within budget",
            f"peak {tc.peak_prompt_tokens:,} of {r.budget:,}; {tc.over_budget} calls over",
            tc.peak_prompt_tokens <= r.budget,
        )
    )
    if r.bound:
        bd = sum(b.effective_cost for b in r.bound.values())
        rb = tc.effective_cost / bd if bd else float("nan")
        out.append(("ratio to the optimistic bound ≤ 1.3×", f"{rb:.3f}×", rb <= 1.3))
    large = [t for t in r.trajectories if r.stats(t, "naive").effective_cost > LARGE_RUN]
    above = [
        f"{t} {r.stats(t, 'taskctx').effective_cost / r.stats(t, 'naive').effective_cost:.2f}×"
        for t in large
        if r.stats(t, "taskctx").effective_cost > r.stats(t, "naive").effective_cost
    ]
    out.append(
        (
            f"no run above 1.0× naive (naive over {LARGE_RUN:,} tokens)",
            ", ".join(above) if above else f"none of {len(large)} runs",
            not above,
        )
    )
    return out


def _quality_targets(r: BenchResult) -> list[tuple[str, str, bool | None]]:
    """The targets on caching, retention, restorability, overhead and checkpoint bytes."""
    tc = r.totals["taskctx"]
    out: list[tuple[str, str, bool | None]] = []
    out.append(("cached-prefix share ≥ 0.85", f"{tc.cached_share:.3f}", tc.cached_share >= 0.85))
    out.append(
        (
            "retention 100%",
            f"{_pct(tc.retention)} (floor {_pct(tc.floor)}, orphans {tc.orphans})",
            tc.retention == 1.0 and tc.floor == 1.0 and tc.orphans == 0,
        )
    )
    out.append(
        (
            "restorability 100%",
            f"{_pct(tc.restorability)} of {tc.compressed} compressed observations",
            tc.restorability == 1.0,
        )
    )
    syn = [o for o in r.overhead if o.label.startswith("SYNTHETIC") and "at " in o.label]
    if syn:
        o = syn[0]
        out.append(
            (
                "overhead ≤ 2 ms/step median at 1,000 events",
                f"{o.median_ms:.2f} ms median, {o.p95_ms:.2f} ms p95 ({o.steps} steps, synthetic)",
                o.median_ms <= 2.0,
            )
        )
    if len(r.checkpoint) >= 2:
        lo, hi = min(r.checkpoint), max(r.checkpoint)
        g = r.checkpoint[hi] / r.checkpoint[lo] - 1
        out.append(
            (
                f"checkpoint bytes grow at most 10% from {lo:,} to {hi:,} events",
                f"{r.checkpoint[lo]:,} → {r.checkpoint[hi]:,} bytes ({100 * g:+.1f}%)",
                g <= 0.10,  # bounded state: a plan folding its done steps may shrink it
            )
        )
    return out


def pricing_table(r: BenchResult) -> list[str]:
    """Each strategy's effective cost under each provider pricing rule, with x naive in brackets.

    The rules' sources and dates follow the table.

    Args:
        r: The bench result.

    Returns:
        Markdown lines.
    """
    T = r.totals
    names = [*STRATEGIES, "taskctx (all roles)"]
    out = ["## Effective cost under provider pricing rules (× naive in brackets)", ""]
    out.append(
        "| strategy | " + " | ".join(f"{x.name}{' (headline)' if x.name == HEADLINE else ''}" for x in RULES) + " |"
    )
    out.append("|---|" + "---:|" * len(RULES))
    for n in names:
        cells = []
        for x in RULES:
            v, nv = T[n].costs.get(x.name, 0.0), T["naive"].costs.get(x.name, 0.0)
            cells.append(f"{v:,.0f} ({v / nv:.3f})" if nv else f"{v:,.0f}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out += [""] + [f"- `{x.name}`: {x.source}; as of {x.as_of}." for x in RULES] + [""]
    return out


def markdown(r: BenchResult) -> str:
    """``results.md``: the totals, the targets, the pricing table, the split and per-trajectory tables.

    Args:
        r: The bench result.

    Returns:
        The markdown.
    """
    T = r.totals
    lines = [f"# taskctx bench: {len(r.trajectories)} trajectories, budget {r.budget:,} tokens", ""]
    if r.too_large:
        lines += [f"{len(r.too_large)} more do not fit the budget and are not measured (see below).", ""]
    lines += [
        "Tokens: o200k_base (tiktoken, offline) over messages + tool schemas. Effective cost = "
        "uncached + 0.1 × cached prefix (prefix in whole messages vs the previous call of the same role). "
        f"Strategies: naive append-all; masking = SWE-agent LastNObservations(n={MASK_N}); clearing = LangChain "
        f"ClearToolUsesEdit(trigger=budget, keep={CLEAR_KEEP}); summarization = LangChain SummarizationMiddleware "
        "with deepagents' fractions (trigger 0.85, keep 0.10 of a window = budget) and an **extractive stand-in "
        f"summary of fixed size ({SUMMARY_CHARS} chars; no model offline)**; taskctx = the real graph "
        "(executor calls; `complete_step` rides on each plan step's last recorded action, and takes a call of "
        "its own only when that action failed). `taskctx (all roles)` adds planner / reviewer / recovery "
        "calls.",
        "",
    ]
    lines += too_large_markdown(r)
    lines += ["## Totals", ""]
    lines += _table([T[s] for s in [*STRATEGIES, "taskctx (all roles)"]], T["naive"])
    lines += [
        "",
        f"Summarization rewrote the history {T['summarization'].summaries} times; with a real model each is an "
        "extra summary call whose tokens are not counted above (the stand-in costs nothing).",
        "",
    ]
    lines += pricing_table(r)
    lines += bound_markdown(r)
    lines += ["## Targets (measured, not asserted)", "", "| target | measured | met |", "|---|---|---|"]
    for name, val, met in targets(r):
        lines.append(f"| {name} | {val} | {'-' if met is None else ('yes' if met else '**no**')} |")
    lines += ["", *short_runs_markdown(r)]
    lines += _per_trajectory(r)
    lines += _overhead_tables(r)
    lines += ["", *split_markdown(r), *stress_markdown(r.stress, r.budget)]
    if r.agent_totals:  # (the agent rows import create_agent: only when they were run)
        from .agents import agents_markdown

        per_run = {tid: {s: r.stats(tid, s) for s in ["taskctx", *r.agent_totals]} for tid in r.trajectories}
        lines += agents_markdown({**r.agent_totals, "taskctx": T["taskctx"]}, halves(r.trajectories), per_run)
    lines += ["", f"Bench wall time: {r.seconds} s. Runs finished: {sum(r.finished.values())}/{len(r.finished)}.", ""]
    return "\n".join(lines)


def too_large_markdown(r: BenchResult) -> list[str]:
    """The table of the runs that do not fit the budget, each with the budget it needs (none: empty).

    Args:
        r: The bench result.

    Returns:
        Markdown lines.
    """
    if not r.too_large:
        return []
    lines = [
        f"## Runs that do not fit --budget {r.budget:,}",
        "",
        "Refused by taskctx (a `BudgetError`), so no strategy is measured on them.",
        "",
        "| trajectory | steps | measured | budget it needs (tokens) |",
        "|---|---:|---|---:|",
    ]
    for tid, need in r.too_large.items():
        lines.append(f"| {tid} | {r.too_large_steps.get(tid, 0)} | no: does not fit --budget {r.budget:,} | {need:,} |")
    return [*lines, ""]


def _per_trajectory(r: BenchResult) -> list[str]:
    """The per-trajectory tables: effective cost (x naive), peak prompt and calls over budget."""
    lines: list[str] = []
    lines += ["## Effective cost per trajectory (× naive in brackets)", ""]
    lines.append("| trajectory | steps | " + " | ".join(STRATEGIES) + " | taskctx other-role calls |")
    lines.append("|---|---:|" + "---:|" * len(STRATEGIES) + "---|")
    for tid in r.trajectories:
        nv = r.stats(tid, "naive").effective_cost
        cells = [
            f"{r.stats(tid, s).effective_cost:,.0f} ({r.stats(tid, s).effective_cost / nv:.2f})" for s in STRATEGIES
        ]
        roles = ", ".join(f"{k} {v}" for k, v in sorted(r.other_roles[tid].items()))
        lines.append(f"| {tid} | {r.steps[tid]} | " + " | ".join(cells) + f" | {roles} |")
    for tid, need in r.too_large.items():
        lines.append(
            f"| {tid} | {r.too_large_steps.get(tid, 0)} | "
            + " | ".join(["-"] * len(STRATEGIES))
            + f" | does not fit --budget {r.budget:,}: needs {need:,} |"
        )
    lines += ["", "## Peak prompt / calls over budget per trajectory", ""]
    lines.append("| trajectory | " + " | ".join(STRATEGIES) + " |")
    lines.append("|---|" + "---:|" * len(STRATEGIES))
    for tid in r.trajectories:
        lines.append(
            f"| {tid} | "
            + " | ".join(f"{r.stats(tid, s).peak_prompt_tokens:,} / {r.stats(tid, s).over_budget}" for s in STRATEGIES)
            + " |"
        )
    return lines


def _overhead_tables(r: BenchResult) -> list[str]:
    """The orchestrator overhead and checkpoint bytes tables."""
    lines: list[str] = []
    lines += [
        "",
        "## Orchestrator overhead per executor step (reduce + build + render; model time excluded)",
        "",
        "| run | steps timed | events | median ms | p95 ms | re-render reproduced logged tokens |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for o in r.overhead:
        lines.append(
            f"| {o.label} | {o.steps} | {o.events:,} | {o.median_ms:.3f} | {o.p95_ms:.3f} "
            f"| {_pct(o.render_reproduced)} |"
        )
    if r.checkpoint:
        lines += [
            "",
            "## Checkpoint bytes (SYNTHETIC run; TaskContext via `checkpoint_serde().dumps_typed`)",
            "",
            "| events folded | bytes | largest parts |",
            "|---:|---:|---|",
        ]
        for n, b in sorted(r.checkpoint.items()):
            top = sorted(r.checkpoint_parts[n].items(), key=lambda kv: -kv[1])[:4]
            lines.append(f"| {n:,} | {b:,} | " + ", ".join(f"{k} {v:,}" for k, v in top) + " |")
    return lines
