"""One renderer per role: each turns a TaskContext into its role's prompt (only its layers).

``<Role>Renderer.render(ctx, env, tools)`` returns a :class:`~nodes.runtime.Rendered`: the
messages, the tool schemas and the manifest of the blocks chosen within the budget.
"""

from .base import Renderer, assemble, core_blocks
from .executor import ExecutorRenderer
from .planner import PlannerRenderer
from .quoting import EXTERNAL_RULE, quote_external
from .recovery import RecoveryRenderer
from .reviewer import ReviewerRenderer
from .role_reports import ALL_ROLES, report_blocks

__all__ = [
    "ALL_ROLES",
    "EXTERNAL_RULE",
    "ExecutorRenderer",
    "PlannerRenderer",
    "RecoveryRenderer",
    "Renderer",
    "ReviewerRenderer",
    "assemble",
    "core_blocks",
    "quote_external",
    "report_blocks",
]
