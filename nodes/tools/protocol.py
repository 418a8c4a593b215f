"""What a tool executor is to the tool node: the :class:`ToolExecutor` protocol, the
:class:`ToolOutcome` it returns, OpenAI-format tool schemas (:func:`function_schema`), and how
the node calls ``execute`` (:func:`accepts_scopes`, :func:`scoped_execute`)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from context.compression import ResultKind

__all__ = [
    "CONTROL_TOOLS",
    "ToolExecutor",
    "ToolOutcome",
    "accepts_scopes",
    "as_outcome",
    "check_arguments",
    "function_schema",
    "parameters_of",
    "scoped_execute",
]

#: Tools the nodes handle themselves (not run by a ToolExecutor).
CONTROL_TOOLS = {"complete_step", "submit_plan", "submit_review", "decide_recovery"}


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returned: ``status`` ok|error, the raw ``output`` text, its compression
    ``kind``, and for file reads/writes the ``path``; ``modified`` (and ``modified_all`` for
    several files) the files the call changed.

    Freshness (optional; :mod:`context.freshness`): ``reads``, ``(path, sha256 hex)`` of each
    file whose bytes the output was drawn from; ``written``, ``(path, sha256 hex)`` of each file
    the call wrote, after the write; ``head``, the git HEAD commit when it ran (None: not a git
    repository)."""

    status: str
    output: str
    kind: ResultKind = "command"
    path: str | None = None
    modified: str | None = None
    modified_all: tuple[str, ...] = ()
    reads: tuple[tuple[str, str], ...] = ()
    written: tuple[tuple[str, str], ...] = ()
    head: str | None = None


class ToolExecutor(Protocol):
    """Runs the task's tools. ``schemas()`` are OpenAI-format tool dicts offered to the executor.

    Optional class attributes and methods the tool node looks for:

    * ``accepts_scopes = True``: ``execute`` takes a fourth argument, the task's ``file_scopes``
      (``execute(call_id, tool, arguments, scopes)``); without it ``execute`` is called with three
      (:class:`~nodes.workspace.WorkspaceTools` sets it). When the attribute is missing, an
      ``execute`` with a parameter named ``scopes`` gets them too.
    * ``strict_resolution = True``: a success resolves only errors of an earlier call of the same
      tool with the same arguments (default: the open errors of the call's plan step).
    * ``check(tool, arguments, scopes) -> (risk, reason, paths)``: the executor's own policy
      (:func:`nodes.permissions.assess`; raise ``PolicyError`` to refuse).
    * ``recover(call_id, tool, arguments, scopes) -> Recovery``: checks a side-effecting call
      interrupted before its result was recorded (``done``, ``retry`` or ``ask``).
    * ``fingerprint(paths) -> (dict path -> sha256 hex or "" when gone, HEAD commit or None)``:
      what the workspace holds now; the first node after a resume compares it with what the
      task's facts rest on (``fact.stale``, :mod:`context.freshness`).

    ``execute`` returns a :class:`ToolOutcome`, or a plain ``str``: the tool's output, an ``ok``
    result (``ToolOutcome("ok", text)``). Anything else (``bytes``, ``None``, a dict, a
    ToolOutcome whose ``output`` is not a ``str``) is recorded as that call's ``error`` result
    naming the executor class, the tool and what to return; the task goes on (the tool is not run
    again on resume). An exception raised by ``execute`` is the call's ``error`` result too.
    """

    def schemas(self) -> list[dict[str, Any]]: ...
    def has_side_effects(self, tool: str) -> bool: ...
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome | str: ...


def function_schema(
    name: str, description: str, properties: dict[str, Any] | None = None, required: Sequence[str] = ()
) -> dict[str, Any]:
    """An OpenAI-format tool dict ``{"type": "function", "function": {name, description,
    parameters}}``; ``properties`` None: any arguments (``additionalProperties: true``)."""
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
    """Why ``arguments`` do not fit ``tool``'s JSON-schema ``parameters`` (one line naming the
    argument and what the tool takes), or None when they fit (or there is no schema). Checks the
    required keys, the property names (unless ``additionalProperties`` is true) and, where a
    property gives one, its JSON type; nested schemas are not checked."""
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
    """The JSON-schema ``parameters`` of ``tool`` among ``schemas`` (OpenAI-format tool dicts,
    or bare ``{name, parameters}`` ones), or None when no schema names it or gives none."""
    for s in schemas:
        fn = s.get("function", s) if isinstance(s, dict) else None
        params = fn.get("parameters") if isinstance(fn, dict) and fn.get("name") == tool else None
        if isinstance(params, dict):
            return params
    return None


def accepts_scopes(tools: Any) -> bool:
    """Whether ``tools.execute`` takes the file scopes as a fourth argument: the executor's
    ``accepts_scopes`` attribute, else whether ``execute`` has a parameter named ``scopes``."""
    flag = getattr(tools, "accepts_scopes", None)
    if flag is not None:
        return bool(flag)
    try:
        return "scopes" in inspect.signature(tools.execute).parameters
    except (TypeError, ValueError):
        return False


def scoped_execute(tools: Any, call_id: str, tool: str, args: dict[str, Any], scopes: list[str]) -> ToolOutcome:
    """``tools.execute`` with the scopes when it takes them (:func:`accepts_scopes`), as a
    :class:`ToolOutcome` (:func:`as_outcome`). A tool that raises is an ``error`` outcome naming
    the exception, never a crashed graph."""
    try:
        if accepts_scopes(tools):
            out = tools.execute(call_id, tool, args, scopes)
        else:
            out = tools.execute(call_id, tool, args)
    except Exception as exc:  # a crashing tool is an error result, not a crashed graph
        return ToolOutcome("error", f"error: tool {tool} raised {type(exc).__name__}: {exc}")
    return as_outcome(out, tools, tool)


def as_outcome(out: Any, tools: Any, tool: str) -> ToolOutcome:
    """What ``execute`` returned, as a :class:`ToolOutcome`: a ToolOutcome as it is, a ``str`` as
    ``ToolOutcome("ok", out)``; any other value (or a ToolOutcome whose ``output`` is not a
    ``str``) as an ``error`` outcome whose one line names the executor class of ``tools``, the
    ``tool``, the type returned and what to return instead."""
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
