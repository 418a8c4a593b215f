"""Shared fixtures. Strict msgpack is on for every test (a moved class must fail loudly)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

REPO = Path(__file__).resolve().parents[1]
TRAJECTORIES = Path(os.environ.get("TASKCTX_TRAJECTORIES", REPO.parent / "shared" / "data" / "trajectories"))


@pytest.fixture
def trajectories_dir() -> Path:
    if not TRAJECTORIES.is_dir() or not list(TRAJECTORIES.glob("*.jsonl")):
        pytest.skip(f"shared trajectories not found at {TRAJECTORIES} (clone beside ../shared or set TASKCTX_TRAJECTORIES)")
    return TRAJECTORIES
