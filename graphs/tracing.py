"""Tracing: what a taskctx run looks like in LangSmith, and a tracing session that never slows a run down.

With ``LANGSMITH_TRACING=true`` every graph invocation is one trace; :class:`PausedRunTracer` ends
a node paused at ``interrupt()`` as a pause, not an error; :func:`tracing_session` masks secrets
and keeps a process at full speed without a network.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from langchain_core.tracers.context import tracing_v2_callback_var
from langchain_core.tracers.langchain import LangChainTracer
from langgraph.errors import GraphInterrupt
from langsmith import utils as ls_utils

from context.secrets import mask_secrets

__all__ = [
    "TRACE_COMMAND",
    "TRACE_KEYS",
    "TRACING_NOTICE",
    "REVIEW_FEEDBACK_KEY",
    "PausedRunTracer",
    "paused_runs_traced",
    "root_run_config",
    "run_tree_lines",
    "trace_anonymizer",
    "tracing_session",
    "walk_runs",
]

#: The ``taskctx`` command running (the CLI sets it; None: the Python API), for the root run's name.
TRACE_COMMAND: ContextVar[str | None] = ContextVar("taskctx_trace_command", default=None)


def root_run_config(
    task_id: str,
    resume: bool,
    answering: bool,
    roles: Iterable[str],
    lineage: tuple[str, int] | None = None,
    children: Iterable[str] = (),
    answers: str | None = None,
) -> dict[str, Any]:
    """The root run's name, tags and metadata of one graph invocation of a task.

    Args:
        task_id: The task (its thread id: LangSmith groups the task's traces as one thread).
        resume: The invocation resumes the task from its checkpoint.
        answering: The invocation answers a pending approval.
        roles: The graph's role nodes.
        lineage: A fork's parent task and fork seq (None: not a fork).
        children: The tasks forked from it so far.
        answers: The approval request the invocation answers (its id), if known.

    Returns:
        ``{"run_name": "taskctx <command> <task>", "tags": [...], "metadata": {...}}``: the command
        is :data:`TRACE_COMMAND` (else ``resume`` or ``run``); tags ``command:<command>``,
        ``resume`` or ``start`` (``approval`` for an answer); metadata ``thread_id``,
        ``session_id`` (both the task id), ``command`` and ``roles``; a fork's also
        ``parent_task_id`` and ``fork_seq`` (and the tag ``fork``), a parent's ``children``; for an
        answer, ``answers_request_id`` (the paused root's ``approval_request_ids`` holds the same id).
    """
    command = TRACE_COMMAND.get() or ("resume" if resume else "run")
    how = "approval" if answering else ("resume" if resume else "start")
    meta: dict[str, Any] = {"thread_id": task_id, "session_id": task_id, "command": command, "roles": sorted(roles)}
    tags = [f"command:{command}", how]
    if lineage is not None:
        meta.update(parent_task_id=lineage[0], fork_seq=lineage[1])
        tags.append("fork")
    kids = sorted(children)
    if kids:
        meta["children"] = kids
    if answers:
        meta["answers_request_id"] = answers
    return {"run_name": f"taskctx {command} {task_id}", "tags": tags, "metadata": meta}


#: The LangSmith feedback key of the reviewer's verdict.
REVIEW_FEEDBACK_KEY = "review"

#: The metadata keys every model run of a taskctx node carries.
TRACE_KEYS = ("task_id", "step_id", "role", "budget", "prompt_tokens", "cached_prefix_tokens", "manifest")


def walk_runs(run: Any, depth: int = 0) -> Iterable[tuple[int, Any]]:
    """``run`` and its descendants (``child_runs``), in start order.

    Args:
        run: A collected run.
        depth: ``run``'s depth.

    Returns:
        ``(depth, run)`` pairs.
    """
    yield depth, run
    for child in sorted(getattr(run, "child_runs", None) or [], key=lambda r: (r.start_time, r.dotted_order or "")):
        yield from walk_runs(child, depth + 1)


def run_tree_lines(run: Any, *, hide_routers: bool = True) -> list[str]:
    """A collected run tree as text: one line per run.

    Each line: indentation, name, run type, ``role:*`` tags and, for model runs, the prompt and
    cached-prefix tokens from the metadata.

    Args:
        run: The root run (e.g. from ``RunCollectorCallbackHandler``).
        hide_routers: Leave the routers (``after_*``) out.

    Returns:
        The lines.
    """
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


# ---- tracing without a network ----------------------------------------------------------------
#: How the one line about failed uploads starts.
TRACING_NOTICE = "tracing: "

#: (text in langsmith's warning, reason shown), first match wins.
_REASONS = (
    ("Connection refused", "connection refused"),
    ("NameResolution", "host name not resolved"),
    ("Name or service not known", "host name not resolved"),
    ("Temporary failure in name resolution", "host name not resolved"),
    ("timed out", "timed out"),
    ("Timeout", "timed out"),
    ("Network is unreachable", "network unreachable"),
    ("SSLError", "TLS error"),
    ("Authentication failed", "authentication failed: check LANGSMITH_API_KEY"),
    ("Forbidden", "forbidden: check LANGSMITH_API_KEY and LANGSMITH_WORKSPACE_ID"),
    ("Rate limit exceeded", "rate limited"),
)


def _reason(message: str) -> str:
    for needle, reason in _REASONS:
        if needle in message:
            return reason
    return " ".join(message.split(": ", 1)[-1].split())[:100]


class _OneNotice(logging.Filter):
    """On the ``langsmith.client`` logger: the first failed request becomes one ``tracing: ...`` line.

    It, the later ones and their consequences (no run compression, dropped trace data) are not
    printed.
    """

    def __init__(self, url: str, notify: Callable[[str], None]) -> None:
        super().__init__()
        self.url, self.notify = url, notify
        self.failed = threading.Event()
        self._said = False
        self._lock = threading.Lock()

    def say(self, reason: str) -> None:
        """Say ``reason`` once, as a ``tracing: ...`` line (later calls say nothing)."""
        with self._lock:
            if self._said:
                return
            self._said = True
        kept = os.environ.get("LANGSMITH_FAILED_TRACES_DIR")
        where = f"failed uploads are kept in {kept}" if kept else "its trace is not uploaded"
        self.notify(
            f"{TRACING_NOTICE}LangSmith at {self.url} did not take the trace ({reason}); the run goes on, "
            f"{where} (unset LANGSMITH_TRACING to turn tracing off)"
        )

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether langsmith's ``record`` is printed: never one about a failed upload (it is said once)."""
        if record.levelno < logging.WARNING:
            return True
        msg = record.getMessage()
        if msg.startswith("Error creating feedback") and record.exc_info:  # the review's feedback
            self.say(_reason(str(record.exc_info[1])))
            return False
        if msg.startswith("Failed to "):
            self.say(_reason(msg))
            self.failed.set()
            return False
        return not (self.failed.is_set() and msg.startswith(("Run compression is not enabled", "Dropped ")))


def _stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@contextmanager
def tracing_session(
    *, flush_seconds: float = 5.0, notify: Callable[[str], None] = _stderr_line
) -> Iterator[Any | None]:
    """Run a process's traced work so that an unreachable LangSmith costs nothing and is said once.

    Only while LangSmith tracing is on (``LANGSMITH_TRACING=true``), and only where the user has
    not set them: ``LANGSMITH_USE_DAEMON=true`` (upload threads never hold the process open) and,
    when no client is configured yet, a ``langsmith.Client`` with short timeouts, no retries of
    failed connections and :func:`trace_anonymizer`. The first failed upload calls ``notify`` with
    one line starting :data:`TRACING_NOTICE`; langsmith's own warnings are not printed. On
    leaving, the queued uploads get at most ``flush_seconds``. Raises nothing of its own.

    Args:
        flush_seconds: Seconds to wait for the uploads at the end (not at all once one failed).
        notify: Called with the one line, at most once.

    Yields:
        The client, or None when tracing is off.
    """
    # (imported here: langsmith is slow to import and a run without tracing never needs it)
    import langsmith
    import langsmith.run_trees as rt
    import langsmith.utils as ls_utils

    if not ls_utils.tracing_is_enabled():
        yield None
        return
    set_env = "LANGSMITH_USE_DAEMON" not in os.environ
    if set_env:
        os.environ["LANGSMITH_USE_DAEMON"] = "true"
        ls_utils.get_env_var.cache_clear()  # type: ignore[attr-defined]  # an lru_cache
    # The filter goes on before a client exists: its upload thread fetches /info at once.
    notice = _OneNotice(ls_utils.get_api_url(None), notify)
    log = logging.getLogger("langsmith.client")
    log.addFilter(notice)
    client = None
    try:
        if rt._CLIENT is None:  # as langchain_core's wait_for_all_tracers reads it: nothing configured yet
            retry = ls_utils.LangSmithRetry(
                total=3,
                connect=0,  # a refused or unresolvable endpoint is not retried (3 attempts per batch remain)
                status_forcelist=[429, 500, 502, 503, 504, 408, 425],
                backoff_factor=0.5,
                allowed_methods=None,
                raise_on_redirect=False,
                raise_on_status=False,
                respect_retry_after_header=True,
            )
            langsmith.configure(
                client=langsmith.Client(timeout_ms=(3_000, 10_000), retry_config=retry, anonymizer=trace_anonymizer())
            )
        client = rt.get_cached_client()
        notice.url = client.api_url
        yield client
    finally:
        try:
            if client is not None:
                _bounded_flush(client, notice, flush_seconds)
        finally:
            log.removeFilter(notice)
            if set_env:
                os.environ.pop("LANGSMITH_USE_DAEMON", None)
                ls_utils.get_env_var.cache_clear()  # type: ignore[attr-defined]  # an lru_cache


def trace_anonymizer() -> Callable[[Any], Any]:
    """The langsmith anonymizer with :func:`context.secrets.mask_secrets` as its replacer.

    Every string of a run's inputs, outputs and error is masked before it is uploaded: a model
    run's output is the model's reply before the executor records it.

    Returns:
        The anonymizer.
    """
    from langsmith.anonymizer import create_anonymizer  # (slow to import: only when tracing is on)

    return create_anonymizer(lambda text, _path: mask_secrets(text).text)


def _bounded_flush(client: Any, notice: _OneNotice, seconds: float) -> None:
    """Flush ``client`` in short slices until its queue is done, an upload failed, or ``seconds`` passed.

    In the last case (nothing said yet) say that the endpoint did not answer.
    """
    queue = client.tracing_queue
    if queue is None:
        return
    deadline = time.monotonic() + seconds
    while not notice.failed.is_set():
        left = deadline - time.monotonic()
        client.flush(timeout=max(0.0, min(0.1, left)))
        if not queue.unfinished_tasks:
            return
        if left <= 0:
            notice.say(f"no answer within {seconds:g} s")
            return


class PausedRunTracer(LangChainTracer):
    """A ``LangChainTracer`` that ends a run stopped by LangGraph ``interrupt()`` as a pause, not an error.

    Outputs ``{"paused": "waiting for approval" | "waiting for input", "requests": [...]}`` (for
    an approval: ``request_id, call_id, tool, risk``), tag ``paused:approval`` (or
    ``paused:interrupt``), metadata ``approval_request_ids``; the root run of that invocation then
    ends the same way (outputs ``{"paused": "paused for approval", "requests": [...]}``, status
    ``paused``), not as the state it stopped at. Every other error is traced as one.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: shared with the copies LangChain makes: ``paused`` (the invocation's pause, its outputs,
        #: or None) and ``roots`` (the root runs ended so far, in order)
        self.shared: dict[str, Any] = {"paused": None, "roots": []}

    def copy_with_metadata_defaults(self, **kwargs: Any) -> LangChainTracer:
        """LangChain's copy of this tracer for a run with its own metadata, sharing :attr:`shared`.

        Args:
            **kwargs: As LangChain passes them (``metadata``, ``tags``).

        Returns:
            The copy.
        """
        copy = super().copy_with_metadata_defaults(**kwargs)
        if isinstance(copy, PausedRunTracer):
            copy.shared = self.shared
        return copy

    @property
    def paused(self) -> dict[str, Any] | None:
        """The outputs of this invocation's pause, or None."""
        return self.shared["paused"]

    @property
    def root_ids(self) -> list[UUID]:
        """The root runs ended so far, in order."""
        return self.shared["roots"]

    def on_chain_error(
        self, error: BaseException, *, inputs: dict[str, Any] | None = None, run_id: UUID, **kwargs: Any
    ):  # type: ignore[override]
        """End the run ``run_id``: as a pause for a ``GraphInterrupt``, else as the error.

        Args:
            error: What the run raised.
            inputs: The run's inputs, if given.
            run_id: The run.
            **kwargs: As LangChain passes them.

        Returns:
            The ended run.
        """
        if isinstance(error, GeneratorExit):  # the caller stopped streaming: a planned stop (max_steps)
            run = self._get_run(run_id)
            run.tags = [*(run.tags or []), "stopped"]
            run.extra.setdefault("metadata", {})["status"] = "stopped"
            why = self.shared.get("stopped") or "the caller stopped streaming the run"
            return self.on_chain_end({"stopped": why}, run_id=run_id, **kwargs)
        if not isinstance(error, GraphInterrupt):
            return super().on_chain_error(error, inputs=inputs, run_id=run_id, **kwargs)
        values = [getattr(i, "value", i) for i in (error.args[0] if error.args else ())]
        approvals = [v for v in values if isinstance(v, dict) and v.get("type") == "approval"]
        requests = [{k: v.get(k) for k in ("request_id", "call_id", "tool", "risk")} for v in approvals]
        outputs = {"paused": "waiting for approval" if approvals else "waiting for input", "requests": requests}
        self.shared["paused"] = outputs  # the root run ends as this pause too
        _mark_paused(self._get_run(run_id), outputs)
        return self.on_chain_end(outputs, inputs=inputs, run_id=run_id, **kwargs)

    def on_chain_end(self, outputs: dict[str, Any], *, run_id: UUID, **kwargs: Any):  # type: ignore[override]
        """End the run ``run_id``; a root run's metadata gets ``status`` (the task's, when it ended).

        Args:
            outputs: The run's outputs.
            run_id: The run.
            **kwargs: As LangChain passes them.

        Returns:
            The ended run.
        """
        run = self._get_run(run_id)
        if run.parent_run_id is None:
            self.root_ids.append(run_id)
            if self.paused is not None and "stopped" not in (run.tags or []):
                _mark_paused(run, self.paused)
                outputs = {**self.paused, "paused": "paused for " + self.paused["paused"].removeprefix("waiting for ")}
            meta = run.extra.setdefault("metadata", {})
            control = outputs.get("control") if isinstance(outputs, dict) else None
            status = control.get("status") if isinstance(control, dict) else getattr(control, "status", None)
            meta.setdefault("status", status or "ended")
        return super().on_chain_end(outputs, run_id=run_id, **kwargs)

    def post_feedback(self, review: dict[str, Any], *, event_id: str | None = None, seq: int | None = None) -> bool:
        """Post a reviewer's verdict as LangSmith feedback on the last root run this tracer ended.

        Key :data:`REVIEW_FEEDBACK_KEY`, score 1 (``approve``) or 0 (``revise``), ``value`` the
        verdict, comment its summary, ``extra.issues`` its issues (and ``extra.seq``, the review's
        seq in the event log, when given). A failed post is logged by langsmith (and said once by
        :func:`tracing_session`); it never stops the run.

        Args:
            review: A ``review.completed`` payload (``verdict``, ``summary``, ``issues``).
            event_id: The ``review.completed`` event's id: the feedback's id is made from it, so
                posting one review twice is one feedback.
            seq: The event's seq.

        Returns:
            Whether the client took the feedback (False: no root run ended yet, or the post failed).
        """
        if not self.root_ids:
            return False
        root = self.root_ids[-1]
        extra: dict[str, Any] = {"issues": list(review.get("issues") or [])}
        if seq is not None:
            extra["seq"] = seq
        try:
            with warnings.catch_warnings():  # the run's project is the client's own: no session_id to give
                warnings.filterwarnings("ignore", message=".*without session_id", category=ls_utils.LangSmithWarning)
                self.client.create_feedback(
                    run_id=root,
                    trace_id=root,
                    key=REVIEW_FEEDBACK_KEY,
                    score=1 if review["verdict"] == "approve" else 0,
                    value=review["verdict"],
                    comment=review.get("summary") or None,
                    extra=extra,
                    feedback_id=uuid5(NAMESPACE_URL, f"taskctx:review:{event_id}") if event_id else None,
                    stop_after_attempt=1,
                )
        except Exception:  # noqa: BLE001 - langsmith logged it ("Error creating feedback"); the run goes on
            return False
        return True


def _mark_paused(run: Any, outputs: dict[str, Any]) -> None:
    """Tag ``run`` as paused (``paused:approval`` or ``paused:interrupt``), with status and request ids."""
    approvals = outputs["paused"] == "waiting for approval"
    tag = "paused:approval" if approvals else "paused:interrupt"
    run.tags = [*(t for t in run.tags or [] if t != tag), tag]
    meta = run.extra.setdefault("metadata", {})
    meta["status"] = "paused"
    if approvals:
        meta["approval_request_ids"] = [r["request_id"] for r in outputs["requests"]]


@contextmanager
def paused_runs_traced() -> Iterator[PausedRunTracer | None]:
    """Trace the graph invocations inside with :class:`PausedRunTracer`.

    While LangSmith tracing is on and no tracer is set already (LangChain's
    ``tracing_v2_callback_var``, as ``tracing_v2_enabled`` sets it); nothing changes when tracing
    is off.

    Yields:
        The tracer, or None when tracing is off or another tracer is set.
    """
    if tracing_v2_callback_var.get() is not None or not ls_utils.tracing_is_enabled():
        yield None
        return
    tracer = PausedRunTracer()
    token = tracing_v2_callback_var.set(tracer)
    try:
        yield tracer
    finally:
        tracing_v2_callback_var.reset(token)
