"""The task's own words. Hard constraints come first from the caller, then from
the planner's structured output (with its source); the wording heuristic normalises typography
and finds prohibitions anywhere in a sentence, and the prompt never presents its list as complete."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import SqliteStores, extract_constraints, replay
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel
from nodes.render.base import constraints_text
from nodes.testing import complete, plan, review

FIVE = (
    "Tidy up the release script.\n"
    "Don\u2019t push to main.\n"
    "Please never force-push.\n"
    "Avoid editing .github/workflows.\n"
    "No changes to the public API.\n"
    "Do not touch the migrations folder."
)
FIVE_FOUND = [
    "Don\u2019t push to main.",
    "Please never force-push.",
    "Avoid editing .github/workflows.",
    "No changes to the public API.",
    "Do not touch the migrations folder.",
]


def test_five_prohibitions_on_separate_lines_all_reach_the_prompt() -> None:
    assert extract_constraints(FIVE) == FIVE_FOUND
    task = new_task(FIVE, "k1")
    assert task.identity.constraints == FIVE_FOUND
    assert constraints_text(task) == (
        "## Hard constraints (verbatim, never break them)\n"
        "- Don\u2019t push to main.\n"
        "- Please never force-push.\n"
        "- Avoid editing .github/workflows.\n"
        "- No changes to the public API.\n"
        "- Do not touch the migrations folder.\n"
        "(5 found in the request's wording: possibly incomplete, every prohibition in the original request holds)"
    )


@pytest.mark.parametrize(
    ("request_text", "found"),
    [
        # typography: curly apostrophes, NFKC full-width letters, em dash, no-break space
        (
            "Fix the build.\nWe\u2019re close \u2014 but you mustn\u2019t bump the version.",
            ["We\u2019re close \u2014 but you mustn\u2019t bump the version."],
        ),
        ("Fix the build.\nYou mustn\u2019t bump the version.", ["You mustn\u2019t bump the version."]),
        ("Fix the build.\n\uff24on\u2019t rename files.", ["\uff24on\u2019t rename files."]),
        ("Fix the build. It\u00a0must\u00a0not write to /etc. Thanks.", ["It\u00a0must\u00a0not write to /etc."]),
        # anywhere in a sentence, in list items with any marker
        (
            "Steps:\n1. Update the parser\n2) and never call eval()\n- fix it without modifying tests\n10. done",
            ["and never call eval()", "fix it without modifying tests"],
        ),
        # statements are not prohibitions
        ("Fix the crash. I don't know why it fails. It doesn't work on Linux; the bug never shows up on Mac.", []),
        # a one-line request is the request, not a constraint of itself
        ("Do not touch the migrations folder.", []),
        ("Don\u2019t push to main", []),
    ],
)
def test_the_wording_heuristic(request_text: str, found: list[str]) -> None:
    assert extract_constraints(request_text) == found


def test_caller_constraints_come_first_then_the_wording_then_the_planner(tmp_path: Path) -> None:
    task = new_task(FIVE, "k2", constraints=["Keep the changelog format.", "Don\u2019t push to main."])
    ident = task.identity
    assert ident.constraints == ["Keep the changelog format.", *FIVE_FOUND]
    assert ident.constraint_sources == dict.fromkeys(FIVE_FOUND[1:], "request")
    text = constraints_text(task)
    assert text.splitlines()[1:3] == ["- Keep the changelog format.", "- Don\u2019t push to main."]
    model = ScriptedChatModel(
        script={
            "planner": [plan("Tidy", constraints=["Keep the changelog format.", "Leave tags alone."])],
            "executor": [complete("tidied")],
            "reviewer": [review("approve")],
        }
    )
    stores = SqliteStores(":memory:")
    g = build_orchestrator(model, stores=stores, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    r = run_graph(g, stores, "k2", task)
    assert r.state.identity.constraints == ["Keep the changelog format.", *FIVE_FOUND, "Leave tags alone."]
    assert r.state.identity.constraint_sources["Leave tags alone."] == "planner"
    events = stores.events.read("k2")
    created = events[0].payload
    assert created["constraints"][0] == "Keep the changelog format."
    assert created["constraint_sources"] == dict.fromkeys(FIVE_FOUND[1:], "request")
    assert replay(events) == r.state
    # the executor's prompt carries every constraint with its source
    from nodes.runtime import prompt_text  # noqa: F401  (the prompt artifacts are its output)

    built = [e for e in events if e.kind == "context.built" and e.payload["role"] == "executor"]
    prompt = stores.artifacts.get(built[-1].payload["prompt_ref"]).decode()
    assert "- Keep the changelog format.\n- Don\u2019t push to main.\n" in prompt
    # the planner's constraint is its claim: quoted after the others
    assert (
        "Added by the planner:\n"
        '<external_content source="agent:planner constraints">\n- Leave tags alone.\n</external_content>\n'
        "(2 given by the caller; 4 found in the request's wording; 1 added by the planner: "
        "possibly incomplete, every prohibition in the original request holds)\n"
    ) in prompt
    trust = {b["id"]: b["trust"] for b in built[-1].payload["blocks"]}
    assert trust["core.constraints"] == "agent_claim" and trust["core.request"] == "user_claim"


def test_no_constraints_is_never_presented_as_a_complete_list() -> None:
    task = new_task("Rename the helper.", "k3")
    assert task.identity.constraints == []
    assert constraints_text(task) == (
        "## Hard constraints (verbatim, never break them)\n"
        "- (none listed; every prohibition in the original request still holds)"
    )
    given = new_task("Rename the helper.", "k4", constraints=["Keep the old name as an alias."])
    assert constraints_text(given) == (
        "## Hard constraints (verbatim, never break them)\n- Keep the old name as an alias."
    )


def test_taskctx_run_takes_constraints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import graphs.arunner as tasks  # where a run's request becomes a task (start_state)
    from graphs.cli import app

    seen: dict[str, object] = {}
    real = tasks.new_task

    def spy(request: str, task_id: str, **kw: object):  # type: ignore[no-untyped-def]
        t = real(request, task_id, **kw)  # type: ignore[arg-type]
        seen["constraints"] = t.identity.constraints
        raise SystemExit(0)

    import nodes

    monkeypatch.setattr(tasks, "new_task", spy)
    monkeypatch.setattr(nodes, "resolve_model", lambda spec: None)  # no provider needed: stops at new_task
    monkeypatch.setattr("graphs.project.Project.task_graph", lambda project, tid, spec=None: None)
    res = CliRunner().invoke(
        app,
        [
            "run",
            "Tidy up.\nDo not push to main.",
            "--model",
            "fake:x",
            "--constraint",
            "Keep tags.",
            "--constraint",
            "No sudo.",
            "--db",
            str(tmp_path / "c.sqlite"),
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert seen.get("constraints") == ["Keep tags.", "No sudo.", "Do not push to main."], res.output
