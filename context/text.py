"""Text at taskctx's boundaries: where a ``str`` becomes bytes, and where bytes are shown.

A Python ``str`` may hold lone UTF-16 surrogates, which UTF-8 cannot encode. It is stored
losslessly (:func:`to_bytes`, :func:`json_text`), shown with a replacement (:func:`clean`,
:func:`shown`) and, for a terminal or a page, with its control characters escaped
(:func:`escape_controls`).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "clean",
    "clean_tree",
    "counted",
    "cut",
    "escape_controls",
    "from_bytes",
    "has_surrogates",
    "json_text",
    "quote_name",
    "shown",
    "to_bytes",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: C0/C1 controls except tab and newline, DEL, the Unicode bidi controls (LRE..RLO, LRI..PDI,
#: LRM, RLM, ALM), zero-width joiners used to hide text, and the line/paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\u061c\ufeff]")


def has_surrogates(text: str) -> bool:
    """Whether a text holds a lone surrogate (a code point UTF-8 cannot encode).

    Args:
        text: Any text.

    Returns:
        True when it holds one.
    """
    return _SURROGATE.search(text) is not None


def to_bytes(text: str | bytes) -> bytes:
    r"""A text as UTF-8 bytes, lossless for any ``str``.

    Args:
        text: A ``str`` (a lone surrogate becomes its 3-byte ``surrogatepass`` form:
            ``"\ud835"`` -> ``b"\xed\xa0\xb5"``), or bytes (passed unchanged).

    Returns:
        The bytes.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        return bytes(text)
    return text.encode("utf-8", "surrogatepass")


def from_bytes(data: bytes) -> str:
    """The inverse of :func:`to_bytes` where possible.

    Args:
        data: The bytes.

    Returns:
        Their text, decoded as UTF-8 with ``surrogatepass``; bytes that are not UTF-8 at all are
        replaced by U+FFFD.
    """
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


def counted(n: int, noun: str) -> str:
    """A count and its noun, singular for one: ``1 executor step``, ``3 executor steps``.

    Args:
        n: The count.
        noun: The noun in the singular (its plural adds ``s``).

    Returns:
        ``"<n> <noun>"``, with ``s`` added to the noun unless ``n`` is 1.
    """
    return f"{n} {noun}" + ("" if n == 1 else "s")


def cut(text: str, limit: int) -> str:
    """Cut a text to a length, saying so.

    Args:
        text: Any text.
        limit: The most characters kept.

    Returns:
        ``text`` when it has at most ``limit`` characters; else its first ``limit`` characters
        followed by ``… (N chars more)`` (N: the characters left out).
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} chars more)"


def clean(text: str) -> str:
    """A text encodable as UTF-8 everywhere.

    Args:
        text: Any text.

    Returns:
        ``text`` with every lone surrogate replaced by U+FFFD.
    """
    return _SURROGATE.sub("\ufffd", text) if has_surrogates(text) else text


def clean_tree(obj: Any) -> Any:
    """Clean every string of a JSON-like value (keys included).

    Args:
        obj: Dicts, lists, strings, scalars.

    Returns:
        ``obj`` with :func:`clean` applied to every string; ``obj`` itself when nothing needed it.
    """
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
    """Bytes or text as displayable text.

    Args:
        data: Bytes or a ``str``.

    Returns:
        The text, with not-UTF-8 bytes and lone surrogates as U+FFFD.
    """
    if isinstance(data, str):
        return clean(data)
    return data.decode("utf-8", "replace")


def json_text(obj: Any, **kw: Any) -> str:
    r"""JSON text that is always valid UTF-8.

    Args:
        obj: A JSON-serialisable value.
        **kw: More arguments of ``json.dumps`` (e.g. ``sort_keys``).

    Returns:
        ``json.dumps(obj, ensure_ascii=False, **kw)``, a lone surrogate written as its JSON escape
        ``\udXXX`` (``json.loads`` gives it back).
    """
    text = json.dumps(obj, ensure_ascii=False, **kw)
    if not has_surrogates(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_controls(text: str) -> str:
    r"""A text safe for a terminal or a page (it cannot move the cursor or reorder what is read).

    Args:
        text: Any text.

    Returns:
        ``text`` with lone surrogates as U+FFFD, control characters (but tab and newline) and bidi
        overrides / zero-width characters written as ``\xNN`` / ``\uNNNN``.
    """

    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _CONTROL.sub(esc, clean(text))


#: A name shown as it is in a prompt: ASCII letters, digits and ``_./@+~=,:%-``, nothing that
#: starts a line, a heading, a list item or a tag.
_ORDINARY_NAME = re.compile(r"[A-Za-z0-9_./@+~=,:%-]+")


def quote_name(name: str) -> str:
    r"""A name from the workspace (a file name, path, branch, id) as a prompt shows it: never as text.

    An ordinary name (:data:`_ORDINARY_NAME`) is shown as it is, so prompts with ordinary names
    do not change; any other is a JSON string on one line: newlines, control and bidi characters
    and every non-ASCII character escaped (``\n``, ``\u202e``), ``<`` and ``>`` as ``\u003c`` and
    ``\u003e`` (no tag can close a quote), in double quotes.

    Args:
        name: The name.

    Returns:
        The name, or its quoted, escaped form.
    """
    if _ORDINARY_NAME.fullmatch(name):
        return name
    return json.dumps(clean(name), ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
