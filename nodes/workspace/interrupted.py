"""Side-effect-safe resume: what became of a side-effecting call that was interrupted before its
result was recorded, checked against the workspace (:func:`recover`), and the command receipts
that make it possible for ``run_command``.

A ``write_file`` whose file already holds the intended bytes (sha256) is done; a patch already
applied is done, one that still applies is retried, anything else asks the user;
``run_command`` writes a receipt (``started`` before it spawns, ``finished`` with its output
after) keyed by the call id in ``receipts_dir``, so a finished command is never run again and a
command cut off mid-run asks for approval.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..permissions import PolicyError
from ..tools import ToolOutcome
from .patch import FilePatch, PatchError, apply_unified_diff
from .paths import atomic_write, sha256_hex

__all__ = ["CheckedWorkspace", "Recovery", "read_receipt", "receipt_path", "recover", "write_receipt"]


@dataclass(frozen=True)
class Recovery:
    """What :meth:`WorkspaceTools.recover` found: ``done`` (with the outcome to record),
    ``retry`` (safe to run now) or ``ask`` (needs the user's approval; ``note`` says why)."""

    state: str
    note: str = ""
    outcome: ToolOutcome | None = None


class CheckedWorkspace(Protocol):
    """What :func:`recover` reads of a workspace (:class:`~nodes.workspace.tools.WorkspaceTools` has it)."""

    def resolve(
        self, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any"
    ) -> tuple[Path, str]:
        """The real and workspace-relative path of ``path``; raises ``PolicyError`` when refused."""

    def patch_plan(self, a: dict[str, Any], scopes: Sequence[str]) -> list[tuple[Path, str, FilePatch, str | None]]:
        """``(real path, relative path, file patch, current text or None)`` per file of ``a["patch"]``."""

    def receipt(self, call_id: str) -> Path:
        """The receipt file of a ``run_command`` call."""


def receipt_path(receipts_dir: Path, call_id: str) -> Path:
    """The receipt file of ``call_id``: ``<receipts_dir>/<first 24 hex of sha256(call_id)>.json``."""
    return receipts_dir / f"{sha256_hex(call_id.encode())[:24]}.json"


def write_receipt(path: Path, receipt: dict[str, Any]) -> None:
    """Write a receipt atomically: ``{"call_id", "argv", "status": "started"}`` before the
    command spawns, ``{..., "status": "finished", "returncode", "output"}`` after it."""
    atomic_write(path, json.dumps(receipt).encode())


def read_receipt(path: Path) -> dict[str, Any] | None:
    """The receipt at ``path``, or None when the command never started (no file).
    ``ValueError`` when it is not JSON."""
    if not path.exists():
        return None
    receipt: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return receipt


def recover(
    tools: CheckedWorkspace, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()
) -> Recovery:
    """Check the interrupted call ``call_id`` of ``tool`` against the workspace of ``tools``
    (see module doc). A path the policy now refuses is ``retry`` (the tool node's policy check
    refuses it again); a workspace that cannot be read is ``ask``."""
    try:
        if tool == "write_file":
            return _write_file(tools, arguments, scopes)
        if tool == "apply_patch":
            return _apply_patch(tools, arguments, scopes)
        if tool == "run_command":
            return _run_command(tools, call_id)
    except PolicyError as exc:
        return Recovery("retry", f"policy: {exc}")
    except (OSError, PatchError, ValueError) as exc:
        return Recovery("ask", f"cannot check the workspace: {exc}")
    return Recovery("retry", "no side effects to check")


def _write_file(tools: CheckedWorkspace, arguments: dict[str, Any], scopes: Sequence[str]) -> Recovery:
    real, rel = tools.resolve(arguments.get("path"), scopes, write=True, kind="file")
    want = str(arguments.get("content", "")).encode("utf-8")
    if real.is_file() and sha256_hex(real.read_bytes()) == sha256_hex(want):
        return Recovery(
            "done",
            f"{rel} already holds the intended content (sha256 {sha256_hex(want)[:12]})",
            ToolOutcome(
                "ok",
                f"wrote {rel}: {len(want)} bytes, sha256 {sha256_hex(want)[:12]} "
                "(found on disk after an interruption; not written again)",
                "command",
                rel,
                rel,
            ),
        )
    return Recovery("retry", f"{rel} does not hold the intended content yet")


def _apply_patch(tools: CheckedWorkspace, arguments: dict[str, Any], scopes: Sequence[str]) -> Recovery:
    applied, pending = [], []
    for _, rel, fp, cur in tools.patch_plan(arguments, scopes):
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
        return Recovery(
            "done",
            f"patch already applied to {', '.join(applied)}",
            ToolOutcome(
                "ok",
                f"patched {', '.join(applied)} (found applied after an interruption; not applied again)",
                "command",
                rels[0],
                rels[0],
                rels,
            ),
        )
    if applied:
        return Recovery("ask", f"patch applied to {', '.join(applied)} but not to {', '.join(pending)}")
    return Recovery("retry", "the patch is not applied yet")


def _run_command(tools: CheckedWorkspace, call_id: str) -> Recovery:
    data = read_receipt(tools.receipt(call_id))
    if data is None:
        return Recovery("retry", "the command never started (no receipt)")
    if data.get("status") == "finished":
        rc = int(data.get("returncode", 1))
        return Recovery(
            "done",
            f"the command had finished (exit code {rc}) before the interruption",
            ToolOutcome("ok" if rc == 0 else "error", str(data.get("output", "")), "command"),
        )
    return Recovery("ask", "the command was cut off while running; it may have had effects")
