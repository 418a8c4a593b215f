"""Running the independent read-only calls of one model answer at once: :func:`run_at_once`.

The tool node (:class:`~nodes.tools.TaskToolNode`) picks the calls (no side effects, allowed by the
policy without approval, no marker) and records their outcomes itself, in the answer's call order,
on its own thread: only the executor's ``execute`` runs in the worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from langchain_core.runnables.config import ContextThreadPoolExecutor

from .loops import CALLER_LOOP, running_loop

__all__ = ["DEFAULT_MAX_PARALLEL", "run_at_once"]

#: How many read-only calls of one model answer the tool node runs at the same time, by default.
DEFAULT_MAX_PARALLEL = 4

T = TypeVar("T")


def run_at_once(jobs: Sequence[Callable[[], T]], max_parallel: int) -> list[T]:
    """Run ``jobs``, up to ``max_parallel`` at a time, and return their results in the jobs' order.

    Each job runs in a worker thread with a copy of the caller's context variables (LangGraph's
    run config and stream writer stay reachable from a tool), by langchain-core's
    ``ContextThreadPoolExecutor``. One job, or ``max_parallel`` 1, runs on the caller's thread.

    Args:
        jobs: Callables taking no argument; each should catch its own errors (a job that raises
            makes this raise, once every job has finished).
        max_parallel: The most jobs running at the same time (>= 1).

    Returns:
        The jobs' results, ``results[i]`` from ``jobs[i]``, whatever order they finished in.

    Raises:
        ValueError: ``max_parallel`` is below 1.
    """
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1 (got {max_parallel}); 1 runs the calls one by one")
    if len(jobs) <= 1 or max_parallel == 1:
        return [job() for job in jobs]
    here = running_loop()  # blocked while the jobs run: a tool bound to it must not wait for it
    token = CALLER_LOOP.set(here) if here is not None else None
    try:
        with ContextThreadPoolExecutor(max_workers=min(max_parallel, len(jobs))) as pool:
            futures = [pool.submit(job) for job in jobs]
    finally:
        if token is not None:
            CALLER_LOOP.reset(token)
    return [f.result() for f in futures]
