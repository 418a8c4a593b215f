"""Masking values that look like secrets (API keys, tokens, private keys, passwords), and the one
place it happens: the store boundary.

**Nothing shaped like a secret is ever written to a store.** The event log and the artifact store
(SQLite :mod:`context.store` and Postgres :mod:`context.pg_store`) pass everything they are given
through :func:`masked_events` / :func:`masked_bytes` before writing it, so every reader gets masked
bytes: prompts (built from the folded state and stored as prompt artifacts), tool results as
stored, error messages, ``read_artifact``, ``search_history``, ``trace.jsonl``, ``state.json``,
exports, the report, ``inspect`` and the checkpointed state (folded from the events as stored).
Every entry is covered because every write goes through a store: a tool's output, its error
text, a command's stderr, the model's own words and tool-call arguments, and the caller's request
(``task.created``; :func:`graphs.new_task` masks it before the graph's first checkpoint too). The
request is masked on purpose: the log is the source of every prompt, export and trace, so a
secret in it would go to the model provider and into every export; a caller who wants the agent
to use a secret puts it in the workspace's environment, where a command reads it, not in the
request. Tool-call arguments are masked too, so a call whose arguments hold a mask is refused when
it has side effects (it would write the mask in place of the secret: :func:`nodes.assess`).

The cost of this: an artifact is exact except for its secret-shaped values (docs/design.md
"Tool results and artifacts": compression never loses bytes; masking does, on purpose), and its ref is the
hash of the masked bytes. Rows written before this rule may still hold secrets (``taskctx doctor``
does not rewrite them).

A secret is found by **its own shape** (a known prefix with its length and alphabet, or a value of
a known alphabet and length after a name that says what it is), never by what follows it: a key
followed by a literal ``\\n`` (as ``repr()`` prints it), ``\\t``, ``|``, a quote or ``&`` is
masked like one followed by a space. The vendor shapes are detect-secrets' plugins (Yelp's
detector, a dependency: :data:`DETECT_SECRETS_PLUGINS` lists which, and which group of each match
is the secret); :data:`SECRET_PATTERNS` holds the shapes it lacks, each with its source.

Masking keeps the number of lines (a masked private key block becomes the same number of
``[REDACTED:private_key]`` lines), so line refs (``#L120-180``) still point at the same lines,
and it is idempotent (a mask is never masked again).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from .events import Event
from .text import to_bytes

__all__ = [
    "DETECT_SECRETS_PLUGINS",
    "MASK_FORMAT",
    "SECRET_PATTERNS",
    "Masked",
    "mask_secrets",
    "masked_bytes",
    "masked_events",
    "masked_tree",
    "looks_secret",
]

MASK_FORMAT = "[REDACTED:{kind}]"

_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY|OPENSSH PRIVATE KEY|PGP PRIVATE KEY BLOCK)-----"
    r"(?:.*?-----END [A-Z0-9 ]*(?:PRIVATE KEY|PRIVATE KEY BLOCK)-----|.*\Z)",
    re.S,
)

_KEY = (
    r"(?i)\b[\w.\-]*?(?:api[_\-]?key|secret(?:[_\-]?key)?|token|passw(?:or)?d|pwd|private[_\-]?key"
    r"|access[_\-]?key)\b(?:\\*[\"'])?"
)
#: The alphabet of an unquoted credential value (no quote, backslash, ``|``, brackets, space...).
_VALUE = r"A-Za-z0-9_\-+/=!@#%^&*~"

#: (kind, detect-secrets plugin, what to mask: ``"match"`` the whole match (the pattern is the
#: token itself), ``"group"`` its first group where the pattern has one (the pattern names the
#: secret, then captures it), else the whole match).
#: Left out: ArtifactoryDetector (it finds the token by the space or quote that follows it),
#: PrivateKeyDetector (a header line only: the block is masked whole by ``_PEM``), KeywordDetector
#: and the high-entropy plugins (not regex tables; ``credential`` below covers key = value),
#: JwtTokenDetector (its lazy pattern stops before the signature: ``jwt`` below takes all three
#: parts), IPPublicDetector (an address is not a secret).
DETECT_SECRETS_PLUGINS: list[tuple[str, type[RegexBasedDetector], str]] = [
    ("aws_access_key_id", AWSKeyDetector, "group"),  # pattern 1 (key id) has no group: whole match
    ("azure_storage_key", AzureStorageKeyDetector, "match"),
    ("url_password", BasicAuthDetector, "group"),
    ("cloudant", CloudantDetector, "group"),
    ("discord_token", DiscordBotTokenDetector, "match"),
    ("github_token", GitHubTokenDetector, "match"),
    ("gitlab_token", GitLabTokenDetector, "match"),
    ("ibm_cloud_iam_key", IbmCloudIamDetector, "group"),
    ("ibm_cos_hmac", IbmCosHmacDetector, "group"),
    ("mailchimp_key", MailchimpDetector, "match"),
    ("npm_token", NpmDetector, "group"),
    ("openai_key", OpenAIDetector, "match"),
    ("pypi_token", PypiTokenDetector, "match"),
    ("sendgrid_key", SendGridDetector, "match"),
    ("slack_token", SlackDetector, "match"),
    ("softlayer", SoftlayerDetector, "group"),
    ("square_oauth", SquareOAuthDetector, "match"),
    ("stripe_key", StripeDetector, "match"),
    ("telegram_token", TelegramBotTokenDetector, "match"),
    ("twilio_key", TwilioKeyDetector, "match"),
]

#: Where a shape may start: a word boundary, or right after an escape written out as two
#: characters (``\\n``, ``\\t``, ``\\r``: ``repr()``, JSON), where ``\\b`` sees no boundary.
_S = r"(?:\b|(?<=\\[ntr]))"

#: (kind, pattern, group holding the secret value (0 = whole match)): the shapes detect-secrets
#: does not have (or finds by what surrounds them), each with its source.
SECRET_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    # AWS docs "Managing access keys": key id AKIA/ASIA... + 16 upper-case letters and digits
    (
        "aws_access_key_id",
        re.compile(_S + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|A3T[A-Z0-9])[0-9A-Z]{16}(?![0-9A-Z])"),
        0,
    ),
    # AWS secret access key: 40 chars of base64 (A-Za-z0-9/+) after a name saying aws...secret/key;
    # detect-secrets' AWSKeyDetector pattern 2 with its quotes replaced by the alphabet's edges
    (
        "aws_secret_access_key",
        re.compile(
            r"(?i)(?:(?<![a-z])|(?<=\\[ntr]))aws.{0,20}?(?:key|pwd|pw|password|pass|token|secret).{0,20}?"
            r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    # GitHub "About authentication": gh[pousr]_ + 36 base62 (longer ones exist), fine-grained github_pat_
    ("github_token", re.compile(_S + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"), 0),
    # Anthropic console: sk-ant-<kind>-... base64url
    ("anthropic_key", re.compile(_S + r"sk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    # OpenAI project/service keys (sk-proj-, sk-svcacct-) and legacy sk-<48 base62>
    ("openai_key", re.compile(_S + r"sk-(?:proj-|svcacct-|live-|test-)?[A-Za-z0-9_\-]{20,}"), 0),
    # Stripe "API keys": sk_/rk_/pk_ + live_/test_ + base62 (detect-secrets has live sk/rk only)
    ("stripe_key", re.compile(_S + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0),
    # Slack "Token types": xoxb-/xoxp-/xoxa-/xoxr-/xoxs-/xoxe-... (config tokens without digits)
    ("slack_token", re.compile(_S + r"xox[abposre]-[A-Za-z0-9\-]{10,}"), 0),
    # Google Cloud "API keys": AIza + 35 base64url
    ("google_api_key", re.compile(_S + r"AIza[0-9A-Za-z_\-]{35}"), 0),
    # RFC 7519: three base64url parts, header and payload JSON objects ("eyJ" = '{"')
    ("jwt", re.compile(_S + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), 0),
    # RFC 6750 bearer token (b64token alphabet), GitHub's "Authorization: token ..."
    ("bearer_token", re.compile(r"(?i)" + _S + r"(?:bearer|authorization:\s*token)\s+([A-Za-z0-9_\-\.=+/~]{16,})"), 1),
    # RFC 3986 userinfo: scheme://user:password@
    ("url_password", re.compile(_S + r"[a-z][a-z0-9+.\-]*://[^\s:/@\\]+:([^\s@/\\'\"]{3,})@"), 1),
    # key = value / key: value / "key": "value" where the key names a secret (GITHUB_TOKEN,
    # db_password, api-key...; not max_tokens or token_type) and the value is a literal, not code:
    # quoted (JSON-escaped quotes too; escapes such as a literal \n inside it are part of it), or
    # unquoted of the value alphabet, ending where the alphabet ends, unless code
    # follows (a call, attribute or index: ``token = get_token()``)
    ("credential", re.compile(_KEY + r"\s*[:=]\s*\\*[\"']((?:[^\s\"'\\]|\\[^\s\"'\\]){8,})"), 1),
    ("credential", re.compile(_KEY + rf"\s*[:=]\s*([{_VALUE}]{{8,}})(?![{_VALUE}(.\[])"), 1),
]


#: Cheap tests for the patterns anchored on a name (``credential``; detect-secrets' keyword
#: plugins: ``password = ...``, ``cloudant_key: ...``): only lines with such a name can match, so
#: these (costlier, case-insensitive) patterns run on those lines alone (a 10 MB output is
#: scanned once, not once per pattern at every word boundary). Each such pattern is single-line.
_KEY_HINT = re.compile(r"(?i)api[_\-]?key|secret|token|passw|pwd|private[_\-]?key|access[_\-]?key")
_PLUGIN_HINT = re.compile(r"(?i)key|pw|pass|token|secret")
#: Lower-case words of which every match of a hint holds one (a line with none of them cannot
#: match the hint): found by ``str.find`` in the lower-cased text, far faster than the
#: case-insensitive alternation.
_HINT_WORDS = {
    _KEY_HINT: ("key", "secret", "token", "passw", "pwd"),
    _PLUGIN_HINT: ("key", "pw", "pass", "token", "secret"),
}


def _hint(pat: re.Pattern[str], kind: str) -> re.Pattern[str] | None:
    if kind == "credential":
        return _KEY_HINT
    if pat.pattern.startswith("(?:(?<=\\W)|(?<=^))"):  # detect-secrets' "<name><sep><value>" plugins
        return _PLUGIN_HINT
    return None


#: Boundary prefixes a pattern may start with (ours, :data:`_S`; detect-secrets' keyword
#: plugins; the AWS secret's). A pattern without its prefix matches wherever the whole pattern
#: does, and starts with a literal or a class the ``re`` engine can search for quickly.
_BOUNDS = (_S, r"(?:(?<=\W)|(?<=^))", r"(?:(?<![a-z])|(?<=\\[ntr]))")


def _screen(pat: re.Pattern[str]) -> re.Pattern[str] | None:
    """``pat`` without its leading boundary (see :data:`_BOUNDS`), or None when it has none. A
    text where the screen finds nothing cannot hold a match of ``pat`` (a 30 KB prompt is then
    passed over in well under a millisecond instead of ~2 ms a pattern)."""
    src, flags = pat.pattern, ""
    if src.startswith("(?i)"):
        src, flags = src[4:], "(?i)"
    for b in _BOUNDS:
        if src.startswith(b):
            return re.compile(flags + src[len(b) :], pat.flags)
    return None


def _all_patterns() -> list[tuple[str, re.Pattern[str], int, re.Pattern[str] | None, re.Pattern[str] | None]]:
    """(kind, pattern, group, hint, screen) for every pattern, ours first."""
    out = [(kind, pat, group, _hint(pat, kind), _screen(pat)) for kind, pat, group in SECRET_PATTERNS]
    for kind, plugin, part in DETECT_SECRETS_PLUGINS:
        for pat in plugin.denylist:  # type: ignore[attr-defined]  # a class attribute set by each plugin
            out.append((kind, pat, 1 if part == "group" and pat.groups else 0, _hint(pat, kind), _screen(pat)))
    return out


_ALL = _all_patterns()


@dataclass(frozen=True)
class Masked:
    text: str
    count: int
    kinds: tuple[str, ...]


def _hint_lines(text: str, hint: re.Pattern[str]) -> list[tuple[int, int]]:
    """The (start, end) character spans of the lines of ``text`` that may hold a match of
    ``hint`` (those holding one of its :data:`_HINT_WORDS`, in any case; a superset of the lines
    the hint matches), in order, each once."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: positions would shift
        hits = sorted(m.start() for m in hint.finditer(text))
    else:
        hits = []
        for word in _HINT_WORDS[hint]:
            i = low.find(word)
            while i >= 0:
                hits.append(i)
                i = low.find(word, i + 1)
        hits.sort()
    spans: list[tuple[int, int]] = []
    for pos in hits:
        if spans and pos < spans[-1][1]:
            continue  # on a line already taken
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        spans.append((start, len(text) if end < 0 else end))
    return spans


