"""``taskctx bench`` and ``taskctx tokens``.

``taskctx bench [DIR] [--budget N] [--out DIR] [--split] [--stress]``: run the bench
(:mod:`graphs.bench.replays`), write ``results.md``, ``results.csv`` and the two plots, print the totals and
targets; ``taskctx tokens [DIR]``: the token counters measured against o200k_base
(:mod:`graphs.bench.token_counters`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from context import TaskctxError

from ..bench.defaults import DEFAULT_DIR
from ..bench.outputs import DEFAULT_OUT, write_outputs
from ..bench.scale import DEFAULT_SCALE, parse_scale, run_scale, scale_markdown, write_scale
from ..bench.token_counters import SAMPLES, corpus, measure

__all__ = ["bench", "tokens_command"]


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
    agents: Annotated[
        bool,
        typer.Option(
            "--agents",
            metavar="",
            help="Also replay each run through a real create_agent agent with TaskContextMiddleware, "
            "SummarizationMiddleware and ContextEditingMiddleware (the agent rows).",
        ),
    ] = False,
) -> None:
    """Replay every trajectory in DIR through five context strategies and write the results; then
    the scale legs (scale.md, scale.csv, scale.png). ``results.md`` always holds the two-fold
    split; ``--split`` prints it too.
    """  # noqa: D205 - typer's --help lists this first paragraph as it stands
    from ..bench.replays import run_bench
    from ..bench.split import split_markdown
    from ..bench.stress import stress_markdown
    from ..bench.table import markdown

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
        r = run_bench(d, budget, stress=stress, agents=agents)
        files = write_outputs(r, out)
        rows = run_scale(d, legs, budget)
        files += write_scale(rows, out)
    except (FileNotFoundError, TaskctxError, OSError, RuntimeError) as exc:
        typer.echo("error: " + " ".join(str(exc).split()), err=True)
        raise typer.Exit(2) from exc
    typer.echo(markdown(r).split("## Effective cost per trajectory")[0].rstrip())
    extra = [*(split_markdown(r) if split else []), *stress_markdown(r.stress, r.budget)]
    md = markdown(r)
    if "## Agents with middleware" in md:  # the agent rows, when run (--agents)
        extra.append("## Agents with middleware" + md.split("## Agents with middleware", 1)[1].split("\n## ", 1)[0])
    if extra:
        typer.echo("")
        typer.echo("\n".join(extra).rstrip())
    typer.echo("")
    if rows:
        typer.echo(scale_markdown(rows))
    for f in files:
        typer.echo(f"wrote {f}")


def tokens_command(
    dir: Annotated[Path, typer.Argument(help="Folder of recorded trajectories (*.jsonl).")] = DEFAULT_DIR,  # noqa: A002
) -> None:
    """Measure the token counters against o200k_base: the estimate's worst under/over ratio."""
    try:
        texts = corpus(dir)
    except FileNotFoundError as exc:
        typer.echo(f"error: {exc}; pass the folder of the recorded trajectories", err=True)
        raise typer.Exit(2) from exc
    rows = measure(texts)
    typer.echo(f"{len(texts)} texts ({len(SAMPLES)} CJK/Japanese/Korean/emoji samples), ratio = counter / o200k_base")
    typer.echo(f"{'counter':<16} {'tokens':>10} {'o200k':>10} {'total':>6} {'lowest':>7} {'highest':>7}")
    for r in rows:
        typer.echo(f"{r.counter:<16} {r.tokens:>10,} {r.o200k:>10,} {r.total:>6.3f} {r.lowest:>7.3f} {r.highest:>7.3f}")
    est = rows[0]
    typer.echo(
        f"estimate: worst under/over ratio {est.lowest:.3f} ({est.lowest_at}) / {est.highest:.3f} ({est.highest_at})"
    )
