"""The bench's default folder of recorded trajectories (a leaf: the commands' option defaults import only it)."""

import os
from pathlib import Path

__all__ = ["DEFAULT_DIR", "trajectory_files"]

#: The recorded trajectories ``taskctx bench`` and ``taskctx tokens`` read by default.
DEFAULT_DIR = Path("../shared/data/trajectories")


def trajectory_files(d: Path) -> list[Path]:
    """The recorded runs of a folder: its ``*.jsonl`` files, sorted; a broken link among them is refused.

    Args:
        d: A folder.

    Returns:
        The paths of its ``*.jsonl`` entries that are not folders.

    Raises:
        FileNotFoundError: A ``*.jsonl`` entry is a symlink whose target does not exist (named,
            with its target: a run of the folder would be left out unseen).
    """
    paths = sorted(p for p in d.glob("*.jsonl") if not p.is_dir())
    for p in paths:
        if p.is_symlink() and not p.exists():
            raise FileNotFoundError(
                f"{p} is a symlink to {os.readlink(p)}, which does not exist; fix the link or remove it "
                f"(every *.jsonl in {d} is a recorded run)"
            )
    return paths
