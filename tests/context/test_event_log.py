"""The stores' event log and task registry: what SQLite (``context.SqliteStores``) and Postgres
(``context.pg_store.PgStores``) must do alike (the ``stores`` fixture runs each test on both), and
what the SQLite file itself must do."""

from __future__ import annotations

import json

import pytest

from context import (
    DamagedStoreError,
    SequenceConflictError,
    SqliteStores,
    StoreError,
    StoreOpenError,
    new_event,
    replay,
)

TS = "2026-01-01T00:00:00.000Z"


def call(i: int, **kw):
    return new_event(
        "tool.called",
        {"call_id": f"c{i}", "tool": "bash", "arguments": f'{{"n": {i}}}'},
        actor="agent",
        timestamp=TS,
        **kw,
    )


def dumps(events):
    return [e.model_dump() for e in events]


def test_append_assigns_seq_1_to_n_and_read_returns_them(stores):
    evs = [call(1, correlation_id="corr"), call(2, causation_id="cause"), call(3)]
    out = stores.events.append("t1", evs)
    assert [e.seq for e in out] == [1, 2, 3]
    assert [e.id for e in out] == [e.id for e in evs]
    assert dumps(out) == [e.model_copy(update={"seq": i}).model_dump() for i, e in enumerate(evs, 1)]
    assert stores.events.last_seq("t1") == 3
    assert dumps(stores.events.read("t1")) == dumps(out)

    more = stores.events.append("t1", [call(4), call(5)])
    assert [e.seq for e in more] == [4, 5]
    assert [e.seq for e in stores.events.read("t1")] == [1, 2, 3, 4, 5]
    assert stores.events.append("t1", []) == []
    assert stores.events.last_seq("t1") == 5


def test_read_after_returns_the_tail_in_order(stores):
    out = stores.events.append("t1", [call(i) for i in range(1, 6)])
    assert dumps(stores.events.read("t1", after=2)) == dumps(out[2:])
    assert [e.payload["call_id"] for e in stores.events.read("t1", after=2)] == ["c3", "c4", "c5"]
    assert stores.events.read("t1", after=5) == []
    assert [e.seq for e in stores.events.read("t1", after=1, limit=2)] == [2, 3]
    assert dumps(stores.events.read("t1", after=0)) == dumps(out)


def test_explicit_seq_that_continues_the_log_is_accepted(stores):
    stores.events.append("t1", [call(1), call(2)])
    out = stores.events.append("t1", [call(3).model_copy(update={"seq": 3}), call(4)])
    assert [e.seq for e in out] == [3, 4]


@pytest.mark.parametrize("bad_seq", [2, 3, 5, 99])
def test_wrong_explicit_seq_raises_and_leaves_the_log_unchanged(stores, bad_seq):
    before = stores.events.append("t1", [call(1), call(2), call(3)])
    # behind the log: another writer got there first; past it: the log lost its last events
    err = SequenceConflictError if bad_seq < 4 else DamagedStoreError
    with pytest.raises(err) as ei:
        stores.events.append("t1", [call(4).model_copy(update={"seq": bad_seq})])
    if bad_seq < 4:
        assert f"has seq {bad_seq} but the log expects 4" in str(ei.value)
    else:
        missing = bad_seq - 4
        assert str(ei.value).startswith(
            f"task 't1': the event log is damaged: it ends at seq 3 but this run continues from seq {bad_seq - 1}: "
            f"{missing} event{'s are' if missing > 1 else ' is'} missing from its end; restore the database from a backup"
        )
        assert "another process" not in str(ei.value)
    assert isinstance(ei.value, StoreError)
    assert dumps(stores.events.read("t1")) == dumps(before)
    assert stores.events.last_seq("t1") == 3


def test_a_conflict_inside_a_batch_appends_nothing(stores):
    before = stores.events.append("t1", [call(1)])
    batch = [call(2), call(3), call(4).model_copy(update={"seq": 7})]  # third would be 4
    with pytest.raises(SequenceConflictError, match="has seq 7 but the log expects 4"):
        stores.events.append("t1", batch)
    assert dumps(stores.events.read("t1")) == dumps(before)
    # the same first two events can still be appended afterwards
    assert [e.seq for e in stores.events.append("t1", batch[:2])] == [2, 3]


def test_re_appending_a_logged_event_raises_a_store_error(stores):
    # regression: a retried append of the same event used to leak a raw sqlite3.IntegrityError
    e = call(1)
    before = stores.events.append("t1", [e])
    with pytest.raises(SequenceConflictError) as ei:
        stores.events.append("t1", [e])  # seq 0: would be 2, but the id is already logged
    assert e.id in str(ei.value)
    with pytest.raises(SequenceConflictError):
        stores.events.append("other-task", [e])  # ids are unique across tasks
    assert dumps(stores.events.read("t1")) == dumps(before)
    assert stores.events.read("other-task") == []


def test_two_tasks_have_independent_sequences(stores):
    a = stores.events.append("task-a", [call(1), call(2)])
    b = stores.events.append("task-b", [call(3)])
    a2 = stores.events.append("task-a", [call(4)])
    assert [e.seq for e in a + a2] == [1, 2, 3]
    assert [e.seq for e in b] == [1]
    assert [e.payload["call_id"] for e in stores.events.read("task-a")] == ["c1", "c2", "c4"]
    assert [e.payload["call_id"] for e in stores.events.read("task-b")] == ["c3"]
    assert (stores.events.last_seq("task-a"), stores.events.last_seq("task-b")) == (3, 1)
    assert stores.events.task_ids() == ["task-a", "task-b"]
    assert stores.events.read("unknown") == []
    assert stores.events.last_seq("unknown") == 0
    # an explicit seq valid for task-b is a conflict for task-a
    with pytest.raises(SequenceConflictError):
        stores.events.append("task-a", [call(5).model_copy(update={"seq": 2})])


