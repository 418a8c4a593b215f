"""How a long plan is shortened: the digest of folded done steps, runs of done steps in one line.

``Plan.fold_done`` moves done steps out of ``plan.steps`` into ``plan.done_digest`` (their ids
as ranges, ``s1-s990``, or single ids); ``Plan.lines`` collapses runs of done steps. The
functions here do the work on any step that has the fields of ``context.models.PlanStep``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

__all__ = [
    "DigestStep",
    "add_to_digest",
    "digest_range",
    "extend_digest",
    "group_line",
    "group_runs",
    "id_parts",
    "in_digest",
    "join_head",
    "status_digest",
]


class DigestStep(Protocol):
    """What the digest reads of a plan step (``context.models.PlanStep`` has it)."""

    @property
    def id(self) -> str:
        """The step id, e.g. ``s12``."""
        ...

    @property
    def status(self) -> str:
        """The step status, e.g. ``done``."""
        ...

    @property
    def title(self) -> str:
        """The step title."""
        ...

    @property
    def depends_on(self) -> Sequence[str]:
        """The ids of the steps it runs after."""
        ...

    @property
    def expected_output(self) -> str:
        """What the step should produce."""
        ...


_S = TypeVar("_S", bound=DigestStep)


def id_parts(step_id: str) -> tuple[str, int] | None:
    """Split a step id into its prefix and number.

    Args:
        step_id: A plan step id, e.g. ``"s12"``.

    Returns:
        ``("s", 12)`` for ``"s12"``; None for an id that does not end in digits, or whose number
        has a leading zero.
    """
    head = step_id.rstrip("0123456789")
    tail = step_id[len(head) :]
    return (head, int(tail)) if tail and not (len(tail) > 1 and tail[0] == "0") else None


def digest_range(entry: str) -> tuple[str, int, int] | None:
    """Read one digest entry as a range.

    Args:
        entry: ``"s1-s990"`` (a range) or ``"s7"`` (a single id).

    Returns:
        ``(prefix, first, last)``, e.g. ``("s", 1, 990)`` (``("s", 7, 7)`` for a single id); None
        when the entry is not a range of numbered ids with one prefix.
    """
    lo, sep, hi = entry.partition("-")
    a = id_parts(lo)
    if a is None:
        return None
    if not sep:
        return a[0], a[1], a[1]
    b = id_parts(hi)
    return (a[0], a[1], b[1]) if b is not None and b[0] == a[0] and b[1] >= a[1] else None


def in_digest(digest: Sequence[str], step_id: str) -> bool:
    """Whether a digest holds a step id.

    Args:
        digest: The digest entries (``plan.done_digest``).
        step_id: The step id to look for.

    Returns:
        True when an entry is ``step_id`` itself or a range that covers it.
    """
    parts = id_parts(step_id)
    for entry in digest:
        if entry == step_id:
            return True
        r = digest_range(entry) if parts is not None else None
        if r is not None and parts is not None and r[0] == parts[0] and r[1] <= parts[1] <= r[2]:
            return True
    return False


def add_to_digest(digest: list[str], step_id: str) -> None:
    """Append a step id to a digest, in place, joining the last range when it continues it.

    Args:
        digest: The digest entries, extended in place (``["s1-s4"]`` + ``"s5"`` -> ``["s1-s5"]``;
            ``+ "t1"`` -> ``["s1-s5", "t1"]``).
        step_id: The id of the done step folded out of the plan.
    """
    parts = id_parts(step_id)
    last = digest_range(digest[-1]) if digest and parts is not None else None
    if last is not None and parts is not None and last[0] == parts[0] and parts[1] == last[2] + 1:
        digest[-1] = f"{last[0]}{last[1]}-{step_id}"
    else:
        digest.append(step_id)


def extend_digest(digest: Sequence[str], step_ids: Iterable[str]) -> tuple[list[str], int]:
    """A digest with more folded step ids, each folded once.

    Args:
        digest: The digest entries so far (not changed).
        step_ids: The ids of the done steps to fold, in plan order; an id the digest already
            holds (a re-plan lists a folded step again) is skipped.

    Returns:
        ``(entries, added)``: the new entries (uncapped) and how many ids were added.
    """
    out = list(digest)
    added = 0
    for sid in step_ids:
        if in_digest(digest, sid) or sid in out:  # listed again by a re-plan: folded once
            continue
        added += 1
        add_to_digest(out, sid)
    return out, added


def group_runs(steps: Iterable[_S], *, min_run: int, statuses: tuple[str, ...]) -> list[list[_S]]:
    """Group runs of consecutive steps with the same status.

    Args:
        steps: The plan's steps, in order.
        min_run: The shortest run that is grouped.
        statuses: The statuses whose runs are grouped.

    Returns:
        Groups of steps, in order: each a single step, or a run of at least ``min_run`` steps with
        the same status in ``statuses``.
    """
    out: list[list[_S]] = []
    for step in steps:
        if out and step.status in statuses and out[-1][-1].status == step.status:
            out[-1].append(step)
        else:
            out.append([step])
    return [g for grp in out for g in ([grp] if len(grp) >= min_run else [[x] for x in grp])]


def join_head(digest: Sequence[str], folded: int, groups: list[list[_S]]) -> tuple[str, int, list[list[_S]]]:
    """The folded done steps, joined with the done steps that continue their range.

    Args:
        digest: The digest entries (``plan.done_digest``).
        folded: How many steps the digest holds (``plan.done_folded``).
        groups: The plan's groups of steps (:func:`group_runs`).

    Returns:
        ``(ids, count, rest of groups)``: when the digest is one range and ``groups`` starts with
        done steps that continue it, they join it (``("s1-s297", 297, rest)``).
    """
    ids, n = ", ".join(digest), folded
    if len(digest) == 1 and groups and groups[0][0].status == "done":
        r, first = digest_range(digest[0]), id_parts(groups[0][0].id)
        if r is not None and first is not None and first[0] == r[0] and first[1] == r[2] + 1:
            g = groups[0]
            return f"{r[0]}{r[1]}-{g[-1].id}", n + len(g), groups[1:]
    return ids, n, groups


def group_line(group: Sequence[DigestStep], *, detail: bool) -> str:
    """One prompt line for a group of steps.

    Args:
        group: One step, or a run of steps with one status (:func:`group_runs`).
        detail: Add a single step's dependencies and expected output.

    Returns:
        ``s1 [done] Title after s0: expected ...`` (``s1 [done] Title`` without ``detail``), or
        ``s1-s9 [done] 9 steps (titles and results in the event log)`` for a run.
    """
    if len(group) > 1:
        return (
            f"{group[0].id}-{group[-1].id} [{group[0].status}] {len(group)} steps (titles and results in the event log)"
        )
    s = group[0]
    dep = f" after {', '.join(s.depends_on)}" if s.depends_on and detail else ""
    exp = f": expected {s.expected_output}" if s.expected_output and detail else ""
    return f"{s.id} [{s.status}] {s.title}{dep}{exp}"


def status_digest(steps: Sequence[DigestStep], folded: int = 0, current: str | None = None) -> str:
    """The plan as one short line of counts: the form a prompt shows when its state is narrowed.

    Args:
        steps: The plan's steps (``plan.steps``), in order.
        folded: Done steps already folded out of ``steps`` (``plan.done_folded``).
        current: The id of the running step, or None.

    Returns:
        e.g. ``"12 steps: 9 done, s10 running, 2 pending (the steps in the event log)"``: the
        count of each status in plan order of first appearance, the running step by its id.
    """
    counts: dict[str, int] = {"done": folded} if folded else {}
    for s in steps:
        counts[s.status] = counts.get(s.status, 0) + 1
    total = sum(counts.values())
    parts = [
        f"{current} running" if st == "running" and current is not None and n == 1 else f"{n} {st}"
        for st, n in counts.items()
    ]
    return f"{total} steps: {', '.join(parts)} (the steps in the event log)"
