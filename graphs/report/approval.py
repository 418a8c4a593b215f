"""What an approval asks for, shown in full: one view, drawn on a terminal (rich) and in HTML.

Long arguments are cut to a head and a tail with a note naming the command that prints them
whole; control and bidi characters are shown escaped, so nothing reaches the terminal raw.
"""

from __future__ import annotations

import html as _html
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text

from context.text import escape_controls as _escape

from ..project import DEFAULT_DB
from .hints import command_hint

__all__ = [
    "HEAD_CHARS",
    "HEAD_LINES",
    "MAX_CHARS",
    "MAX_LINES",
    "TAIL_CHARS",
    "TAIL_LINES",
    "ApprovalView",
    "approval_html",
    "approval_renderable",
    "approval_view",
    "escape_controls",
    "html_text",
    "inspect_hint",
]

#: Shown whole up to this many lines ...
MAX_LINES = 200
#: ... and this many chars (after escaping).
MAX_CHARS = 20_000
HEAD_LINES, HEAD_CHARS = 120, 12_000
TAIL_LINES, TAIL_CHARS = 40, 4_000


def escape_controls(text: str) -> str:
    r"""``text`` as a terminal or page may show it: nothing in it acts on the display.

    A CRLF line end is shown as a line end, then :func:`context.text.escape_controls`: lone
    surrogates as U+FFFD, control and bidirectional-control characters (tab and newline kept)
    written as escapes (``"\x1b"``, ``"\u202e"``).

    Args:
        text: Any text.

    Returns:
        The escaped text.
    """
    return _escape(text.replace("\r\n", "\n"))


def html_text(x: Any) -> str:
    """``x`` as HTML text: the one text sink of the report page.

    Args:
        x: Any value (None is the empty text).

    Returns:
        ``str(x)`` with control and bidi characters written as escapes (:func:`escape_controls`),
        then HTML-escaped (quotes too).
    """
    return _html.escape(escape_controls("" if x is None else str(x)), quote=True)


@dataclass(frozen=True)
class ApprovalView:
    """An approval's arguments as shown.

    Attributes:
        title: One line: the tool and what it acts on.
        lexer: A pygments lexer name (``diff``, ``json``, ``text``...).
        line_numbers: Whether lines are numbered.
        head: The text shown first (all of it when nothing is cut).
        tail: The text shown after the note (empty when nothing is cut).
        tail_start: The line number of the tail's first line.
        note: The cut note, or empty.
    """

    tool: str
    title: str
    lexer: str
    line_numbers: bool
    head: str
    tail: str = ""
    tail_start: int = 1
    note: str = ""


