"""The bench's two-fold split rule, optimistic bound and stress set: exact values on
hand-made inputs (the bench itself on shared runs: tests/graphs/test_bench.py)."""

from __future__ import annotations

from context import COMMAND_LIMIT, Trajectory
from graphs.bench.bound import BOUND, bound_stats
from graphs.bench.split import halves, source_of
from graphs.bench.strategies import Call, TaskctxRun
from graphs.bench.stress import STRESS_SHAPES, stress_trajectories

SHARED = [
    "moatless-django-14730",
    "moatless-django-15695",
    "moatless-matplotlib-23299",
    "moatless-pytest-5227",
    "moatless-requests-863",
    "moatless-sphinx-10325",
    "moatless-sympy-14024",
    "moatless-sympy-23262",
    "openhands-ponyc-4588",
    "openhands-ponyc-4595",
    "openhands-resolver-pr-viewer-darkmode",
    "sweagent-ctf-rev-rock",
    "sweagent-ctf-web-i-got-id",
    "sweagent-pydicom-1458",
    "taubench-airline-t17-r3",
    "taubench-airline-t2-r1",
]


def test_halves_alternate_within_sources() -> None:
    h = halves(list(reversed(SHARED)))  # the order given does not matter
    assert h["A"] == [
        "moatless-django-14730",
        "moatless-matplotlib-23299",
        "moatless-requests-863",
        "moatless-sympy-14024",
        "openhands-ponyc-4588",
        "openhands-resolver-pr-viewer-darkmode",
        "sweagent-ctf-web-i-got-id",
        "taubench-airline-t17-r3",
    ]
    assert sorted(h["A"] + h["B"]) == SHARED and len(h["B"]) == 8
    # every source is in both halves
    assert (
        {source_of(t) for t in h["A"]}
        == {source_of(t) for t in h["B"]}
        == {
            "moatless",
            "openhands",
            "sweagent",
            "taubench",
        }
    )


def _call(i: int, prompt: int, blocks: list[tuple[str, int]]) -> Call:
    return Call(
        index=i,
        prompt_tokens=prompt,
        fingerprints=[],
        text="",
        payload={"blocks": [{"id": b, "tokens": t, "included": True} for b, t in blocks]},
    )


def test_bound_is_the_floor_with_all_but_the_newest_step_cached() -> None:
    core = [("core.request", 50), ("core.permissions", 30)]
    calls = [
        _call(0, 1000, [*core, ("step.delta", 20)]),  # 900 outside the blocks: system + schemas
        _call(1, 1300, [*core, ("step.delta", 20), ("tool.c1", 300)]),
        # five calls: the bound keeps the last 3; the old ones and the note are not floor
        _call(
            2,
            2350,
            [
                *core,
                ("note.1", 40),
                ("tool.c1", 300),
                ("tool.c2", 200),
                ("tool.c3", 400),
                ("tool.c4", 100),
                ("step.delta", 20),
                ("tool.c5", 310),
            ],
        ),
        # a call without a new tool result: nothing new to send
        _call(3, 1610, [*core, ("state.checkpoint", 200), ("tool.c4", 100), ("tool.c5", 310), ("step.delta", 20)]),
    ]
    run = TaskctxRun(Trajectory(id="t", task="x", meta={}), None, [], calls, [], True)  # type: ignore[arg-type]
    s = bound_stats(run)
    assert s.strategy == BOUND and s.calls == 4
    # prompts: 1,000; 1,300; 900 + 80 + 20 + (400 + 100 + 310) = 1,810; 900 + 80 + 200 + 20 + 410 = 1,610
    assert s.input_tokens == 1000 + 1300 + 1810 + 1610 and s.peak_prompt_tokens == 1810
    # cached: nothing on the first call; then all but the newest call (300, then 310, then 0)
    assert s.cached_prefix_tokens == 0 + 1000 + 1500 + 1610
    assert round(s.effective_cost, 1) == round(1000 + (300 + 100.0) + (310 + 150.0) + 161.0, 1)
    assert round(s.costs["flat"], 1) == round(s.effective_cost, 1)
    # openai-auto: a cached prefix under 1,024 tokens is not cached (call 2: 1,000)
    assert round(s.costs["openai-auto"], 1) == round(1000 + 1300 + (310 + 1408 * 0.1 + 92) + (1536 * 0.1 + 74), 1)


def test_stress_set_is_deterministic_and_straddles_the_threshold() -> None:
    a, b = stress_trajectories(), stress_trajectories()
    assert (
        [t.id for t in a]
        == list(STRESS_SHAPES)
        == ["stress-threshold", "stress-small", "stress-alternating", "stress-300"]
    )
    assert [len(t.steps) for t in a] == [60, 200, 60, 300]
    assert all(x.steps == y.steps for x, y in zip(a, b))
    thr = a[0]
    assert [len(s.observation) for s in thr.steps[:2]] == [COMMAND_LIMIT - 100, COMMAND_LIMIT + 100]
    # within a run no output repeats another (no identical-output pointers hide the shape)
    for t in a:
        assert len({s.observation for s in t.steps}) == len(t.steps)
