"""The scale legs of ``taskctx bench --scale``: one recorded run repeated to N steps, replayed, resumed, inspected.

Each leg runs the real CLI in child processes on SQLite and reports disk bytes per step, time
per step, each process's CPU time and peak RSS, and the resume start-up (:class:`ScaleRow`).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from context import SqliteStores, Trajectory, load_trajectory
from context.errors import InvalidInputError
from context.trajectory import RecordedStep

from .defaults import trajectory_files

__all__ = [
    "DEFAULT_SCALE",
    "OVERHEAD_CALLS",
    "SCALE_TRAJECTORY",
    "ScaleRow",
    "first_new_event",
    "last_seq",
    "parse_scale",
    "repeat_trajectory",
    "run_scale",
    "scale_run",
    "scale_markdown",
    "write_scale",
]

#: The legs ``taskctx bench`` runs by default (``--scale 100,1000,10000`` adds the long one).
DEFAULT_SCALE = (100, 1000)
#: The recorded run the legs repeat (the issue's): the longest shared run, with its errors.
SCALE_TRAJECTORY = "openhands-ponyc-4588"
#: Executor calls (the last ones of the run) whose reduce + build + render are re-timed.
OVERHEAD_CALLS = 100

#: A child: ``taskctx ARGS`` in-process, writing how long ``main()`` took (imports excluded), its exit
#: code and its peak RSS (Linux: ``VmHWM`` of /proc/self/status, the peak of this program's own
#: memory; ``ru_maxrss`` would also hold the parent's RSS when it forked the child, so every leg
#: after a big one would look as big).
_CHILD = """
import json, sys, time
from graphs.cli import main
out, args = sys.argv[1], sys.argv[2:]
sys.argv = ["taskctx", *args]
t0 = time.perf_counter()
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
hwm = None
try:
    with open("/proc/self/status") as st:
        hwm = next((int(ln.split()[1]) for ln in st if ln.startswith("VmHWM:")), None)
except OSError:
    pass
with open(out, "w") as fh:
    json.dump({"seconds": time.perf_counter() - t0, "code": code, "hwm_kb": hwm}, fh)
