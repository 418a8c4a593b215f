"""Checks of a task's stored data read back whole, before it is trusted (``taskctx doctor``).

The stores check every read on the fly (:mod:`context.store`); these read a task whole. Each
returns a list of findings, one line each (``"event log: ..."``, ``"artifact store: ..."``);
empty means sound.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from .artifact_refs import parse_ref
from .errors import ArtifactNotFoundError, DamagedStoreError, InvalidRefError
from .events import PAYLOAD_MODELS, Event
from .store import gap_finding

__all__ = ["CLOCK_STEP", "check_artifacts", "check_events", "clock_steps", "event_refs"]

_ATTEMPT = re.compile(r"#(\d+):[A-Za-z_]+$")


def check_events(events: Sequence[Event], after: int = 0, skip: Collection[int] = ()) -> list[str]:
    """Check a task's event log.

    The checks: seqs ``1..n`` without a gap (a gap is a finding and the check goes on after it);
    ``task.created`` first and only there; unique event ids; every payload valid for its kind;
    each event after the node run that wrote it (its ``causation_id`` ``<task>#<cursor>:<node>``
    names a cursor below its seq); each call called once (its id and idempotency key: a
    provider may give one id to calls of several answers) and answered once after it was called
    (a result recorded by the user or the system may answer a call that never ran: a reviewer's
    rejection, a call left before it started). Timestamps are not checked: they are what the
    clock said, and a clock steps (:func:`clock_steps` notes it); the log's order is its seq.

    Args:
        events: Every event of the log, in seq order (or, with ``after``, those of its tail).
        after: Check only the tail from seq ``after + 1`` on (a result answering a call made
            before the tail is then not a finding).
        skip: Seqs already named as damaged (rows that did not parse,
            :func:`context.store.lenient_events`), not named again as missing.

    Returns:
        The findings, ``"event log: ..."`` each.
    """
    out: list[str] = []
    ids: dict[str, int] = {}
    calls = _Calls()
    want = after + 1
    for e in events:
        if e.seq < want:
            out.append(f"event log: {gap_finding(want, e.seq)}")
            continue
        while want < e.seq and want in skip:
            want += 1
        if e.seq != want:
            out.append(f"event log: {gap_finding(want, e.seq)}")
        want = e.seq + 1
        if e.kind not in PAYLOAD_MODELS:
            out.append(f"event log: seq {e.seq} has an unknown kind {e.kind!r}")
            continue
        if (e.kind == "task.created") != (e.seq == 1):
            out.append(
                f"event log: seq {e.seq} is {e.kind}"
                + (" (a task starts with task.created)" if e.seq == 1 else " (task.created twice)")
            )
        if e.id in ids:
            out.append(f"event log: seq {e.seq} repeats the event id of seq {ids[e.id]}")
        ids[e.id] = e.seq
        try:
            PAYLOAD_MODELS[e.kind].model_validate(e.payload)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "payload"
            out.append(
                f"event log: seq {e.seq} ({e.kind}) has a payload its kind does not allow ({where}: {err['msg']})"
            )
            continue
        m = _ATTEMPT.search(e.causation_id or "")
        if m and int(m.group(1)) >= e.seq:
            out.append(
                f"event log: seq {e.seq} ({e.kind}) was written by a node run that started after seq "
                f"{m.group(1)}: rows are out of order"
            )
        p = e.payload
        if e.kind == "task.forked" and e.seq != p["fork_seq"] + 1:
            out.append(
                f"event log: seq {e.seq} is task.forked of seq {p['fork_seq']} (a fork's first own event follows its "
                "parent's prefix)"
            )
        if e.kind in ("tool.called", "tool.result.received"):
            out += calls.check(e, tail=bool(after))
    return out


class _Calls:
    """The tool calls of a log as it is read: each called once, and answered once after it."""

    def __init__(self) -> None:
        self.called: dict[tuple[str, str], int] = {}  # (call id, idempotency key): a provider may reuse ids
        self.waiting: dict[str, int] = {}  # per call id: calls made and not answered yet
        self.answered: dict[str, int] = {}

    def check(self, e: Event, *, tail: bool) -> list[str]:
        """The findings of a ``tool.called`` or ``tool.result.received`` (``tail``: the log's tail only)."""
        cid = e.payload["call_id"]
        if e.kind == "tool.called":
            key = (cid, e.payload.get("idempotency_key") or "")
            first = self.called.setdefault(key, e.seq)
            self.waiting[cid] = self.waiting.get(cid, 0) + 1
            return [] if first == e.seq else [f"event log: seq {e.seq} calls {cid} again (first called at seq {first})"]
        first = self.answered.setdefault(cid, e.seq)
        if self.waiting.get(cid):  # the result of the call of that id made last
            self.waiting[cid] -= 1
            return []
        if e.actor != "tool":  # an answer without a run: a reviewer's, or the system's for a call left
            return []
        if first != e.seq:
            return [f"event log: seq {e.seq} answers call {cid} again (first answered at seq {first})"]
        return [] if tail else [f"event log: seq {e.seq} answers call {cid}, which was not called before it"]


#: The prefix of a note about a step back of the clock that dated a log's events.
CLOCK_STEP = "clock_step"


def _seconds(ts: str) -> float | None:
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def clock_steps(events: Iterable[Event], limit: int = 5) -> list[str]:
    """Notes of each event dated before the event it follows: the clock that dated it stepped back.

    Not damage: timestamps are recorded as the clock says (an NTP step, a laptop waking, workers
    with skew), and the log's order is its seq. Streams: memory does not grow with the log.

    Args:
        events: A task's events in seq order (an iterator is fine).
        limit: Notes given at most (the rest are counted in the last note).

    Returns:
        ``"clock_step: seq 14 (resume.started) is dated 2026-...Z, 5.0 s before seq 13; ..."``
        lines; empty when every timestamp is at or after the one before it.
    """
    out: list[str] = []
    more = 0
    prev: Event | None = None
    for e in events:
        if prev is not None and e.timestamp < prev.timestamp:
            a, b = _seconds(e.timestamp), _seconds(prev.timestamp)
            back = f"{b - a:.3f} s " if a is not None and b is not None else ""
            if len(out) < limit:
                out.append(
                    f"{CLOCK_STEP}: seq {e.seq} ({e.kind}) is dated {e.timestamp}, {back}before seq {prev.seq} "
                    "(the clock that recorded it stepped back; the log's order is its seq, not damage)"
                )
            else:
                more += 1
        prev = e
    if more:
        out.append(f"{CLOCK_STEP}: and {more} more step{'s' if more > 1 else ''} back")
    return out


def event_refs(e: Event) -> list[str]:
    """The ``artifact://`` refs an event's payload names.

    Args:
        e: The event.

    Returns:
        Its ``raw_ref`` and ``prompt_ref``, those it has.
    """
    return [str(e.payload[k]) for k in ("raw_ref", "prompt_ref") if e.payload.get(k)]


def check_artifacts(artifacts: Any, events: Sequence[Event]) -> list[str]:
    """Check the artifacts a task's events name.

    Args:
        artifacts: The artifact store (its ``get`` checks the hash; its ``size``, when it has
            one, gives the recorded size).
        events: The task's events.

    Returns:
        The findings, ``"artifact store: ..."`` each: a ref that does not parse, an artifact
        missing, bytes that do not match their hash or their recorded size.
    """
    out: list[str] = []
    seen: set[str] = set()
    for e in events:
        for ref in event_refs(e):
            try:
                r = parse_ref(ref)
            except InvalidRefError:
                out.append(f"artifact store: seq {e.seq} ({e.kind}) names {ref[:80]!r}, not an artifact ref")
                continue
            if r.digest in seen:
                continue
            seen.add(r.digest)
            base = f"artifact://sha256:{r.digest}"
            try:
                data = artifacts.get(base)
            except ArtifactNotFoundError:
                out.append(f"artifact store: {base} (named by seq {e.seq}, {e.kind}) is missing")
                continue
            except DamagedStoreError:
                out.append(
                    f"artifact store: {base} (named by seq {e.seq}, {e.kind}) holds bytes that do not match its hash"
                )
                continue
            size = getattr(artifacts, "size", None)
            if size is not None and size(base) != len(data):
                out.append(f"artifact store: {base} records a size of {size(base)} bytes but holds {len(data)}")
    return out
