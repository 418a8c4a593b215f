"""graphs.report: what a person reads about a run, built from its event log only.

Its part of the pipeline is the read side: it folds the log again, it never calls a model::

    events (event log) --> reducer (context.replay) --> TaskContext --+--> page.py:  one HTML page
        |  context.built: manifests, prompt and cached tokens         |    (taskctx report)
        |  tool.result.received: the recorded (compressed) results  --+--> inspect_text.py: the text view
        +-------------------------------------------------------------+    (taskctx inspect)

- :mod:`.page`: ``build_report(events)`` (the HTML: token chart, plan, approvals, errors,
  manifests, tool calls, timeline) and ``write_report(stores, task_id, path)``;
- :mod:`.inspect_text`: ``render_view``, the ``taskctx inspect`` view of a :class:`graphs.TaskView`;
- :mod:`.hints`: the ``taskctx`` command lines messages and views suggest (``command_hint``);
- :mod:`.approval`: ``approval_view`` / ``approval_renderable`` / ``approval_html``, what an
  approval request shows (the CLI prompts, ``taskctx approve``, ``inspect`` and the page);

Imports the wiring (``graphs.orchestrator``) and ``context``; the wiring never imports it.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from .chart import ROLE_COLORS, token_chart_svg
    from .inspect_text import render_view
    from .page import build_report, write_report

# imported on first use (PEP 562): ``import graphs.report`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "ROLE_COLORS": ".chart",
        "build_report": ".page",
        "token_chart_svg": ".chart",
        "write_report": ".page",
        "render_view": ".inspect_text",
    },
)

__all__ = ["ROLE_COLORS", "build_report", "render_view", "token_chart_svg", "write_report"]
