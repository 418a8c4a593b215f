"""The tools of a recorded trajectory (:class:`ReplayTools`): each call returns its step's recorded observation."""

from __future__ import annotations

import re
from typing import Any

from context import Trajectory, classify_result

from .protocol import ToolOutcome, function_schema

__all__ = ["RECORDED_ERROR", "ReplayTools"]

#: Marks a recorded observation as a failed call (checked on its first 2,000 chars).
RECORDED_ERROR = re.compile(
    r"^(Error|ERROR|error:)|Traceback \(most recent call last\)|command not found|No such file or directory"
    r"|^\[invalid tool call|ERROR:",
    re.M,
)


class ReplayTools:
    """The tools of a recorded trajectory: call ``rec-<i>`` returns step i's recorded observation.

    A call id that is not in the recording is an ``error`` outcome (never a crash). An observation
    matching :data:`RECORDED_ERROR` is returned with status ``error``.

    Args:
        trajectory: The recorded run.
    """

    def __init__(self, trajectory: Trajectory):
        self.trajectory = trajectory
        self.by_id = {f"rec-{i}": s for i, s in enumerate(trajectory.steps, start=1)}

    def schemas(self) -> list[dict[str, Any]]:
        """One schema (any arguments) per tool name the recording uses, sorted by name."""
        names = sorted({s.tool for s in self.trajectory.steps})
        return [function_schema(n, f"Recorded tool {n} (replayed from {self.trajectory.id}).") for n in names]

    def has_side_effects(self, tool: str) -> bool:
        """Always False: a replay changes nothing.

        Args:
            tool: The tool's name.

        Returns:
            False.
        """
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Step i's recorded observation for call ``rec-<i>``, with its compression kind and file.

        Args:
            call_id: ``rec-<i>``.
            tool: Not used: the recording's own tool is.
            arguments: Not used: the recording's own arguments are.

        Returns:
            The recorded outcome, or an ``error`` outcome for a call id not in the recording.
        """
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
