"""The parts of a prompt as taskctx measures and shows them: per-part fingerprints, the cached prefix, the text."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from context.text import escape_controls
from context.tokens import TokenCounter, counter_for_model

from .message_tokens import message_tokens

__all__ = ["cached_prefix_tokens", "fingerprints", "prompt_text"]


def fingerprints(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], count: TokenCounter | None = None
) -> list[str]:
    """Fingerprint each part of a prompt: the tool schemas, then each message in order.

    Args:
        messages: The prompt's messages.
        tools: Its tool schemas (empty: no schema part).
        count: The token counter; default o200k_base.

    Returns:
        ``"<sha256[:16]>:<tokens>"`` per part.
    """
    count = count or counter_for_model(None)
    out = []
    if tools:
        blob = json.dumps(list(tools), sort_keys=True)
        out.append(f"{hashlib.sha256(blob.encode()).hexdigest()[:16]}:{message_tokens([], count, tools)}")
    for m in messages:
        blob = json.dumps(
            {
                "type": m.type,
                "content": m.content,
                "tool_calls": getattr(m, "tool_calls", None),
                "tool_call_id": getattr(m, "tool_call_id", None),
            },
            sort_keys=True,
            default=str,
        )
        out.append(f"{hashlib.sha256(blob.encode()).hexdigest()[:16]}:{message_tokens([m], count)}")
    return out


def cached_prefix_tokens(previous: Sequence[str], current: Sequence[str]) -> int:
    """Tokens of the longest common prefix, in whole parts, of two fingerprint lists.

    Args:
        previous: The fingerprints of the previous call (:func:`fingerprints`).
        current: The fingerprints of this call.

    Returns:
        The tokens of the parts both lists start with.
    """
    total = 0
    for a, b in zip(previous, current):
        if a != b:
            break
        total += int(a.rsplit(":", 1)[1])
    return total


def prompt_text(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> str:
    """The prompt as a person reads it: Markdown, one section per message.

    Args:
        messages: The prompt's messages.
        tools: Its tool schemas (listed by name first).

    Returns:
        The text, ending with a newline.
    """
    parts = []
    if tools:
        names = ", ".join(t.get("function", t).get("name", "?") for t in tools)
        parts.append(f"### tools\n{names}")
    for m in messages:
        head = f"### {m.type}"
        call_id = getattr(m, "tool_call_id", None)
        if call_id:
            head += f" (tool_call_id={call_id})"
        body = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False)
        calls = getattr(m, "tool_calls", None)
        if calls:
            body += "".join(
                f"\n-> tool call {escape_controls(c['name'])} "
                f"{escape_controls(json.dumps(c['args'], sort_keys=True, ensure_ascii=False))} (id={escape_controls(str(c['id']))})"
                for c in calls
            )
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts) + "\n"
