"""A fork's workspace: a copy of the parent's with the parent's own changes after the fork undone.

:func:`copy_at_fork` copies the parent's workspace (its registry row's ``workspace``) and sets each
file the parent changed after the fork (its ``file.modified`` events) back to its bytes at the
fork, file by file, each checked against the recorded hashes. When the parent is itself a fork
that shares its own parent's workspace, that ancestor's changes after the fork point of its child
are in the folder too, and so on up the lineage while the folder is the same: they are undone
with the parent's, all of a file's changes taken in the order they were made (their timestamps).

* the file must still hold the bytes of the parent's last change to it (the ``sha256`` that change
  recorded); a file something else changed since is named in ``left`` and kept as it is;
* the bytes it had before the parent's first change after the fork are the ones the task last
  saw of it (``evidence.world`` at the fork, then the reads and noticed hand edits up to that
  change); they come from the artifact store (content-addressed by that sha) or from un-applying
  the parent's patches one by one, each result checked against the sha the change before it
  recorded; bytes that cannot be had that way are never guessed: the file is named in ``left``.

Changes that left no ``file.modified`` (what a command did to files the task never saw) are not
known, so not undone; :func:`side_effects_after` lists the parent's side effects after the fork
(the calls that ran).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context import ArtifactNotFoundError, Event, InvalidInputError, TaskContext
from context.text import counted

__all__ = [
    "NOT_UNDONE",
    "WorkspaceCopy",
    "copy_at_fork",
    "no_workspace",
    "shared_side_effects",
    "side_effects_after",
]

#: What a refused workspace copy says to do instead, for the CLI and Python callers alike.
_NO_COPY = "fork without the workspace copy (no --workspace-at-fork, or workspace_at_fork=False)"

#: How inspect heads the parent's side effects after the fork, for a child that shares the workspace.
NOT_UNDONE = "happened in the parent after the fork; not undone"


def no_workspace(spec: dict[str, Any] | None, parent: str) -> str | None:
    """The workspace line of a fork whose registry row names no workspace (a replayed task's), else None.

    Args:
        spec: The child's registry row (the parent's, copied; None: it has none, a Python-API task,
            whose workspace is not known).
        parent: The parent.

    Returns:
        ``workspace: none (...)``, or None when the row names one or there is no row.
    """
    if spec is None or spec.get("workspace"):
        return None
    return f"workspace: none (task {parent} has no workspace, so the child shares none and nothing is undone)"


@dataclass
class WorkspaceCopy:
    """The child's workspace copy.

    Attributes:
        root: The copy.
        spec: The registry row keys it changes (``workspace``, ``receipts``).
        restored: The files set back to their bytes at the fork.
        left: Path -> why it was left as it is.
        made: The folders it filled (removed again when the fork fails).
        kept_root: ``root`` was an empty folder given for it (emptied, not removed, when the fork fails).
    """

    root: Path
    spec: dict[str, str]
    restored: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    made: list[Path] = field(default_factory=list)
    kept_root: bool = False

    def remove(self) -> None:
        """Delete the folders this copy made (the workspace copy and its receipts), for a fork that failed."""
        for folder in self.made:
            if folder == self.root and self.kept_root:
                for p in list(folder.iterdir()) if folder.is_dir() else []:
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink()
            else:
                shutil.rmtree(folder, ignore_errors=True)


def _sha(data: bytes | None) -> str:
    return "" if data is None else hashlib.sha256(data).hexdigest()


#: How far before a fork point the calls made there are looked for (events): a call made in the
#: node run that ended at the fork can have its result, so run, after it.
_BEFORE = 400


def _calls(events: Any, task_id: str, after: int, state: TaskContext | None = None) -> dict[str, dict[str, Any]]:
    """Call id -> ``{tool, arguments, has_side_effects, seq}`` of the calls made after ``after``, and of
    those made shortly before it (``seq`` at or before ``after``; their results may come after), else
    named by ``state``'s transcript (``seq`` 0)."""
    out: dict[str, dict[str, Any]] = {}
    if state is not None:
        for r in state.evidence.recent_tool_calls:
            out[r.id] = {"tool": r.tool, "arguments": r.arguments, "has_side_effects": False, "seq": 0}
    for e in events.iter(task_id, after=max(0, after - _BEFORE), kinds=["tool.called"]):
        out[e.payload["call_id"]] = {**e.payload, "seq": e.seq}
    return out


