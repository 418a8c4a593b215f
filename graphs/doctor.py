"""Checks of a task's stored data as a whole: the event log, its artifacts, the task registry and
the LangGraph checkpoint (``taskctx doctor``; ``taskctx resume`` runs :func:`ensure_sound` first).

:func:`diagnose` returns the findings, one line each, prefixed by where the damage is
(``event log:``, ``artifact store:``, ``task registry:``, ``checkpoint:``, ``database:``); empty
means sound. Beyond :mod:`context.verify` it checks the data schema version
(:data:`context.models.SCHEMA_VERSION`: data of a newer taskctx is refused; an older one is
migrated where a tested migration exists), that the checkpoint loads, that the log
holds every event the checkpoint has folded, and that folding the log up to the checkpoint's
cursor gives the checkpointed state (a row deleted, altered or added behind the log's back, or a
state written outside a node, shows up here).
"""

from __future__ import annotations

from typing import Any

from context import PAYLOAD_MODELS, DamagedStoreError, TaskContext, replay
from context.models import SCHEMA_VERSION
from context.store import repair_hint
from context.verify import check_artifacts, check_events
from nodes.runtime import PARTS

__all__ = [
    "FULL_CHECK_EVENTS",
    "REGISTERED_MARK",
    "checkpoint_state",
    "diagnose",
    "ensure_sound",
    "inspectable",
    "quick_diagnose",
    "quick_state",
]

#: Checkpoint metadata key set on every checkpoint of a task that has a registry row when it runs
#: (:func:`graphs.runner.run_graph` puts it in the run's ``config["metadata"]``, which LangGraph
#: copies into each checkpoint's metadata): it tells a lost registry row (a finding) from a task
#: started through the Python API, which never had one (not a finding).
REGISTERED_MARK = "taskctx_registered"


def _marked_registered(checkpointer: Any, task_id: str) -> bool:
    if checkpointer is None:
        return False
    tup = checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
    return bool(tup is not None and (tup.metadata or {}).get(REGISTERED_MARK))


def checkpoint_state(checkpointer: Any, task_id: str) -> tuple[TaskContext | None, list[str]]:
    """The TaskContext of ``task_id``'s latest checkpoint (None when there is none) and the
    findings about it (a checkpoint that does not load as a TaskContext)."""
    if checkpointer is None:
        return None, []
    tup = checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
    if tup is None:
        return None, []
    values = tup.checkpoint.get("channel_values") or {}
    values = {k: v for k, v in values.items() if k in TaskContext.model_fields}
    if not values:
        return None, []
    try:
        return TaskContext.model_validate(values), []
    except Exception as exc:  # pydantic's ValidationError, or a part of another schema
        first = " ".join(str(exc).split())[:200]
        return None, [f"checkpoint: {tup.config['configurable'].get('checkpoint_id')} does not load: {first}"]


def _compare(state: TaskContext, events: list[Any]) -> list[str]:
    cursor = state.events.cursor
    if cursor == 0:
        return []  # the input checkpoint: nothing folded yet
    last = events[-1].seq if events else 0
    if cursor > last:
        return _missing(cursor, last)
    folded = replay(events[:cursor])
    differ = [p for p in PARTS if getattr(folded, p) != getattr(state, p)]
    if not differ:
        return []
    return [
        f"checkpoint: its state differs from the event log's fold up to seq {cursor} in {', '.join(differ)} "
        "(the log or the checkpoint was changed outside taskctx)"
    ]


def _missing(cursor: int, last: int) -> list[str]:
    n = cursor - last
    return [
        f"event log: ends at seq {last} but the checkpoint has folded {cursor} events: the last {n} "
        f"event{'s are' if n > 1 else ' is'} missing from the log"
    ]


def diagnose(
    stores: Any, checkpointer: Any, task_id: str, *, artifacts: bool = True, resumable: bool = False
) -> list[str]:
    """Every finding about ``task_id``: its registry row, event log (:func:`context.verify.check_events`),
    the artifacts it names (``artifacts=True``) and its latest checkpoint (see module doc). With
    ``resumable`` (the CLI's view: every task it starts is registered and checkpointed), a task
    whose checkpoints say a taskctx command started it (:data:`REGISTERED_MARK`) but that has no
    registry row, and a registered task with events but no checkpoint, are findings too. A task
    started through the Python API (events, no registry row, maybe no checkpoint in this
    database) is not damaged: the CLI reads it, it cannot resume it."""
    out: list[str] = []
    try:
        spec = stores.tasks.get(task_id)
    except DamagedStoreError as exc:
        out += exc.problems
        spec = {}
    try:
        events = stores.events.read(task_id)
    except DamagedStoreError as exc:
        return [*out, *exc.problems]
    state, cp = checkpoint_state(checkpointer, task_id)
    out += cp
    newer = _newer_schema(events, state)
    if newer:
        return [*out, *newer]
    if resumable and spec is None and _marked_registered(checkpointer, task_id):
        out.append("task registry: no row for this task (how it was started is lost): it can be inspected, not resumed")
    if resumable and spec is not None and state is None and not cp and events:
        out.append(f"checkpoint: none, though the event log holds {len(events)} events: it cannot be resumed")
    out += check_events(events)
    if artifacts:
        out += check_artifacts(stores.artifacts, events)
    if state is not None and not any(f.startswith("event log:") for f in out):
        out += _compare(state, events)
    return out


