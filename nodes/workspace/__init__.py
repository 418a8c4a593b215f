"""Workspace tools: a :class:`~nodes.tools.ToolExecutor` over one folder (``taskctx run --workspace DIR``, the demo).

Paths go through :mod:`.paths`, commands through :mod:`.commands`, patches through :mod:`.patch`;
an interrupted call is checked by :mod:`.interrupted`. The file scopes limit what the tools read
and which paths a command may name; they are not an OS sandbox for the code a command runs.
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