def _ran(events: Any, task_id: str, seq: int) -> tuple[dict[str, int], dict[str, int]]:
    """``(ran, started)`` of the calls answered after ``seq``, call id -> seq: those with a result that was
    not a refusal (its seq), and those granted that have no result (the grant's; a parent stopped
    inside the call: it may have run)."""
    results: dict[str, tuple[str, int]] = {}
    refused: set[str] = set()
    granted: dict[str, int] = {}
    kinds = ["tool.result.received", "permission.denied", "permission.granted"]
    for e in events.iter(task_id, after=seq, kinds=kinds, fields=["call_id", "status"]):
        cid = e.payload["call_id"]
        if e.kind == "tool.result.received":
            results[cid] = (e.payload.get("status") or "ok", e.seq)
        elif e.kind == "permission.denied":
            refused.add(cid)
        else:
            granted[cid] = e.seq
    ran = {cid: n for cid, (status, n) in results.items() if status != "denied" and cid not in refused}
    return ran, {cid: n for cid, n in granted.items() if cid not in refused and cid not in results}


def side_effects_after(events: Any, task_id: str, seq: int, state: TaskContext | None = None) -> list[str]:
    """The parent's side effects after a fork point, one line each.

    Only calls that ran count: a call refused (``permission.denied``, a ``denied`` result) or
    never run is not a side effect; a call granted that has no result yet (the parent stopped
    inside it) may have run, and is listed as such.

    Args:
        events: The event log.
        task_id: The parent.
        seq: The fork seq.
        state: The parent's state at ``seq`` (names the tools of calls made before it).

    Returns:
        ``seq <n>: <path> changed by <tool> (call <id>)`` per ``file.modified``, ``seq <n>: <tool>
        <arguments> (call <id>)`` per call with side effects that ran and recorded no file, and
        ``seq <n>: <tool> <arguments> (call <id>; started, no result recorded: it may have run)``
        per such call granted without a result; by seq. A call made before the fork point (in the
        node run that ended there) and run after it is one of them, at its result's (or grant's)
        seq, noted ``made at seq <m> before the fork`` (on its file's line when it changed one).
    """
    calls = _calls(events, task_id, seq, state)
    ran, started = _ran(events, task_id, seq)
    out: list[tuple[int, str]] = []
    changed: set[str] = set()
    for e in events.iter(task_id, after=seq, kinds=["file.modified"]):
        cid = e.payload.get("call_id") or ""
        tool = calls[cid]["tool"] if cid in calls else "a call"
        made = calls[cid]["seq"] if cid in calls else seq + 1
        note = "" if made > seq else f", made at seq {made} before the fork" if made else ", made before the fork"
        out.append((e.seq, f"seq {e.seq}: {e.payload['path']} changed by {tool} (call {cid}{note})"))
        changed.add(cid)
    for cid, c in calls.items():
        if c.get("has_side_effects") and cid not in changed and (cid in ran or cid in started):
            args = " ".join(str(c.get("arguments", "")).split())
            args = args if len(args) <= 100 else args[:97] + "..."
            note = "" if cid in ran else "; started, no result recorded: it may have run"
            at = c["seq"]
            if at <= seq:  # made before the fork point, run after it
                at, note = ran.get(cid) or started[cid], f", made at seq {c['seq']} before the fork{note}"
            out.append((at, f"seq {at}: {c['tool']} {args} (call {cid}{note})"))
    return [line for _, line in sorted(out)]


@dataclass(frozen=True)
class _Change:
    """One ``file.modified`` of the workspace after the fork, and whose it is.

    Attributes:
        event: The event.
        task: The task whose log holds it (the parent, or an ancestor that shares its workspace).
        after: The seq after which that task's changes count (the fork point in its log).
        calls: Call id -> the call (``_calls``) of that task's log after ``after``.
        who: ``the parent`` or ``task 'x'``, for the messages.
    """

    event: Event
    task: str
    after: int
    calls: dict[str, dict[str, Any]]
    who: str

    @property
    def whose(self) -> str:
        """``the parent's`` or ``task 'x''s``."""
        return f"{self.who}'s"


