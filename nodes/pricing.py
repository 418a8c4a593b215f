"""Provider prompt-cache pricing rules, in one place, with their source and date: what the
executor's restart decision prices (``NodeEnv.cache_rule``) and what ``taskctx bench`` reports.

A rule prices one call from its prompt tokens ``P`` and the tokens ``C`` of its prefix shared
with the previous call of the same role (``nodes.runtime.cached_prefix_tokens``), in units of
one uncached input token:

* ``flat``: any shared prefix at 0.1 (the bench's headline since issue 4, kept so its
  figures compare across versions): ``(P - C) + 0.1 C``.
* ``openai-auto``: OpenAI's automatic prefix caching: a prefix is cached from 1,024 tokens, in
  128-token steps (``c = 1024 + 128 floor((C - 1024) / 128)`` when ``C >= 1024``, else 0), no
  write fee, a read at 0.1 (GPT-5 family; GPT-4.1: 0.25, GPT-4o: 0.5): ``(P - c) + 0.1 c``.
  Source: OpenAI, "Prompt caching" guide and cookbook "Prompt Caching 201"
  (developers.openai.com/api/docs/guides/prompt-caching), as read on 2026-12-01.
* ``anthropic-breakpoints``: Anthropic's explicit ``cache_control`` breakpoints, one at the
  prompt's tail (what langchain-anthropic's ``cache_control`` argument does, and what any
  strategy can do): the shared prefix is read at 0.1 when it reaches the model's minimum
  (1,024 tokens: Sonnet 4.x / Opus 4.x), every other token is written at 1.25 (5-minute TTL):
  ``1.25 (P - c) + 0.1 c`` with ``c = C if C >= 1024 else 0``. Source: Anthropic, "Prompt
  caching" (docs.anthropic.com/en/docs/build-with-claude/prompt-caching), as read on 2026-12-01.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLAT", "HEADLINE", "PROVIDER_RULES", "RULES", "PricingRule", "rule_for_provider", "rule_named"]


@dataclass(frozen=True)
class PricingRule:
    """One provider's caching price rule (module doc). Multipliers are of the uncached input
    token price; ``min_prefix`` and ``step`` are in tokens."""

    name: str
    source: str
    as_of: str
    read: float
    write: float = 1.0
    min_prefix: int = 0
    step: int = 1

    def cached(self, shared: int) -> int:
        """The tokens of a ``shared``-token prefix the provider bills as cached."""
        if shared < max(self.min_prefix, 1):
            return 0
        return self.min_prefix + (shared - self.min_prefix) // self.step * self.step

    def cost(self, prompt_tokens: int, shared: int) -> float:
        """The call's cost in uncached-input-token units."""
        c = self.cached(min(shared, prompt_tokens))
        return self.write * (prompt_tokens - c) + self.read * c


RULES = (
    PricingRule("flat", "taskctx bench (issue 4): any shared prefix at 0.1", "2026-11", read=0.1),
    PricingRule(
        "openai-auto",
        "developers.openai.com/api/docs/guides/prompt-caching (1,024-token minimum, 128-token steps, GPT-5 read 0.1)",
        "2026-12-01",
        read=0.1,
        min_prefix=1024,
        step=128,
    ),
    PricingRule(
        "anthropic-breakpoints",
        "docs.anthropic.com/en/docs/build-with-claude/prompt-caching (write 1.25x 5-min TTL, read 0.1x, 1,024 minimum)",
        "2026-12-01",
        read=0.1,
        write=1.25,
        min_prefix=1024,
    ),
)
#: the rule of the bench's headline "effective cost"
HEADLINE = "flat"
#: the headline rule itself: the default ``NodeEnv.cache_rule``
FLAT = RULES[0]


def rule_named(name: str) -> PricingRule:
    """The rule of :data:`RULES` called ``name``; ``ValueError`` naming the known ones otherwise."""
    for r in RULES:
        if r.name == name:
            return r
    raise ValueError(f"unknown cache pricing rule {name!r}; use one of {', '.join(r.name for r in RULES)}")


#: The rule in force for a provider (``ls_provider`` as LangChain reports it); others: :data:`FLAT`.
PROVIDER_RULES = {"openai": "openai-auto", "anthropic": "anthropic-breakpoints"}


def rule_for_provider(provider: str) -> PricingRule:
    """The cache pricing rule of ``provider`` (:data:`PROVIDER_RULES`), :data:`FLAT` for any other
    (offline scripted and replay models included)."""
    name = PROVIDER_RULES.get(provider)
    return rule_named(name) if name else FLAT
