"""LangChain tools as a :class:`~nodes.tools.ToolExecutor`: :func:`from_langchain_tools`.

``@tool`` functions, ``StructuredTool`` and any ``BaseTool`` (the tools of
``langchain-mcp-adapters`` too) run in taskctx's tool node as they are: their schemas are taken
from the tools (``convert_to_openai_tool``), a call is ``tool.invoke`` (``ainvoke`` for a tool
that is async only, and in an async run), a raised exception or a ``ToolMessage`` of status
``error`` is the call's ``error`` result. The user says which tools have side effects
(:func:`side_effect_names`); those get the tool node's permission marker, approvals, a receipt
per call and :meth:`LangChainTools.recover` on resume, as the workspace tools do.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import GraphBubbleUp

from context.store import ArtifactStoreProtocol

from .builtin import BUILTIN_TOOLS
from .loops import EventLoopBlockedError, bound_loop, run_sync
from .protocol import CONTROL_TOOLS, Recovery, ToolOutcome
from .tool_bytes import bytes_kept, keeping_bytes

__all__ = ["SIDE_EFFECTS_KEY", "LangChainTools", "as_names", "message_text", "side_effect_names"]

#: The key of a tool's ``metadata`` taskctx reads: ``metadata={"taskctx": {"side_effects": True}}``.
SIDE_EFFECTS_KEY = "taskctx"


#: The annotation keys of an MCP tool (``ToolAnnotations``), which ``langchain-mcp-adapters`` puts in its metadata.
_MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _is_mcp(tool: BaseTool) -> bool:
    """Whether ``tool`` is an MCP server's (made by ``langchain-mcp-adapters``, or annotated as one)."""
    module = str(getattr(getattr(tool, "coroutine", None), "__module__", None) or "")
    return module.split(".")[0] == "langchain_mcp_adapters" or any(k in (tool.metadata or {}) for k in _MCP_HINTS)


def _declared(tool: BaseTool) -> bool | None:
    """What ``tool``'s metadata says of its side effects: taskctx's key first, then MCP's annotations.

    An MCP tool is read-only only when annotated ``readOnlyHint: True`` (the MCP specification's
    default is ``False``), so an unannotated one, or one marked ``destructiveHint: True``, has
    side effects. None: the metadata says nothing (a LangChain tool: read-only unless named).
    """
    meta = tool.metadata or {}
    own = meta.get(SIDE_EFFECTS_KEY)
    if isinstance(own, dict) and "side_effects" in own:
        return bool(own["side_effects"])
    if _is_mcp(tool):
        return meta.get("readOnlyHint") is not True
    return None


def as_names(side_effects: str | Iterable[str | BaseTool] | None, argument: str = "side_effects") -> list[str]:
    """The tool names a ``side_effects=`` argument gives, in its order.

    Args:
        side_effects: One name (a ``str`` is one name, not its characters), or names and
            LangChain tools (a tool stands for its ``.name``); None: none.
        argument: The parameter's name, as the error names it (``requires_approval``...).

    Returns:
        The names.

    Raises:
        TypeError: An item is neither a ``str`` nor a LangChain tool (naming it).
    """
    if side_effects is None:
        return []
    if isinstance(side_effects, str | BaseTool):
        side_effects = [side_effects]
    out = []
    for item in side_effects:
        if isinstance(item, BaseTool):
            out.append(item.name)
        elif isinstance(item, str):
            out.append(item)
        else:
            raise TypeError(
                f"{argument} holds {item!r} ({type(item).__name__}); give tool names or tools, "
                f'e.g. {argument}={{"kv_set"}} or {argument}="kv_set"'
            )
    return out


