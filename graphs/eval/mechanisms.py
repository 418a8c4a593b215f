"""The mechanisms ``taskctx eval --off`` can switch off (a leaf: ``--help`` reads it without the harness)."""

from __future__ import annotations

__all__ = ["MECHANISMS"]

#: Mechanisms ``taskctx eval --off`` can switch off, to show their category fails without them.
MECHANISMS = {
    "freshness": "no fact.stale: facts are never marked stale (context.freshness)",
    "policy": "no context policies: the builder adds nothing the model did not ask for (context.policy)",
    "memory": "durable memory: no memory is loaded from the long-term store (graphs.memory_store)",
    "reports": "no role reports in prompts: the reviewer's issues reach no re-plan (nodes.render.role_reports)",
}
