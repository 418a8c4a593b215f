"""One renderer per role; each projects only its layers (DESIGN.md "Layers and who sees what")."""

from .common import EXTERNAL_RULE, Renderer, quote_external
from .executor import ExecutorRenderer
from .planner import PlannerRenderer
from .recovery import RecoveryRenderer
from .reviewer import ReviewerRenderer

__all__ = [
    "EXTERNAL_RULE",
    "ExecutorRenderer",
    "PlannerRenderer",
    "RecoveryRenderer",
    "Renderer",
    "ReviewerRenderer",
    "quote_external",
]
