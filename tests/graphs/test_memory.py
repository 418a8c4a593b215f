"""Durable memory across tasks: LangGraph's long-term store beside the
checkpointer (SQLite, and Postgres when ``TASKCTX_TEST_PG`` is set), the confirmation events it is
written from and rebuilt from, what a new task loads (provenance, supersession, staleness,
relevance), ``taskctx memory ...``, ``inspect``, and the eval category ``memory`` failing with
the mechanism switched off."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import TaskContext, new_event, replay
from context.memory import (
    MEMORY_LOG,
    FileStamp,
    MemoryRecord,
    lexical_score,
    memory_key,
    supersession,
    words,
)
from context.memory_writes import records_from_events
from graphs import build_orchestrator, new_task, open_project, thread_config
from graphs.memory_store import (
    confirm_memory,
    forget_memory,
    list_memories,
    rebuild_memory,
    show_memory,
)
from graphs.runner import run_graph
from nodes import ScriptedChatModel
from nodes.memory_source import MemorySource
from nodes.testing import complete, plan, review

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "graphs" / "eval" / "case_files"
TS = "2026-01-01T00:00:00.000Z"

DB1 = "The staging database is pg-staging-1 on port 5433"
DB2 = "The staging database moved to pg-staging-2 on port 6432"
REL = "The release branch is named release/2026"
REQ = "Connect the nightly report job to the staging database."
H5433 = hashlib.sha256(b"port: 5433\n").hexdigest()[:12]
H6432 = hashlib.sha256(b"port: 6432\n").hexdigest()[:12]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database: a SQLite file, or (when ``TASKCTX_TEST_PG`` is set) a Postgres one."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_db"))
    return str(tmp_path / "m.sqlite")


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={"planner": [plan(steps=[{"title": "connect"}])], "executor": [complete("ok")], "reviewer": [review()]}
    )


def _run(project: Any, task_id: str, request: str = REQ, root: Path | None = None, memory: bool = True) -> Any:
    g = build_orchestrator(
        _model(),
        checkpointer=project.checkpointer,
        stores=project.stores,
        memory=project.memory(root) if memory else None,
    )
    return g, run_graph(g, project.stores, task_id, new_task(request, task_id))


def _prompt(project: Any, task_id: str, role: str) -> tuple[str, list[dict[str, Any]]]:
    e = next(e for e in project.stores.events.read(task_id) if e.kind == "context.built" and e.payload["role"] == role)
    return project.stores.artifacts.get(e.payload["prompt_ref"]).decode(), e.payload["blocks"]


# -- pure parts ----------------------------------------------------------------------------


def test_keys_words_and_lexical_relevance() -> None:
    assert (
        memory_key("project", "fact", DB1) == "m_" + hashlib.sha256(f"project\nfact\n{DB1}".encode()).hexdigest()[:12]
    )
    assert memory_key("user", "fact", DB1) != memory_key("project", "fact", DB1)
    assert words("Read config/db.yaml, then THE port") == {
        "read",
        "config/db.yaml",
        "config",
        "db",
        "yaml",
        "port",
    }
    r = MemoryRecord(key="m_1", text="The staging database is on port 5433", subject="staging database")
    # its words: staging, database, port, 5433; the request has staging and database
    assert lexical_score(REQ, r) == 0.5
    assert lexical_score("Rename the release branch", r) == 0.0


def _rec(key: str, at: str, subject: str = "", ns: str = "project") -> MemoryRecord:
    return MemoryRecord(key=key, text=key, subject=subject, confirmed_at=at, namespace=ns)  # type: ignore[arg-type]


def test_supersession_is_by_subject_and_time() -> None:
    recs = [
        _rec("a", "2026-01-01T00:00:00.000Z", "db"),
        _rec("b", "2026-01-02T00:00:00.000Z", "db"),
        _rec("c", "2026-01-03T00:00:00.000Z", "db", ns="user"),  # another namespace: another group
        _rec("d", "2026-01-04T00:00:00.000Z"),  # no subject: its own group
        _rec("e", "2026-01-05T00:00:00.000Z"),
    ]
    assert supersession(recs) == {"a": "b"}


def test_records_from_events_folds_confirmations_and_forgets_only() -> None:
    def ev(kind: str, payload: dict[str, Any], ts: str) -> Any:
        return new_event(kind, payload, actor="user", timestamp=ts).model_copy(update={"seq": 1})

    t1 = [
        ev("task.created", {"task_id": "t1", "original_request": "x"}, "2026-01-01T00:00:00.000Z"),
        ev("memory.proposed", {"text": "never confirmed"}, "2026-01-01T00:00:01.000Z"),
        ev("memory.confirmed", {"text": DB1, "subject": "db"}, "2026-01-01T00:00:02.000Z"),
    ]
    stream = [
        ev("memory.confirmed", {"text": REL, "kind": "convention", "task_id": "t9"}, "2026-01-01T00:00:03.000Z"),
        ev(
            "memory.forgotten",
            {"key": memory_key("project", "fact", DB1), "text": DB1},
            "2026-01-01T00:00:04.000Z",
        ),
    ]
    t1 = [e.model_copy(update={"seq": i}) for i, e in enumerate(t1, 1)]
    stream = [e.model_copy(update={"seq": i}) for i, e in enumerate(stream, 1)]
    out = records_from_events({"t1": t1, MEMORY_LOG: stream})
    assert list(out) == [("project", memory_key("project", "convention", REL))]
    r = next(iter(out.values()))
    assert (r.task_id, r.confirmed_at, r.event_id) == ("t9", "2026-01-01T00:00:03.000Z", stream[0].id)
    # without the forget, t1's confirmation is there with t1 as its task
    out = records_from_events({"t1": t1, MEMORY_LOG: stream[:1]})
    assert out[("project", memory_key("project", "fact", DB1))].task_id == "t1"


def test_new_kinds_fold_and_replay_equals_the_folded_state() -> None:
    ev = [
        new_event("task.created", {"task_id": "t", "original_request": "r"}, actor="user", timestamp=TS),
        new_event(
            "memory.loaded",
            {"memories": [{"key": "m_a", "text": DB1, "confirmed_at": TS}, {"key": "m_b", "text": REL}]},
            actor="system",
            timestamp=TS,
        ),
        new_event("memory.confirmed", {"text": "uses pytest", "kind": "convention"}, actor="user", timestamp=TS),
        new_event("memory.forgotten", {"key": "m_a", "text": DB1}, actor="user", timestamp=TS),
        new_event("memory.forgotten", {"key": "m_x", "text": "uses pytest"}, actor="user", timestamp=TS),
    ]
    ctx = replay(ev)
    assert [m.key for m in ctx.memory.loaded] == ["m_b"]
    assert ctx.memory.project_conventions == []
    assert [s.summary for s in ctx.events.recent[1:]] == [
        "2 memories (lexical): m_a, m_b",
        "project convention: uses pytest",
        f"project m_a: {DB1}",
        "project m_x: uses pytest",
    ]
    # a payload of before this issue ({"kind", "text"}) reads back with the defaults
    old = new_event("memory.confirmed", {"kind": "fact", "text": "x"}, actor="user", timestamp=TS)
    assert old.payload == {
        "kind": "fact",
        "text": "x",
        "namespace": "project",
        "subject": "",
        "files": [],
        "confirmed_by": "user",
        "task_id": None,
    }
    assert new_event("memory.proposed", {"text": "x"}, actor="agent", timestamp=TS).payload == {
        "kind": "fact",
        "text": "x",
    }


# -- the store beside the checkpointer -----------------------------------------------------


def test_confirm_list_show_forget_and_rebuild(db: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "config").mkdir(parents=True)
    (ws / "config" / "db.yaml").write_text("port: 5433\n")
    with open_project(db) as p:
        r1 = confirm_memory(p, DB1, subject="staging database", files=["config/db.yaml"], root=ws)
        r2 = confirm_memory(p, REL, kind="convention")
        r3 = confirm_memory(p, DB2, supersedes=r1.key)  # takes r1's subject
        pref = confirm_memory(p, "Answer in short sentences", kind="preference", namespace="user")
        assert r1.files == [FileStamp(path="config/db.yaml", sha256=hashlib.sha256(b"port: 5433\n").hexdigest())]
        assert r3.subject == "staging database" and r1.confirmed_at < r2.confirmed_at < r3.confirmed_at
        views = list_memories(p, root=ws)
        assert [(v.record.key, v.superseded_by, v.stale) for v in views] == [
            (r1.key, r3.key, []),
            (r2.key, None, []),
            (r3.key, None, []),
            (pref.key, None, []),
        ]
        assert [v.record.key for v in list_memories(p, namespace="user")] == [pref.key]
        (ws / "config" / "db.yaml").write_text("port: 6432\n")
        stale = show_memory(p, r1.key, root=ws).stale
        assert [(s.path, s.current) for s in stale] == [("config/db.yaml", hashlib.sha256(b"port: 6432\n").hexdigest())]
        assert forget_memory(p, r2.key, reason="renamed").text == REL
        before = [v.as_json() for v in list_memories(p)]
        # every change is an event of the memory stream first
        assert [e.kind for e in p.stores.events.read(MEMORY_LOG)] == ["memory.confirmed"] * 4 + ["memory.forgotten"]
        # the store's contents come back from the confirmation events alone
        assert MemorySource(p.memory_store).clear() == 3
        assert list_memories(p) == []
        assert rebuild_memory(p) == 3
        assert [v.as_json() for v in list_memories(p)] == before
    with open_project(db) as p:  # it outlives the process's objects: the store is in the database
        assert [v.record.key for v in list_memories(p)] == [r1.key, r3.key, pref.key]


def test_the_sqlite_store_lives_in_the_project_file(tmp_path: Path) -> None:
    with open_project(tmp_path / "p.sqlite") as p:
        confirm_memory(p, DB1)
    conn = sqlite3.connect(tmp_path / "p.sqlite")
    rows = conn.execute("SELECT prefix, key FROM store").fetchall()
    assert rows == [("memory.project", memory_key("project", "fact", DB1))]
    assert {"checkpoints", "taskctx_events", "store"} <= {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }


def test_bad_input_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    from context import InvalidInputError, UnknownTaskError

    with open_project(tmp_path / "p.sqlite") as p:
        with pytest.raises(
            InvalidInputError, match="^--kind 'rule' is not a memory kind; use fact, preference or convention$"
        ):
            confirm_memory(p, DB1, kind="rule")
        with pytest.raises(InvalidInputError, match="^--namespace 'team' is not a memory namespace"):
            confirm_memory(p, DB1, namespace="team")
        with pytest.raises(InvalidInputError, match="^memory confirm: the text is empty"):
            confirm_memory(p, "  ")
        with pytest.raises(UnknownTaskError, match="^--task 'nope': no such task"):
            confirm_memory(p, DB1, task_id="nope")
        with pytest.raises(InvalidInputError, match=r"^--file a\.txt: no sha256 for it \(no task was given"):
            confirm_memory(p, DB1, files=["a.txt"])
        with pytest.raises(InvalidInputError, match="^--supersedes m_0: no such memory"):
            confirm_memory(p, DB1, supersedes="m_0")
        with pytest.raises(InvalidInputError, match="^memory m_0: no such memory"):
            forget_memory(p, "m_0")
        assert p.stores.events.read(MEMORY_LOG) == []  # nothing recorded by a refused call


# -- a new task loads what is relevant -----------------------------------------------------


def test_task_2_loads_what_task_1_confirmed_with_provenance(db: str, tmp_path: Path) -> None:
    with open_project(db) as p:
        g, _ = _run(p, "t1", "Find the staging database")
        confirm_memory(p, DB1, subject="staging database", task_id="t1")
        confirm_memory(p, REL, kind="convention", task_id="t1")
        g2, res = _run(p, "t2")
        loaded = res.state.memory.loaded
        assert [(m.key, m.task_id, m.score) for m in loaded] == [(memory_key("project", "fact", DB1), "t1", 0.3333)]
        events = p.stores.events.read("t2")
        assert [e.kind for e in events[:3]] == ["task.created", "memory.loaded", "context.built"]
        # replay(events) == checkpoint, with the new kind in the log
        assert replay(events) == TaskContext.model_validate(g2.get_state(thread_config("t2")).values)
        for role in ("planner", "executor", "reviewer"):
            text, blocks = _prompt(p, "t2", role)
            assert (
                f"## Remembered project fact: memory {loaded[0].key}, confirmed by user in task t1 at "
                f"{loaded[0].confirmed_at}\n{DB1}\n"
            ) in text
            assert REL not in text
            b = next(b for b in blocks if b["id"] == f"memory.{loaded[0].key}")
            assert (b["included"], b["trust"], b["layer"], b["kind"]) == (True, "trusted_app", "core", "memory")
        # a task that finds nothing relevant records no memory.loaded at all
        _, res3 = _run(p, "t3", "Rename a variable in utils.py")
        assert res3.state.memory.loaded == []
        assert "memory.loaded" not in [e.kind for e in p.stores.events.read("t3")]


def test_superseded_and_stale_memories(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "db.yaml").write_text("port: 5433\n")
    with open_project(tmp_path / "p.sqlite") as p:
        old = confirm_memory(p, DB1, subject="staging database", files=["db.yaml"], root=ws)
        new = confirm_memory(p, DB2, subject="staging database", files=["db.yaml"], root=ws)
        (ws / "db.yaml").write_text("port: 6432\n")
        _, res = _run(p, "t4", root=ws)
        loaded = res.state.memory.loaded
        assert [(m.key, m.superseded_by, [s.path for s in m.stale]) for m in loaded] == [
            (new.key, None, ["db.yaml"]),
            (old.key, new.key, ["db.yaml"]),
        ]
        text, blocks = _prompt(p, "t4", "executor")
        assert DB1 not in text
        assert (
            f"## Remembered project fact (STALE): memory {new.key}, confirmed by user outside a task at "
            f"{new.confirmed_at}\n{DB2}\nSTALE: db.yaml changed since this was confirmed (sha256 "
            f"{H5433} then, sha256 "
            f"{H6432} now); do not rely on it before re-reading "
            "the file."
        ) in text
        b_old = next(b for b in blocks if b["id"] == f"memory.{old.key}")
        assert (b_old["included"], b_old["superseded_by"]) == (False, f"memory.{new.key}")


def test_semantic_search_when_an_embedding_function_is_configured() -> None:
    from langgraph.store.memory import InMemoryStore

    vocab = ["staging", "database", "release", "branch", "port"]

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(w in t.lower()) + 0.01 for w in vocab] for t in texts]

    store = InMemoryStore(index={"dims": len(vocab), "embed": embed, "fields": ["text"]})
    src = MemorySource(store, min_score=0.9)
    assert src.search_kind == "semantic"
    for i, text in enumerate([DB1, REL]):
        e = new_event("memory.confirmed", {"text": text}, actor="user", timestamp=f"2026-01-01T00:00:0{i}.000Z")
        src.apply([e.model_copy(update={"seq": i + 1})], MEMORY_LOG)
    got = src.load("which staging database port?")
    assert [m.text for m in got] == [DB1]
    assert 0.9 <= got[0].score <= 1.0
    assert MemorySource(InMemoryStore()).search_kind == "lexical"


def test_the_project_store_searches_semantically_with_an_index(tmp_path: Path) -> None:
    """``open_project(..., memory_index=...)``: the SQLite store beside the checkpointer with
    LangGraph's vector index (sqlite-vec); a new task loads by similarity."""
    vocab = ["staging", "database", "release", "branch", "port"]

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(w in t.lower()) + 0.01 for w in vocab] for t in texts]

    index = {"dims": 5, "embed": embed, "fields": ["text"]}
    if not hasattr(sqlite3.Connection, "enable_load_extension"):  # this Python's sqlite3 cannot load sqlite-vec
        from context import StoreOpenError

        with open_project(tmp_path / "p.sqlite", memory_index=index) as p:
            with pytest.raises(StoreOpenError, match="^semantic memory search on SQLite .* needs sqlite-vec, and this"):
                confirm_memory(p, DB1)
        return
    with open_project(tmp_path / "p.sqlite", memory_index=index) as p:
        confirm_memory(p, DB1)
        confirm_memory(p, REL, kind="convention")
        assert p.memory().search_kind == "semantic"
        _, res = _run(p, "t1", "Which port does the staging database use?")
        assert [m.text for m in res.state.memory.loaded] == [DB1]
        assert res.state.memory.loaded[0].score > 0.9
        assert p.stores.events.read("t1")[1].payload["search"] == "semantic"


