"""What a tool executor is to the tool node: :class:`ToolExecutor`, its :class:`ToolOutcome`, tool schemas."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from langgraph.errors import GraphBubbleUp

from context import TaskContext
from context.compression import ResultKind
from context.held_secrets import MissingSecretError, reveal_secrets, task_secrets

from .loops import EventLoopBlockedError

__all__ = [
    "CONTROL_TOOLS",
    "Recovery",
    "ToolExecutor",
    "ToolOutcome",
    "accepts_scopes",
    "as_outcome",
    "check_arguments",
    "function_schema",
    "parameters_of",
    "run_off_loop",
    "scoped_execute",
    "secrets_of",
]

T = TypeVar("T")

#: Tools the nodes handle themselves (not run by a ToolExecutor).
CONTROL_TOOLS = {"complete_step", "submit_plan", "submit_review", "decide_recovery"}


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returned.

    Attributes:
        status: ``ok`` or ``error``.
        output: The raw output text.
        kind: How it is compressed: ``command``, ``file_read``, ``search`` or ``other``.
        path: For a file read or write, the file.
        modified: The file the call changed, if any.
        modified_all: Every file the call changed, when several.
        reads: ``(path, sha256 hex)`` of each file the output was drawn from (freshness).
        written: ``(path, sha256 hex)`` of each file the call wrote, after the write (freshness).
        head: The git HEAD commit when it ran (None: not a git repository).
        raw: The output's exact bytes, when the tool returned ``bytes``: they are what the
            artifact store keeps; ``output`` is their text (UTF-8, undecodable bytes as U+FFFD),
            what prompts show. None: the output is ``output`` itself.
    """

    status: str
    output: str
    kind: ResultKind = "command"
    path: str | None = None
    modified: str | None = None
    modified_all: tuple[str, ...] = ()
    reads: tuple[tuple[str, str], ...] = ()
    written: tuple[tuple[str, str], ...] = ()
    head: str | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class Recovery:
    """What an executor's ``recover()`` found of an interrupted call (:func:`nodes.workspace.recover`).

    Attributes:
        state: ``done`` (the outcome to record), ``retry`` (safe to run now) or ``ask`` (needs the
            user's approval).
        note: Why.
        outcome: For ``done``, the outcome to record.
    """

    state: str
    note: str = ""
    outcome: ToolOutcome | None = None


class ToolExecutor(Protocol):
    """Runs the task's tools: what the tool node calls.

    Optional class attributes and methods the tool node looks for:

    * ``accepts_scopes = True``: ``execute`` takes a fourth argument, the task's ``file_scopes``
      (:class:`~nodes.workspace.WorkspaceTools` sets it). When the attribute is missing, an
      ``execute`` with a parameter named ``scopes`` gets them too.
    * ``strict_resolution = True``: a success resolves only errors of an earlier call of the same
      tool with the same arguments (default: the open errors of the call's plan step).
    * ``max_parallel = N``: the most read-only calls (``has_side_effects`` False) of one model
      answer the tool node runs at the same time, in threads (``1``: one by one, for an executor
      that is not thread-safe; default: the tool node's, :data:`~nodes.tools.DEFAULT_MAX_PARALLEL`).
    * ``check(tool, arguments, scopes) -> (risk, reason, paths)``: the executor's own policy
      (:func:`nodes.permissions.assess`; raise ``PolicyError`` to refuse).
    * ``recover(call_id, tool, arguments, scopes) -> Recovery``: checks a call with side effects
      interrupted before its result was recorded (``done``, ``retry`` or ``ask``).
    * ``fingerprint(paths) -> ({path: sha256 hex, "" when gone}, HEAD or None)``: what the
      workspace holds now; the first node after a resume compares it with what the facts rest on.
    * ``async aexecute(call_id, tool, arguments[, scopes])``: ``execute``'s async twin, awaited on
      the graph's event loop when the graph runs async (``ainvoke``, ``astream``); without it,
      ``execute`` runs in the tool node's worker thread there too.

    ``execute`` returns a :class:`ToolOutcome` or a ``str`` (an ``ok`` result). Anything else, or
    an exception, is recorded as the call's ``error`` result; the task goes on.
    """

    def schemas(self) -> list[dict[str, Any]]:
        """The tools offered to the executor, as OpenAI-format tool dicts (:func:`function_schema`)."""
        ...

    def has_side_effects(self, tool: str) -> bool:
        """Whether a call of ``tool`` may change anything (it gets a ``permission.granted`` marker first)."""
        ...

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome | str:
        """Run one call.

        Args:
            call_id: The call's id (stable across resumes: a key for receipts).
            tool: The tool's name.
            arguments: The call's arguments.

        Returns:
            The outcome, or the output text (an ``ok`` result).
        """
        ...


