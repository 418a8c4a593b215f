"""The start of a secret whose end was cut off: a stream stopped mid-token.

:func:`context.secrets.mask_secrets` masks a whole secret by its shape. A command killed in the
middle of printing one leaves only its start, which no longer has that shape. Each token shape of
:data:`context.secrets.SECRET_PATTERNS` that starts with a fixed prefix has it here
(:data:`CUT_PREFIXES`, kept beside those patterns by a test); a cut text that ends in such a
prefix and a few characters of a token is masked from the prefix on.
"""

from __future__ import annotations

import re

from .secrets import MASK_FORMAT, SHAPE_START

__all__ = ["CUT_PREFIXES", "mask_cut_end"]

#: (kind of :data:`context.secrets.SECRET_PATTERNS`, the regex of the fixed start of its token).
CUT_PREFIXES: list[tuple[str, str]] = [
    ("aws_access_key_id", r"AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA"),
    ("github_token", r"gh[pousr]_|github_pat_"),
    ("anthropic_key", r"sk-ant-"),
    ("openai_key", r"sk-"),
    ("stripe_key", r"(?:sk|rk|pk)_(?:live|test)_"),
    ("slack_token", r"xox[abposre]-"),
    ("google_api_key", r"AIza"),
    ("jwt", r"eyJ"),
]

#: Characters of a token a cut end must hold after its prefix to be masked (fewer: a word that
#: merely starts so, e.g. ``sk-1``).
CUT_MIN_CHARS = 4

#: How far from the end a cut token may start (characters).
_TAIL = 4096

_CUT = re.compile(
    SHAPE_START + "(?:" + "|".join(p for _, p in CUT_PREFIXES) + r")[A-Za-z0-9_\-.]{" + str(CUT_MIN_CHARS) + r",}\Z"
)


def mask_cut_end(text: str) -> str:
    """``text`` with the start of a secret its end cut short masked (``[REDACTED:cut_secret]``).

    For a stream that was cut off (a command killed mid-line). Only a text that does not end with a
    newline can end in one.

    Args:
        text: The text as it was cut.

    Returns:
        ``text``, or with its last run of a cut secret's start (within its last 4,096 characters)
        masked.
    """
    if not text or text.endswith("\n"):
        return text
    m = _CUT.search(text, max(0, len(text) - _TAIL))
    return text if m is None else text[: m.start()] + MASK_FORMAT.format(kind="cut_secret")
