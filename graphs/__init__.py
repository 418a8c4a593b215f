"""taskctx's front door: open a project, build a task's graph, run, resume and inspect it.

``open_project(db)`` gives a :class:`Project` (the stores, checkpointer and memory of one
database); ``project.graph(model, tools=...)`` builds the default graph; ``project.run``,
``project.resume`` and ``project.inspect`` do the jobs. A graph of your own is wired from the
node factories and routers below and compiled with :func:`compile_graph`.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    # the project and its jobs
    from context import TaskContext

    # wiring a graph of your own
    from nodes import (
        NodeEnv,
        ToolExecutor,
        WorkspaceTools,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    from .checkpoint import checkpoint_serde
    from .inspection import TaskView
    from .orchestrator import GraphWiringError, build_orchestrator, check_graph, compile_graph, new_task
    from .project import Project, open_project
    from .routing import after_executor, after_planner, after_recovery, after_reviewer, after_tools
    from .runner import RunResult, thread_config

# imported on first use (PEP 562): ``import graphs`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        # the project and its jobs
        "Project": ".project",
        "open_project": ".project",
        "RunResult": ".runner",
        "thread_config": ".runner",
        "TaskView": ".inspection",
        "TaskContext": "context",
        "new_task": ".orchestrator",
        # the default graph, and checking a graph of your own
        "build_orchestrator": ".orchestrator",
        "compile_graph": ".orchestrator",
        "check_graph": ".orchestrator",
        "GraphWiringError": ".orchestrator",
        "checkpoint_serde": ".checkpoint",
        # the routers after each node
        "after_planner": ".routing",
        "after_executor": ".routing",
        "after_tools": ".routing",
        "after_reviewer": ".routing",
        "after_recovery": ".routing",
        # the nodes, their environment and tools
        "NodeEnv": "nodes",
        "ToolExecutor": "nodes",
        "WorkspaceTools": "nodes",
        "make_planner_node": "nodes",
        "make_executor_node": "nodes",
        "make_tool_node": "nodes",
        "make_reviewer_node": "nodes",
        "make_recovery_node": "nodes",
    },
)

__all__ = [
    "GraphWiringError",
    "NodeEnv",
    "Project",
    "RunResult",
    "TaskContext",
    "TaskView",
    "ToolExecutor",
    "WorkspaceTools",
    "after_executor",
    "after_planner",
    "after_recovery",
    "after_reviewer",
    "after_tools",
    "build_orchestrator",
    "check_graph",
    "checkpoint_serde",
    "compile_graph",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "make_tool_node",
    "new_task",
    "open_project",
    "thread_config",
]
