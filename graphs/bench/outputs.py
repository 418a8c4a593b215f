"""The files ``taskctx bench`` writes: ``results.md``, ``results.csv`` and two plots (:func:`write_outputs`)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the strategies load the chat-model stack: imported when the bench runs, not by every command)
    from .replays import BenchResult

__all__ = ["DEFAULT_OUT", "write_outputs"]

DEFAULT_OUT = Path(".taskctx/bench")


def write_outputs(r: BenchResult, out: str | Path) -> list[Path]:
    """``results.md``, ``results.csv``, ``prompt_tokens.png``, ``effective_cost.png`` under ``out``."""
    # (imported here: matplotlib and the strategies load only when the bench writes its results)
    from .plots import plot_effective_cost, plot_prompt_tokens
    from .strategies import STRATEGIES
    from .table import markdown

    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    md = o / "results.md"
    md.write_text(markdown(r), encoding="utf-8")
    cs = o / "results.csv"
    rows = [x.row() for x in r.rows] + [r.totals[s].row() for s in [*STRATEGIES, "taskctx (all roles)"]]
    rows += [b.row() for b in r.bound.values()]  # the optimistic bound per trajectory
    with open(cs, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    p1 = plot_prompt_tokens(r, o / "prompt_tokens.png")
    p2 = plot_effective_cost(r, o / "effective_cost.png")
    return [md, cs, p1, p2]
