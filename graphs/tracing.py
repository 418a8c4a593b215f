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

A node that stops at LangGraph ``interrupt()`` (the tool node asking for approval) ends its run
with a ``GraphInterrupt``, which LangChain's tracer posts as an error. :func:`paused_runs_traced`
(around every invocation :func:`graphs.runner.run_graph` makes) traces with
:class:`PausedRunTracer` instead, which ends such a run as a pause: outputs ``{"paused": "waiting
for approval", "requests": [{request_id, call_id, tool, risk}]}``, tag ``paused:approval``,
metadata ``approval_request_ids``; the resume is the next trace of the same ``thread_id``.

Raw tool output never enters a trace: the tool node's ToolExecutor is plain Python (not a traced
runnable) and node inputs/outputs are TaskContext parts, which hold compressed summaries and
``artifact://`` refs.

:func:`run_tree_lines` prints a run tree collected in-process, e.g. with
``langchain_core.tracers.run_collector.RunCollectorCallbackHandler`` passed in ``callbacks``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from langchain_core.tracers.context import tracing_v2_callback_var
from langchain_core.tracers.langchain import LangChainTracer
from langgraph.errors import GraphInterrupt
from langsmith import utils as ls_utils

__all__ = ["TRACE_KEYS", "PausedRunTracer", "paused_runs_traced", "run_tree_lines", "walk_runs"]

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


class PausedRunTracer(LangChainTracer):
    """A :class:`~langchain_core.tracers.langchain.LangChainTracer` that ends a run stopped by
    LangGraph ``interrupt()`` (a ``GraphInterrupt``) as a pause, not an error: outputs
    ``{"paused": "waiting for approval" | "waiting for input", "requests": [...]}`` (for an
    approval: ``request_id, call_id, tool, risk``), tag ``paused:approval`` (or
    ``paused:interrupt``), metadata ``approval_request_ids``. Every other error is traced as one."""

    def on_chain_error(
        self, error: BaseException, *, inputs: dict[str, Any] | None = None, run_id: UUID, **kwargs: Any
    ):  # type: ignore[override]
        if not isinstance(error, GraphInterrupt):
            return super().on_chain_error(error, inputs=inputs, run_id=run_id, **kwargs)
        values = [getattr(i, "value", i) for i in (error.args[0] if error.args else ())]
        approvals = [v for v in values if isinstance(v, dict) and v.get("type") == "approval"]
        requests = [{k: v.get(k) for k in ("request_id", "call_id", "tool", "risk")} for v in approvals]
        run = self._get_run(run_id)
        run.tags = [*(run.tags or []), "paused:approval" if approvals else "paused:interrupt"]
        if approvals:
            run.extra.setdefault("metadata", {})["approval_request_ids"] = [r["request_id"] for r in requests]
        outputs = {"paused": "waiting for approval" if approvals else "waiting for input", "requests": requests}
        return self.on_chain_end(outputs, inputs=inputs, run_id=run_id, **kwargs)


@contextmanager
def paused_runs_traced() -> Iterator[None]:
    """While LangSmith tracing is on (``LANGSMITH_TRACING``) and no tracer is set already, the
    graph invocations inside trace with :class:`PausedRunTracer` (LangChain's
    ``tracing_v2_callback_var``, as ``tracing_v2_enabled`` sets it). Nothing changes when
    tracing is off."""
    if tracing_v2_callback_var.get() is not None or not ls_utils.tracing_is_enabled():
        yield
        return
    token = tracing_v2_callback_var.set(PausedRunTracer())
    try:
        yield
    finally:
        tracing_v2_callback_var.reset(token)
