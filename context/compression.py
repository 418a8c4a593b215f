"""Tool-result compression: what a prompt gets instead of a long raw output.

The raw output always goes to the artifact store first; compression only shapes the prompt
form, so no byte is ever lost (``ArtifactStore.get(ref)`` returns the exact output).

Rules (DESIGN.md "Tool results", thresholds in chars):

* ``command`` (stdout/stderr) over ``COMMAND_LIMIT`` = 4,000 chars: the first
  ``HEAD_CHARS`` + the last ``TAIL_CHARS`` chars, a one-line summary and the ref.
* ``file_read`` over ``FILE_LIMIT`` = 8,000 chars: path, line range and a snippet of the first
  ``SNIPPET_LINES`` lines (at most ``SNIPPET_CHARS``), and the ref with a ``#L`` fragment.
* ``search`` with more than ``SEARCH_LIMIT`` = 5 results: the first 5, the omitted count and the
  ref. A result is a fenced code section with its path line when the output has fences,
  otherwise a non-empty line.
* Anything still over ``COMMAND_LIMIT`` after its rule is cut as a command output is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COMMAND_LIMIT",
    "FILE_LIMIT",
    "SEARCH_LIMIT",
    "HEAD_CHARS",
    "TAIL_CHARS",
    "SNIPPET_LINES",
    "SNIPPET_CHARS",
    "Compressed",
    "ResultKind",
    "compress_tool_result",
    "split_search_results",
]

COMMAND_LIMIT = 4_000
FILE_LIMIT = 8_000
SEARCH_LIMIT = 5
HEAD_CHARS = 1_200
TAIL_CHARS = 1_200
SNIPPET_LINES = 40
SNIPPET_CHARS = 2_000

ResultKind = Literal["command", "file_read", "search", "other"]


@dataclass(frozen=True)
class Compressed:
    """The prompt form of one tool result.

    ``text``: what enters the prompt; ``compressed``: whether it differs from the raw output;
    ``summary``: one line (always set); ``raw_chars``: length of the raw output in chars.
    """

    text: str
    compressed: bool
    summary: str
    raw_chars: int


def _head_tail(raw: str, ref: str, label: str) -> Compressed:
    n_lines = raw.count("\n") + (0 if raw.endswith("\n") or not raw else 1)
    omitted = len(raw) - HEAD_CHARS - TAIL_CHARS
    summary = f"{label}: {n_lines} lines, {len(raw)} chars; {omitted} chars omitted from the middle; full output: {ref}"
    text = (
        f"{raw[:HEAD_CHARS]}\n[... {omitted} chars omitted ...]\n{raw[-TAIL_CHARS:]}\n[{summary}]"
    )
    return Compressed(text=text, compressed=True, summary=summary, raw_chars=len(raw))


def split_search_results(raw: str) -> list[str]:
    """Split a search output into results (see module doc).

    With fences, a result is a fenced block plus the non-empty line just before its opening
    fence (its path line) when that line is not itself part of an earlier block.
    """
    if "```" not in raw:
        return [ln for ln in raw.splitlines() if ln.strip()]
    lines = raw.splitlines()
    results: list[str] = []
    cur: list[str] = []
    in_fence = False
    last_close = -1
    for i, ln in enumerate(lines):
        fence = ln.lstrip().startswith("```")
        if not in_fence and fence:
            in_fence = True
            head = lines[i - 1] if i - 1 > last_close and i > 0 and lines[i - 1].strip() else None
            cur = ([head] if head is not None else []) + [ln]
        elif in_fence:
            cur.append(ln)
            if fence:
                in_fence = False
                last_close = i
                results.append("\n".join(cur))
    if in_fence and cur:
        results.append("\n".join(cur))
    return results


def compress_tool_result(
    raw: str,
    kind: ResultKind,
    ref: str,
    *,
    path: str | None = None,
) -> Compressed:
    """Compress ``raw`` (a tool output) by the rules of ``kind``; ``ref`` is its artifact ref."""
    n = len(raw)
    if kind == "file_read" and n > FILE_LIMIT:
        lines = raw.splitlines()
        snippet_lines: list[str] = []
        size = 0
        for ln in lines[:SNIPPET_LINES]:
            if size + len(ln) + 1 > SNIPPET_CHARS:
                if not snippet_lines:  # one huge first line (minified code): show its start
                    snippet_lines.append(ln[:SNIPPET_CHARS])
                break
            snippet_lines.append(ln)
            size += len(ln) + 1
        shown = len(snippet_lines)
        where = path or "file"
        summary = (
            f"file read {where}: {len(lines)} lines, {n} chars; showing lines 1-{shown}; "
            f"full text: {ref}; a slice: {ref}#L<start>-<end>"
        )
        text = "\n".join(snippet_lines) + f"\n[{summary}]"
        return Compressed(text=text, compressed=True, summary=summary, raw_chars=n)
    if kind == "search":
        results = split_search_results(raw)
        if len(results) > SEARCH_LIMIT:
            omitted = len(results) - SEARCH_LIMIT
            summary = f"search: {len(results)} results, first {SEARCH_LIMIT} shown, {omitted} omitted; full list: {ref}"
            text = "\n".join(results[:SEARCH_LIMIT]) + f"\n[{summary}]"
            if len(text) > COMMAND_LIMIT:
                inner = _head_tail(text, ref, "search (first 5 results)")
                return Compressed(text=inner.text + f"\n[{summary}]", compressed=True, summary=summary, raw_chars=n)
            return Compressed(text=text, compressed=True, summary=summary, raw_chars=n)
    limit = FILE_LIMIT if kind == "file_read" else COMMAND_LIMIT
    if n > limit:
        return _head_tail(raw, ref, "output" if kind != "command" else "command output")
    first = raw.strip().splitlines()[0] if raw.strip() else "(no output)"
    if len(first) > 100:
        first = first[:97] + "..."
    return Compressed(text=raw, compressed=False, summary=f"{n} chars: {first}", raw_chars=n)