def _sharing(stores: Any, parent: str, seq: int, src: Path) -> list[tuple[str, int]]:
    """``(task, seq)`` of each log whose changes after ``seq`` are in the workspace ``src``: the parent's after
    the fork, then each ancestor's that shares that workspace after the fork point of its child."""
    out, task, seen = [(parent, seq)], parent, {parent}
    where = src.resolve()
    while (lin := stores.events.lineage(task)) is not None and lin.parent not in seen:
        spec = stores.tasks.get(lin.parent) or {}
        if not spec.get("workspace") or Path(str(spec["workspace"])).resolve() != where:
            break  # the ancestor's workspace is another folder (this one is a copy made at a fork)
        out.append((lin.parent, lin.fork_seq))
        task = lin.parent
        seen.add(task)
    return out


def _changes(project: Any, parent: str, seq: int, state: TaskContext, src: Path) -> dict[str, list[_Change]]:
    """Path -> the changes to it after the fork in the workspace ``src``, through the lineage, oldest first."""
    events = project.stores.events
    out: dict[str, list[tuple[tuple[str, int, int], _Change]]] = {}
    for rank, (task, after) in enumerate(_sharing(project.stores, parent, seq, src)):
        found = list(events.iter(task, after=after, kinds=["file.modified"]))
        if not found:
            continue
        calls = _calls(events, task, after, state if task == parent else None)
        who = "the parent" if task == parent else f"task {task!r}"
        for e in found:
            key = (str(e.timestamp), -rank, e.seq)  # by time; an ancestor's first at the same instant
            out.setdefault(e.payload["path"], []).append((key, _Change(e, task, after, calls, who)))
    return {path: [c for _, c in sorted(found, key=lambda kc: kc[0])] for path, found in out.items()}


def shared_side_effects(stores: Any, parent: str, seq: int, state: TaskContext | None = None) -> list[str]:
    """The side effects in a shared workspace after a fork point, through the lineage, one line each.

    The parent's after ``seq`` (:func:`side_effects_after`), then, while the parent shares its own
    parent's workspace (the same folder in their registry rows), that ancestor's after the fork
    point of its child, and so on up: they all happened in the folder the child shares.

    Args:
        stores: The project's stores (``events``, ``tasks``).
        parent: The parent.
        seq: The fork seq.
        state: The parent's state at ``seq`` (names the tools of calls made before it).

    Returns:
        The parent's lines, then each ancestor's prefixed ``task '<id>', ``.
    """
    out = side_effects_after(stores.events, parent, seq, state)
    spec = stores.tasks.get(parent) or {}
    if spec.get("workspace"):
        for task, after in _sharing(stores, parent, seq, Path(str(spec["workspace"])))[1:]:
            out += [f"task {task!r}, {line}" for line in side_effects_after(stores.events, task, after)]
    return out


def _known_before(events: Any, task_id: str, state: TaskContext, seq: int, first: int, path: str) -> str:
    """The sha of ``path`` the task last saw before seq ``first`` (its world at ``seq``, then reads and hand edits)."""
    sha = state.evidence.world.get(path, "")
    span = first - seq - 1
    if span <= 0:
        return sha
    seen: list[tuple[int, str]] = []
    for e in events.iter(task_id, after=seq, limit=span, kinds=["tool.result.received"], fields=["reads"]):
        if path in (e.payload.get("reads") or {}):
            seen.append((e.seq, e.payload["reads"][path]))
    for e in events.iter(task_id, after=seq, limit=span, kinds=["fact.stale"]):
        if e.payload["path"] == path and e.payload.get("new_sha"):
            seen.append((e.seq, e.payload["new_sha"]))
    seen = [s for s in seen if s[0] < first]
    return max(seen)[1] if seen else sha


