"""A fork's view of its parent's workspace: the side effects after the fork point that the fork
does not undo (only calls that ran), on SQLite and Postgres."""

from __future__ import annotations

from typing import Any

from context import new_event
from graphs.fork_workspace import side_effects_after


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
