"""Bounded output and processes: a huge or endless output in bounded memory, masking across chunk
boundaries, grep that streams, and a command's process group ended with its exit status kept."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from context import SqliteStores
from context.secrets import MASK_CHUNK, mask_secrets, mask_stream, masked_bytes
from nodes.workspace import WorkspaceTools
from nodes.workspace.process import BoundedOutput

MB = 1 << 20
#: Peak resident memory a child running one tool call may reach (kB: its ``VmHWM``; not
#: ``ru_maxrss``, which a child inherits from the process that forked it, here the test run's).
PEAK_KB = 300 * 1024
KEY = "AKIAIOSFODNN7EXAMPLE"


def _block() -> bytes:
    """About 1 MiB of whole log lines, each with an AWS key id and a credential for masking to find."""
    lines, size, i = [], 0, 0
    while size < MB:
        line = f"{i:07d} GET /upload 413 key {KEY} db_password=hunter2hunter2 took {i % 97}ms\n".encode()
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """A workspace with a 300 MiB log (one block written 300 times), the log's sha256 and size."""
    root = tmp_path_factory.mktemp("big") / "ws"
    root.mkdir()
    block, sha = _block(), hashlib.sha256()
    with open(root / "big.log", "wb") as fh:
        for _ in range(300):
            fh.write(block)
            sha.update(block)
    (root / "small.txt").write_text("needle one\nhay\nneedle two\n")
    return root, sha.hexdigest(), 300 * len(block)


_CHILD = r"""
import json, re, sys
from context import SqliteStores, compress_tool_result
from nodes.workspace import WorkspaceTools
root, programs, tool, args = sys.argv[1], sys.argv[2].split(","), sys.argv[3], json.loads(sys.argv[4])
stores = SqliteStores(sys.argv[5])
ws = WorkspaceTools(root, programs=programs, receipts_dir=sys.argv[6], artifacts=stores.artifacts)
out = ws.execute("c1", tool, args)
ref = stores.artifacts.put(out.output)
stored = stores.artifacts.get(ref)
comp = compress_tool_result(stored.decode(), out.kind, ref)
after = ws.execute("c2", "run_command", {"argv": ["echo", "next"]})  # the run goes on
print(json.dumps({"status": out.status, "ref": ref, "chars": len(out.output), "reads": out.reads,
                  "summary": comp.text, "after": after.output,
                  "rss_kb": int(re.search(r"VmHWM:\s*(\d+)", open("/proc/self/status").read()).group(1))}))
"""


def _child(root: Path, tmp: Path, tool: str, args: dict, programs: str = "cat,echo") -> tuple[dict, SqliteStores]:
    db, receipts = tmp / "t.sqlite", tmp / "receipts"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), programs, tool, json.dumps(args), str(db), str(receipts)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), SqliteStores(db)


def test_cat_of_300_mb_is_kept_bounded(big: tuple[Path, str, int], tmp_path: Path) -> None:
    root, sha, size = big
    assert size > 300 * MB
    got, stores = _child(root, tmp_path, "run_command", {"argv": ["cat", "big.log"]})
    print(f"cat of 300 MiB: peak RSS {got['rss_kb'] // 1024} MiB, kept {got['chars']:,} chars")
    assert got["status"] == "ok" and got["rss_kb"] < PEAK_KB
    stored = stores.artifacts.get(got["ref"]).decode()
    assert stored.startswith("$ cat big.log\n0000000 GET /upload 413 key [REDACTED:aws_access_key_id] db_password=")
    assert stored.endswith("[exit code 0]\n")
    assert f"the whole output was {size:,} bytes, sha256 {sha} ...]" in stored
    assert got["chars"] < MB + 300  # the first and last 512 KiB and the line between (before masking)
    assert "AKIA" not in stored and "hunter2" not in stored  # masked, no key cut in half at an edge
    receipts = [json.loads(p.read_text()) for p in (tmp_path / "receipts").glob("*.json")]
    first = next(r for r in receipts if r["argv"] == ["cat", "big.log"])
    assert first == {
        "call_id": "c1",
        "argv": ["cat", "big.log"],
        "status": "finished",
        "returncode": 0,
        "output_ref": got["ref"],  # the receipt refers to the artifact, it holds no copy
    }
    assert got["after"] == "$ echo next\nnext\n[exit code 0]\n"
    stores.close()