def side_effect_names(
    tools: Sequence[BaseTool], side_effects: str | Iterable[str | BaseTool] | None = ()
) -> frozenset[str]:
    """The names of the tools of ``tools`` that have side effects.

    A tool has side effects when ``side_effects`` names it, or its metadata says so:
    ``metadata={"taskctx": {"side_effects": True}}`` (False: read-only, unless named), else, for
    an MCP tool (one of ``langchain-mcp-adapters``, or with MCP annotations in its metadata),
    unless it is annotated ``readOnlyHint: True``: the MCP default is ``False``, so an MCP tool
    without annotations, or marked ``destructiveHint: True``, has side effects. Any other tool is
    read-only.

    Args:
        tools: The tools.
        side_effects: Names of tools with side effects (:func:`as_names`: one ``str`` is one name).

    Returns:
        The names.

    Raises:
        TypeError: An item of ``side_effects`` is neither a name nor a tool.
        ValueError: ``side_effects`` names a tool that is not in ``tools`` (naming the unknown
            names and the tools there are).
    """
    names = {t.name for t in tools}
    named = set(as_names(side_effects))
    unknown = sorted(named - names)
    if unknown:
        raise ValueError(
            f"side_effects names {', '.join(map(repr, unknown))}, not among the tools "
            f"({', '.join(sorted(names)) or 'none'}); name the tools by their .name"
        )
    return frozenset(named | {t.name for t in tools if _declared(t)})


def message_text(content: Any, artifact: Any = None) -> str:
    """A tool's output as the text the event log records.

    Args:
        content: A ``ToolMessage``'s content: a ``str``, or a list of content blocks (``text``
            blocks give their text; any other block is kept as its JSON).
        artifact: The message's artifact (``response_format="content_and_artifact"``); given as
            JSON when the content is empty (an MCP tool's structured content).

    Returns:
        The text.
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(json.dumps(block, ensure_ascii=False, default=str))
        text = "\n".join(parts)
    else:
        text = json.dumps(content, ensure_ascii=False, default=str)
    if not text and artifact is not None:
        text = json.dumps(artifact, ensure_ascii=False, default=str)
    return text


def _async_only(tool: BaseTool) -> bool:
    """Whether ``tool`` can only be awaited (an ``async def`` ``@tool``, an MCP tool)."""
    return isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None


def _run_config() -> RunnableConfig | None:
    """The LangGraph run config of the node this runs in, for the tool's own run (None: outside a run)."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:
        return None
    # the tool's run is named after the tool, not after the node
    own: RunnableConfig = {k: v for k, v in config.items() if k not in ("run_name", "run_id")}  # type: ignore[assignment]
    return own


def _task_of(config: RunnableConfig | None) -> str:
    """The task a call belongs to: the run's ``thread_id`` ("" outside a run)."""
    return str(((config or {}).get("configurable") or {}).get("thread_id") or "")


def _outcome(tool: str, msg: Any, kept: Sequence[bytes] = ()) -> ToolOutcome:
    """What ``tool.invoke(tool_call)`` returned, as a :class:`ToolOutcome`.

    ``kept``: the ``bytes`` the tool returned (:func:`~nodes.tools.tool_bytes.bytes_kept`): the
    outcome's ``raw``, its text decoded (UTF-8, undecodable bytes as U+FFFD).
    """
    if isinstance(msg, ToolMessage):
        status = "error" if msg.status == "error" else "ok"
        if kept and status == "ok":
            return ToolOutcome("ok", kept[-1].decode("utf-8", "replace"), "other", raw=kept[-1])
        return ToolOutcome(status, message_text(msg.content, msg.artifact), "other")
    if isinstance(msg, str):
        return ToolOutcome("ok", msg, "other")
    return ToolOutcome(
        "error",
        f"error: tool {tool} returned {type(msg).__name__}; a tool run by taskctx returns its output "
        "(text, content blocks or bytes), not a LangGraph Command",
        "other",
    )


def _raised(tool: str, exc: Exception) -> ToolOutcome:
    return ToolOutcome("error", f"error: tool {tool} raised {type(exc).__name__}: {exc}", "other")