def test_confirming_in_a_paused_task_promotes_its_working_memory(tmp_path: Path) -> None:
    """With the task's graph, the confirmation goes into the task's own log and checkpoint: its
    working-memory item becomes a durable fact there, and the store gets it."""
    with open_project(tmp_path / "p.sqlite") as p:
        g, _ = _run(p, "t1", "Find the staging database")
        cfg = thread_config("t1")
        ctx = TaskContext.model_validate(g.get_state(cfg).values)
        e = new_event("memory.proposed", {"text": DB1}, actor="agent", correlation_id="t1")
        new = replay(p.stores.events.append("t1", [e.model_copy(update={"seq": ctx.events.cursor + 1})]), ctx)
        g.update_state(cfg, {"memory": new.memory, "events": new.events})
        assert TaskContext.model_validate(g.get_state(cfg).values).memory.working_memory == [DB1]
        rec = confirm_memory(p, DB1, task_id="t1", graph=g)
        state = TaskContext.model_validate(g.get_state(cfg).values)
        assert (state.memory.working_memory, state.memory.durable_facts) == ([], [DB1])
        events = p.stores.events.read("t1")
        assert [x.kind for x in events[-2:]] == ["memory.proposed", "memory.confirmed"]
        assert replay(events) == state  # the log and the checkpoint agree
        assert p.stores.events.read(MEMORY_LOG) == []
        assert (rec.task_id, rec.event_id) == ("t1", events[-1].id)
        assert rebuild_memory(p) == 1 and list_memories(p)[0].record == rec


