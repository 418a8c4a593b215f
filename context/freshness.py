"""Freshness: which state of the workspace a fact was drawn from, and when it is stale.

A fact (a finding, a step summary, a tool call's output) records the files it rests on
(``path -> sha256 hex``) and the git HEAD then. When the workspace shows other bytes for one of
them, or HEAD moved, :func:`find_stale` gives the ``fact.stale`` payloads. Pure: no clock, no
store, no file system (the nodes hand in what they read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from .literals import StaleCause
from .models import TaskContext
from .text import quote_name
from .world import world_version

__all__ = [
    "HEAD_PATH",
    "Cause",
    "about",
    "change_text",
    "facts",
    "find_stale",
    "named_paths",
    "short_sha",
    "stale_line",
    "world_version",
]

#: The ``path`` of a ``fact.stale`` mark for a moved git HEAD.
HEAD_PATH = "HEAD"
#: Who noticed that a fact is stale (:data:`~context.literals.StaleCause`).
Cause = StaleCause


def short_sha(sha: str) -> str:
    """The first 12 hex digits of a sha, as messages show it.

    Args:
        sha: A sha256 hex digest or a commit (``""``: the file is gone).

    Returns:
        Its first 12 hex digits, or ``"(gone)"``.
    """
    return sha[:12] if sha else "(gone)"


def named_paths(text: str, paths: Iterable[str]) -> list[str]:
    """The paths a text names.

    A path is named by the whole path or its file name alone, as a name of its own: not part of
    a longer name or path (``lib/upload.py`` does not name ``app/upload.py``); a sentence's full
    stop after it is fine.

    Args:
        text: The text (a finding, a step summary).
        paths: Workspace-relative, ``/``-separated paths.

    Returns:
        Those of ``paths`` that ``text`` names, in the order given.
    """
    out = []
    for p in paths:
        names = {p, p.rsplit("/", 1)[-1]}
        if any(re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w/-]|\.\w)", text) for n in names if n):
            out.append(p)
    return out


def about(text: str, reads: Mapping[str, str]) -> dict[str, str]:
    """What a fact rests on, of the files its evidence read.

    Args:
        text: The fact as stated.
        reads: Path -> sha256 hex of the files its evidence read.

    Returns:
        The files ``text`` names (:func:`named_paths`), or all of them when it names none (a grep
        over several files backs a finding about one of them; a finding naming no file may rest
        on any).
    """
    named = named_paths(text, reads)
    return {p: reads[p] for p in named} if named else dict(reads)


def facts(ctx: TaskContext) -> Iterator[tuple[str, str, Mapping[str, str], str | None]]:
    """Every fact in the state that rests on something.

    Args:
        ctx: The task's state.

    Yields:
        ``(fact id, fact kind, rests_on, head)`` of the findings (of the window and the transcript
        checkpoint, once each), the last step's summary (``step:<id>``) and the tool calls in the
        transcript.
    """
    seen: set[str] = set()
    cp = ctx.evidence.transcript_checkpoint
    for f in [*(cp.findings if cp else []), *ctx.evidence.findings]:
        if f.id in seen or not (f.rests_on or f.head):
            continue
        seen.add(f.id)
        yield f.id, "finding", f.rests_on, f.head
    ls = ctx.progress.last_step
    if ls is not None and (ls.rests_on or ls.head):
        yield f"step:{ls.id}", "step", ls.rests_on, ls.head
    for r in ctx.evidence.recent_tool_calls:
        if r.reads or r.head:
            yield r.id, "evidence", r.reads, r.head


def find_stale(
    ctx: TaskContext, changes: Mapping[str, str], cause: Cause, *, head: str | None = None
) -> list[dict[str, object]]:
    """The facts that changes in the workspace make stale.

    A fact already marked stale for the same path and new sha is not marked again, and a write of
    the task does not mark a fact already stale for that file again (it adds nothing: the task
    knows what it wrote).

    Args:
        ctx: The task's state.
        changes: Path -> the sha256 hex the workspace has now (``""``: the file is gone).
        cause: Who noticed (a HEAD move is always ``"head"``).
        head: The git HEAD commit now (None: not known).

    Returns:
        The ``fact.stale`` payloads (``fact_id, fact_kind, path, old_sha, new_sha, cause``), in
        fact order.
    """
    known = {(s.fact_id, s.path, s.new_sha) for s in ctx.evidence.stale_facts}
    marked = {(s.fact_id, s.path) for s in ctx.evidence.stale_facts}
    out: list[dict[str, object]] = []
    for fid, kind, rests_on, fhead in facts(ctx):
        for path, new in changes.items():
            old = rests_on.get(path)
            if old is None or old == new or (fid, path, new) in known:
                continue
            if cause == "write" and (fid, path) in marked:
                continue  # already stale for this file; the task knows the bytes it wrote
            known.add((fid, path, new))
            out.append(
                {"fact_id": fid, "fact_kind": kind, "path": path, "old_sha": old, "new_sha": new, "cause": cause}
            )
        if head is not None and fhead is not None and fhead != head and (fid, HEAD_PATH, head) not in known:
            known.add((fid, HEAD_PATH, head))
            out.append(
                {
                    "fact_id": fid,
                    "fact_kind": kind,
                    "path": HEAD_PATH,
                    "old_sha": fhead,
                    "new_sha": head,
                    "cause": "head",
                }
            )
    return out


def stale_line(ctx: TaskContext, fact_id: str) -> str:
    """The line prompts and views add to a stale fact.

    Args:
        ctx: The task's state.
        fact_id: A finding id, ``step:<id>`` or a call id.

    Returns:
        ``"STALE: <path> changed <how> (<old> -> <new>)"`` (its marks joined by ``"; "``), or
        ``""`` for a fact not known to be stale.
    """
    marks = ctx.stale(fact_id)
    if not marks:
        return ""
    parts = [change_text(m.path, m.cause, m.old_sha, m.new_sha) for m in marks]
    return "STALE: " + "; ".join(dict.fromkeys(parts))


def change_text(path: str, cause: str, old: str, new: str) -> str:
    """One change, as a stale mark shows it.

    Args:
        path: The path (:data:`HEAD_PATH` for a moved HEAD).
        cause: Who noticed (``write``, ``reread``, ``resume``, ``approval``, ``head``).
        old: The sha the fact rests on.
        new: The sha the workspace has now (``""``: gone).

    Returns:
        ``"<path> changed <how> (<old> -> <new>)"`` (the path quoted unless ordinary,
        :func:`context.text.quote_name`), or ``"HEAD moved (<old> -> <new>)"``.
    """
    shas = f"({short_sha(old)} -> {short_sha(new)})"
    if path == HEAD_PATH:
        return f"HEAD moved {shas}"
    how = {
        "write": "by this task",
        "reread": "seen on a re-read",
        "resume": "while paused",
        "approval": "while waiting for approval",
    }.get(cause, "")
    return f"{quote_name(path)} changed {how} {shas}"
