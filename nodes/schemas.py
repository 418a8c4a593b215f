"""Schemas of the control tools the role nodes offer their models (OpenAI function format)."""

from __future__ import annotations

from .tools import function_schema

__all__ = ["SUBMIT_PLAN", "COMPLETE_STEP", "SUBMIT_REVIEW", "SUBMIT_REPORT", "DECIDE_RECOVERY"]

_STR = {"type": "string"}
_STRS = {"type": "array", "items": _STR}
_FINDINGS = {
    "type": "array",
    "items": {"type": "object", "properties": {"statement": _STR, "evidence_refs": _STRS}, "required": ["statement"]},
}

SUBMIT_PLAN = function_schema(
    "submit_plan",
    "Submit the plan: the goal as you understand it, success criteria, and ordered steps.",
    {
        "interpreted_goal": _STR,
        "success_criteria": _STRS,
        "non_goals": _STRS,
        "constraints": {
            "type": "array",
            "items": _STR,
            "description": "Hard constraints the request states that the task's list lacks, verbatim.",
        },
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": _STR,
                    "title": _STR,
                    "description": _STR,
                    "expected_output": _STR,
                    "depends_on": _STRS,
                },
                "required": ["title"],
            },
        },
        "reason": _STR,
    },
    ["steps"],
)

COMPLETE_STEP = function_schema(
    "complete_step",
    "Finish the current step with a summary and findings (each with its evidence refs); "
    "sent with tool calls, once they all succeed.",
    {
        "summary": _STR,
        "result": {"type": "string", "enum": ["success", "partial", "failed", "blocked"]},
        "findings": _FINDINGS,
        "unresolved_issues": _STRS,
    },
    ["summary"],
)

SUBMIT_REVIEW = function_schema(
    "submit_review",
    "Approve the work, or send it back with the issues to fix.",
    {"verdict": {"type": "string", "enum": ["approve", "revise"]}, "summary": _STR, "issues": _STRS},
    ["verdict"],
)

SUBMIT_REPORT = function_schema(
    "submit_report",
    "Report what you found: a short verdict (e.g. pass or fail), a summary, the items found "
    "(issues, failing checks) and the refs they rest on.",
    {"verdict": _STR, "summary": _STR, "items": _STRS, "refs": _STRS},
    ["verdict"],
)

DECIDE_RECOVERY = function_schema(
    "decide_recovery",
    "Decide what happens after a failure.",
    {"decision": {"type": "string", "enum": ["retry", "replan", "stop"]}, "reason": _STR},
    ["decision"],
)
