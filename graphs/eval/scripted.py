"""The scripted side of a case: its model (:class:`CaseModel`) and tools (:class:`CaseTools`).

Both can die inside a chosen call (:class:`SimulatedKill`, or a real SIGKILL).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from nodes import ScriptedChatModel, ToolOutcome, WorkspaceTools, function_schema

from .cases import Case, ToolResult, ToolSpec, expand

__all__ = ["CaseModel", "CaseTools", "CompiledCase", "SimulatedKill", "WorkspaceCaseTools", "compile_case"]


class SimulatedKill(BaseException):
    """Raised inside a tool or model call to stop the process there.

    Not an ``Exception``, so nothing in the graph handles it as a tool error.
    """


@dataclass
class CompiledCase:
    """A case, compiled: the per-role AI messages and the tool results by call id."""

    script: dict[str, list[AIMessage]]
    results: dict[str, ToolResult]
    tool_names: list[str]


def compile_case(case: Case) -> CompiledCase:
    """The case's turns as AI messages per role, and its tool results by call id."""
    script: dict[str, list[AIMessage]] = {}
    results: dict[str, ToolResult] = {}
    names: list[str] = []
    for role, turns in case.script.items():
        flat = expand(turns)
        script[role] = [t.message() for t in flat]
        for t in flat:
            if t.tool is not None:
                if t.tool not in names:
                    names.append(t.tool)
                if t.result is not None:
                    results[str(t.id)] = t.result
    results.update(case.tool_results)
    return CompiledCase(script, results, names)


class CaseTools:
    """The tool executor of a case: scripted results by call id.

    Records every call it really runs in ``executed``; dies (``SimulatedKill`` or SIGKILL) inside
    the call named by ``kill_call`` the first time it is run.

    Args:
        case: The case.
        compiled: The case, compiled.
        kill_call: The call to die in, or None.
        sigkill: Die with a real SIGKILL instead of :class:`SimulatedKill`.
    """

    accepts_scopes = True  # execute(call_id, tool, arguments, scopes)

    def __init__(self, case: Case, compiled: CompiledCase, kill_call: str | None = None, sigkill: bool = False):
        self.case = case
        self.compiled = compiled
        self.kill_call = kill_call
        self.sigkill = sigkill
        self.executed: list[str] = []
        self.raw: dict[str, str] = {}
        self.workspace: Any = None

    def schemas(self) -> list[dict[str, Any]]:
        """The case's tools (or the tools its script calls), as OpenAI-format schemas."""
        specs = self.case.tools or [ToolSpec(name=n) for n in self.compiled.tool_names]
        return [function_schema(s.name, s.description or f"Scripted tool {s.name}.") for s in specs]

    def has_side_effects(self, tool: str) -> bool:
        """Whether the case says ``tool`` has side effects.

        Args:
            tool: The tool's name.

        Returns:
            True when its :class:`ToolSpec` says so.
        """
        return any(s.name == tool and s.side_effects for s in self.case.tools or [])

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Any = ()) -> ToolOutcome:
        """The scripted result of a call, or the workspace's when it has none.

        Args:
            call_id: The call's id.
            tool: The tool's name.
            arguments: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            The outcome; an ``error`` one for a call with no scripted result.
        """
        if self.kill_call is not None and call_id == self.kill_call:
            self.kill_call = None
            if self.sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedKill(f"killed inside tool call {call_id}")
        self.executed.append(call_id)
        spec = self.compiled.results.get(call_id)
        if spec is not None:
            out = spec.outcome(call_id)
        elif self.workspace is not None and tool in self._ws_names():
            out = self.workspace.execute(call_id, tool, arguments, scopes)
        else:
            out = ToolOutcome("error", f"eval: no scripted result for call id {call_id!r} ({tool})")
        self.raw[call_id] = out.output
        return out

    def _ws_names(self) -> set[str]:
        return {s.get("function", s).get("name") for s in self.workspace.schemas()} if self.workspace else set()


class WorkspaceCaseTools(CaseTools):
    """:class:`CaseTools` over a real workspace: the case's ``workspace`` files in a temporary folder.

    The workspace tools' own policy decides (paths resolved, file scopes, risk); calls without a
    scripted result run for real (:class:`nodes.workspace.WorkspaceTools`).

    Args:
        case: The case.
        compiled: The case, compiled.
        root: The workspace folder.
        **kw: :class:`CaseTools` arguments.
    """

    def __init__(self, case: Case, compiled: CompiledCase, root: Path, **kw: Any):
        super().__init__(case, compiled, **kw)
        self.workspace = WorkspaceTools(root)

    def schemas(self) -> list[dict[str, Any]]:
        """The workspace tools' schemas, then the case's other tools."""
        names = self._ws_names()
        own = [s for s in super().schemas() if s["function"]["name"] not in names]
        return [*self.workspace.schemas(), *own]

    def has_side_effects(self, tool: str) -> bool:
        """Whether ``tool`` has side effects, as the workspace or the case says.

        Args:
            tool: The tool's name.

        Returns:
            True when it has.
        """
        return self.workspace.has_side_effects(tool) if tool in self._ws_names() else super().has_side_effects(tool)

    def check(self, tool: str, args: dict[str, Any], scopes: Any = ()) -> Any:
        """The risk, reason and paths of a call: the workspace's policy for its tools.

        Args:
            tool: The tool's name.
            args: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            ``(risk, reason, paths)``.
        """
        if tool in self._ws_names():
            return self.workspace.check(tool, args, scopes)
        return ("medium", f"{tool} has side effects", ()) if super().has_side_effects(tool) else ("low", "", ())

    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Any = ()) -> Any:
        """Check an interrupted call against the workspace (:meth:`~nodes.workspace.WorkspaceTools.recover`).

        Args:
            call_id: The call's id.
            tool: Its tool.
            arguments: Its arguments.
            scopes: The task's file scopes.

        Returns:
            What was found.
        """
        return self.workspace.recover(call_id, tool, arguments, scopes)

    def fingerprint(self, paths: Any) -> Any:
        """What the workspace holds now (:meth:`~nodes.workspace.WorkspaceTools.fingerprint`).

        Args:
            paths: Workspace-relative paths.

        Returns:
            ``({path: sha256, "" when gone}, HEAD or None)``.
        """
        return self.workspace.fingerprint(paths)


class CaseModel(ScriptedChatModel):
    """The case's scripted model; dies inside the model call named by ``kill_at`` (once)."""

    kill_at: tuple[str, int] | None = None
    sigkill: bool = False

    def _answer(self, messages: Any, meta: dict[str, Any]) -> AIMessage:
        if (
            self.kill_at is not None
            and meta.get("role") == self.kill_at[0]
            and int(meta.get("role_call", 0)) == self.kill_at[1]
        ):
            self.kill_at = None
            if self.sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedKill(f"killed inside {meta.get('role')} model call {meta.get('role_call')}")
        return super()._answer(messages, meta)
