"""``taskctx approve``, and how approval requests are shown and answered.

How approval requests are shown and answered (a flag, the terminal, or left pending), and
``taskctx approve``: answer a task's pending approval and continue the run.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from context import InvalidInputError, TaskContext, TaskctxError
from context.held_secrets import hold_secrets

from ..project import DEFAULT_DB
from ..report.approval import approval_renderable, inspect_hint
from ..report.hints import command_hint
from ..runner import pending_approval, run_graph, thread_config, tool_parameters
from ..task_secrets import parse_secret_options, secrets_to_resume
from .core import DEFAULT_OUT, DbOpt, OutOpt, SecretOpt, console, event_printer, fail_run, finish, open_existing

__all__ = ["answerer", "approve", "check_edited_arguments", "show_request"]


def check_edited_arguments(tool: str, parameters: dict[str, Any] | None, arguments: dict[str, Any]) -> str | None:
    """Why edited arguments do not fit a tool's parameters (one line), or None when they fit.

    Why edited ``arguments`` do not fit ``tool``'s JSON-schema ``parameters`` (one line), or
    None when they fit: :func:`nodes.tools.check_arguments` (the tool node checks an edit the same
    way, whoever answers), so the CLI asks before anything is recorded. Imported when called:
    ``nodes.tools`` loads ``langgraph.types`` and through it langsmith, which ``import graphs.cli``
    does not.
    """
    from nodes.tools import check_arguments

    return check_arguments(tool, parameters, arguments)


def show_request(req: dict[str, Any], db: str = DEFAULT_DB) -> None:
    """Print an approval request in full, as the prompts and ``taskctx approve`` show it.

    A write is shown as the file, a patch as a diff, a command as its argv, cut only when very
    long (:func:`graphs.report.approval.approval_renderable`).

    Args:
        req: The request (an approval interrupt's value).
        db: The ``--db`` the note of a cut view names.
    """
    console.print(approval_renderable(req, full_hint=inspect_hint(str(req.get("task_id") or "TASK_ID"), db)))


def _edit_prompt(req: dict[str, Any]) -> str:
    """The line the edit prompt shows first.

    What the edit prompt shows first: the tool's argument names (required ones marked) and
    the keys of the current arguments.
    """
    params = req.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or ())
    names = ", ".join(k + (" (required)" if k in required else "") for k in props)
    current = req.get("arguments")
    keys = ", ".join(current) if isinstance(current, dict) else ""
    return (
        f"  {req.get('tool')} takes: {names or ('any arguments' if params.get('additionalProperties') else 'see above')}"
        f"; the current arguments have: {keys or '(none)'}"
    )


def _interactive_answer(req: dict[str, Any]) -> dict[str, Any] | None:
    """Ask at the terminal until the answer is valid.

    Ask at the terminal until the answer is valid; an edit must be a JSON object that fits
    the tool's ``parameters`` (when the request carries them; :func:`check_edited_arguments`),
    else the error is shown and the question asked again.
    """
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
            console.print(_edit_prompt(req), markup=False)
            raw = typer.prompt("  new arguments (JSON object)")
            try:
                val = _json.loads(raw)
            except ValueError:
                val = None
            if not isinstance(val, dict):
                console.print("  not a JSON object; try again", markup=False)
                continue
            problem = check_edited_arguments(str(req.get("tool")), req.get("parameters"), val)
            if problem is None:
                return {"action": "edit", "arguments": val}
            console.print(f"  {problem}; try again", markup=False)


def _interactive() -> bool:
    return sys.stdin.isatty()


def answerer(approve_all: bool, deny_all: bool) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """How a run command answers approval requests: a flag, the terminal, or not at all.

    Args:
        approve_all: ``--approve-all``: approve every request.
        deny_all: ``--deny-all``: reject every request.

    Returns:
        The answerer to pass as ``approvals`` (None from it: the request stays pending).

    Raises:
        InvalidInputError: Both flags are given.
    """
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
    request: Annotated[
        str | None,
        typer.Option("--request", help="The request answered (its id, shown with it); any other is left pending."),
    ] = None,
    edit: Annotated[
        str | None, typer.Option("--edit", help="Approve with these arguments instead (JSON object).")
    ] = None,
    reject: Annotated[str | None, typer.Option("--reject", help="Reject the call, with this reason.")] = None,
    respond: Annotated[
        str | None, typer.Option("--respond", help="Do not run the call; send the agent this message.")
    ] = None,
    secret: SecretOpt = None,
    db: DbOpt = DEFAULT_DB,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Answer a task's pending approval (approve by default) and continue the run.

    The answer is bound to one request: the one ``--request`` names, or, without it, the one
    shown (a terminal asks first; a script may answer only the task's first request, since a
    later one may have been put up after what the script saw).
    """
    from langgraph.types import Command

    try:
        answer = _answer_of(edit, reject, respond)
        project = open_existing(db)
        g = project.task_graph(task_id)
        with project.stores.leases.hold(task_id) as owner:  # read and answer under the lease: no answer between
            req = _bound_request(project, g, task_id, request, db)
            if answer["action"] == "edit":
                problem = check_edited_arguments(
                    str(req.get("tool")), tool_parameters(g, str(req.get("tool"))), answer["arguments"]
                )
                if problem is not None:
                    raise InvalidInputError(f"--edit: {problem}; nothing was recorded")
            show_request(req, db)
            if request is None and _interactive() and not typer.confirm(f"  {answer['action']} this request?"):
                console.print("    -> nothing answered; the request stays pending", markup=False)
                project.close()
                return
            if "request_id" in req:
                answer = {**answer, "request_id": req["request_id"]}  # answers exactly this question
            rid = f" (request {req['request_id']})" if req.get("request_id") else ""
            console.print(f"    -> {answer['action']}{rid}", markup=False)
            with hold_secrets(_secrets(g, task_id, secret)):  # the task's secrets, as a resume takes them
                result = run_graph(
                    g,
                    project.stores,
                    task_id,
                    Command(resume=answer),
                    on_event=event_printer(),
                    prune=True,
                    lease_owner=owner,
                )
        if result.waiting is not None:
            show_request(result.waiting, db)
        finish(project, result, out, db)
    except (TaskctxError, sqlite3.Error, OSError) as exc:
        fail_run(exc, db, task_id, out, command="approve")


def _secrets(g: Any, task_id: str, options: list[str] | None) -> dict[str, str]:
    """The values of the task's secrets: ``--secret``, else the environment (:func:`graphs.task_secrets.secrets_to_resume`)."""
    state = TaskContext.model_validate(g.get_state(thread_config(task_id)).values)
    return secrets_to_resume(state, parse_secret_options(options))


def _answer_of(edit: str | None, reject: str | None, respond: str | None) -> dict[str, Any]:
    """The answer ``approve``'s options give (approve by default)."""
    import json as _json

    if sum(x is not None for x in (edit, reject, respond)) > 1:
        raise InvalidInputError("pass at most one of --edit, --reject, --respond")
    if edit is not None:
        try:
            val = _json.loads(edit)
        except ValueError as exc:
            raise InvalidInputError(
                f'--edit is not valid JSON ({exc}); pass an object such as \'{{"path": "a.txt"}}\''
            ) from exc
        if not isinstance(val, dict):
            raise InvalidInputError("--edit must be a JSON object of the tool's arguments")
        return {"action": "edit", "arguments": val}
    if reject is not None:
        return {"action": "reject", "reason": reject}
    if respond is not None:
        return {"action": "respond", "message": respond}
    return {"action": "approve"}


def _bound_request(project: Any, g: Any, task_id: str, request: str | None, db: str) -> dict[str, Any]:
    """The pending request ``approve`` may answer: the one ``--request`` names, or the one shown.

    Without ``--request`` and without a terminal only the task's first request is answered:
    a later one may have been put up after what the script saw (another ``approve`` answered the
    one before it).

    Raises:
        InvalidInputError: Nothing is pending, the request named is not the one pending, or a
            script names none and the pending request is not the task's first.
    """
    req = pending_approval(g, task_id)
    if req is None:
        raise InvalidInputError(
            f"task {task_id!r} has no pending approval; nothing to answer (see `{command_hint('inspect', task_id, db)}`)"
        )
    rid = str(req.get("request_id") or "")
    named = f"request {rid} ({req.get('tool')}, call {req.get('call_id')}, {req.get('risk')} risk)"
    again = command_hint("approve", task_id, db, None, "--request", rid)
    if request is not None and request != rid:
        raise InvalidInputError(
            f"request {request} of task {task_id!r} is not pending (answered, or not this task's); pending now is "
            f"{named}: nothing was answered; to answer that one after reading it: `{again}`"
        )
    if request is None and not _interactive() and rid:
        asked = project.stores.events.read(task_id, kinds=["permission.requested"])
        if asked and asked[0].id != rid:
            raise InvalidInputError(
                f"task {task_id!r} waits on {named}, put up after {len(asked) - 1} earlier request(s) were answered, "
                f"so it may not be the one this script saw: nothing was answered; name it: `{again}`"
            )
    return req
