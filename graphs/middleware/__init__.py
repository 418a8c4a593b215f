"""graphs.middleware: taskctx as LangChain agent middleware, for an agent you already have.

``create_agent(model, tools, middleware=[TaskContextMiddleware("agent.db")])`` (or deepagents'
``create_deep_agent(..., middleware=[...])``) gives the agent taskctx's event log, artifact
store, pinned request, compressed tool output with refs, budget and manifests
(docs/howto/bring-your-own-agent.md).
"""

from .prompt import AGENT_ROLE, MIDDLEWARE_RULE
from .taskctx_middleware import TaskContextMiddleware
from .tool_calls import INTERRUPTED, NOT_FINISHED, PAUSED

__all__ = ["AGENT_ROLE", "INTERRUPTED", "MIDDLEWARE_RULE", "NOT_FINISHED", "PAUSED", "TaskContextMiddleware"]
