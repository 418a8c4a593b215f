"""One writer per task: a lease row per task, taken by whatever runs the task, renewed while it runs.

The row (``taskctx_leases``) names its holder (host, pid, the process's start time and a random
token) with a heartbeat and an expiry. It is taken in one transaction (SQLite ``BEGIN
IMMEDIATE``, Postgres a transaction-scoped advisory lock), so two takers cannot both win. A row
whose holder is gone is taken over: on this host, its process is no longer running (its pid is
free, or another process has it since); on another host, its lease expired. A live holder's row
is never taken over: the second taker gets :class:`~context.errors.LeaseHeldError` at once.
Within a process a lease belongs to one run (an owner token :meth:`TaskLeases.hold` yields, which
the holds nested in that run pass on): a second run of the task through the same store is refused
alike. While the lease is held a thread renews it every :data:`HEARTBEAT` seconds. The event log's
append refuses a batch while another live holder has the task's lease (a fence for writers that
took no lease); a holder that lost its lease (taken over, or its row removed) is refused its next
append with :class:`~context.errors.LeaseLostError`, which says what it had recorded.

Postgres dates the lease by the server's clock (one clock for every worker); SQLite by the
taker's (one machine).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .errors import LeaseHeldError, LeaseLostError, ServerLostError

__all__ = ["HEARTBEAT", "LEASE_TTL", "LeaseHolder", "TaskLeases", "process_started"]

#: Seconds a lease stays valid without a heartbeat.
LEASE_TTL = 60.0
#: Seconds between two heartbeats of a held lease.
HEARTBEAT = 10.0

#: The tokens of leases this process ended without releasing their rows (the server was lost):
#: such a row is taken over by this process at once, not after its expiry.
_LEFT_BEHIND: set[str] = set()

#: classid of the advisory lock a Postgres lease take holds (objid: a hash of the task id).
_PG_LEASE_CLASS = 0x7A5D


def process_started(pid: int) -> str:
    """An identity of a process's start: its start time in clock ticks since boot (Linux ``/proc``).

    A pid can be reused; the pair (pid, start) cannot.

    Args:
        pid: The process id.

    Returns:
        The start time as text; ``""`` when the process does not exist or ``/proc`` is not there.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state is field 3, starttime field 22
    return fields[19] if len(fields) > 19 else ""


