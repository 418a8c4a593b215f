"""One token counter per task: exact for OpenAI-family models, an upper-bound estimate for others.

A counter is a :data:`TokenCounter` (``str -> int``, tokens); :func:`counter_for_model` picks it
from a ``provider:model`` string. The exact counters are tiktoken's ``o200k_base`` and
``cl100k_base``, whose encoding files ship gzipped in ``context/encodings/`` (checked against
their SHA-256), so counting never downloads.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "COUNT_CACHE",
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "TokenCounter",
    "counter_for_model",
    "counter_name",
    "encoding_counter",
    "estimate_tokens",
]

#: A token counter: a text's tokens.
TokenCounter = Callable[[str], int]

DEFAULT_ENCODING = "o200k_base"
#: encoding name -> (the URL tiktoken fetches it from: its cache key, the SHA-256 tiktoken checks)
ENCODINGS = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
_SHIPPED = Path(__file__).with_name("encodings")
#: texts whose exact count each counter remembers (a renderer counts the same blocks every call)
COUNT_CACHE = 8192
_LOCK = threading.Lock()


def _seed_tiktoken_cache(name: str) -> None:
    """Put the shipped encoding file where tiktoken's ``read_file_cached`` looks for it."""
    url, sha = ENCODINGS[name]
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None or cache_dir == "":
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if os.path.exists(path):
        return
    data = gzip.decompress((_SHIPPED / f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != sha:  # pragma: no cover - a damaged install
        raise ValueError(f"context/encodings/{name}.tiktoken.gz is damaged (SHA-256 mismatch); reinstall taskctx")
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@cache
def _encoding(name: str) -> Any:
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}: use one of {', '.join(ENCODINGS)}")
    import tiktoken  # (here: importing it and loading an encoding costs start-up time)

    with _LOCK:
        _seed_tiktoken_cache(name)
        return tiktoken.get_encoding(name)


@cache
def encoding_counter(name: str = DEFAULT_ENCODING) -> TokenCounter:
    """The exact counter of a tiktoken encoding.

    The encoding itself is loaded by the first count, not here: a graph is built, and a resume
    reaches its first step, without it.

    Args:
        name: ``o200k_base`` or ``cl100k_base``.

    Returns:
        The counter (tokens of a text; special-token text such as ``<|endoftext|>`` counted as
        plain text), caching the counts of recent texts.

    Raises:
        ValueError: Another name (here, at once).
    """
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}: use one of {', '.join(ENCODINGS)}")

    def count(text: str) -> int:
        return len(_encoding(name).encode_ordinary(text))  # (_encoding is cached: loaded once)

    count.__name__ = name
    count.__qualname__ = name
    cached: TokenCounter = lru_cache(maxsize=COUNT_CACHE)(count)
    return cached


_PIECES = re.compile(r" ?([A-Za-z]+)|([0-9]+)|([ \t]+)|(\n)|([\x00-\x7f])|([^\x00-\x7f])")


def estimate_tokens(text: str) -> int:
    """An upper-bound estimate of a text's tokens, for models without a local tokenizer.

    The text is split the way o200k's pre-tokenizer splits it and each piece charged at least
    what o200k can spend on it: a letter run of n letters ``1 + n // 4``, a digit run
    ``ceil(n / 3)``, each other ASCII character 1, a run of spaces or tabs ``ceil(n / 4)``, a
    newline 1, a non-ASCII character 1, a 4-byte character (emoji, rare ideographs) 3.

    Args:
        text: Any text.

    Returns:
        The estimate, in tokens.
    """
    n = 0
    for letters, digits, blanks, newline, ascii_other, other in _PIECES.findall(text):
        if letters:
            n += 1 + len(letters) // 4
        elif digits:
            n += -(-len(digits) // 3)
        elif blanks:
            n += -(-len(blanks) // 4)
        elif newline or ascii_other:
            n += 1
        else:
            n += 3 if ord(other) > 0xFFFF else 1
    return n


_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "davinci", "babbage")


def counter_for_model(model: str | None) -> TokenCounter:
    """The counter for a model.

    OpenAI-family models (``openai:...``, ``gpt-*``, ``o1``/``o3``/``o4``...) get their exact
    tokenizer as tiktoken maps the name (``o200k_base`` for one it does not know); any other
    provider gets :func:`estimate_tokens`.

    Args:
        model: A ``provider:model`` string or a bare model name; ``None`` (scripted and replay
            models, the bench) gets ``o200k_base``.

    Returns:
        The counter.
    """
    if not model:
        return encoding_counter(DEFAULT_ENCODING)
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    if provider in ("openai", "azure_openai") or (not provider and name.startswith(_OPENAI_PREFIXES)):
        import tiktoken  # (here: only an OpenAI model needs it)

        try:
            enc = tiktoken.encoding_name_for_model(name)
        except KeyError:
            enc = DEFAULT_ENCODING
        return encoding_counter(enc if enc in ENCODINGS else DEFAULT_ENCODING)
    return estimate_tokens


def counter_name(count: TokenCounter) -> str:
    """A counter's name for manifests and reports.

    Args:
        count: The counter.

    Returns:
        ``o200k_base``, ``cl100k_base``, ``estimate`` (:func:`estimate_tokens`), ``approx`` (4
        characters a token) or the function's name.
    """
    if count is estimate_tokens:
        return "estimate"
    name = getattr(count, "__name__", "") or type(count).__name__
    return {"approx_tokens": "approx"}.get(name, name)
