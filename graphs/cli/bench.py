"""``taskctx bench`` and ``taskctx tokens``.

``taskctx bench [DIR] [--budget N] [--out DIR] [--scale N,..] [--synthetic N] [--split] [--stress] [--fork STEPS]``: run the bench
(:mod:`graphs.bench.replays`), write ``results.md``, ``results.csv`` and the two plots, print the totals and
targets; ``taskctx tokens [DIR]``: the token counters measured against o200k_base
(:mod:`graphs.bench.token_counters`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from context import TaskctxError

from ..bench.defaults import DEFAULT_DIR
from ..bench.fork_bench import ForkRow, fork_markdown, parse_fork_legs, run_fork_bench
from ..bench.outputs import DEFAULT_OUT, write_outputs
from ..bench.scale import DEFAULT_SCALE, parse_scale, run_scale, scale_markdown, write_scale
from ..bench.token_counters import SAMPLES, corpus, measure

__all__ = ["bench", "tokens_command"]


def _fork_legs(legs: tuple[int, ...], out: Path, files: list[Path]) -> list[ForkRow]:
    """Run the fork legs (none: nothing), write ``fork.md`` to ``out`` and add it to ``files``."""
    forks = run_fork_bench(legs) if legs else []
    if forks:
        (out / "fork.md").write_text(fork_markdown(forks) + "\n", encoding="utf-8")
        files.append(out / "fork.md")
    return forks


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
            help="Executor steps of the scale legs, comma-separated (DIR's openhands-ponyc-4588 run, else its "
            "longest run that fits, repeated with its errors; e.g. 100,1000,10000); '' skips them.",
        ),
    ] = ",".join(str(n) for n in DEFAULT_SCALE),
    split: Annotated[
        bool,
        typer.Option(
            "--split", metavar="", help="Also print the two-fold split: each half of the runs as unseen data."
        ),
    ] = False,
    synthetic: Annotated[
        int,
        typer.Option(
            "--synthetic",
            min=0,
            help="Events of the synthetic run the overhead is timed on (checkpoint bytes are measured on it "
            "too, up to 5,000 events); 0 skips it.",
        ),
    ] = 1_000,
    stress: Annotated[
        bool,
        typer.Option("--stress", metavar="", help="Also run and print the synthetic stress set (about a minute more)."),
    ] = False,
    fork: Annotated[
        str,
        typer.Option(
            "--fork",
            help="Executor steps of the fork legs' synthetic parents, comma-separated (e.g. 100,1000,10000): "
            "a fork's time and bytes against the parent's length, written to fork.md; '' (default) skips them.",
        ),
    ] = "",
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
    the scale legs (scale.md, scale.csv, scale.png) and, with --fork, the fork legs (fork.md).
    ``results.md`` always holds the two-fold split; ``--split`` prints it too.
    """  # noqa: D205 - typer's --help lists this first paragraph as it stands
    from ..bench.replays import run_bench

    d = Path(dir)
    if not d.is_absolute():
        d = Path.cwd() / d
    try:
        legs = parse_scale(scale)
        fork_legs = parse_fork_legs(fork)
    except TaskctxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    _make_out(out)  # before the run, so a bad --out does not waste it
    try:
        cp = (100, 1_000, 5_000) if synthetic else ()
        r = run_bench(d, budget, stress=stress, agents=agents, synthetic_events=synthetic, checkpoint_events=cp)
        files = write_outputs(r, out)
        rows = run_scale(d, legs, budget, exclude=r.too_large)
        files += write_scale(rows, out)
        forks = _fork_legs(fork_legs, out, files)
    except (FileNotFoundError, TaskctxError, OSError, RuntimeError) as exc:
        typer.echo("error: " + " ".join(str(exc).split()), err=True)
        raise typer.Exit(2) from exc
    skipped = f"scale legs skipped: {d} holds no run that fits --budget {budget} to repeat" if legs else ""
    _echo_results(r, split=split, rows=rows, skipped=skipped, forks=forks, files=files)


def _make_out(out: Path) -> None:
    """Create the results folder ``out``, or exit 2 naming why it cannot be one."""
    if out.exists() and not out.is_dir():
        typer.echo(f"error: --out {out} is a file; pass a folder for results.md, results.csv and the plots", err=True)
        raise typer.Exit(2)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        typer.echo(f"error: --out {out} cannot be created ({exc.strerror or exc}); pass a writable folder", err=True)
        raise typer.Exit(2) from exc


def _echo_results(r: Any, *, split: bool, rows: list[Any], skipped: str, forks: Any, files: list[Path]) -> None:
    """Print the bench's totals and the tables and files that go with them.

    The split and stress tables when asked for, the scale legs (else why they were ``skipped``, if
    they were asked for), the fork legs and the files written.
    """
    from ..bench.split import split_markdown
    from ..bench.stress import stress_markdown
    from ..bench.table import markdown

    md = markdown(r)
    typer.echo(md.split("## Effective cost per trajectory")[0].rstrip())
    extra = [*(split_markdown(r) if split else []), *stress_markdown(r.stress, r.budget)]
    if "## Agents with middleware" in md:  # the agent rows, when run (--agents)
        extra.append("## Agents with middleware" + md.split("## Agents with middleware", 1)[1].split("\n## ", 1)[0])
    if extra:
        typer.echo("")
        typer.echo("\n".join(extra).rstrip())
    typer.echo("")
    if rows:
        typer.echo(scale_markdown(rows))
    elif skipped:
        typer.echo(skipped)
    if forks:
        typer.echo(fork_markdown(forks))
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
