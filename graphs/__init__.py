"""taskctx.graphs: LangGraph wiring (state graph, routing, checkpointer setup), the CLI, the benchmark.

Depends on ``nodes`` and ``context``.
"""

from .checkpoint import CHECKPOINT_TYPES, checkpoint_serde
from .orchestrator import DEFAULT_DB, NoTools, Project, build_orchestrator, new_task, open_project
from .routing import after_executor, after_planner, after_recovery, after_reviewer, after_tools
from .runner import RunResult, export_run, pending_approval, run_graph, run_with_approvals, thread_config

__all__ = [
    "CHECKPOINT_TYPES",
    "checkpoint_serde",
    "DEFAULT_DB",
    "NoTools",
    "Project",
    "RunResult",
    "after_executor",
    "after_planner",
    "after_recovery",
    "after_reviewer",
    "after_tools",
    "build_orchestrator",
    "export_run",
    "new_task",
    "open_project",
    "pending_approval",
    "run_graph",
    "run_with_approvals",
    "thread_config",
]
