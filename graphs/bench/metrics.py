"""The bench's measures of one strategy over one trajectory (:class:`Stats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from context import masked_bytes
from nodes.pricing import RULES
from nodes.runtime import cached_prefix_tokens

from .strategies import Call, TaskctxRun

__all__ = ["CACHE_DISCOUNT", "FLOOR_LAST", "Stats", "count_call", "strategy_stats", "taskctx_stats"]

CACHE_DISCOUNT = 0.1
FLOOR_LAST = 3


@dataclass
class Stats:
    """One strategy over one trajectory, or the total over all of them; token counts are o200k_base.

    Effective cost = uncached + ``CACHE_DISCOUNT`` x cached prefix tokens; ``costs`` holds the cost
    under each pricing rule of :data:`nodes.pricing.RULES`. ``retained`` counts calls holding the
    request verbatim and every hard constraint; ``floor_ok`` (taskctx) calls with the core layer,
    the working state and the last ``FLOOR_LAST`` steps; ``restored`` compressed observations whose
    ref returns the recorded observation byte-exact.
    """

    trajectory: str
    strategy: str
    calls: int = 0
    input_tokens: int = 0
    peak_prompt_tokens: int = 0
    cached_prefix_tokens: int = 0
    effective_cost: float = 0.0
    over_budget: int = 0
    retained: int = 0  # calls holding the request verbatim and every constraint
    floor_ok: int | None = None  # taskctx executor calls meeting the floor
    orphans: int = 0
    elided: int = 0  # observations not in full, summed over calls
    compressed: int | None = None  # compressed observations (taskctx) / None
    restored: int | None = None  # of them, byte-exact from their ref
    summaries: int = 0  # summarization: times the history was summarised (model calls not counted)
    #: effective cost under each provider pricing rule (``pricing.RULES``), by rule name
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def cached_share(self) -> float:
        """The share of input tokens that were a cached prefix."""
        return self.cached_prefix_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def retention(self) -> float:
        """The share of calls holding the request verbatim and every hard constraint."""
        return self.retained / self.calls if self.calls else 0.0

    @property
    def floor(self) -> float | None:
        """The share of calls meeting the quality floor (taskctx), or None."""
        return None if self.floor_ok is None else (self.floor_ok / self.calls if self.calls else 0.0)

    @property
    def restorability(self) -> float | None:
        """The share of compressed observations restored byte-exact (None: nothing elided, n/a)."""
        if self.compressed is None:
            return None if self.elided == 0 else 0.0
        return self.restored / self.compressed if self.compressed else 1.0

    def add(self, o: Stats) -> None:
        """Add ``o``'s counts to these (a total).

        Args:
            o: The stats of one trajectory.
        """
        self.calls += o.calls
        self.input_tokens += o.input_tokens
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, o.peak_prompt_tokens)
        self.cached_prefix_tokens += o.cached_prefix_tokens
        self.effective_cost += o.effective_cost
        self.over_budget += o.over_budget
        self.retained += o.retained
        self.orphans += o.orphans
        self.elided += o.elided
        self.summaries += o.summaries
        for k, v in o.costs.items():
            self.costs[k] = self.costs.get(k, 0.0) + v
        if o.floor_ok is not None:
            self.floor_ok = (self.floor_ok or 0) + o.floor_ok
        if o.compressed is not None:
            self.compressed = (self.compressed or 0) + o.compressed
            self.restored = (self.restored or 0) + (o.restored or 0)

    def row(self) -> dict[str, Any]:
        """The stats as one CSV row, rates rounded.

        Returns:
            Column -> value.
        """
        d = asdict(self)
        d.pop("costs")
        d.update({f"cost_{r.name}": round(self.costs.get(r.name, 0.0), 1) for r in RULES})
        d.update(
            cached_share=round(self.cached_share, 4),
            retention=round(self.retention, 4),
            floor=None if self.floor is None else round(self.floor, 4),
            restorability=None if self.restorability is None else round(self.restorability, 4),
            effective_cost=round(self.effective_cost, 1),
        )
        return d


def count_call(s: Stats, c: Call, cached: int, budget: int, request: str, constraints: list[str]) -> None:
    """Add one call to the totals of ``s``.

    Args:
        s: The stats to add to.
        c: The call.
        cached: Its cached prefix, in tokens.
        budget: The token budget (a call over it counts).
        request: The original request (retention).
        constraints: The hard constraints (retention).
    """
    s.calls += 1
    s.input_tokens += c.prompt_tokens
    s.peak_prompt_tokens = max(s.peak_prompt_tokens, c.prompt_tokens)
    s.cached_prefix_tokens += cached
    s.effective_cost += (c.prompt_tokens - cached) + CACHE_DISCOUNT * cached
    for r in RULES:
        s.costs[r.name] = s.costs.get(r.name, 0.0) + r.cost(c.prompt_tokens, cached)
    s.over_budget += c.prompt_tokens > budget
    s.retained += request in c.text and all(k in c.text for k in constraints)
    s.orphans += c.orphans


def strategy_stats(
    traj: str, strategy: str, calls: list[Call], budget: int, request: str, constraints: list[str]
) -> Stats:
    """The stats of a baseline's calls, each cached prefix measured against the previous call.

    Args:
        traj: The trajectory's id.
        strategy: The strategy's name.
        calls: Its calls, in order.
        budget: The token budget.
        request: The original request.
        constraints: The hard constraints.

    Returns:
        The stats.
    """
    s = Stats(traj, strategy)
    prev: list[str] = []
    for c in calls:
        cached = cached_prefix_tokens(prev, c.fingerprints) if prev else 0
        prev = c.fingerprints
        count_call(s, c, cached, budget, request, constraints)
        s.elided += c.elided
        s.summaries += bool(c.payload.get("summarized"))
    return s


def taskctx_stats(run: TaskctxRun, budget: int, constraints: list[str]) -> tuple[Stats, Stats]:
    """The stats of a taskctx run: executor-only (with floor and restorability) and all roles.

    Args:
        run: The run.
        budget: The token budget.
        constraints: The hard constraints.

    Returns:
        ``(executor stats, all-roles stats)``.
    """
    t = run.trajectory
    # cached prefix as the graph logged it (previous call of the same role)
    request = run.request or t.request  # verbatim, its secrets as their placeholders
    ex = _logged_stats(t.id, "taskctx", run.calls, budget, request, constraints)
    allr = _logged_stats(t.id, "taskctx (all roles)", run.calls + run.other_calls, budget, request, constraints)
    # floor: core layer + working state + last 3 steps (thought, action, compressed obs + ref;
    # an observation shown whole needs no ref)
    results: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    reset_seen = False
    ok = 0
    built_at = {c.payload["seq"]: c for c in run.calls}
    for e in run.events:
        if e.kind == "tool.result.received":
            results[e.payload["call_id"]] = e.payload
            order.append(e.payload["call_id"])
        c = built_at.get(e.seq)
        if c is None:
            continue
        inc = {b["id"] for b in c.payload["blocks"] if b["included"]}
        core = {"core.request", "core.permissions", "core.criteria", "core.constraints"} <= inc
        state = "step.delta" in inc and (not reset_seen or "state.checkpoint" in inc)
        last = True
        for cid in order[-FLOOR_LAST:]:
            i = int(cid.split("-")[1]) - 1 if cid.startswith("rec-") else -1
            thought = t.steps[i].thought.strip() if 0 <= i < len(t.steps) else ""
            ref = results[cid].get("raw_ref") or ""
            last &= (
                f"(id={cid})" in c.text
                and f"tool_call_id={cid})" in c.text
                and (not ref or not results[cid].get("compressed") or ref in c.text)
                and (not thought or thought in c.text)
            )
        ok += core and state and last
        reset_seen |= bool(c.payload.get("transcript_reset"))
    ex.floor_ok = ok
    # restorability: every compressed observation, fetched back by its ref
    comp = rest = 0
    for cid, p in results.items():
        if not p.get("compressed"):
            continue
        comp += 1
        i = int(cid.split("-")[1]) - 1
        try:
            rest += run.stores.artifacts.get(p["raw_ref"]) == masked_bytes(t.steps[i].observation)  # as stored
        except Exception:  # noqa: BLE001 - a missing artifact counts as not restorable
            pass
    ex.compressed, ex.restored = comp, rest
    ex.elided = allr.elided = 0
    return ex, allr


def _logged_stats(
    traj: str, strategy: str, calls: list[Call], budget: int, request: str, constraints: list[str]
) -> Stats:
    s = Stats(traj, strategy)
    for c in calls:
        count_call(s, c, int(c.payload.get("cached_prefix_tokens", 0)), budget, request, constraints)
    return s