def test_a_node_that_confirms_writes_the_store(tmp_path: Path) -> None:
    """A confirmation recorded by a node (``NodeRun.commit``) reaches the long-term store too."""
    from context.events import MemoryConfirmed
    from nodes import NodeEnv, NodeRun

    with open_project(tmp_path / "p.sqlite") as p:
        env = NodeEnv(events=p.stores.events, artifacts=p.stores.artifacts, memory=p.memory())
        state = new_task("r", "t1")
        run = NodeRun(env, state, "custom", {})
        run.commit([run.make("memory.confirmed", MemoryConfirmed(text=DB1), actor="user")])
        assert [(v.record.key, v.record.task_id) for v in list_memories(p)] == [
            (memory_key("project", "fact", DB1), "t1")
        ]


# -- the command line ------------------------------------------------------------------------


def test_memory_commands_and_inspect(tmp_path: Path) -> None:
    from graphs.cli import app

    runner = CliRunner()
    db = str(tmp_path / "c.sqlite")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "db.yaml").write_text("port: 5433\n")
    k1, k2 = memory_key("project", "fact", DB1), memory_key("project", "fact", DB2)
    res = runner.invoke(
        app,
        [
            "memory",
            "confirm",
            DB1,
            "--subject",
            "staging database",
            "--file",
            "db.yaml",
            "--workspace",
            str(ws),
            "--db",
            db,
        ],
    )
    assert res.exit_code == 0 and res.output == f"confirmed {k1} (project fact): {DB1}\n", res.output
    res = runner.invoke(app, ["memory", "confirm", DB2, "--supersedes", k1, "--db", db])
    assert res.output == f"confirmed {k2} (project fact): {DB2}\n"
    (ws / "db.yaml").write_text("port: 6432\n")
    res = runner.invoke(app, ["memory", "list", "--workspace", str(ws), "--db", db])
    lines = res.output.splitlines()
    assert [ln.split("  (confirmed by")[0] for ln in lines] == [
        f"{k1}  project fact [STALE, superseded by {k2}]: {DB1}",
        f"{k2}  project fact: {DB2}",
    ]
    res = runner.invoke(app, ["memory", "show", k1, "--workspace", str(ws), "--db", db])
    assert res.output.splitlines()[1:] == [
        f"subject: staging database; event: {json.loads(runner.invoke(app, ['memory', 'show', k1, '--json', '--db', db]).output)['event_id']}",
        f"file: db.yaml sha256 {H5433} when confirmed; STALE: sha256 {H6432} now",
    ]
    data = json.loads(runner.invoke(app, ["memory", "list", "--json", "--db", db]).output)
    assert [(d["key"], d["superseded_by"]) for d in data] == [(k1, k2), (k2, None)]
    # a task started by a command loads the current one; inspect names it
    with open_project(db) as p:
        _run(p, "t2", root=ws)
    res = runner.invoke(app, ["inspect", "t2", "--db", db])
    assert "\nMemories loaded\n" in res.output
    assert f"  stale: db.yaml sha256 {H5433} then, {H6432} now" in res.output
    assert f"- {k2} [project fact] {DB2} (confirmed by user, no task, " in res.output
    assert f"- {k1} [project fact; STALE, superseded by {k2}] {DB1}" in res.output
    res = runner.invoke(app, ["memory", "forget", k2, "--reason", "moved again", "--db", db])
    assert res.output == f"forgot {k2}: {DB2}\n"
    res = runner.invoke(app, ["memory", "rebuild", "--db", db])
    assert res.output == "rebuilt the memory store from the event log: 1 memories\n"
    res = runner.invoke(app, ["memory", "forget", "m_0", "--db", db])
    assert res.exit_code == 2
    assert res.output == f"error: memory m_0: no such memory; `taskctx memory list --db {db}` shows the keys\n"
    # the memory stream is no task
    assert "~memory" not in runner.invoke(app, ["list", "--db", db]).output