def test_data_survives_reopening_the_file(tmp_path):
    path = tmp_path / "sub" / "dir" / "taskctx.sqlite"  # folders are created
    s = SqliteStores(path)
    task = new_event("task.created", {"task_id": "t1", "original_request": "do it"}, actor="user", timestamp=TS)
    written = s.events.append("t1", [task, call(1), call(2)])
    ref = s.artifacts.put("exact\r\nbytes")
    s.close()

    s2 = SqliteStores(path)
    try:
        assert s2.path == str(path)
        assert dumps(s2.events.read("t1")) == dumps(written)
        assert s2.events.last_seq("t1") == 3
        assert s2.artifacts.get(ref) == b"exact\r\nbytes"
        assert [e.seq for e in s2.events.append("t1", [call(3)])] == [4]
        # the events read back fold to the same state as the ones written
        assert replay(s2.events.read("t1", limit=3)).model_dump() == replay(written).model_dump()
    finally:
        s2.close()


def test_store_open_error_for_a_path_under_a_regular_file(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    bad = blocker / "taskctx.sqlite"
    with pytest.raises(StoreOpenError, match="cannot open the taskctx database at") as ei:
        SqliteStores(bad)
    assert str(bad) in str(ei.value)
    assert isinstance(ei.value, StoreError)


def test_store_open_error_for_a_directory(tmp_path):
    with pytest.raises(StoreOpenError) as ei:
        SqliteStores(tmp_path)
    assert str(tmp_path) in str(ei.value)


def test_read_with_fields_returns_only_those_payload_keys(stores):
    """``fields=``: each payload holds only the named top-level keys (a nested object whole, a
    key the payload lacks as None), extracted in SQL; the rest of the event as stored."""
    out = stores.events.append(
        "t1",
        [
            call(1),
            new_event(
                "tool.result.received",
                {
                    "call_id": "c1",
                    "status": "ok",
                    "result_summary": "x" * 500,
                    "raw_ref": None,
                    "raw_chars": 500,
                    "compressed": False,
                    "reads": {"a.py": "ab", "b.py": "cd"},
                },
                actor="tool",
                timestamp=TS,
            ),
        ],
    )
    got = stores.events.read("t1", fields=["call_id", "reads", "missing"])
    assert [e.payload for e in got] == [
        {"call_id": "c1", "reads": None, "missing": None},
        {"call_id": "c1", "reads": {"a.py": "ab", "b.py": "cd"}, "missing": None},
    ]
    assert [e.model_dump(exclude={"payload"}) for e in got] == [e.model_dump(exclude={"payload"}) for e in out]
    only = stores.events.read("t1", kinds=["tool.result.received"], fields=["status", "raw_chars"])
    assert [(e.seq, e.payload) for e in only] == [(2, {"status": "ok", "raw_chars": 500})]


def test_the_store_masks_what_it_writes(stores) -> None:
    """The store masks what it writes (events and artifacts), returns the masked events, and
    keeps every other byte (not-UTF-8 bytes too); masking twice changes nothing."""
    token = "ghp_" + "R2d2C3p0L1u2k3e4S5k6y7W8a9l0k1e2r3S4"
    e = new_event("tool.called", {"call_id": "c1", "tool": "run", "arguments": json.dumps({"x": token})}, actor="agent")
    (out,) = stores.events.append("m1", [e])
    assert out.payload["arguments"] == '{"x": "[REDACTED:github_token]"}'
    assert stores.events.read("m1")[0].payload == out.payload
    data = b"\xff\xfe head\nAPI_KEY=" + token.encode() + b"\n\x00tail"
    ref = stores.artifacts.put(data)
    stored = stores.artifacts.get(ref)
    assert stored == b"\xff\xfe head\nAPI_KEY=[REDACTED:github_token]\n\x00tail"
    assert stores.artifacts.put(stored) == ref  # idempotent: the same bytes, the same ref
    assert stores.artifacts.get(stores.artifacts.put("plain \ud835 text")) == b"plain \xed\xa0\xb5 text"


def test_the_registry_keeps_the_latest_spec_of_a_task(stores) -> None:
    stores.tasks.register("t1", {"kind": "replay", "budget": 8000})
    stores.tasks.register("t1", {"kind": "replay", "budget": 9000})
    assert stores.tasks.get("t1") == {"kind": "replay", "budget": 9000} and stores.tasks.get("t9") is None


def test_unregister_removes_one_row_and_a_missing_one_is_fine(stores) -> None:
    stores.tasks.register("t1", {"kind": "replay"})
    stores.tasks.register("t1-fork-3", {"kind": "replay", "parent": "t1"})
    stores.tasks.unregister("t1-fork-3")
    stores.tasks.unregister("t1-fork-3")  # (taken back twice: nothing left, no error)
    stores.tasks.unregister("t9")
    assert stores.tasks.get("t1-fork-3") is None and stores.tasks.get("t1") == {"kind": "replay"}
    assert stores.tasks.task_ids() == ["t1"]
