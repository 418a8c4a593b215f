"""Running a task's graph: start, stop after N executor steps, resume, export the run.

:func:`run_graph` streams with ``durability="sync"`` (a SIGKILL loses at most the step in
flight); a stop keeps the thread's next node, and a resume continues from that checkpoint.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from context import (
    Event,
    InvalidInputError,
    SqliteStores,
    TaskContext,
    TaskctxError,
    UnknownTaskError,
    apply_event,
    call_totals,
    model_call,
)
from context.pg_store import PgStores
from context.text import shown
from nodes.prices import price_call, price_table

from .checkpoint import PRUNE_EVERY, prune_thread
from .costs import call_row, from_row
from .diagnosis import Checked, ensure_sound
from .run_setup import RECURSION_LIMIT, run_config, thread_config, tools_steps

if TYPE_CHECKING:  # (the graph runtime: imported when a graph runs, not by `taskctx inspect` or an export)
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Command

__all__ = [
    "EXPORT_MARK",
    "RECURSION_LIMIT",
    "ResumePoint",
    "RunResult",
    "Stores",
    "export_run",
    "manifest_line",
    "pending_approval",
    "run_graph",
    "run_with_approvals",
    "thread_config",
    "tool_parameters",
]

#: The ``context.built`` events of a run that :attr:`RunResult.calls` keeps (the last ones; the
#: rest are in the event log): a long run's memory does not grow with its calls.
KEEP_CALLS = 100

#: The stores of a project: SQLite (one file) or Postgres; both have ``events``, ``artifacts``,
#: ``tasks``, ``path`` and ``close()``.
Stores = SqliteStores | PgStores


@dataclass
class RunResult:
    """How a run of a task's graph ended.

    Attributes:
        task_id: The task (its thread id).
        state: The task's state at the end of the run (its latest checkpoint).
        next_nodes: The nodes the thread would run next (empty: the graph ended).
        stopped_early: The run stopped after the requested number of executor steps.
        calls: The last :data:`KEEP_CALLS` ``context.built`` events of this run.
        interrupts: The values of the interrupts the thread waits on (approval requests).
        n_calls: Every ``context.built`` event this run appended (model calls).
        already_finished: A resume found the task finished: nothing ran, no graph was built.
    """

    task_id: str
    state: TaskContext
    next_nodes: tuple[str, ...]
    stopped_early: bool
    calls: list[Event] = field(default_factory=list)
    interrupts: list[Any] = field(default_factory=list)
    n_calls: int = 0
    already_finished: bool = False

    @property
    def finished(self) -> bool:
        """Whether the graph has no next node (the task completed or failed)."""
        return not self.next_nodes

    @property
    def waiting(self) -> dict[str, Any] | None:
        """The approval request the run stopped at, if any."""
        return self.interrupts[0] if self.interrupts else None


@dataclass(frozen=True)
class ResumePoint:
    """Where a resume continues a task: its latest checkpoint.

    Attributes:
        checkpoint_id: The checkpoint's id.
        executor_steps: The executor steps done before it.
        next_nodes: The nodes it runs next.
    """

    checkpoint_id: str | None
    executor_steps: int
    next_nodes: tuple[str, ...]


def run_graph(
    graph: CompiledStateGraph,
    stores: Stores,
    task_id: str,
    input: TaskContext | Command | None,
    *,
    stop_after: int | None = None,
    resume: bool | None = None,
    on_event: Callable[[Event], None] | None = None,
    prune: bool = False,
    checked: Checked | None = None,
    lease_owner: str | None = None,
) -> RunResult:
    """Run, or resume, the thread ``task_id`` of ``graph`` (streamed with ``durability="sync"``).

    After an ``interrupt()`` the stream ends with the thread's next node pending; the result's
    ``interrupts`` then holds the request (see :func:`run_with_approvals`).

    Args:
        graph: The task's compiled graph (e.g. :func:`graphs.build_orchestrator` on ``stores``).
        stores: The stores the graph's nodes write to.
        task_id: The task; its thread id.
        input: The new task's state (:func:`graphs.new_task`); None to continue the thread; or a
            ``Command(resume=answer)`` that answers a pending approval.
        stop_after: Stop once ``progress.executor_steps`` reaches this absolute count.
        resume: True: record the run as a resume (``resume.started``; ``input`` is then None);
            False: not a resume; None: as the graph decides (a run that continues the thread
            from a checkpoint this graph object did not leave there: :mod:`graphs.edits`).
        on_event: Called with every event appended during the run (progress display).
        prune: Keep only the thread's latest checkpoint (pruned every ``PRUNE_EVERY`` supersteps
            and when the run ends: :func:`graphs.checkpoint.prune_thread`); off, every
            superstep's checkpoint stays (for ``get_state_history``).
        checked: What the caller's own :func:`~graphs.diagnosis.ensure_sound` of this task
            returned just before (the check is then not run again).
        lease_owner: The run's owner token when the caller holds the task's lease for this run
            already (what :meth:`context.lease.TaskLeases.hold` yielded); None: a run of its own.

    Returns:
        How the run ended.

    Raises:
        UnknownTaskError: ``resume`` of a thread that has no checkpoint.
        InvalidInputError: ``input`` is a new task's state but ``task_id`` already has events.
        DamagedStoreError: Continuing a thread whose stored data fails
            :func:`graphs.diagnosis.ensure_sound` (``full=False``).
        LeaseHeldError: Another live process, or another run of this one, runs the task (holds
            its lease, :mod:`context.lease`); nothing was run. :class:`~context.LeaseLostError`:
            this run lost the lease midway; what it recorded stays, nothing after.
    """
    with stores.leases.hold(task_id, lease_owner):  # one writer per task: a second is refused here, at once
        return _run_held(graph, stores, task_id, input, stop_after, resume, on_event, prune, checked)


def _run_held(
    graph: CompiledStateGraph,
    stores: Stores,
    task_id: str,
    input: TaskContext | Command | None,
    stop_after: int | None,
    resume: bool,
    on_event: Callable[[Event], None] | None,
    prune: bool,
    checked: Checked | None,
) -> RunResult:
    """:func:`run_graph` with the task's lease held."""
    from langgraph.types import Command

    if isinstance(input, TaskContext) and (seen := stores.events.last_seq(task_id)):
        # a new task's state on a thread with a log would restart it: refused before any checkpoint is written
        raise InvalidInputError(
            f"task {task_id!r} already has {seen} events in this database: continue it with "
            f"run_graph(graph, stores, {task_id!r}, None, resume=True) or Project.resume({task_id!r}), "
            "or start the new task under another task id"
        )
    if checked is None and (resume or input is None or isinstance(input, Command)):
        # what is read back is checked before it is trusted (a long log: the bounded check, quick_diagnose)
        checked = ensure_sound(stores, graph.checkpointer, task_id, full=False)
    config = run_config(graph, stores, task_id, resume, checked)
    stopped, calls, n_calls = _stream(graph, stores, task_id, input, config, stop_after, on_event, prune)
    snap = graph.get_state(thread_config(task_id))
    return RunResult(
        task_id=task_id,
        state=TaskContext.model_validate(snap.values),
        next_nodes=tuple(snap.next),
        stopped_early=stopped,
        calls=calls,
        interrupts=[] if stopped else [i.value for i in (snap.interrupts or ())],
        n_calls=n_calls,
    )


