"""Unified diffs (``diff -u`` / ``git diff``): parse them into hunks, apply or un-apply them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["FilePatch", "Hunk", "PatchError", "apply_unified_diff", "parse_unified_diff"]


class PatchError(Exception):
    """A patch that cannot be parsed or does not apply; the message says where."""


@dataclass
class Hunk:
    """One ``@@ -old_start,old_len +new_start,new_len @@`` hunk.

    Attributes:
        lines: ``(tag, text)`` pairs; tag ``" "`` (context), ``"-"`` or ``"+"``.
        no_eol_new: The new side ends without a newline.
    """

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[tuple[str, str]] = field(default_factory=list)
    no_eol_new: bool = False


@dataclass
class FilePatch:
    """The hunks of one file (``a/``/``b/`` prefixes stripped).

    Attributes:
        old_path: The file before, None for ``/dev/null`` (a created file).
        new_path: The file after, None for ``/dev/null`` (a deleted file).
        hunks: Its hunks, in order.
    """

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The file the patch is about: its new path, else its old one."""
        return self.new_path or self.old_path or ""


def _strip_prefix(p: str) -> str | None:
    p = p.split("\t")[0].strip()
    if p == "/dev/null":
        return None
    if p.startswith(("a/", "b/")):
        return p[2:]
    return p


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_unified_diff(text: str) -> list[FilePatch]:
    """Parse a unified diff (``diff -u`` / ``git diff``) into per-file hunks.

    Args:
        text: The diff.

    Returns:
        One :class:`FilePatch` per file.

    Raises:
        PatchError: A bad hunk header or line, or no ``---``/``+++`` file header.
    """
    lines = text.splitlines()
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            fp = FilePatch(_strip_prefix(ln[4:]), _strip_prefix(lines[i + 1][4:]))
            files.append(fp)
            i += 2
            while i < len(lines) and lines[i].startswith("@@"):
                m = _HUNK.match(lines[i])
                if not m:
                    raise PatchError(f"bad hunk header: {lines[i]!r}")
                h = Hunk(int(m.group(1)), int(m.group(2) or 1), int(m.group(3)), int(m.group(4) or 1))
                i += 1
                old_n = new_n = 0
                while i < len(lines) and (old_n < h.old_len or new_n < h.new_len or lines[i].startswith("\\")):
                    body = lines[i]
                    if body.startswith("\\"):
                        if h.lines and h.lines[-1][0] in " +":
                            h.no_eol_new = True
                        i += 1
                        continue
                    tag, rest = (body[0], body[1:]) if body else (" ", "")
                    if tag not in " -+":
                        raise PatchError(f"bad hunk line {i + 1}: {body!r}")
                    h.lines.append((tag, rest))
                    old_n += tag in " -"
                    new_n += tag in " +"
                    i += 1
                fp.hunks.append(h)
            continue
        i += 1
    if not files:
        raise PatchError("no file headers (--- a/path / +++ b/path) found in the patch")
    return files


def _find(lines: list[str], block: list[str], guess: int) -> int | None:
    if not block:
        return min(max(guess, 0), len(lines))
    n = len(block)
    for d in range(0, len(lines) + 1):
        for pos in (guess - d, guess + d) if d else (guess,):
            if 0 <= pos <= len(lines) - n and lines[pos : pos + n] == block:
                return pos
    return None


def apply_unified_diff(content: str | None, fp: FilePatch, reverse: bool = False) -> str:
    """Apply ``fp`` to ``content``, or un-apply it.

    Hunks are placed at their line numbers or, when the file moved, at the nearest place their
    context matches.

    Args:
        content: The file's text; None for a new file.
        fp: The file's patch.
        reverse: Un-apply (to see whether a patch is already applied).

    Returns:
        The new text.

    Raises:
        PatchError: A hunk matches nowhere.
    """
    text = content or ""
    trailing = text.endswith("\n") or content is None
    lines = text.split("\n")
    if text.endswith("\n") or text == "":
        lines = lines[:-1] if lines else []
    offset = 0
    for h in fp.hunks:
        old = [t for tag, t in h.lines if tag in (" +" if reverse else " -")]
        new = [t for tag, t in h.lines if tag in (" -" if reverse else " +")]
        start = h.new_start if reverse else h.old_start
        span = h.new_len if reverse else h.old_len
        guess = (start if span == 0 else start - 1) + offset
        pos = _find(lines, old, guess)
        if pos is None:
            raise PatchError(
                f"hunk @@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@ does not match {fp.path}"
            )
        lines[pos : pos + len(old)] = new
        offset += len(new) - len(old)
        if h.no_eol_new and not reverse:
            trailing = False
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if trailing else "")
