"""What the model provider reported using, summed over a task's model calls."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ProviderUsage"]


class ProviderUsage(BaseModel):
    """The provider's reported usage, summed over the task's model calls that reported one.

    Folded from ``context.built.usage`` into ``progress.usage`` (scripted and replay models report
    none). All counts are tokens as the provider counted them; ``counted`` is taskctx's own count
    of the same prompts (:mod:`context.tokens`), so ``input_tokens - counted`` is the difference.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    counted: int = 0
