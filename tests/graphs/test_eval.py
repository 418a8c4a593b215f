"""``taskctx eval``: every case in graphs/eval/case_files passes, and the harness fails when the
builder stops pinning the core layer (so a regression in the builder or a renderer shows up).

The cases run in a few child processes at once (this file is also the child's script: ``python
tests/graphs/test_eval.py MODE CASE_ID...`` prints the results as JSON), so the whole file stays well
under 30 s. ``MODE`` is ``pinned`` (the library as it is), ``core`` (every renderer's core blocks
become priority ``low``, i.e. droppable) or ``required`` (the builder treats no block as
``required``: core, pending approvals and the latest tool result all become droppable).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
CASES = REPO / "graphs" / "eval" / "case_files"

#: The missing and distortion cases that check the core layer (request, criteria, constraints).
CORE_CASES = [
    "distortion-auth-go-after-10-rebuilds",
    "distortion-constraint-after-crash-and-resume",
    "distortion-constraint-with-special-characters",
    "distortion-paraphrase-in-tool-output",
    "distortion-replan-keeps-constraint-verbatim",
    "distortion-ten-constraints-order-kept",
    "missing-constraint-at-step-200",
    "missing-constraints-across-roles-and-steps",
    "missing-original-request-verbatim",
    "missing-success-criteria-after-replan",
]
#: The missing cases that check the other pinned blocks (permissions, pending approval, latest
#: tool result, current step).
PINNED_CASES = [
    "missing-current-step-after-restarts",
    "missing-latest-tool-result-never-dropped",
    "missing-pending-approval-survives-rebuilds",
    "missing-permissions-every-call",
]
HEAVY = ["overload-10mb-tool-result"]


# ---------------------------------------------------------------------------------------------
# the child: apply the mode, run the cases, print JSON
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _unpinned(mode: str) -> Iterator[None]:
    """Within the block, the builder pins less (see module doc); ``pinned`` changes nothing."""
    import nodes.render.base as common
    import nodes.render.executor
    import nodes.render.planner
    import nodes.render.recovery
    import nodes.render.reviewer

    # each renderer imported these names, so patch them where they are looked up
    mods = (common, nodes.render.executor, nodes.render.planner, nodes.render.reviewer, nodes.render.recovery)
    saved = [(m, n, getattr(m, n)) for m in mods for n in ("core_blocks", "build_context") if hasattr(m, n)]
    orig_core, orig_build = common.core_blocks, common.build_context

    def core_blocks_unpinned(*a: Any, **k: Any) -> Any:
        return [b.model_copy(update={"priority": "low"}) for b in orig_core(*a, **k)]

    def build_without_required(candidates: Any, **k: Any) -> Any:
        return orig_build(
            [b.model_copy(update={"priority": "low"}) if b.priority == "required" else b for b in candidates], **k
        )

    for m, n, _ in saved:
        if mode == "core" and n == "core_blocks":
            setattr(m, n, core_blocks_unpinned)
        elif mode == "required" and n == "build_context":
            setattr(m, n, build_without_required)
    try:
        yield
    finally:
        for m, n, v in saved:
            setattr(m, n, v)


def _child(mode: str, ids: list[str]) -> None:
    from graphs.eval import run_eval

    with _unpinned(mode):
        rep = run_eval(CASES, only=ids)
    sys.stdout.write(json.dumps(rep.to_json()["cases"]) + "\n")


# ---------------------------------------------------------------------------------------------
# the parent
# ---------------------------------------------------------------------------------------------
def _all_ids() -> list[str]:
    return sorted(json.loads(p.read_text(encoding="utf-8"))["id"] for p in CASES.glob("*.json"))


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], dict[str, Any]]:
    """Every case (pinned) and the missing/distortion cases unpinned, in two processes."""
    # two processes (CI machines have two cores), balanced by measured run time
    long_runs = ["missing-constraint-at-step-200", "overload-300-step-run"]
    rest = [i for i in _all_ids() if i not in HEAVY and i not in long_runs]
    core_rest = [i for i in CORE_CASES if i not in long_runs]
    jobs = [
        [("pinned", HEAVY + rest[::2]), ("required", PINNED_CASES), ("core", core_rest)],
        [("pinned", long_runs + rest[1::2]), ("core", long_runs[:1])],
    ]
    env = {
        **os.environ,
        "LANGGRAPH_STRICT_MSGPACK": "true",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    script = (
        "import sys, runpy; m = runpy.run_path(sys.argv[1]); "
        "[m['_child'](a.split(':')[0], a.split(':')[1].split(',')) for a in sys.argv[2:]]"
    )
    procs = []
    for job in jobs:
        args = [f"{mode}:{','.join(ids)}" for mode, ids in job]
        procs.append(
            (
                job,
                subprocess.Popen(
                    [sys.executable, "-c", script, str(HERE), *args],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for job, p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-3000:]
        lines = [ln for ln in stdout.splitlines() if ln.startswith("[")]
        assert len(lines) == len(job), stdout[-2000:] + stderr[-2000:]
        for (mode, _ids), line in zip(job, lines):
            for c in json.loads(line):
                out[(mode, c["id"])] = c
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case_id", _all_ids())
def test_case_passes(results: dict[tuple[str, str], dict[str, Any]], case_id: str) -> None:
    r = results[("pinned", case_id)]
    assert r["status"] in ("passed", "pending"), f"{case_id} ({r['file']}):\n" + "\n".join(r["failures"])


def test_cases_cover_every_category() -> None:
    from graphs.eval import CATEGORIES, load_cases

    cases = [c for _, c in load_cases(CASES)]
    assert len(cases) >= 40
    per = {cat: sum(c.category == cat for c in cases) for cat in CATEGORIES}
    assert all(n >= 5 for n in per.values()), per
    missing_or_distortion = {c.id for c in cases if c.category in ("missing", "distortion")}
    assert missing_or_distortion == set(CORE_CASES) | set(PINNED_CASES)


def _content_failures(r: dict[str, Any]) -> list[str]:
    """Failures of the checks on prompts and manifests (not a crash of the run)."""
    return [f for f in r["failures"] if not f.startswith(("run:", "invariant:"))]


@pytest.mark.slow
@pytest.mark.parametrize("case_id", CORE_CASES)
def test_core_unpinned_makes_case_fail(results: dict[tuple[str, str], dict[str, Any]], case_id: str) -> None:
    """Core blocks at priority low: the request or a constraint is dropped from some prompt."""
    r = results[("core", case_id)]
    assert r["status"] == "failed", f"{case_id} still passes with the core layer unpinned"
    assert any(f.startswith("prompt_contains:") for f in _content_failures(r)), r["failures"][:5]


@pytest.mark.slow
@pytest.mark.parametrize("case_id", PINNED_CASES)
def test_required_unpinned_makes_case_fail(results: dict[tuple[str, str], dict[str, Any]], case_id: str) -> None:
    """No block required: the approval, latest tool result, permissions or step leave some prompt."""
    r = results[("required", case_id)]
    assert r["status"] == "failed", f"{case_id} still passes without required blocks"
    assert any(f.startswith(("prompt_contains:", "manifest:")) for f in _content_failures(r)), r["failures"][:5]
    assert any(f.startswith("prompt_contains:") or "included=False" in f for f in r["failures"]), r["failures"][:5]


# ---------------------------------------------------------------------------------------------
# the harness itself
# ---------------------------------------------------------------------------------------------
SMALL = {
    "id": "small",
    "category": "security",
    "request": "Free some disk space.",
    "permissions": {"denied_tools": ["rm_rf"]},
    "script": {
        "planner": [{"plan": ["Clean"]}],
        "executor": [
            {"tool": "rm_rf", "id": "x1", "args": {"path": "/"}, "result": {"output": "gone"}},
            {"complete": "done"},
        ],
        "reviewer": [{"review": "approve"}],
    },
    "checks": [
        {"check": "tools_run", "not_run": ["x1"]},
        {"check": "event", "kind": "permission.denied", "payload": {"call_id": "x1"}, "count": 1},
    ],
}


def _write(folder: Path, name: str, data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return p


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    from graphs.eval import load_case, run_case

    bad = json.loads(json.dumps(SMALL))
    bad["checks"] = [
        {"check": "tools_run", "once": ["x1"]},
        {"check": "prompt_contains", "text": ["this text is in no prompt"]},
        {"check": "state", "path": "control.status", "equals": "failed"},
    ]
    r = run_case(load_case(_write(tmp_path, "bad.json", bad)))
    assert r.status == "failed"
    assert [f.split(":")[0] for f in r.failures] == ["tools_run", "prompt_contains", "prompt_contains", "state"]
    ok = run_case(load_case(_write(tmp_path, "ok.json", SMALL)))
    assert ok.status == "passed", ok.failures
    assert ok.stats["context_packs_built"] == 4 and ok.stats["checkpoint_saves"] > 0


@pytest.mark.parametrize(
    "mutate,expect",
    [
        (lambda d: d.pop("request"), "field request: Field required"),
        (
            lambda d: d["script"]["executor"][0].pop("id"),
            "field script.executor[0]: Value error, a tool turn needs an id",
        ),
        (lambda d: d["checks"].append({"check": "nope"}), "field checks[2]: Input tag 'nope' found using 'check'"),
        (lambda d: d.update(category="speed"), "field category: Input should be 'missing'"),
        (
            lambda d: d.update(crashes=[{"after_executor_steps": 2, "in_tool_call": "x1"}]),
            "field crashes[0]: Value error, a crash needs exactly one of",
        ),
    ],
)
def test_bad_case_names_file_and_field(tmp_path: Path, mutate: Any, expect: str) -> None:
    from graphs.eval import CaseError, load_case

    d = json.loads(json.dumps(SMALL))
    mutate(d)
    p = _write(tmp_path, "broken.json", d)
    with pytest.raises(CaseError) as exc:
        load_case(p)
    assert str(exc.value).startswith(f"{p}: {expect}"), str(exc.value)


def test_bad_json_and_duplicate_ids(tmp_path: Path) -> None:
    from graphs.eval import CaseError, load_case, load_cases

    p = _write(tmp_path / "a", "x.json", '{"id": "x",')
    with pytest.raises(CaseError, match=r"x\.json: not valid JSON at line 1"):
        load_case(p)
    _write(tmp_path / "b", "one.json", SMALL)
    _write(tmp_path / "b", "two.json", SMALL)
    with pytest.raises(CaseError, match="two.json: field id: 'small' is already used by one.json"):
        load_cases(tmp_path / "b")


def test_the_check_table_is_the_list_of_check_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CHECKS`` maps each check model to its handler; a case's checks parse by that table and
    ``run_check`` dispatches through it (an empty selection fails before any handler)."""
    import graphs.eval.checks as checks
    from graphs.eval import CaseError, load_case

    kinds = [m.model_fields["check"].annotation.__args__[0] for m in checks.CHECKS]
    assert kinds == [
        "prompt_contains",
        "prompt_excludes",
        "external_only",
        "manifest",
        "within_budget",
        "resets",
        "refetch",
        "state",
        "events",
        "event",
        "tools_run",
    ]
    d = json.loads(json.dumps(SMALL))
    d["checks"] = [{"check": "nope"}]
    with pytest.raises(CaseError) as exc:
        load_case(_write(tmp_path, "nope.json", d))
    assert ("does not match any of the expected tags: " + ", ".join(f"'{k}'" for k in kinds)) in str(exc.value)
    d["checks"] = [
        {"check": "tools_run", "once": ["x1"]},
        {"check": "prompt_contains", "role": "nobody", "text": ["a"]},
    ]
    case = load_case(_write(tmp_path, "two.json", d))
    assert [type(c) for c in case.checks] == [checks.ToolsRunCheck, checks.PromptContains]
    seen: list[tuple[str, list[Any]]] = []
    monkeypatch.setitem(
        checks.CHECKS, checks.ToolsRunCheck, lambda run, chk, calls: seen.append((chk.check, calls)) or ["x"]
    )
    run = type("Run", (), {"events": [], "inject_seq": None})()
    assert checks.run_check(run, case.checks[0]) == ["x"]
    assert seen == [("tools_run", [])]
    assert checks.run_check(run, case.checks[1]) == ["prompt_contains: no nobody model call matches the selection"]


