"""The workspace tool executor, :class:`WorkspaceTools`: list, read, grep, write, patch and run in one folder."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from context.cut_secrets import mask_cut_end
from context.held_secrets import MissingSecretError, reveal_secrets
from context.store import ArtifactStoreProtocol
from context.text import quote_name

from ..permissions import PolicyError
from ..tools import SEARCH_HISTORY_SCHEMA, ToolOutcome, function_schema, report_progress
from .commands import DEFAULT_PROGRAMS, FORBIDDEN_PROGRAMS, command_policy
from .interrupted import Recovery, receipt_path, recover, write_receipt
from .patch import FilePatch, PatchError, apply_unified_diff, parse_unified_diff
from .paths import (
    atomic_write,
    clear_staging,
    dir_may_hold_scope,
    file_sha256,
    glob_match,
    in_scope,
    resolve,
    sha256_hex,
    write_risk,
)
from .process import OUTPUT_LIMIT, RUN_MARK, grep_file, run_bounded

__all__ = ["MAX_GREP_HITS", "MAX_READ_BYTES", "MAX_TIMEOUT", "SIDE_EFFECT_TOOLS", "OutputLines", "WorkspaceTools"]

SIDE_EFFECT_TOOLS = frozenset({"write_file", "apply_patch", "run_command"})
MAX_READ_BYTES = 2_000_000
MAX_TIMEOUT = 600
#: Matching lines a ``grep`` call shows at most.
MAX_GREP_HITS = 500
#: At most this many "searched only in part" notes in one grep answer (the rest counted).
MAX_CUT_NOTES = 5


def _on_disk(rel: str) -> str:
    """A recorded path as it is on disk: the held secrets' values in place of their placeholders."""
    try:
        return str(reveal_secrets(rel))
    except MissingSecretError:  # not held by this run: no such file can be checked
        return rel


class OutputLines:
    """A command's output as ``tool.output`` progress records, one per line, as it is read.

    Only the first ``limit`` bytes are reported (the rest of a long output goes unreported: a
    record per line of an endless output would cost more than the command); a line longer than
    ``limit`` is reported in pieces.

    Args:
        call_id: The tool call's id (named in the records).
        limit: Bytes of output reported at most.
    """

    def __init__(self, call_id: str, limit: int):
        self.call_id, self.left, self.partial = call_id, limit, b""

    def __call__(self, chunk: bytes) -> None:
        """Report the whole lines ``chunk`` completes (within the limit)."""
        if self.left <= 0:
            return
        chunk = chunk[: self.left]
        self.left -= len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            self._send(line + b"\n")
        if self.left <= 0 or len(self.partial) >= 65536:
            self.flush()

    def flush(self) -> None:
        """Report the line not yet ended, if any."""
        if self.partial:
            self._send(self.partial)
            self.partial = b""

    def _send(self, line: bytes) -> None:
        report_progress("tool.output", self.call_id, "run_command", line=line.decode("utf-8", errors="replace"))


_S = {"type": "string"}
_I = {"type": "integer"}