def _lines_word(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")


def _cut(text: str, full_hint: str) -> tuple[str, str, int, str]:
    """``(head, tail, tail_start, note)`` of ``text``, already escaped.

    Nothing is cut up to :data:`MAX_LINES` lines and :data:`MAX_CHARS` chars; beyond either, the
    first :data:`HEAD_LINES` lines / :data:`HEAD_CHARS` chars and the last :data:`TAIL_LINES` /
    :data:`TAIL_CHARS`, with a note counting what is not shown and naming ``full_hint``.
    """
    lines = text.split("\n")
    if len(lines) <= MAX_LINES and len(text) <= MAX_CHARS:
        return text, "", 1, ""
    head: list[str] = []
    used = 0
    for ln in lines[:HEAD_LINES]:
        if used + len(ln) + 1 > HEAD_CHARS:
            if not head:
                head.append(ln[: HEAD_CHARS - 1])
            break
        head.append(ln)
        used += len(ln) + 1
    tail: list[str] = []
    used = 0
    k = len(head)
    head_partial = k == 1 and len(head[0]) < len(lines[0])
    rest = lines[k - 1 :] if head_partial else lines[k:]  # a line cut inside may end the tail
    for ln in reversed(rest[-TAIL_LINES:]):
        if used + len(ln) + 1 > TAIL_CHARS:
            if not tail:
                tail.append(ln[-(TAIL_CHARS - 1) :])
            break
        tail.append(ln)
        used += len(ln) + 1
    tail.reverse()
    n, m = len(lines), len(tail)
    tail_partial = m == 1 and len(tail[0]) < len(lines[-1])
    first_cut = k if head_partial else k + 1  # 1-based, the first and last line not shown whole
    last_cut = n - m + 1 if tail_partial else n - m
    hidden_chars = len(text) - len("\n".join(head)) - len("\n".join(tail))
    if not head_partial and not tail_partial:
        what = (
            f"{_lines_word(last_cut - first_cut + 1)} not shown "
            f"(lines {first_cut:,}-{last_cut:,} of {n:,}, {hidden_chars:,} chars)"
        )
    elif first_cut == last_cut:
        what = f"{hidden_chars:,} chars not shown (inside line {first_cut:,} of {n:,})"
    else:
        what = f"{hidden_chars:,} chars not shown (lines {first_cut:,}-{last_cut:,} of {n:,}, partly)"
    note = f"... {what}; the full arguments: {full_hint}"
    return "\n".join(head), "\n".join(tail), n - m + 1, note


def approval_view(
    tool: str, arguments: dict[str, Any] | str, *, full_hint: str = "`taskctx inspect TASK --json`"
) -> ApprovalView:
    """The view of a call of ``tool`` with ``arguments``.

    ``write_file``: the file's content (path, size in UTF-8 bytes, lines), numbered; ``apply_patch``:
    the diff; ``run_command``: the argv joined with :func:`shlex.join`; anything else pretty JSON.
    Never raises on odd arguments: they fall back to pretty JSON.

    Args:
        tool: The tool's name.
        arguments: The arguments, a dict or its JSON text as stored in the log (text that is not a
            JSON object is shown as it is).
        full_hint: Where the full arguments can be read; it ends the note of a cut view.

    Returns:
        The view.
    """
    args: Any = arguments
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except ValueError:
            args = arguments
    t = escape_controls(tool)
    if isinstance(args, dict):
        if tool == "write_file" and isinstance(args.get("path"), str) and isinstance(args.get("content"), str):
            content, path = args["content"], args["path"]
            n = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
            size = len(content.encode("utf-8", "surrogatepass"))
            body = escape_controls(content[:-1] if content.endswith("\n") else content)
            lexer = Syntax.guess_lexer(path, content[:2000])
            extra = {k: v for k, v in args.items() if k not in ("path", "content")}
            title = f"{t} {escape_controls(path)} ({size:,} bytes, {_lines_word(n)})" + (
                f" {escape_controls(json.dumps(extra, sort_keys=True, ensure_ascii=False))}" if extra else ""
            )
            head, tail, start, note = _cut(body, full_hint)
            return ApprovalView(tool, title, lexer, True, head, tail, start, note)
        if tool == "apply_patch" and isinstance(args.get("patch"), str):
            patch = args["patch"]
            files = [
                m.group(1).split("\t")[0]
                for m in re.finditer(r"^\+\+\+ (?:b/)?(.+)$", patch, re.M)
                if m.group(1) != "/dev/null"
            ]
            n = patch.count("\n") + (0 if patch.endswith("\n") or not patch else 1)
            body = escape_controls(patch[:-1] if patch.endswith("\n") else patch)
            title = f"{t} {escape_controls(', '.join(files) or '(no file named)')} ({_lines_word(n)} of diff)"
            head, tail, start, note = _cut(body, full_hint)
            return ApprovalView(tool, title, "diff", False, head, tail, start, note)
        argv = args.get("argv")
        if tool == "run_command" and isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            extra = {k: v for k, v in args.items() if k != "argv"}
            title = f"{t}" + (
                f" {escape_controls(json.dumps(extra, sort_keys=True, ensure_ascii=False))}" if extra else ""
            )
            head, tail, start, note = _cut("$ " + escape_controls(shlex.join(argv)), full_hint)
            return ApprovalView(tool, title, "text", False, head, tail, start, note)
    if isinstance(args, str):
        head, tail, start, note = _cut(escape_controls(args), full_hint)
        return ApprovalView(tool, t, "text", False, head, tail, start, note)
    pretty = json.dumps(args, indent=2, sort_keys=True, ensure_ascii=False)
    head, tail, start, note = _cut(escape_controls(pretty), full_hint)
    return ApprovalView(tool, t, "json", False, head, tail, start, note)


class _Indented:
    """``renderable`` indented by ``indent`` columns, wrapped to the width left, no trailing spaces.

    Rich pads lines to the full width; in a pipe or a file that is 80 columns of spaces.
    """

    def __init__(self, renderable: RenderableType, indent: int = 4) -> None:
        self.renderable, self.indent = renderable, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width - self.indent)
        lines = console.render_lines(self.renderable, options.update(width=width, no_wrap=False), pad=False)
        for line in lines:
            segs = list(line)
            while segs and not segs[-1].control and not segs[-1].text.rstrip(" "):
                segs.pop()
            if segs and not segs[-1].control:
                segs[-1] = Segment(segs[-1].text.rstrip(" "), segs[-1].style)
            if segs:
                yield Segment(" " * self.indent)
                yield from segs
            yield Segment.line()