def test_repeat_expands_with_nested_placeholders() -> None:
    from graphs.eval.cases import Turn, expand

    t = Turn.model_validate(
        {
            "repeat": 2,
            "var": "s",
            "turns": [
                {"repeat": 2, "turns": [{"tool": "run", "id": "s{s}c{i}", "args": {"n": "{i}"}}]},
                {"complete": "step {s}"},
            ],
        }
    )
    flat = expand([t])
    assert [x.id or x.complete for x in flat] == ["s1c1", "s1c2", "step 1", "s2c1", "s2c2", "step 2"]
    assert flat[1].args == {"n": "2"}


def test_eval_command(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from graphs.cli.eval import eval_command

    app = typer.Typer()
    app.command("eval")(eval_command)
    app.command("other")(lambda: None)  # two commands, so "eval" is a subcommand as in the real CLI
    runner = CliRunner()
    folder = tmp_path / "cases"
    _write(folder, "small.json", SMALL)
    res = runner.invoke(app, ["eval", "--cases", str(folder)])
    assert res.exit_code == 0, res.output
    assert "security         1      1      0       0      100%" in res.output
    assert "context_packs_built" in res.output
    res = runner.invoke(app, ["eval", "--cases", str(folder), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["total"] == {"cases": 1, "passed": 1, "failed": 0, "pending": 0}
    assert set(data["stats"]) == {
        "state_updates",
        "context_packs_built",
        "tool_results_compressed",
        "checkpoint_saves",
        "resume_events",
        "tasks_with_compression",
        "tasks_with_resume",
    }
    failing = json.loads(json.dumps(SMALL))
    failing["checks"] = [{"check": "tools_run", "once": ["x1"]}]
    _write(folder, "small.json", failing)
    res = runner.invoke(app, ["eval", "--cases", str(folder)])
    assert res.exit_code == 1 and "tools_run: x1 ran 0 times, want once" in res.output
    _write(folder, "small.json", "{")
    res = runner.invoke(app, ["eval", "--cases", str(folder)])
    assert res.exit_code == 2
    res = runner.invoke(app, ["eval", "--cases", str(tmp_path / "nowhere")])
    assert res.exit_code == 2


# ---------------------------------------------------------------------------------------------
# the builder's conflict rule (supersedes / superseded_by), used by the conflict cases
# ---------------------------------------------------------------------------------------------
def _b(id: str, **kw: Any) -> Any:
    from context import ContextBlock

    base = {"kind": "state", "layer": "recent", "source": "t", "token_estimate": 10, "text": id}
    return ContextBlock(id=id, **{**base, **kw})


def test_builder_newer_block_supersedes_older() -> None:
    from context import build_context

    old = _b("finding.s1.f1", observed_at="2026-01-01")
    new = _b("finding.s2.f1", observed_at="2026-01-02", supersedes=["finding.s1.f1"])
    r = build_context([old, new], budget=100, reserve_for_output=0)
    e = {x.id: x for x in r.manifest.entries}
    assert [b.id for b in r.blocks] == ["finding.s2.f1"]
    assert e["finding.s1.f1"].superseded_by == "finding.s2.f1"
    assert e["finding.s1.f1"].reason == "superseded by finding.s2.f1 (trusted_app, newer)"
    assert e["finding.s2.f1"].superseded_by is None


def test_builder_required_claim_stays_but_is_marked() -> None:
    from context import build_context

    claim = _b("core.request", priority="required", trust="user_claim")
    perms = _b("core.permissions", priority="required", supersedes=["core.request"])
    r = build_context([claim, perms], budget=100, reserve_for_output=0)
    e = {x.id: x for x in r.manifest.entries}
    assert e["core.request"].included and e["core.request"].superseded_by == "core.permissions"
    assert e["core.request"].reason == "required; superseded in part by core.permissions (trusted_app)"


def test_builder_less_trusted_block_cannot_supersede() -> None:
    from context import build_context

    rule = _b("core.constraints", trust="user_claim")
    tool = _b("tool.c1", trust="external_content", supersedes=["core.constraints"])
    r = build_context([rule, tool], budget=100, reserve_for_output=0)
    e = {x.id: x for x in r.manifest.entries}
    assert e["core.constraints"].included and e["core.constraints"].superseded_by is None
    assert e["tool.c1"].reason.endswith("; cannot supersede core.constraints (more trusted)")


def test_builder_keeps_older_block_when_its_overrider_is_dropped() -> None:
    from context import build_context

    old = _b("a", token_estimate=5, priority="low")
    new = _b("b", token_estimate=50, supersedes=["a"])
    r = build_context([old, new], budget=20, reserve_for_output=0)
    e = {x.id: x for x in r.manifest.entries}
    assert not e["b"].included and e["a"].included
    assert e["a"].reason == "fits (low, trusted_app); its overrider b was dropped"


if __name__ == "__main__":  # the child process (see module doc)
    _child(sys.argv[1], sys.argv[2:])


def test_unquoted_agent_claims_make_every_provenance_case_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``provenance`` cases pass only while model-written text is quoted: with
    ``quote_agent`` turned into a no-op (the text rendered bare, unquoted) each fails."""
    import nodes.render.base
    import nodes.render.executor
    import nodes.render.planner
    import nodes.render.quoting
    import nodes.render.recovery
    import nodes.render.reviewer
    import nodes.render.role_reports
    import nodes.render.transcript
    from graphs.eval import load_cases
    from graphs.eval.harness import run_case

    cases = [(p, c) for p, c in load_cases(CASES) if c.category == "provenance"]
    assert len(cases) >= 6
    for m in (
        nodes.render.base,
        nodes.render.executor,
        nodes.render.planner,
        nodes.render.recovery,
        nodes.render.quoting,
        nodes.render.reviewer,
        nodes.render.role_reports,
        nodes.render.transcript,
    ):
        if hasattr(m, "quote_agent"):  # a renderer may quote only through common's helpers
            monkeypatch.setattr(m, "quote_agent", lambda text, *, source: text)
    for path, case in cases:
        r = run_case(case, path)
        assert r.status == "failed", case.id
        assert any(f.startswith("external_only:") and "outside <external_content>" in f for f in r.failures), (
            case.id,
            r.failures,
        )
