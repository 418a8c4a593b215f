"""Identical-span reuse: a run of lines already shown in an earlier transcript entry is sent as a
pointer to it instead of again.

Agents re-read what they have already seen: the same file region opened twice, a search whose
hits overlap an earlier view, a test run whose long preamble repeats. Inside one executor
transcript those lines are already in the prompt (in an earlier tool message), so sending them
again only costs tokens. :func:`reuse_spans` replaces each run of at least
:data:`SPAN_MIN_LINES` consecutive lines that equals a run of lines of one earlier entry, as
shown there, and is at least :data:`SPAN_MIN_RATIO` times as long as its marker (chars), by the
marker, such as::

    [23 lines identical to lines 14-36 of the output of call rec-3 above]

The output still holds every byte: the earlier entry is in the same prompt, and the artifact
ref returns the exact raw output. An entry's form depends only on the entries before it in the
same transcript, so the transcript stays append-only (cache-friendly); after a restart the
kept entries are rendered again against what is still shown.

Source: the "reuse of identical artifacts" idea in docs/design.md's cache-aware rendering; line
matching by exact equality (a hash index of earlier lines), not fuzzy diffs.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SPAN_MIN_LINES", "SPAN_MIN_RATIO", "reuse_spans", "span_marker"]

#: A run shorter than this many lines is sent as is.
SPAN_MIN_LINES = 2
#: A run is replaced only when its chars (with newlines) are at least this many times its
#: marker's (a marker is about 75 chars, so runs of about 150 chars and more).
SPAN_MIN_RATIO = 2


def span_marker(n_lines: int, first: int, last: int, call_id: str) -> str:
    """The pointer that stands for ``n_lines`` lines equal to lines ``first``-``last``
    (1-based, as shown) of call ``call_id``'s tool message."""
    return f"[{n_lines} lines identical to lines {first}-{last} of the output of call {call_id} above]"


def reuse_spans(text: str, earlier: Sequence[tuple[str, str]]) -> str:
    """``text`` with every long run of lines shown in an earlier entry replaced by a marker.

    ``earlier``: ``(call_id, shown text)`` of the entries before this one in the transcript,
    oldest first. A run matches lines of one earlier entry, consecutive and byte-equal; the
    longest match wins, the oldest entry on a tie. Returns ``text`` unchanged when nothing
    qualifies. Cost: O(lines of ``earlier`` + lines of ``text`` x matches per line).
    """
    if not earlier:
        return text
    shown = [(cid, body.split("\n")) for cid, body in earlier]
    index: dict[str, list[tuple[int, int]]] = {}
    for e, (_, lines) in enumerate(shown):
        for k, ln in enumerate(lines):
            if ln.strip():
                index.setdefault(ln, []).append((e, k))
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    changed = False
    while i < len(lines):
        best_n, best_at = 0, (0, 0)
        for e, k in index.get(lines[i], ()):
            other = shown[e][1]
            n = 0
            while i + n < len(lines) and k + n < len(other) and lines[i + n] == other[k + n]:
                n += 1
            if n > best_n:
                best_n, best_at = n, (e, k)
        e, k = best_at
        marker = span_marker(best_n, k + 1, k + best_n, shown[e][0]) if best_n >= SPAN_MIN_LINES else ""
        if marker and sum(len(x) + 1 for x in lines[i : i + best_n]) >= SPAN_MIN_RATIO * len(marker):
            out.append(marker)
            i += best_n
            changed = True
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out) if changed else text
