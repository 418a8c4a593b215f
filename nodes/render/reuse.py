"""Identical-span reuse: a run of lines an earlier transcript entry already showed is sent as a pointer to it."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SPAN_MIN_LINES", "SPAN_MIN_RATIO", "reuse_spans", "span_marker"]

#: A run shorter than this many lines is sent as is.
SPAN_MIN_LINES = 2
#: A run is replaced only when its chars (with newlines) are at least this many times its
#: marker's (a marker is about 75 chars, so runs of about 150 chars and more).
SPAN_MIN_RATIO = 2


def span_marker(n_lines: int, first: int, last: int, call_id: str) -> str:
    """The pointer that stands for lines an earlier entry showed.

    Args:
        n_lines: The lines it stands for.
        first: The first of them in call ``call_id``'s tool message (1-based, as shown).
        last: The last of them.
        call_id: The earlier call.

    Returns:
        ``[<n> lines identical to lines <first>-<last> of the output of call <call_id> above]``.
    """
    return f"[{n_lines} lines identical to lines {first}-{last} of the output of call {call_id} above]"


def reuse_spans(text: str, earlier: Sequence[tuple[str, str]]) -> str:
    """``text`` with every long run of lines an earlier entry showed replaced by a marker.

    A run matches lines of one earlier entry, consecutive and byte-equal, of at least
    ``SPAN_MIN_LINES`` lines and ``SPAN_MIN_RATIO`` times as long as its marker (chars); the
    longest match wins, the oldest entry on a tie. Cost: O(lines of ``earlier`` + lines of
    ``text`` x matches per line).

    Args:
        text: The output as it would be shown.
        earlier: ``(call_id, shown text)`` of the entries before it in the transcript, oldest first.

    Returns:
        The text with markers, or ``text`` unchanged when nothing qualifies.
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
