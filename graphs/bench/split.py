"""The two-fold split: the shared runs in two fixed halves, each reported on its own.

Runs are sorted by (source, id) and alternate between halves, so each half holds every source
with two or more runs; with the optimistic bound (:mod:`.bound`) and the targets.
"""

from __future__ import annotations

from nodes.pricing import HEADLINE, RULES

from .bound import BOUND
from .metrics import Stats
from .replays import BenchResult
from .strategies import STRATEGIES

__all__ = [
    "HALVES",
    "LARGE_RUN",
    "bound_markdown",
    "half_targets",
    "half_totals",
    "halves",
    "short_runs_markdown",
    "source_of",
    "split_markdown",
]

HALVES = ("A", "B")
#: the per-run target (≤ 1.0× naive) holds for runs whose naive cost is over this many tokens
LARGE_RUN = 20_000


def source_of(trajectory: str) -> str:
    """The source of a run: its id's first dash-separated word.

    Args:
        trajectory: A run's id (``moatless-django-15695``).

    Returns:
        The source (``moatless``).
    """
    return trajectory.split("-", 1)[0]


def halves(trajectories: list[str]) -> dict[str, list[str]]:
    """The two halves of the runs: sorted by (source, id), alternating.

    Args:
        trajectories: The runs' ids.

    Returns:
        ``{"A": [...], "B": [...]}``.
    """
    ordered = sorted(trajectories, key=lambda t: (source_of(t), t))
    return {"A": ordered[0::2], "B": ordered[1::2]}


def half_totals(r: BenchResult, ids: list[str]) -> dict[str, Stats]:
    """Every strategy's totals over ``ids``, plus the optimistic bound under :data:`BOUND`.

    Args:
        r: The bench result.
        ids: The runs of one half.

    Returns:
        Strategy -> totals.
    """
    out = {s: Stats("half", s) for s in [*STRATEGIES, BOUND]}
    for tid in ids:
        for s in STRATEGIES:
            out[s].add(r.stats(tid, s))
        if tid in r.bound:
            out[BOUND].add(r.bound[tid])
    return out


def half_targets(r: BenchResult, ids: list[str]) -> list[tuple[str, str, bool]]:
    """``(target, measured, met)`` of the bench's targets on one half (measured, never asserted).

    Args:
        r: The bench result.
        ids: The runs of one half.

    Returns:
        One tuple per target.
    """
    T = half_totals(r, ids)
    tc = T["taskctx"].effective_cost
    rn, rm = tc / T["naive"].effective_cost, tc / T["masking"].effective_cost
    rb = tc / T[BOUND].effective_cost if T[BOUND].effective_cost else float("nan")
    over = [
        (tid, r.stats(tid, "taskctx").effective_cost / r.stats(tid, "naive").effective_cost)
        for tid in ids
        if r.stats(tid, "naive").effective_cost > LARGE_RUN
    ]
    bad = [f"{tid} {x:.2f}×" for tid, x in over if x > 1.0]
    worst = max(over, key=lambda kv: kv[1], default=None)
    return [
        ("effective cost ≤ 0.45× naive", f"{rn:.3f}×", rn <= 0.45),
        ("effective cost ≤ 0.27× masking", f"{rm:.3f}×", rm <= 0.27),
        (
            f"no run above 1.0× naive (naive over {LARGE_RUN:,} tokens)",
            ", ".join(bad) if bad else (f"worst {worst[0]} {worst[1]:.2f}× of {len(over)} runs" if worst else "none"),
            not bad,
        ),
        ("ratio to the optimistic bound ≤ 1.3×", f"{rb:.3f}×", rb <= 1.3),
        (
            "peak prompt within budget",
            f"peak {T['taskctx'].peak_prompt_tokens:,} of {r.budget:,}; {T['taskctx'].over_budget} calls over",
            T["taskctx"].over_budget == 0,
        ),
    ]


