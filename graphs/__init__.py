"""taskctx.graphs: the LangGraph wiring of taskctx and its public API. Depends on ``nodes`` and
``context``.

The graph (:func:`build_orchestrator`; the state is one :class:`context.TaskContext`)::

    START --> planner --> executor <------> tools
               ^  ^        |  ^               |
               |  |        |  +--- retry ---+ | a tool call failed
               |  |        |                | v
               |  +--------|--- replan --- recovery <-- executor: a step ended failed or blocked
               |           |                  |
               |           v                  +--- stop ---> END
               +-revise-- reviewer --approve--> END

The executor goes to the reviewer when no plan step is left; every router returns ``END`` once
the task has completed or failed (:mod:`.routing`).

Each node is a turn of the pipeline: a role node (planner, executor, reviewer, recovery) runs it
from the events to the model call and records what the model answered; the ``tools`` node runs
the tool calls and records their results::

    events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events

(``context.events``, ``context.reducer``, ``context.models``, ``context.builder``,
``nodes.render``, the chat model called by ``nodes.runtime``, ``nodes.tools``.) The nodes come
from ``nodes`` (``make_*_node``); the checkpointer keeps the TaskContext between them; the event
log and the artifacts live in the ``context`` stores of a :class:`Project`.

Modules (the wiring; none of them imports an application below):

- :mod:`.orchestrator`: :func:`build_orchestrator` (nodes, edges, compile), :func:`compile_graph`
  (:func:`check_graph`, then compile: a router's missing node fails here), :func:`new_task`,
  :func:`open_project` (stores + checkpointer of one SQLite file or Postgres URL);
- :mod:`.routing`: the routers after each node, pure lookups on the TaskContext;
- :mod:`.checkpoint`: the checkpointer's serializer (:func:`checkpoint_serde`);
- :mod:`.runner`: :func:`run_graph` (start, stop after N executor steps, resume),
  :func:`run_with_approvals`, :func:`export_run`;
- :mod:`.doctor`: the checks of a task's stored data (:func:`diagnose`; ``resume`` runs
  :func:`ensure_sound` first); :mod:`.edits`: :class:`TaskGraph`, the compiled graph whose
  ``update_state`` from outside a node is recorded as ``state.edited`` or refused;
- :mod:`.memory`: durable memory across tasks, the API (:func:`~graphs.memory_store.confirm_memory`,
  ``forget_memory``, ``list_memories``, ``show_memory``, ``rebuild_memory``) on the long-term
  store beside the checkpointer (``Project.memory_store``, ``Project.memory(root)``);
- :mod:`.postgres`: the Postgres checkpointer; :mod:`.server`: the graph for LangGraph Server
  (``langgraph.json``); :mod:`.tracing`: the run tree a run leaves in LangSmith.

Applications built on the wiring, each a subpackage (they import the wiring, never the reverse;
import-linter enforces it):

- :mod:`graphs.cli`: the ``taskctx`` command line;
- :mod:`graphs.demo`: the offline demo and its sample workspace;
- :mod:`graphs.bench`: ``taskctx bench``, five context strategies over recorded trajectories;
- :mod:`graphs.eval`: ``taskctx eval``, the scenario cases and their checks;
- :mod:`graphs.report`: the HTML report and the ``inspect`` text view.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from .checkpoint import CHECKPOINT_TYPES, checkpoint_serde
    from .orchestrator import (
        DEFAULT_DB,
        GraphWiringError,
        NoTools,
        Project,
        build_orchestrator,
        check_graph,
        compile_graph,
        new_task,
        open_project,
        router_targets,
    )
    from .routing import TARGETS, after_executor, after_planner, after_recovery, after_reviewer, after_tools
    from .runner import RunResult, export_run, pending_approval, run_graph, run_with_approvals, thread_config

# imported on first use (PEP 562): ``import graphs`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "CHECKPOINT_TYPES": ".checkpoint",
        "checkpoint_serde": ".checkpoint",
        "DEFAULT_DB": ".orchestrator",
        "GraphWiringError": ".orchestrator",
        "NoTools": ".orchestrator",
        "Project": ".orchestrator",
        "build_orchestrator": ".orchestrator",
        "check_graph": ".orchestrator",
        "compile_graph": ".orchestrator",
        "new_task": ".orchestrator",
        "open_project": ".orchestrator",
        "router_targets": ".orchestrator",
        "TARGETS": ".routing",
        "after_executor": ".routing",
        "after_planner": ".routing",
        "after_recovery": ".routing",
        "after_reviewer": ".routing",
        "after_tools": ".routing",
        "RunResult": ".runner",
        "export_run": ".runner",
        "pending_approval": ".runner",
        "run_graph": ".runner",
        "run_with_approvals": ".runner",
        "thread_config": ".runner",
    },
)

__all__ = [
    "CHECKPOINT_TYPES",
    "checkpoint_serde",
    "DEFAULT_DB",
    "GraphWiringError",
    "TARGETS",
    "NoTools",
    "Project",
    "RunResult",
    "after_executor",
    "after_planner",
    "after_recovery",
    "after_reviewer",
    "after_tools",
    "build_orchestrator",
    "check_graph",
    "compile_graph",
    "export_run",
    "new_task",
    "open_project",
    "pending_approval",
    "router_targets",
    "run_graph",
    "run_with_approvals",
    "thread_config",
]
