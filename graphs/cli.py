"""The ``taskctx`` command line (typer + rich).

Commands: ``demo``, ``replay``, ``resume``, ``inspect``, ``run``, ``bench``. Every run exports
``<out>/<task_id>/`` (trace.jsonl, state.json, context_pack.md, manifests.jsonl). Bad input
prints one line naming the problem and the fix, and exits with code 2; nothing already recorded
is changed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from context import Event, InvalidInputError, TaskctxError, TaskContext, UnknownTaskError, load_trajectory
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools

from .orchestrator import DEFAULT_DB, Project, build_orchestrator, new_task, open_project
from .runner import RunResult, export_run, run_graph, thread_config

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="taskctx: structured task context for LangGraph agents.")
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

from .bench import bench as _bench  # noqa: E402

app.command("bench")(_bench)

DbOpt = Annotated[str, typer.Option("--db", help="SQLite file of checkpoints, event log and artifacts.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Folder the run is exported to (<out>/<task_id>/).")]
DEFAULT_OUT = Path(".taskctx/runs")


def _fail(msg: str) -> None:
    err.print("error: " + " ".join(msg.split()), markup=False)
    raise typer.Exit(2)


def _event_printer(total: int | None = None):
    def show(e: Event) -> None:
        p = e.payload
        if e.kind == "context.built":
            console.print(
                f"  call {p['call']:>3} {p['role']:<9} step {p['step_id'] or '-':<4} prompt {p['prompt_tokens']:>5} tok"
                f" (budget {p['budget']}, cached prefix {p['cached_prefix_tokens']:>5})"
                f" blocks {p['blocks_in']} in / {p['blocks_out']} out" + ("  [transcript restarted]" if p["transcript_reset"] else ""),
                markup=False,
            )
        elif e.kind == "tool.result.received":
            console.print(f"      tool result {p['call_id']}: {p['status']} ({p['raw_chars']} chars"
                          + (", compressed" if p["compressed"] else "") + ")", markup=False)
        elif e.kind in ("plan.created", "plan.updated", "step.started", "step.completed", "error.occurred",
                        "error.resolved", "recovery.decided", "review.completed", "task.completed", "resume.started"):
            from context import summarize_event

            console.print(f"  [{e.seq}] {e.kind}: {summarize_event(e)}", markup=False)
    return show


def _graph_for(project: Project, task_id: str) -> tuple[Any, dict[str, Any]]:
    spec = project.stores.tasks.get(task_id)
    if spec is None:
        raise UnknownTaskError(f"no task {task_id!r} in {project.path}; check the id and --db (tasks: "
                               f"{', '.join(project.stores.events.task_ids()) or 'none'})")
    budget = int(spec.get("budget", DEFAULT_BUDGET))
    kind = spec.get("kind")
    if kind == "replay":
        traj = load_trajectory(str(spec["source"]))
        g = build_orchestrator(ReplayChatModel(trajectory=traj), tools=ReplayTools(traj),
                               checkpointer=project.checkpointer, stores=project.stores, budget=budget)
    elif kind == "demo":
        from .demo import DemoTools, demo_model

        g = build_orchestrator(demo_model(), tools=DemoTools(), checkpointer=project.checkpointer,
                               stores=project.stores, budget=budget)
    elif kind == "run":
        g = build_orchestrator(str(spec["model"]), checkpointer=project.checkpointer, stores=project.stores,
                               budget=budget)
    else:
        raise InvalidInputError(f"task {task_id!r} has an unknown kind {kind!r} in {project.path}")
    return g, spec


def _finish(project: Project, result: RunResult, out: Path) -> None:
    folder = export_run(project.stores, result.task_id, out)
    s = result.state
    if result.stopped_early:
        console.print(f"stopped after {s.progress.executor_steps} executor steps; next: {', '.join(result.next_nodes)}."
                      f" Continue with: taskctx resume {result.task_id}", markup=False)
    else:
        console.print(f"task {result.task_id}: {s.control.status}; {s.progress.executor_steps} executor steps, "
                      f"{s.events.cursor} events", markup=False)
    console.print(f"exported {folder}/ (trace.jsonl, state.json, context_pack.md, manifests.jsonl)", markup=False)


def _open(db: str) -> Project:
    return open_project(db)


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="A recorded trajectory (.jsonl).")],
    task_id: Annotated[str | None, typer.Option("--task-id", help="Thread/task id (default: the trajectory id).")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N executor steps.")] = None,
    budget: Annotated[int, typer.Option("--budget", min=1000, help="Prompt budget in tokens.")] = DEFAULT_BUDGET,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Run the whole graph over a recorded trajectory (replay model + replay tools)."""
    try:
        traj = load_trajectory(file)
        tid = task_id or traj.id
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; continue it with `taskctx resume {tid}` or pick another --task-id")
        project.stores.tasks.register(tid, {"kind": "replay", "source": str(Path(file).resolve()), "budget": budget})
        g = build_orchestrator(ReplayChatModel(trajectory=traj), tools=ReplayTools(traj),
                               checkpointer=project.checkpointer, stores=project.stores, budget=budget)
        console.print(f"replay {traj.id}: {len(traj.steps)} recorded steps, budget {budget} tokens, task {tid}", markup=False)
        result = run_graph(g, project.stores, tid, new_task(traj.request, tid), stop_after=max_steps,
                           on_event=_event_printer())
        _finish(project, result, out)
    except TaskctxError as exc:
        _fail(str(exc))


