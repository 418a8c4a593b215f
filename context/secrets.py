"""Masking values shaped like secrets (API keys, tokens, private keys, passwords) at the stores.

Nothing shaped like a secret is ever written to a store: the event logs and artifact stores pass
what they write through :func:`masked_events` / :func:`masked_bytes`, so every reader gets masked
bytes. A secret is found by its own shape (detect-secrets' plugins, :data:`DETECT_SECRETS_PLUGINS`,
and :data:`SECRET_PATTERNS`); masking keeps the number of lines and never masks a mask again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from .held_secrets import (
    MIN_SECRET_CHARS,
    check_secret,
    held_spans,
    hold_secrets,
    in_placeholder,
    placeholder,
    seal_secrets,
)
from .text import to_bytes

__all__ = [
    "DETECT_SECRETS_PLUGINS",
    "MASK_CHUNK",
    "MASK_FORMAT",
    "MASK_OVERLAP",
    "SECRET_PATTERNS",
    "SHAPE_START",
    "Masked",
    "looks_secret",
    "mask_secrets",
    "mask_stream",
    "masked_bytes",
    "masked_events",
    "masked_tree",
    "safe_cut",
    "secret_spans",
    "secret_values",
    "take_secrets",
]

MASK_FORMAT = "[REDACTED:{kind}]"
#: Characters of context a chunk boundary keeps on each side (:func:`mask_stream`): longer than
#: any secret shape with its name (a private key block of a 4096-bit RSA key is about 3,300).
MASK_OVERLAP = 16_384
#: Characters masked at a time by :func:`masked_bytes` and :func:`mask_stream`'s callers.
MASK_CHUNK = 1_048_576

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
SHAPE_START = r"(?:\b|(?<=\\[ntr]))"
_S = SHAPE_START

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
#: these (costlier, case-insensitive) patterns run on those lines alone (a long output is
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
#: A URL scheme: a screen starting so would try every letter of a long word (quadratic); ``://``
#: is the literal every match holds.
_SCHEME = r"[a-z][a-z0-9+.\-]*://"


def _screen(pat: re.Pattern[str]) -> re.Pattern[str] | None:
    """``pat`` without its leading boundary (see :data:`_BOUNDS`), or None when it has none.

    A text where the screen finds nothing cannot hold a match of ``pat``, and the screen, which
    starts with a literal, is far cheaper to search for.
    """
    src, flags = pat.pattern, ""
    if src.startswith("(?i)"):
        src, flags = src[4:], "(?i)"
    for b in _BOUNDS:
        if src.startswith(b):
            rest = src[len(b) :]
            if rest.startswith(_SCHEME):  # a class, not a literal: scanned from every letter
                return re.compile("://")
            return re.compile(flags + rest, pat.flags)
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
    """A text with its secrets masked: ``count`` values masked, their ``kinds`` in first-seen order."""

    text: str
    count: int
    kinds: tuple[str, ...]


def _hint_lines(text: str, hint: re.Pattern[str]) -> list[tuple[int, int]]:
    """The (start, end) character spans of the lines of ``text`` that may match ``hint``.

    Those holding one of its :data:`_HINT_WORDS`, in any case (a superset of the lines the hint
    matches), in order, each once.
    """
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
    """Replace every secret-looking value of a text by ``[REDACTED:<kind>]``.

    The values of the secrets a run holds first (:mod:`context.held_secrets`: each by its
    placeholder ``{{secret:NAME}}``, kind ``held``), then private key blocks (each line of the block
    masked, so the line count is kept), then :data:`SECRET_PATTERNS`, then the
    :data:`DETECT_SECRETS_PLUGINS` patterns; a placeholder is never masked.

    Args:
        text: Any text.

    Returns:
        The masked text, the number of values masked and their kinds.
    """
    return _mask(text, None, seal=True)


def secret_values(text: str) -> list[tuple[str, str]]:
    """The secret values the detector finds in a text (what :func:`mask_secrets` would mask).

    The values of held secrets are not sealed first: this is how a request's own secrets are found
    (:func:`context.held_secrets.take_secrets`).

    Args:
        text: Any text.

    Returns:
        ``(kind, value)`` of each value masked, in the order masked (a private key block whole).
    """
    found: list[tuple[str, str]] = []
    _mask(text, found, seal=False)
    return found


def _mask(text: str, found: list[tuple[str, str]] | None, *, seal: bool) -> Masked:
    """:func:`mask_secrets`, recording each value masked in ``found`` (when given)."""
    kinds: list[str] = []
    count = 0
    if seal:
        text, count = seal_secrets(text)
        kinds += ["held"] if count else []

    def pem(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        kinds.append("private_key")
        if found is not None:
            found.append(("private_key", m.group(0)))
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
            if in_placeholder(m.string, m.start(group), m.end(group)):
                return m.group(0)
            count += 1
            kinds.append(kind)
            if found is not None:
                found.append((kind, value))
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


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where secret shapes match in a text, with what names them: a cut inside one splits a secret.

    Args:
        text: Any text.

    Returns:
        ``(start, end)`` character offsets of every held value and every whole match of
        :func:`mask_secrets`'s patterns (a name and its value together), sorted; they may overlap.
    """
    spans = [*held_spans(text), *(m.span() for m in _PEM.finditer(text))]
    hinted: dict[re.Pattern[str], list[tuple[int, int]]] = {}
    for _, pat, _, hint, screen in _ALL:
        if hint is not None:
            if hint not in hinted:
                hinted[hint] = _hint_lines(text, hint)
            for start, end in hinted[hint]:
                spans += [m.span() for m in pat.finditer(text, start, end)]  # offsets in the whole text
        elif screen is None or screen.search(text) is not None:
            spans += [m.span() for m in pat.finditer(text)]
    return sorted(spans)