def function_schema(
    name: str, description: str, properties: dict[str, Any] | None = None, required: Sequence[str] = ()
) -> dict[str, Any]:
    """An OpenAI-format tool dict: ``{"type": "function", "function": {name, description, parameters}}``.

    Args:
        name: The tool's name.
        description: What it does, for the model.
        properties: JSON-schema properties of its arguments; None: any arguments
            (``additionalProperties: true``).
        required: The required argument names.

    Returns:
        The tool dict.
    """
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = list(required)
    if properties is None:
        params["additionalProperties"] = True
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, types: Any) -> bool:
    names = [types] if isinstance(types, str) else list(types) if isinstance(types, list) else []
    known = [n for n in names if n in _JSON_TYPES]
    if not known:
        return True  # no type given (or one this check does not know): anything goes
    for n in known:
        if isinstance(value, bool) and n in ("integer", "number"):
            continue
        if isinstance(value, _JSON_TYPES[n]):
            return True
    return False


def check_arguments(tool: str, parameters: dict[str, Any] | None, arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit ``tool``'s JSON-schema ``parameters``, or None when they fit.

    Checks the required keys, the property names (unless ``additionalProperties`` is true) and,
    where a property gives one, its JSON type; nested schemas are not checked.

    Args:
        tool: The tool's name (named in the message).
        parameters: Its JSON-schema ``parameters``; None: no schema, anything fits.
        arguments: The arguments to check.

    Returns:
        One line naming the argument and what the tool takes, or None.
    """
    if not parameters:
        return None
    props: dict[str, Any] = parameters.get("properties") or {}
    takes = ", ".join(props) or "no arguments"
    missing = [k for k in parameters.get("required") or () if k not in arguments]
    if missing:
        return f"{tool} needs {', '.join(map(repr, missing))} (it takes: {takes})"
    if parameters.get("additionalProperties") is not True:
        unknown = [k for k in arguments if k not in props]
        if unknown:
            return f"{tool} has no argument {', '.join(map(repr, unknown))} (it takes: {takes})"
    for k, v in arguments.items():
        t = (props.get(k) or {}).get("type") if isinstance(props.get(k), dict) else None
        if t is not None and not _type_ok(v, t):
            want = t if isinstance(t, str) else " or ".join(map(str, t))
            return f"{tool} argument {k!r} must be of type {want}, not {type(v).__name__}"
    return None


def parameters_of(schemas: Sequence[dict[str, Any]], tool: str) -> dict[str, Any] | None:
    """The JSON-schema ``parameters`` of ``tool`` among ``schemas``.

    Args:
        schemas: OpenAI-format tool dicts, or bare ``{name, parameters}`` ones.
        tool: The tool's name.

    Returns:
        The parameters, or None when no schema names the tool or gives none.
    """
    for s in schemas:
        fn = s.get("function", s) if isinstance(s, dict) else None
        params = fn.get("parameters") if isinstance(fn, dict) and fn.get("name") == tool else None
        if isinstance(params, dict):
            return params
    return None


def accepts_scopes(tools: Any) -> bool:
    """Whether ``tools.execute`` takes the file scopes as a fourth argument.

    Args:
        tools: A tool executor.

    Returns:
        Its ``accepts_scopes`` attribute, else whether ``execute`` has a parameter named ``scopes``.
    """
    flag = getattr(tools, "accepts_scopes", None)
    if flag is not None:
        return bool(flag)
    try:
        return "scopes" in inspect.signature(tools.execute).parameters
    except (TypeError, ValueError):
        return False


#: The event loop of an async run while the tool node runs in its worker thread (:func:`run_off_loop`).
_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar("taskctx_loop", default=None)


async def run_off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread, an executor's ``aexecute`` awaited on this event loop meanwhile.

    Args:
        fn: A sync node body (the tool node's ``__call__``).
        *args: Its arguments.

    Returns:
        What ``fn`` returned.
    """
    token = _LOOP.set(asyncio.get_running_loop())
    try:  # (asyncio.to_thread runs fn in a copy of this context: it sees the loop)
        return await asyncio.to_thread(fn, *args)
    finally:
        _LOOP.reset(token)


def secrets_of(ctx: TaskContext) -> list[str]:
    """The names of the secrets a task uses (its placeholders; :func:`context.held_secrets.task_secrets`).

    Args:
        ctx: The task's state.

    Returns:
        The names: only these are revealed to its tools.
    """
    ident = ctx.identity
    return task_secrets(ident.original_request, ident.constraints, ident.success_criteria)


def scoped_execute(
    tools: Any, call_id: str, tool: str, args: dict[str, Any], scopes: list[str], secrets: list[str] | None = None
) -> ToolOutcome:
    """Run ``tools.execute``, with the scopes when it takes them, as a :class:`ToolOutcome`.

    In an async run (:func:`run_off_loop`) an executor's ``aexecute`` is awaited on the run's
    event loop instead, this thread waiting for it. A tool that raises is an ``error`` outcome
    naming the exception, never a crashed graph; the tool's own ``interrupt()`` (a
    ``GraphInterrupt``, or any ``GraphBubbleUp``) goes through to LangGraph, which pauses the
    graph there and runs the call again on ``Command(resume=...)``. The placeholders of the task's secrets in
    ``args`` are replaced by their values here, for the executor only
    (:func:`context.held_secrets.reveal_secrets`); one the run does not hold is an ``error``
    outcome naming it.

    Args:
        tools: A tool executor.
        call_id: The call's id.
        tool: The tool's name.
        args: The call's arguments.
        scopes: The task's file scopes.
        secrets: The names of the task's secrets (None: every secret the run holds).

    Returns:
        The outcome (:func:`as_outcome`).

    Raises:
        GraphBubbleUp: The tool called ``interrupt()`` (``GraphInterrupt``) or sent a
            ``Command`` to its parent graph (``ParentCommand``).
        EventLoopBlockedError: A tool bound to an event loop was called by a sync run that blocks
            that loop (:mod:`nodes.tools.loops`): the run stops, the tool did not start.
    """
    loop, aexecute = _LOOP.get(), getattr(tools, "aexecute", None)
    run = tools.execute if loop is None or aexecute is None else aexecute
    try:  # the secrets' values go in here only: what the call returns is sealed again by the store
        args = reveal_secrets(args, secrets)
    except MissingSecretError as exc:
        return ToolOutcome("error", f"error: {exc}")
    try:
        out = run(call_id, tool, args, scopes) if accepts_scopes(tools) else run(call_id, tool, args)
        if run is aexecute and loop is not None:
            out = asyncio.run_coroutine_threadsafe(out, loop).result()
    except EventLoopBlockedError:  # the run itself is wrong (a sync run inside the tool's loop): stop it
        raise
    except GraphBubbleUp:  # the tool's own interrupt() (or a Command to a parent graph): LangGraph's to handle
        raise
    except Exception as exc:  # a crashing tool is an error result, not a crashed graph
        return ToolOutcome("error", f"error: tool {tool} raised {type(exc).__name__}: {exc}")
    return as_outcome(out, tools, tool)


def as_outcome(out: Any, tools: Any, tool: str) -> ToolOutcome:
    """What ``execute`` returned, as a :class:`ToolOutcome`.

    Args:
        out: The value returned: a ToolOutcome as it is, a ``str`` as ``ToolOutcome("ok", out)``.
        tools: The executor (its class is named in an error).
        tool: The tool's name.

    Returns:
        The outcome; any other value (or a ToolOutcome whose ``output`` is not a ``str``) is an
        ``error`` outcome naming the executor class, the tool, the type returned and what to return.
    """
    if isinstance(out, str):
        return ToolOutcome("ok", out)
    if isinstance(out, ToolOutcome) and isinstance(out.output, str):
        return out
    what = (
        f"a ToolOutcome whose output is {type(out.output).__name__}"
        if isinstance(out, ToolOutcome)
        else type(out).__name__
    )
    return ToolOutcome(
        "error",
        f"error: {type(tools).__name__}.execute returned {what} for tool {tool!r}; "
        'return a str (the output) or ToolOutcome("ok" or "error", output: str) from execute',
    )
