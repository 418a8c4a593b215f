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

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from context import PAYLOAD_MODELS, DamagedStoreError, TaskContext, TaskctxError, replay
from context.models import SCHEMA_VERSION
from context.store import REPAIR_TEXT
from context.verify import check_artifacts, check_events, clock_steps
from nodes.attempts import attempt_of
from nodes.runtime import PARTS

__all__ = [
    "FULL_CHECK_EVENTS",
    "Checked",
    "REGISTERED_MARK",
    "checkpoint_findings",
    "clock_notes",
    "diagnose",
    "ensure_sound",
    "judged",
    "on_server",
    "quick_diagnose",
    "quick_state",
    "unshowable",
    "unstarted_damage",
]

#: Checkpoint metadata key set on every checkpoint of a task that has a registry row when it runs
#: (:func:`graphs.runner.run_graph` puts it in the run's ``config["metadata"]``, which LangGraph
#: copies into each checkpoint's metadata): it tells a lost registry row (a finding) from a task
#: started through the Python API, which never had one (not a finding).
REGISTERED_MARK = "taskctx_registered"

#: The task registry row's ``checkpoints`` of a task LangGraph Server runs (:mod:`graphs.server`):
#: its checkpoints are the Server's, not in the taskctx database.
SERVER_CHECKPOINTS = "server"


def on_server(spec: dict[str, Any] | None) -> bool:
    """Whether a task registry row is of a task LangGraph Server runs (its checkpoints are the Server's).

    Args:
        spec: The task's registry row, or None.

    Returns:
        True when its ``checkpoints`` is :data:`SERVER_CHECKPOINTS`.
    """
    return bool(spec) and spec.get("checkpoints") == SERVER_CHECKPOINTS  # type: ignore[union-attr]


@dataclass(frozen=True)
class Checked:
    """What :func:`ensure_sound` read while checking a task, for its caller to use instead of
    reading it again: the registry row, the latest checkpoint and its state."""

    #: The task's registry row (None: it has none).
    spec: dict[str, Any] | None
    #: The latest LangGraph ``CheckpointTuple`` of the thread (None: no checkpoint).
    checkpoint: Any
    #: The checkpoint's TaskContext as stored (None: no checkpoint, or one without a state).
    state: TaskContext | None

    @property
    def finished(self) -> bool:
        """The checkpoint's task completed or failed and the checkpoint has no pending writes
        (no interrupt, no task half done): every router of the orchestrator returns ``END`` on
        such a state (:mod:`graphs.routing`), so its graph has no next node to run."""
        return (
            self.state is not None
            and self.state.control.status in ("completed", "failed")
            and self.checkpoint is not None
            and not self.checkpoint.pending_writes
        )


def _checkpoint(checkpointer: Any, task_id: str) -> tuple[Any, TaskContext | None, list[str]]:
    """The latest checkpoint tuple of ``task_id``, its TaskContext and the findings about it."""
    if checkpointer is None:
        return None, None, []
    tup = checkpointer.get_tuple({"configurable": {"thread_id": task_id}})
    if tup is None:
        return None, None, []
    values = tup.checkpoint.get("channel_values") or {}
    values = {k: v for k, v in values.items() if k in TaskContext.model_fields}
    if not values:
        return tup, None, []
    try:
        return tup, TaskContext.model_validate(values), []
    except Exception as exc:  # pydantic's ValidationError, or a part of another schema
        first = " ".join(str(exc).split())[:200]
        return tup, None, [f"checkpoint: {tup.config['configurable'].get('checkpoint_id')} does not load: {first}"]


def checkpoint_findings(checkpointer: Any, task_id: str, events: list[Any]) -> list[str]:
    """What :func:`diagnose` finds of the task's latest checkpoint against its log, read already.

    Args:
        checkpointer: The project's checkpointer (None: no checkpoint to compare).
        task_id: The task.
        events: Its whole event log, every row read and checked (no gap, no damaged row).

    Returns:
        The ``checkpoint:`` findings: one that does not load, or whose state is not the fold of
        ``events`` up to its cursor, or that is older than events a later checkpoint's runs recorded.
    """
    tup, state, found = _checkpoint(checkpointer, task_id)
    return found if found or state is None else _against(tup, state, events)


def _against(tup: Any, state: TaskContext, events: list[Any]) -> list[str]:
    """The checkpoint ``tup`` (its state ``state``) against the whole, sound log ``events``."""
    return _compare(state, events) or _behind(tup, state.events.cursor, events[state.events.cursor :])


