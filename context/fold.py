"""What a fold is: one event's handler, ``(ctx, event) -> new ctx``."""

from __future__ import annotations

from collections.abc import Callable

from .events import Event
from .models import TaskContext

__all__ = ["Fold"]

#: One event's fold: ``(ctx, event) -> new ctx``, pure (no clock, no store, ``ctx`` not mutated).
Fold = Callable[[TaskContext, Event], TaskContext]
