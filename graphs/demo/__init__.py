"""graphs.demo: ``taskctx demo``, a real task on a bundled sample workspace, offline.

The demo runs the whole pipeline; this package only supplies the model's script and the tools::

    events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events
                                                                      ^           ^
                                                scenario.demo_model() |           | scenario.demo_tools(ws)
                                        a ScriptedChatModel, per role             real WorkspaceTools on a
                                          in call order (resume-safe)             copy of sample_workspace/

- :mod:`.scenario`: the request, the permissions (file scopes), the script (explore, refused
  read outside the scopes, a hand edit of the config while paused, re-read of the stale file,
  approved patch, failing test, recovery, green tests, review), ``copy_sample(dest)`` and
  ``hand_edit(ws)``;
- ``sample_workspace/``: the bundled upload service behind an nginx proxy whose 1 MB limit is
  the bug (package data; ``copy_sample`` copies it and the demo works on the copy).

The CLI command ``taskctx demo`` is :mod:`graphs.cli.demo`; it builds the graph with
``graphs.build_orchestrator`` and runs it with ``graphs.runner``. The wiring never imports this
package.
"""

from .scenario import (
    DEMO_HAND_EDIT,
    DEMO_REQUEST,
    DEMO_STOP_AFTER,
    DEMO_TEST_ARGV,
    SAMPLE_WORKSPACE,
    copy_sample,
    demo_model,
    demo_permissions,
    demo_tools,
    hand_edit,
)

__all__ = [
    "DEMO_REQUEST",
    "DEMO_HAND_EDIT",
    "DEMO_STOP_AFTER",
    "DEMO_TEST_ARGV",
    "SAMPLE_WORKSPACE",
    "copy_sample",
    "hand_edit",
    "demo_model",
    "demo_permissions",
    "demo_tools",
]
