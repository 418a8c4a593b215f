"""The ``taskctx`` command line (typer + rich).

Commands: ``demo``, ``replay``, ``resume``, ``inspect``, ``run``, ``approve``, ``bench``. Every run exports
``<out>/<task_id>/`` (trace.jsonl, state.json, context_pack.md, manifests.jsonl). Bad input
prints one line naming the problem and the fix, and exits with code 2; nothing already recorded
is changed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from context import BudgetError, Event, InvalidInputError, TaskctxError, TaskContext, UnknownTaskError, load_trajectory
from context.pg_store import redact_url
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools

from .orchestrator import DEFAULT_DB, Project, build_orchestrator, db_exists, new_task, open_project
from .runner import RunResult, export_run, pending_approval, run_graph, run_with_approvals, thread_config

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="taskctx: structured task context for LangGraph agents.")
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

from .bench import bench as _bench  # noqa: E402

app.command("bench")(_bench)

from .report import report_command  # noqa: E402

app.command("report")(report_command)

from .eval import eval_command  # noqa: E402

app.command("eval")(eval_command)

DbOpt = Annotated[str, typer.Option("--db", help="SQLite file, or postgresql:// URL, of checkpoints, event log and artifacts.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Folder the run is exported to (<out>/<task_id>/).")]
DEFAULT_OUT = Path(".taskctx/runs")


def _fail(msg: str) -> None:
    err.print("error: " + " ".join(msg.split()), markup=False)
    raise typer.Exit(2)


def _db_opt(db: str) -> str:
    """`` --db DB`` for a hint (empty for the default), quoted for a shell, password hidden."""
    return f" --db {shlex.quote(redact_url(db))}" if db != DEFAULT_DB else ""


def _describe(exc: BaseException, db: str, task_id: str | None = None) -> str:
    """One line for an error: taskctx errors as they are (a budget error with the command that
    continues the task); database and file errors named."""
    if isinstance(exc, BudgetError) and task_id:
        return f"{exc}: `taskctx resume {task_id} --budget N{_db_opt(db)}` continues with a larger one"
    if isinstance(exc, TaskctxError):
        return str(exc)
    if isinstance(exc, sqlite3.Error):
        return f"database {db} cannot be used: {exc}; check that the file and its folder are writable, or pass another --db"
    return f"{exc}; check the path and its permissions"


_TASK_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def _check_task_id(task_id: str) -> str:
    """Task ids name a thread and an export folder: 1-128 of letters, digits, '-', '_', '.',
    not starting with '.' (so no path separators, no '..', nothing empty)."""
    if not _TASK_ID.fullmatch(task_id):
        raise InvalidInputError(
            f"--task-id {task_id[:60]!r} is not a valid task id; use 1-128 letters, digits, '-', '_' or '.' "
            "(not starting with '.')"
        )
    return task_id


def _prepare_out(out: Path) -> Path:
    """Create the export folder now, so an unwritable --out fails before the run, not after."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".taskctx-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InvalidInputError(f"--out {out} is not writable ({exc.strerror}); pass another --out") from exc
    return out


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
                        "error.resolved", "recovery.decided", "review.completed", "task.completed", "resume.started",
                        "permission.requested", "permission.denied") or (
                            e.kind == "permission.granted" and e.actor == "user"):
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
        from .demo import demo_model, demo_tools

        if not spec.get("workspace"):
            raise InvalidInputError(f"demo task {task_id!r} was recorded by an older taskctx without a workspace; "
                                    "start a new one with `taskctx demo`")
        g = build_orchestrator(demo_model(), tools=demo_tools(str(spec["workspace"]), spec.get("receipts")),
                               checkpointer=project.checkpointer, stores=project.stores, budget=budget)
    elif kind == "run":
        tools = None
        if spec.get("workspace"):
            from nodes import WorkspaceTools

            tools = WorkspaceTools(str(spec["workspace"]), receipts_dir=spec.get("receipts"))
            tools.strict_resolution = True
        g = build_orchestrator(str(spec["model"]), tools=tools, checkpointer=project.checkpointer,
                               stores=project.stores, budget=budget)
    else:
        raise InvalidInputError(f"task {task_id!r} has an unknown kind {kind!r} in {project.path}")
    return g, spec


