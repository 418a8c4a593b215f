"""The path policy of the workspace tools: scopes, resolving or refusing a path, write risk, atomic writes."""

from __future__ import annotations

import errno
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
    "clear_staging",
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
    """Whether ``rel`` matches ``pattern``.

    Args:
        rel: A workspace-relative posix path.
        pattern: A glob; ``**`` spans folders.

    Returns:
        True when it matches.
    """
    return bool(_glob_re(pattern.strip("/")).match(rel))


def in_scope(rel: str, scopes: Sequence[str]) -> bool:
    """Whether ``rel`` matches one of ``scopes``.

    Args:
        rel: A workspace-relative posix path.
        scopes: Globs (none: everything is in scope).

    Returns:
        True when it is in scope.
    """
    return not scopes or any(glob_match(rel, s) for s in scopes)


def dir_may_hold_scope(rel: str, scopes: Sequence[str]) -> bool:
    """Whether some scope can match something inside the folder ``rel`` (it is then listable).

    Args:
        rel: A workspace-relative folder.
        scopes: The task's file scopes.

    Returns:
        True when the folder may hold scoped files.
    """
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
    """Whether everything inside the folder ``rel``, at any depth, is in scope.

    Args:
        rel: A workspace-relative folder.
        scopes: The task's file scopes.

    Returns:
        True when every path under it is in scope.
    """
    if not scopes:
        return True
    base = "" if rel == "." else rel + "/"
    return in_scope(base + "zz_probe", scopes) and in_scope(base + "zz/zz/zz_probe.zz", scopes)


# resolving ------------------------------------------------------------------------------
def resolve(
    root: Path, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any"
) -> tuple[Path, str]:
    """The real path and workspace-relative posix path of ``path`` under ``root``, or a refusal.

    Refused before resolving: absolute paths, ``~``, any ``..``, NUL and control characters,
    backslashes, percent-encoded dots or slashes, characters NFKC folds (look-alikes). Then
    symlinks are followed and the path must land inside ``root`` and the scopes; ``.taskctx/`` is
    never touched.

    Args:
        root: The workspace (a real path).
        path: The path a call named.
        scopes: The task's file scopes.
        write: Also refuse ``.git/``, folders and files with more than one hard link.
        kind: ``file``, ``dir`` (scopes checked as a folder that may hold scoped files) or ``any``
            (a folder when it is one).

    Returns:
        ``(real path, relative path)``.

    Raises:
        PolicyError: The path breaks a rule (named in the message).
    """
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
    """The risk of writing the files ``rels``.

    Args:
        rels: Workspace-relative paths.

    Returns:
        ``("high", reason)`` when one matches :data:`HIGH_RISK_FILES` (config, CI, build, secret or
        executable files), else ``("medium", "")``.
    """
    risky = [r for r in rels if any(glob_match(r, p) for p in HIGH_RISK_FILES)]
    if risky:
        return "high", f"writes {', '.join(risky)} (a config, CI, build, secret or executable file)"
    return "medium", f"writes {', '.join(rels)}"


# files ----------------------------------------------------------------------------------
def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``.

    Args:
        data: Bytes.

    Returns:
        64 hex digits.
    """
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes: the freshness marker of a file.

    Args:
        path: The file.

    Returns:
        64 hex digits, or ``""`` when it is not a readable file (gone).
    """
    try:
        if not path.is_file():
            return ""
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()  # read in chunks, not whole
    except OSError:
        return ""


def atomic_write(path: Path, data: bytes, staging: Path | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file and ``os.replace``.

    A crash leaves the old or the new file, never half of one; folders are created and the
    file's mode is kept. With ``staging``, the temp file is made there (a folder of the same
    file system, e.g. ``<workspace>/.taskctx/staging``), so a kill before the rename leaves
    nothing beside the file (:func:`clear_staging` removes what it left); when the rename cannot
    cross to ``path``'s file system, the temp file is made beside ``path`` instead.

    Args:
        path: The file.
        data: Its new bytes.
        staging: Where the temp file is made; None: beside ``path``.

    Raises:
        OSError: The write failed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if staging is not None:
        staging.mkdir(parents=True, exist_ok=True)
        try:
            return _write_via(path, data, staging)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    _write_via(path, data, path.parent)


def _write_via(path: Path, data: bytes, folder: Path) -> None:
    """Write ``data`` to a temp file in ``folder``, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=".taskctx-", dir=folder)
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


#: The name of a temp file :func:`atomic_write` makes (``tempfile.mkstemp``'s eight characters).
_TEMP_NAME = re.compile(r"\.taskctx-[a-z0-9_]{8}")


def clear_staging(staging: Path, *, only_temp: bool = False) -> list[str]:
    """Remove the temp files an interrupted :func:`atomic_write` left in ``staging``.

    Call it only while no write is under way (on recovery: one writer per task).

    Args:
        staging: The staging folder, or (``only_temp``) the folder of a file a write fell back
            beside (its file system is not the staging folder's).
        only_temp: Remove only names exactly of the temp files' shape (``.taskctx-`` and eight
            characters), not other ``.taskctx-*`` files, as a user's folder may hold.

    Returns:
        The names removed, sorted.
    """
    removed = []
    names = sorted(staging.glob(".taskctx-*")) if staging.is_dir() and not staging.is_symlink() else []
    for f in (
        f for f in names if f.is_file() and not f.is_symlink() and (not only_temp or _TEMP_NAME.fullmatch(f.name))
    ):
        try:
            f.unlink()
            removed.append(f.name)
        except FileNotFoundError:
            pass
    return removed
