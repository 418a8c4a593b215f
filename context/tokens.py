"""One token counter, taken from the environment: exact for OpenAI-family models, an upper-bound
estimate for the others.

A counter is a ``TokenCounter`` (``str -> int``, tokens). :func:`counter_for_model` picks it from a
``provider:model`` string:

* OpenAI-family models (``openai:...``, ``gpt-*``, ``o1``/``o3``/``o4``...): the exact
  tokenizer, ``o200k_base`` (GPT-4o and later) or ``cl100k_base`` (GPT-4, GPT-3.5), as
  tiktoken maps the model name (``tiktoken.encoding_name_for_model``); an OpenAI model tiktoken
  does not know gets ``o200k_base``.
* Any other provider (Anthropic, Google...): :func:`estimate_tokens`, no local tokenizer.
* No model (scripted and replay models, the bench): ``o200k_base``.

**Why tiktoken, offline.** tiktoken is OpenAI's own tokenizer (maintained with every model
release; langchain-openai depends on it), 4 MB installed. It downloads its encoding files on
first use, which fails without network, so the two files ship gzipped in ``context/encodings/``
and seed tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else its temp-dir default) before
``tiktoken.get_encoding``: tiktoken then checks them against the SHA-256 it publishes for each
file, exactly as after a download. (``bpe-openai`` embeds the same files, byte for byte, but is
one 0.1 release of a small vendor's binding and 75 MB installed.)

**The estimate is an upper bound by construction where it can be, measured where not.** It
splits text the way o200k's pre-tokenizer does and charges each piece at least what o200k can
spend on it: a letter run of n letters ``1 + n // 4`` (o200k: a common word is 1 token, a rare
consonant cluster 1 per 1-2 letters), a digit run ``ceil(n / 3)`` (o200k: groups of 3 digits,
exact), each other ASCII character 1 (punctuation merges only lower it), a run of spaces/tabs
``ceil(n / 4)``, a newline 1, a non-ASCII character 1 (CJK, kana, Hangul, accents: o200k spends
0.5-0.75 on natural text), a 4-byte character (emoji, rare ideographs) 3. ``taskctx tokens``
prints its ratio to o200k over the shared trajectories and CJK, Japanese, Korean and emoji text:
over its 611 texts the lowest ratio is 1.071 (never under), the highest 2.210 (a pytest
output), 1.705 over all of them (Chinese 1.52, Japanese 1.45, Korean 2.09, emoji 1.60). Text of rare ideographs (CJK Extension A/B, 2-4 o200k tokens each) is not bounded by it.
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
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "TokenCounter",
    "counter_for_model",
    "counter_name",
    "encoding_counter",
    "estimate_tokens",
]

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
    import tiktoken

    with _LOCK:
        _seed_tiktoken_cache(name)
        return tiktoken.get_encoding(name)


@cache
def encoding_counter(name: str = DEFAULT_ENCODING) -> TokenCounter:
    """The exact counter of a tiktoken encoding (``o200k_base`` or ``cl100k_base``): tokens of a
    text, special-token text (``<|endoftext|>``) counted as plain text. ``ValueError`` for
    another name (here, at once). The encoding itself (~0.5 s of CPU to load o200k) is loaded by
    the first count, not here: a graph is built, and a resume reaches its first step, without it."""
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
    """An upper-bound estimate of a text's tokens for models without a local tokenizer (module
    doc: the rule, and its measured ratio to o200k)."""
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
    """The counter for a ``provider:model`` string (or a bare model name); ``None`` (scripted and
    replay models): ``o200k_base``. See the module doc for the rule."""
    if not model:
        return encoding_counter(DEFAULT_ENCODING)
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    if provider in ("openai", "azure_openai") or (not provider and name.startswith(_OPENAI_PREFIXES)):
        import tiktoken

        try:
            enc = tiktoken.encoding_name_for_model(name)
        except KeyError:
            enc = DEFAULT_ENCODING
        return encoding_counter(enc if enc in ENCODINGS else DEFAULT_ENCODING)
    return estimate_tokens


def counter_name(count: TokenCounter) -> str:
    """A counter's name for manifests and reports: ``o200k_base``, ``cl100k_base``, ``estimate``
    (:func:`estimate_tokens`), ``approx`` (4 characters a token) or the function's name."""
    if count is estimate_tokens:
        return "estimate"
    name = getattr(count, "__name__", "") or type(count).__name__
    return {"approx_tokens": "approx"}.get(name, name)
