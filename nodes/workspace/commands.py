"""The command policy of ``run_command``: one table, :data:`COMMANDS`, says for every program
it knows what it may do, its risk, and the rule that checks its arguments.

``run_command`` takes an argv list and runs it without a shell, in the workspace root, with a
small environment (no API keys of the parent process). Only allowed programs run (the rows with
a risk: :data:`DEFAULT_PROGRAMS`, or the ``programs`` a :class:`~nodes.workspace.WorkspaceTools`
is given, less the never-run rows); a program is a bare name (no ``/``), never a shell or a
launcher (``bash``, ``sh``, ``env``, ``xargs``, ``sudo``...), never ``NAME=value`` (env
smuggling). Arguments may not hold shell syntax (``;``, ``&&``, ``||``, ``|``, backticks, ``$(``,
``${``, ``$VAR``, ``<``, ``>``, newlines): without a shell it would be inert, but it signals an
attempt and some programs hand arguments to a shell. ``python`` runs as ``python -m
pytest|unittest|py_compile`` (risk medium) or ``python file.py`` in scope (high); never ``-c``.
``git`` runs read-only subcommands only, with no options before the subcommand (``-c`` can run
commands). Path-like arguments go through the path rules (:mod:`nodes.workspace.paths`). The
scopes limit which paths a command may name; they are not an OS sandbox for the code it runs.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..permissions import PolicyError
from .paths import dir_fully_in_scope, in_scope, resolve

__all__ = [
    "COMMANDS",
    "DEFAULT_PROGRAMS",
    "FORBIDDEN_PROGRAMS",
    "GIT_FORBIDDEN_ARGS",
    "GIT_READ_ONLY",
    "LOW_RISK_PROGRAMS",
    "PYTHON_MODULES",
    "Program",
    "command_policy",
]

#: ``rule(row, args, scopes, root) -> (risk, reason) | None``: checks a command's arguments
#: (``PolicyError`` to refuse); a pair replaces the row's risk and reason.
ArgRule = Callable[["Program", list[str], Sequence[str], Path], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Program:
    """One row of :data:`COMMANDS`. ``names``: the bare program names it covers; ``effect``:
    what it may do; ``risk``: ``low`` | ``medium`` (a ``rule`` may raise it), ``None``: never
    run; ``rule``: checks the arguments (:data:`ArgRule`); ``allows``: the subcommands or
    modules the rule accepts; ``runs``: None to run the program found on ``PATH``, else
    arguments after this interpreter (``sys.executable``)."""

    names: tuple[str, ...]
    effect: str
    risk: str | None
    rule: ArgRule | None = None
    allows: tuple[str, ...] = ()
    runs: tuple[str, ...] | None = None


GIT_FORBIDDEN_ARGS = (
    "--output",
    "--ext-diff",
    "--textconv",
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "--open-files-in-pager",
    "--config-env",
)


def _git(row: Program, args: list[str], scopes: Sequence[str], root: Path) -> None:
    """A read-only subcommand first (no options before it), no option that writes or runs."""
    sub = args[0] if args else ""
    if sub.startswith("-"):
        raise PolicyError("git options before the subcommand are refused (-c, -C, --git-dir can run code)")
    if sub not in row.allows:
        raise PolicyError(f"git {sub or '(none)'} is not a read-only git subcommand ({', '.join(sorted(row.allows))})")
    if any(a.startswith(GIT_FORBIDDEN_ARGS) for a in args):
        raise PolicyError("git option that writes files or runs programs is refused")


def _python(row: Program, args: list[str], scopes: Sequence[str], root: Path) -> tuple[str, str]:
    """``-m`` one of ``row.allows`` (medium) or a workspace script in scope (high); never
    ``-c``, stdin, other options or an interactive interpreter."""
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
        if mod not in row.allows:
            raise PolicyError(f"python -m {mod or '(none)'} is not allowed (allowed: {', '.join(sorted(row.allows))})")
        return "medium", f"runs python -m {mod} (executes workspace code)"
    if a.startswith("-"):
        raise PolicyError(f"python option {a!r} is refused")
    _, rel = resolve(root, a, scopes, kind="file")
    return "high", f"runs the workspace script {rel}"


def _pytest(row: Program, args: list[str], scopes: Sequence[str], root: Path) -> None:
    """No ``-p`` (it loads plugins, i.e. runs code from anywhere)."""
    if "-p" in args or any(a.startswith("-p") and len(a) > 2 and not a.startswith("--") for a in args):
        raise PolicyError("pytest -p (loading plugins) is refused")


#: The command table: every program ``run_command`` knows, allowed (a risk) or never run (None).
#: The allowed rows, in order, are :data:`DEFAULT_PROGRAMS`. A program given to
#: ``WorkspaceTools(programs=...)`` that is in no row runs at ``medium`` risk, path rules only.
COMMANDS: tuple[Program, ...] = (
    Program(("ls",), "lists folders", "low"),
    Program(("cat",), "prints files", "low"),
    Program(("head",), "prints the start of files", "low"),
    Program(("tail",), "prints the end of files", "low"),
    Program(("wc",), "counts lines, words and bytes", "low"),
    Program(("grep",), "searches files", "low"),
    Program(("diff",), "compares files", "low"),
    Program(
        ("git",),
        "reads the repository: read-only subcommands",
        "low",
        _git,
        ("status", "diff", "log", "show", "ls-files", "rev-parse", "blame"),
    ),
    Program(
        ("python", "python3"),
        "runs tests (-m, medium) or a workspace script (high): executes workspace code",
        "medium",
        _python,
        ("pytest", "unittest", "py_compile"),
        runs=(),
    ),
    Program(
        ("pytest",), "runs the workspace's tests (executes workspace code)", "medium", _pytest, runs=("-m", "pytest")
    ),
    Program(("echo",), "prints its arguments", "low"),
    Program(("pwd",), "prints the folder", "low"),
    # never run, whatever the allowed list says
    Program(("sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox"), "shells: run any command", None),
    Program(
        (
            "env",
            "sudo",
            "su",
            "doas",
            "xargs",
            "nohup",
            "timeout",
            "nice",
            "ionice",
            "stdbuf",
            "setsid",
            "chroot",
            "strace",
            "script",
            "expect",
        ),
        "launchers: run another program",
        None,
    ),
    Program(("eval", "exec", "source"), "shell builtins that run code", None),
    Program(
        (
            "perl",
            "ruby",
            "node",
            "php",
            "lua",
            "awk",
            "gawk",
            "sed",
            "python2",
            "osascript",
            "powershell",
            "pwsh",
            "cmd",
        ),
        "interpreters: run inline code",
        None,
    ),
    Program(("find", "make"), "run other programs (find -exec, Makefile recipes)", None),
    Program(("ssh", "scp", "curl", "wget", "nc", "ncat", "socat"), "network tools", None),
    Program(("pip", "pip3"), "install packages (run their setup code, reach the network)", None),
)

_ROWS = {name: row for row in COMMANDS for name in row.names}
#: Programs ``run_command`` may start (bare names), by default.
DEFAULT_PROGRAMS = tuple(n for row in COMMANDS if row.risk is not None for n in row.names)
#: Never allowed, whatever the list says: shells, launchers, interpreters, network tools.
FORBIDDEN_PROGRAMS = frozenset(n for row in COMMANDS if row.risk is None for n in row.names)
LOW_RISK_PROGRAMS = frozenset(n for row in COMMANDS if row.risk == "low" for n in row.names)
GIT_READ_ONLY = frozenset(_ROWS["git"].allows)
PYTHON_MODULES = frozenset(_ROWS["python"].allows)
_SHELL_SYNTAX = re.compile(r";|&&|\|\||\||`|\$\(|\$\{|\$[A-Za-z_]|[<>]|\n|\r|&\s*$")


def command_policy(
    argv: Any, scopes: Sequence[str], *, root: Path, programs: frozenset[str]
) -> tuple[list[str], str, str]:
    """``(argv to exec, risk, reason)`` for a command run in the workspace ``root`` with the
    allowed ``programs``, or ``PolicyError`` naming what is refused (see module doc)."""
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
    if prog not in programs:
        raise PolicyError(f"{prog} is not an allowed program ({', '.join(sorted(programs))})")
    row = _ROWS.get(prog)
    risk, reason = (row.risk if row is not None and row.risk else "medium"), f"runs {prog}"
    if row is not None and row.rule is not None:
        risk, reason = row.rule(row, args, scopes, root) or (risk, reason)
    _check_path_args(args, scopes, root)
    runs = row.runs if row is not None else None
    exe = shutil.which(prog) if runs is None else sys.executable
    if exe is None and not runs:
        raise PolicyError(f"{prog} is not installed")
    return [exe, *(runs or ()), *args], risk, reason


def _check_path_args(args: list[str], scopes: Sequence[str], root: Path) -> None:
    """Arguments that look like paths (or ``--opt=path`` values) stay inside the workspace and,
    when they exist, inside the scopes (a folder wholly inside them)."""
    for a in args:
        vals = [a.split("=", 1)[1]] if a.startswith("-") and "=" in a else ([] if a.startswith("-") else [a])
        for v in vals:
            if not v:
                continue
            if v.startswith(("/", "~")) or ".." in v.split("/") or "\\" in v:
                raise PolicyError(f"argument {v[:80]!r} names a path outside the workspace")
            if os.path.lexists(root / v):
                real, rel = resolve(root, v, (), kind="any")
                if real.is_dir():
                    if not dir_fully_in_scope(rel, scopes):
                        raise PolicyError(f"argument {v!r} is a folder not wholly inside the file scopes")
                elif not in_scope(rel, scopes):
                    raise PolicyError(f"argument {v!r} is outside the task's file scopes ({', '.join(scopes)})")