# -- the eval category ------------------------------------------------------------------------


def _memory_cases() -> list[tuple[Path, Any]]:
    from graphs.eval import load_cases

    return [(p, c) for p, c in load_cases(CASES) if c.category == "memory"]


def test_memory_cases_pass_and_fail_with_the_mechanism_switched_off() -> None:
    from graphs.eval.harness import run_case

    cases = _memory_cases()
    assert len(cases) >= 6
    for path, case in cases:
        on = run_case(case, path)
        assert on.status == "passed", (case.id, on.failures)
        off = run_case(case, path, off=["memory"])
        assert off.status == "failed", case.id
        assert not any(f.startswith(("run:", "invariant:")) for f in off.failures), off.failures


@pytest.mark.parametrize(
    "case_id, target, replacement",
    [
        ("memory-superseded-in-task-3", "nodes.memory_source.supersession", lambda recs: {}),
        ("memory-rebuilt-from-confirmation-events", "nodes.memory_source.supersession", lambda recs: {}),
        ("memory-stale-in-task-4", "nodes.memory_source.MemorySource.stale_files", lambda self, r: []),
        ("memory-irrelevant-not-loaded", "nodes.memory_source.lexical_score", lambda q, r: 1.0),
    ],
)
def test_each_part_of_the_mechanism_is_what_its_case_checks(
    monkeypatch: pytest.MonkeyPatch, case_id: str, target: str, replacement: Any
) -> None:
    from graphs.eval.harness import run_case

    path, case = next((p, c) for p, c in _memory_cases() if c.id == case_id)
    monkeypatch.setattr(target, replacement)
    r = run_case(case, path)
    assert r.status == "failed", case_id


