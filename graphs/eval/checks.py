"""The check kinds of ``taskctx eval``: each one's case-file model and the handler that verifies it.

:data:`CHECKS` is the one table from model to handler; :data:`Check`, the union a case's
``checks`` are parsed with, is built from it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field

from context import Event, masked_bytes

from .finished import FinishedRun
from .selection import CheckModel, ModelCall, SelectingCheck, model_calls, prompt_of, select_calls, where

__all__ = ["CHECKS", "Check", "run_check"]


#: A quoted block as ``quote_external`` writes it (tag, newline, text, newline, closing tag); the
#: rule's mention of "<external_content> tags" in a system message opens no block.
_EXT = re.compile(r"<external_content(?: [^>\n]*)?>\n.*?\n</external_content>", re.S)


def _dig(obj: Any, path: str) -> Any:
    cur: Any = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    for part in path.split("."):
        if isinstance(cur, list):
            cur = cur[int(part)]
        elif isinstance(cur, dict):
            if part not in cur:
                raise KeyError(f"no field {part!r} in {path!r}")
            cur = cur[part]
        else:
            raise KeyError(f"{path!r}: cannot go into {type(cur).__name__} at {part!r}")
    return cur


def _payload_matches(e: Event, want: dict[str, Any]) -> bool:
    return all(e.payload.get(k) == v for k, v in want.items())


def _contains(v: Any, x: Any) -> bool:
    if isinstance(v, str):
        return str(x) in v
    if isinstance(v, list):
        return x in v or any(isinstance(i, str) and isinstance(x, str) and x in i for i in v)
    if isinstance(v, dict):
        return x in v
    return False


def _short(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= 200 else s[:197] + "..."


class PromptContains(SelectingCheck):
    """Each selected prompt holds every text (verbatim)."""

    check: Literal["prompt_contains"]
    text: list[str]


def _check_prompt_contains(run: FinishedRun, chk: PromptContains, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    for c in calls:
        p = prompt_of(run, c)
        for t in chk.text:
            if t not in p:
                f.append(f"prompt_contains: {t!r} is not in the prompt of {where(c)}")
                break
    return f


class PromptExcludes(SelectingCheck):
    """No selected prompt holds any of the texts."""

    check: Literal["prompt_excludes"]
    text: list[str]


def _check_prompt_excludes(run: FinishedRun, chk: PromptExcludes, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    for c in calls:
        p = prompt_of(run, c)
        for t in chk.text:
            if t in p:
                f.append(f"prompt_excludes: {t!r} is in the prompt of {where(c)}")
                break
    return f


class ExternalOnly(SelectingCheck):
    """Every occurrence of each text is inside an ``<external_content>`` block (and it occurs)."""

    check: Literal["external_only"]
    text: list[str]


def _check_external_only(run: FinishedRun, chk: ExternalOnly, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    seen = {t: 0 for t in chk.text}
    for c in calls:
        p = prompt_of(run, c)
        spans = [(m.start(), m.end()) for m in _EXT.finditer(p)]
        for t in chk.text:
            for m in re.finditer(re.escape(t), p):
                seen[t] += 1
                if not any(a <= m.start() and m.end() <= b for a, b in spans):
                    f.append(f"external_only: {t!r} appears outside <external_content> in {where(c)}")
                    break
    f += [f"external_only: {t!r} never appears in the selected prompts" for t, n in seen.items() if n == 0]
    return f


class ManifestCheck(SelectingCheck):
    """The block of each selected call's manifest has these properties.

    ``block``: an id, or ``$latest_tool`` (the newest tool call's block).
    """

    check: Literal["manifest"]
    block: str
    included: bool | None = None
    trust: str | None = None
    priority: str | None = None
    layer: str | None = None
    compressed: bool | None = None
    reason_contains: str | None = None
    superseded_by: str | None = None
    #: The block may be absent from a call (then only present ones are checked).
    optional: bool = False


def _check_manifest(run: FinishedRun, chk: ManifestCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    for c in calls:
        blocks = c.event.payload["blocks"]
        bid = chk.block
        if bid == "$latest_tool":
            tools = [b for b in blocks if b["id"].startswith("tool.")]
            b = tools[-1] if tools else None
        else:
            b = next((x for x in blocks if x["id"] == bid), None)
        if b is None:
            if not chk.optional:
                f.append(f"manifest: no block {bid} in {where(c)}")
            continue
        for key in ("included", "trust", "priority", "layer", "compressed", "superseded_by"):
            want = getattr(chk, key)
            if want is not None and b.get(key) != want:
                f.append(
                    f"manifest: block {b['id']} has {key}={b.get(key)!r}, want {want!r} in {where(c)}"
                    f" (reason: {b['reason']})"
                )
        if chk.reason_contains and chk.reason_contains not in b["reason"]:
            f.append(f"manifest: block {b['id']} reason {b['reason']!r} lacks {chk.reason_contains!r} in {where(c)}")
    return f


class BudgetCheck(SelectingCheck):
    """Every selected prompt fits ``budget - reserve_for_output`` and its manifest fits too."""

    check: Literal["within_budget"]


def _check_within_budget(run: FinishedRun, chk: BudgetCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    for c in calls:
        p = c.event.payload
        limit = p["budget"] - run.reserve_for_output
        if p["prompt_tokens"] > limit:
            f.append(f"within_budget: {where(c)} has {p['prompt_tokens']} prompt tokens, over {limit}")
        used = sum(b["tokens"] for b in p["blocks"] if b["included"])
        if used > limit:
            f.append(f"within_budget: {where(c)} includes {used} block tokens, over {limit}")
    return f


class ResetsCheck(CheckModel):
    """The executor's transcript restarted between ``min`` and ``max`` times."""

    check: Literal["resets"]
    min: int = 0
    max: int | None = None


def _check_resets(run: FinishedRun, chk: ResetsCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    n = sum(1 for c in model_calls(run) if c.role == "executor" and c.reset)
    if n < chk.min or (chk.max is not None and n > chk.max):
        f.append(f"resets: {n} transcript restarts, want {chk.min}..{chk.max if chk.max is not None else 'any'}")
    return f


class RefetchCheck(CheckModel):
    """Every compressed tool result is re-fetchable byte-exact; at least ``min_compressed``."""

    check: Literal["refetch"]
    min_compressed: int = 0
    #: Also fetch the ``#L<a>-<b>`` slice and compare it with those lines of the raw output.
    slice: list[int] | None = None


def _check_refetch(run: FinishedRun, chk: RefetchCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    comp = [e for e in run.events if e.kind == "tool.result.received" and e.payload.get("compressed")]
    if len(comp) < chk.min_compressed:
        f.append(f"refetch: {len(comp)} compressed tool results, want at least {chk.min_compressed}")
    for e in comp:
        cid = e.payload["call_id"]
        data = run.stores.artifacts.get(e.payload["raw_ref"])
        raw = run.raw.get(cid)
        if raw is not None and data != masked_bytes(raw):  # the output as stored: exact, secrets masked
            f.append(f"refetch: artifact of {cid} differs from the raw tool output")
        if chk.slice and raw is not None:
            a, b = chk.slice
            got = run.stores.artifacts.get(f"{e.payload['raw_ref']}#L{a}-{b}")
            want = b"".join(masked_bytes(raw).splitlines(keepends=True)[a - 1 : b])
            if got != want:
                f.append(f"refetch: slice #L{a}-{b} of {cid} differs from those lines of the raw output")
    return f


class StateCheck(CheckModel):
    """A field of the final TaskContext at a dotted path (list indices allowed, ``-1`` = last)."""

    check: Literal["state"]
    path: str
    equals: Any = None
    contains: Any = None
    not_contains: Any = None
    length: int | None = None
    min_length: int | None = None
    is_null: bool | None = None


def _check_state(run: FinishedRun, chk: StateCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    try:
        v = _dig(run.state, chk.path)
    except (KeyError, IndexError, ValueError) as exc:
        return [f"state: {exc}"]
    if "equals" in chk.model_fields_set and v != chk.equals:
        f.append(f"state: {chk.path} is {v!r}, want {chk.equals!r}")
    if "contains" in chk.model_fields_set and not _contains(v, chk.contains):
        f.append(f"state: {chk.path} ({_short(v)}) does not contain {chk.contains!r}")
    if "not_contains" in chk.model_fields_set and _contains(v, chk.not_contains):
        f.append(f"state: {chk.path} ({_short(v)}) contains {chk.not_contains!r}")
    if chk.length is not None and len(v) != chk.length:
        f.append(f"state: {chk.path} has length {len(v)}, want {chk.length}")
    if chk.min_length is not None and len(v) < chk.min_length:
        f.append(f"state: {chk.path} has length {len(v)}, want at least {chk.min_length}")
    if chk.is_null is not None and (v is None) != chk.is_null:
        f.append(f"state: {chk.path} is {_short(v)}, want {'null' if chk.is_null else 'a value'}")
    return f


class EventsCheck(CheckModel):
    """The event log: kinds present or absent, counts, an ordered subsequence, or an exact sequence.

    ``exact``: the kind sequence of the events whose kind is in ``only``.
    """

    check: Literal["events"]
    contains: list[str] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    sequence: list[str | dict[str, Any]] = Field(default_factory=list)
    exact: list[str] | None = None
    only: list[str] | None = None


def _check_events(run: FinishedRun, chk: EventsCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    kinds = [e.kind for e in run.events]
    cnt = Counter(kinds)
    f += [f"events: no {k} event" for k in chk.contains if not cnt[k]]
    f += [f"events: {cnt[k]} {k} events, want none" for k in chk.absent if cnt[k]]
    f += [f"events: {cnt[k]} {k} events, want {n}" for k, n in chk.counts.items() if cnt[k] != n]
    if chk.sequence:
        i = 0
        for e in run.events:
            want = chk.sequence[i]
            k, pl = (want, {}) if isinstance(want, str) else (want["kind"], want.get("payload", {}))
            if e.kind == k and _payload_matches(e, pl):
                i += 1
                if i == len(chk.sequence):
                    break
        if i < len(chk.sequence):
            f.append(f"events: the log lacks the sequence {chk.sequence} in order (matched {i} of them)")
    if chk.exact is not None:
        got = [k for k in kinds if chk.only is None or k in chk.only]
        if got != chk.exact:
            f.append(f"events: kinds {got} != {chk.exact}")
    return f


class EventCheck(CheckModel):
    """Events of ``kind`` whose payload has these values: ``count`` of them (default: at least one)."""

    check: Literal["event"]
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    count: int | None = None


def _check_event(run: FinishedRun, chk: EventCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    hits = [e for e in run.events if e.kind == chk.kind and _payload_matches(e, chk.payload)]
    if chk.count is None and not hits:
        f.append(f"event: no {chk.kind} event with {chk.payload}")
    elif chk.count is not None and len(hits) != chk.count:
        f.append(f"event: {len(hits)} {chk.kind} events with {chk.payload}, want {chk.count}")
    return f


class ToolsRunCheck(CheckModel):
    """Which scripted tool calls really ran (in this process, over every segment)."""

    check: Literal["tools_run"]
    not_run: list[str] = Field(default_factory=list)
    once: list[str] = Field(default_factory=list)


def _check_tools_run(run: FinishedRun, chk: ToolsRunCheck, calls: list[ModelCall]) -> list[str]:
    f: list[str] = []
    cnt = Counter(run.executed)
    f += [f"tools_run: {cid} ran {cnt[cid]} times, want never" for cid in chk.not_run if cnt[cid]]
    f += [f"tools_run: {cid} ran {cnt[cid]} times, want once" for cid in chk.once if cnt[cid] != 1]
    return f


#: Check model -> handler; the check kinds eval knows (a case's ``checks`` are parsed with
#: :data:`Check`, the union of these models, by their ``check`` field).
CHECKS: dict[type[CheckModel], Callable[[FinishedRun, Any, list[ModelCall]], list[str]]] = {
    PromptContains: _check_prompt_contains,
    PromptExcludes: _check_prompt_excludes,
    ExternalOnly: _check_external_only,
    ManifestCheck: _check_manifest,
    BudgetCheck: _check_within_budget,
    ResetsCheck: _check_resets,
    RefetchCheck: _check_refetch,
    StateCheck: _check_state,
    EventsCheck: _check_events,
    EventCheck: _check_event,
    ToolsRunCheck: _check_tools_run,
}

Check = Annotated[Union[tuple(CHECKS)], Field(discriminator="check")]  # noqa: UP007 - built from the table


def run_check(run: FinishedRun, chk: Any) -> list[str]:
    """The failures of one check on a finished run; empty when it holds.

    Args:
        run: The finished run.
        chk: A check (a model of :data:`CHECKS`).

    Returns:
        One line per failure; a selecting check whose selection matches no model call fails
        with one line.
    """
    calls: list[ModelCall] = []
    if isinstance(chk, SelectingCheck):
        calls = select_calls(run, chk)
        if not calls:
            return [f"{chk.check}: no {chk.role} model call matches the selection"]
    return CHECKS[type(chk)](run, chk, calls)