def _sub_on_lines(
    pat: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, spans: list[tuple[int, int]]
) -> str:
    """``pat.sub(repl, ...)`` on the given line spans of ``text`` only (see :func:`_hint_lines`)."""
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], pat.sub(repl, text[start:end])]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _pem_lines(m: re.Match[str]) -> str:
    n = m.group(0).count("\n")
    line = MASK_FORMAT.format(kind="private_key")
    return "\n".join([line] * (n + 1))


def mask_secrets(text: str) -> Masked:
    """``text`` with every secret-looking value replaced by ``[REDACTED:<kind>]`` (line count kept):
    private key blocks, then :data:`SECRET_PATTERNS`, then the :data:`DETECT_SECRETS_PLUGINS`
    patterns. ``count`` is the number of values masked, ``kinds`` their kinds in first-seen order."""
    kinds: list[str] = []
    count = 0

    def pem(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        kinds.append("private_key")
        return _pem_lines(m)

    out = _PEM.sub(pem, text)
    hinted: dict[re.Pattern[str], list[tuple[int, int]]] = {}  # the lines holding a hint's names
    for kind, pat, group, hint, screen in _ALL:
        if hint is not None:
            if hint not in hinted:
                hinted[hint] = _hint_lines(out, hint)
            if not hinted[hint]:
                continue
        elif screen is not None and screen.search(out) is None:
            continue

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

        before = count
        out = _sub_on_lines(pat, repl, out, hinted[hint]) if hint is not None else pat.sub(repl, out)
        if count != before:  # the text changed (and a mask may hold a hint's name: "[REDACTED:github_token]")
            hinted.clear()
    return Masked(out, count, tuple(dict.fromkeys(kinds)))


def looks_secret(text: str) -> bool:
    """True when :func:`mask_secrets` would change ``text``."""
    return mask_secrets(text).count > 0


def masked_tree(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, numbers) with :func:`mask_secrets` applied to every
    string in it (dict keys too); the same object when nothing in it looks secret."""
    if isinstance(obj, str):
        return mask_secrets(obj).text
    if isinstance(obj, dict):
        return {masked_tree(k): masked_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(masked_tree(v) for v in obj)
    return obj


def _strings(obj: Any, out: list[str]) -> list[str]:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _strings(k, out)
            _strings(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _strings(v, out)
    return out


def masked_events(events: Sequence[Event]) -> list[Event]:
    """``events`` as the stores write them: every string of each
    payload masked (:func:`masked_tree`). One screening pass per event (its strings joined by
    newlines: a secret in one string is a secret there too) finds the few that need the walk."""
    out = []
    for e in events:
        payload = e.payload
        if payload and looks_secret("\n".join(_strings(payload, []))):
            e = e.model_copy(update={"payload": masked_tree(payload)})
        out.append(e)
    return out


def masked_bytes(data: bytes | str) -> bytes:
    """``data`` as the artifact store writes it: UTF-8 bytes (a ``str`` losslessly, a lone
    surrogate as its ``surrogatepass`` bytes; :func:`context.text.to_bytes`) with every secret
    masked. Bytes that are not UTF-8 are read with ``surrogateescape`` so that every byte that is
    not part of a secret comes back unchanged."""
    if isinstance(data, str):
        return to_bytes(mask_secrets(data).text)
    try:
        text, errors = data.decode("utf-8", "surrogatepass"), "surrogatepass"
    except UnicodeDecodeError:
        text, errors = data.decode("utf-8", "surrogateescape"), "surrogateescape"
    m = mask_secrets(text)
    return data if not m.count else m.text.encode("utf-8", errors)