def _unpatched(now: bytes, changes: list[_Change], target: str) -> bytes | None:
    """``now`` with the changes' patches un-applied, last first, each step checked against the shas; None: cannot."""
    from nodes.workspace.patch import PatchError, apply_unified_diff, parse_unified_diff

    data = now
    for i in range(len(changes) - 1, -1, -1):
        c = changes[i].event
        call = changes[i].calls.get(c.payload.get("call_id") or "")
        if call is None or call["tool"] != "apply_patch":
            return None
        try:
            patch = json.loads(call["arguments"]).get("patch", "")
            fps = [fp for fp in parse_unified_diff(str(patch)) if fp.path == c.payload["path"]]
            if len(fps) != 1 or fps[0].old_path is None:
                return None
            data = apply_unified_diff(data.decode("utf-8"), fps[0], reverse=True).encode("utf-8")
        except (PatchError, ValueError, UnicodeDecodeError):
            return None
        want = changes[i - 1].event.payload.get("sha256", "") if i else target
        if _sha(data) != want:
            return None
    return data


def _not_a_file(f: Path) -> str:
    """What stands where a file the task changed was, when no regular file is there."""
    if f.is_symlink():
        return "it is a symbolic link now"
    if f.is_dir():
        return "it is a directory now"
    return "it is missing" if not f.exists() else "it is not a regular file now"


def _restore(project: Any, root: Path, path: str, changes: list[_Change], target: str) -> str | None:
    """Set ``root/path`` back to the bytes of sha ``target``; the reason it was left, or None when restored."""
    last, first = changes[-1], changes[0]
    f = root / path
    now = f.read_bytes() if f.is_file() else None
    if not last.event.payload.get("sha256"):
        return f"{last.whose} change to it at seq {last.event.seq} recorded no hash, so its bytes cannot be checked"
    if _sha(now) != last.event.payload["sha256"]:
        what = f"it holds sha256 {_sha(now)[:12]}" if now is not None else _not_a_file(f)
        return (
            f"something else changed it after {last.whose} last change to it (seq {last.event.seq}, sha256 "
            f"{last.event.payload['sha256'][:12]}): {what}; left as it is"
        )
    if not target:
        return f"the task never saw its bytes before {first.who} changed it at seq {first.event.seq}; left as it is"
    try:
        data: bytes | None = project.stores.artifacts.get(f"artifact://sha256:{target}")
    except ArtifactNotFoundError:
        data = _unpatched(now or b"", changes, target)
    if data is None or _sha(data) != target:
        return (
            f"its bytes at the fork (sha256 {target[:12]}) are not in the artifact store and the parent's changes "
            "cannot be un-applied to them; left as it is"
        )
    tmp = f.with_name(f".{f.name}.taskctx-fork")
    tmp.write_bytes(data)
    tmp.replace(f)
    return None


def _receipts(events: Any, task_id: str, seq: int, old: Path, new: Path) -> None:
    """Copy the command receipts of the parent's calls up to ``seq`` (the prefix's) to the child's folder."""
    from nodes.workspace.interrupted import receipt_path

    new.mkdir(parents=True, exist_ok=True)
    for e in events.iter(task_id, limit=seq, kinds=["tool.called"], fields=["call_id"]):
        src = receipt_path(old, e.payload["call_id"])
        if e.seq <= seq and src.is_file():
            shutil.copy2(src, receipt_path(new, e.payload["call_id"]))


def _outside(project: Any, parent: str, src: Path, root: Path) -> None:
    """Refuse a copy at ``root`` that would be written into a task's workspace (it, a folder in it, or
    a folder holding it): the parent's ``src``, which a fork only reads, or any other task's."""
    b = root.resolve()
    others = ((t, (project.stores.tasks.get(t) or {}).get("workspace")) for t in project.stores.tasks.task_ids())
    for task, ws in [(parent, src), *((t, w) for t, w in others if w and t != parent)]:
        a = Path(str(ws)).resolve()
        if a == b or a in b.parents or b in a.parents:
            where = "is" if a == b else "is inside" if a in b.parents else "holds"
            whose = "which a fork only reads; give a folder outside it" if task == parent else "another task's"
            raise InvalidInputError(
                f"the child's workspace {b} {where} the workspace of task {task!r}, {a}, {whose}"
                + ("" if task == parent else "; give a folder outside every task's workspace")
            )