@app.command()
def resume(
    task_id: Annotated[str, typer.Argument(help="The task (thread) to continue.")],
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N more executor steps.")] = None,
    budget: Annotated[int | None, typer.Option("--budget", min=1000, help="New prompt budget in tokens.")] = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Continue a task from its last checkpoint (records resume.started; never redoes a finished step)."""
    try:
        if not Path(db).exists():
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = _open(db)
        spec = project.stores.tasks.get(task_id)
        if budget is not None and spec is not None:
            project.stores.tasks.register(task_id, {**spec, "budget": budget})
        g, _ = _graph_for(project, task_id)
        snap = g.get_state(thread_config(task_id))
        if snap.values and not snap.next:
            console.print(f"task {task_id} is already finished ({TaskContext.model_validate(snap.values).control.status});"
                          " nothing to resume", markup=False)
            return
        done = TaskContext.model_validate(snap.values).progress.executor_steps if snap.values else 0
        stop = done + max_steps if max_steps else None
        console.print(f"resume {task_id} at checkpoint {snap.config['configurable'].get('checkpoint_id')} "
                      f"({done} executor steps done; next: {', '.join(snap.next)})", markup=False)
        result = run_graph(g, project.stores, task_id, None, stop_after=stop, resume=True, on_event=_event_printer())
        _finish(project, result, out)
    except TaskctxError as exc:
        _fail(str(exc))


@app.command()
def inspect(
    task_id: Annotated[str, typer.Argument(help="The task to show.")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print the TaskContext as JSON.")] = False,
) -> None:
    """Print a task's state as a person reads it."""
    from .inspect import render_state

    try:
        if not Path(db).exists():
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = _open(db)
        events = project.stores.events.read(task_id)
        if not events:
            raise UnknownTaskError(f"no task {task_id!r} in {db} (tasks: {', '.join(project.stores.events.task_ids()) or 'none'})")
        from context import replay as fold

        ctx = fold(events)
        if as_json:
            sys.stdout.write(ctx.model_dump_json(indent=2) + "\n")
            return
        snap = project.checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
        checkpoints = [c.config["configurable"]["checkpoint_id"] for c in project.checkpointer.list(
            {"configurable": {"thread_id": task_id}}, limit=5)]
        render_state(console, ctx, events, checkpoints, snap is not None)
    except TaskctxError as exc:
        _fail(str(exc))


@app.command()
def run(
    request: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="Folder the agent works in.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    budget: Annotated[int, typer.Option("--budget", min=1000)] = DEFAULT_BUDGET,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1)] = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Drive the graph with a real chat model (any LangChain provider)."""
    import uuid

    if not model:
        _fail("no model given: pass --model provider:name (e.g. openai:gpt-4o); to run offline use "
              "`taskctx demo` or `taskctx replay FILE`")
    try:
        from nodes import resolve_model

        chat = resolve_model(str(model))
        tid = task_id or f"task-{uuid.uuid4().hex[:8]}"
        project = _open(db)
        if project.stores.tasks.get(tid) is not None:
            _fail(f"task {tid!r} already exists in {db}; use `taskctx resume {tid}` or another --task-id")
        project.stores.tasks.register(tid, {"kind": "run", "model": model, "budget": budget,
                                            "workspace": str(workspace.resolve()) if workspace else None})
        g = build_orchestrator(chat, checkpointer=project.checkpointer, stores=project.stores, budget=budget)
        result = run_graph(g, project.stores, tid, new_task(request, tid), stop_after=max_steps, on_event=_event_printer())
        _finish(project, result, out)
    except TaskctxError as exc:
        _fail(str(exc))


@app.command()
def demo(
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
) -> None:
    """Offline demo: plan → execute → fail → recover → interrupted → resumed → reviewed."""
    import uuid

    from .demo import DEMO_REQUEST, DEMO_STOP_AFTER, DemoTools, demo_model

    try:
        tid = task_id or f"demo-{uuid.uuid4().hex[:6]}"
        project = _open(db)
        if project.stores.tasks.get(tid) is not None:
            _fail(f"task {tid!r} already exists in {db}; pick another --task-id")
        project.stores.tasks.register(tid, {"kind": "demo", "budget": DEFAULT_BUDGET})
        console.print(f"demo task {tid} (scripted model, SQLite at {db})\nrequest: {DEMO_REQUEST}", markup=False)
        g = build_orchestrator(demo_model(), tools=DemoTools(), checkpointer=project.checkpointer, stores=project.stores)
        first = run_graph(g, project.stores, tid, new_task(DEMO_REQUEST, tid), stop_after=DEMO_STOP_AFTER,
                          on_event=_event_printer())
        console.print(f"-- interrupted after {first.state.progress.executor_steps} executor steps "
                      f"(checkpoint kept; next: {', '.join(first.next_nodes)}); resuming with a new graph --", markup=False)
        g2, _ = _graph_for(project, tid)
        result = run_graph(g2, project.stores, tid, None, resume=True, on_event=_event_printer())
        _finish(project, result, out)
        console.print(f"inspect it: taskctx inspect {tid}" + (f" --db {db}" if db != DEFAULT_DB else ""), markup=False)
    except TaskctxError as exc:
        _fail(str(exc))


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
