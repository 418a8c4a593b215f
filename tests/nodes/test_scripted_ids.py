"""The scripted answers' default call ids: a reply's token count never depends on how many
answers the process made before it (a full test run makes thousands)."""

from __future__ import annotations

from context.tokens import encoding_counter
from nodes.message_tokens import message_tokens
from nodes.testing import plan, tool_call


def test_a_default_call_id_counts_the_same_tokens_however_many_came_before() -> None:
    count = encoding_counter("o200k_base")
    first = plan("Shout hello", "Shout bye")
    for _ in range(1000):  # the process-wide counter moves past 999, a fourth digit
        tool_call("shout", {"text": "x"})
    later = plan("Shout hello", "Shout bye")
    assert first.tool_calls[0]["id"] != later.tool_calls[0]["id"]
    assert message_tokens([first], count) == message_tokens([later], count) == 62
