"""A secret cut short at a text's end: each prefix-led token shape of ``SECRET_PATTERNS`` has its
prefix in ``CUT_PREFIXES``, and the start of such a token is masked."""

from __future__ import annotations

import re

import pytest

from context.cut_secrets import CUT_PREFIXES, mask_cut_end
from context.secrets import SECRET_PATTERNS, mask_secrets

#: A whole token of each prefix-led kind, as its pattern in SECRET_PATTERNS takes it.
TOKENS = {
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "anthropic_key": "sk-ant-api03-" + "Ab3_" * 10,
    "openai_key": "sk-proj-" + "Zq9x" * 10,
    "stripe_key": "sk_test_" + "51Hx" * 6,
    "slack_token": "xoxb-1234567890-abcdefghij",
    "google_api_key": "AIza" + "SyD3" * 8 + "abc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
#: Kinds found by what surrounds them (a name, a scheme, a header), not by a fixed start.
NAMED = {"aws_secret_access_key", "bearer_token", "url_password", "credential"}


def test_every_token_shape_with_a_fixed_start_has_its_prefix() -> None:
    assert {k for k, _, _ in SECRET_PATTERNS} - NAMED == {k for k, _ in CUT_PREFIXES} == set(TOKENS)


@pytest.mark.parametrize(("kind", "prefix"), CUT_PREFIXES)
def test_a_token_cut_after_its_prefix_is_masked(kind: str, prefix: str) -> None:
    token = TOKENS[kind]
    assert any(k == kind and p.search(token) for k, p, _ in SECRET_PATTERNS)
    assert re.match(prefix, token)
    assert mask_secrets(f"key {token}\n").text == f"key [REDACTED:{kind}]\n"
    start = re.match(prefix, token).end()  # type: ignore[union-attr]
    for cut in (start + 4, start + 9, len(token) // 2 + start // 2):
        assert mask_cut_end(f"line\nkey {token[:cut]}") == "line\nkey [REDACTED:cut_secret]"
        assert mask_cut_end(f"line\nkey {token[:cut]}\n") == f"line\nkey {token[:cut]}\n"  # ended: whole


@pytest.mark.parametrize(
    "text",
    ["done sk-1", "risk-abcdef", "ask ghp_ab", "\\n", "", "plain words at the end", "AKIAI"],
)
def test_a_word_that_is_no_cut_token_is_kept(text: str) -> None:
    assert mask_cut_end(text) == text


def test_a_cut_token_after_an_escaped_newline_is_masked() -> None:
    assert mask_cut_end('{"out": "ok\\nghp_a1B2c3D4') == '{"out": "ok\\n[REDACTED:cut_secret]'
