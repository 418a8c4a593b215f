"""Running one command in bounded memory: its output kept up to a limit, its process group ended.

:func:`run_bounded` reads the output in chunks as it comes; it keeps the first and the last part
(together at most ``limit`` bytes, cut where no secret is split) and, of the part between, only
its size and the sha256 of the whole output, computed as it streams. When the command returns
or times out, its whole process group is killed, so a helper it left running (holding the
output pipe) neither stays nor turns a finished command into a timed-out one.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from context.secrets import MASK_OVERLAP, safe_cut

__all__ = [
    "GREP_BYTES",
    "OUTPUT_LIMIT",
    "RUN_MARK",
    "BoundedOutput",
    "CommandRun",
    "end_marked",
    "grep_file",
    "run_bounded",
]

#: Bytes of a command's output kept by default: the first half and the last half.
OUTPUT_LIMIT = 1_048_576
_READ = 65_536
#: Bytes of each file ``grep`` searches: the start of a larger file.
GREP_BYTES = 2_000_000
#: Characters of a line ``grep`` matches (of a longer line, its start) and shows.
_LINE_MATCHED, _LINE_SHOWN = 2000, 300
#: Bytes still read from the pipe once the command returned (what a helper left keeps writing is cut).
_DRAIN = 1_048_576


#: util-linux's ``setpriv``: it sets ``PR_SET_PDEATHSIG`` and execs the command, so the command
#: dies with a killed parent without Python code run between fork and exec (unsafe with threads)
_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


def _exec_argv(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """The argv to start: ``argv`` behind ``setpriv --pdeathsig KILL`` where it is installed.

    The program is looked up first (on ``env``'s ``PATH``; a name with a slash from ``cwd``) so
    a missing or non-executable one raises as ``subprocess.Popen`` would, not as setpriv's exit.

    Raises:
        FileNotFoundError: The program does not exist.
        PermissionError: It exists but is not executable.
    """
    if _SETPRIV is None or not argv:
        return list(argv)
    name = argv[0]
    if os.sep in name:
        found = str(Path(cwd) / name)
        if not os.path.exists(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
        if os.path.isdir(found) or not os.access(found, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    elif shutil.which(name, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]


class BoundedOutput:
    """A byte stream kept in bounded memory: its head and tail, and the size and sha256 of all of it.

    Args:
        limit: Bytes kept: ``limit // 2`` of the start and the rest of the end (each with
            :data:`~context.secrets.MASK_OVERLAP` more held while it streams, to cut where no
            secret is split).
    """

    def __init__(self, limit: int = OUTPUT_LIMIT):
        if limit < 2:
            raise ValueError(f"output limit must be at least 2 bytes, not {limit}")
        self.head_limit, self.tail_limit = limit // 2, limit - limit // 2
        self.margin = 4 * MASK_OVERLAP  # bytes: a character is at most 4
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_bytes = 0
        self.total = 0
        self.lines = 0
        self.dropped = False
        self.sha = hashlib.sha256()

    def add(self, chunk: bytes) -> None:
        """Take the next bytes of the stream.

        Args:
            chunk: Bytes, in stream order.
        """
        self.total += len(chunk)
        self.lines += chunk.count(b"\n")
        self.sha.update(chunk)
        room = self.head_limit + self.margin - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_bytes += len(chunk)
        keep = self.tail_limit + self.margin
        while self.tail_bytes - len(self.tail[0]) >= keep:
            self.tail_bytes -= len(self.tail.popleft())
            self.dropped = True

    def text(self) -> str:
        """The stream as kept: whole, or its head, a line naming what was left out, and its tail.

        Returns:
            The text (invalid UTF-8 as U+FFFD). When bytes were left out, the line between says
            how many (bytes and lines), and the whole stream's size and sha256.
        """
        tail = b"".join(self.tail)
        if self.total <= self.head_limit + self.tail_limit + 2 * self.margin and not self.dropped:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        head_t = bytes(self.head).decode("utf-8", "surrogateescape")
        cut = safe_cut(head_t, _line_cut(head_t, len(head_t) - self.margin))  # characters
        head = head_t[:cut].encode("utf-8", "surrogateescape")
        if len(tail) > self.tail_limit + self.margin:
            tail = tail[len(tail) - self.tail_limit - self.margin :]
        tail_t = tail.decode("utf-8", "surrogateescape")
        at = len(tail_t) - _chars_from_end(tail_t, self.tail_limit)
        nl = tail_t.find("\n", at, at + 2000)  # from the start of a line when one starts soon
        start = safe_cut(tail_t, nl + 1 if nl >= 0 else at)
        kept_tail = tail_t[start:].encode("utf-8", "surrogateescape")
        gap = self.total - len(head) - len(kept_tail)
        gap_lines = self.lines - head.count(b"\n") - kept_tail.count(b"\n")
        note = (
            f"\n[... {gap:,} bytes ({gap_lines:,} lines) of output left out here: the whole output was "
            f"{self.total:,} bytes, sha256 {self.sha.hexdigest()} ...]\n"
        )
        return head.decode("utf-8", errors="replace") + note + kept_tail.decode("utf-8", errors="replace")


def _line_cut(text: str, at: int) -> int:
    """``at``, or the end of the line before it when that line ends within 2,000 characters of it."""
    nl = text.rfind("\n", max(0, at - 2000), at)
    return nl + 1 if nl >= 0 else at


def _chars_from_end(text: str, nbytes: int) -> int:
    """How many characters at the end of ``text`` hold at most ``nbytes`` bytes (UTF-8)."""
    n, size = 0, 0
    for ch in reversed(text):
        size += len(ch.encode("utf-8", "surrogateescape"))
        if size > nbytes:
            break
        n += 1
    return n


@dataclass(frozen=True)
class CommandRun:
    """What :func:`run_bounded` saw of a command.

    Attributes:
        output: Its output (stdout and stderr together) as kept (:meth:`BoundedOutput.text`).
        returncode: Its exit status as it returned (negative: the signal that ended it), or None
            when it timed out and was killed.
        total_bytes: Bytes of output it wrote, all of them.
        sha256: The sha256 of all of them (hex).
    """

    output: str
    returncode: int | None
    total_bytes: int
    sha256: str


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (the command's own session): gone already is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


#: The environment variable that marks every process of one command run (its value, unique per
#: run, is in the run's receipt): :func:`end_marked` finds them by it.
RUN_MARK = "TASKCTX_RUN"


def end_marked(mark: str) -> int:
    """SIGKILL every process of this user whose environment has ``TASKCTX_RUN`` = ``mark`` (Linux ``/proc``).

    A command's processes inherit the mark, also those that left its process group (``setsid``,
    a daemon) or outlived the runner that was killed; a process that cleared its environment is
    not found.

    Args:
        mark: The run's mark (:data:`RUN_MARK`).

    Returns:
        How many processes were sent SIGKILL (0 when none is left, or there is no ``/proc``).
    """
    want, ended = f"{RUN_MARK}={mark}".encode(), 0
    for d in Path("/proc").glob("[0-9]*") if mark and Path("/proc/self/environ").exists() else ():
        try:
            if want in (d / "environ").read_bytes().split(b"\0") and int(d.name) != os.getpid():
                os.kill(int(d.name), signal.SIGKILL)
                ended += 1
        except (OSError, ValueError):  # gone, or another user's
            continue
    return ended


def _read(fd: int) -> bytes | None:
    """The next bytes of the pipe: ``b""`` at its end, None when it holds nothing now."""
    try:
        return os.read(fd, _READ)
    except BlockingIOError:
        return None


def _drain(fd: int, out: BoundedOutput | _Tee) -> None:
    """Read what the pipe holds now, up to :data:`_DRAIN` bytes, without waiting for more."""
    taken = 0
    while taken < _DRAIN:
        chunk = _read(fd)
        if not chunk:
            return
        out.add(chunk)
        taken += len(chunk)


class _Tee:
    """A :class:`BoundedOutput` that also hands each chunk to ``on_output``."""

    def __init__(self, out: BoundedOutput, on_output: Callable[[bytes], None]):
        self.out, self.on_output = out, on_output

    def add(self, chunk: bytes) -> None:
        self.out.add(chunk)
        self.on_output(chunk)


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    limit: int = OUTPUT_LIMIT,
    on_output: Callable[[bytes], None] | None = None,
) -> CommandRun:
    """Run a command in a session of its own, its output read in chunks and kept up to ``limit``.

    The command returns when its own process exits: what its pipe then holds is read, and the
    process group is killed (a helper it started, still holding the pipe, goes with it); its
    exit status is the command's. At ``timeout`` the group is killed.

    Args:
        argv: The argv to exec (no shell).
        cwd: The folder it runs in.
        env: Its whole environment.
        timeout: Seconds it may run.
        limit: Bytes of output kept (:class:`BoundedOutput`).
        on_output: Called with each chunk of output as it is read (progress; it must not block).

    Returns:
        What it wrote and how it ended.

    Raises:
        OSError: It could not be started.
    """
    out = BoundedOutput(limit)
    sink: BoundedOutput | _Tee = out if on_output is None else _Tee(out, on_output)
    proc = subprocess.Popen(
        _exec_argv(argv, cwd, env),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout
    rc: int | None = None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while rc is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                chunk = _read(fd) if sel.select(min(left, 0.05)) else None
                if chunk:
                    sink.add(chunk)
                elif chunk == b"":  # every writer closed the pipe: the command has ended or soon will
                    try:
                        rc = proc.wait(max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        break
                    continue
                code = proc.poll()
                if code is not None:  # it returned; what a helper still writes is not waited for
                    _drain(fd, sink)
                    rc = code
    finally:
        _kill_group(proc.pid)
        if RUN_MARK in env:  # a helper in a session of its own (setsid) is out of the group's reach
            end_marked(env[RUN_MARK])
        proc.wait()
        proc.stdout.close()
    return CommandRun(out.text(), rc, out.total, out.sha.hexdigest())


def grep_file(path: Path, rx: re.Pattern[str], max_hits: int) -> tuple[list[tuple[int, str]], str | None]:
    """The lines of a text file that ``rx`` matches, read line by line (never the whole file).

    A file with a NUL byte in its first 8,192 bytes is binary and has none. Only the first
    :data:`GREP_BYTES` bytes are searched, and of each line its first 2,000 characters (the rest
    of a longer line is skipped as it is read); what was left unsearched is said, so an absent
    match is never claimed for text that was not read.

    Args:
        path: The file.
        rx: The pattern.
        max_hits: Matches wanted at most.

    Returns:
        ``(hits, cut)``: ``(1-based line number, the line's first 300 characters)`` of each match,
        in order; and what the search left out (``"only the first 2,000,000 of 314,130,018 bytes
        searched"``, long lines searched in their first 2,000 characters), or None when it read
        the whole file (or stopped at ``max_hits``).

    Raises:
        OSError: The file cannot be read.
    """
    hits: list[tuple[int, str]] = []
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(8192):
            return hits, None
        fh.seek(0)
        n, left, long_lines = 0, GREP_BYTES, 0
        while left > 0 and len(hits) < max_hits:
            raw = fh.readline(min(left, 4 * _LINE_MATCHED))
            if not raw:
                break
            left -= len(raw)
            n += 1
            skipped = False
            while not raw.endswith(b"\n") and left > 0:  # a long line: skip the rest of it
                more = fh.readline(min(left, _READ))
                if not more:
                    break
                left -= len(more)
                raw, skipped = raw[: 4 * _LINE_MATCHED] + more[-1:], True
            whole = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            line = whole[:_LINE_MATCHED]
            long_lines += skipped or len(whole) > _LINE_MATCHED
            if rx.search(line):
                hits.append((n, line[:_LINE_SHOWN]))
        if len(hits) >= max_hits:
            return hits, None
        cut = []
        if left <= 0 and fh.read(1):
            cut.append(f"only the first {GREP_BYTES:,} of {os.fstat(fh.fileno()).st_size:,} bytes searched")
        if long_lines:
            cut.append(
                f"{long_lines:,} line{'' if long_lines == 1 else 's'} longer than {_LINE_MATCHED:,} characters "
                f"searched in {'its' if long_lines == 1 else 'their'} first {_LINE_MATCHED:,}"
            )
    return hits, "; ".join(cut) or None
