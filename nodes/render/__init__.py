"""One renderer per role; each projects only its layers (docs/design.md "Layers and who sees what").

::

    TaskContext ──▶ <Role>Renderer.render(ctx, env, tools) ──▶ Rendered (messages, tools, manifest)
                      1. candidate blocks of the role's layers (common.core_blocks + its own,
                         + the blocks the fired context policies add: policy.policy_blocks)
                      2. common.assemble: context.build_context chooses them within
                         budget - reserve_for_output (the manifest), then lays the chosen
                         blocks out as chat messages, stable parts first

Modules:

* ``common.py``: the :class:`Renderer` protocol, the core layer, ``quote_external`` (tool output
  is always quoted as external content, never put in the system message), ``assemble``.
* ``planner.py``: core + plan + progress + findings (no raw tool output).
* ``executor.py``: core + step + the append-only transcript of calls, cache-aware (restarts).
* ``reuse.py``: lines an earlier transcript entry already showed are sent as a pointer.
* ``reviewer.py``: success criteria + plan + changed artifacts + findings with refs.
* ``recovery.py``: core + the failure and error history + the last good checkpoint.
* ``policy.py``: the blocks the context policies add (:mod:`context.policy`), in each role's
  prompt, reason ``policy:<name>`` in the manifest.
"""

from .base import EXTERNAL_RULE, Renderer, assemble, core_blocks, quote_external
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
    "assemble",
    "core_blocks",
    "quote_external",
]
