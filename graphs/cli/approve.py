"""How approval requests are shown and answered (a flag, the terminal, or left pending), and
``taskctx approve``: answer a task's pending approval and continue the run."""

from __future__ import annotations

import sqlite3
import sys
from typing import Annotated, Any

import typer

from context import InvalidInputError, TaskctxError

from ..orchestrator import DEFAULT_DB
from ..report.approval import approval_renderable
from ..runner import pending_approval, run_graph
from .common import (
    DEFAULT_OUT,
    DbOpt,
    OutOpt,
    _db_opt,
    _describe,
    _event_printer,
    _fail,
    _finish,
    _graph_for,
    _open_existing,
    console,
)

__all__ = ["approve"]


def _show_request(req: dict[str, Any]) -> None:
    """Print the approval request ``req`` in full (:func:`graphs.report.approval_renderable`:
    a write as the file, a patch as a diff, a command as its argv, cut only when very long)."""
    console.print(approval_renderable(req))


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


def approve(
    task_id: Annotated[str, typer.Argument(help="The task waiting for an approval.")],
    edit: Annotated[
        str | None, typer.Option("--edit", help="Approve with these arguments instead (JSON object).")
    ] = None,
    reject: Annotated[str | None, typer.Option("--reject", help="Reject the call, with this reason.")] = None,
    respond: Annotated[
        str | None, typer.Option("--respond", help="Do not run the call; send the agent this message.")
    ] = None,
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
                raise InvalidInputError(
                    f'--edit is not valid JSON ({exc}); pass an object such as \'{{"path": "a.txt"}}\''
                ) from exc
            if not isinstance(val, dict):
                raise InvalidInputError("--edit must be a JSON object of the tool's arguments")
            answer = {"action": "edit", "arguments": val}
        elif reject is not None:
            answer = {"action": "reject", "reason": reject}
        elif respond is not None:
            answer = {"action": "respond", "message": respond}
        project = _open_existing(db)
        g, _ = _graph_for(project, task_id)
        req = pending_approval(g, task_id)
        if req is None:
            raise InvalidInputError(
                f"task {task_id!r} has no pending approval; nothing to answer "
                f"(see `taskctx inspect {task_id}{_db_opt(db)}`)"
            )
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
