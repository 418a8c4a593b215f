"""A list of tools as one :class:`~nodes.tools.ToolExecutor`: :func:`from_langchain_tools`, :class:`ToolSet`.

``build_orchestrator(model, tools=[...])``, ``make_executor_node`` and ``make_tool_node`` take a
ToolExecutor or a list of LangChain tools and ToolExecutors; :func:`executor_of` makes the one
executor the nodes run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from context.literals import RiskLevel
from context.store import ArtifactStoreProtocol

from .langchain_tools import LangChainTools, as_names, side_effect_names
from .protocol import Recovery, ToolExecutor, ToolOutcome, accepts_scopes, as_outcome

__all__ = ["ToolSet", "executor_of", "from_langchain_tools"]


def _is_executor(obj: Any) -> bool:
    return not isinstance(obj, BaseTool) and all(callable(getattr(obj, m, None)) for m in ("schemas", "execute"))


def _names(executor: Any) -> list[str]:
    out = []
    for s in executor.schemas():
        fn = s.get("function", s) if isinstance(s, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out.append(str(fn["name"]))
    return out


class ToolSet:
    """Several ToolExecutors as one: each call goes to the executor that offers its tool.

    The optional parts of the protocol are passed on per tool: ``check`` (an executor without one
    gets the tool node's default: ``medium`` risk for a tool with side effects), ``recover``
    (without one: ``ask``), the file scopes (to an executor that takes them), ``aexecute``
    (without one, ``execute`` runs in a worker thread); ``fingerprint`` is the first executor's
    that has one; ``max_parallel`` the lowest; ``strict_resolution`` when any says so.

    Args:
        executors: The executors, each offering tools the others do not.

    Raises:
        ValueError: Two executors offer a tool of the same name.
    """

    accepts_scopes = True

    def __init__(self, executors: Sequence[Any]):
        self.executors = list(executors)
        self.owner: dict[str, Any] = {}
        for ex in self.executors:
            for name in _names(ex):
                if name in self.owner:
                    raise ValueError(
                        f"tool {name!r} is offered by both {type(self.owner[name]).__name__} and {type(ex).__name__}; "
                        "give each tool its own name"
                    )
                self.owner[name] = ex
        self.strict_resolution = any(getattr(ex, "strict_resolution", False) for ex in self.executors)
        lows = [int(ex.max_parallel) for ex in self.executors if getattr(ex, "max_parallel", None) is not None]
        if lows:
            self.max_parallel = min(lows)
        prints = [ex for ex in self.executors if callable(getattr(ex, "fingerprint", None))]
        if prints:
            self.fingerprint = prints[0].fingerprint

    def schemas(self) -> list[dict[str, Any]]:
        """Every executor's schemas, in the executors' order."""
        return [s for ex in self.executors for s in ex.schemas()]

    def has_side_effects(self, tool: str) -> bool:
        """Whether the executor that offers ``tool`` says it has side effects (an unknown tool: False)."""
        ex = self.owner.get(tool)
        return bool(ex.has_side_effects(tool)) if ex is not None else False

    def check(self, tool: str, arguments: dict[str, Any], scopes: list[str]) -> tuple[RiskLevel, str, Sequence[str]]:
        """The owning executor's ``check``, or the tool node's default rule.

        Args:
            tool: The tool's name.
            arguments: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            ``(risk, reason, paths written)``.

        Raises:
            PolicyError: The owning executor refuses the call.
        """
        ex = self.owner.get(tool)
        own = getattr(ex, "check", None)
        if own is not None:
            risk, reason, paths = own(tool, arguments, scopes)
            return risk, reason, paths
        if self.has_side_effects(tool):
            return "medium", f"{tool} has side effects", ()
        return "low", "", ()

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> ToolOutcome:
        """Run one call by the executor that offers ``tool``.

        Args:
            call_id: The call's id.
            tool: The tool's name.
            arguments: The call's arguments.
            scopes: The task's file scopes (given to an executor that takes them).

        Returns:
            The outcome (an unknown tool: an ``error`` naming the tools there are).
        """
        ex = self.owner.get(tool)
        if ex is None:
            return ToolOutcome("error", f"error: unknown tool {tool!r}; the tools are: {', '.join(self.owner)}")
        out = (
            ex.execute(call_id, tool, arguments, list(scopes))
            if accepts_scopes(ex)
            else ex.execute(call_id, tool, arguments)
        )
        return as_outcome(out, ex, tool)

    async def aexecute(
        self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()
    ) -> ToolOutcome:
        """:meth:`execute`, the async way: the owner's ``aexecute``, else its ``execute`` in a worker thread.

        Args:
            call_id: The call's id.
            tool: The tool's name.
            arguments: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            The outcome.
        """
        ex = self.owner.get(tool)
        run = getattr(ex, "aexecute", None)
        if run is None:
            return await asyncio.to_thread(self.execute, call_id, tool, arguments, scopes)
        out = await (
            run(call_id, tool, arguments, list(scopes)) if accepts_scopes(ex) else run(call_id, tool, arguments)
        )
        return as_outcome(out, ex, tool)

    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> Recovery:
        """The owning executor's ``recover``, or ``ask`` when it has none.

        Args:
            call_id: The interrupted call's id.
            tool: Its tool.
            arguments: Its arguments.
            scopes: The task's file scopes.

        Returns:
            What was found.
        """
        own = getattr(self.owner.get(tool), "recover", None)
        if own is None:
            return Recovery("ask", "the tool cannot check its own side effects")
        r: Recovery = own(call_id, tool, arguments, list(scopes))
        return r


def from_langchain_tools(
    tools: Sequence[Any],
    *,
    side_effects: str | Iterable[str | BaseTool] | None = (),
    receipts_dir: str | Path | None = None,
    artifacts: ArtifactStoreProtocol | None = None,
) -> ToolExecutor:
    """One ToolExecutor over LangChain tools (``@tool``, ``StructuredTool``, MCP tools) and ToolExecutors.

    Args:
        tools: ``BaseTool`` objects and ToolExecutors (``WorkspaceTools``...), in any order.
        side_effects: Names of the LangChain tools with side effects (one ``str`` is one name),
            besides those whose metadata says ``{"taskctx": {"side_effects": True}}`` and the MCP
            tools not annotated ``readOnlyHint: True``; the rest are read-only.
        receipts_dir: Where the tools with side effects keep a receipt per call, read on resume
            (None: none; an interrupted call is put to the user before it runs again).
        artifacts: Where a receipt keeps a finished call's output (None: in the receipt).

    Returns:
        A :class:`~nodes.tools.LangChainTools` when every item is a LangChain tool, the one
        executor when ``tools`` holds only it, else a :class:`ToolSet` of them.

    Raises:
        TypeError: An item is neither a ``BaseTool`` nor a ToolExecutor.
        ValueError: Two tools share a name, or ``side_effects`` names a tool that is not there.
    """
    lc = [t for t in tools if isinstance(t, BaseTool)]
    others = [t for t in tools if not isinstance(t, BaseTool)]
    for t in others:
        if not _is_executor(t):
            raise TypeError(
                f"{t!r} is neither a LangChain tool nor a ToolExecutor: pass BaseTool objects (a function decorated "
                "with langchain_core.tools.tool, a StructuredTool, MCP tools) or objects with schemas() and execute()"
            )
    if not lc:
        side_effect_names([], side_effects)  # (raises for any name given: no LangChain tool has it)
        return others[0] if len(others) == 1 else ToolSet(others)
    adapted = LangChainTools(lc, side_effects=side_effects, receipts_dir=receipts_dir, artifacts=artifacts)
    if not others:
        return adapted
    at = next(i for i, t in enumerate(tools) if isinstance(t, BaseTool))  # the adapter takes the first one's place
    return ToolSet([*others[:at], adapted, *others[at:]])


def executor_of(
    tools: Any,
    *,
    side_effects: str | Iterable[str | BaseTool] | None = (),
    receipts_dir: str | Path | None = None,
    artifacts: ArtifactStoreProtocol | None = None,
) -> Any:
    """The ToolExecutor the nodes run: ``tools`` itself, or :func:`from_langchain_tools` of a list.

    Args:
        tools: A ToolExecutor, a list (or tuple) of LangChain tools and ToolExecutors, or None.
        side_effects: For a list: the names of its LangChain tools with side effects (one ``str``
            is one name).
        receipts_dir: For a list: where the tools with side effects keep their receipts.
        artifacts: For a list: where the receipts keep a finished call's output.

    Returns:
        The executor (None for None).

    Raises:
        TypeError: ``tools`` is a single LangChain tool, a list item is neither kind, or an item
            of ``side_effects`` is neither a name nor a tool.
        ValueError: ``side_effects`` comes with a ToolExecutor or None, or names a tool not in the list.
    """
    named = sorted(set(as_names(side_effects)))
    if tools is None or _is_executor(tools):
        if named:
            raise ValueError(
                f"side_effects={named} is for a list of LangChain tools; {type(tools).__name__} says which of its "
                "tools have side effects in its has_side_effects()"
            )
        return tools
    if isinstance(tools, BaseTool):
        raise TypeError(f"tools={tools.name!r} is one LangChain tool; pass a list: tools=[{tools.name}]")
    return from_langchain_tools(list(tools), side_effects=named, receipts_dir=receipts_dir, artifacts=artifacts)
