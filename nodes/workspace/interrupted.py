"""Side-effect-safe resume: what became of a call with side effects interrupted before its result was recorded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from context.secrets import masked_tree
from context.store import ArtifactStoreProtocol

from ..permissions import PolicyError
from ..tools import ToolOutcome
from ..tools.protocol import Recovery
from .patch import FilePatch, PatchError, apply_unified_diff
from .paths import atomic_write, sha256_hex
from .process import end_marked

__all__ = ["CheckedWorkspace", "Recovery", "read_receipt", "receipt_path", "recover", "write_receipt"]


class CheckedWorkspace(Protocol):
    """What :func:`recover` reads of a workspace (:class:`~nodes.workspace.tools.WorkspaceTools` has it).

    Attributes:
        artifacts: The store a finished command's receipt refers to (None: receipts hold the output).
    """

    artifacts: ArtifactStoreProtocol | None

    def resolve(
        self, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any"
    ) -> tuple[Path, str]:
        """The real and workspace-relative path of ``path``.

        Args:
            path: The path a call named.
            scopes: The task's file scopes.
            write: Whether the call writes it.
            kind: ``file``, ``dir`` or ``any``.

        Returns:
            ``(real path, relative path)``.

        Raises:
            PolicyError: The path is refused.
        """

    def patch_plan(self, a: dict[str, Any], scopes: Sequence[str]) -> list[tuple[Path, str, FilePatch, str | None]]:
        """``(real path, relative path, file patch, current text or None)`` per file of ``a["patch"]``.

        Args:
            a: The ``apply_patch`` call's arguments.
            scopes: The task's file scopes.

        Returns:
            One tuple per file.
        """

    def receipt(self, call_id: str) -> Path:
        """The receipt file of a ``run_command`` call.

        Args:
            call_id: The call's id.

        Returns:
            The receipt's path.
        """


def receipt_path(receipts_dir: Path, call_id: str) -> Path:
    """The receipt file of ``call_id``.

    Args:
        receipts_dir: The folder of receipts.
        call_id: The call's id.

    Returns:
        ``<receipts_dir>/<first 24 hex of sha256(call_id)>.json``.
    """
    return receipts_dir / f"{sha256_hex(call_id.encode())[:24]}.json"


def write_receipt(path: Path, receipt: dict[str, Any]) -> None:
    """Write a receipt atomically.

    Args:
        path: The receipt's file (:func:`receipt_path`).
        receipt: ``{"call_id", "argv", "status": "started"}`` before the command spawns,
            ``{..., "status": "finished", "returncode", "output_ref"}`` after it (the ref of its
            output in the artifact store; ``"output"``, the output itself, without a store).
            Masked as the stores mask (:func:`context.secrets.masked_tree`): a held secret's
            value is written as its placeholder, as the call's arguments were recorded.
    """
    atomic_write(path, json.dumps(masked_tree(receipt)).encode())


def read_receipt(path: Path) -> dict[str, Any] | None:
    """The receipt at ``path``.

    Args:
        path: The receipt's file.

    Returns:
        The receipt, or None when the command never started (no file).

    Raises:
        ValueError: The file is not JSON.
    """
    if not path.exists():
        return None
    receipt: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return receipt


def recover(
    tools: CheckedWorkspace, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()
) -> Recovery:
    """Check an interrupted call with side effects against the workspace.

    A ``write_file`` whose file already holds the intended bytes is done; a patch already applied
    is done, one that still applies is retried, anything else asks; a ``run_command`` whose receipt
    says finished is done (never run again), one cut off mid-run asks.

    Args:
        tools: The workspace.
        call_id: The interrupted call's id.
        tool: Its tool (``write_file``, ``apply_patch``, ``run_command``; others are ``retry``).
        arguments: Its arguments.
        scopes: The task's file scopes.

    Returns:
        The recovery; a path the policy now refuses is ``retry`` (the tool node refuses it again),
        a workspace that cannot be read ``ask``.
    """
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
        ref = data.get("output_ref")
        if ref and tools.artifacts is not None:
            output = tools.artifacts.get(str(ref)).decode("utf-8", errors="replace")
        else:
            output = str(data.get("output", ""))
        return Recovery(
            "done",
            f"the command had finished (exit code {rc}) before the interruption",
            ToolOutcome("ok" if rc == 0 else "error", output, "command"),
        )
    left = end_marked(str(data.get("run_mark") or ""))  # what the killed runner's command left running
    ended = {0: "", 1: " (the process it left running was ended)"}.get(
        left, f" (the {left} processes it left running were ended)"
    )
    return Recovery("ask", f"the command was cut off while running{ended}; it may have had effects")
