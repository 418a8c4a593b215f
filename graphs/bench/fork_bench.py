"""The fork legs of ``taskctx bench --fork``: a fork's time and bytes against the parent's length.

Each leg writes a synthetic task of N executor steps straight into a fresh SQLite project (one
executor run and one tool-node run per step, with the events and attempt keys the real nodes
write) and gives it its latest checkpoint (the fold of its log, as a run leaves it), then forks it
with :func:`graphs.fork.fork_task` three ways, timing each (in-process, the graph already built):

* ``end``: at the end of its last step (the state from its checkpoint, the events after folded on);
* ``early``: at the end of step 50 (no checkpoint at or before it: the fold of the first 50 steps);
* ``middle``: at the end of step N/2 (the fold of half the log: this one grows with the fork point).

The bytes are what the fork wrote: the child's event rows and its checkpoint's rows.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from context import InvalidInputError, TaskContext, new_event, replay

__all__ = ["DEFAULT_FORK_LEGS", "ForkRow", "fork_markdown", "parse_fork_legs", "run_fork_bench", "synthetic_task"]

#: Parent lengths (executor steps) of ``--fork`` when given without a value.
DEFAULT_FORK_LEGS = (100, 1_000, 10_000)
#: The fixed early fork point (executor steps).
EARLY_STEP = 50
#: Forks timed per point (the median is reported).
REPEATS = 5
#: The synthetic executor restarts its transcript every this many steps.
RESTART_EVERY = 20


@dataclass
class ForkRow:
    """One fork leg: the parent's length, and per fork point the median ms and the bytes written."""

    steps: int
    events: int
    end_ms: float
    end_bytes: int
    early_ms: float
    early_bytes: int
    middle_ms: float
    middle_bytes: int


def parse_fork_legs(text: str) -> tuple[int, ...]:
    """The parent lengths of ``--fork``: comma-separated executor steps (each above the early point).

    Args:
        text: E.g. ``"100,1000,10000"``; ``""``: none.

    Returns:
        The lengths.

    Raises:
        InvalidInputError: A value is not a whole number above the early fork point.
    """
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if not part.isdigit() or int(part) <= EARLY_STEP:
            raise InvalidInputError(f"--fork takes executor steps above {EARLY_STEP}, comma-separated; got {part!r}")
        out.append(int(part))
    return tuple(out)


def synthetic_task(stores: Any, task_id: str, steps: int) -> int:
    """Write a task of ``steps`` executor steps: planner, then one executor and one tool-node run per step.

    Each executor run records its ``context.built`` (its transcript restarted every
    :data:`RESTART_EVERY` steps) and its ``tool.called``; each tool-node run the result.

    Args:
        stores: The project's stores.
        task_id: The task.
        steps: Executor steps (each a ``tool.called`` and its ``tool.result.received``).

    Returns:
        The log's last seq.
    """
    events: list[Any] = []

    def run(node: str, *made: Any) -> None:
        key = f"{task_id}#{len(events)}:{node}"  # the cursor the node run started after
        events.extend(e.model_copy(update={"causation_id": key}) for e in made)

    created = {"task_id": task_id, "original_request": "a long synthetic task", "schema_version": 4}
    run("planner", new_event("task.created", created, actor="user"))
    run(
        "planner",
        new_event("plan.created", {"steps": [{"id": "s1", "title": "work through the steps"}]}, actor="agent"),
    )
    run("executor", new_event("step.started", {"step_id": "s1"}, actor="agent"))
    for i in range(1, steps + 1):
        arguments = f'{{"argv": ["echo", "{i}"]}}'
        call = {"call_id": f"c{i}", "step_id": "s1", "tool": "run_command", "arguments": arguments}
        built = {"call": i + 1, "role": "executor", "step_id": "s1", "budget": 8_000, "prompt_tokens": 1_000}
        if i % RESTART_EVERY == 0:  # the transcript restarts, as the executor's does: the state stays bounded
            built.update(transcript_reset=True, keep_last=2)
        run(
            "executor", new_event("context.built", built, actor="system"), new_event("tool.called", call, actor="agent")
        )
        result = {"call_id": f"c{i}", "result_summary": f"{i}\n[exit code 0]", "raw_chars": 20}
        run("tools", new_event("tool.result.received", result, actor="tool"))
    for k in range(0, len(events), 2_000):
        stores.events.append(task_id, events[k : k + 2_000])
    return len(events)


