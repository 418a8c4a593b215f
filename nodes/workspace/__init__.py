"""Workspace tools: a ToolExecutor over one folder (``taskctx run --workspace DIR``, the demo).

::

    tool node ── check(tool, args, scopes) ──▶ risk, reason, paths   (or PolicyError: refused)
              ── execute(call_id, tool, args, scopes) ──▶ ToolOutcome
              ── recover(call_id, tool, args, scopes) ──▶ Recovery  (after an interruption)

    WorkspaceTools (tools.py)
      ├─ every path ──────▶ paths.py     resolve: refusals, symlinks, scopes, write risk
      ├─ run_command ─────▶ commands.py  the command table: program, effect, risk, argument rule
      ├─ apply_patch ─────▶ patch.py     unified diff parse / apply / un-apply
      └─ recover ─────────▶ recovery.py  write_file / apply_patch / run_command (receipts)

Modules:

* ``paths.py``: scopes and ``**`` globs, :func:`~nodes.workspace.paths.resolve` (symlinks
  followed; absolute, ``~``, ``..``, control characters, backslashes, percent-encoding and
  look-alike Unicode refused; ``.taskctx/`` never touched, ``.git/`` never written), the write
  risk of a path (:data:`HIGH_RISK_FILES`), atomic writes.
* ``commands.py``: :data:`COMMANDS`, the one table of programs ``run_command`` knows (what each
  may do, its risk, the rule for its arguments; shells, launchers, interpreters and network
  tools never run), :data:`OPTIONS`, the table of options that make a command read or run more
  than its argv names (program, option, effect, action: refused, approval, path checked), and
  :func:`command_policy`.
* ``patch.py``: :func:`parse_unified_diff`, :func:`apply_unified_diff`, :class:`PatchError`.
* ``tools.py``: :class:`WorkspaceTools` (``list_dir``, ``read_file``, ``grep``, ``write_file``,
  ``apply_patch``, ``run_command``, and ``search_history`` answered by the tool node).
* ``recovery.py``: :class:`Recovery` and the side-effect-safe resume checks, command receipts.

The scopes limit what the tools read and which paths a command may name; they are not an OS
sandbox for the code a command runs.
"""

from .commands import (
    COMMANDS,
    DEFAULT_PROGRAMS,
    FORBIDDEN_PROGRAMS,
    GIT_FORBIDDEN_ARGS,
    GIT_READ_ONLY,
    LOW_RISK_PROGRAMS,
    OPTIONS,
    PYTHON_MODULES,
    Option,
    Program,
    command_policy,
)
from .interrupted import Recovery, recover
from .patch import FilePatch, Hunk, PatchError, apply_unified_diff, parse_unified_diff
from .paths import HIGH_RISK_FILES, glob_match, resolve
from .tools import MAX_READ_BYTES, MAX_TIMEOUT, SIDE_EFFECT_TOOLS, WorkspaceTools

__all__ = [
    "COMMANDS",
    "DEFAULT_PROGRAMS",
    "FORBIDDEN_PROGRAMS",
    "GIT_FORBIDDEN_ARGS",
    "GIT_READ_ONLY",
    "HIGH_RISK_FILES",
    "LOW_RISK_PROGRAMS",
    "MAX_READ_BYTES",
    "MAX_TIMEOUT",
    "OPTIONS",
    "PYTHON_MODULES",
    "SIDE_EFFECT_TOOLS",
    "FilePatch",
    "Hunk",
    "Option",
    "PatchError",
    "Program",
    "Recovery",
    "WorkspaceTools",
    "apply_unified_diff",
    "command_policy",
    "glob_match",
    "parse_unified_diff",
    "recover",
    "resolve",
]