class WorkspaceTools:
    """The workspace tool executor: reads, writes, patches and commands in one folder.

    The tools are ``list_dir``, ``read_file`` (line ranges), ``grep`` (regex, path glob),
    ``write_file``, ``apply_patch`` (unified diff) and ``run_command`` (argv list, no shell).

    It also offers ``search_history``, which the tool node answers. Reads are ``low`` risk; writes
    ``medium``, ``high`` for config, CI, build, secret or executable files; commands per program.
    A command runs in a session of its own, its output kept up to ``output_limit`` bytes; its
    process group is killed when it returns or times out, and children get ``PR_SET_PDEATHSIG``
    (Linux, through util-linux ``setpriv``), so they die with a killed parent. An error is
    resolved only by a later success of the same tool with the same arguments
    (``strict_resolution``); :meth:`execute` takes the task's file scopes (``accepts_scopes``).

    Args:
        root: The workspace folder.
        programs: The bare program names ``run_command`` may start.
        timeout: Default seconds per command.
        receipts_dir: Where command receipts live; default ``<root>/.taskctx/receipts`` (the CLI
            uses a folder per task beside the database).
        output_limit: Bytes of a command's output kept (the first and last halves; of the rest
            only its size and the whole output's sha256, :class:`~nodes.workspace.process.BoundedOutput`).
        artifacts: Where a finished command's receipt stores its output (the receipt then holds
            the ref); None: the receipt holds the output itself.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """

    strict_resolution = True
    accepts_scopes = True

    def __init__(
        self,
        root: str | Path,
        *,
        programs: Sequence[str] = DEFAULT_PROGRAMS,
        timeout: int = 120,
        receipts_dir: str | Path | None = None,
        output_limit: int = OUTPUT_LIMIT,
        artifacts: ArtifactStoreProtocol | None = None,
    ):
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise FileNotFoundError(f"workspace {root} is not a folder")
        self.root = real
        self.programs = frozenset(p for p in programs if p not in FORBIDDEN_PROGRAMS)
        self.timeout = timeout
        self.receipts_dir = Path(receipts_dir) if receipts_dir else real / ".taskctx" / "receipts"
        self.output_limit = output_limit
        #: Where writes make their temp files (the same file system as the workspace).
        self.staging = real / ".taskctx" / "staging"
        self.artifacts = artifacts

    # protocol ---------------------------------------------------------------------------
    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI-format schemas of the workspace tools and ``search_history``."""
        return [
            function_schema(
                "list_dir", "List a folder of the workspace (paths relative to its root).", {"path": _S, "depth": _I}
            ),
            function_schema(
                "read_file",
                "Read a text file; optional 1-based inclusive line range.",
                {"path": _S, "start_line": _I, "end_line": _I},
                ["path"],
            ),
            function_schema(
                "grep",
                "Search files for a Python regex; optional folder and file glob (e.g. *.py).",
                {"pattern": _S, "path": _S, "glob": _S},
                ["pattern"],
            ),
            function_schema(
                "write_file", "Write (create or replace) a text file.", {"path": _S, "content": _S}, ["path", "content"]
            ),
            function_schema(
                "apply_patch", "Apply a unified diff (--- a/path, +++ b/path, @@ hunks).", {"patch": _S}, ["patch"]
            ),
            function_schema(
                "run_command",
                "Run a program with an argv list (no shell), in the workspace root.",
                {"argv": {"type": "array", "items": _S}, "timeout": _I},
                ["argv"],
            ),
            SEARCH_HISTORY_SCHEMA,  # read_artifact is offered by the executor node itself
        ]

    def has_side_effects(self, tool: str) -> bool:
        """Whether ``tool`` changes anything: ``write_file``, ``apply_patch`` and ``run_command``.

        Args:
            tool: The tool's name.

        Returns:
            True for the tools of :data:`SIDE_EFFECT_TOOLS`.
        """
        return tool in SIDE_EFFECT_TOOLS

    # policy -----------------------------------------------------------------------------
    def resolve(
        self, path: Any, scopes: Sequence[str] = (), *, write: bool = False, kind: str = "any"
    ) -> tuple[Path, str]:
        """The real path and workspace-relative path of ``path`` (:func:`nodes.workspace.paths.resolve`).

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
        return resolve(self.root, path, scopes, write=write, kind=kind)

    def command_policy(self, argv: Any, scopes: Sequence[str] = ()) -> tuple[list[str], str, str]:
        """The argv to exec, risk and reason of a command (:func:`~nodes.workspace.commands.command_policy`).

        Args:
            argv: The call's ``argv``.
            scopes: The task's file scopes.

        Returns:
            ``(argv to exec, risk, reason)``.

        Raises:
            PolicyError: The command is refused.
        """
        return command_policy(argv, scopes, root=self.root, programs=self.programs)

    def check(self, tool: str, args: dict[str, Any], scopes: Sequence[str] = ()) -> tuple[str, str, tuple[str, ...]]:
        """The risk, reason and written paths of a call (what :func:`nodes.permissions.assess` asks).

        Args:
            tool: The tool's name.
            args: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            ``(risk, reason, paths the call writes)``.

        Raises:
            PolicyError: The call is refused.
        """
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
            risk, reason = write_risk([rel])
            return risk, reason, (rel,)
        if tool == "apply_patch":
            rels = self._patch_paths(args, scopes)
            risk, reason = write_risk(rels)
            return risk, reason, tuple(rels)
        if tool == "run_command":
            _, risk, reason = self.command_policy(args.get("argv"), scopes)
            t = args.get("timeout")
            if t is not None and (not isinstance(t, int) or not 0 < t <= MAX_TIMEOUT):
                raise PolicyError(f"timeout must be 1..{MAX_TIMEOUT} seconds")
            return risk, reason, ()
        raise PolicyError(f"{tool} is not a workspace tool")

    def _patch_paths(self, args: dict[str, Any], scopes: Sequence[str]) -> list[str]:
        """The files a patch writes, relative, once each.

        ``PolicyError`` for a patch that does not parse, deletes or renames a file, or names a path the
        path rules refuse.
        """
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
        return list(dict.fromkeys(rels))

    # freshness --------------------------------------------------------------------------
    def head(self) -> str | None:
        """The git HEAD commit of the workspace, read from ``.git`` without a git process.

        Returns:
            40 hex digits (from ``.git/HEAD``, its ref file or ``packed-refs``), or None when the
            workspace is not a git repository.
        """
        git = self.root / ".git"
        try:
            ref = (git / "HEAD").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not ref.startswith("ref: "):
            return ref or None
        name = ref[5:].strip()
        try:
            return (git / name).read_text(encoding="utf-8").strip() or None
        except OSError:
            pass
        try:
            for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
                if line.endswith(" " + name):
                    return line.split(" ", 1)[0]
        except OSError:
            pass
        return None

    def fingerprint(self, paths: Iterable[str]) -> tuple[dict[str, str], str | None]:
        """What the workspace holds now: what the first node after a resume compares with the facts.

        Args:
            paths: Workspace-relative paths, as recorded (a held secret's placeholder in a name is
                its value on disk: :func:`context.held_secrets.reveal_secrets`).

        Returns:
            ``({path: sha256 hex of its bytes, "" when gone}, HEAD commit or None)``.
        """
        return {rel: file_sha256(self.root / _on_disk(rel)) for rel in paths}, self.head()

    # execution --------------------------------------------------------------------------
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> ToolOutcome:
        """Run one call; the policy is checked again here, and a refusal is an ``error`` outcome.

        Args:
            call_id: The call's id (its command receipt's key).
            tool: The tool's name.
            arguments: The call's arguments.
            scopes: The task's file scopes.

        Returns:
            The outcome, with the HEAD commit (``head``) and the shas of the files read or written.
        """
        try:
            self.check(tool, arguments, scopes)
            fn = getattr(self, f"_t_{tool}", None)
            if fn is None:
                return ToolOutcome("error", f"unknown tool {tool!r}")
            out: ToolOutcome = fn(call_id, arguments, scopes)
            return replace(out, head=self.head())
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
                    try:  # shown only when the link and what it points at are in scope
                        self.resolve(r, scopes)
                    except PolicyError:
                        continue
                    out.append(f"{r}@")
                elif entry.is_dir():
                    if dir_may_hold_scope(r, scopes):
                        out.append(f"{r}/")
                        if level < depth:
                            walk(entry, level + 1)
                elif in_scope(r, scopes):
                    out.append(r)

        walk(real, 1)
        return ToolOutcome("ok", "\n".join(out) + "\n" if out else "(empty)\n", "other", rel)

    def _t_read_file(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path"), scopes, kind="file")
        if not real.is_file():
            return ToolOutcome("error", f"error: {rel}: No such file", "file_read", rel)
        if real.stat().st_size > MAX_READ_BYTES:
            return ToolOutcome(
                "error", f"error: {rel} is larger than {MAX_READ_BYTES} bytes; read a line range with grep first"
            )
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
        return ToolOutcome("ok", text, "file_read", rel, reads=((rel, sha256_hex(data)),))

    def _t_grep(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path", ".") or ".", scopes)
        rx = re.compile(str(a.get("pattern", "")))
        glob = a.get("glob")
        hits: list[str] = []
        cuts: list[str] = []
        reads: dict[str, str] = {}
        files = [real] if real.is_file() else []
        if real.is_dir():
            for d, dirs, names in os.walk(real, followlinks=False):
                dirs[:] = sorted(x for x in dirs if x not in (".git", ".taskctx", "__pycache__"))
                files += [Path(d) / n for n in sorted(names)]
        for f in files:
            if f.is_symlink() or not f.is_file():
                continue
            r = f.relative_to(self.root).as_posix()
            if not in_scope(r, scopes):
                continue
            if glob and not (glob_match(r, glob) if "/" in glob else fnmatchcase(f.name, glob)):
                continue
            try:
                found, cut = grep_file(f, rx, MAX_GREP_HITS - len(hits))
            except OSError:
                continue
            if cut:
                cuts.append(f"{quote_name(r)}: {cut}")
            if found:
                hits += [f"{r}:{n}: {line}" for n, line in found]
                reads[r] = file_sha256(f)
            if len(hits) >= MAX_GREP_HITS:
                break
        out = "\n".join(hits) + "\n" if hits else "(no matches)\n"
        if cuts:  # a bound left text unsearched: no match there is not known to be absent
            out += "".join(f"note: {c}; use run_command (e.g. grep) to search the rest\n" for c in cuts[:MAX_CUT_NOTES])
            if len(cuts) > MAX_CUT_NOTES:
                out += f"note: {len(cuts) - MAX_CUT_NOTES} more files were searched only in part\n"
        return ToolOutcome("ok", out, "search", rel, reads=tuple(reads.items()))

    def _t_write_file(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        real, rel = self.resolve(a.get("path"), scopes, write=True, kind="file")
        data = str(a["content"]).encode("utf-8")
        atomic_write(real, data, self._staging())
        sha = sha256_hex(data)
        return ToolOutcome(
            "ok", f"wrote {rel}: {len(data)} bytes, sha256 {sha[:12]}", "command", rel, rel, written=((rel, sha),)
        )

    def patch_plan(self, a: dict[str, Any], scopes: Sequence[str]) -> list[tuple[Path, str, FilePatch, str | None]]:
        """``(real path, relative path, file patch, current text or None)`` per file of ``a["patch"]``.

        Args:
            a: The ``apply_patch`` call's arguments.
            scopes: The task's file scopes.

        Returns:
            One tuple per file.

        Raises:
            PatchError: The patch does not parse.
            PolicyError: It names a refused path.
        """
        out = []
        for fp in parse_unified_diff(str(a.get("patch", ""))):
            real, rel = self.resolve(fp.new_path, scopes, write=True, kind="file")
            cur = real.read_text(encoding="utf-8") if real.is_file() else None
            out.append((real, rel, fp, cur))
        return out

    def _t_apply_patch(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        plan = self.patch_plan(a, scopes)
        results = []
        for real, rel, fp, cur in plan:
            if fp.old_path is not None and cur is None:
                raise PatchError(f"{rel} does not exist")
            if fp.old_path is None and cur is not None:
                raise PatchError(f"{rel} already exists (the patch creates it)")
            results.append((real, rel, apply_unified_diff(cur, fp), len(fp.hunks)))
        for real, _, text, _ in results:  # all hunks checked before anything is written
            atomic_write(real, text.encode("utf-8"), self._staging())
        desc = ", ".join(f"{rel} ({n} hunk{'s' if n != 1 else ''})" for _, rel, _, n in results)
        rels = tuple(rel for _, rel, _, _ in results)
        written = tuple((rel, sha256_hex(text.encode("utf-8"))) for _, rel, text, _ in results)
        return ToolOutcome("ok", f"patched {desc}", "command", rels[0], rels[0], rels, written=written)

    def receipt(self, call_id: str) -> Path:
        """The receipt file of a ``run_command`` call (:func:`~nodes.workspace.interrupted.receipt_path`).

        Args:
            call_id: The call's id.

        Returns:
            The receipt's path.
        """
        return receipt_path(self.receipts_dir, call_id)

    def _t_run_command(self, call_id: str, a: dict[str, Any], scopes: Sequence[str]) -> ToolOutcome:
        argv, _, _ = self.command_policy(a.get("argv"), scopes)
        timeout = int(a.get("timeout") or self.timeout)
        receipt = self.receipt(call_id)
        receipt.parent.mkdir(parents=True, exist_ok=True)
        shown = " ".join(a["argv"])
        mark = uuid.uuid4().hex  # every process of this run carries it (RUN_MARK), so what it leaves can be ended
        write_receipt(receipt, {"call_id": call_id, "argv": a["argv"], "status": "started", "run_mark": mark})
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.receipts_dir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "NO_COLOR": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "TERM": "dumb",
            RUN_MARK: mark,
        }
        lines = OutputLines(call_id, self.output_limit)
        done = run_bounded(argv, cwd=self.root, env=env, timeout=timeout, limit=self.output_limit, on_output=lines)
        lines.flush()
        out, rc = done.output, done.returncode
        if rc is None:  # killed: its last line may end inside a secret, too short now for its shape
            out, rc = mask_cut_end(out) + f"\nerror: timed out after {timeout}s\n", -9
        text = f"$ {shown}\n{out}" + ("" if out.endswith("\n") or not out else "\n") + f"[exit code {rc}]\n"
        finished: dict[str, Any] = {"call_id": call_id, "argv": a["argv"], "status": "finished", "returncode": rc}
        if self.artifacts is not None:
            finished["output_ref"] = self.artifacts.put(text)
        else:
            finished["output"] = text
        write_receipt(receipt, finished)
        return ToolOutcome("ok" if rc == 0 else "error", text, "command")

    # recovery ---------------------------------------------------------------------------
    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Sequence[str] = ()) -> Recovery:
        """Check an interrupted call with side effects against the workspace.

        See :func:`~nodes.workspace.interrupted.recover`. Temp files an interrupted write left in
        :attr:`staging` are removed first.

        Args:
            call_id: The call's id.
            tool: Its tool.
            arguments: Its arguments.
            scopes: The task's file scopes.

        Returns:
            What was found: ``done``, ``retry`` or ``ask``.
        """
        staging = self._staging()
        if staging is not None:
            clear_staging(staging)
        for folder in self._write_folders(tool, arguments, scopes):  # a write that fell back beside its file
            clear_staging(folder, only_temp=True)
        return recover(self, call_id, tool, arguments, scopes)

    def _staging(self) -> Path | None:
        """:attr:`staging` when it is a folder of the workspace, else None (temp files beside each file).

        None when ``.taskctx`` or its ``staging`` is a symlink or leads outside the workspace (a
        cloned repository can ship one: the temp files, a secret file's bytes among them, would be
        made and removed wherever it points).
        """
        s = self.staging
        if s.parent.is_symlink() or s.is_symlink():
            return None
        try:
            s.resolve().relative_to(self.root)
        except (OSError, ValueError):
            return None
        return s

    def _write_folders(self, tool: str, arguments: dict[str, Any], scopes: Sequence[str]) -> list[Path]:
        """The folders of the files a ``write_file`` / ``apply_patch`` call writes (none for another tool, or a bad path)."""
        try:
            if tool == "write_file":
                return [self.resolve(arguments.get("path"), scopes, write=True, kind="file")[0].parent]
            if tool == "apply_patch":
                return sorted({real.parent for real, _, _, _ in self.patch_plan(arguments, scopes)})
        except (PolicyError, PatchError, OSError, ValueError):
            return []
        return []
