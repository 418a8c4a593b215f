"""Node factories for the four roles (planner, executor, reviewer, recovery) and for a custom role's report.

Each ``make_*_node(model, env, renderer=None)`` returns a LangGraph node
``(state: TaskContext, config) -> dict`` of changed parts. Wire them into your own
``StateGraph(TaskContext)``; ``graphs.build_orchestrator`` is one such wiring.
"""

from .executor_node import make_executor_node, task_budget_check
from .node_steps import Node, memory_loaded_events, reply_text, task_created_event
from .planner_node import make_planner_node
from .recovery_node import MAX_REJECTED_REPEATS, MAX_STEP_ERRORS, make_recovery_node
from .report_node import make_role_node, report
from .reviewer_node import MAX_REVIEW_ROUNDS, make_reviewer_node

__all__ = [
    "MAX_REJECTED_REPEATS",
    "MAX_REVIEW_ROUNDS",
    "MAX_STEP_ERRORS",
    "Node",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "make_role_node",
    "memory_loaded_events",
    "reply_text",
    "report",
    "task_budget_check",
    "task_created_event",
]
