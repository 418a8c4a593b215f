"""Tool-result compression: what a prompt gets instead of a long raw output.

The raw output always goes to the artifact store first; compression only shapes the prompt form,
so no byte is lost (``ArtifactStore.get(ref)`` returns the exact output). Limits are in chars:
a command output over :data:`COMMAND_LIMIT`, a file read over :data:`FILE_LIMIT`, a search with
more than :data:`SEARCH_LIMIT` results; the rules are in docs/design.md "Tool results".
"""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COMMAND_LIMIT",
    "FILE_LIMIT",
    "HEAD_CHARS",
    "SEARCH_LIMIT",
    "SNIPPET_CHARS",
    "SNIPPET_LINES",
    "TAIL_CHARS",
    "Compressed",
    "ResultKind",
    "arguments_ref",
    "compress_arguments",
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


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


_EOL = re.compile(r"\r\n|\r|\n")


def _line_spans(raw: str) -> list[tuple[int, int]]:
    """``(start, end)`` char offsets of each line without its ending.

    Lines split as ``bytes.splitlines`` splits (LF, CRLF, CR), so line numbers match ``#L`` slices.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _EOL.finditer(raw):
        spans.append((pos, m.start()))
        pos = m.end()
    if pos < len(raw):
        spans.append((pos, len(raw)))
    return spans


def _line_of(spans: list[tuple[int, int]], offset: int) -> int:
    """The 1-based number of the line holding char ``offset`` (its ending belongs to it)."""
    return max(1, bisect_right([start for start, _ in spans], offset))


def _long_lines(spans: list[tuple[int, int]], shown: int = 3) -> str:
    """``lines over 4000 chars (...): 1 (1500000 chars), 2 (...)``, the first ``shown`` of them."""
    long = [(i + 1, end - start) for i, (start, end) in enumerate(spans) if end - start > COMMAND_LIMIT]
    text = ", ".join(f"{no} ({size} chars)" for no, size in long[:shown])
    more = f" and {len(long) - shown} more" if len(long) > shown else ""
    return f"lines over {COMMAND_LIMIT} chars (read a part with #C<start>-<end> after the ref): {text}{more}"


def _has_long_line(spans: list[tuple[int, int]]) -> bool:
    return any(end - start > COMMAND_LIMIT for start, end in spans)


def _head_tail(raw: str, ref: str, label: str, *, of_ref: bool = True) -> Compressed:
    """The first ``HEAD_CHARS`` and last ``TAIL_CHARS`` chars with a note.

    ``label``: what the note starts with, its separator included (``"command output: "``).
    ``of_ref``: ``raw`` is the text ``ref`` holds, so the note may give char and line positions
    within it.
    """
    omitted = len(raw) - HEAD_CHARS - TAIL_CHARS
    spans = _line_spans(raw) if of_ref else []
    if of_ref and _has_long_line(spans):
        n = len(raw)
        head = f"{label}{_lines(len(spans))}, {n} chars ({len(raw.encode('utf-8'))} bytes); "
        shown = f"shown: chars 1-{HEAD_CHARS} and {n - TAIL_CHARS + 1}-{n}; {omitted} chars omitted from the middle"
        if len(spans) == 1:
            summary = (
                f"{head}{shown}; full output: {ref} (one line: #C<start>-<end> after the ref reads chars start-end)"
            )
        else:
            first, last = _line_of(spans, HEAD_CHARS), _line_of(spans, n - TAIL_CHARS - 1)
            where = f"line {first}" if first == last else f"lines {first}-{last}"
            part = "" if (first, last) == (1, len(spans)) else f"; the omitted {where}: {ref}#L{first}-{last}"
            summary = f"{head}{shown}, in {where}; {_long_lines(spans)}; full output: {ref}{part}"
    else:
        n_lines = raw.count("\n") + (0 if raw.endswith("\n") or not raw else 1)
        summary = (
            f"{label}{_lines(n_lines)}, {len(raw)} chars; {omitted} chars omitted from the middle; full output: {ref}"
        )
    text = f"{raw[:HEAD_CHARS]}\n[... {omitted} chars omitted ...]\n{raw[-TAIL_CHARS:]}\n[{summary}]"
    return Compressed(text=text, compressed=True, summary=summary, raw_chars=len(raw))


def split_search_results(raw: str) -> list[str]:
    """Split a search output into results.

    Args:
        raw: The search output.

    Returns:
        Its results: with code fences, each fenced block plus the non-empty line just before its
        opening fence (its path line) when that line is not itself part of an earlier block;
        without, each non-empty line.
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


def _label(kind: ResultKind, tool: str | None) -> str:
    """How the note of a cut output starts, its separator included.

    ``command output: `` for a command (the shell tool's kind), ``tool output: <tool>, `` for
    any other tool named, else ``output: ``.
    """
    if kind == "command":
        return "command output: "
    name = re.sub(r"[^A-Za-z0-9_.:-]", "_", tool or "")[:64]
    return f"tool output: {name}, " if name else "output: "