def split_markdown(r: BenchResult) -> list[str]:
    """The split's section of ``results.md`` (and of ``taskctx bench --split``).

    Per half: its runs, each strategy's effective cost against naive, masking and the bound, and
    the targets.

    Args:
        r: The bench result.

    Returns:
        Markdown lines.
    """
    parts = halves(r.trajectories)
    out = [
        "## Two-fold split: each half as unseen data",
        "",
        "Runs sorted by (source, id) and alternated: even positions half A, odd positions half B. "
        "No constant of taskctx is fitted to these runs (restarts: a cost model under the provider's "
        "cache rule), so each half is data the other never saw.",
        "",
    ]
    for name in HALVES:
        ids = parts[name]
        if not ids:
            continue
        T = half_totals(r, ids)
        nv, mk, bd = T["naive"].effective_cost, T["masking"].effective_cost, T[BOUND].effective_cost
        out += [f"### Half {name} ({len(ids)} runs): {', '.join(ids)}", ""]
        out += [
            "| strategy | calls | effective cost | × naive | × masking | × bound | peak prompt | over budget |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in [*STRATEGIES, BOUND]:
            st = T[s]
            e = st.effective_cost
            out.append(
                f"| {s} | {st.calls} | {e:,.0f} | {e / nv:.3f} | {e / mk:.3f} | "
                f"{(e / bd if bd else float('nan')):.3f} | {st.peak_prompt_tokens:,} | {st.over_budget} |"
            )
        out += ["", "| target (this half) | measured | met |", "|---|---|---|"]
        out += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in half_targets(r, ids)]
        out.append("")
    return out


def bound_markdown(r: BenchResult) -> list[str]:
    """The optimistic bound's section: its cost under each pricing rule, every strategy's ratio to it.

    Args:
        r: The bench result.

    Returns:
        Markdown lines (none without a bound).
    """
    if not r.bound:
        return []
    bd = Stats("TOTAL", BOUND)
    for s in r.bound.values():
        bd.add(s)
    names = [*STRATEGIES, "taskctx (all roles)"]
    out = [
        "## Optimistic bound (× bound: each strategy's cost over the bound's, under the same rule)",
        "",
        "Per taskctx executor call: exactly the quality floor (core layer, working state: the state note and, "
        "after a restart, the checkpoint block; the last 3 "
        "calls as taskctx shows them) and the tool schemas, everything but the newest step cached. "
        "It tells how much is left to win.",
        "",
        "| strategy | " + " | ".join(f"{x.name}{' (headline)' if x.name == HEADLINE else ''}" for x in RULES) + " |",
        "|---|" + "---:|" * len(RULES),
        f"| {BOUND} | " + " | ".join(f"{bd.costs.get(x.name, 0.0):,.0f} (1.000)" for x in RULES) + " |",
    ]
    for n in names:
        cells = []
        for x in RULES:
            v, b = r.totals[n].costs.get(x.name, 0.0), bd.costs.get(x.name, 0.0)
            cells.append(f"{v:,.0f} ({v / b:.3f})" if b else f"{v:,.0f}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return [*out, ""]


def short_runs_markdown(r: BenchResult) -> list[str]:
    """The runs where taskctx costs more than naive, with the bound's ratio to naive on the same run.

    A bound near or over 1.0x naive means the floor itself (the core layer and the control tools'
    schemas on every call, each call's entry) leaves no room on that run.

    Args:
        r: The bench result.

    Returns:
        Markdown lines.
    """
    rows = []
    for tid in r.trajectories:
        nv = r.stats(tid, "naive").effective_cost
        tc = r.stats(tid, "taskctx").effective_cost
        if tc <= nv or tid not in r.bound:
            continue
        rows.append((tid, r.steps[tid], nv, tc / nv, r.bound[tid].effective_cost / nv))
    if not rows:
        return []
    out = [
        "## Runs where taskctx costs more than naive",
        "",
        "| run | steps | naive | taskctx × naive | bound × naive | why |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for tid, steps, nv, x, b in rows:
        why = (
            "the floor alone (core layer and control-tool schemas on every call) costs more than naive: "
            "short run, small outputs, nothing to compress"
            if b >= 1.0
            else f"{x / b:.2f}× the bound: restarts and state notes that a run this short does not repay"
        )
        out.append(f"| {tid} | {steps} | {nv:,.0f} | {x:.3f} | {b:.3f} | {why} |")
    return [*out, ""]