def _finish(project: Project, result: RunResult, out: Path, db: str) -> None:
    folder = export_run(project.stores, result.task_id, out)
    s = result.state
    req = result.waiting
    if req is not None:
        console.print(f"waiting for approval of {req.get('tool')} (call {req.get('call_id')}, {req.get('risk')} risk). "
                      f"Answer with: taskctx approve {result.task_id}{_db_opt(db)} "
                      "[--edit JSON | --reject REASON | --respond TEXT]",
                      markup=False)
    elif result.stopped_early:
        console.print(f"stopped after {s.progress.executor_steps} executor steps; next: {', '.join(result.next_nodes)}."
                      f" Continue with: taskctx resume {result.task_id}{_db_opt(db)}", markup=False)
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
    tid = task_id  # (named in a budget error's hint)
    try:
        traj = load_trajectory(file)
        tid = _check_task_id(task_id if task_id is not None else traj.id)
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; continue it with `taskctx resume {tid}{_db_opt(db)}` "
                  "or pick another --task-id")
        project.stores.tasks.register(tid, {"kind": "replay", "source": str(Path(file).resolve()), "budget": budget})
        g = build_orchestrator(ReplayChatModel(trajectory=traj), tools=ReplayTools(traj),
                               checkpointer=project.checkpointer, stores=project.stores, budget=budget)
        console.print(f"replay {traj.id}: {len(traj.steps)} recorded steps, budget {budget} tokens, task {tid}", markup=False)
        result = run_graph(g, project.stores, tid, new_task(traj.request, tid), stop_after=max_steps,
                           on_event=_event_printer())
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, tid))


@app.command()
def resume(
    task_id: Annotated[str, typer.Argument(help="The task (thread) to continue.")],
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after N more executor steps.")] = None,
    budget: Annotated[int | None, typer.Option("--budget", min=1000, help="New prompt budget in tokens.")] = None,
    approve_all: Annotated[bool, typer.Option("--approve-all", help="Approve every approval request (scripts).")] = False,
    deny_all: Annotated[bool, typer.Option("--deny-all", help="Reject every approval request (scripts).")] = False,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Continue a task from its last checkpoint (records resume.started; never redoes a finished step).

    Approvals are answered as in ``run``/``demo``: --approve-all, --deny-all, the terminal, or
    left pending for ``taskctx approve`` (the flags of the first run are not remembered)."""
    try:
        answer = _answerer(approve_all, deny_all)
        if not db_exists(db):
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        _prepare_out(out)
        project = _open(db)
        spec = project.stores.tasks.get(task_id)
        if budget is not None and spec is not None:
            project.stores.tasks.register(task_id, {**spec, "budget": budget})
        g, _ = _graph_for(project, task_id)
        snap = g.get_state(thread_config(task_id))
        status = TaskContext.model_validate(snap.values).control.status if snap.values else "idle"
        if not snap.values:
            raise UnknownTaskError(
                f"task {task_id!r} was registered but never started (no checkpoint yet); start it again with the "
                f"same command and --task-id {task_id}")
        if not snap.next and not snap.tasks and status in ("completed", "failed"):
            folder = export_run(project.stores, task_id, out)
            console.print(f"task {task_id} is already finished ({status}); nothing to resume; exported {folder}/",
                          markup=False)
            return
        done = TaskContext.model_validate(snap.values).progress.executor_steps if snap.values else 0
        stop = done + max_steps if max_steps else None
        console.print(f"resume {task_id} at checkpoint {snap.config['configurable'].get('checkpoint_id')} "
                      f"({done} executor steps done; next: {', '.join(snap.next)})", markup=False)
        result = run_with_approvals(g, project.stores, task_id, None, answer=answer, stop_after=stop, resume=True,
                                    on_event=_event_printer(), on_request=_show_request)
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, task_id))


@app.command()
def inspect(
    task_id: Annotated[str, typer.Argument(help="The task to show.")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print the TaskContext as JSON.")] = False,
) -> None:
    """Print a task's state as a person reads it."""
    from .inspect import render_state

    try:
        if not db_exists(db):
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
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db))


ApproveAllOpt = Annotated[bool, typer.Option("--approve-all", help="Approve every approval request (scripts).")]
DenyAllOpt = Annotated[bool, typer.Option("--deny-all", help="Reject every approval request (scripts).")]


def _show_request(req: dict[str, Any]) -> None:
    import json as _json

    args = _json.dumps(req.get("arguments"), sort_keys=True, ensure_ascii=False)
    if len(args) > 600:
        args = args[:597] + "..."
    console.print(f"  approval requested: {req.get('tool')} {args}\n    risk {req.get('risk')}: {req.get('reason')}",
                  markup=False)


