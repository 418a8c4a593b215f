"""Secret masking lives in :mod:`context.secrets` (the stores mask everything they write); this
module keeps the old import path working."""

from context.secrets import (
    DETECT_SECRETS_PLUGINS,
    MASK_FORMAT,
    SECRET_PATTERNS,
    Masked,
    looks_secret,
    mask_secrets,
)

__all__ = ["DETECT_SECRETS_PLUGINS", "MASK_FORMAT", "SECRET_PATTERNS", "Masked", "mask_secrets", "looks_secret"]