def _alive(pid: int, started: str) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    now = process_started(pid)
    return not (started and now and now != started)


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a task's lease.

    Attributes:
        task_id: The task.
        host: The holder's host name.
        pid: Its process id.
        started: Its process's start (:func:`process_started`; ``""``: unknown).
        token: A random token of this hold.
        heartbeat: When it last renewed the lease (seconds since the epoch, by the store's clock).
        expires: When the lease lapses without another heartbeat (seconds since the epoch).
    """

    task_id: str
    host: str
    pid: int
    started: str
    token: str
    heartbeat: float
    expires: float

    def gone(self, now: float) -> bool:
        """Whether this holder can be taken over: its process ended (this host) or its lease expired.

        On this host a holder whose process still runs (the same process: its recorded start
        matches) is never gone, however old its lease; expiry decides only for another host's
        holder, or when the holder's start is not known.

        A row this very process left behind (its release skipped: the server was lost) is gone too.

        Args:
            now: The store's clock (seconds since the epoch).

        Returns:
            True when the holder is gone.
        """
        if self.host != socket.gethostname():
            return self.expires < now
        if self.token in _LEFT_BEHIND and self.pid == os.getpid():
            return True  # this process's own, whose release could not be done (the server was lost)
        if not _alive(self.pid, self.started):
            return True
        if self.started and process_started(self.pid) == self.started:
            return False  # the very process that took it still runs: a clock step or a pause is no end
        return self.expires < now  # liveness unknown (no recorded start): expiry decides

    def this_process(self) -> bool:
        """Whether the holder is this process (another store object of it: its own token).

        Returns:
            True when host, pid and the process's start are this process's.
        """
        me = os.getpid()
        return self.host == socket.gethostname() and self.pid == me and self.started == process_started(me)

    def describe(self, now: float) -> str:
        """The holder in words: ``pid 41 on host h (last heartbeat 3 s ago)``.

        Args:
            now: The store's clock (seconds since the epoch).

        Returns:
            The words; for this process's own hold through another store object, ``this process
            (pid 41, through another store on the same database, lease token 1a2b..., last
            heartbeat 3 s ago)``.
        """
        ago = max(0, round(now - self.heartbeat))
        if self.this_process():
            return (
                f"this process (pid {self.pid}, through another store on the same database, lease token "
                f"{self.token[:8]}, last heartbeat {ago} s ago)"
            )
        return f"pid {self.pid} on host {self.host} (last heartbeat {ago} s ago)"

    def error(self, now: float) -> LeaseHeldError:
        """The error of a taker this holder refuses.

        Args:
            now: The store's clock (seconds since the epoch).

        Returns:
            The :class:`~context.errors.LeaseHeldError`, naming this process or another.
        """
        return LeaseHeldError(
            self.task_id, self.describe(now), pid=self.pid, host=self.host, same_process=self.this_process()
        )


_COLUMNS = "task_id, host, pid, started, token, heartbeat, expires"


def _holder(row: Any) -> LeaseHolder | None:
    if row is None:
        return None
    return LeaseHolder(str(row[0]), str(row[1]), int(row[2]), str(row[3]), str(row[4]), float(row[5]), float(row[6]))


class _Held:
    """One lease this process holds: the run that holds it, how often it entered, its heartbeat thread."""

    def __init__(self, token: str, owner: str, since: float) -> None:
        self.token = token
        #: the run holding it (:meth:`TaskLeases.hold`'s owner): another run's hold is refused
        self.owner = owner
        self.since = since
        self.depth = 0
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        #: another taker took the lease over (this process was thought gone), or its row was removed
        self.lost = False
        #: the last event appended under the lease: (seq, kind)
        self.recorded: tuple[int, str] = (0, "")


class TaskLeases:
    """The task leases of one database.

    Args:
        connect: Opens a new connection to the database (a context manager); None for a
            database no other process can see (SQLite ``:memory:``): every lease is then granted.
        dialect: ``"sqlite"`` or ``"postgres"``.
        ttl: Seconds a lease stays valid without a heartbeat.
        heartbeat: Seconds between two heartbeats.
    """

    def __init__(
        self,
        connect: Callable[[], contextlib.AbstractContextManager[Any]] | None,
        dialect: str,
        *,
        ttl: float = LEASE_TTL,
        heartbeat: float = HEARTBEAT,
    ) -> None:
        self._connect = connect
        self._dialect = dialect
        self.ttl = ttl
        self.interval = heartbeat
        self._held: dict[str, _Held] = {}
        self._mutex = threading.Lock()

    def token(self, task_id: str) -> str | None:
        """The token of this process's lease on a task.

        Args:
            task_id: The task.

        Returns:
            The token, or None when this process does not hold the task's lease.
        """
        held = self._held.get(task_id)
        return held.token if held is not None else None

    @contextlib.contextmanager
    def hold(self, task_id: str, owner: str | None = None) -> Iterator[str]:
        """Hold the task's lease while the block runs, for one run (re-entrant for that run only).

        Args:
            task_id: The task.
            owner: The run's owner token, the one an outer hold of the same run yielded (nested
                holds of one run pass it on, from any thread); None: a new run.

        Yields:
            The run's owner token (to pass to the holds nested in this run); the lease is renewed
            every :attr:`interval` seconds and released when the run's outermost hold ends.

        Raises:
            LeaseHeldError: Another live process holds the task's lease, or another run of this
                process holds it through this store (a second run of the task at once).
        """
        owner = owner or secrets.token_hex(8)
        with self._mutex:
            held = self._held.get(task_id)
            if held is not None and held.owner != owner:
                raise self._busy(task_id, held)
            if held is None:
                held = _Held(secrets.token_hex(8), owner, time.time())
                if self._connect is not None:
                    self._take(task_id, held.token)
                    held.thread = threading.Thread(
                        target=self._beat, args=(task_id, held), name=f"taskctx-lease-{task_id}", daemon=True
                    )
                    held.thread.start()
                self._held[task_id] = held
            held.depth += 1
        server_lost = False
        try:
            yield owner
        except ServerLostError:  # no release to try: it would wait for the server again
            server_lost = True
            raise
        finally:
            self._leave(task_id, held, server_lost)

    def _leave(self, task_id: str, held: _Held, server_lost: bool) -> None:
        """End one entry of a hold; the outermost releases the lease."""
        with self._mutex:
            held.depth -= 1
            if held.depth > 0:
                return
            del self._held[task_id]
            held.stop.set()
            if self._connect is None:
                return
            if server_lost:
                _LEFT_BEHIND.add(held.token)
            else:
                with contextlib.suppress(Exception):  # an unreachable store: the lease expires by itself
                    self._release(task_id, held.token)

    @staticmethod
    def _busy(task_id: str, held: _Held) -> LeaseHeldError:
        """The error of a second run of the task through this store while ``held``'s run goes on."""
        me, ago = os.getpid(), max(0, round(time.time() - held.since))
        words = f"run {held.owner[:8]} of this process through the same store (holding the lease for {ago} s)"
        return LeaseHeldError(task_id, words, pid=me, host=socket.gethostname(), same_process=True, same_store=True)

    def recorded(self, task_id: str, events: list[Any]) -> None:
        """Note the events an append just wrote under this process's lease on the task.

        Args:
            task_id: The task.
            events: The events as written (``seq`` set); nothing is noted when the lease is not held.
        """
        held = self._held.get(task_id)
        if held is not None and events:
            held.recorded = (events[-1].seq, str(events[-1].kind))

    def check(self, conn: Any, task_id: str) -> None:
        """Refuse an append the lease does not allow (inside the append's transaction).

        Args:
            conn: The append's connection, in its transaction.
            task_id: The task.

        Raises:
            LeaseLostError: This process held the task's lease and lost it (another holder took it
                over, or its row was removed): this process writes nothing more for the task.
            LeaseHeldError: Another live process holds the task's lease and this one holds none.
        """
        held = self._held.get(task_id)
        if held is None or self._connect is None:
            _fence(conn, self._dialect, task_id)
            return
        row = _row_in(conn, self._dialect, task_id)
        if row is not None and row.token == held.token:
            return
        held.lost = True
        now = _store_now(conn, self._dialect)
        seq, kind = held.recorded
        step = _step_at(conn, self._dialect, task_id, seq) if seq else ""
        raise LeaseLostError(
            task_id,
            row.describe(now) if row is not None else "",
            pid=row.pid if row is not None else 0,
            host=row.host if row is not None else "",
            seq=seq,
            kind=kind,
            step=step,
        )

    def holder(self, task_id: str) -> LeaseHolder | None:
        """Who holds the task's lease now, gone or not.

        Args:
            task_id: The task.

        Returns:
            The holder, or None when no lease row exists.
        """
        if self._connect is None:
            return None
        with self._connect() as conn:
            return _holder(
                conn.execute(
                    self._sql(f"SELECT {_COLUMNS} FROM taskctx_leases WHERE task_id = ?"), (task_id,)
                ).fetchone()
            )

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._dialect == "postgres" else sql

    @contextlib.contextmanager
    def _transaction(self, conn: Any, task_id: str) -> Iterator[None]:
        if self._dialect == "postgres":
            key = int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:4], "big", signed=True)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_PG_LEASE_CLASS, key))
                yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:  # SQLite ends it itself on some errors (a full disk): keep that error
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _take(self, task_id: str, token: str) -> None:
        assert self._connect is not None
        me = (socket.gethostname(), os.getpid(), process_started(os.getpid()), token)
        with self._connect() as conn, self._transaction(conn, task_id):
            now = _store_now(conn, self._dialect)
            row = _holder(
                conn.execute(
                    self._sql(f"SELECT {_COLUMNS} FROM taskctx_leases WHERE task_id = ?"), (task_id,)
                ).fetchone()
            )
            if row is not None and row.token != token and not row.gone(now):
                raise row.error(now)
            conn.execute(self._sql("DELETE FROM taskctx_leases WHERE task_id = ?"), (task_id,))
            conn.execute(
                self._sql(f"INSERT INTO taskctx_leases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                (task_id, *me, now, now + self.ttl),
            )

    def _renew(self, task_id: str, token: str) -> bool:
        assert self._connect is not None
        with self._connect() as conn:
            now = _store_now(conn, self._dialect)
            cur = conn.execute(
                self._sql("UPDATE taskctx_leases SET heartbeat = ?, expires = ? WHERE task_id = ? AND token = ?"),
                (now, now + self.ttl, task_id, token),
            )
            return bool(cur.rowcount)

    def _release(self, task_id: str, token: str) -> None:
        assert self._connect is not None
        with self._connect() as conn:
            conn.execute(self._sql("DELETE FROM taskctx_leases WHERE task_id = ? AND token = ?"), (task_id, token))

    def _beat(self, task_id: str, held: _Held) -> None:
        while not held.stop.wait(self.interval):
            try:
                if not self._renew(task_id, held.token):
                    held.lost = True
                    return
            except Exception:  # noqa: BLE001 - a busy or unreachable store: the next beat tries again
                continue


def _row_in(conn: Any, dialect: str, task_id: str) -> LeaseHolder | None:
    """The task's lease row, read on the append's connection (None: none, or no lease table yet)."""
    sql = f"SELECT {_COLUMNS} FROM taskctx_leases WHERE task_id = ?"
    try:
        return _holder(conn.execute(sql.replace("?", "%s") if dialect == "postgres" else sql, (task_id,)).fetchone())
    except sqlite3.OperationalError:  # a database made before leases (opened read-write, it has the table)
        return None


def _step_at(conn: Any, dialect: str, task_id: str, seq: int) -> str:
    """The plan step the task's log had started last at ``seq`` (``""``: none)."""
    sql = "SELECT payload FROM taskctx_events WHERE task_id = ? AND kind = 'step.started' AND seq <= ? "
    sql += "ORDER BY seq DESC LIMIT 1"
    row = conn.execute(sql.replace("?", "%s") if dialect == "postgres" else sql, (task_id, seq)).fetchone()
    if row is None:
        return ""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        return str(json.loads(row[0]).get("step_id") or "")
    return ""


def _store_now(conn: Any, dialect: str) -> float:
    """The store's clock: Postgres's (one clock for every worker), SQLite's the machine's."""
    if dialect == "postgres":
        return float(conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])
    return time.time()


def _fence(conn: Any, dialect: str, task_id: str) -> None:
    """Refuse an append by a writer holding no lease while a live holder has the task's (in its transaction).

    Raises:
        LeaseHeldError: Another live process holds the task's lease.
    """
    row = _row_in(conn, dialect, task_id)
    if row is None:
        return
    now = _store_now(conn, dialect)
    if not row.gone(now):
        raise row.error(now)