def _interactive_answer(req: dict[str, Any]) -> dict[str, Any] | None:
    import json as _json

    while True:
        choice = typer.prompt("  approve [a], edit [e], reject [r], respond [s], stop [q]", default="a").strip().lower()
        if choice in ("a", "approve"):
            return {"action": "approve"}
        if choice in ("r", "reject"):
            return {"action": "reject", "reason": typer.prompt("  reason", default="rejected at the prompt")}
        if choice in ("s", "respond"):
            return {"action": "respond", "message": typer.prompt("  message to the agent")}
        if choice in ("q", "stop"):
            return None
        if choice in ("e", "edit"):
            raw = typer.prompt("  new arguments (JSON object)")
            try:
                val = _json.loads(raw)
            except ValueError:
                val = None
            if isinstance(val, dict):
                return {"action": "edit", "arguments": val}
            console.print("  not a JSON object; try again", markup=False)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _answerer(approve_all: bool, deny_all: bool):
    """How approval requests are answered: a flag, the terminal, or not at all (left pending)."""
    if approve_all and deny_all:
        raise InvalidInputError("--approve-all and --deny-all exclude each other; pass one")

    def answer(req: dict[str, Any]) -> dict[str, Any] | None:
        if approve_all:
            console.print("    -> approved (--approve-all)", markup=False)
            return {"action": "approve"}
        if deny_all:
            console.print("    -> rejected (--deny-all)", markup=False)
            return {"action": "reject", "reason": "rejected by --deny-all"}
        if _interactive():
            return _interactive_answer(req)
        return None
    return answer


def _state_dir(db: str) -> Path:
    """Where a task's workspace copy and command receipts live: beside the SQLite file."""
    return Path(".taskctx") if "://" in db else Path(db).resolve().parent


@app.command()
def approve(
    task_id: Annotated[str, typer.Argument(help="The task waiting for an approval.")],
    edit: Annotated[str | None, typer.Option("--edit", help="Approve with these arguments instead (JSON object).")] = None,
    reject: Annotated[str | None, typer.Option("--reject", help="Reject the call, with this reason.")] = None,
    respond: Annotated[str | None, typer.Option("--respond", help="Do not run the call; send the agent this message.")] = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Answer a task's pending approval (approve by default) and continue the run."""
    import json as _json

    from langgraph.types import Command

    try:
        if sum(x is not None for x in (edit, reject, respond)) > 1:
            raise InvalidInputError("pass at most one of --edit, --reject, --respond")
        answer: dict[str, Any] = {"action": "approve"}
        if edit is not None:
            try:
                val = _json.loads(edit)
            except ValueError as exc:
                raise InvalidInputError(f"--edit is not valid JSON ({exc}); pass an object such as '{{\"path\": \"a.txt\"}}'") from exc
            if not isinstance(val, dict):
                raise InvalidInputError("--edit must be a JSON object of the tool's arguments")
            answer = {"action": "edit", "arguments": val}
        elif reject is not None:
            answer = {"action": "reject", "reason": reject}
        elif respond is not None:
            answer = {"action": "respond", "message": respond}
        if not db_exists(db):
            raise UnknownTaskError(f"no database at {db}; pass the --db the task was started with")
        project = _open(db)
        g, _ = _graph_for(project, task_id)
        req = pending_approval(g, task_id)
        if req is None:
            raise InvalidInputError(f"task {task_id!r} has no pending approval; nothing to answer "
                                    f"(see `taskctx inspect {task_id}{_db_opt(db)}`)")
        _show_request(req)
        if "request_id" in req:
            answer = {**answer, "request_id": req["request_id"]}  # answers exactly this question
        console.print(f"    -> {answer['action']}", markup=False)
        result = run_graph(g, project.stores, task_id, Command(resume=answer), on_event=_event_printer())
        if result.waiting is not None:
            _show_request(result.waiting)
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, task_id))


