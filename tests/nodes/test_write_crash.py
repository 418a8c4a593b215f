"""A kill at the rename of a write leaves no temp file in the user's workspace; a retry completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.workspace import WorkspaceTools

_KILLED_AT_RENAME = """
import json, os, signal, sys
from nodes.workspace import WorkspaceTools
ws = WorkspaceTools(sys.argv[1], receipts_dir=sys.argv[2])
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # killed at the rename
ws.execute("c1", sys.argv[3], json.loads(sys.argv[4]))
"""

PATCH = "--- a/proxy/nginx.conf\n+++ b/proxy/nginx.conf\n@@ -1 +1 @@\n-client_max_body_size 1m;\n+client_max_body_size 20m;\n"


def _killed(script: str, root: Path, tmp_path: Path, tool: str, args: dict) -> None:
    """Run the call in a child process that ``script`` kills (SIGKILL) inside the write."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(root), str(tmp_path / "r"), tool, json.dumps(args)],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr


def _leftovers(root: Path) -> list[str]:
    """Temp files of a write anywhere in the workspace but its ``.taskctx/`` folder."""
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob(".taskctx-*") if p.relative_to(root).parts[0] != ".taskctx"
    )


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "proxy/nginx.conf", "content": "client_max_body_size 20m;\n"}),
        ("write_file", {"path": ".env", "content": "SECRET=new\n"}),
        ("apply_patch", {"patch": PATCH}),
    ],
    ids=["write", "secret-file", "patch"],
)
def test_a_kill_at_the_rename_leaves_no_temp_file(tmp_path: Path, tool: str, args: dict) -> None:
    root = tmp_path / "ws"
    (root / "proxy").mkdir(parents=True)
    (root / "proxy" / "nginx.conf").write_text("client_max_body_size 1m;\n")
    (root / ".env").write_text("SECRET=old\n")
    _killed(_KILLED_AT_RENAME, root, tmp_path, tool, args)
    assert _leftovers(root) == []  # nothing beside the file
    staged = list((root / ".taskctx" / "staging").iterdir())
    assert [p.name[:9] for p in staged] == [".taskctx-"]
    assert (root / "proxy" / "nginx.conf").read_text() == "client_max_body_size 1m;\n"  # the old file, whole
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "r")
    assert ws.recover("c1", tool, args).state == "retry"
    assert list((root / ".taskctx" / "staging").iterdir()) == []  # recovery removed the leftover
    out = ws.execute("c1", tool, args)
    assert out.status == "ok", out.output
    want = args.get("content") or "client_max_body_size 20m;\n"
    assert (root / (args.get("path") or "proxy/nginx.conf")).read_text() == want
    assert _leftovers(root) == [] and list((root / ".taskctx" / "staging").iterdir()) == []


def test_a_failed_rename_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "r")

    def fail(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    out = ws.execute("c1", "write_file", {"path": "a.txt", "content": "x\n"})
    assert (out.status, out.output) == ("error", "error: Input/output error")
    assert not (root / "a.txt").exists() and list((root / ".taskctx" / "staging").iterdir()) == []


_KILLED_AT_THE_FALLBACK = """
import errno, json, os, signal, sys
from nodes.workspace import WorkspaceTools
ws = WorkspaceTools(sys.argv[1], receipts_dir=sys.argv[2])

def replace(src, dst):
    if "/.taskctx/staging/" in str(src):  # the folder is another file system (a mount, a volume)
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    os.kill(os.getpid(), signal.SIGKILL)  # killed at the rename beside the file

os.replace = replace
ws.execute("c1", sys.argv[3], json.loads(sys.argv[4]))
"""


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "proxy/nginx.conf", "content": "client_max_body_size 20m;\n"}),
        ("apply_patch", {"patch": PATCH}),
    ],
    ids=["write", "patch"],
)
def test_a_kill_after_the_fallback_beside_the_file_is_cleaned_by_recovery(
    tmp_path: Path, tool: str, args: dict
) -> None:
    root = tmp_path / "ws"
    (root / "proxy").mkdir(parents=True)
    (root / "proxy" / "nginx.conf").write_text("client_max_body_size 1m;\n")
    (root / "proxy" / ".taskctx-notes").write_text("a file of the user's\n")  # not a temp file's name
    _killed(_KILLED_AT_THE_FALLBACK, root, tmp_path, tool, args)
    (temp,) = [p for p in _leftovers(root) if p != "proxy/.taskctx-notes"]
    assert temp.startswith("proxy/.taskctx-") and len(temp) == len("proxy/.taskctx-") + 8
    assert (root / "proxy" / "nginx.conf").read_text() == "client_max_body_size 1m;\n"
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "r")
    assert ws.recover("c1", tool, args).state == "retry"
    assert _leftovers(root) == ["proxy/.taskctx-notes"]  # the temp file removed, the user's file kept


def test_a_taskctx_symlink_never_stages_writes_outside_the_workspace(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "proxy").mkdir(parents=True)
    outside.mkdir()
    (outside / ".taskctx-keepme").write_text("not ours\n")
    (root / ".taskctx").symlink_to(outside, target_is_directory=True)  # as a cloned repository can ship it
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "r")
    out = ws.execute("w1", "write_file", {"path": "proxy/a.conf", "content": "new\n"})
    assert out.status == "ok", out.output
    assert (root / "proxy" / "a.conf").read_text() == "new\n"
    assert sorted(p.name for p in outside.iterdir()) == [".taskctx-keepme"]  # no staging/ made there
    assert ws.recover("w1", "write_file", {"path": "proxy/a.conf", "content": "new\n"}).state == "done"
    assert (outside / ".taskctx-keepme").exists()  # recovery removed nothing where the link points
    assert _leftovers(root) == []
