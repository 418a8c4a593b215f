"""How a command starts: the program looked up first, and no Python code between fork and exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes.workspace.process import run_bounded


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath)}


def test_a_missing_program_raises_as_popen_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        run_bounded(["no-such-program-here"], cwd=tmp_path, env=_env(), timeout=5)
    assert err.value.filename == "no-such-program-here"
    with pytest.raises(FileNotFoundError):
        run_bounded(["./missing.sh"], cwd=tmp_path, env=_env(), timeout=5)


def test_a_non_executable_program_raises_permission_error(tmp_path: Path) -> None:
    (tmp_path / "script.sh").write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(PermissionError) as err:
        run_bounded(["./script.sh"], cwd=tmp_path, env=_env(), timeout=5)
    assert err.value.filename == "./script.sh"
    (tmp_path / "script.sh").chmod(0o755)
    done = run_bounded(["./script.sh"], cwd=tmp_path, env=_env(), timeout=5)
    assert (done.returncode, done.output) == (0, "hi\n")


_PARENT = """
import os, sys, time
from pathlib import Path
from nodes.workspace.process import run_bounded
print(os.getpid(), flush=True)
run_bounded(["sh", "-c", "echo $$ > child.pid; exec sleep 60"], cwd=Path(sys.argv[1]),
            env={"PATH": os.environ["PATH"]}, timeout=120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_command_dies_with_its_killed_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pid_file = tmp_path / "child.pid"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet is dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status