def test_bounded_output_keeps_head_tail_count_and_hash() -> None:
    data = b"".join(f"line {i:06d}\n".encode() for i in range(100_000))  # 1,200,000 bytes
    out = BoundedOutput(limit=200_000)
    for i in range(0, len(data), 4096):
        out.add(data[i : i + 4096])
    text = out.text()
    head, rest = text.split("\n[... ", 1)
    note, tail = rest.split(" ...]\n", 1)
    assert head.startswith("line 000000\n") and head.endswith("\n")  # cut at a line's end
    assert tail.startswith("line ") and tail.endswith("line 099999\n")  # from a line's start
    assert len(head.encode()) <= 100_000 and len(tail.encode()) <= 100_000
    gap = len(data) - len(head.encode()) - len(tail.encode())
    lines = data.count(b"\n") - head.count("\n") - tail.count("\n")
    assert note == (
        f"{gap:,} bytes ({lines:,} lines) of output left out here: the whole output was 1,200,000 bytes, "
        f"sha256 {hashlib.sha256(data).hexdigest()}"
    )
    assert data.decode().startswith(head) and data.decode().endswith(tail)
    small = BoundedOutput(limit=200_000)
    small.add(data[:150_000])
    assert small.text() == data[:150_000].decode()  # under the limit: kept whole


def test_a_cut_never_splits_a_secret() -> None:
    # one unbroken line (no line end to cut at) full of keys: the head and tail cuts move off them
    data = (f"x{KEY}" * 40_000).encode()
    for limit in (100_001, 100_007, 100_013):
        out = BoundedOutput(limit=limit)
        out.add(data)
        kept = out.text()
        head, tail = kept.split("\n[... ")[0], kept.split(" ...]\n")[1]
        assert head.rstrip("x").endswith(KEY) and tail.lstrip("x").startswith(KEY), (head[-30:], tail[:30])
        assert mask_secrets(kept).text.count("AKIA") == 0


def test_mask_stream_masks_a_secret_across_every_chunk_boundary() -> None:
    secrets = [
        KEY,
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabcdef\n-----END RSA PRIVATE KEY-----",
    ]
    for secret in secrets:
        text = "word " * 400 + secret + " more" * 400
        whole = mask_secrets(text).text
        assert "[REDACTED:" in whole
        at = text.index(secret)
        for split in range(at - 2, at + len(secret) + 2):
            got = "".join(mask_stream([text[:split], text[split:]], overlap=600))
            assert got == whole, (secret[:10], split)
        pieces = [text[i : i + 333] for i in range(0, len(text), 333)]  # many boundaries at once
        assert "".join(mask_stream(pieces, overlap=600)) == whole


def test_masked_bytes_of_a_long_text_masks_across_its_chunks() -> None:
    pad = "y" * (MASK_CHUNK - 7)
    data = (pad + f" key {KEY} " + "z" * 1000).encode()  # the key spans the first chunk's end
    assert masked_bytes(data) == (pad + " key [REDACTED:aws_access_key_id] " + "z" * 1000).encode()