"""


@dataclass
class ScaleRow:
    """One scale leg's measures: bytes, seconds, MB of peak RSS, per leg or per executor step.

    Disk bytes are the pages of each table and its indexes (``dbstat``) and the whole file; the
    state is ``state.json`` of the export; the times are the replay's wall and CPU time per step,
    the orchestrator overhead per step (the last ``OVERHEAD_CALLS`` executor calls re-timed), and
    each child process's own wall, CPU and peak RSS.
    """

    steps: int
    events: int
    file_bytes: int
    events_bytes: int
    artifacts_bytes: int
    checkpoints_bytes: int
    writes_bytes: int
    checkpoints_kept: int
    state_bytes: int
    #: Executor steps the replay child ran (``steps - 1``: the last one is the resume start-up's).
    replayed: int
    seconds: float
    ms_per_step: float
    #: CPU time (user + system) of the replay process per step: steadier than wall time on a busy machine.
    cpu_ms_per_step: float
    overhead_ms: float
    #: Peak RSS of each child on its own (``os.wait4``), MB.
    replay_rss_mb: float
    resume_rss_mb: float
    inspect_rss_mb: float
    #: Resume start-up (see the module doc): seconds from the start of the process ``resume
    #: --max-steps 1`` to its first new step (the ``timestamp`` of the ``resume.started`` it appends).
    first_step_s: float
    #: The whole process ``resume --max-steps 1``: wall and CPU seconds from its start to its exit.
    resume_s: float
    resume_cpu_s: float
    #: ``resume`` of the finished task: wall and CPU seconds.
    finished_s: float
    finished_cpu_s: float
    inspect_s: float
    inspect_cpu_s: float
    #: The id of the recorded run the leg repeats.
    trajectory: str = SCALE_TRAJECTORY

    @property
    def disk_per_step(self) -> float:
        """Bytes per executor step: events + artifacts + checkpoints + writes (table pages)."""
        return (self.events_bytes + self.artifacts_bytes + self.checkpoints_bytes + self.writes_bytes) / self.steps


def parse_scale(text: str) -> tuple[int, ...]:
    """The legs of ``--scale``: ``"100,1000"`` is ``(100, 1000)``, ``""`` no legs.

    Args:
        text: Comma-separated executor step counts, each an integer from 10 to 100000.

    Returns:
        The step counts.

    Raises:
        InvalidInputError: An entry is not such an integer (it is named).
    """
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or not 10 <= int(part) <= 100_000:
            raise InvalidInputError(
                f"--scale {text!r}: {part!r} is not a step count from 10 to 100000; pass e.g. --scale 100,1000,10000"
            )
        out.append(int(part))
    return tuple(sorted(set(out)))


def repeat_trajectory(t: Trajectory, n_steps: int) -> Trajectory:
    """``t``'s recorded steps repeated in order, errors included, until there are ``n_steps``.

    Args:
        t: The recorded run.
        n_steps: Steps wanted.

    Returns:
        The trajectory, renumbered from 1, its id suffixed ``-x<n_steps>``.
    """
    steps = [
        RecordedStep(
            step=i + 1,
            thought=s.thought,
            action=s.action,
            observation=s.observation,
            tool=s.tool,
            arguments=s.arguments,
        )
        for i, s in ((i, t.steps[i % len(t.steps)]) for i in range(n_steps))
    ]
    return Trajectory(id=f"{t.id}-x{n_steps}", task=t.task, meta=t.meta, steps=steps, path="")


def _write_jsonl(t: Trajectory, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": t.id, "task": t.task, "n_steps": len(t.steps), "meta": t.meta}) + "\n")
        for s in t.steps:
            fh.write(
                json.dumps({"step": s.step, "thought": s.thought, "action": s.action, "observation": s.observation})
                + "\n"
            )


def _child(args: list[str], cwd: Path) -> dict[str, float]:
    """Run ``taskctx ARGS`` in a new process under ``cwd``, and measure it.

    ``seconds`` (its ``main()``), ``wall`` (from the process's start to its end), ``started`` (the
    wall clock just before it was started), the child's own ``cpu`` seconds (``os.wait4``: that
    child's rusage) and ``rss_kb`` (its ``VmHWM``, else ``ru_maxrss``). ``RuntimeError`` when it fails.
    """
    res = cwd / "child.json"
    res.unlink(missing_ok=True)
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    with open(cwd / "child.out", "wb") as out, open(cwd / "child.err", "w+b") as err:
        started = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(res), *args], cwd=cwd, env=env, stdout=out, stderr=err
        )
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip()[-500:]
    if proc.returncode != 0 or not res.exists():
        raise RuntimeError(f"taskctx {' '.join(args[:2])} failed in the scale bench: {stderr}")
    got = json.loads(res.read_text())
    if got["code"] not in (0, None):
        raise RuntimeError(f"taskctx {' '.join(args[:2])} exited {got['code']}: {stderr}")
    rss = got.pop("hwm_kb", None) or ru.ru_maxrss
    return {**got, "wall": wall, "started": started, "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": rss}


def last_seq(db: Path, task_id: str) -> int:
    """The last event seq of ``task_id`` in the SQLite database ``db``.

    Args:
        db: The SQLite database.
        task_id: The task.

    Returns:
        The seq, 0 when the task has no event.
    """
    c = sqlite3.connect(db)
    try:
        row = c.execute("SELECT MAX(seq) FROM taskctx_events WHERE task_id = ?", (task_id,)).fetchone()
        return int(row[0] or 0)
    finally:
        c.close()


def first_new_event(db: Path, task_id: str, after: int) -> tuple[str, float]:
    """The kind and time of ``task_id``'s first event after seq ``after``.

    Args:
        db: The SQLite database.
        task_id: The task.
        after: A seq.

    Returns:
        ``(kind, epoch seconds)`` from its ``timestamp`` (UTC, millisecond resolution).

    Raises:
        RuntimeError: There is no such event.
    """
    c = sqlite3.connect(db)
    try:
        row = c.execute(
            "SELECT kind, timestamp FROM taskctx_events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT 1",
            (task_id, after),
        ).fetchone()
    finally:
        c.close()
    if row is None:
        raise RuntimeError(f"the scale bench's resume of {task_id!r} appended no event after seq {after}")
    return row[0], datetime.fromisoformat(row[1].replace("Z", "+00:00")).timestamp()


def _table_bytes(db: Path) -> dict[str, int]:
    c = sqlite3.connect(db)
    try:
        rows = c.execute("SELECT tbl_name, name FROM sqlite_master WHERE type IN ('table', 'index')").fetchall()
        owner = {name: tbl for tbl, name in rows}
        sizes: dict[str, int] = {}
        for name, size in c.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            tbl = owner.get(name, name)
            sizes[tbl] = sizes.get(tbl, 0) + int(size)
        sizes["_kept"] = c.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
        return sizes
    finally:
        c.close()


def _overhead_ms(db: Path, task_id: str, traj: Trajectory, budget: int) -> float:
    # (imported here: the overhead measure loads the graph runtime; this module loads with the CLI)
    from .overhead import measure_overhead

    stores = SqliteStores(db)
    try:
        events = stores.events.read(task_id)
        executor = [i for i, e in enumerate(events) if e.kind == "context.built" and e.payload["role"] == "executor"]
        lo = executor[-OVERHEAD_CALLS] if len(executor) >= OVERHEAD_CALLS else 0
        times, _, _ = measure_overhead(stores, events, traj, budget, window=(lo, len(events)))
        return round(statistics.median(times), 3) if times else 0.0
    finally:
        stores.close()


def run_leg(traj: Trajectory, n_steps: int, work: Path, budget: int = 8_000) -> ScaleRow:
    """One leg: ``traj`` repeated to ``n_steps``, replayed, resumed and inspected under ``work``.

    Replayed by ``taskctx replay`` in a child process, stopped one step before the end; then, each
    in a new process: ``resume --max-steps 1`` (the resume start-up), ``resume`` to the end,
    ``resume`` of the finished task and ``inspect``.

    Args:
        traj: The recorded run.
        n_steps: Executor steps of the leg.
        work: A folder for the leg's files.
        budget: The token budget.

    Returns:
        The leg's measures.

    Raises:
        RuntimeError: A child process failed.
    """
    rep = repeat_trajectory(traj, n_steps)
    src = work / f"{rep.id}.jsonl"
    _write_jsonl(rep, src)
    db, out = work / f"scale-{n_steps}.sqlite", work / "runs"
    common = ["--db", str(db), "--out", str(out)]
    replayed = n_steps - 1
    run = _child(["replay", str(src), *common, "--budget", str(budget), "--max-steps", str(replayed)], work)
    before = last_seq(db, rep.id)
    resume = _child(["resume", rep.id, *common, "--max-steps", "1"], work)  # the start-up: one step, then stop
    first_kind, first_at = first_new_event(db, rep.id, before)
    if first_kind != "resume.started":  # (the first node the resume runs records it before anything else)
        raise RuntimeError(f"the scale bench's resume of {rep.id!r} began with {first_kind!r}, not resume.started")
    _child(["resume", rep.id, *common], work)  # to the end (the reviewer)
    finished = _child(["resume", rep.id, *common], work)
    inspect = _child(["inspect", rep.id, "--db", str(db)], work)
    sizes = _table_bytes(db)
    state = (out / rep.id / "state.json").stat().st_size
    n_events = sum(1 for _ in open(out / rep.id / "trace.jsonl", encoding="utf-8"))
    return ScaleRow(
        steps=n_steps,
        events=n_events,
        file_bytes=db.stat().st_size,
        events_bytes=sizes.get("taskctx_events", 0),
        artifacts_bytes=sizes.get("taskctx_artifacts", 0),
        checkpoints_bytes=sizes.get("checkpoints", 0),
        writes_bytes=sizes.get("writes", 0),
        checkpoints_kept=sizes["_kept"],
        state_bytes=state,
        replayed=replayed,
        seconds=round(run["seconds"], 2),
        ms_per_step=round(1000 * run["seconds"] / replayed, 2),
        cpu_ms_per_step=round(1000 * run["cpu"] / replayed, 2),
        overhead_ms=_overhead_ms(db, rep.id, rep, budget),
        replay_rss_mb=round(run["rss_kb"] / 1024, 1),
        resume_rss_mb=round(resume["rss_kb"] / 1024, 1),
        inspect_rss_mb=round(inspect["rss_kb"] / 1024, 1),
        first_step_s=round(first_at - resume["started"], 2),
        resume_s=round(resume["wall"], 2),
        resume_cpu_s=round(resume["cpu"], 2),
        finished_s=round(finished["wall"], 2),
        finished_cpu_s=round(finished["cpu"], 2),
        inspect_s=round(inspect["wall"], 2),
        inspect_cpu_s=round(inspect["cpu"], 2),
    )


def scale_run(trajectories: Path, exclude: Collection[str] = ()) -> Path | None:
    """The recorded run the scale legs repeat: ``SCALE_TRAJECTORY`` when the folder has it, else its longest.

    Args:
        trajectories: A folder of recorded runs (``*.jsonl``), or one such file (that file).
        exclude: Ids of runs not to repeat (those that do not fit the budget).

    Returns:
        The run's file, or None when the folder holds no run to repeat.
    """
    if trajectories.is_file():
        return trajectories
    if not trajectories.is_dir():
        return None
    named = trajectories / f"{SCALE_TRAJECTORY}.jsonl"
    if named.is_file() and SCALE_TRAJECTORY not in exclude:
        return named
    runs = [(p, load_trajectory(p)) for p in trajectory_files(trajectories)]
    runs = [(p, t) for p, t in runs if t.id not in exclude and t.steps]
    return max(runs, key=lambda pt: len(pt[1].steps))[0] if runs else None


def run_scale(
    trajectories: Path, legs: tuple[int, ...], budget: int = 8_000, *, exclude: Collection[str] = ()
) -> list[ScaleRow]:
    """Every leg of ``legs`` over the run :func:`scale_run` picks, in a temporary folder removed afterwards.

    Args:
        trajectories: The folder of recorded runs, or the one ``.jsonl`` to repeat.
        legs: Executor step counts (empty: none run, no run is looked for).
        budget: The token budget.
        exclude: Ids of runs not to repeat (those that do not fit the budget).

    Returns:
        One row per leg; none when ``legs`` is empty or there is no run to repeat.

    Raises:
        RuntimeError: A child process failed.
    """
    if not legs:  # skipped (--scale ''): no run to load
        return []
    path = scale_run(trajectories, exclude)
    if path is None:
        return []
    traj = load_trajectory(path)
    rows = []
    with tempfile.TemporaryDirectory(prefix="taskctx-scale-") as tmp:
        for n in legs:
            work = Path(tmp) / str(n)
            work.mkdir()
            rows.append(replace(run_leg(traj, n, work, budget), trajectory=traj.id))
    return rows


def _kb(b: float) -> str:
    return f"{b / 1024:,.1f}"


def scale_markdown(rows: list[ScaleRow]) -> str:
    """The scale table and the targets (the first leg against the last) as markdown.

    Args:
        rows: The legs.

    Returns:
        The markdown.
    """
    if not rows:
        return ""
    lines = [
        f"## Scale: {rows[0].trajectory} repeated (with its errors), SQLite, checkpoints pruned",
        "",
        "| steps | events | disk KB/step | events | artifacts | checkpoints | writes | file MB | state KB "
        "| ms/step | CPU ms/step | overhead ms/step |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.steps:,} | {r.events:,} | {_kb(r.disk_per_step)} | {_kb(r.events_bytes / r.steps)} "
            f"| {_kb(r.artifacts_bytes / r.steps)} | {_kb(r.checkpoints_bytes / r.steps)} "
            f"| {_kb(r.writes_bytes / r.steps)} | {r.file_bytes / 2**20:,.1f} | {_kb(r.state_bytes)} "
            f"| {r.ms_per_step} | {r.cpu_ms_per_step} | {r.overhead_ms} |"
        )
    lines += [
        "",
        "| steps | resume start-up s | resume --max-steps 1 process s (CPU) | resume, finished s (CPU) "
        "| inspect s (CPU) | peak RSS MB: replay | resume | inspect |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.steps:,} | {r.first_step_s} | {r.resume_s} ({r.resume_cpu_s}) | {r.finished_s} ({r.finished_cpu_s}) "
            f"| {r.inspect_s} ({r.inspect_cpu_s}) | {r.replay_rss_mb} | {r.resume_rss_mb} | {r.inspect_rss_mb} |"
        )
    a, b = rows[0], rows[-1]
    lines += [
        "",
        "(disk per step: pages of each table and its indexes over executor steps; events, artifacts, "
        "checkpoints and writes per step in KB; state: `state.json` of the export; ms/step: the replay of "
        "steps - 1 steps; resume start-up: from the start of a new process `taskctx resume --max-steps 1` of "
        "the task stopped one step before its end until its first new step begins (the timestamp of the "
        "`resume.started` it appends: Python start-up, imports, checks, graph, checkpoint read); the process "
        "column: that process from its start to its exit (also the step and the export); resume, finished "
        "and inspect: wall time of a new process; CPU seconds and peak RSS: each child's own)",
        "",
        f"- disk per step at {b.steps:,} / at {a.steps:,}: {b.disk_per_step / a.disk_per_step:.2f}x (target <= 1.25); "
        f"{_kb(b.disk_per_step)} KB per step (target <= 30)",
        f"- largest state: {_kb(max(r.state_bytes for r in rows))} KB (target <= 64)",
        f"- time per step at {b.steps:,} / at {a.steps:,}: {b.ms_per_step / a.ms_per_step:.2f}x wall, "
        f"{b.cpu_ms_per_step / a.cpu_ms_per_step:.2f}x CPU (target <= 1.5)",
        f"- resume start-up {b.first_step_s} s (the whole process {b.resume_s} s), "
        f"resume of the finished task {b.finished_s} s, inspect {b.inspect_s} s "
        f"at {b.steps:,} steps (target < 2 s)",
        f"- peak RSS at {b.steps:,} / at {a.steps:,} steps: replay {b.replay_rss_mb / a.replay_rss_mb:.2f}x, "
        f"resume {b.resume_rss_mb / a.resume_rss_mb:.2f}x, inspect {b.inspect_rss_mb / a.inspect_rss_mb:.2f}x",
    ]
    return "\n".join(lines) + "\n"


def write_scale(rows: list[ScaleRow], out: Path) -> list[Path]:
    """Write ``scale.md``, ``scale.csv`` and ``scale.png`` (five panels against steps) under ``out``.

    Args:
        rows: The legs (none: nothing is written).
        out: The folder.

    Returns:
        The files written.
    """
    if not rows:
        return []
    md = out / "scale.md"
    md.write_text(scale_markdown(rows), encoding="utf-8")
    cs = out / "scale.csv"
    with open(cs, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=[*asdict(rows[0]), "disk_per_step"])
        w.writeheader()
        for r in rows:
            w.writerow({**asdict(r), "disk_per_step": round(r.disk_per_step)})
    from .plots import pyplot  # (matplotlib loads only when a figure is drawn)

    plt = pyplot()
    xs = [r.steps for r in rows]
    fig, axes = plt.subplots(1, 5, figsize=(25, 4.2))
    panels = [
        (
            "disk KB per step",
            [
                ("events", [r.events_bytes / r.steps / 1024 for r in rows]),
                ("artifacts", [r.artifacts_bytes / r.steps / 1024 for r in rows]),
                ("checkpoints + writes", [(r.checkpoints_bytes + r.writes_bytes) / r.steps / 1024 for r in rows]),
                ("total", [r.disk_per_step / 1024 for r in rows]),
            ],
        ),
        ("state KB", [("state.json", [r.state_bytes / 1024 for r in rows])]),
        (
            "ms per step",
            [
                ("wall", [r.ms_per_step for r in rows]),
                ("CPU", [r.cpu_ms_per_step for r in rows]),
                ("overhead", [r.overhead_ms for r in rows]),
            ],
        ),
        (
            "seconds (wall, new process)",
            [
                ("resume start-up (to its first step)", [r.first_step_s for r in rows]),
                ("resume --max-steps 1 (whole process)", [r.resume_s for r in rows]),
                ("resume, finished", [r.finished_s for r in rows]),
                ("inspect", [r.inspect_s for r in rows]),
            ],
        ),
        (
            "peak RSS MB (each process)",
            [
                ("replay", [r.replay_rss_mb for r in rows]),
                ("resume start-up", [r.resume_rss_mb for r in rows]),
                ("inspect", [r.inspect_rss_mb for r in rows]),
            ],
        ),
    ]
    for ax, (title, series) in zip(axes, panels):
        for label, ys in series:
            ax.plot(xs, ys, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("executor steps (log)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    png = out / "scale.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return [md, cs, png]