def test_forgetting_and_rebuilding_are_what_their_cases_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphs.eval.harness import run_case

    cases = dict((c.id, (p, c)) for p, c in _memory_cases())
    monkeypatch.setattr("graphs.memory_store.MemorySource.apply", lambda self, events, log: 0)  # events only
    for cid in ("memory-forgotten", "memory-confirmed-in-task-1-used-in-task-2"):
        assert run_case(cases[cid][1], cases[cid][0]).status == "failed", cid
    monkeypatch.undo()
    monkeypatch.setattr("graphs.memory_store.records_from_events", lambda logs: {})
    p, c = cases["memory-rebuilt-from-confirmation-events"]
    assert run_case(c, p).status == "failed"


def test_forgetting_a_correction_does_not_reinstate_what_it_corrected(db: str, tmp_path: Path) -> None:
    """The user corrected DB1 with DB2 (same subject), then forgot DB2: DB1 stays superseded (the
    mark was recorded when DB2 was confirmed), is not loaded, and a rebuild from the events gives
    the same; confirming DB1 again makes it current."""
    from graphs.cli import app

    with open_project(db) as p:
        old = confirm_memory(p, DB1, subject="staging database")
        new = confirm_memory(p, DB2, subject="staging database")
        assert [(v.record.key, v.superseded_by, v.superseder_forgotten) for v in list_memories(p)] == [
            (old.key, new.key, False),
            (new.key, None, False),
        ]
        forget_memory(p, new.key, reason="wrong host")
        views = [
            (v.record.key, v.record.superseded_by, v.superseded_by, v.superseder_forgotten) for v in list_memories(p)
        ]
        assert views == [(old.key, new.key, new.key, True)]
        _, res = _run(p, "t1")
        assert res.state.memory.loaded == []
        assert "memory.loaded" not in [e.kind for e in p.stores.events.read("t1")]
        before = [v.as_json() for v in list_memories(p)]
        assert rebuild_memory(p) == 1
        assert [v.as_json() for v in list_memories(p)] == before
        again = confirm_memory(p, DB1, subject="staging database")
        assert again.key == old.key and again.superseded_by is None
        _, res = _run(p, "t2")
        assert [(m.key, m.superseded_by) for m in res.state.memory.loaded] == [(old.key, None)]
    if not db.startswith("postgresql"):
        out = CliRunner().invoke(app, ["memory", "list", "--db", db]).output
        assert out.split("  (confirmed by")[0] == f"{old.key}  project fact: {DB1}"
        forget = CliRunner().invoke(app, ["memory", "confirm", DB2, "--subject", "staging database", "--db", db])
        assert forget.exit_code == 0
        CliRunner().invoke(app, ["memory", "forget", new.key, "--db", db])
        out = CliRunner().invoke(app, ["memory", "list", "--db", db]).output
        assert out.split("  (confirmed by")[0] == (
            f"{old.key}  project fact [superseded by {new.key} (since forgotten)]: {DB1}"
        )