def compress_tool_result(
    raw: str,
    kind: ResultKind,
    ref: str,
    *,
    path: str | None = None,
    tool: str | None = None,
) -> Compressed:
    """The prompt form of a tool output, by the rules of its kind.

    Args:
        raw: The tool output.
        kind: Which rule applies (``command``, ``file_read``, ``search`` or ``other``).
        ref: The artifact ref of the raw output (named in the note of a compressed form).
        path: The file read, for a ``file_read`` (named in its summary).
        tool: The tool's name: the note of a cut ``other`` output names it
            (``[tool output: kv_get, 400 lines, ...]``; a command's stays ``[command output: ...]``;
            characters other than ``A-Za-z0-9_.:-`` as ``_``). None: ``[output: ...]``.

    Returns:
        The prompt form; ``compressed`` is False (and ``text`` is ``raw``) when no rule applied.
    """
    n = len(raw)
    if kind == "file_read" and n > FILE_LIMIT:
        lines = raw.splitlines()
        snippet_lines: list[str] = []
        size = 0
        cut = False
        for ln in lines[:SNIPPET_LINES]:
            if size + len(ln) + 1 > SNIPPET_CHARS:
                if not snippet_lines:  # one huge first line (minified code): show its start
                    snippet_lines.append(ln[:SNIPPET_CHARS])
                    cut = len(ln) > SNIPPET_CHARS
                break
            snippet_lines.append(ln)
            size += len(ln) + 1
        shown = len(snippet_lines)
        where = f"file read {path}" if path else "file read"
        if cut:  # the snippet is the start of line 1
            spans = _line_spans(raw)
            head = f"{where}: {_lines(len(spans))}, {n} chars ({len(raw.encode('utf-8'))} bytes); "
            if len(spans) == 1:
                summary = (
                    f"{head}shown: chars 1-{SNIPPET_CHARS}; full text: {ref} "
                    "(one line: #C<start>-<end> after the ref reads chars start-end)"
                )
            else:
                summary = (
                    f"{head}shown: chars 1-{SNIPPET_CHARS} of line 1 ({len(lines[0])} chars); "
                    f"{_long_lines(spans)}; full text: {ref}; a slice: {ref}#L<start>-<end>"
                )
        else:
            summary = (
                f"{where}: {_lines(len(lines))}, {n} chars; showing lines 1-{shown}; "
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
                inner = _head_tail(text, ref, "search (first 5 results): ", of_ref=False)
                return Compressed(text=inner.text + f"\n[{summary}]", compressed=True, summary=summary, raw_chars=n)
            return Compressed(text=text, compressed=True, summary=summary, raw_chars=n)
    limit = FILE_LIMIT if kind == "file_read" else COMMAND_LIMIT
    if n > limit:
        return _head_tail(raw, ref, _label(kind, tool))
    first = raw.strip().splitlines()[0] if raw.strip() else "(no output)"
    if len(first) > 100:
        first = first[:97] + "..."
    return Compressed(text=raw, compressed=False, summary=f"{n} chars: {first}", raw_chars=n)


def arguments_ref(arguments: str) -> str:
    """The ref of a call's arguments, as the tool node stores them when they are long.

    Args:
        arguments: The call's arguments JSON text (over ``COMMAND_LIMIT`` chars).

    Returns:
        ``artifact://sha256:<hex>`` of its UTF-8 bytes (``surrogatepass``).
    """
    return f"artifact://sha256:{hashlib.sha256(arguments.encode('utf-8', 'surrogatepass')).hexdigest()}"


def compress_arguments(
    arguments: str, *, limit: int = COMMAND_LIMIT, head: int = HEAD_CHARS, tail: int = TAIL_CHARS
) -> tuple[str, bool]:
    """The prompt form of a call's arguments once the call has run.

    Up to ``limit`` chars they are unchanged; over it, every string value longer than
    ``head + tail`` becomes its first ``head`` and last ``tail`` chars around a note
    ``[... N of M chars omitted; full arguments: <ref>]`` (the ref of :func:`arguments_ref`);
    when that is still over ``limit`` (many medium values) or the text is not JSON, the text
    itself is cut the same way (the transcript then shows it as ``{"input": ...}``).

    Args:
        arguments: The call's arguments JSON text.
        limit: The longest arguments shown unchanged (chars; default ``COMMAND_LIMIT``).
        head: Chars kept at the start of a long value (default ``HEAD_CHARS``).
        tail: Chars kept at its end (default ``TAIL_CHARS``).

    Returns:
        ``(text, whether it was compressed)``.
    """
    if len(arguments) <= limit:
        return arguments, False
    try:
        obj = json.loads(arguments)
    except ValueError:
        obj = arguments
    ref = arguments_ref(arguments)
    changed = False

    def cut(v: object) -> object:
        nonlocal changed
        if isinstance(v, str) and len(v) > head + tail:
            changed = True
            omitted = len(v) - head - tail
            return f"{v[:head]}\n[... {omitted} of {len(v)} chars omitted; full arguments: {ref}]\n{v[len(v) - tail :]}"
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items()}
        if isinstance(v, list):
            return [cut(x) for x in v]
        return v

    out = cut(obj)
    text = json.dumps(out, ensure_ascii=False) if not isinstance(out, str) else out
    if len(text) > limit:  # many medium values (or not JSON): the text itself, cut
        omitted = len(arguments) - head - tail
        note = f"[... {omitted} of {len(arguments)} chars omitted; full arguments: {ref}]"
        text, changed = f"{arguments[:head]}\n{note}\n{arguments[len(arguments) - tail :]}", True
    return text, changed
