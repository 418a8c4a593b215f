"""The provider pricing rules the bench reports under: they live in :mod:`nodes.pricing` (the
executor's restart decision prices with them too); re-exported here under their old path."""

from nodes.pricing import FLAT, HEADLINE, RULES, PricingRule, rule_named

__all__ = ["FLAT", "HEADLINE", "RULES", "PricingRule", "rule_named"]
