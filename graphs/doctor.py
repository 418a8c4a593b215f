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

from context import DamagedStoreError, TaskContext, replay
from context.models import SCHEMA_VERSION
from context.store import REPAIR_HINT
from context.verify import check_artifacts, check_events
from nodes.runtime import PARTS

__all__ = ["REGISTERED_MARK", "checkpoint_state", "diagnose", "ensure_sound"]

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
        n = cursor - last
        return [
            f"event log: ends at seq {last} but the checkpoint has folded {cursor} events: the last {n} "
            f"event{'s are' if n > 1 else ' is'} missing from the log"
        ]
    folded = replay(events[:cursor])
    differ = [p for p in PARTS if getattr(folded, p) != getattr(state, p)]
    if not differ:
        return []
    return [
        f"checkpoint: its state differs from the event log's fold up to seq {cursor} in {', '.join(differ)} "
        "(the log or the checkpoint was changed outside taskctx)"
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


def ensure_sound(stores: Any, checkpointer: Any, task_id: str) -> None:
    """Raise ``DamagedStoreError`` (what, where, what to do; ``problems`` lists all) when
    :func:`diagnose` (artifacts not read: each is checked when it is read) finds anything."""
    found = diagnose(stores, checkpointer, task_id, artifacts=False)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        raise DamagedStoreError(
            f"task {task_id!r} is damaged: {found[0]}{more}; {REPAIR_HINT.format(task=task_id)}", found
        )
