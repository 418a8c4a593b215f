"""Artifact refs: ``artifact://sha256:<hex>[#L<start>-<end>]``, the name of stored bytes."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .errors import InvalidRefError

__all__ = ["ArtifactRef", "make_ref", "parse_ref", "slice_lines"]

_REF_RE = re.compile(r"^artifact://sha256:([0-9a-f]{64})(?:#L(\d+)-(\d+))?$")


@dataclass(frozen=True)
class ArtifactRef:
    """A parsed ``artifact://sha256:<hex>[#L<start>-<end>]`` ref (lines 1-based, inclusive)."""

    digest: str
    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        base = f"artifact://sha256:{self.digest}"
        return base if self.start is None else f"{base}#L{self.start}-{self.end}"

    def with_lines(self, start: int, end: int) -> ArtifactRef:
        """The same artifact's lines ``start..end`` (1-based, inclusive).

        Args:
            start: The first line.
            end: The last line.

        Returns:
            The ref with a ``#L<start>-<end>`` fragment.
        """
        return ArtifactRef(self.digest, start, end)


def parse_ref(ref: str) -> ArtifactRef:
    """Parse a ref.

    Args:
        ref: ``artifact://sha256:<64 hex>``, optionally with ``#L<start>-<end>``.

    Returns:
        The parsed ref.

    Raises:
        InvalidRefError: The text is not a ref (the message names the expected form), or its
            line range is not ``1 <= start <= end``.
    """
    m = _REF_RE.match(ref.strip())
    if not m:
        raise InvalidRefError(f"not an artifact ref: {ref!r}; expected artifact://sha256:<64 hex>[#L<start>-<end>]")
    start = int(m.group(2)) if m.group(2) else None
    end = int(m.group(3)) if m.group(3) else None
    if start is not None and (start < 1 or end is None or end < start):
        raise InvalidRefError(f"bad line range in {ref!r}: need 1 <= start <= end")
    return ArtifactRef(m.group(1), start, end)


def make_ref(data: bytes) -> ArtifactRef:
    """The ref of some bytes.

    Args:
        data: The bytes (as stored: secrets already masked).

    Returns:
        The ref whose digest is the sha256 of ``data``.
    """
    return ArtifactRef(hashlib.sha256(data).hexdigest())


def slice_lines(data: bytes, start: int, end: int) -> bytes:
    """Lines of some bytes, byte-exact.

    Args:
        data: The bytes.
        start: The first line (1-based).
        end: The last line (inclusive).

    Returns:
        Lines ``start..end`` of ``data``, with their line endings.
    """
    lines = data.splitlines(keepends=True)
    return b"".join(lines[start - 1 : end])
