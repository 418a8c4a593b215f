"""The task's world: what it has read or written of the workspace, fingerprinted."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

__all__ = ["world_version"]


def world_version(world: Mapping[str, str], head: str | None) -> str:
    """The fingerprint of what a task has seen: ``"wv:" + sha256[:16]`` (``"wv:none"``: nothing).

    Args:
        world: Path -> sha256 hex of the latest bytes the task saw there (hashed sorted).
        head: The git HEAD commit it last saw (None: none seen).
    """
    if not world and head is None:
        return "wv:none"
    blob = json.dumps({"files": sorted(world.items()), "head": head}, separators=(",", ":"))
    return "wv:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
