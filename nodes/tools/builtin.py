"""The tools the tool node answers from the task's own stores: ``read_artifact`` and ``search_history``."""

from __future__ import annotations

import json
import re
from typing import Any, get_args

from context import ArtifactNotFoundError, InvalidRefError, parse_ref, slice_lines, summarize_event
from context.events import EventKind

from ..runtime import NodeEnv
from .protocol import ToolOutcome, function_schema

__all__ = [
    "BUILTIN_TOOLS",
    "READ_ARTIFACT_SCHEMA",
    "SEARCH_HISTORY_SCHEMA",
    "read_artifact",
    "search_history",
]

#: The schema names only ``#L`` (every executor prompt carries it); the ``#C`` window is named
#: where it is needed, in the compression note of an output with a long line.
READ_ARTIFACT_SCHEMA = function_schema(
    "read_artifact",
    "Fetch the exact text of an artifact ref (artifact://sha256:<hex>, optionally #L<start>-<end>).",
    {"ref": {"type": "string"}},
    ["ref"],
)

#: A ``#C<start>-<end>`` character window at the end of a ref (after any ``#L`` slice).
_CHARS = re.compile(r"(.*?)#C(\d+)-(\d+)")

SEARCH_HISTORY_SCHEMA = function_schema(
    "search_history",
    "Search this task's event log (tool calls, results, denials, errors, plans) for a text.",
    {"query": {"type": "string"}},
    ["query"],
)

#: Tool names answered by the tool node itself, not by the task's ToolExecutor.
BUILTIN_TOOLS = ("read_artifact", "search_history")

#: Every event kind but ``context.built`` (manifests are large and not history to search).
_SEARCHED_KINDS = tuple(k for k in get_args(EventKind) if k != "context.built")


def read_artifact(env: NodeEnv, arguments: dict[str, Any]) -> ToolOutcome:
    """Answer ``read_artifact``: the artifact a ref names, as stored (its secrets masked).

    The ref may end in ``#L<a>-<b>`` (lines) and then ``#C<start>-<end>`` (characters of the text
    or slice, 1-based, inclusive, as the compression notes count them); a ``#C`` part comes after
    one header line ``[chars <start>-<end> of <total>]``, so any part of any artifact is reachable.

    Args:
        env: The node environment (its artifact store).
        arguments: The call's arguments: ``{"ref": "artifact://sha256:...[#L..][#C..]"}``.

    Returns:
        The text; an ``error`` outcome for a bad or unknown ref or a range that is not
        ``1 <= start <= end`` or starts past the end.
    """
    ref = str(arguments.get("ref", "")).strip()
    m = _CHARS.fullmatch(ref)
    if m is not None:
        ref, start, end = m[1], int(m[2]), int(m[3])
        if not 1 <= start <= end:
            return ToolOutcome("error", f"bad char range #C{m[2]}-{m[3]}: need 1 <= start <= end")
    try:
        r = parse_ref(ref)
        data = env.artifacts.get(f"artifact://sha256:{r.digest}")
    except (InvalidRefError, ArtifactNotFoundError) as exc:
        return ToolOutcome("error", str(exc))
    text = data.decode("utf-8", errors="replace")  # secrets were masked when it was stored
    if r.start is not None:
        text = slice_lines(text.encode("utf-8"), r.start, r.end or r.start).decode("utf-8")
    if m is None:
        return ToolOutcome("ok", text, "other")
    if start > len(text):
        return ToolOutcome(
            "error", f"char range #C{start}-{end} starts past the end ({len(text)} chars); start at {len(text)} or less"
        )
    end = min(end, len(text))
    return ToolOutcome("ok", f"[chars {start}-{end} of {len(text)}]\n{text[start - 1 : end]}", "other")


def search_history(env: NodeEnv, task_id: str, arguments: dict[str, Any], limit: int = 30) -> ToolOutcome:
    """Answer ``search_history``: the task's events whose summary or payload holds the query.

    Args:
        env: The node environment (its event log).
        task_id: The task.
        arguments: The call's arguments: ``{"query": "..."}`` (case-insensitive).
        limit: At most this many events, the newest.

    Returns:
        One ``#seq kind [actor] summary`` line per event; an ``error`` outcome for an empty query.
    """
    query = str(arguments.get("query", "")).strip().lower()
    if not query:
        return ToolOutcome("error", "search_history needs a non-empty query")
    hits = []
    for e in env.events.read(task_id, kinds=_SEARCHED_KINDS):
        line = f"#{e.seq} {e.kind} [{e.actor}] {summarize_event(e)}"
        if query in line.lower() or query in json.dumps(e.payload, ensure_ascii=False).lower():
            hits.append(line)
    if not hits:
        return ToolOutcome("ok", f"(no events match {query!r})\n", "other")
    shown = hits[-limit:]
    more = f"({len(hits) - len(shown)} older matches not shown)\n" if len(hits) > len(shown) else ""
    return ToolOutcome("ok", more + "\n".join(shown) + "\n", "other")
