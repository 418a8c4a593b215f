"""ProviderUsage: the one sum of provider usage (the fold, the call totals, the inspect view)."""

from __future__ import annotations

from context import ProviderUsage
from context.calls import CallUsage


def test_plus_and_total_sum_mappings_and_records_alike() -> None:
    a = {"input_tokens": 1234, "output_tokens": 21, "cache_read": 1024, "cache_creation": 0}
    b = CallUsage(input_tokens=900, output_tokens=40, cache_read=0, cache_creation=512)
    t = ProviderUsage().plus(a, counted=1200).plus(b, counted=880)
    assert t == ProviderUsage(
        calls=2, input_tokens=2134, output_tokens=61, cache_read=1024, cache_creation=512, counted=2080
    )
    assert ProviderUsage.total([a, b]) == t.model_copy(update={"counted": 0})
    assert ProviderUsage.total([{"input_tokens": 7}]) == ProviderUsage(calls=1, input_tokens=7)  # missing: 0
    assert ProviderUsage.total([]) == ProviderUsage()