def _syntax(view: ApprovalView, code: str, start: int) -> _Indented:
    return _Indented(
        Syntax(
            code,
            view.lexer,
            theme="ansi_dark",
            background_color="default",
            line_numbers=view.line_numbers,
            start_line=start,
            word_wrap=True,
        )
    )


def inspect_hint(task_id: str, db: str | Path = DEFAULT_DB) -> str:
    r"""Where a cut approval view sends the reader for the full arguments.

    The command is :func:`graphs.report.hints.command_hint`'s.

    Args:
        task_id: The task.
        db: Its database (named with ``--db`` only when not the default, quoted, without its
            password).

    Returns:
        ``\`taskctx inspect TASK_ID --json [--db DB]\` (control.pending_approval.arguments)``.
    """
    return f"`{command_hint('inspect', task_id, db, None, '--json')}` (control.pending_approval.arguments)"


def approval_renderable(req: dict[str, Any], *, full_hint: str | None = None) -> RenderableType:
    """The terminal view of an approval request: a header, the risk and reason, the arguments.

    The arguments (:func:`approval_view`) are indented by 4, wrapped at the console's width (never
    cropped) and without trailing spaces.

    Args:
        req: The ``interrupt()`` value: ``tool``, ``arguments``, ``call_id``, ``risk``, ``reason``,
            ``task_id``.
        full_hint: Where the full arguments are (:func:`inspect_hint` for the task's database);
            default: ``inspect_hint(task_id)`` for the default database.

    Returns:
        A rich renderable.
    """
    task = str(req.get("task_id") or "TASK_ID")
    hint = full_hint or inspect_hint(task)
    v = approval_view(str(req.get("tool")), req.get("arguments") or {}, full_hint=hint)
    parts: list[RenderableType] = [
        Text(f"  approval requested: {v.title}  [call {escape_controls(str(req.get('call_id')))}]"),
        Text(f"    risk {req.get('risk')}: {escape_controls(str(req.get('reason')))}"),
        _syntax(v, v.head, 1),
    ]
    if v.note:
        parts += [_Indented(Text(v.note, style="bold", overflow="fold")), _syntax(v, v.tail, v.tail_start)]
    return Group(*parts)


def _html_lines(view: ApprovalView, code: str, start: int) -> str:
    out = []
    for i, line in enumerate(code.split("\n"), start):
        cls = ""
        if view.lexer == "diff":
            if line.startswith(("+++", "---")):
                cls = "dfile"
            elif line.startswith("+"):
                cls = "dadd"
            elif line.startswith("-"):
                cls = "ddel"
            elif line.startswith("@@"):
                cls = "dhunk"
        ln = f'<span class="ln">{i}</span>' if view.line_numbers else ""
        body = _html.escape(line, quote=True)
        out.append(f'<span class="{cls}">{ln}{body}</span>' if cls else f"{ln}{body}")
    return "\n".join(out)


def approval_html(tool: str, arguments: dict[str, Any] | str, *, full_hint: str) -> str:
    """The report's view of a call of ``tool``: a title ``<div>`` and ``<pre class="approval">``.

    Two ``<pre>``, with the note between them, when cut; HTML-escaped; a diff's lines wrapped in
    ``span.dadd`` / ``span.ddel`` / ``span.dhunk`` / ``span.dfile``; numbered lines start with
    ``span.ln``.

    Args:
        tool: The tool's name.
        arguments: The arguments, as for :func:`approval_view`.
        full_hint: Where the full arguments can be read.

    Returns:
        The HTML.
    """
    v = approval_view(tool, arguments, full_hint=full_hint)
    parts = [
        f'<div class="approval-title"><code>{_html.escape(v.title)}</code></div>',
        f'<pre class="approval" data-lexer="{_html.escape(v.lexer)}">{_html_lines(v, v.head, 1)}</pre>',
    ]
    if v.note:
        parts.append(f'<p class="approval-note">{_html.escape(v.note)}</p>')
        parts.append(f'<pre class="approval tail">{_html_lines(v, v.tail, v.tail_start)}</pre>')
    return "".join(parts)