def _stream(
    graph: CompiledStateGraph,
    stores: Stores,
    task_id: str,
    input: Any,
    config: dict[str, Any],
    stop_after: int | None,
    on_event: Callable[[Event], None] | None,
    prune: bool,
) -> tuple[bool, list[Event], int]:
    """Stream the graph until it ends or ``stop_after`` executor steps are done: ``(stopped early,
    the last KEEP_CALLS context.built events, how many there were)``."""
    from .tracing import paused_runs_traced, root_run_config

    roles = [n for n in graph.nodes if n not in ("__start__", "tools")]
    answering = input is not None and not isinstance(input, TaskContext)  # a Command answering an approval
    from context.lineage import children_of

    lin = stores.events.lineage(task_id)
    kids = [c for c, _ in children_of(stores.events, task_id)]
    resumed = "resume_token" in config["configurable"]
    answer = getattr(input, "resume", None) if answering else None
    answers = answer.get("request_id") if isinstance(answer, dict) else None
    fork = (lin.parent, lin.fork_seq) if lin else None
    root = root_run_config(task_id, resumed, answering, roles, fork, kids, answers)
    config = {**config, **root, "metadata": {**root["metadata"], **config.get("metadata", {})}}
    seen = stores.events.last_seq(task_id)
    calls: collections.deque[Event] = collections.deque(maxlen=KEEP_CALLS)
    n_calls = 0
    stopped = False
    supersteps = 0
    try:
        with paused_runs_traced() as tracer:  # an approval pause is traced as a pause, not an error
            reviews: list[Event] = []
            for update in graph.stream(input, config, stream_mode="updates", durability="sync"):
                supersteps += 1
                if prune and supersteps % PRUNE_EVERY == 0:
                    prune_thread(graph.checkpointer, task_id)
                new = stores.events.read(task_id, after=seen)
                if new:
                    seen = new[-1].seq
                    for e in new:
                        if e.kind == "context.built":
                            calls.append(e)
                            n_calls += 1
                        if on_event:
                            on_event(e)
                    reviews += [e for e in new if e.kind == "review.completed"]
                steps = tools_steps(update) if stop_after is not None else None
                if steps is not None and stop_after is not None and steps >= stop_after:
                    stopped = True
                    if tracer is not None:  # the root run's output names the stop
                        tracer.shared["stopped"] = (
                            f"stopped after {steps} executor step{'' if steps == 1 else 's'} (max_steps={stop_after})"
                        )
                    break
            if tracer is not None:  # each verdict (a revise the run recovered from too) as feedback on this root
                for r in reviews:
                    if not tracer.post_feedback(r.payload, event_id=r.id, seq=r.seq):
                        break  # said once; the next post would fail the same way
    except BaseException:  # a run that stops on an error (a budget, a model failure) is pruned too
        if prune:
            with contextlib.suppress(Exception):  # the error that stopped the run is what matters
                prune_thread(graph.checkpointer, task_id)
        raise
    if prune:
        prune_thread(graph.checkpointer, task_id)
    return stopped, list(calls), n_calls


