"""A model of the nginx proxy in front of the app, read from proxy/nginx.conf.

It applies ``client_max_body_size`` the way nginx does: the innermost block that sets it wins
(location, then server, then http; nginx's default is 1m). A body over the limit gets 413 from
the proxy and never reaches the app. Sizes are a number with an optional k, m or g suffix.
"""

from __future__ import annotations

import re
from pathlib import Path

from .upload import handle_upload

CONF = Path(__file__).resolve().parent.parent / "proxy" / "nginx.conf"
DEFAULT_LIMIT = 1024 * 1024
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class ConfigError(Exception):
    """The config would make nginx refuse to start (``nginx -t`` fails)."""


def parse_size(value: str, where: str) -> int:
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", value)
    if not m:
        raise ConfigError(f'{where}: invalid value "{value}" in "client_max_body_size" (a number with k, m or g)')
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def load_limits(conf: Path = CONF) -> dict[str, int]:
    """``{block: limit}`` for every block that sets client_max_body_size (``location /x/``,
    ``server``, ``http``)."""
    limits: dict[str, int] = {}
    stack: list[str] = []
    for n, raw in enumerate(conf.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith("{"):
            stack.append(" ".join(line[:-1].split()))
        elif line == "}":
            stack.pop()
        elif line.startswith("client_max_body_size"):
            value = line[len("client_max_body_size"):].strip().rstrip(";").strip()
            limits[stack[-1] if stack else "main"] = parse_size(value, f"{conf.parent.name}/{conf.name}:{n}")
    return limits


def limit_for(path: str, limits: dict[str, int]) -> int:
    locations = [(k.split(" ", 1)[1], v) for k, v in limits.items() if k.startswith("location ")]
    matching = [(prefix, v) for prefix, v in locations if path.startswith(prefix)]
    if matching:
        return max(matching, key=lambda pv: len(pv[0]))[1]
    for block in ("server", "http", "main"):
        if block in limits:
            return limits[block]
    return DEFAULT_LIMIT


def send(path: str, size: int, conf: Path = CONF) -> int:
    """HTTP status of a POST of ``size`` bytes to ``path`` through the proxy."""
    if size > limit_for(path, load_limits(conf)):
        return 413
    return handle_upload(size)
