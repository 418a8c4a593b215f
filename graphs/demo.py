"""``taskctx demo``: an offline task on the embedded defaults (scripted model, SQLite).

The task: make a failing unit test pass. The scripted policy plans three steps, reads the code,
patches it, runs the tests (they fail: a failure that recovery records and retries), patches
again, runs the tests green, and the reviewer approves. The CLI stops the run after 3 executor
steps (an interruption) and resumes it from its checkpoint.

:class:`DemoTools` answers each call id with a fixed output, so the demo is deterministic.
"""

from __future__ import annotations

from typing import Any

from nodes import ScriptedChatModel, ToolOutcome, complete, function_schema, plan, recover, review, tool_call

__all__ = ["DEMO_REQUEST", "DEMO_STOP_AFTER", "DemoTools", "demo_model"]

DEMO_REQUEST = (
    "The unit test tests/test_calc.py::test_mean fails: mean([]) raises ZeroDivisionError. "
    "Make mean() return 0.0 for an empty list.\n"
    "Do not modify tests/test_calc.py."
)
DEMO_STOP_AFTER = 3

_CALC_V0 = "def mean(xs):\n    return sum(xs) / len(xs)\n"
_TEST_FAIL = (
    "============================= test session starts ==============================\n"
    "tests/test_calc.py F.                                                    [100%]\n"
    "=================================== FAILURES ===================================\n"
    "___________________________________ test_mean __________________________________\n"
    "Traceback (most recent call last):\n"
    '  File "calc.py", line 3, in mean\n'
    "    return sum(xs) / len(xs) if xs is not None else 0.0\n"
    "ZeroDivisionError: division by zero\n"
    "========================= 1 failed, 1 passed in 0.02s =========================\n"
)
_TEST_PASS = "tests/test_calc.py ..                                                    [100%]\n2 passed in 0.01s\n"

_OUTPUTS = {
    "d-read": ToolOutcome("ok", _CALC_V0, "file_read", "calc.py"),
    "d-patch1": ToolOutcome("ok", "wrote calc.py (1 line changed)", "command", "calc.py", "calc.py"),
    "d-test1": ToolOutcome("error", _TEST_FAIL, "command"),
    "d-patch2": ToolOutcome("ok", "wrote calc.py (1 line changed)", "command", "calc.py", "calc.py"),
    "d-test2": ToolOutcome("ok", _TEST_PASS, "command"),
}


class DemoTools:
    """Fixed outputs per call id (``d-read``, ``d-patch1``, ``d-test1``, ...)."""

    def schemas(self) -> list[dict[str, Any]]:
        return [
            function_schema("read_file", "Read a file of the workspace.", {"path": {"type": "string"}}, ["path"]),
            function_schema("write_file", "Write a file of the workspace.",
                            {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
            function_schema("run_tests", "Run the test suite.", {}),
        ]

    def has_side_effects(self, tool: str) -> bool:
        return tool == "write_file"

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        return _OUTPUTS.get(call_id, ToolOutcome("error", f"demo: no scripted output for {call_id}"))


def demo_model() -> ScriptedChatModel:
    """The scripted policy of the demo (answers per role, in call order)."""
    return ScriptedChatModel(script={
        "planner": [plan("Read calc.py", "Fix mean() for empty lists", "Run the tests",
                         goal="mean([]) returns 0.0 and the test suite passes",
                         criteria=["tests/test_calc.py passes"])],
        "executor": [
            tool_call("read_file", {"path": "calc.py"}, id="d-read", content="Look at mean() first."),
            complete("mean() divides by len(xs) without a guard",
                     findings=["calc.py: mean() divides by len(xs); an empty list raises ZeroDivisionError"]),
            tool_call("write_file", {"path": "calc.py", "content": "def mean(xs):\n    return sum(xs) / len(xs) if xs is not None else 0.0\n"},
                      id="d-patch1", content="Guard the division."),
            complete("patched mean()"),
            tool_call("run_tests", {}, id="d-test1", content="Check the fix."),
            tool_call("write_file", {"path": "calc.py", "content": "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n"},
                      id="d-patch2", content="The guard tested for None, not for emptiness; test truthiness."),
            tool_call("run_tests", {}, id="d-test2", content="Run the tests again."),
            complete("tests pass", findings=["2 tests pass after the second patch"]),
        ],
        "recovery": [recover("retry", "the guard is wrong: `xs is not None` is true for []; patch again")],
        "reviewer": [review("approve", "mean([]) returns 0.0; tests pass; tests/test_calc.py untouched")],
    })
