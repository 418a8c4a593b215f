"""Workspace tools: a ToolExecutor over one folder (``taskctx run --workspace DIR``, the demo).

Tools: ``list_dir``, ``read_file`` (line ranges), ``grep`` (regex, path glob), ``write_file``,
``apply_patch`` (unified diff), ``run_command`` (argv list, no shell, timeout), and
``search_history`` (offered here, answered by the tool node like ``read_artifact``, which the
executor node offers: both read the task's own stores).

**Paths.** Every path is resolved before use, symlinks followed (``os.path.realpath``), and must
land inside the workspace root and inside the task's ``file_scopes`` (globs relative to the
root; ``**`` spans folders). Refused before resolving: absolute paths, ``~``, any ``..``
segment, NUL and control characters, backslashes, percent-encoded dots/slashes, characters that
Unicode NFKC folds (look-alike dots and slashes). Never readable or writable: ``.taskctx/``;
never writable: ``.git/``, files with more than one hard link, folders. Writes are atomic
(temp file + ``os.replace``), so a crash leaves the old or the new file, never half of one.

**Commands.** ``run_command`` takes an argv list and runs it without a shell, in the workspace
root, with a small environment (no API keys of the parent process). Only listed programs run
(:data:`DEFAULT_PROGRAMS`); a program is a bare name (no ``/``), never a shell or a launcher
(``bash``, ``sh``, ``env``, ``xargs``, ``sudo``...), never ``NAME=value`` (env smuggling).
Arguments may not hold shell syntax (``;``, ``&&``, ``||``, ``|``, backticks, ``$(``, ``${``,
``$VAR``, ``<``, ``>``, newlines): without a shell it would be inert, but it signals an attempt
and some programs hand arguments to a shell. ``python`` runs as ``python -m
pytest|unittest|py_compile`` (risk medium) or ``python file.py`` in scope (high); never ``-c``.
``git`` runs read-only subcommands only, with no options before the subcommand (``-c`` can run
commands). Path-like arguments go through the path rules. The scopes limit what the tools read
and which paths a command may name; they are not an OS sandbox for the code a command runs.

**Side-effect-safe resume.** :meth:`WorkspaceTools.recover` checks an interrupted call against
the workspace: a ``write_file`` whose file already holds the intended bytes (sha256) is done; a
patch already applied is done, one that still applies is retried, anything else asks the user;
``run_command`` writes a receipt (``started`` before it spawns, ``finished`` with its output
after) keyed by the call id in ``receipts_dir``, so a finished command is never run again and a
command cut off mid-run asks for approval. Children get ``PR_SET_PDEATHSIG`` (Linux) so they
die with a killed parent.

Risk: reads are ``low``; writes ``medium``, ``high`` for config, CI, build, secret or executable
files (:data:`HIGH_RISK_FILES`); commands per program (see above).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .permissions import PolicyError
from .tools import SEARCH_HISTORY_SCHEMA, ToolOutcome, function_schema

__all__ = [
    "DEFAULT_PROGRAMS",
    "HIGH_RISK_FILES",
    "PatchError",
    "Recovery",
    "SIDE_EFFECT_TOOLS",
    "WorkspaceTools",
    "apply_unified_diff",
    "glob_match",
    "parse_unified_diff",
]

SIDE_EFFECT_TOOLS = frozenset({"write_file", "apply_patch", "run_command"})
#: Programs ``run_command`` may start (bare names).
DEFAULT_PROGRAMS = ("ls", "cat", "head", "tail", "wc", "grep", "diff", "git", "python", "python3", "pytest", "echo", "pwd")
#: Never allowed, whatever the list says: shells, launchers, interpreters, network tools.
FORBIDDEN_PROGRAMS = frozenset({
    "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox", "env", "sudo", "su", "doas", "xargs",
    "nohup", "timeout", "nice", "ionice", "stdbuf", "setsid", "chroot", "strace", "script", "expect", "eval",
    "exec", "source", "perl", "ruby", "node", "php", "lua", "awk", "gawk", "sed", "find", "make", "ssh", "scp",
    "curl", "wget", "nc", "ncat", "socat", "python2", "pip", "pip3", "osascript", "powershell", "pwsh", "cmd",
})
LOW_RISK_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "diff", "echo", "pwd", "git"})
GIT_READ_ONLY = frozenset({"status", "diff", "log", "show", "ls-files", "rev-parse", "blame"})
GIT_FORBIDDEN_ARGS = ("--output", "--ext-diff", "--textconv", "--exec", "--upload-pack", "--receive-pack",
                      "--open-files-in-pager", "--config-env")
PYTHON_MODULES = frozenset({"pytest", "unittest", "py_compile"})
#: Writes to these are high risk (need approval): config, CI, build, secret, executable files.
HIGH_RISK_FILES = ("**/*.conf", "**/*.cfg", "**/*.ini", "**/*.toml", "**/*.yml", "**/*.yaml", "**/.env*",
                   "**/*.env", "**/*.pem", "**/*.key", "**/Dockerfile", "**/Makefile", "**/*.sh", ".github/**",
                   "**/setup.py", "**/conftest.py", "**/requirements*.txt", "**/.git*")
_SHELL_SYNTAX = re.compile(r";|&&|\|\||\||`|\$\(|\$\{|\$[A-Za-z_]|[<>]|\n|\r|&\s*$")
_PCT = re.compile(r"%(?:2e|2f|5c|00)", re.I)
MAX_READ_BYTES = 2_000_000
MAX_TIMEOUT = 600


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


def _in_scope(rel: str, scopes: Sequence[str]) -> bool:
    return not scopes or any(glob_match(rel, s) for s in scopes)


def _dir_may_hold_scope(rel: str, scopes: Sequence[str]) -> bool:
    """A folder is listable when some scope can match something inside it."""
    if not scopes or rel == ".":
        return True
    parts = rel.split("/")
    for s in scopes:
        pat = s.strip("/").split("/")
        if _in_scope(rel, [s]):
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


def _dir_fully_in_scope(rel: str, scopes: Sequence[str]) -> bool:
    if not scopes:
        return True
    base = "" if rel == "." else rel + "/"
    return _in_scope(base + "zz_probe", scopes) and _in_scope(base + "zz/zz/zz_probe.zz", scopes)


# unified diffs --------------------------------------------------------------------------
class PatchError(Exception):
    pass


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[tuple[str, str]] = field(default_factory=list)
    no_eol_new: bool = False


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


def _strip_prefix(p: str) -> str | None:
    p = p.split("\t")[0].strip()
    if p == "/dev/null":
        return None
    if p.startswith(("a/", "b/")):
        return p[2:]
    return p


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_unified_diff(text: str) -> list[FilePatch]:
    """Parse a unified diff (``diff -u`` / ``git diff``) into per-file hunks."""
    lines = text.splitlines()
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            fp = FilePatch(_strip_prefix(ln[4:]), _strip_prefix(lines[i + 1][4:]))
            files.append(fp)
            i += 2
            while i < len(lines) and lines[i].startswith("@@"):
                m = _HUNK.match(lines[i])
                if not m:
                    raise PatchError(f"bad hunk header: {lines[i]!r}")
                h = Hunk(int(m.group(1)), int(m.group(2) or 1), int(m.group(3)), int(m.group(4) or 1))
                i += 1
                old_n = new_n = 0
                while i < len(lines) and (old_n < h.old_len or new_n < h.new_len or lines[i].startswith("\\")):
                    body = lines[i]
                    if body.startswith("\\"):
                        if h.lines and h.lines[-1][0] in " +":
                            h.no_eol_new = True
                        i += 1
                        continue
                    tag, rest = (body[0], body[1:]) if body else (" ", "")
                    if tag not in " -+":
                        raise PatchError(f"bad hunk line {i + 1}: {body!r}")
                    h.lines.append((tag, rest))
                    old_n += tag in " -"
                    new_n += tag in " +"
                    i += 1
                fp.hunks.append(h)
            continue
        i += 1
    if not files:
        raise PatchError("no file headers (--- a/path / +++ b/path) found in the patch")
    return files


def _find(lines: list[str], block: list[str], guess: int) -> int | None:
    if not block:
        return min(max(guess, 0), len(lines))
    n = len(block)
    for d in range(0, len(lines) + 1):
        for pos in (guess - d, guess + d) if d else (guess,):
            if 0 <= pos <= len(lines) - n and lines[pos : pos + n] == block:
                return pos
    return None


def apply_unified_diff(content: str | None, fp: FilePatch, reverse: bool = False) -> str:
    """Apply ``fp`` to ``content`` (None: a new file); ``reverse`` un-applies. PatchError on mismatch."""
    text = content or ""
    trailing = text.endswith("\n") or content is None
    lines = text.split("\n")
    if text.endswith("\n") or text == "":
        lines = lines[:-1] if lines else []
    offset = 0
    for h in fp.hunks:
        old = [t for tag, t in h.lines if tag in (" +" if reverse else " -")]
        new = [t for tag, t in h.lines if tag in (" -" if reverse else " +")]
        start = (h.new_start if reverse else h.old_start)
        span = (h.new_len if reverse else h.old_len)
        guess = (start if span == 0 else start - 1) + offset
        pos = _find(lines, old, guess)
        if pos is None:
            raise PatchError(f"hunk @@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@ does not match {fp.path}")
        lines[pos : pos + len(old)] = new
        offset += len(new) - len(old)
        if h.no_eol_new and not reverse:
            trailing = False
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if trailing else "")


# the executor -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Recovery:
    """What :meth:`WorkspaceTools.recover` found: ``done`` (with the outcome to record),
    ``retry`` (safe to run now) or ``ask`` (needs the user's approval; ``note`` says why)."""

    state: str
    note: str = ""
    outcome: ToolOutcome | None = None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
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


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


_S = {"type": "string"}
_I = {"type": "integer"}


class WorkspaceTools:
    """The workspace ToolExecutor (see module doc).

    ``root``: the workspace folder; ``programs``: bare program names ``run_command`` may start;
    ``timeout``: default seconds per command; ``receipts_dir``: where command receipts live
    (default ``<root>/.taskctx/receipts``; the CLI uses a folder per task beside the database).
    ``strict_resolution``: an error is resolved only by a later success of the same tool with
    the same arguments (the failing test passing), not by any later success of its step.
    ``accepts_scopes``: :meth:`execute` takes the task's ``file_scopes`` as a fourth argument
    (the tool node passes them; see :class:`nodes.tools.ToolExecutor`).
    """

    strict_resolution = True
    accepts_scopes = True

    def __init__(self, root: str | Path, *, programs: Sequence[str] = DEFAULT_PROGRAMS, timeout: int = 120,
                 receipts_dir: str | Path | None = None):
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise FileNotFoundError(f"workspace {root} is not a folder")
        self.root = real
        self.programs = frozenset(p for p in programs if p not in FORBIDDEN_PROGRAMS)
        self.timeout = timeout
        self.receipts_dir = Path(receipts_dir) if receipts_dir else real / ".taskctx" / "receipts"

    # protocol ---------------------------------------------------------------------------
    def schemas(self) -> list[dict[str, Any]]:
        return [
            function_schema("list_dir", "List a folder of the workspace (paths relative to its root).",
                            {"path": _S, "depth": _I}),
            function_schema("read_file", "Read a text file; optional 1-based inclusive line range.",
                            {"path": _S, "start_line": _I, "end_line": _I}, ["path"]),
            function_schema("grep", "Search files for a Python regex; optional folder and file glob (e.g. *.py).",
                            {"pattern": _S, "path": _S, "glob": _S}, ["pattern"]),
            function_schema("write_file", "Write (create or replace) a text file.", {"path": _S, "content": _S},
                            ["path", "content"]),
            function_schema("apply_patch", "Apply a unified diff (--- a/path, +++ b/path, @@ hunks).",
                            {"patch": _S}, ["patch"]),
            function_schema("run_command", "Run a program with an argv list (no shell), in the workspace root.",
                            {"argv": {"type": "array", "items": _S}, "timeout": _I}, ["argv"]),
            SEARCH_HISTORY_SCHEMA,  # read_artifact is offered by the executor node itself
        ]

    def has_side_effects(self, tool: str) -> bool:
        return tool in SIDE_EFFECT_TOOLS

    # paths ------------------------------------------------------------------------------
    def resolve(self, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any") -> tuple[Path, str]:
        """The real path and workspace-relative path of ``path``, or ``PolicyError``."""
        if not isinstance(path, str):
            raise PolicyError(f"path must be a string, got {type(path).__name__}")
        shown = repr(path[:120])
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
        full = self.root / (path or ".")
        real = Path(os.path.realpath(full))
        if real != self.root and self.root not in real.parents:
            raise PolicyError(f"path {shown} resolves outside the workspace (symlink)")
        rel = real.relative_to(self.root).as_posix() if real != self.root else "."
        if rel == ".taskctx" or rel.startswith(".taskctx/"):
            raise PolicyError(f"path {shown} is taskctx's own folder")
        if write and (rel == ".git" or rel.startswith(".git/")):
            raise PolicyError(f"path {shown} is inside .git (never written)")
        is_dir = real.is_dir()
        if kind == "dir" or (kind == "any" and is_dir):
            if not _dir_may_hold_scope(rel, scopes):
                raise PolicyError(f"folder {rel} is outside the task's file scopes ({', '.join(scopes)})")
        elif not _in_scope(rel, scopes):
            raise PolicyError(f"{rel} is outside the task's file scopes ({', '.join(scopes)})")
        if write:
            if is_dir:
                raise PolicyError(f"{rel} is a folder")
            if real.exists() and real.stat().st_nlink > 1:
                raise PolicyError(f"{rel} has several hard links (it may be a file outside the workspace)")
        return real, rel

    # policy -----------------------------------------------------------------------------
    def _write_risk(self, rels: Sequence[str]) -> tuple[str, str]:
        risky = [r for r in rels if any(glob_match(r, p) for p in HIGH_RISK_FILES)]
        if risky:
            return "high", f"writes {', '.join(risky)} (a config, CI, build, secret or executable file)"
        return "medium", f"writes {', '.join(rels)}"

    def command_policy(self, argv: Any, scopes: Sequence[str] = ()) -> tuple[list[str], str, str]:
        """``(argv to exec, risk, reason)`` for a command, or ``PolicyError``."""
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise PolicyError("argv must be a non-empty list of strings (commands run without a shell)")
        prog, args = argv[0], argv[1:]
        for a in argv:
            if "\x00" in a:
                raise PolicyError("an argument holds a NUL byte")
            if _SHELL_SYNTAX.search(a):
                raise PolicyError(f"argument {a[:80]!r} holds shell syntax (commands run without a shell)")
        if "=" in prog:
            raise PolicyError(f"{prog[:80]!r} sets an environment variable; the environment is fixed")
        if "/" in prog or not prog:
            raise PolicyError(f"program {prog[:80]!r} must be a bare name from the allowed list")
        if prog in FORBIDDEN_PROGRAMS:
            raise PolicyError(f"{prog} is a shell, launcher or interpreter that is never run")
        if prog not in self.programs:
            raise PolicyError(f"{prog} is not an allowed program ({', '.join(sorted(self.programs))})")
        risk, reason = ("low", f"runs {prog}") if prog in LOW_RISK_PROGRAMS else ("medium", f"runs {prog}")
        if prog in ("python", "python3"):
            risk, reason = self._python_policy(args, scopes)
        elif prog == "git":
            sub = args[0] if args else ""
            if sub.startswith("-"):
                raise PolicyError("git options before the subcommand are refused (-c, -C, --git-dir can run code)")
            if sub not in GIT_READ_ONLY:
                raise PolicyError(f"git {sub or '(none)'} is not a read-only git subcommand ({', '.join(sorted(GIT_READ_ONLY))})")
            if any(a.startswith(GIT_FORBIDDEN_ARGS) for a in args):
                raise PolicyError("git option that writes files or runs programs is refused")
        elif prog == "pytest":
            if "-p" in args or any(a.startswith("-p") and len(a) > 2 and not a.startswith("--") for a in args):
                raise PolicyError("pytest -p (loading plugins) is refused")
        self._check_path_args(args, scopes)
        exe = sys.executable if prog in ("python", "python3") else (
            [sys.executable, "-m", "pytest"] if prog == "pytest" else shutil.which(prog))
        if exe is None:
            raise PolicyError(f"{prog} is not installed")
        full = [*exe, *args] if isinstance(exe, list) else [exe, *args]
        return full, risk, reason

    def _python_policy(self, args: list[str], scopes: Sequence[str]) -> tuple[str, str]:
        i = 0
        while i < len(args) and args[i] in ("-B", "-u", "-q", "-I", "-s", "-E"):
            i += 1
        if i >= len(args):
            raise PolicyError("python without a module or script (interactive) is refused")
        a = args[i]
        if a.startswith("-c") or a == "-":
            raise PolicyError("python -c (inline code) is refused; write a file or use -m pytest|unittest")
        if a == "-m":
            mod = args[i + 1] if i + 1 < len(args) else ""
            if mod not in PYTHON_MODULES:
                raise PolicyError(f"python -m {mod or '(none)'} is not allowed (allowed: {', '.join(sorted(PYTHON_MODULES))})")
            return "medium", f"runs python -m {mod} (executes workspace code)"
        if a.startswith("-"):
            raise PolicyError(f"python option {a!r} is refused")
        _, rel = self.resolve(a, scopes, kind="file")
        return "high", f"runs the workspace script {rel}"

    def _check_path_args(self, args: list[str], scopes: Sequence[str]) -> None:
        for a in args:
            vals = [a.split("=", 1)[1]] if a.startswith("-") and "=" in a else ([] if a.startswith("-") else [a])
            for v in vals:
                if not v:
                    continue
                if v.startswith(("/", "~")) or ".." in v.split("/") or "\\" in v:
                    raise PolicyError(f"argument {v[:80]!r} names a path outside the workspace")
                if os.path.lexists(self.root / v):
                    real, rel = self.resolve(v, (), kind="any")
                    if real.is_dir():
                        if not _dir_fully_in_scope(rel, scopes):
                            raise PolicyError(f"argument {v!r} is a folder not wholly inside the file scopes")
                    elif not _in_scope(rel, scopes):
                        raise PolicyError(f"argument {v!r} is outside the task's file scopes ({', '.join(scopes)})")

    def check(self, tool: str, args: dict[str, Any], scopes: Sequence[str] = ()) -> tuple[str, str, tuple[str, ...]]:
        """``(risk, reason, paths)`` for a call, or ``PolicyError`` (used by :func:`nodes.permissions.assess`)."""
        if tool in ("read_artifact", "search_history"):
            return "low", "", ()
        if tool == "list_dir":
            _, rel = self.resolve(args.get("path", ".") or ".", scopes, kind="dir")
            return "low", "", (rel,)
        if tool == "read_file":
            _, rel = self.resolve(args.get("path"), scopes, kind="file")
            return "low", "", (rel,)
        if tool == "grep":
            _, rel = self.resolve(args.get("path", ".") or ".", scopes)
            try:
                re.compile(str(args.get("pattern", "")))
            except re.error as exc:
                raise PolicyError(f"bad regex: {exc}") from exc
            return "low", "", (rel,)
        if tool == "write_file":
            if not isinstance(args.get("content"), str):
                raise PolicyError("write_file needs content as a string")
            _, rel = self.resolve(args.get("path"), scopes, write=True, kind="file")
            risk, reason = self._write_risk([rel])
            return risk, reason, (rel,)
        if tool == "apply_patch":
            try:
                files = parse_unified_diff(str(args.get("patch", "")))
            except PatchError as exc:
                raise PolicyError(f"not a unified diff: {exc}") from exc
            rels = []
            for fp in files:
                if fp.new_path is None:
                    raise PolicyError(f"patch deletes {fp.old_path}; deleting files is not supported")
                if fp.old_path is not None and fp.old_path != fp.new_path:
                    raise PolicyError(f"patch renames {fp.old_path} to {fp.new_path}; renaming is not supported")
                for p in {fp.old_path, fp.new_path} - {None}:
                    rels.append(self.resolve(p, scopes, write=True, kind="file")[1])
            rels = list(dict.fromkeys(rels))
            risk, reason = self._write_risk(rels)
            return risk, reason, tuple(rels)
        if tool == "run_command":
            _, risk, reason = self.command_policy(args.get("argv"), scopes)
            t = args.get("timeout")
            if t is not None and (not isinstance(t, int) or not 0 < t <= MAX_TIMEOUT):
                raise PolicyError(f"timeout must be 1..{MAX_TIMEOUT} seconds")
            return risk, reason, ()
        raise PolicyError(f"{tool} is not a workspace tool")

    # execution --------------------------------------------------------------------------
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> ToolOutcome:
        """Run one call. Policy is checked again here (defense in depth); a refusal is an error outcome."""
        try:
            self.check(tool, arguments, scopes)
            fn = getattr(self, f"_t_{tool}", None)
            if fn is None:
                return ToolOutcome("error", f"unknown tool {tool!r}")
            return fn(call_id, arguments, scopes)
        except PolicyError as exc:
            return ToolOutcome("error", f"refused: {exc}")
        except PatchError as exc:
            return ToolOutcome("error", f"error: patch does not apply: {exc}")
        except OSError as exc:
            return ToolOutcome("error", f"error: {exc.strerror or exc}")

    def _t_list_dir(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path", ".") or ".", scopes, kind="dir")
        depth = max(1, min(int(a.get("depth") or 1), 4))
        out: list[str] = []

        def walk(d: Path, level: int) -> None:
            for entry in sorted(d.iterdir(), key=lambda p: p.name):
                r = entry.relative_to(self.root).as_posix()
                if r.split("/")[0] in (".git", ".taskctx"):
                    continue
                if entry.is_symlink():
                    out.append(f"{r}@")
                elif entry.is_dir():
                    if _dir_may_hold_scope(r, scopes):
                        out.append(f"{r}/")
                        if level < depth:
                            walk(entry, level + 1)
                elif _in_scope(r, scopes):
                    out.append(r)

        walk(real, 1)
        return ToolOutcome("ok", "\n".join(out) + "\n" if out else "(empty)\n", "other", rel)

    def _t_read_file(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path"), scopes, kind="file")
        if not real.is_file():
            return ToolOutcome("error", f"error: {rel}: No such file", "file_read", rel)
        if real.stat().st_size > MAX_READ_BYTES:
            return ToolOutcome("error", f"error: {rel} is larger than {MAX_READ_BYTES} bytes; read a line range with grep first")
        data = real.read_bytes()
        if b"\x00" in data[:8192]:
            return ToolOutcome("error", f"error: {rel} is a binary file", "file_read", rel)
        text = data.decode("utf-8", errors="replace")
        s, e = a.get("start_line"), a.get("end_line")
        if s is not None or e is not None:
            lines = text.splitlines(keepends=True)
            s = max(1, int(s or 1))
            e = min(len(lines), int(e or len(lines)))
            text = "".join(lines[s - 1 : e])
        return ToolOutcome("ok", text, "file_read", rel)

    def _t_grep(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path", ".") or ".", scopes)
        rx = re.compile(str(a.get("pattern", "")))
        glob = a.get("glob")
        hits: list[str] = []
        files = [real] if real.is_file() else []
        if real.is_dir():
            for d, dirs, names in os.walk(real, followlinks=False):
                dirs[:] = sorted(x for x in dirs if x not in (".git", ".taskctx", "__pycache__"))
                files += [Path(d) / n for n in sorted(names)]
        for f in files:
            if f.is_symlink() or not f.is_file():
                continue
            r = f.relative_to(self.root).as_posix()
            if not _in_scope(r, scopes):
                continue
            if glob and not (glob_match(r, glob) if "/" in glob else fnmatchcase(f.name, glob)):
                continue
            try:
                data = f.read_bytes()[:MAX_READ_BYTES]
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
                if rx.search(line[:2000]):
                    hits.append(f"{r}:{n}: {line[:300]}")
                    if len(hits) >= 500:
                        break
        return ToolOutcome("ok", "\n".join(hits) + "\n" if hits else "(no matches)\n", "search", rel)

    def _t_write_file(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path"), scopes, write=True, kind="file")
        data = str(a["content"]).encode("utf-8")
        _atomic_write(real, data)
        return ToolOutcome("ok", f"wrote {rel}: {len(data)} bytes, sha256 {_sha(data)[:12]}", "command", rel, rel)

    def _patch_plan(self, a: dict[str, Any], scopes: Sequence[str]) -> list[tuple[Path, str, FilePatch, str | None]]:
        out = []
        for fp in parse_unified_diff(str(a.get("patch", ""))):
            real, rel = self.resolve(fp.new_path, scopes, write=True, kind="file")
            cur = real.read_text(encoding="utf-8") if real.is_file() else None
            out.append((real, rel, fp, cur))
        return out

    def _t_apply_patch(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        plan = self._patch_plan(a, scopes)
        results = []
        for real, rel, fp, cur in plan:
            if fp.old_path is not None and cur is None:
                raise PatchError(f"{rel} does not exist")
            if fp.old_path is None and cur is not None:
                raise PatchError(f"{rel} already exists (the patch creates it)")
            results.append((real, rel, apply_unified_diff(cur, fp), len(fp.hunks)))
        for real, _, text, _ in results:  # all hunks checked before anything is written
            _atomic_write(real, text.encode("utf-8"))
        desc = ", ".join(f"{rel} ({n} hunk{'s' if n != 1 else ''})" for _, rel, _, n in results)
        rels = tuple(rel for _, rel, _, _ in results)
        return ToolOutcome("ok", f"patched {desc}", "command", rels[0], rels[0], rels)

    def _receipt(self, call_id: str) -> Path:
        return self.receipts_dir / f"{_sha(call_id.encode())[:24]}.json"

    def _t_run_command(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        argv, _, _ = self.command_policy(a.get("argv"), scopes)
        timeout = int(a.get("timeout") or self.timeout)
        receipt = self._receipt(call_id)
        receipt.parent.mkdir(parents=True, exist_ok=True)
        shown = " ".join(a["argv"])
        _atomic_write(receipt, json.dumps({"call_id": call_id, "argv": a["argv"], "status": "started"}).encode())
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.receipts_dir), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "NO_COLOR": "1", "GIT_TERMINAL_PROMPT": "0",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat", "PAGER": "cat", "TERM": "dumb"}
        try:
            proc = subprocess.run(argv, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout, preexec_fn=_pdeathsig,
                                  start_new_session=True)
            out, rc = proc.stdout.decode("utf-8", errors="replace"), proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode("utf-8", errors="replace") + f"\nerror: timed out after {timeout}s\n"
            rc = -9
        text = f"$ {shown}\n{out}" + ("" if out.endswith("\n") or not out else "\n") + f"[exit code {rc}]\n"
        _atomic_write(receipt, json.dumps({"call_id": call_id, "argv": a["argv"], "status": "finished",
                                           "returncode": rc, "output": text}).encode())
        return ToolOutcome("ok" if rc == 0 else "error", text, "command")

    # recovery ---------------------------------------------------------------------------
    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> Recovery:
        """Check an interrupted side-effecting call against the workspace (see module doc)."""
        try:
            if tool == "write_file":
                real, rel = self.resolve(arguments.get("path"), scopes, write=True, kind="file")
                want = str(arguments.get("content", "")).encode("utf-8")
                if real.is_file() and _sha(real.read_bytes()) == _sha(want):
                    return Recovery("done", f"{rel} already holds the intended content (sha256 {_sha(want)[:12]})",
                                    ToolOutcome("ok", f"wrote {rel}: {len(want)} bytes, sha256 {_sha(want)[:12]} "
                                                "(found on disk after an interruption; not written again)",
                                                "command", rel, rel))
                return Recovery("retry", f"{rel} does not hold the intended content yet")
            if tool == "apply_patch":
                plan = self._patch_plan(arguments, scopes)
                applied, pending = [], []
                for real, rel, fp, cur in plan:
                    try:
                        apply_unified_diff(cur, fp, reverse=True)
                        applied.append(rel)
                        continue
                    except PatchError:
                        pass
                    try:
                        apply_unified_diff(cur, fp)
                        pending.append(rel)
                    except PatchError:
                        return Recovery("ask", f"{rel} matches neither the patch's before nor its after state")
                if not pending:
                    rels = tuple(applied)
                    return Recovery("done", f"patch already applied to {', '.join(applied)}",
                                    ToolOutcome("ok", f"patched {', '.join(applied)} (found applied after an "
                                                "interruption; not applied again)", "command", rels[0], rels[0], rels))
                if applied:
                    return Recovery("ask", f"patch applied to {', '.join(applied)} but not to {', '.join(pending)}")
                return Recovery("retry", "the patch is not applied yet")
            if tool == "run_command":
                receipt = self._receipt(call_id)
                if not receipt.exists():
                    return Recovery("retry", "the command never started (no receipt)")
                data = json.loads(receipt.read_text(encoding="utf-8"))
                if data.get("status") == "finished":
                    rc = int(data.get("returncode", 1))
                    return Recovery("done", f"the command had finished (exit code {rc}) before the interruption",
                                    ToolOutcome("ok" if rc == 0 else "error", str(data.get("output", "")), "command"))
                return Recovery("ask", "the command was cut off while running; it may have had effects")
        except PolicyError as exc:
            return Recovery("retry", f"policy: {exc}")
        except (OSError, PatchError, ValueError) as exc:
            return Recovery("ask", f"cannot check the workspace: {exc}")
        return Recovery("retry", "no side effects to check")
