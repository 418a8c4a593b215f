"""A fork's view of its parent's workspace: the side effects after the fork point that the fork
does not undo (only calls that ran), on SQLite and Postgres."""

from __future__ import annotations

from typing import Any

import pytest

from context import new_event
from graphs.fork_workspace import shared_side_effects, side_effects_after


def _call(cid: str, tool: str, argv: list[str] | None = None, side: bool = True) -> Any:
    args = '{"argv": ' + str(argv or ["true"]).replace("'", '"') + "}"
    return new_event(
        "tool.called", {"call_id": cid, "tool": tool, "arguments": args, "has_side_effects": side}, actor="agent"
    )


def _perm(kind: str, cid: str, tool: str) -> Any:
    return new_event(kind, {"call_id": cid, "tool": tool}, actor="user")


def _result(cid: str, status: str = "ok") -> Any:
    return new_event("tool.result.received", {"call_id": cid, "status": status}, actor="tool")


def test_side_effects_after_the_fork_are_the_calls_that_ran(stores: Any) -> None:
    rc = "run_command"
    stores.events.append(
        "p",
        [
            new_event("task.created", {"task_id": "p", "original_request": "fix it"}, actor="user"),
            _call("c1", rc, ["make"]),
            _result("c1"),
            # after the fork point (seq 3):
            _call("c2", rc, ["rm", "-rf", "build"]),  # refused by the policy: never run
            _perm("permission.denied", "c2", rc),
            _result("c2", "denied"),
            _call("c3", "write_file"),  # ran, changed a file
            _perm("permission.granted", "c3", "write_file"),
            _result("c3"),
            new_event("file.modified", {"path": "a.txt", "call_id": "c3", "sha256": "ab" * 32}, actor="tool"),
            _call("c4", rc, ["make", "install"]),  # ran
            _perm("permission.granted", "c4", rc),
            _result("c4", "error"),
            _call("c5", rc, ["make", "clean"]),  # never run: no grant, no result
            _call("c6", "read_file", side=False),  # no side effects
            _result("c6"),
            _call("c7", rc, ["rm", "x"]),  # rejected by the user again: a refusal with an error result
            _perm("permission.denied", "c7", rc),
            _result("c7", "error"),
            _call("c8", rc, ["deploy"]),  # granted, no result: the parent stopped inside it
            _perm("permission.granted", "c8", rc),
        ],
    )
    assert side_effects_after(stores.events, "p", 3) == [
        "seq 10: a.txt changed by write_file (call c3)",
        'seq 11: run_command {"argv": ["make", "install"]} (call c4)',
        'seq 20: run_command {"argv": ["deploy"]} (call c8; started, no result recorded: it may have run)',
    ]
    assert side_effects_after(stores.events, "p", 0) == [
        'seq 2: run_command {"argv": ["make"]} (call c1)',
        "seq 10: a.txt changed by write_file (call c3)",
        'seq 11: run_command {"argv": ["make", "install"]} (call c4)',
        'seq 20: run_command {"argv": ["deploy"]} (call c8; started, no result recorded: it may have run)',
    ]
    assert side_effects_after(stores.events, "p", 21) == []
    # a fork where the executor's run ends (its call pending): the call the parent ran after it is listed
    assert side_effects_after(stores.events, "p", 11) == [
        'seq 13: run_command {"argv": ["make", "install"]} (call c4, made at seq 11 before the fork)',
        'seq 20: run_command {"argv": ["deploy"]} (call c8; started, no result recorded: it may have run)',
    ]
    # a call that changed a file, made before the fork point: its file's line carries the note
    assert side_effects_after(stores.events, "p", 7)[0] == (
        "seq 10: a.txt changed by write_file (call c3, made at seq 7 before the fork)"
    )
    assert side_effects_after(stores.events, "p", 20) == [
        'seq 21: run_command {"argv": ["deploy"]} (call c8, made at seq 20 before the fork; started, no result '
        "recorded: it may have run)"
    ]