def test_endless_output_is_kept_bounded_and_the_run_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    line = f"GET /upload key {KEY} db_password=hunter2hunter2"
    got, stores = _child(root, tmp_path, "run_command", {"argv": ["yes", line], "timeout": 3}, programs="yes,echo")
    print(f"endless output for 3 s: peak RSS {got['rss_kb'] // 1024} MiB, kept {got['chars']:,} chars")
    assert got["status"] == "error" and got["rss_kb"] < PEAK_KB
    stored = stores.artifacts.get(got["ref"]).decode()
    masked = "GET /upload key [REDACTED:aws_access_key_id] db_password=[REDACTED:credential]"
    assert stored.startswith(f"$ yes {masked}\n{masked}\n{masked}\n")
    assert stored.endswith("\nerror: timed out after 3s\n[exit code -9]\n")
    assert got["chars"] < MB + 300 and "AKIA" not in stored and "hunter2" not in stored
    assert got["after"] == "$ echo next\nnext\n[exit code 0]\n"
    stores.close()


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie no one reaped yet counts as ended); waits up to 10 s."""
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


HELPER = """
import subprocess, sys
p = subprocess.Popen(["sleep", "300"])  # inherits stdout: holds the command's pipe
open("helper.pid", "w").write(str(p.pid))
print("started helper", flush=True)
"""


@pytest.mark.parametrize(
    ("argv", "files"),
    [
        (["python", "leave_helper.py"], {"leave_helper.py": HELPER}),
        (
            ["python", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_leaves.py"],
            {"test_leaves.py": "def test_leaves_a_helper():\n" + textwrap.indent(HELPER, "    ")},
        ),
    ],
    ids=["script", "pytest"],
)
def test_a_helper_left_holding_stdout_is_ended_and_the_exit_status_kept(
    tmp_path: Path, argv: list[str], files: dict[str, str]
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    if argv[2:3] == ["pytest"]:
        argv = [a for a in argv if a not in ("-p", "no:cacheprovider")]  # -p is refused by the policy
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "receipts", timeout=60)
    out = ws.execute("c1", "run_command", {"argv": argv})
    pid = int((root / "helper.pid").read_text())
    assert out.status == "ok", out.output
    assert out.output.endswith("[exit code 0]\n") and "timed out" not in out.output
    assert "started helper" in out.output and ("1 passed" in out.output or argv[1] != "-m")
    assert _gone(pid)


def test_a_command_that_times_out_takes_its_helpers_with_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hang.py").write_text(HELPER + "import time\ntime.sleep(300)\n")
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "receipts")
    out = ws.execute("c1", "run_command", {"argv": ["python", "hang.py"], "timeout": 2})
    assert out.status == "error"
    assert out.output == "$ python hang.py\nstarted helper\n\nerror: timed out after 2s\n[exit code -9]\n"
    assert _gone(int((root / "helper.pid").read_text()))


def test_grep_streams_beside_a_huge_file(big: tuple[Path, str, int], tmp_path: Path) -> None:
    root, sha, _ = big
    got, stores = _child(root, tmp_path, "grep", {"pattern": "needle|^0000002 ", "path": "."})
    print(f"grep beside a 300 MiB file: peak RSS {got['rss_kb'] // 1024} MiB")
    assert got["rss_kb"] < PEAK_KB
    shown = stores.artifacts.get(got["ref"]).decode().splitlines()
    n = _block().count(b"\n")  # lines of a block: the first 2,000,000 bytes hold it and part of the next
    row = "0000002 GET /upload 413 key [REDACTED:aws_access_key_id] db_password=[REDACTED:credential] took 2ms"
    assert shown == [
        f"big.log:3: {row}",
        f"big.log:{n + 3}: {row}",
        "small.txt:1: needle one",
        "small.txt:3: needle two",
        f"note: big.log: only the first 2,000,000 of {300 * len(_block()):,} bytes searched; use run_command "
        "(e.g. grep) to search the rest",
    ]
    small = hashlib.sha256((root / "small.txt").read_bytes()).hexdigest()
    assert dict(got["reads"]) == {"big.log": sha, "small.txt": small}  # the whole file's sha256, streamed
    stores.close()


def test_a_secret_cut_by_the_kill_of_a_timed_out_command_is_masked(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    token = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"
    (root / "leak.py").write_text(
        "import sys, time\n"
        f"print('whole {token}')\n"
        f"sys.stdout.write('cut {token[:29]}')\n"  # the kill comes before the rest of it
        "sys.stdout.flush()\n"
        "time.sleep(300)\n"
    )
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "receipts")
    out = ws.execute(
        "c1", "run_command", {"argv": ["python", "leak.py"], "timeout": 8}
    )  # time to start and write under load
    assert out.status == "error"
    assert mask_secrets(out.output).text == (
        "$ python leak.py\nwhole [REDACTED:github_token]\ncut [REDACTED:cut_secret]\nerror: timed out after 8s\n"
        "[exit code -9]\n"
    )
    assert token[:12] not in mask_secrets(out.output).text


SETSID_HELPER = """
import subprocess
p = subprocess.Popen(["sleep", "300"], start_new_session=True)  # out of the command's process group
open("helper.pid", "w").write(str(p.pid))
print("started helper", flush=True)
"""


def test_a_helper_in_a_session_of_its_own_ends_with_the_command(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "daemon.py").write_text(SETSID_HELPER)
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "receipts")
    out = ws.execute("c1", "run_command", {"argv": ["python", "daemon.py"]})
    assert out.output == "$ python daemon.py\nstarted helper\n[exit code 0]\n"
    assert _gone(int((root / "helper.pid").read_text()))


_RUNNER_KILLED = """
import os, signal, sys, threading, time
from pathlib import Path
from nodes.workspace import WorkspaceTools
ws = WorkspaceTools(sys.argv[1], receipts_dir=sys.argv[2])
pid_file = Path(sys.argv[1]) / "helper.pid"

def kill_when_started():
    while not pid_file.exists():
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGKILL)  # the runner dies while its command runs

threading.Thread(target=kill_when_started, daemon=True).start()
ws.execute("c1", "run_command", {"argv": ["python", "work.py"]})
"""


def test_the_recovery_after_a_killed_runner_ends_what_its_command_left(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "work.py").write_text(HELPER + "import time\ntime.sleep(300)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    runner = subprocess.run(
        [sys.executable, "-c", _RUNNER_KILLED, str(root), str(tmp_path / "receipts")],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert runner.returncode == -9, runner.stderr
    helper = int((root / "helper.pid").read_text())
    assert not _gone(helper)  # the runner's death (and the command's) did not reach it
    ws = WorkspaceTools(root, receipts_dir=tmp_path / "receipts")
    r = ws.recover("c1", "run_command", {"argv": ["python", "work.py"]})
    assert (r.state, r.note) == (
        "ask",
        "the command was cut off while running (the process it left running was ended); it may have had effects",
    )
    assert _gone(helper)
    again = ws.recover("c1", "run_command", {"argv": ["python", "work.py"]})
    assert again.note == "the command was cut off while running; it may have had effects"  # nothing left