def pending_approval(graph: CompiledStateGraph, task_id: str) -> dict[str, Any] | None:
    """The approval request a task's thread waits on.

    ``Command(resume=...)`` with nothing pending is a silent no-op in LangGraph: check this first.

    Args:
        graph: The task's graph.
        task_id: The task.

    Returns:
        The request (an approval interrupt's value), or None.
    """
    snap = graph.get_state(thread_config(task_id))
    for i in snap.interrupts or ():
        if isinstance(i.value, dict) and i.value.get("type") == "approval":
            return i.value
    return None


def tool_parameters(graph: CompiledStateGraph, tool: str) -> dict[str, Any] | None:
    """The JSON-schema ``parameters`` of a tool, as the graph's tool executor declares it.

    Args:
        graph: The graph (its ``tools`` node's executor's ``schemas()``, OpenAI format).
        tool: The tool's name.

    Returns:
        The parameters, or None: no such tool, no ``tools`` node, or no schemas. Never raises.
    """
    try:
        node = graph.builder.nodes["tools"].runnable
        # the TaskToolNode itself (a runnable), or a function LangGraph wrapped
        executor = getattr(node, "tools", None) or getattr(getattr(node, "func", None), "tools", None)
        from nodes.tools import parameters_of  # (nodes.tools loads langgraph.types: imported when used)

        return parameters_of(executor.schemas(), tool) if executor is not None else None
    except Exception:  # an odd executor never stops a prompt: the edit is then checked by the policy only
        return None


def run_with_approvals(
    graph: CompiledStateGraph,
    stores: Stores,
    task_id: str,
    input: TaskContext | Command | None,
    *,
    answer: Callable[[dict[str, Any]], dict[str, Any] | None],
    stop_after: int | None = None,
    resume: bool | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
    prune: bool = False,
    checked: Checked | None = None,
    lease_owner: str | None = None,
) -> RunResult:
    """:func:`run_graph`, answering each approval request the run stops at.

    The task's lease is held from the first run to the last, answers included.

    Args:
        graph: As in :func:`run_graph`.
        stores: As in :func:`run_graph`.
        task_id: As in :func:`run_graph`.
        input: As in :func:`run_graph`.
        answer: Called with the request (with the tool's ``parameters`` added when it declares
            them, so an edit can be checked); returns ``{"action": "approve" | "edit" |
            "reject" | "respond", ...}``, or None to stop and leave the request pending.
        stop_after: As in :func:`run_graph`.
        resume: As in :func:`run_graph` (the first run only).
        on_event: As in :func:`run_graph`.
        on_request: Called with each request before it is answered.
        prune: As in :func:`run_graph`.
        checked: As in :func:`run_graph` (the first run only).
        lease_owner: As in :func:`run_graph`.

    Returns:
        How the last run ended.

    Raises:
        LeaseHeldError: As in :func:`run_graph`.
    """

    with stores.leases.hold(task_id, lease_owner) as owner:
        result = run_graph(
            graph,
            stores,
            task_id,
            input,
            stop_after=stop_after,
            resume=resume,
            on_event=on_event,
            prune=prune,
            checked=checked,
            lease_owner=owner,
        )
        return _answered(graph, stores, task_id, result, answer, stop_after, on_event, on_request, prune, owner)