def _steps(task_id: str, cursor: int, writes: list[tuple[str, str, bytes]], artifacts: Any) -> list[Any]:
    """One executor run (``tool.called``) and one tool-node run (result, ``file.modified``) per write."""
    import hashlib
    import json

    out: list[Any] = []
    for cid, path, data in writes:
        artifacts.put(data)
        args = json.dumps({"path": path, "content": data.decode()})
        call = {"call_id": cid, "step_id": "s1", "tool": "write_file", "arguments": args, "has_side_effects": True}
        key = f"{task_id}#{cursor + len(out)}:executor"
        out.append(new_event("tool.called", call, actor="agent").model_copy(update={"causation_id": key}))
        key = f"{task_id}#{cursor + len(out)}:tools"
        made = [
            new_event("tool.result.received", {"call_id": cid, "result_summary": "written"}, actor="tool"),
            new_event(
                "file.modified",
                {"path": path, "call_id": cid, "sha256": hashlib.sha256(data).hexdigest()},
                actor="tool",
            ),
        ]
        out += [e.model_copy(update={"causation_id": key}) for e in made]
    return out


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_fork_of_a_fork_has_the_workspace_as_it_was_through_the_lineage(
    tmp_path: Any, request: Any, backend: str
) -> None:
    """A writes f at steps 1 and 3; B, forked from A after step 2 (sharing A's workspace), writes g
    twice; C, forked from B after B's first write with the workspace at the fork, has f as after
    A's step 1 (A's step 3 undone, though B never made it) and g as after B's first write."""
    from context import TaskContext, replay
    from graphs import open_project, thread_config
    from graphs.fork import fork_task
    from nodes import ScriptedChatModel

    ws = tmp_path / "ws"
    ws.mkdir()
    f1, f2, f3, g1, g2 = b"f one\n", b"f two\n", b"f three\n", b"g one\n", b"g two\n"
    db = request.getfixturevalue("pg_db") if backend == "postgres" else str(tmp_path / "t.sqlite")
    with open_project(db) as project:
        graph = project.graph(ScriptedChatModel(script={}), memory=False)
        st = project.stores

        def checkpoint(task_id: str) -> None:
            state = replay(st.events.iter(task_id))
            values = {p: getattr(state, p) for p in TaskContext.model_fields}
            graph.update_state(thread_config(task_id), values, as_node="tools")

        head = [
            new_event("task.created", {"task_id": "A", "original_request": "write f"}, actor="user"),
            new_event("plan.created", {"steps": [{"id": "s1", "title": "write"}]}, actor="agent"),
        ]
        log = [e.model_copy(update={"causation_id": "A#0:planner"}) for e in head]
        log += _steps("A", 2, [("a1", "f", f1), ("a2", "other", f2), ("a3", "f", f3)], st.artifacts)
        st.events.append("A", log)
        st.tasks.register("A", {"workspace": str(ws)})
        (ws / "f").write_bytes(f3)
        (ws / "other").write_bytes(f2)
        checkpoint("A")
        b = fork_task(project, "A", at_step=2, new_task_id="B", graph=graph)  # f as after step 1 there
        assert b.fork_seq == 8 and b.workspace is None
        st.events.append("B", _steps("B", 9, [("b1", "g", g1), ("b2", "g", g2)], st.artifacts))
        (ws / "g").write_bytes(g2)
        checkpoint("B")
        c = fork_task(
            project, "B", at=12, new_task_id="C", graph=graph, workspace_at_fork=True, workspace=tmp_path / "cws"
        )
        assert (c.restored, c.left) == (["f", "g"], {})
        assert (tmp_path / "cws" / "f").read_bytes() == f1
        assert (tmp_path / "cws" / "g").read_bytes() == g1
        assert (tmp_path / "cws" / "other").read_bytes() == f2
        assert [(p.name, p.read_bytes()) for p in sorted(ws.iterdir())] == [("f", f3), ("g", g2), ("other", f2)]
        # a fork of B that shares the workspace: B's side effects after the fork, then A's after B's
        # fork point (they are in the folder too), none undone
        d = fork_task(project, "B", at=12, new_task_id="D", graph=graph)
        effects = ["seq 15: g changed by write_file (call b2)", "task 'A', seq 11: f changed by write_file (call a3)"]
        assert shared_side_effects(st, "B", 12, d.state) == effects
        assert project.inspect("D").after_fork == effects
        # B2 forked from A with its own copy (f as after step 1 there): A's later changes are not in
        # B2's folder, so a fork of B2 undoes B2's change alone
        b2 = fork_task(
            project, "A", at_step=2, new_task_id="B2", graph=graph, workspace_at_fork=True, workspace=tmp_path / "b2ws"
        )
        assert (b2.restored, (tmp_path / "b2ws" / "f").read_bytes()) == (["f"], f1)
        st.events.append("B2", _steps("B2", 9, [("b1", "g", g1), ("b2", "g", g2)], st.artifacts))
        (tmp_path / "b2ws" / "g").write_bytes(g2)
        checkpoint("B2")
        c2 = fork_task(
            project, "B2", at=12, new_task_id="C2", graph=graph, workspace_at_fork=True, workspace=tmp_path / "c2ws"
        )
        assert (c2.restored, c2.left) == (["g"], {})
        assert shared_side_effects(st, "B2", 12) == ["seq 15: g changed by write_file (call b2)"]  # not A's
        assert [(p.name, p.read_bytes()) for p in sorted((tmp_path / "c2ws").iterdir())] == [
            ("f", f1),
            ("g", g1),
            ("other", f2),
        ]


