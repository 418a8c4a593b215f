"""Text that is not clean: where a Python ``str`` becomes bytes, and where bytes are shown.

A Python ``str`` may hold code points that UTF-8 cannot encode: lone UTF-16 surrogates
(``"\\ud835"``, half of a math-bold letter, as scraped text often holds). Every boundary of taskctx
where text becomes bytes goes through this module, so any ``str`` and any ``bytes`` are accepted:

* **Stored losslessly.** :func:`to_bytes` encodes with ``surrogatepass`` (a lone surrogate becomes
  its 3-byte form, WTF-8), so ``from_bytes(to_bytes(s)) == s`` for every ``str``; the artifact
  store holds those bytes. :func:`json_text` is ``json.dumps(..., ensure_ascii=False)`` with each
  lone surrogate written as its JSON escape (``\\ud835``): valid UTF-8 text that ``json.loads``
  reads back to the same ``str`` (the event log's payloads, the task registry, exports).
* **Shown with a replacement.** :func:`clean` replaces each lone surrogate by U+FFFD (what goes to
  a model, a terminal or an HTML page); :func:`shown` decodes bytes that are not UTF-8 the same way.
* **Shown escaped.** :func:`escape_controls` writes control characters and bidirectional
  overrides as ``\\x1b``, ``\\u202e``... (``inspect``, the report, approval prompts), so text
  cannot move a terminal's cursor or reorder what the user reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "clean",
    "clean_tree",
    "cut",
    "escape_controls",
    "from_bytes",
    "has_surrogates",
    "json_text",
    "shown",
    "to_bytes",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: C0/C1 controls except tab and newline, DEL, the Unicode bidi controls (LRE..RLO, LRI..PDI,
#: LRM, RLM, ALM), zero-width joiners used to hide text, and the line/paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\u061c\ufeff]")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (a code point UTF-8 cannot encode)."""
    return _SURROGATE.search(text) is not None


def to_bytes(text: str | bytes) -> bytes:
    """``text`` as UTF-8 bytes, lossless for any ``str``: a lone surrogate becomes its 3-byte
    ``surrogatepass`` form (``"\\ud835"`` -> ``b"\\xed\\xa0\\xb5"``). Bytes pass unchanged."""
    if isinstance(text, bytes | bytearray | memoryview):
        return bytes(text)
    return text.encode("utf-8", "surrogatepass")


def from_bytes(data: bytes) -> str:
    """The inverse of :func:`to_bytes` where possible: UTF-8 (with ``surrogatepass``); bytes that
    are not UTF-8 at all are replaced by U+FFFD."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


def cut(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters; else its first ``limit`` characters
    followed by ``… (N chars more)`` (N: the characters left out), so a cut text says it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} chars more)"


def clean(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD: encodable as UTF-8 everywhere."""
    return _SURROGATE.sub("\ufffd", text) if has_surrogates(text) else text


def clean_tree(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, scalars) with :func:`clean` applied to every
    string, keys included; returns ``obj`` itself when nothing needed replacing."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        out = {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in obj.items()}
        return obj if all(a is b for a, b in zip(obj.values(), out.values())) and out.keys() == obj.keys() else out
    if isinstance(obj, list):
        items = [clean_tree(v) for v in obj]
        return obj if all(a is b for a, b in zip(obj, items)) else items
    return obj


def shown(data: bytes | str) -> str:
    """Bytes or text as displayable text: not-UTF-8 bytes and lone surrogates become U+FFFD."""
    if isinstance(data, str):
        return clean(data)
    return data.decode("utf-8", "replace")


def json_text(obj: Any, **kw: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kw)`` whose output is always valid UTF-8 text: a
    lone surrogate is written as its JSON escape ``\\udXXX`` (``json.loads`` gives it back)."""
    text = json.dumps(obj, ensure_ascii=False, **kw)
    if not has_surrogates(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_controls(text: str) -> str:
    """``text`` for a terminal or a page: lone surrogates as U+FFFD, control characters (but tab
    and newline) and bidi overrides / zero-width characters written as ``\\xNN`` / ``\\uNNNN``."""

    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _CONTROL.sub(esc, clean(text))
