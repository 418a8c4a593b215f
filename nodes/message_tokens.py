"""Tokens of chat messages and tool schemas, counted with one text counter (``context.tokens``).

:func:`message_tokens` follows langchain-core's ``count_tokens_approximately`` layout but counts
each text with the given counter, so blocks, transcripts, ``prompt_tokens`` and the bench agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from context.tokens import TokenCounter, counter_for_model

__all__ = ["MESSAGE_FRAMING", "content_text", "message_tokens", "model_counter", "openai_role"]

#: tokens of framing per message (OpenAI's chat format: ``<|start|>role<|message|>...<|end|>``)
MESSAGE_FRAMING = 3


def content_text(content: Any) -> str:
    """A message content as the text a counter reads.

    Args:
        content: A string, or a list of content blocks.

    Returns:
        A string as is; for a list, each text block's text and any other block as JSON, one per line.
    """
    if isinstance(content, str):
        return content
    parts = []
    for b in content if isinstance(content, list) else [content]:
        if isinstance(b, str):
            parts.append(b)
        elif isinstance(b, dict) and b.get("type") == "text":
            parts.append(str(b.get("text", "")))
        else:
            parts.append(json.dumps(b, sort_keys=True, default=str, ensure_ascii=False))
    return "\n".join(parts)


def openai_role(message: BaseMessage) -> str:
    """The role OpenAI's chat format gives ``message``, as langchain-core's converter does.

    Args:
        message: A LangChain chat message.

    Returns:
        ``assistant``, ``user``, ``tool``, ``function``, a ``ChatMessage``'s own role, or for a
        system message ``system`` (or the ``__openai_role__`` it carries, e.g. ``developer``).

    Raises:
        TypeError: A system message's ``__openai_role__`` is not a string.
        ValueError: ``message`` is of no known message class.
    """
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        role = message.additional_kwargs.get("__openai_role__", "system")
        if not isinstance(role, str):
            raise TypeError(f"Expected '__openai_role__' to be a str, got {type(role).__name__}")
        return role
    if isinstance(message, FunctionMessage):
        return "function"
    if isinstance(message, ChatMessage):
        return message.role
    raise ValueError(f"Unknown BaseMessage type {message.__class__}.")


def message_tokens(
    messages: Sequence[BaseMessage], count: TokenCounter, tools: Sequence[dict[str, Any]] | None = None
) -> int:
    """Tokens of ``messages``, and of the ``tools`` schemas, by the text counter ``count``.

    Per message: the content, the role, the name, an AI message's tool calls, a tool message's call
    id, plus ``MESSAGE_FRAMING`` tokens. Structured parts are counted as the JSON the providers'
    clients send, non-ASCII characters as themselves (an escape would count a Chinese character
    as about 4 tokens instead of 1).

    Args:
        messages: The chat messages.
        count: A text counter, ``str -> tokens``.
        tools: OpenAI-format tool schemas, or None.

    Returns:
        Tokens.
    """
    total = count(json.dumps(list(tools), ensure_ascii=False)) if tools else 0
    for m in messages:
        text = content_text(m.content)
        if isinstance(m, AIMessage) and m.tool_calls and not isinstance(m.content, list):
            text += json.dumps(
                [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in m.tool_calls], ensure_ascii=False
            )
        if isinstance(m, ToolMessage):
            text += m.tool_call_id
        text += openai_role(m)
        if m.name:
            text += m.name
        total += count(text) + MESSAGE_FRAMING
    return total


def model_counter(model: Any) -> TokenCounter:
    """The token counter for a chat model, from the provider and model name LangChain reports.

    Args:
        model: A chat model (its ``ls_provider`` and ``ls_model_name``).

    Returns:
        ``context.tokens.counter_for_model("provider:name")``: exact for OpenAI models, the
        upper-bound estimate for others; o200k_base for a model that reports no name (the offline
        scripted and replay models, fakes).
    """
    try:
        ls = model._get_ls_params()
    except Exception:
        ls = {}
    provider, name = ls.get("ls_provider"), ls.get("ls_model_name")
    if not provider or not name:
        return counter_for_model(None)
    return counter_for_model(f"{provider}:{name}")
