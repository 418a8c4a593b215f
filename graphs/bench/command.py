"""``taskctx bench [DIR] [--budget N] [--out DIR] [--split] [--stress]``: run the bench (:mod:`.runner`), write
``results.md``, ``results.csv`` and the two plots, print the totals and targets."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from context import TaskctxError

from .defaults import DEFAULT_DIR
from .scale import DEFAULT_SCALE, parse_scale, run_scale, scale_markdown, write_scale

if TYPE_CHECKING:  # (the strategies load the chat-model stack: imported when the bench runs, not by every command)
    from .runner import BenchResult

__all__ = ["DEFAULT_OUT", "bench", "write_outputs"]

DEFAULT_OUT = Path(".taskctx/bench")


def write_outputs(r: BenchResult, out: str | Path) -> list[Path]:
    """``results.md``, ``results.csv``, ``prompt_tokens.png``, ``effective_cost.png`` under ``out``."""
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


def bench(
    dir: Annotated[
        Path, typer.Argument(help="Folder of recorded trajectories (*.jsonl), or one .jsonl file.")
    ] = DEFAULT_DIR,  # noqa: A002
    budget: Annotated[int, typer.Option("--budget", min=1000, help="Prompt budget in tokens.")] = 8_000,
    out: Annotated[Path, typer.Option("--out", help="Folder for results.md, results.csv and the plots.")] = DEFAULT_OUT,
    scale: Annotated[
        str,
        typer.Option(
            "--scale",
            help="Executor steps of the scale legs, comma-separated (the shared ponyc run repeated with its "
            "errors; e.g. 100,1000,10000); '' skips them.",
        ),
    ] = ",".join(str(n) for n in DEFAULT_SCALE),
    split: Annotated[
        bool,
        typer.Option(
            "--split", metavar="", help="Also print the two-fold split: each half of the runs as unseen data."
        ),
    ] = False,
    stress: Annotated[
        bool,
        typer.Option("--stress", metavar="", help="Also run and print the synthetic stress set (about a minute more)."),
    ] = False,
) -> None:
    """Replay every trajectory in DIR through five context strategies and write the results; then
    the scale legs (scale.md, scale.csv, scale.png). ``results.md`` always holds the two-fold
    split; ``--split`` prints it too."""
    from .runner import run_bench
    from .split import split_markdown
    from .stress import stress_markdown
    from .table import markdown

    d = Path(dir)
    if not d.is_absolute():
        d = Path.cwd() / d
    if out.exists() and not out.is_dir():
        typer.echo(f"error: --out {out} is a file; pass a folder for results.md, results.csv and the plots", err=True)
        raise typer.Exit(2)
    try:
        legs = parse_scale(scale)
    except TaskctxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:  # before the run, so a bad --out does not waste it
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        typer.echo(f"error: --out {out} cannot be created ({exc.strerror or exc}); pass a writable folder", err=True)
        raise typer.Exit(2) from exc
    try:
        r = run_bench(d, budget, stress=stress)
        files = write_outputs(r, out)
        rows = run_scale(d, legs, budget)
        files += write_scale(rows, out)
    except (FileNotFoundError, TaskctxError, OSError, RuntimeError) as exc:
        typer.echo("error: " + " ".join(str(exc).split()), err=True)
        raise typer.Exit(2) from exc
    typer.echo(markdown(r).split("## Effective cost per trajectory")[0].rstrip())
    extra = [*(split_markdown(r) if split else []), *stress_markdown(r.stress, r.budget)]
    if extra:
        typer.echo("")
        typer.echo("\n".join(extra).rstrip())
    typer.echo("")
    if rows:
        typer.echo(scale_markdown(rows))
    for f in files:
        typer.echo(f"wrote {f}")
