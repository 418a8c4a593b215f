"""The bench's default folder of recorded trajectories (a leaf: the commands' option defaults import only it)."""

from pathlib import Path

__all__ = ["DEFAULT_DIR"]

#: The recorded trajectories ``taskctx bench`` and ``taskctx tokens`` read by default.
DEFAULT_DIR = Path("../shared/data/trajectories")