def test_a_fork_point_in_the_prefix_a_parent_shares_keeps_a_hand_edit_made_after_it(tmp_path: Any) -> None:
    """B is A forked after step 2 (sharing A's workspace, not run); E is B forked at seq 5, inside the
    prefix B shares with A, before a hand edit of f (seq 6) and A's later write of f: E gets f as the
    hand edit left it (the person's change stays, A's write is undone), not f as at seq 5."""
    import hashlib

    from context import TaskContext, replay
    from graphs import open_project, thread_config
    from graphs.fork import fork_task
    from nodes import ScriptedChatModel

    ws = tmp_path / "ws"
    ws.mkdir()
    f1, hand, f3, o = b"f one\n", b"f by hand\n", b"f three\n", b"other\n"
    with open_project(str(tmp_path / "t.sqlite")) as project:
        graph = project.graph(ScriptedChatModel(script={}), memory=False)
        st = project.stores
        head = [
            new_event("task.created", {"task_id": "A", "original_request": "write f"}, actor="user"),
            new_event("plan.created", {"steps": [{"id": "s1", "title": "write"}]}, actor="agent"),
        ]
        log = [e.model_copy(update={"causation_id": "A#0:planner"}) for e in head]
        log += _steps("A", 2, [("a1", "f", f1)], st.artifacts)  # seq 3-5
        st.artifacts.put(hand)  # the bytes a re-read stored
        stale = {"fact_id": "r1", "path": "f", "old_sha": hashlib.sha256(f1).hexdigest()}
        stale["new_sha"] = hashlib.sha256(hand).hexdigest()
        log.append(new_event("fact.stale", {**stale, "cause": "resume"}, actor="system"))  # seq 6: a hand edit
        log += _steps("A", 6, [("a2", "other", o), ("a3", "f", f3)], st.artifacts)  # seq 7-9, 10-12
        st.events.append("A", log)
        st.tasks.register("A", {"workspace": str(ws)})
        (ws / "f").write_bytes(f3)
        (ws / "other").write_bytes(o)
        state = replay(st.events.iter("A"))
        graph.update_state(
            thread_config("A"), {p: getattr(state, p) for p in TaskContext.model_fields}, as_node="tools"
        )
        b = fork_task(project, "A", at_step=2, new_task_id="B", graph=graph)
        assert b.fork_seq == 9
        e = fork_task(
            project, "B", at=5, new_task_id="E", graph=graph, workspace_at_fork=True, workspace=tmp_path / "e"
        )
        left = {"other": "the task never saw its bytes before the parent changed it at seq 9; left as it is"}
        assert (e.restored, e.left) == (["f"], left)  # a file made after the fork is named, not removed
        assert [(p.name, p.read_bytes()) for p in sorted((tmp_path / "e").iterdir())] == [("f", hand), ("other", o)]
        # a direct fork of A at the same point gives the same folder
        d = fork_task(
            project, "A", at=5, new_task_id="D", graph=graph, workspace_at_fork=True, workspace=tmp_path / "d"
        )
        assert (d.restored, [(p.name, p.read_bytes()) for p in sorted((tmp_path / "d").iterdir())]) == (
            ["f"],
            [("f", hand), ("other", o)],
        )