def _graph(project: Any) -> Any:
    """The default graph on the project (a scripted model that is never called here)."""
    from nodes import ScriptedChatModel

    return project.graph(ScriptedChatModel(script={}), memory=False)


def _written(project: Any, child: str) -> int:
    """Bytes of the rows a fork wrote: the child's event rows and its checkpoints and writes."""
    conn = project.conn
    ev = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(id) + LENGTH(kind) + LENGTH(timestamp) + LENGTH(payload) + 16), 0) "
        "FROM taskctx_events WHERE task_id = ?",
        (child,),
    ).fetchone()[0]
    cp = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints WHERE thread_id = ?", (child,)
    ).fetchone()[0]
    wr = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?", (child,)).fetchone()[0]
    return int(ev + cp + wr)


def _timed(project: Any, graph: Any, parent: str, step: int, name: str, repeats: int = REPEATS) -> tuple[float, int]:
    """Median ms of ``repeats`` forks at the end of step ``step`` (``--at`` its seq), and the bytes one wrote."""
    from ..fork import fork_task

    ms, size = [], 0
    at = 3 + 3 * step  # the synthetic log: 3 events before step 1, 3 per step
    for k in range(repeats):
        child = f"{name}-{k}"
        t0 = time.perf_counter()
        fork_task(project, parent, at=at, new_task_id=child, graph=graph)
        ms.append((time.perf_counter() - t0) * 1000)
        size = _written(project, child)
    return statistics.median(ms), size


def run_leg(steps: int, work: Path, repeats: int = REPEATS) -> ForkRow:
    """One leg: a synthetic parent of ``steps`` steps, checkpointed, forked at its end, early and middle.

    Args:
        steps: The parent's executor steps.
        work: A folder for the leg's database.
        repeats: Forks timed per point (the median is kept).

    Returns:
        The measures.
    """
    from ..project import open_project
    from ..runner import thread_config

    with open_project(work / f"fork-{steps}.sqlite") as project:
        graph = _graph(project)
        last = synthetic_task(project.stores, "parent", steps)
        state = replay(project.stores.events.iter("parent"))
        values = {p: getattr(state, p) for p in TaskContext.model_fields}
        graph.update_state(thread_config("parent"), values, as_node="tools")  # the checkpoint a run leaves
        _timed(project, graph, "parent", steps, "warm-up", 1)  # (first-call costs out of the legs)
        end = _timed(project, graph, "parent", steps, "end", repeats)
        early = _timed(project, graph, "parent", EARLY_STEP, "early", repeats)
        middle = _timed(project, graph, "parent", steps // 2, "middle", repeats)
    return ForkRow(steps, last, end[0], end[1], early[0], early[1], middle[0], middle[1])


def run_fork_bench(legs: tuple[int, ...]) -> list[ForkRow]:
    """Run the fork legs, each in a fresh temporary database.

    Args:
        legs: Parent lengths in executor steps.

    Returns:
        One row per leg.
    """
    with tempfile.TemporaryDirectory(prefix="taskctx-fork-bench-") as d:
        return [run_leg(n, Path(d)) for n in legs]


def fork_markdown(rows: list[ForkRow]) -> str:
    """The fork legs as a markdown table.

    Args:
        rows: The legs.

    Returns:
        The table, headed ``## Fork``: per leg the parent's steps and events, and per fork point the
        median ms of a fork and the bytes it wrote.
    """
    out = [
        "## Fork",
        "",
        "| parent steps | parent events | end of last step: ms | bytes | end of step 50: ms | bytes "
        "| end of step N/2: ms | bytes |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        d = asdict(r)
        out.append(
            f"| {r.steps:,} | {r.events:,} | {d['end_ms']:.0f} | {r.end_bytes:,} | {d['early_ms']:.0f} | "
            f"{r.early_bytes:,} | {d['middle_ms']:.0f} | {r.middle_bytes:,} |"
        )
    return "\n".join(out)