def _answered(
    graph: CompiledStateGraph,
    stores: Stores,
    task_id: str,
    result: RunResult,
    answer: Callable[[dict[str, Any]], dict[str, Any] | None],
    stop_after: int | None,
    on_event: Callable[[Event], None] | None,
    on_request: Callable[[dict[str, Any]], None] | None,
    prune: bool,
    owner: str,
) -> RunResult:
    """Answer the requests :func:`run_with_approvals`'s runs stop at, until one is left pending (one run: ``owner``'s)."""
    from langgraph.types import Command

    while result.waiting is not None:
        if on_request:
            on_request(result.waiting)
        params = tool_parameters(graph, str(result.waiting.get("tool")))
        reply = answer(result.waiting if params is None else {**result.waiting, "parameters": params})
        if reply is None:
            break
        if "request_id" in result.waiting and "request_id" not in reply:
            reply = {**reply, "request_id": result.waiting["request_id"]}  # a stale answer never fits another question
        result = run_graph(
            graph,
            stores,
            task_id,
            Command(resume=reply),
            stop_after=stop_after,
            on_event=on_event,
            prune=prune,
            lease_owner=owner,
        )
    return result


def manifest_line(e: Event) -> dict[str, Any]:
    """One ``manifests.jsonl`` line of a model call.

    Args:
        e: A ``context.built`` event.

    Returns:
        The line's fields (call, role, step, budget, tokens, usage, the blocks' choices).
    """
    p = e.payload
    return {
        "call": p["call"],
        "role": p["role"],
        "step_id": p["step_id"],
        "budget": p["budget"],
        "prompt_tokens": p["prompt_tokens"],
        "cached_prefix_tokens": p["cached_prefix_tokens"],
        "transcript_reset": p["transcript_reset"],
        "rebuilt": p.get("rebuilt"),
        "usage": p.get("usage"),
        "blocks": [
            {k: b[k] for k in ("id", "layer", "kind", "trust", "tokens", "included", "reason")} for b in p["blocks"]
        ],
    }


#: The export's own record in ``<out>/<task_id>/``: the seq it has written up to, and what it wrote.
EXPORT_MARK = ".export.json"
#: The files an export appends to (their sizes are in its record).
_EXPORTED = ("trace.jsonl", "manifests.jsonl", "calls.jsonl")


def _state_sha256(out: Path) -> str:
    """The sha256 of ``out``'s ``state.json`` ("" when it is gone): :func:`nodes.workspace.paths.file_sha256`
    (imported here: ``nodes.workspace`` loads the tool node, which commands that only read need not)."""
    from nodes.workspace.paths import file_sha256

    return file_sha256(out / "state.json")


def _current_export(stores: Stores, task_id: str, out: Path) -> tuple[dict[str, Any], TaskContext] | None:
    """The record of the export in ``out`` (``EXPORT_MARK``) and the state it wrote, when the
    folder holds an export of this task's log as it is up to the record's cursor: its files have
    the sizes (and ``state.json`` the hash) the record gives, and the log's events at seq 1 and
    at the cursor carry the ids it noted (so another database's task of the same id, or a log
    rewritten since, is exported anew). None otherwise (then everything is written again)."""
    try:
        mark = json.loads((out / EXPORT_MARK).read_text(encoding="utf-8"))
        if mark.get("task_id") != task_id or int(mark["cursor"]) < 1:
            return None
        for name in _EXPORTED:
            if (out / name).stat().st_size != int(mark["bytes"][name]):
                return None
        if (
            not all((out / n).is_file() for n in ("context_pack.md", "costs.json"))
            or _state_sha256(out) != mark["state_sha256"]
        ):
            return None
        at = {int(mark["cursor"]): mark["last_id"], 1: mark["first_id"]}
        for seq, want in at.items():
            got = stores.events.read(task_id, after=seq - 1, limit=1)
            if not got or got[0].id != want:
                return None
        state = TaskContext.model_validate_json((out / "state.json").read_bytes())
    except (OSError, ValueError, KeyError, TypeError, TaskctxError):
        return None
    return mark, state