class LangChainTools:
    """LangChain tools (``BaseTool``: ``@tool``, ``StructuredTool``, MCP tools) as a ToolExecutor.

    Each call is ``tool.invoke(ToolCall)`` with the node's run config (the tool's run nests in the
    graph's trace); an async-only tool is awaited on an event loop of its own in a sync run (one
    bound to a session's loop on that loop, or an :class:`~nodes.tools.loops.EventLoopBlockedError`
    when the sync run blocks it), on the run's loop in an async one (:meth:`aexecute`). A tool with side effects
    (:func:`side_effect_names`) writes a receipt per call in ``receipts_dir`` before it starts and
    after it returns, keyed by the task (the run's ``thread_id``) and the call id:
    :meth:`recover` reads it after a crash. Tool arguments injected by LangGraph's own tool node
    (``InjectedState``, ``ToolRuntime``) are not given.

    Args:
        tools: The tools; their names are the tools' names.
        side_effects: Names of tools with side effects (besides those their metadata marks; one
            ``str`` is one name).
        receipts_dir: The folder of the receipts (None: none kept; an interrupted call with side
            effects is then put to the user before it runs again).
        artifacts: Where a finished call's receipt stores its output (None: in the receipt).

    Raises:
        TypeError: An item of ``tools`` is not a LangChain ``BaseTool``.
        ValueError: Two tools share a name, a name is one taskctx uses itself, or ``side_effects``
            names a tool that is not there.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        side_effects: str | Iterable[str | BaseTool] | None = (),
        receipts_dir: str | Path | None = None,
        artifacts: ArtifactStoreProtocol | None = None,
    ):
        for t in tools:
            if not isinstance(t, BaseTool):
                raise TypeError(
                    f"{t!r} is not a LangChain tool: pass BaseTool objects (a function decorated with "
                    "langchain_core.tools.tool, a StructuredTool, MCP tools) or a taskctx ToolExecutor"
                )
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            dup = sorted({t.name for t in tools if [u.name for u in tools].count(t.name) > 1})
            raise ValueError(f"two tools are named {', '.join(map(repr, dup))}; give each tool its own name")
        taken = sorted(set(self.tools) & (CONTROL_TOOLS | set(BUILTIN_TOOLS)))
        if taken:
            raise ValueError(
                f"tool name {', '.join(map(repr, taken))} is one taskctx's nodes use themselves; rename the tool "
                "(e.g. @tool('my_name') or tool.name = 'my_name')"
            )
        self.side_effects = side_effect_names(tools, side_effects)
        self.receipts_dir = Path(receipts_dir) if receipts_dir is not None else None
        self.artifacts = artifacts
        self._schemas = [convert_to_openai_tool(t) for t in tools]
        self._run_tools = {t.name: keeping_bytes(t) for t in tools}  # what runs: bytes kept as they are

    def schemas(self) -> list[dict[str, Any]]:
        """The tools' OpenAI-format schemas (``convert_to_openai_tool``), in the tools' order."""
        return [dict(s) for s in self._schemas]

    def has_side_effects(self, tool: str) -> bool:
        """Whether ``tool`` was declared to have side effects (:func:`side_effect_names`)."""
        return tool in self.side_effects

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one call: ``tool.invoke`` (an async-only tool awaited on a loop of its own).

        Args:
            call_id: The call's id (the ``ToolCall``'s id; a receipt's key).
            tool: The tool's name.
            arguments: The call's arguments.

        Returns:
            The outcome: ``ok`` with the output's text (:func:`message_text`), ``error`` for a
            ``ToolMessage`` of status error, an exception raised (named) or an unknown tool.

        Raises:
            EventLoopBlockedError: The tool is bound to an event loop (an MCP tool of an open
                session) that this sync call blocks, or that is not running
                (:func:`~nodes.tools.loops.run_sync`); the tool did not start.
        """
        t = self.tools.get(tool)
        if t is None:
            return self._unknown(tool)
        config = _run_config()
        receipt = self._started(_task_of(config), call_id, tool, arguments)
        call = {"type": "tool_call", "id": call_id, "name": tool, "args": arguments}
        run = self._run_tools[tool]
        try:
            with bytes_kept() as kept:
                if _async_only(t):
                    msg = run_sync(lambda: run.ainvoke(call, config), tool, bound_loop(t))
                else:
                    msg = run.invoke(call, config)
            out = _outcome(tool, msg, kept)
        except EventLoopBlockedError:  # the tool never started: no receipt, the graph stops with the error
            self._discard(receipt)
            raise
        except GraphBubbleUp:  # a tool's own interrupt(): LangGraph's to handle
            raise
        except Exception as exc:  # a crashing tool is an error result, not a crashed graph
            out = _raised(tool, exc)
        self._finished(receipt, out)
        return out

    def aexecute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Coroutine[Any, Any, ToolOutcome]:
        """Run one call the async way: ``await tool.ainvoke``.

        The run config and the task are read when this is called (on the tool node's thread),
        the coroutine then runs on the run's event loop.

        Args:
            call_id: The call's id.
            tool: The tool's name.
            arguments: The call's arguments.

        Returns:
            A coroutine giving the outcome, as :meth:`execute`'s.
        """
        config = _run_config()
        return self._arun(config, call_id, tool, arguments)

    async def _arun(
        self, config: RunnableConfig | None, call_id: str, tool: str, arguments: dict[str, Any]
    ) -> ToolOutcome:
        t = self.tools.get(tool)
        if t is None:
            return self._unknown(tool)
        receipt = self._started(_task_of(config), call_id, tool, arguments)
        call = {"type": "tool_call", "id": call_id, "name": tool, "args": arguments}
        try:
            with bytes_kept() as kept:
                msg = await self._run_tools[tool].ainvoke(call, config)
            out = _outcome(tool, msg, kept)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            out = _raised(tool, exc)
        self._finished(receipt, out)
        return out

    def _unknown(self, tool: str) -> ToolOutcome:
        return ToolOutcome("error", f"error: unknown tool {tool!r}; the tools are: {', '.join(self.tools)}", "other")

    # receipts ---------------------------------------------------------------------------
    def receipt(self, task_id: str, call_id: str) -> Path | None:
        """The receipt file of one call of a tool with side effects.

        Args:
            task_id: The task (the run's ``thread_id``).
            call_id: The call's id.

        Returns:
            ``<receipts_dir>/<first 24 hex of sha256(task_id NUL call_id)>.json``; None without
            ``receipts_dir``.
        """
        if self.receipts_dir is None:
            return None
        digest = hashlib.sha256(f"{task_id}\0{call_id}".encode()).hexdigest()[:24]
        return self.receipts_dir / f"{digest}.json"

    def _started(self, task_id: str, call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """Write the ``started`` receipt of a call with side effects (None: no receipt kept)."""
        path = self.receipt(task_id, call_id) if tool in self.side_effects else None
        if path is None:
            return None
        data = {"task_id": task_id, "call_id": call_id, "tool": tool, "status": "started", "path": str(path)}
        _write_json(path, {k: v for k, v in data.items() if k != "path"})
        return data

    def _discard(self, receipt: dict[str, Any] | None) -> None:
        """Remove the ``started`` receipt of a call that did not start after all."""
        if receipt is not None:
            Path(receipt["path"]).unlink(missing_ok=True)

    def _finished(self, receipt: dict[str, Any] | None, out: ToolOutcome) -> None:
        """Write the ``finished`` receipt: the outcome's status and its output (or the output's ref)."""
        if receipt is None:
            return
        path = Path(receipt.pop("path"))
        done = {**receipt, "status": "finished", "outcome": out.status}
        if self.artifacts is not None:
            done["output_ref"] = self.artifacts.put(out.raw if out.raw is not None else out.output)
            if out.raw is not None:
                done["bytes"] = True  # the tool returned bytes: recovered as they are
        else:
            done["output"] = out.output
        _write_json(path, done)

    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> Recovery:
        """What became of a call with side effects interrupted before its result was recorded.

        Args:
            call_id: The call's id.
            tool: Its tool.
            arguments: Its arguments.
            scopes: The task's file scopes (not used).

        Returns:
            ``done`` with the recorded outcome when its receipt says it finished (it is not run
            again); ``retry`` when it has no receipt (it never started); ``ask`` when it was cut
            off while running, or no receipts are kept.
        """
        path = self.receipt(_task_of(_run_config()), call_id)
        if path is None:
            return Recovery("ask", f"{tool} keeps no receipts (no receipts_dir), so whether it ran is not known")
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        except (OSError, ValueError) as exc:
            return Recovery("ask", f"its receipt {path} cannot be read ({exc})")
        if data is None:
            return Recovery("retry", f"{tool} never started (no receipt)")
        if data.get("status") != "finished" or data.get("tool") != tool:
            return Recovery("ask", f"{tool} was cut off while running; it may have had effects")
        ref = data.get("output_ref")
        stored = self.artifacts.get(str(ref)) if ref and self.artifacts else None
        status = "ok" if data.get("outcome") == "ok" else "error"
        text = stored.decode("utf-8", "replace") if stored is not None else str(data.get("output", ""))
        raw = stored if stored is not None and data.get("bytes") else None
        return Recovery(
            "done",
            f"{tool} had finished before the interruption (its receipt)",
            ToolOutcome(status, text, "other", raw=raw),
        )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temp file beside it, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".receipt-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
