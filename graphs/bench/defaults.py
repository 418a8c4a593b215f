"""The bench's default folder of recorded trajectories, in a module of its own so the commands'
option defaults (``taskctx bench``, ``taskctx tokens``) import nothing else of the bench."""

from pathlib import Path

__all__ = ["DEFAULT_DIR"]

#: The recorded trajectories ``taskctx bench`` and ``taskctx tokens`` read by default.
DEFAULT_DIR = Path("../shared/data/trajectories")