def test_store_writes_marks_the_group_and_a_forget_deletes_only() -> None:
    from context.memory_writes import store_writes

    def ev(kind: str, payload: dict[str, Any]) -> Any:
        return new_event(kind, payload, actor="user", timestamp=TS)

    a = MemoryRecord(key="m_a", text="a", subject="db")
    b = MemoryRecord(key="m_b", text="b", subject="db", superseded_by="m_x")
    other = MemoryRecord(key="m_o", text="o", subject="ci")
    put, delete = store_writes(
        ev("memory.confirmed", {"text": DB2, "subject": "db"}), MEMORY_LOG, lambda r: [a, b, other]
    )
    k = memory_key("project", "fact", DB2)
    assert [(r.key, r.superseded_by) for r in put] == [(k, None), ("m_a", k), ("m_b", k)] and delete == []
    assert store_writes(ev("memory.forgotten", {"key": k, "text": DB2}), MEMORY_LOG, lambda r: [a]) == (
        [],
        [("project", k)],
    )
    assert store_writes(ev("memory.proposed", {"text": "x"}), MEMORY_LOG, lambda r: [a]) == ([], [])


def test_a_command_prints_the_memories_its_task_loads(tmp_path: Path) -> None:
    """`taskctx demo` (any command that runs a task) prints ``memory.loaded`` as it is recorded."""
    from graphs.cli import app

    db = str(tmp_path / "d.sqlite")
    text = "Uploads over the proxy limit get HTTP 413 from nginx"
    res = CliRunner().invoke(app, ["memory", "confirm", text, "--subject", "upload limit", "--db", db])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        app, ["demo", "--db", db, "--out", str(tmp_path / "o"), "--task-id", "d1", "--approve-all"]
    )
    assert res.exit_code == 0, res.output
    key = memory_key("project", "fact", text)
    assert "] memory.loaded: 1 memory (lexical): " + key + "\n" in res.stdout
    assert res.stdout.index("memory.loaded") < res.stdout.index("plan.created")


