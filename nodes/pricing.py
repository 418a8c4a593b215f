"""Provider prompt-cache pricing rules, with their source and date.

The executor's restart decision prices with one (``NodeEnv.cache_rule``); ``taskctx bench``
reports every one. Costs are in units of one uncached input token.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLAT", "HEADLINE", "PROVIDER_RULES", "RULES", "PricingRule", "rule_for_provider", "rule_named"]


@dataclass(frozen=True)
class PricingRule:
    """One provider's prompt-cache price rule.

    Attributes:
        name: The rule's name (``flat``, ``openai-auto``, ``anthropic-breakpoints``).
        source: Where the prices come from.
        as_of: When they were read.
        read: A cached token's price, as a multiple of an uncached input token's.
        write: An uncached token's price (a cache write), as such a multiple.
        min_prefix: The shortest prefix cached, in tokens.
        step: The granularity of a cached prefix, in tokens.
    """

    name: str
    source: str
    as_of: str
    read: float
    write: float = 1.0
    min_prefix: int = 0
    step: int = 1

    def cached(self, shared: int) -> int:
        """The tokens of a ``shared``-token prefix the provider bills as cached.

        Args:
            shared: Tokens the prompt shares with the previous call's.

        Returns:
            Cached tokens: 0 under ``min_prefix``, else rounded down to ``step``.
        """
        if shared < max(self.min_prefix, 1):
            return 0
        return self.min_prefix + (shared - self.min_prefix) // self.step * self.step

    def cost(self, prompt_tokens: int, shared: int) -> float:
        """A call's cost in uncached-input-token units.

        Args:
            prompt_tokens: The call's prompt tokens.
            shared: Tokens shared with the previous call's prompt.

        Returns:
            ``write * (prompt_tokens - cached) + read * cached``.
        """
        c = self.cached(min(shared, prompt_tokens))
        return self.write * (prompt_tokens - c) + self.read * c


RULES = (
    PricingRule("flat", "taskctx bench: any shared prefix at 0.1", "2026-11", read=0.1),
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
    """The rule of :data:`RULES` called ``name``.

    Args:
        name: A rule's name.

    Returns:
        The rule.

    Raises:
        ValueError: No rule has that name (the message names the known ones).
    """
    for r in RULES:
        if r.name == name:
            return r
    raise ValueError(f"unknown cache pricing rule {name!r}; use one of {', '.join(r.name for r in RULES)}")


#: The rule in force for a provider (``ls_provider`` as LangChain reports it); others: :data:`FLAT`.
PROVIDER_RULES = {"openai": "openai-auto", "anthropic": "anthropic-breakpoints"}


def rule_for_provider(provider: str) -> PricingRule:
    """The cache pricing rule of ``provider`` (:data:`PROVIDER_RULES`).

    Args:
        provider: LangChain's ``ls_provider`` (``openai``, ``anthropic``...).

    Returns:
        Its rule, or :data:`FLAT` for any other (offline scripted and replay models included).
    """
    name = PROVIDER_RULES.get(provider)
    return rule_named(name) if name else FLAT
