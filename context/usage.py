"""What the model provider reported using, summed over a task's model calls: the one aggregation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["USAGE_FIELDS", "ProviderUsage"]

#: The token counts of one call's provider usage (``context.built.usage``), in this order.
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read", "cache_creation")


def _get(usage: Mapping[str, Any] | Any, name: str) -> int:
    value = usage.get(name, 0) if isinstance(usage, Mapping) else getattr(usage, name, 0)
    return int(value or 0)


class ProviderUsage(BaseModel):
    """The provider's reported usage, summed over the task's model calls that reported one.

    Folded from ``context.built.usage`` into ``progress.usage`` (scripted and replay models report
    none). All counts are tokens as the provider counted them; ``counted`` is taskctx's own count
    of the same prompts (:mod:`context.tokens`), so ``input_tokens - counted`` is the difference.
    :meth:`plus` and :meth:`total` are the one way taskctx sums usage (the fold, the per-role call
    totals, the inspect view).
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    counted: int = 0

    def plus(self, usage: Mapping[str, Any] | Any, counted: int = 0) -> ProviderUsage:
        """These sums with one more call's usage added (a new object).

        Args:
            usage: One call's usage: a ``context.built.usage`` mapping or an object with the
                :data:`USAGE_FIELDS` attributes (``context.calls.CallUsage``); missing counts are 0.
            counted: taskctx's count of that call's prompt, in tokens.

        Returns:
            The new sums (``calls`` one more).
        """
        added = {f: getattr(self, f) + _get(usage, f) for f in USAGE_FIELDS}
        return ProviderUsage(calls=self.calls + 1, counted=self.counted + counted, **added)

    @classmethod
    def total(cls, usages: Iterable[Mapping[str, Any] | Any]) -> ProviderUsage:
        """The sums of some calls' usages (``counted`` 0: add it with :meth:`plus` where known).

        Args:
            usages: One usage per call that reported one (as :meth:`plus` takes it).

        Returns:
            The sums; ``calls`` is how many usages there were.
        """
        out = cls()
        for u in usages:
            out = out.plus(u)
        return out
