"""Tracing helpers: what a taskctx run looks like as a LangChain/LangSmith run tree.

Tracing needs no code: with ``LANGSMITH_TRACING=true`` (and ``LANGSMITH_API_KEY``,
``LANGSMITH_PROJECT``, optionally ``LANGSMITH_ENDPOINT``) every graph invocation is one trace.
Its root run is the graph (``taskctx`` for :func:`graphs.build_orchestrator`), with metadata
``thread_id`` (= the task id; LangGraph copies the configurable ``thread_id`` into the run
metadata, so the traces of a task's resumes share it, and a resume's root also carries
``resume_token``, the token of its ``resume.started`` event). Under it: one run per node
(``planner``, ``executor``, ``tools``, ``reviewer``, ``recovery``; metadata ``role``), and under each
role node its model call, named ``<role>.model``, tagged ``role:<role>``, whose metadata holds
``task_id, step_id, role, budget, prompt_tokens, cached_prefix_tokens`` and the call's
``manifest`` (:meth:`nodes.NodeRun.call_model`).

Raw tool output never enters a trace: the tool node's ToolExecutor is plain Python (not a traced
runnable) and node inputs/outputs are TaskContext parts, which hold compressed summaries and
``artifact://`` refs.

:func:`run_tree_lines` prints a run tree collected in-process, e.g. with
``langchain_core.tracers.run_collector.RunCollectorCallbackHandler`` passed in ``callbacks``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["TRACE_KEYS", "run_tree_lines", "walk_runs"]

#: The metadata keys every model run of a taskctx node carries.
TRACE_KEYS = ("task_id", "step_id", "role", "budget", "prompt_tokens", "cached_prefix_tokens", "manifest")


def walk_runs(run: Any, depth: int = 0) -> Iterable[tuple[int, Any]]:
    """``(depth, run)`` for ``run`` and its descendants (``child_runs``), in start order."""
    yield depth, run
    for child in sorted(getattr(run, "child_runs", None) or [], key=lambda r: (r.start_time, r.dotted_order or "")):
        yield from walk_runs(child, depth + 1)


def run_tree_lines(run: Any, *, hide_routers: bool = True) -> list[str]:
    """One line per run: indentation, name, run type, ``role:*`` tags and, for model runs, the
    prompt and cached-prefix tokens from the metadata. Routers (``after_*``) are left out
    unless ``hide_routers`` is false."""
    out = []
    for depth, r in walk_runs(run):
        if hide_routers and r.name.startswith("after_"):
            continue
        meta = (r.extra or {}).get("metadata", {}) if hasattr(r, "extra") else {}
        tags = [t for t in (r.tags or []) if t.startswith("role:")]
        line = f"{'  ' * depth}{r.name} [{r.run_type}]"
        if tags:
            line += " " + " ".join(tags)
        if r.run_type in ("llm", "chat_model") and "prompt_tokens" in meta:
            line += (
                f" step={meta.get('step_id')} prompt={meta['prompt_tokens']}"
                f" cached={meta.get('cached_prefix_tokens')} budget={meta.get('budget')}"
            )
        elif depth == 0 and meta.get("thread_id"):
            line += f" thread_id={meta['thread_id']}"
        out.append(line)
    return out
