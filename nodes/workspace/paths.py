"""The path policy of the workspace tools: scopes, glob matching, resolving a path (symlinks
followed) or refusing it, write risk, and atomic writes.

Every path is resolved before use, symlinks followed (``os.path.realpath``), and must land
inside the workspace root and inside the task's ``file_scopes`` (globs relative to the root;
``**`` spans folders). Refused before resolving: absolute paths, ``~``, any ``..`` segment, NUL
and control characters, backslashes, percent-encoded dots/slashes, characters that Unicode NFKC
folds (look-alike dots and slashes). Never readable or writable: ``.taskctx/``; never writable:
``.git/``, files with more than one hard link, folders. Writes are atomic (temp file +
``os.replace``), so a crash leaves the old or the new file, never half of one. Every refusal is
a :class:`~nodes.permissions.PolicyError` whose message names the path and the rule.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..permissions import PolicyError

__all__ = [
    "HIGH_RISK_FILES",
    "atomic_write",
    "dir_fully_in_scope",
    "dir_may_hold_scope",
    "glob_match",
    "in_scope",
    "resolve",
    "file_sha256",
    "sha256_hex",
    "write_risk",
]

#: Writes to these are high risk (need approval): config, CI, build, secret, executable files.
HIGH_RISK_FILES = (
    "**/*.conf",
    "**/*.cfg",
    "**/*.ini",
    "**/*.toml",
    "**/*.yml",
    "**/*.yaml",
    "**/.env*",
    "**/*.env",
    "**/*.pem",
    "**/*.key",
    "**/Dockerfile",
    "**/Makefile",
    "**/*.sh",
    ".github/**",
    "**/setup.py",
    "**/conftest.py",
    "**/requirements*.txt",
    "**/.git*",
)
_PCT = re.compile(r"%(?:2e|2f|5c|00)", re.I)


# globs ----------------------------------------------------------------------------------
def _glob_re(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:[^/]+/)*", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def glob_match(rel: str, pattern: str) -> bool:
    """``rel`` (a workspace-relative posix path) matches ``pattern`` (``**`` spans folders)."""
    return bool(_glob_re(pattern.strip("/")).match(rel))


def in_scope(rel: str, scopes: Sequence[str]) -> bool:
    """``rel`` matches one of ``scopes`` (no scopes: everything is in scope)."""
    return not scopes or any(glob_match(rel, s) for s in scopes)


def dir_may_hold_scope(rel: str, scopes: Sequence[str]) -> bool:
    """A folder is listable when some scope can match something inside it."""
    if not scopes or rel == ".":
        return True
    parts = rel.split("/")
    for s in scopes:
        pat = s.strip("/").split("/")
        if in_scope(rel, [s]):
            return True
        ok = True
        for i, d in enumerate(parts):
            if i >= len(pat):
                ok = False
                break
            if pat[i] == "**":
                break
            if not fnmatchcase(d, pat[i]):
                ok = False
                break
        if ok:
            return True
    return False


def dir_fully_in_scope(rel: str, scopes: Sequence[str]) -> bool:
    """Everything inside the folder ``rel``, at any depth, is in scope."""
    if not scopes:
        return True
    base = "" if rel == "." else rel + "/"
    return in_scope(base + "zz_probe", scopes) and in_scope(base + "zz/zz/zz_probe.zz", scopes)


# resolving ------------------------------------------------------------------------------
def resolve(
    root: Path, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any"
) -> tuple[Path, str]:
    """The real path and workspace-relative posix path of ``path`` under the workspace ``root``
    (itself a real path), or ``PolicyError`` naming the rule it breaks (see module doc).
    ``kind``: ``file``, ``dir`` (scopes checked as a folder that may hold scoped files) or
    ``any`` (a folder when it is one); ``write``: also refuse ``.git/``, folders, hard links."""
    if not isinstance(path, str):
        raise PolicyError(f"path must be a string, got {type(path).__name__}")
    shown = repr(path[:120])
    _refuse_spelling(path, shown)
    full = root / (path or ".")
    real = Path(os.path.realpath(full))
    if real != root and root not in real.parents:
        raise PolicyError(f"path {shown} resolves outside the workspace (symlink)")
    rel = real.relative_to(root).as_posix() if real != root else "."
    if rel == ".taskctx" or rel.startswith(".taskctx/"):
        raise PolicyError(f"path {shown} is taskctx's own folder")
    if write and (rel == ".git" or rel.startswith(".git/")):
        raise PolicyError(f"path {shown} is inside .git (never written)")
    is_dir = real.is_dir()
    if kind == "dir" or (kind == "any" and is_dir):
        if not dir_may_hold_scope(rel, scopes):
            raise PolicyError(f"folder {rel} is outside the task's file scopes ({', '.join(scopes)})")
    elif not in_scope(rel, scopes):
        raise PolicyError(f"{rel} is outside the task's file scopes ({', '.join(scopes)})")
    if write:
        if is_dir:
            raise PolicyError(f"{rel} is a folder")
        if real.exists() and real.stat().st_nlink > 1:
            raise PolicyError(f"{rel} has several hard links (it may be a file outside the workspace)")
    return real, rel


def _refuse_spelling(path: str, shown: str) -> None:
    """Refusals read off the text of ``path`` before it is resolved."""
    if "\x00" in path:
        raise PolicyError(f"path {shown} holds a NUL byte")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise PolicyError(f"path {shown} holds control characters")
    if "\\" in path:
        raise PolicyError(f"path {shown} holds a backslash")
    if path.startswith("/"):
        raise PolicyError(f"path {shown} is absolute; use a path relative to the workspace root")
    if path.startswith("~"):
        raise PolicyError(f"path {shown} points into a home folder")
    if _PCT.search(path):
        raise PolicyError(f"path {shown} holds percent-encoded characters")
    if unicodedata.normalize("NFKC", path) != path:
        raise PolicyError(f"path {shown} holds look-alike Unicode characters")
    if ".." in path.split("/"):
        raise PolicyError(f"path {shown} climbs out with '..'")


def write_risk(rels: Sequence[str]) -> tuple[str, str]:
    """``(risk, reason)`` of writing the files ``rels``: ``high`` when one matches
    :data:`HIGH_RISK_FILES`, else ``medium``."""
    risky = [r for r in rels if any(glob_match(r, p) for p in HIGH_RISK_FILES)]
    if risky:
        return "high", f"writes {', '.join(risky)} (a config, CI, build, secret or executable file)"
    return "medium", f"writes {', '.join(rels)}"


# files ----------------------------------------------------------------------------------
def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``, 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 (64 hex) of the file ``path``'s bytes, ``""`` when it is not a readable file
    (the freshness marker of a file that is gone, :mod:`context.freshness`)."""
    try:
        return sha256_hex(path.read_bytes()) if path.is_file() else ""
    except OSError:
        return ""


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (folders created, mode kept) through a temp file and
    ``os.replace``: a crash leaves the old or the new file. ``OSError`` on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".taskctx-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
