"""Masking values that look like secrets (API keys, tokens, private keys, passwords).

Where masking happens (the rule: **everything that leaves the artifact store is masked**):

* the tool node masks a tool's output before compressing it, so the ``result_summary`` of
  ``tool.result.received`` (what prompts, the trace, ``state.json`` and every export are built
  from) never holds a secret;
* ``read_artifact`` masks what it returns (the whole artifact is masked first, then sliced, so a
  ``#L`` slice that starts inside a private key block is masked too);
* ``search_history`` searches events, which are already masked.

The raw artifact stays exact in the artifact store (DESIGN.md: compression never loses bytes), so
the store itself holds the unmasked output: treat the database file as sensitive, and read
artifacts through ``read_artifact`` (or :func:`mask_secrets`) before showing them anywhere.

Masking keeps the number of lines (a masked private key block becomes the same number of
``[REDACTED:private_key]`` lines), so line refs (``#L120-180``) still point at the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MASK_FORMAT", "SECRET_PATTERNS", "Masked", "mask_secrets", "looks_secret"]

MASK_FORMAT = "[REDACTED:{kind}]"

_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY|OPENSSH PRIVATE KEY|PGP PRIVATE KEY BLOCK)-----"
    r"(?:.*?-----END [A-Z0-9 ]*(?:PRIVATE KEY|PRIVATE KEY BLOCK)-----|.*\Z)",
    re.S,
)

_KEY = (
    r"(?i)\b[\w.\-]*?(?:api[_\-]?key|secret(?:[_\-]?key)?|token|passw(?:or)?d|pwd|private[_\-]?key"
    r"|access[_\-]?key)\b[\"']?"
)

#: (kind, pattern, group holding the secret value (0 = whole match)).
SECRET_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16}\b"), 0),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})\b"), 0),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|live-|test-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), 0),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), 0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), 0),
    ("bearer_token", re.compile(r"(?i)\b(?:bearer|authorization:\s*token)\s+([A-Za-z0-9_\-\.=+/]{16,})"), 1),
    ("url_password", re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:([^\s@/]{3,})@"), 1),
    # key = value / key: value / "key": "value" where the key names a secret (GITHUB_TOKEN,
    # db_password, api-key...; not max_tokens or token_type) and the value is a literal, not code
    ("credential", re.compile(_KEY + r"\s*[:=]\s*[\"']([^\s\"']{8,})[\"']"), 1),
    ("credential", re.compile(_KEY + r"\s*[:=]\s*([A-Za-z0-9_\-+/=!@#%^&*~]{8,})(?=[\s,;]|$)", re.M), 1),
]


@dataclass(frozen=True)
class Masked:
    text: str
    count: int
    kinds: tuple[str, ...]


#: Cheap test for the ``credential`` patterns: only lines naming a secret-ish key can match, so
#: the (costlier) patterns run on those lines alone (a 10 MB output is scanned once, not twice
#: per pattern at every word boundary).
_KEY_HINT = re.compile(r"(?i)api[_\-]?key|secret|token|passw|pwd|private[_\-]?key|access[_\-]?key")


def _sub_on_hint_lines(pat: re.Pattern[str], repl, text: str) -> str:
    if not _KEY_HINT.search(text):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _KEY_HINT.search(line):
            lines[i] = pat.sub(repl, line)
    return "\n".join(lines)


def _pem_lines(m: re.Match[str]) -> str:
    n = m.group(0).count("\n")
    line = MASK_FORMAT.format(kind="private_key")
    return "\n".join([line] * (n + 1))


def mask_secrets(text: str) -> Masked:
    """``text`` with every secret-looking value replaced by ``[REDACTED:<kind>]`` (line count kept)."""
    kinds: list[str] = []
    count = 0

    def pem(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        kinds.append("private_key")
        return _pem_lines(m)

    out = _PEM.sub(pem, text)
    for kind, pat, group in SECRET_PATTERNS:

        def repl(m: re.Match[str], kind: str = kind, group: int = group) -> str:
            nonlocal count
            value = m.group(group)
            if value.startswith("[REDACTED:") or (kind == "credential" and value.isdigit()):
                return m.group(0)
            count += 1
            kinds.append(kind)
            mask = MASK_FORMAT.format(kind=kind)
            if group == 0:
                return mask
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            whole = m.group(0)
            return whole[:start] + mask + whole[end:]

        out = _sub_on_hint_lines(pat, repl, out) if kind == "credential" else pat.sub(repl, out)
    return Masked(out, count, tuple(dict.fromkeys(kinds)))


def looks_secret(text: str) -> bool:
    """True when :func:`mask_secrets` would change ``text``."""
    return mask_secrets(text).count > 0