def _load(stores: Any, checkpointer: Any, task_id: str) -> tuple[list[str], Checked]:
    """The registry row and the latest checkpoint, read once, and the findings about them."""
    out: list[str] = []
    try:
        spec = stores.tasks.get(task_id)
    except DamagedStoreError as exc:
        out += exc.problems
        spec = {}
    tup, state, cp = _checkpoint(checkpointer, task_id)
    return [*out, *cp], Checked(spec, tup, state)


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


def _behind(tup: Any, cursor: int, past: list[Any]) -> list[str]:
    """The latest checkpoint (``tup``, folded ``cursor`` events) is older than events ``past`` its
    cursor that node runs on a later checkpoint recorded: one LangGraph no longer loads as the
    latest (its id, a time, sorts below this one's after a clock step back)."""
    later = [e for e in past if (a := attempt_of(e.causation_id)) is not None and a[0] > cursor]
    if not later:
        return []
    e = later[0]
    cid = tup.config["configurable"].get("checkpoint_id")
    return [
        f"checkpoint: the latest one ({cid}) has folded {cursor} events, but seq {e.seq} ({e.kind}) and after "
        f"were recorded by node runs on a later checkpoint that sorts below it: LangGraph names checkpoints by "
        "the time of the clock that wrote them and loads the greatest, so a run on a clock that was ahead "
        "(then set back) hides the checkpoints written after it; resume would continue from the older one"
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
    """Every finding about ``task_id``: its registry row, event log (:func:`context.verify.check_events`;
    every damaged row, not only the first: a missing row does not hide an altered payload after it),
    the artifacts it names (``artifacts=True``) and its latest checkpoint (see module doc). With
    ``resumable`` (the CLI's view: every task it starts is registered and checkpointed), a task
    whose checkpoints say a taskctx command started it (:data:`REGISTERED_MARK`) but that has no
    registry row, and a registered task with events but no checkpoint, are findings too. A task
    started through the Python API (events, no registry row, maybe no checkpoint in this
    database) is not damaged: the CLI reads it, it cannot resume it."""
    return _diagnose(stores, checkpointer, task_id, artifacts=artifacts, resumable=resumable)[0]


def _diagnose(
    stores: Any,
    checkpointer: Any,
    task_id: str,
    *,
    artifacts: bool = True,
    resumable: bool = False,
    loaded: tuple[list[str], Checked] | None = None,
) -> tuple[list[str], Checked]:
    """:func:`diagnose`, and what it read (``loaded``: the row and checkpoint already read)."""
    found, checked = loaded if loaded is not None else _load(stores, checkpointer, task_id)
    out = [f for f in found if not f.startswith("checkpoint:")]
    spec, state, tup = checked.spec, checked.state, checked.checkpoint
    bad: dict[int, list[str]] = {}  # rows that do not parse, by seq: named, and the check goes on past them
    try:
        events = stores.events.read(task_id, damaged_rows=bad)
    except DamagedStoreError as exc:  # (the table cannot be read at all)
        return [*out, *exc.problems], checked
    out += [f for seq in sorted(bad) for f in bad[seq]]
    cp = [f for f in found if f.startswith("checkpoint:")]
    out += cp
    newer = _newer_schema(events, state)
    if newer:
        return [*out, *newer], checked
    marked = bool(tup is not None and (tup.metadata or {}).get(REGISTERED_MARK))
    if resumable and spec is None and marked:
        out.append("task registry: no row for this task (how it was started is lost): it can be inspected, not resumed")
    if resumable and spec is not None and state is None and not cp and events and not on_server(spec):
        out.append(f"checkpoint: none, though the event log holds {len(events)} events: it cannot be resumed")
    out += check_events(events, skip=bad)
    if artifacts:
        out += check_artifacts(stores.artifacts, events)
    if state is not None and not bad and not any(f.startswith("event log:") for f in out):
        out += _against(tup, state, events)
    elif state is not None:  # damage does not hide an altered row the checkpoint disagrees with
        out += _compare_damaged(state, events, bad)
    return out, checked


def _compare_damaged(state: TaskContext, events: list[Any], bad: dict[int, list[str]]) -> list[str]:
    """:func:`_compare` for a damaged log: the checkpoint against the fold of the rows the log
    still has up to its cursor (those that parse, of a known kind, with a payload their kind
    allows). The rows left out are of the kinds whose counts (``events.counts``) the checkpoint
    has more of; a part that events of those kinds change elsewhere in this log (or any part,
    for a kind the log holds no readable event of) is explained by the damage; a part that
    differs otherwise is a finding. Empty when nothing is left unexplained."""
    cursor = state.events.cursor
    if cursor == 0:
        return []
    usable = []
    for e in events:
        if e.seq > cursor or e.seq in bad or e.kind not in PAYLOAD_MODELS:
            continue
        try:
            PAYLOAD_MODELS[e.kind].model_validate(e.payload)
        except ValidationError:
            continue
        usable.append(e)
    touched: dict[str, set[str]] = {}  # kind -> the parts its events change, in this log
    folded = TaskContext()
    try:
        for e in usable:
            nxt = replay([e], folded)
            touched.setdefault(e.kind, set()).update(p for p in PARTS if getattr(nxt, p) != getattr(folded, p))
            folded = nxt
    except Exception as exc:  # noqa: BLE001 - the rows left do not fold: say so, compare nothing
        return [
            f"checkpoint: not compared: the log's readable rows up to seq {cursor} do not fold ({type(exc).__name__})"
        ]
    have, had = folded.events.counts, state.events.counts
    lost = sorted(k for k in had if k in PAYLOAD_MODELS and had[k] > have.get(k, 0))
    explained = {"events"}  # the log's own bookkeeping differs whenever a row is left out
    for k in lost:
        explained |= touched.get(k, set(PARTS))
    differ = [p for p in PARTS if p not in explained and getattr(folded, p) != getattr(state, p)]
    if not differ:
        return []
    return [
        f"checkpoint: its state differs from the fold of the log's readable rows up to seq {cursor} in "
        f"{', '.join(differ)}, which the rows left out ({', '.join(lost) or 'none'}) do not change: the log or the "
        "checkpoint was changed outside taskctx"
    ]


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
    to its end; None when there are findings). Its cost does not grow with the log: the log's
    last seq (a short log stops here, nothing else read); the registry row and the latest
    checkpoint load; the log holds one row per seq from 1 to its last (a count and a max in
    SQL); the first event's schema version; every event after the checkpoint's cursor is there,
    parses, passes :func:`context.verify.check_events` and folds onto the checkpoint's state. A
    damage before the cursor that keeps the seqs whole (an altered payload) is left to
    :func:`diagnose` (``taskctx doctor``)."""
    got = _quick(stores, checkpointer, task_id)
    if got is None or (got[0] is None and not got[1]):
        return None
    return got[0], got[1]


def _quick(stores: Any, checkpointer: Any, task_id: str) -> tuple[TaskContext | None, list[str], Checked] | None:
    """:func:`quick_state`, and what it read; ``(None, [], checked)`` when the log is long but
    there is no checkpoint state to start from (the caller then runs :func:`_diagnose` on what
    was read)."""
    last = stores.events.last_seq(task_id)  # a short log is not this check's case: nothing else read
    if last <= FULL_CHECK_EVENTS:
        return None
    found, checked = _load(stores, checkpointer, task_id)
    if any(f.startswith("checkpoint:") for f in found):
        return None, found, checked
    out = list(found)
    state = checked.state
    if state is None or state.events.cursor == 0:
        return None, out, checked  # nothing to start from: with no finding, the caller runs diagnose
    try:
        first = stores.events.read(task_id, limit=1)
    except DamagedStoreError as exc:
        return None, [*out, *exc.problems], checked
    newer = _newer_schema(first, state)
    if newer:
        return None, [*out, *newer], checked
    n = stores.events.count(task_id)
    if n != last:
        return (
            None,
            [*out, f"event log: holds {n} rows but its seqs run from 1 to {last}: a row is missing or repeated"],
            checked,
        )
    cursor = state.events.cursor
    if cursor > last:
        return None, [*out, *_missing(cursor, last)], checked
    try:
        tail = stores.events.read(task_id, after=cursor)
    except DamagedStoreError as exc:
        return None, [*out, *exc.problems], checked
    out += check_events(tail, after=cursor) or _behind(checked.checkpoint, cursor, tail)
    if out:
        return None, out, checked
    try:
        return replay(tail, state), [], checked
    except Exception as exc:  # a payload its kind does not allow (check_events names most of them)
        return (
            None,
            [f"event log: the events after seq {cursor} do not fold onto the checkpoint ({type(exc).__name__})"],
            checked,
        )


def quick_diagnose(stores: Any, checkpointer: Any, task_id: str) -> list[str] | None:
    """The findings of :func:`quick_state` (None where it does not apply: run :func:`diagnose`)."""
    got = quick_state(stores, checkpointer, task_id)
    return None if got is None else got[1]


def ensure_sound(stores: Any, checkpointer: Any, task_id: str, *, full: bool = True) -> Checked:
    """Raise ``DamagedStoreError`` (what, where, what to do; ``problems`` lists all) when
    :func:`diagnose` (artifacts not read: each is checked when it is read) finds anything. With
    ``full=False`` a log longer than :data:`FULL_CHECK_EVENTS` events gets :func:`quick_diagnose`
    instead (bounded cost; a payload altered before the checkpoint's cursor is then found by
    ``taskctx doctor`` only). Returns what it read (:class:`Checked`: the registry row and the
    latest checkpoint, each read once), for the caller to use instead of reading it again."""
    got = None if full else _quick(stores, checkpointer, task_id)
    if got is not None and (got[0] is not None or got[1]):
        found, checked = got[1], got[2]
    else:
        loaded = ([], got[2]) if got is not None else None
        found, checked = _diagnose(stores, checkpointer, task_id, artifacts=False, loaded=loaded)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        what = f"task {task_id!r} is damaged: {found[0]}{more}"
        block = unshowable(stores, task_id)
        shown = block is None
        if block is not None and block not in found[:1] and "holds no event" not in block:
            what += f", among them {block.removeprefix('event log: ')}"
        raise DamagedStoreError(f"{what}; {REPAIR_TEXT}", found, task_id=task_id, what=what, inspectable=shown)
    return checked


def clock_notes(stores: Any, task_id: str) -> list[str]:
    """The steps back of the clock that dated a task's events (:func:`context.verify.clock_steps`).

    Notes, never findings: doctor and inspect print them, resume accepts them.

    Args:
        stores: The task's stores.
        task_id: The task.

    Returns:
        The notes; empty when the log cannot be read (its damage is a finding of :func:`diagnose`).
    """
    try:
        return clock_steps(stores.events.iter(task_id))
    except (TaskctxError, ValueError):
        return []


def unshowable(stores: Any, task_id: str) -> str | None:
    """Why ``taskctx inspect`` cannot show the damaged task ``task_id`` (the events of known
    kinds read back and fold: what it shows after its warnings), as one finding naming the row
    that blocks it (``"event log: seq 13 (tool.result.received) has a payload its kind does not
    allow (status: ...)"``); None when it can show it."""
    try:
        events = stores.events.read(task_id, kinds=list(PAYLOAD_MODELS))
    except DamagedStoreError as exc:  # a row that does not parse stops every reader
        return exc.problems[0]
    except Exception as exc:  # noqa: BLE001 - any failure there is a refusal of inspect too
        return f"event log: cannot be read ({type(exc).__name__})"
    if not events:
        return "event log: holds no event to show"
    for e in events:
        try:
            PAYLOAD_MODELS[e.kind].model_validate(e.payload)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "payload"
            return f"event log: seq {e.seq} ({e.kind}) has a payload its kind does not allow ({where}: {err['msg']})"
    try:
        replay(events)
    except Exception as exc:  # noqa: BLE001 - any failure there is a refusal of inspect too
        return f"event log: the events do not fold ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    return None


def judged(exc: DamagedStoreError, stores: Any) -> DamagedStoreError:
    """``exc`` (damage to one task, raised by a store read) with :func:`unshowable`'s judgement
    in place of the store's guess, and, when inspect cannot show the task, the row that blocks it
    named after the damage when ``exc`` does not name it. Returns ``exc`` itself for an
    artifact's damage (no task)."""
    if exc.task_id is None:
        return exc
    block = unshowable(stores, exc.task_id)
    exc.inspectable = block is None
    if block is not None and block not in exc.problems and "holds no event" not in block:
        exc.problems.append(block)
        exc.what = f"{exc.what}, and {block.removeprefix('event log: ')}"
    return exc


def unstarted_damage(stores: Any, checkpointer: Any, task_id: str) -> list[str]:
    """What :func:`diagnose` finds about a registered task whose log holds no event.

    Such a task is "not started" only when no checkpoint has folded an event: a checkpoint
    that has (every event row deleted) is damage, as ``doctor`` and ``resume`` judge it, and
    ``inspect``, ``list`` and ``report`` say so instead of "not started".

    Args:
        stores: The task's stores.
        checkpointer: The project's checkpointer (None: no checkpoint to compare).
        task_id: The task.

    Returns:
        The findings; empty for a task that has truly not started.
    """
    return diagnose(stores, checkpointer, task_id, artifacts=False)
