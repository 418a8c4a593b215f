"""The command policy of ``run_command``: :data:`COMMANDS` (programs) and :data:`OPTIONS` (their options).

Commands run from an argv list, without a shell, in the workspace root; only known programs run,
and options that read or run more than the argv names are refused or need approval.
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
    "GIT_SAFE_CONFIG",
    "GIT_SAFE_DIFF_FLAGS",
    "LOW_RISK_PROGRAMS",
    "OPTIONS",
    "Option",
    "PYTHON_MODULES",
    "Program",
    "command_policy",
    "git_argv",
]

#: ``rule(row, args, scopes, root) -> (risk, reason) | None``: checks a command's arguments
#: (``PolicyError`` to refuse); a pair replaces the row's risk and reason.
ArgRule = Callable[["Program", list[str], Sequence[str], Path], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Program:
    """One row of :data:`COMMANDS`: a program ``run_command`` knows.

    Attributes:
        names: The bare program names it covers.
        effect: What it may do.
        risk: ``low`` or ``medium`` (a ``rule`` may raise it); None: never run.
        rule: Checks the arguments (:data:`ArgRule`).
        allows: The subcommands or modules the rule accepts.
        runs: None to run the program found on ``PATH``, else the arguments after this
            interpreter (``sys.executable``).
    """

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
    """``-m`` one of ``row.allows`` (medium) or a workspace script in scope (high).

    Never ``-c``, stdin, other options or an interactive interpreter.
    """
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
    Program(("pytest",), "runs the workspace's tests (executes workspace code)", "medium", runs=("-m", "pytest")),
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


@dataclass(frozen=True)
class Option:
    """One row of :data:`OPTIONS`: an option that makes a command read or run more than its argv names.

    ``action`` is one of:

    * ``refuse``: the call is refused (``PolicyError``);
    * ``high``: the call's risk becomes ``high``, so it needs approval;
    * ``root``: with no path operand the command works on the whole root, so ``.`` is checked as
      a folder that must be wholly inside the scopes;
    * ``pathspec``: with no path operand the output covers every file of the repository, so the
      call is ``high`` unless every file is in scope (paths named are checked);
    * ``path``: the option's value is a path, checked against the scopes after resolution;
    * ``module``: each operand names a module to import: it must be a file of the workspace in
      scope (``a/b.py`` or ``a/b/__init__.py``), never an installed module.

    Attributes:
        commands: The commands it applies to (a program; ``git <sub>``; ``pytest`` is also
            ``python -m pytest``, ``unittest`` is ``python -m unittest``).
        options: Its spellings (``""``: the command as such, whatever its options).
        effect: What it makes the command read or run.
        action: What the policy does (above).
    """

    commands: tuple[str, ...]
    options: tuple[str, ...]
    effect: str
    action: str


_GIT_CONTENT = ("git diff", "git log", "git show")  # git log prints contents with -p (a row below)
#: The option table of ``run_command``, checked after :data:`COMMANDS` (docs/concepts/permissions.md).
OPTIONS: tuple[Option, ...] = (
    Option(("grep",), ("-R", "--dereference-recursive"), "recurses and follows every symlink", "refuse"),
    Option(
        ("grep",),
        ("-r", "--recursive", "-d=recurse", "--directories=recurse"),
        "recurses from the root",
        "root",
    ),
    Option(("grep",), ("-f", "--file", "--exclude-from"), "reads patterns or globs from a file", "path"),
    Option(("ls",), ("",), "lists the root (names outside the scopes too)", "root"),
    Option(
        ("ls",),
        ("-L", "--dereference", "-H", "--dereference-command-line", "--dereference-command-line-symlink-to-dir"),
        "follows symlinks",
        "refuse",
    ),
    Option(("diff",), ("-r", "--recursive"), "compares folders recursively, following symlinks", "refuse"),
    Option(("diff",), ("--from-file", "--to-file", "-X", "--exclude-from"), "reads that file", "path"),
    Option(("wc",), ("--files0-from",), "reads the names of the files to count from a file", "refuse"),
    Option(("git diff", "git show"), ("",), "prints file contents of any revision, out-of-scope files too", "pathspec"),
    Option(
        ("git log",), ("-p", "-u", "--patch", "-U", "-L", "-G", "-S", "--full-diff"), "prints file changes", "pathspec"
    ),
    Option(_GIT_CONTENT, ("REV:path",), "reads a file of another revision", "path"),
    Option(_GIT_CONTENT, ("-O",), "reads that file (the order of the files in the diff)", "path"),
    Option(
        ("git blame",),
        ("-S", "--contents", "--ignore-revs-file"),
        "reads that file (-S prints its first line in an error)",
        "path",
    ),
    Option(("git ls-files",), ("-X", "--exclude-from"), "reads that file (exclude patterns)", "path"),
    Option(("pytest",), ("@file",), "reads more arguments from that file (options this table refuses too)", "refuse"),
    Option(("pytest",), ("-p",), "loads a plugin module: runs its code", "refuse"),
    Option(("pytest",), ("-o", "--override-ini"), "overrides ini options (addopts=-p mod loads a plugin)", "refuse"),
    Option(
        ("pytest",), ("-c", "--config-file", "--inifile"), "reads another ini file (its addopts load plugins)", "refuse"
    ),
    Option(("pytest",), ("--pyargs",), "imports its operands as modules by name", "refuse"),
    Option(("pytest",), ("--pdbcls", "--debugger"), "imports the named debugger's module", "refuse"),
    Option(("pytest",), ("-W", "--pythonwarnings"), "a dotted warning category imports its module", "refuse"),
    Option(("pytest",), ("--basetemp",), "deletes and recreates that folder", "refuse"),
    Option(
        ("pytest",),
        ("--junitxml", "--junit-xml", "--report-log", "--resultlog", "--result-log", "--debug", "--log-file"),
        "writes a file (writes go through write_file)",
        "refuse",
    ),
    Option(("pytest",), ("--pastebin",), "sends the results to a paste service on the network", "refuse"),
    Option(("pytest",), ("--rootdir", "--confcutdir", "--ignore", "--deselect"), "names a path", "path"),
    Option(("unittest",), ("",), "imports each module named (a.b.TestCase.test)", "module"),
)

#: Short options that take a value (``-e PAT``, ``-ePAT``), per command; the rest are flags
#: that bundle (``-rn``).
_SHORT_VALUES = {
    "grep": "efmABCdD",
    "ls": "ITw",
    "diff": "CUDFILSWxX",
    "head": "nc",
    "tail": "nc",
    "pytest": "kmcporW",
    "unittest": "k",
    "git blame": "LS",
    "git diff": "OSG",
    "git log": "OSG",
    "git show": "OSG",
    "git ls-files": "X",
}
#: Long options that take the next argument as their value (when written without ``=``).
_LONG_VALUES = {
    "grep": {
        "--regexp",
        "--file",
        "--max-count",
        "--after-context",
        "--before-context",
        "--context",
        "--include",
        "--exclude",
        "--exclude-from",
        "--exclude-dir",
        "--directories",
        "--devices",
        "--label",
        "--binary-files",
    },
    "pytest": {
        "--override-ini",
        "--config-file",
        "--inifile",
        "--rootdir",
        "--basetemp",
        "--junitxml",
        "--junit-xml",
        "--confcutdir",
        "--pdbcls",
        "--pythonwarnings",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "--import-mode",
        "--tb",
        "--capture",
        "--durations",
        "--maxfail",
        "--report-log",
        "--resultlog",
        "--result-log",
        "--debugger",
    },
    "diff": {"--from-file", "--to-file", "--exclude-from", "--label", "--exclude"},
    "git blame": {"--contents", "--ignore-revs-file", "--ignore-rev"},
    "git ls-files": {"--exclude-from"},
    "head": {"--lines", "--bytes"},
    "tail": {"--lines", "--bytes"},
}
#: Commands whose operands are all paths (grep: after its pattern; git: after ``--``).
_PATH_OPERANDS = frozenset({"cat", "head", "tail", "wc", "ls", "diff", "grep", "pytest"})


def _command_key(prog: str, args: list[str]) -> tuple[str, list[str]]:
    """The command an argv runs, as :data:`OPTIONS` names it, and the arguments it takes."""
    if prog == "git":
        return (f"git {args[0]}" if args else "git"), args[1:]
    if prog in ("python", "python3"):
        i = 0
        while i < len(args) and args[i] in ("-B", "-u", "-q", "-I", "-s", "-E"):
            i += 1
        if i + 1 < len(args) and args[i] == "-m":
            return args[i + 1], args[i + 2 :]
        return "python", args[i + 1 :]
    return prog, args


def _parse(key: str, args: list[str]) -> tuple[list[tuple[str, str | None]], list[str], list[str]]:
    """``(options as (name, value), operands before --, operands after --)``."""
    shorts, longs = _SHORT_VALUES.get(key, ""), _LONG_VALUES.get(key, set())
    opts: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, operands, args[i + 1 :]
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if not eq and name in longs and i + 1 < len(args):
                value, i = args[i + 1], i + 1
            opts.append((name, value if eq or name in longs else None))
        elif a.startswith("-") and len(a) > 1:
            for j, c in enumerate(a[1:], 1):
                if c in shorts:
                    value = a[j + 1 :]
                    if not value and i + 1 < len(args):
                        value, i = args[i + 1], i + 1
                    opts.append((f"-{c}", value))
                    break
                opts.append((f"-{c}", None))
        else:
            operands.append(a)
        i += 1
    return opts, operands, []


def _check_path(v: str, scopes: Sequence[str], root: Path, what: str) -> None:
    """``v`` (existing or not) resolves inside the workspace and the scopes (a folder: wholly)."""
    if v.startswith(("/", "~")) or ".." in v.split("/") or "\\" in v:
        raise PolicyError(f"{what} {v[:80]!r} names a path outside the workspace")
    real, rel = resolve(root, v, (), kind="any")
    if real.is_dir():
        if not dir_fully_in_scope(rel, scopes):
            raise PolicyError(f"{what} {v!r} is a folder not wholly inside the file scopes ({', '.join(scopes)})")
    elif not in_scope(rel, scopes):
        raise PolicyError(f"{what} {v!r} is outside the task's file scopes ({', '.join(scopes)})")


def _module_file(root: Path, name: str) -> str | None:
    """The workspace file, relative, that ``python -m unittest`` imports for ``name``, or None.

    ``a.b.TestCase.test`` is ``a/b.py`` or ``a/b/__init__.py``.
    """
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        base = "/".join(parts[:n])
        for cand in (base + ".py", base + "/__init__.py"):
            if os.path.isfile(root / cand):
                return cand
    return None


def _option_policy(prog: str, args: list[str], scopes: Sequence[str], root: Path) -> tuple[str, str] | None:
    """Apply :data:`OPTIONS` to a command: None when nothing in the table applies.

    ``PolicyError`` to refuse, ``("high", reason)`` to raise its risk.
    """
    key, rest = _command_key(prog, args)
    opts, operands, after = _parse(key, rest)
    names = {n for n, _ in opts} | {f"{n}={v}" for n, v in opts if v is not None}
    if key == "pytest" and any(o.startswith("@") for o in operands + after):
        names.add("@file")  # pytest reads the arguments of an @file operand
    if key.startswith("git "):
        if any(key in r.commands and "REV:path" in r.options for r in OPTIONS):
            for o in operands + after:
                if ":" in o:  # REV:path reads a file of another revision
                    _check_path(o.split(":", 1)[1] or ".", scopes, root, f"{key} {o!r} reads")
        paths = [o for o in operands if ":" not in o and os.path.lexists(root / o)] + after
    elif key == "grep":
        paths = operands + after if names & {"-e", "--regexp", "-f", "--file"} else (operands + after)[1:]
    else:
        paths = operands + after
    if key in _PATH_OPERANDS or key.startswith("git "):
        for v in paths:
            if "/" in v or os.path.lexists(root / v) or key.startswith("git "):
                _check_path(v.split("::", 1)[0] if key == "pytest" else v, scopes, root, "argument")
    raised: tuple[str, str] | None = None
    for row in OPTIONS:
        if key not in row.commands:
            continue
        hit = "" if "" in row.options else next((o for o in row.options if o in names), None)
        if hit is None:
            continue
        shown = f"{key} {hit}".strip()
        if row.action == "refuse":
            raise PolicyError(f"{shown} is refused: it {row.effect}")
        if row.action == "high":
            raised = ("high", f"{shown} {row.effect}")
        elif row.action == "root" and not paths and not dir_fully_in_scope(".", scopes):
            raise PolicyError(
                f"{shown} with no path named {row.effect}; name folders inside the file scopes ({', '.join(scopes)})"
            )
        elif row.action == "pathspec" and not paths and not dir_fully_in_scope(".", scopes):
            raised = ("high", f"{shown} {row.effect} (name paths inside the file scopes, after --)")
        elif row.action == "path":
            for n, value in opts:
                if n in row.options and value:
                    _check_path(value, scopes, root, f"{key} {n}")
        elif row.action == "module":
            for o in operands:
                if o == "discover" or "/" in o or o.endswith(".py"):
                    break
                f = _module_file(root, o)
                if f is None:
                    raise PolicyError(f"{key} {o!r} would import a module that is not a file of the workspace")
                _check_path(f, scopes, root, f"{key} {o!r} imports")
    return raised


def command_policy(
    argv: Any, scopes: Sequence[str], *, root: Path, programs: frozenset[str]
) -> tuple[list[str], str, str]:
    """The argv to exec, risk and reason of a ``run_command`` call, or its refusal.

    Only allowed programs run, as bare names (never a shell or launcher, never ``NAME=value``);
    arguments may not hold shell syntax; ``python`` runs ``-m pytest|unittest|py_compile`` or a
    script in scope, never ``-c``; ``git`` read-only subcommands only; path-like arguments go
    through the path rules and :data:`OPTIONS` judges the options.

    Args:
        argv: The call's ``argv`` (a list of strings).
        scopes: The task's file scopes.
        root: The workspace.
        programs: The program names allowed.

    Returns:
        ``(argv to exec, risk, reason)``.

    Raises:
        PolicyError: The command is refused (the message names what).
    """
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
    raised = _option_policy(prog, args, scopes, root)
    if raised is not None:
        risk, reason = raised
    runs = row.runs if row is not None else None
    exe = shutil.which(prog) if runs is None else sys.executable
    if exe is None and not runs:
        raise PolicyError(f"{prog} is not installed")
    if prog == "git":
        return git_argv(str(exe), args), risk, reason
    return [exe, *(runs or ()), *args], risk, reason


#: Config that makes git run no program of the repository's own ``.git/config`` (its fsmonitor
#: hook, an external diff, hooks, the signature verifiers that ``log.showSignature`` makes ``git
#: log``/``show`` run: ``false`` is the program that does nothing), given on every git command
#: line: a ``-c`` beats the repository's value (and any file it includes).
GIT_SAFE_CONFIG = (
    "core.fsmonitor=false",
    "diff.external=",
    "core.hooksPath=/dev/null",
    "log.showSignature=false",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
)
#: Flags that keep ``git diff|show|log`` off external diff drivers and textconv filters
#: (``diff.<driver>.command``, ``diff.<driver>.textconv`` named through ``.gitattributes``).
GIT_SAFE_DIFF_FLAGS = ("--no-ext-diff", "--no-textconv")


def git_argv(exe: str, args: list[str]) -> list[str]:
    """The argv that runs ``git <args>`` without a program the repository configures.

    ``-c`` for each of :data:`GIT_SAFE_CONFIG` before the subcommand and, for ``diff``, ``show``
    and ``log``, :data:`GIT_SAFE_DIFF_FLAGS` right after it. Not covered: a
    ``filter.<driver>.clean`` named in ``.gitattributes``, which ``git status`` and ``git diff``
    may run on a changed file (docs/howto/security.md, "Not enforced").

    Args:
        exe: The git program.
        args: The subcommand and its arguments.

    Returns:
        The argv.
    """
    sub, rest = (args[0], args[1:]) if args else ("", [])
    safe = [f for c in GIT_SAFE_CONFIG for f in ("-c", c)]
    flags = list(GIT_SAFE_DIFF_FLAGS) if sub in ("diff", "show", "log") else []
    return [exe, *safe, sub, *flags, *rest] if sub else [exe, *safe]


def _check_path_args(args: list[str], scopes: Sequence[str], root: Path) -> None:
    """Arguments that look like paths (or ``--opt=path`` values) stay inside the workspace.

    When they exist, also inside the scopes (a folder wholly inside them).
    """
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