@app.command()
def run(
    request: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="Folder the agent works in.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    budget: Annotated[int, typer.Option("--budget", min=1000)] = DEFAULT_BUDGET,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1)] = None,
    scope: Annotated[list[str] | None, typer.Option("--scope", help="File scope glob under the workspace (repeatable).")] = None,
    deny_tool: Annotated[list[str] | None, typer.Option("--deny-tool", help="A tool the agent may not use (repeatable).")] = None,
    require_approval: Annotated[list[str] | None, typer.Option("--require-approval", help="A tool that needs approval (repeatable).")] = None,
    approve_all: ApproveAllOpt = False,
    deny_all: DenyAllOpt = False,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Drive the graph with a real chat model (any LangChain provider), on --workspace DIR."""
    import uuid

    if not model:
        _fail("no model given: pass --model provider:name (e.g. openai:gpt-4o); to run offline use "
              "`taskctx demo` or `taskctx replay FILE`")
    tid = task_id  # (named in a budget error's hint)
    try:
        from nodes import resolve_model

        resolve_model(str(model))  # a bad spec fails here, before anything is recorded
        tid = _check_task_id(task_id) if task_id is not None else f"task-{uuid.uuid4().hex[:8]}"
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; use `taskctx resume {tid}{_db_opt(db)}` or another --task-id")
        answer = _answerer(approve_all, deny_all)
        if workspace is not None and not workspace.is_dir():
            raise InvalidInputError(f"--workspace {workspace} is not a folder; pass the folder the agent works in")
        project.stores.tasks.register(tid, {"kind": "run", "model": model, "budget": budget,
                                            "workspace": str(workspace.resolve()) if workspace else None,
                                            "receipts": str(_state_dir(db) / "receipts" / tid)})
        g, _ = _graph_for(project, tid)
        from context import Permissions

        perms = Permissions(denied_tools=list(deny_tool or []), requires_approval=list(require_approval or []),
                            file_scopes=list(scope or []))
        result = run_with_approvals(g, project.stores, tid, new_task(request, tid, permissions=perms), answer=answer,
                                    stop_after=max_steps, on_event=_event_printer(), on_request=_show_request)
        _finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, tid))


@app.command()
def demo(
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    workspace: Annotated[Path | None, typer.Option(
        "--workspace", help="Where the sample workspace is copied (default: workspaces/<task_id> beside --db).")] = None,
    approve_all: ApproveAllOpt = False,
    deny_all: DenyAllOpt = False,
) -> None:
    """Offline demo on a real sample workspace: explore → interrupted → resumed → refused outside
    scope → approved fix → failing test → recovery → tests green → reviewed."""
    import uuid

    from .demo import DEMO_REQUEST, DEMO_STOP_AFTER, copy_sample, demo_model, demo_permissions, demo_tools

    tid = task_id  # (named in a budget error's hint)
    try:
        tid = _check_task_id(task_id) if task_id is not None else f"demo-{uuid.uuid4().hex[:6]}"
        answer = _answerer(approve_all, deny_all)
        _prepare_out(out)
        project = _open(db)
        if project.stores.events.last_seq(tid):
            _fail(f"task {tid!r} already exists in {db}; pick another --task-id")
        ws = (workspace or _state_dir(db) / "workspaces" / tid).resolve()
        spec = project.stores.tasks.get(tid)
        if spec is not None and spec.get("workspace") == str(ws) and ws.is_dir():
            shutil.rmtree(ws)  # a start of this task that recorded nothing (killed at once): start it afresh
        try:
            copy_sample(ws)
        except FileExistsError:
            raise InvalidInputError(f"--workspace {ws} is not empty; pass an empty or new folder") from None
        receipts = _state_dir(db) / "receipts" / tid
        project.stores.tasks.register(tid, {"kind": "demo", "budget": DEFAULT_BUDGET, "workspace": str(ws),
                                            "receipts": str(receipts)})
        console.print(f"demo task {tid} (scripted model, real workspace tools, SQLite at {db})\n"
                      f"workspace: {ws} (a copy of the bundled sample)\nrequest: {DEMO_REQUEST}", markup=False)
        g = build_orchestrator(demo_model(), tools=demo_tools(ws, receipts), checkpointer=project.checkpointer,
                               stores=project.stores)
        first = run_with_approvals(g, project.stores, tid, new_task(DEMO_REQUEST, tid, permissions=demo_permissions()),
                                   answer=answer, stop_after=DEMO_STOP_AFTER, on_event=_event_printer(),
                                   on_request=_show_request)
        if first.stopped_early:
            console.print(f"-- interrupted after {first.state.progress.executor_steps} executor steps "
                          f"(checkpoint kept; next: {', '.join(first.next_nodes)}); resuming with a new graph --",
                          markup=False)
            g2, _ = _graph_for(project, tid)
            result = run_with_approvals(g2, project.stores, tid, None, answer=answer, resume=True,
                                        on_event=_event_printer(), on_request=_show_request)
        else:
            result = first
        _finish(project, result, out, db)
        console.print(f"inspect it: taskctx inspect {tid}{_db_opt(db)}", markup=False)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        _fail(_describe(exc, db, tid))


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