def copy_at_fork(
    project: Any,
    parent: str,
    child: str,
    spec: dict[str, Any],
    seq: int,
    state: TaskContext,
    dest: str | Path | None,
) -> WorkspaceCopy:
    """Copy the parent's workspace for the child, the parent's own changes after ``seq`` undone (see module doc).

    Args:
        project: The project.
        parent: The parent task.
        child: The child task.
        spec: The parent's registry row (``workspace``; ``receipts`` when it has them).
        seq: The fork seq.
        state: The parent's state at ``seq``.
        dest: Where the copy goes (None: beside the parent's workspace, named by the child's id).

    Returns:
        The copy.

    Raises:
        InvalidInputError: The task has no workspace, ``dest`` is in, is, or holds the parent's workspace, or
            it exists and is not empty.
    """
    if not spec.get("workspace"):
        raise InvalidInputError(
            f"task {parent!r} has no workspace in its registry row, so there is none to copy; {_NO_COPY}"
        )
    src = Path(str(spec["workspace"]))
    root = Path(dest) if dest is not None else src.parent / child
    _outside(project, parent, src, root)
    if root.exists() and any(root.iterdir()):
        raise InvalidInputError(f"{root} is not empty; pass an empty or new folder for the child's workspace")
    if not src.is_dir():
        raise InvalidInputError(
            f"task {parent!r}: its workspace {src} is not a folder (moved or deleted?), so there is none to copy; "
            f"put it back, or {_NO_COPY}"
        )
    out = WorkspaceCopy(root.resolve(), {"workspace": str(root.resolve())})
    try:
        _fill(project, parent, child, spec, seq, state, src, out)
    except BaseException:
        out.remove()
        raise
    return out


def _copy_failed(parent: str, src: Path, exc: shutil.Error) -> InvalidInputError:
    """One line for a workspace copy that failed: the first file that could not be copied, and why."""
    failed = [f for f in exc.args[0] if isinstance(f, tuple) and len(f) == 3] if exc.args else []
    if not failed:
        return InvalidInputError(f"task {parent!r}: its workspace {src} could not be copied ({exc}); {_NO_COPY}")
    name, _, why = (str(x) for x in failed[0])
    why = why.replace(f"`{name}` ", "").replace(f": {name!r}", "")
    try:
        rel = str(Path(name).relative_to(src))
    except ValueError:
        rel = name
    more = f" (and {counted(len(failed) - 1, 'other file')})" if len(failed) > 1 else ""
    return InvalidInputError(
        f"task {parent!r}: {rel} in its workspace {src} could not be copied: {why}{more}; move it out of the "
        f"workspace and fork again, or {_NO_COPY}: the child then shares the workspace"
    )


def _fill(*args: Any) -> None:
    """Copy the workspace into ``out.root`` and set the parent's changes after ``seq`` back (:func:`copy_at_fork`)."""
    project, parent, child, spec, seq, state, src, out = args
    root = out.root
    out.kept_root = root.exists()  # an empty folder given: emptied again on failure, not removed
    out.made.append(root)
    try:
        shutil.copytree(src, root, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".taskctx"))
    except shutil.Error as exc:
        raise _copy_failed(parent, src, exc) from None
    if spec.get("receipts"):
        receipts = Path(str(spec["receipts"])).parent / child
        if not receipts.exists():
            out.made.append(receipts)
        _receipts(project.stores.events, parent, seq, Path(str(spec["receipts"])), receipts)
        out.spec["receipts"] = str(receipts.resolve())
    events = project.stores.events
    for path, changes in sorted(_changes(project, parent, seq, state, src).items()):
        first = changes[0]
        # what was last seen of the file before that change, from the fork point on: a fork point in
        # the prefix an ancestor shares (before the parent's own fork point) reads the ancestor's log there
        target = _known_before(events, first.task, state, min(seq, first.after), first.event.seq, path)
        why = _restore(project, out.root, path, changes, target)
        if why is None:
            out.restored.append(path)
        else:
            out.left[path] = why
