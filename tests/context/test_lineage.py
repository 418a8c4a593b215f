"""Forked logs (:mod:`context.lineage`) on both stores: a child's log is its parent's prefix,
referenced (one row written for the child), then its own events; forks of forks; a parent that
is missing or shorter is a named error; the parent is never written."""

from __future__ import annotations

from typing import Any

import pytest

from context import DamagedStoreError, InvalidInputError, UnknownTaskError, new_event, replay
from context.lineage import Lineage, children_of, fork_log
from context.verify import check_events

TS = "2026-01-01T00:00:00.000Z"


def _parent(stores: Any, task_id: str = "p", n: int = 10) -> list[Any]:
    """A task of ``n`` events: task.created, then tool calls c2..cn."""
    evs = [new_event("task.created", {"task_id": task_id, "original_request": "x", "schema_version": 4}, actor="user")]
    evs += [
        new_event("tool.called", {"call_id": f"c{i}", "tool": "bash"}, actor="agent", timestamp=TS)
        for i in range(2, n + 1)
    ]
    return stores.events.append(task_id, evs)


def _own_rows(stores: Any, task_id: str) -> int:
    """The rows the table holds under ``task_id`` itself (what a fork costs)."""
    if hasattr(stores, "pool"):
        with stores.pool.connection() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM taskctx_events WHERE task_id = %s", (task_id,)).fetchone()[0])
    return int(
        stores._db.conn.execute("SELECT COUNT(*) FROM taskctx_events WHERE task_id = ?", (task_id,)).fetchone()[0]
    )


def test_a_child_reads_its_parents_prefix_then_its_own_events(stores: Any) -> None:
    parent = _parent(stores)
    before = [e.to_json() for e in stores.events.read("p")]
    forked = fork_log(stores.events, "p", "c", 6, why="try another model")
    assert (forked.seq, forked.kind, forked.actor) == (7, "task.forked", "user")
    assert forked.payload == {
        "task_id": "c",
        "parent_task_id": "p",
        "fork_seq": 6,
        "why": "try another model",
        "schema_version": 4,
        "workspace": "",
        "restored": [],
        "left": {},
    }
    own = stores.events.append("c", [new_event("tool.called", {"call_id": "k8", "tool": "bash"}, actor="agent")])
    assert own[0].seq == 8
    log = stores.events.read("c")
    assert [e.seq for e in log] == list(range(1, 9))
    assert [e.id for e in log[:6]] == [e.id for e in parent[:6]]  # the parent's own events, not copies
    assert _own_rows(stores, "c") == 2  # task.forked and k8: nothing of the prefix is written
    assert (stores.events.last_seq("c"), stores.events.count("c")) == (8, 8)
    assert stores.events.lineage("c") == Lineage("p", 6, "try another model")
    assert stores.events.lineage("p") is None
    assert check_events(log) == []
    assert replay(log).identity.task_id == "c"
    assert replay(log).events.counts == {"task.created": 1, "tool.called": 6, "task.forked": 1}
    # reads that start inside the prefix, past it, filtered and limited
    assert [e.seq for e in stores.events.read("c", after=4, limit=3)] == [5, 6, 7]
    assert [e.seq for e in stores.events.read("c", after=6)] == [7, 8]
    assert [e.payload["call_id"] for e in stores.events.read("c", kinds=["tool.called"])] == [
        "c2",
        "c3",
        "c4",
        "c5",
        "c6",
        "k8",
    ]
    assert [e.payload for e in stores.events.read("c", kinds=["tool.called"], fields=["call_id"], limit=2)] == [
        {"call_id": "c2"},
        {"call_id": "c3"},
    ]
    assert [e.to_json() for e in stores.events.read("p")] == before  # the parent is never written
    assert children_of(stores.events, "p") == [("c", 6)]


def test_a_fork_of_a_fork_reads_through_both(stores: Any) -> None:
    _parent(stores)
    fork_log(stores.events, "p", "c", 6)
    stores.events.append("c", [new_event("tool.called", {"call_id": "k8", "tool": "bash"}, actor="agent")])
    fork_log(stores.events, "c", "g", 8)  # after its parent's own event k8
    fork_log(stores.events, "c", "h", 3)  # inside its parent's prefix: the grandparent's events
    assert [(e.seq, e.kind) for e in stores.events.read("g")][-3:] == [
        (7, "task.forked"),
        (8, "tool.called"),
        (9, "task.forked"),
    ]
    assert [e.payload.get("call_id") for e in stores.events.read("g", kinds=["tool.called"])] == [
        "c2",
        "c3",
        "c4",
        "c5",
        "c6",
        "k8",
    ]
    assert [e.seq for e in stores.events.read("h")] == [1, 2, 3, 4]
    assert stores.events.count("g") == 9 and stores.events.count("h") == 4
    assert replay(stores.events.read("g")).identity.task_id == "g"
    assert sorted(children_of(stores.events, "c")) == [("g", 8), ("h", 3)]


def test_a_fork_is_refused_outside_the_parents_log(stores: Any) -> None:
    _parent(stores, n=5)
    with pytest.raises(InvalidInputError, match=r"task 'p' has events 1 to 5; fork at a seq in that range"):
        fork_log(stores.events, "p", "c", 6)
    with pytest.raises(UnknownTaskError, match=r"task 'nope' has no events to fork"):
        fork_log(stores.events, "nope", "c", 1)
    fork_log(stores.events, "p", "c", 5)
    with pytest.raises(InvalidInputError, match=r"task 'c' already exists; fork into another task id"):
        fork_log(stores.events, "p", "c", 2)
    assert stores.events.last_seq("p") == 5


def test_a_missing_parent_is_a_named_error(tmp_path: Any) -> None:
    """The parent's rows deleted behind taskctx's back: every read of the child names it (SQLite)."""
    from context import SqliteStores

    st = SqliteStores(tmp_path / "t.sqlite")
    _parent(st, n=5)
    fork_log(st.events, "p", "c", 4)
    st._db.conn.execute("DELETE FROM taskctx_events WHERE task_id = 'p' AND seq > 2")
    with pytest.raises(DamagedStoreError) as short:
        st.events.read("c")
    assert str(short.value) == (
        "task 'c': the event log is damaged: it was forked from task 'p' at seq 4 and reads its first 4 events "
        "from that task, but that task's log ends at seq 2, before the fork point; restore the database from a "
        "backup, or start the task again under a new task id"
    )
    st._db.conn.execute("DELETE FROM taskctx_events WHERE task_id = 'p'")
    with pytest.raises(
        DamagedStoreError, match=r"forked from task 'p' at seq 4 .* but that task is not in this database"
    ):
        st.events.read("c", kinds=["tool.called"])
    assert [e.seq for e in st.events.read("c", after=4)] == [5]  # its own rows still read


def test_a_task_forked_out_of_its_place_is_a_finding() -> None:
    """A ``task.forked`` anywhere but right after its prefix (written behind taskctx's back) is named."""
    evs = [new_event("task.created", {"task_id": "t", "original_request": "x"}, actor="user")]
    odd = {"task_id": "t", "parent_task_id": "p", "fork_seq": 5}
    evs.append(new_event("task.forked", odd, actor="user"))
    evs = [e.model_copy(update={"seq": i}) for i, e in enumerate(evs, 1)]
    assert check_events(evs) == [
        "event log: seq 2 is task.forked of seq 5 (a fork's first own event follows its parent's prefix)"
    ]