def export_run(stores: Stores, task_id: str, out_root: str | Path) -> Path:
    """Write a task's run files to ``<out_root>/<task_id>/``, only what is new since the last export.

    ``trace.jsonl`` (every event), ``state.json`` (the state replayed from the log),
    ``context_pack.md`` (the latest executor prompt as sent), ``manifests.jsonl`` (one line per
    model call), ``calls.jsonl`` and ``costs.json`` (each call priced at the list prices, and
    the totals per role and task); ``.export.json`` records the last seq written. A current export is left as it
    is; one that is behind gets only the new events: the files are the same bytes a whole
    export writes.

    Args:
        stores: The task's stores.
        task_id: The task.
        out_root: The export root.

    Returns:
        The task's folder.

    Raises:
        UnknownTaskError: The task has no events.
    """
    out = Path(out_root) / task_id
    current = _current_export(stores, task_id, out)
    after = int(current[0]["cursor"]) if current is not None else 0
    events = stores.events.iter(task_id, after=after)  # one pass, streamed: the log is never held in memory whole
    first = next(events, None)
    if first is None and current is not None:
        return out  # current: nothing new since the last export
    if first is None:
        raise UnknownTaskError(f"no events for task {task_id!r}")
    out.mkdir(parents=True, exist_ok=True)
    mark: dict[str, Any] = current[0] if current is not None else {"task_id": task_id, "first_id": first.id}
    state = current[1] if current is not None else TaskContext()
    prompt: dict[str, Any] | None = mark.get("prompt")
    new_prompt = False
    last = first
    mode = "a" if current is not None else "w"
    role_calls: dict[str, int] = mark.get("role_calls", {})  # each role's calls so far (ModelCall.role_call)
    table = price_table()
    with (
        open(out / "trace.jsonl", mode, encoding="utf-8") as trace,
        open(out / "manifests.jsonl", mode, encoding="utf-8") as manifests,
        open(out / "calls.jsonl", mode, encoding="utf-8") as calls,
    ):
        for e in itertools.chain([first], events):
            trace.write(e.to_json() + "\n")
            state = apply_event(state, e)
            last = e
            if e.kind == "context.built":
                manifests.write(json.dumps(manifest_line(e), sort_keys=True) + "\n")
                calls.write(_call_line(e, role_calls, table))
                if e.payload["role"] == "executor" and e.payload.get("prompt_ref"):
                    prompt = {k: e.payload[k] for k in _PACK_FIELDS}
                    new_prompt = True
    (out / "state.json").write_text(state.model_dump_json(indent=2) + "\n", encoding="utf-8")
    _write_costs(out)
    if new_prompt or current is None:
        pack = "# context pack\n\n(no executor call yet)\n"
        if prompt is not None:
            body = shown(stores.artifacts.get(prompt["prompt_ref"]))
            pack = (
                f"# context pack: {task_id}, executor call {prompt['call']} (step {prompt['step_id']})\n\n"
                f"prompt tokens: {prompt['prompt_tokens']} of budget {prompt['budget']}; "
                f"cached prefix: {prompt['cached_prefix_tokens']}\n\n{body}"
            )
        (out / "context_pack.md").write_text(pack, encoding="utf-8")
    mark.update(
        cursor=last.seq,
        last_id=last.id,
        prompt=prompt,
        role_calls=role_calls,
        bytes={n: (out / n).stat().st_size for n in _EXPORTED},
        state_sha256=_state_sha256(out),
    )
    (out / EXPORT_MARK).write_text(json.dumps(mark, sort_keys=True) + "\n", encoding="utf-8")
    return out


def _call_line(e: Event, role_calls: dict[str, int], table: Any) -> str:
    """The ``calls.jsonl`` line of the ``context.built`` event ``e``, priced (``role_calls`` counts its role's call)."""
    role = e.payload["role"]
    role_calls[role] = role_calls.get(role, 0) + 1
    call = model_call(e, role_calls[role])
    return json.dumps(call_row(call.model_copy(update={"cost": price_call(call, table)})), sort_keys=True) + "\n"


def _write_costs(out: Path) -> None:
    """``costs.json``: the totals of the calls in ``calls.jsonl`` (per role and task)."""
    rows = (out / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    totals = call_totals([from_row(json.loads(line)) for line in rows]).model_dump(mode="json")
    (out / "costs.json").write_text(json.dumps(totals, indent=2) + "\n", encoding="utf-8")


#: What ``context_pack.md`` shows of the last executor call's ``context.built`` payload.
_PACK_FIELDS = ("call", "step_id", "prompt_tokens", "budget", "cached_prefix_tokens", "prompt_ref")