def test_a_memory_whose_file_is_gone_says_so_and_show_reads_one_record(tmp_path: Path) -> None:
    from graphs.cli import app

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "db.yaml").write_text("port: 5433\n")
    db = str(tmp_path / "g.sqlite")
    with open_project(db) as p:
        old = confirm_memory(p, DB1, subject="staging database", files=["db.yaml"], root=ws)
        new = confirm_memory(p, DB2, subject="staging database")
        (ws / "db.yaml").unlink()
        forget_memory(p, new.key)
        v = show_memory(p, old.key, root=ws)
        assert (v.superseded_by, v.superseder_forgotten) == (new.key, True)
        assert [(s.path, s.current) for s in v.stale] == [("db.yaml", "")]  # "" : gone, as in freshness
        assert v == next(x for x in list_memories(p, root=ws) if x.record.key == old.key)
        (tmp_path / "db.yaml").write_text("port: 5433\n")  # stamped from here; gone under ws
        confirm_memory(p, DB1, subject="staging database", files=["db.yaml"], root=tmp_path)  # current again
        _, res = _run(p, "t1", root=ws)
        text, _ = _prompt(p, "t1", "executor")
    assert [(m.key, [s.current for s in m.stale]) for m in res.state.memory.loaded] == [(old.key, [""])]
    assert f"STALE: db.yaml changed since this was confirmed (sha256 {H5433} then, it is gone)" in text
    res = CliRunner().invoke(app, ["memory", "show", old.key, "--workspace", str(ws), "--db", db])
    assert res.output.splitlines()[-1] == f"file: db.yaml sha256 {H5433} when confirmed; STALE: sha256 (gone) now"
    res = CliRunner().invoke(app, ["inspect", "t1", "--db", db])
    assert f"  stale: db.yaml sha256 {H5433} then, (gone) now" in res.output
    help_text = " ".join(CliRunner().invoke(app, ["memory", "confirm", "--help"]).output.split())
    assert "A --db that does not exist yet is created" in help_text