def safe_cut(text: str, at: int) -> int:
    """The offset nearest ``at`` where cutting ``text`` splits no secret (:func:`secret_spans`).

    Args:
        text: The text to cut.
        at: The wanted offset (characters).

    Returns:
        ``at``, or the start of the secrets it falls in (those within twice :data:`MASK_OVERLAP`
        of it); 0 when they reach that far.
    """
    cut = max(0, min(at, len(text)))
    lo = max(0, cut - 2 * MASK_OVERLAP)  # a secret the cut splits lies near it: look only there
    near = text[lo : cut + 2 * MASK_OVERLAP]
    spans = [(lo + a, lo + b) for a, b in secret_spans(near)] if 0 < cut < len(text) else []
    moved = True
    while moved:
        moved = False
        for start, end in spans:
            if start < cut < end:
                cut, moved = start, True
                break
    return cut


def mask_stream(chunks: Iterable[str], *, overlap: int = MASK_OVERLAP) -> Iterator[str]:
    """Mask a text that arrives in chunks, holding about one chunk and ``overlap`` characters at a time.

    Each step masks the chunk with the text held back from the one before, and gives out what
    lies before a cut ``overlap`` characters from its end (moved back so that it splits no secret):
    a secret that spans a chunk boundary is masked as in the whole text. A run of secret-shaped
    text longer than a chunk is masked as it stands and given out.

    Args:
        chunks: The text, in pieces of any size.
        overlap: Characters held back at each cut (longer than any secret).

    Yields:
        Masked pieces; joined, they are the masked text.
    """
    carry = ""
    for chunk in chunks:
        window = carry + chunk
        if len(window) <= 2 * overlap:
            carry = window
            continue
        cut = safe_cut(window, len(window) - overlap)
        if cut == 0:  # one secret-shaped run from the start past the cut: mask it as it stands
            cut = len(window)
        yield mask_secrets(window[:cut]).text
        carry = window[cut:]
    if carry:
        yield mask_secrets(carry).text


def looks_secret(text: str) -> bool:
    """Whether a text holds a secret-looking value.

    Args:
        text: Any text.

    Returns:
        True when :func:`mask_secrets` would change it.
    """
    return mask_secrets(text).count > 0


def masked_tree(obj: Any) -> Any:
    """Mask every string of a JSON-like value (dict keys too).

    Args:
        obj: Dicts, lists, tuples, strings, numbers.

    Returns:
        ``obj`` with :func:`mask_secrets` applied to every string in it.
    """
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
    """Events as the stores write them: every string of each payload masked.

    One screening pass per event (its strings joined by newlines: a secret in one string is a
    secret there too) finds the few that need the walk (:func:`masked_tree`).

    Args:
        events: The events.

    Returns:
        The events, those with a secret-looking string copied with their payload masked.
    """
    out = []
    for e in events:
        payload = e.payload
        if payload and looks_secret("\n".join(_strings(payload, []))):
            e = e.model_copy(update={"payload": masked_tree(payload)})
        out.append(e)
    return out


def masked_bytes(data: bytes | str) -> bytes:
    """Bytes as the artifact store writes them: every secret masked (a long text by :func:`mask_stream`).

    Args:
        data: Bytes, or a ``str`` (encoded losslessly: a lone surrogate as its ``surrogatepass``
            bytes, :func:`context.text.to_bytes`). Bytes that are not UTF-8 are read with
            ``surrogateescape``, so every byte not part of a secret comes back unchanged.

    Returns:
        The UTF-8 bytes with every secret masked (``data`` itself when none).
    """
    if isinstance(data, str):
        if len(data) <= MASK_CHUNK:
            return to_bytes(mask_secrets(data).text)
        return to_bytes("".join(mask_stream(data[i : i + MASK_CHUNK] for i in range(0, len(data), MASK_CHUNK))))
    try:
        text, errors = data.decode("utf-8", "surrogatepass"), "surrogatepass"
    except UnicodeDecodeError:
        text, errors = data.decode("utf-8", "surrogateescape"), "surrogateescape"
    if len(text) <= MASK_CHUNK:
        m = mask_secrets(text)
        return data if not m.count else m.text.encode("utf-8", errors)
    pieces = (text[i : i + MASK_CHUNK] for i in range(0, len(text), MASK_CHUNK))
    return "".join(mask_stream(pieces)).encode("utf-8", errors)


def _generated_name(kind: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", kind).upper() or "SECRET"
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def take_secrets(request: str, given: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The request with its secrets as placeholders, and every secret of the task by name.

    The given secrets' values are sealed first; then each value the detector of
    :mod:`context.secrets` finds in the request gets a name of its kind (``CREDENTIAL``, then
    ``CREDENTIAL_2``...; the same value twice, one name), stable for the same request.

    Args:
        request: The user's request, verbatim.
        given: Name -> value of the secrets given for the task.

    Returns:
        ``(sealed request, name -> value)``: the given secrets and those found in the request.

    Raises:
        InvalidInputError: A given name is not valid or a value is too short.
    """
    secrets = dict(given or {})
    for name, value in secrets.items():
        check_secret(name, value)
    with hold_secrets(secrets):
        text, _ = seal_secrets(request)
    by_value = {v: k for k, v in secrets.items()}
    found: dict[str, str] = {}
    for kind, value in secret_values(text):
        if value in by_value or in_placeholder(value, 0, len(value)) or len(value) < MIN_SECRET_CHARS:
            continue
        name = _generated_name(kind, set(secrets) | set(found))
        found[name] = value
        by_value[value] = name
    for name, value in sorted(found.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(value, placeholder(name))
    return text, {**secrets, **found}
