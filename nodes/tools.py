"""The tool node, the tool-executor protocol, the replay tools and ``read_artifact``.

The executor appends ``tool.called`` for each call the model issues; the tool node then runs
every call still pending, one at a time: raw output → artifact store (exact bytes) →
compression → ``tool.result.received`` (its own transaction, so a crash mid-batch keeps the
results already recorded). A successful call resolves the task's open error
(``error.resolved``). Tool output is external content: it never reaches a system message.

Permissions are checked here, in code, for every call: a denied tool or a tool outside
``allowed_tools`` gets a ``permission.denied`` event and a ``denied`` result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig

from context import (
    ArtifactNotFoundError,
    InvalidRefError,
    TaskContext,
    Trajectory,
    classify_result,
    compress_tool_result,
)
from context.compression import ResultKind
from context.events import ErrorResolved, FileModified, PermissionEvent, ToolResultReceived

from .runtime import NodeEnv, NodeRun

__all__ = [
    "CONTROL_TOOLS",
    "READ_ARTIFACT_SCHEMA",
    "ReplayTools",
    "ToolExecutor",
    "ToolOutcome",
    "function_schema",
    "make_tool_node",
    "RECORDED_ERROR",
]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returned: ``status`` ok|error, the raw ``output`` text, its compression
    ``kind``, and for file reads/writes the ``path``."""

    status: str
    output: str
    kind: ResultKind = "command"
    path: str | None = None
    modified: str | None = None


class ToolExecutor(Protocol):
    """Runs the task's tools. ``schemas()`` are OpenAI-format tool dicts offered to the executor."""

    def schemas(self) -> list[dict[str, Any]]: ...
    def has_side_effects(self, tool: str) -> bool: ...
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome: ...


def function_schema(name: str, description: str, properties: dict[str, Any] | None = None,
                    required: Sequence[str] = ()) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = list(required)
    if properties is None:
        params["additionalProperties"] = True
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


READ_ARTIFACT_SCHEMA = function_schema(
    "read_artifact",
    "Fetch the exact text of an artifact ref (artifact://sha256:<hex>, optionally #L<start>-<end>).",
    {"ref": {"type": "string"}},
    ["ref"],
)

#: Tools the nodes handle themselves (not run by a ToolExecutor).
CONTROL_TOOLS = {"complete_step", "submit_plan", "submit_review", "decide_recovery"}

#: Marks a recorded observation as a failed call (checked on its first 2,000 chars).
RECORDED_ERROR = re.compile(
    r"^(Error|ERROR|error:)|Traceback \(most recent call last\)|command not found|No such file or directory"
    r"|^\[invalid tool call|ERROR:",
    re.M,
)


class ReplayTools:
    """Tools of a recorded trajectory: call ``rec-<i>`` returns step i's recorded observation.

    A call id that is not in the recording is an error outcome (never a crash). An observation
    matching :data:`RECORDED_ERROR` is returned with status ``error``.
    """

    def __init__(self, trajectory: Trajectory):
        self.trajectory = trajectory
        self.by_id = {f"rec-{i}": s for i, s in enumerate(trajectory.steps, start=1)}

    def schemas(self) -> list[dict[str, Any]]:
        names = sorted({s.tool for s in self.trajectory.steps})
        return [function_schema(n, f"Recorded tool {n} (replayed from {self.trajectory.id}).") for n in names]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        step = self.by_id.get(call_id)
        if step is None:
            return ToolOutcome("error", f"replay: no recorded step for call id {call_id!r}")
        status = "error" if RECORDED_ERROR.search(step.observation[:2000]) else "ok"
        kind = classify_result(step.tool, step.arguments)
        path = step.arguments.get("path") or step.arguments.get("file_path")
        if not path and isinstance(step.arguments.get("files"), list) and step.arguments["files"]:
            first = step.arguments["files"][0]
            path = first.get("file_path") if isinstance(first, dict) else None
        modified = None
        if step.tool == "str_replace_editor" and step.arguments.get("command") in ("create", "str_replace", "insert"):
            modified = str(path) if path else None
        elif step.tool in ("edit", "create") and isinstance(path, str):
            modified = path
        return ToolOutcome(status, step.observation, kind, str(path) if path else None, modified)


def _read_artifact(env: NodeEnv, arguments: dict[str, Any]) -> ToolOutcome:
    ref = str(arguments.get("ref", ""))
    try:
        data = env.artifacts.get(ref)
    except (InvalidRefError, ArtifactNotFoundError) as exc:
        return ToolOutcome("error", str(exc))
    return ToolOutcome("ok", data.decode("utf-8", errors="replace"), "other")


def make_tool_node(env: NodeEnv, tools: ToolExecutor) -> Callable[[TaskContext, RunnableConfig], dict[str, Any]]:
    """The graph's ``tools`` node: runs every pending call (see module doc)."""

    def tools_node(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "tools", config)
        ctx = run.ctx
        p = ctx.permissions
        for rec in [r for r in ctx.evidence.recent_tool_calls if r.status == "pending"]:
            try:
                args = json.loads(rec.arguments)
            except json.JSONDecodeError:
                args = {"input": rec.arguments}
            if not isinstance(args, dict):
                args = {"input": args}
            denied = rec.tool in p.denied_tools or (
                bool(p.allowed_tools) and rec.tool not in p.allowed_tools and rec.tool != "read_artifact"
            )
            if denied:
                why = "denied_tools" if rec.tool in p.denied_tools else "not in allowed_tools"
                run.commit([
                    run.make("permission.denied", PermissionEvent(call_id=rec.id, tool=rec.tool, arguments=rec.arguments,
                                                                 reason=f"{rec.tool} is {why}"), actor="system"),
                    run.make("tool.result.received", ToolResultReceived(
                        call_id=rec.id, status="denied", result_summary=f"{rec.tool} is {why}; the call was not run"),
                        actor="system"),
                ])
                continue
            out = _read_artifact(env, args) if rec.tool == "read_artifact" else tools.execute(rec.id, rec.tool, args)
            ref = env.artifacts.put(out.output)
            comp = compress_tool_result(out.output, out.kind, ref, path=out.path)
            batch = [run.make("tool.result.received", ToolResultReceived(
                call_id=rec.id, status="ok" if out.status == "ok" else "error", result_summary=comp.text,
                raw_ref=ref, raw_chars=comp.raw_chars, compressed=comp.compressed), actor="tool")]
            if out.modified:
                batch.append(run.make("file.modified", FileModified(path=out.modified, call_id=rec.id, raw_ref=ref),
                                      actor="tool"))
            if out.status == "ok":
                done = {e.id for e in run.ctx.errors.resolved_errors}
                for err in run.ctx.errors.error_history:
                    if err.id not in done:
                        batch.append(run.make("error.resolved", ErrorResolved(
                            error_id=err.id, resolution=f"later call {rec.id} ({rec.tool}) succeeded"), actor="system"))
            run.commit(batch)
        return run.update()

    return tools_node