def test_a_confirmed_memory_holding_a_secret_is_stored_masked(tmp_path: Path) -> None:
    """The memory stream is a log like any other: a secret in a confirmed fact is masked before it
    is written, and the record in the long-term store is the masked one (found by its key)."""
    token = "ghp_" + "R2d2C3p0L1u2k3e4S5k6y7W8a9l0k1e2r3S4"
    with open_project(tmp_path / "m.sqlite") as p:
        rec = confirm_memory(p, f"The CI token is {token}")
        assert rec.text == "The CI token is [REDACTED:github_token]"
        assert [v.record.text for v in list_memories(p)] == [rec.text]
        assert token not in json.dumps([e.payload for e in p.stores.events.read(MEMORY_LOG)])


def test_memory_cli_escapes_control_and_bidi_characters(tmp_path: Path) -> None:
    """A memory's text holding ESC and U+202E is printed escaped by confirm, list, show and
    forget (as inspect does): no raw control or bidi character reaches the terminal."""
    from graphs.cli import app

    db = str(tmp_path / "m.sqlite")
    runner = CliRunner()
    res = runner.invoke(app, ["memory", "confirm", "x \x1b[31mRED\x1b[0m \u202e", "--subject", "a\x07b", "--db", db])
    assert res.exit_code == 0, res.output
    key = res.stdout.split()[1]
    assert res.stdout == f"confirmed {key} (project fact): x \\x1b[31mRED\\x1b[0m \\u202e\n"
    listed = runner.invoke(app, ["memory", "list", "--db", db]).stdout
    assert listed.startswith(f"{key}  project fact: x \\x1b[31mRED\\x1b[0m \\u202e  (confirmed by user, no task, ")
    shown = runner.invoke(app, ["memory", "show", key, "--db", db]).stdout
    assert "x \\x1b[31mRED\\x1b[0m \\u202e" in shown and "subject: a\\x07b; event: " in shown
    gone = runner.invoke(app, ["memory", "forget", key, "--db", db]).stdout
    assert gone == f"forgot {key}: x \\x1b[31mRED\\x1b[0m \\u202e\n"
    for out in (res.stdout, listed, shown, gone):
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out


def test_confirm_with_a_task_waiting_for_approval_says_where_the_event_went(tmp_path: Path) -> None:
    """The demo waits for the approval of its patch: ``memory confirm --task d1`` records the event
    in the ``~memory`` stream (the task's checkpoint holds the pending interrupt) and says so in a
    second line; ``--supersedes`` with the memory's own key is refused with one line."""
    from context import SqliteStores
    from context.memory import MEMORY_LOG
    from graphs.cli import app

    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    runner = CliRunner()
    r = runner.invoke(app, ["demo", "--db", db, "--out", out, "--task-id", "d1"])
    assert "waiting for approval of apply_patch (call d-fix1, high risk)" in r.stdout, r.output
    r = runner.invoke(app, ["memory", "confirm", "uploads go through the proxy", "--task", "d1", "--db", db])
    assert r.exit_code == 0, r.output
    key = r.stdout.split()[1]
    assert r.stdout.splitlines()[1] == (
        "recorded in the log's ~memory stream with task d1 as provenance: the task's own log takes it only while "
        "the task is stopped or finished, not waiting for an approval or running"
    )
    stores = SqliteStores(db)
    assert "memory.confirmed" not in [e.kind for e in stores.events.read("d1")]
    mem = [e for e in stores.events.read(MEMORY_LOG) if e.kind == "memory.confirmed"]
    assert [(e.payload["text"], e.payload["task_id"]) for e in mem] == [("uploads go through the proxy", "d1")]
    r = runner.invoke(app, ["memory", "confirm", "uploads go through the proxy", "--supersedes", key, "--db", db])
    assert r.exit_code == 2
    assert r.stderr == (
        f"error: --supersedes {key}: that is this memory's own key (same namespace, kind and text); "
        "pass the key of the older memory it replaces\n"
    )