def _newer_schema(events: list[Any], state: TaskContext | None) -> list[str]:
    """Findings for data recorded by a newer taskctx (its schema version above ours)."""
    out = []
    v = events[0].payload.get("schema_version", 0) if events and events[0].kind == "task.created" else 0
    if isinstance(v, int) and v > SCHEMA_VERSION:
        out.append(
            f"event log: recorded with taskctx data schema {v}, newer than this taskctx's ({SCHEMA_VERSION}): "
            "upgrade taskctx to continue it"
        )
    if state is not None and state.events.schema_version > SCHEMA_VERSION:
        out.append(
            f"checkpoint: written with taskctx data schema {state.events.schema_version}, newer than this "
            f"taskctx's ({SCHEMA_VERSION}): upgrade taskctx to continue it"
        )
    return out


#: A log longer than this many events gets the bounded check from ``ensure_sound(full=False)``.
FULL_CHECK_EVENTS = 2_000


def quick_state(stores: Any, checkpointer: Any, task_id: str) -> tuple[TaskContext | None, list[str]] | None:
    """The bounded check of a long log (None: the log holds at most :data:`FULL_CHECK_EVENTS`
    events or there is no checkpoint to start from; run :func:`diagnose`): ``(state, findings)``,
    ``state`` the checkpoint's state with the events after its cursor folded on (the log's fold
    to its end; None when there are findings). Its cost does not grow with the log: the registry
    row and the latest checkpoint load; the log holds one row per seq from 1 to its last (a count
    and a max in SQL); the first event's schema version; every event after the checkpoint's
    cursor is there, parses, passes :func:`context.verify.check_events` and folds onto the
    checkpoint's state. A damage before the cursor that keeps the seqs whole (an altered payload)
    is left to :func:`diagnose` (``taskctx doctor``)."""
    out: list[str] = []
    try:
        stores.tasks.get(task_id)
    except DamagedStoreError as exc:
        out += exc.problems
    state, cp = checkpoint_state(checkpointer, task_id)
    if cp:
        return None, [*out, *cp]
    last = stores.events.last_seq(task_id)
    if state is None or last <= FULL_CHECK_EVENTS or state.events.cursor == 0:
        return None
    try:
        first = stores.events.read(task_id, limit=1)
    except DamagedStoreError as exc:
        return None, [*out, *exc.problems]
    newer = _newer_schema(first, state)
    if newer:
        return None, [*out, *newer]
    n = stores.events.count(task_id)
    if n != last:
        return None, [
            *out,
            f"event log: holds {n} rows but its seqs run from 1 to {last}: a row is missing or repeated",
        ]
    cursor = state.events.cursor
    if cursor > last:
        return None, [*out, *_missing(cursor, last)]
    try:
        tail = stores.events.read(task_id, after=cursor)
    except DamagedStoreError as exc:
        return None, [*out, *exc.problems]
    out += check_events(tail, after=cursor)
    if out:
        return None, out
    try:
        return replay(tail, state), []
    except Exception as exc:  # a payload its kind does not allow (check_events names most of them)
        return None, [
            f"event log: the events after seq {cursor} do not fold onto the checkpoint ({type(exc).__name__})"
        ]


def quick_diagnose(stores: Any, checkpointer: Any, task_id: str) -> list[str] | None:
    """The findings of :func:`quick_state` (None where it does not apply: run :func:`diagnose`)."""
    got = quick_state(stores, checkpointer, task_id)
    return None if got is None else got[1]


def ensure_sound(stores: Any, checkpointer: Any, task_id: str, *, full: bool = True) -> None:
    """Raise ``DamagedStoreError`` (what, where, what to do; ``problems`` lists all) when
    :func:`diagnose` (artifacts not read: each is checked when it is read) finds anything. With
    ``full=False`` a log longer than :data:`FULL_CHECK_EVENTS` events gets :func:`quick_diagnose`
    instead (bounded cost; a payload altered before the checkpoint's cursor is then found by
    ``taskctx doctor`` only)."""
    found = None if full else quick_diagnose(stores, checkpointer, task_id)
    if found is None:
        found = diagnose(stores, checkpointer, task_id, artifacts=False)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        what = f"task {task_id!r} is damaged: {found[0]}{more}"
        shown = inspectable(stores, task_id)
        raise DamagedStoreError(
            f"{what}; {repair_hint(task_id, shown)}", found, task_id=task_id, what=what, inspectable=shown
        )


def inspectable(stores: Any, task_id: str) -> bool:
    """Whether ``taskctx inspect`` can still show the damaged task ``task_id``: the events of
    known kinds read back and fold (what it shows after its warnings)."""
    try:
        replay(stores.events.read(task_id, kinds=list(PAYLOAD_MODELS)))
    except Exception:  # noqa: BLE001 - any failure there is a refusal of inspect too
        return False
    return True
