"""graphs.demo: ``taskctx demo``, a real task on a bundled sample workspace, offline.

The scripted model and the real workspace tools come from :mod:`.scenario` (and the bundled
``sample_workspace/``, package data); :func:`run_demo` (:mod:`.walkthrough`) runs the task,
pauses it, edits the config by hand and resumes it. Importing the package registers the
``"demo"`` task kind, so :meth:`graphs.Project.resume` can rebuild a demo task's graph.
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
from .walkthrough import demo_task_graph, run_demo

__all__ = [
    "DEMO_HAND_EDIT",
    "DEMO_REQUEST",
    "DEMO_STOP_AFTER",
    "DEMO_TEST_ARGV",
    "SAMPLE_WORKSPACE",
    "copy_sample",
    "demo_model",
    "demo_permissions",
    "demo_task_graph",
    "demo_tools",
    "hand_edit",
    "run_demo",
]
