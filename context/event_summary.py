"""One line per event: what ``events.recent``, ``inspect`` and the report show of the log."""

from __future__ import annotations

import json

from .events import Event
from .freshness import change_text

__all__ = ["summarize_event"]


def summarize_event(e: Event) -> str:
    """A one-line, human-readable summary of an event.

    Args:
        e: The event.

    Returns:
        One line of at most 160 chars (whitespace collapsed; a longer one ends in ``...``).
    """
    p = e.payload
    k = e.kind
    if k == "task.created":
        text = p["original_request"].splitlines()[0] if p["original_request"] else ""
    elif k in ("plan.created", "plan.updated"):
        text = f"{len(p['steps'])} steps" + (f": {p['reason']}" if p.get("reason") else "")
    elif k == "step.started":
        text = f"{p['step_id']}: {p['objective']}"
    elif k == "step.completed":
        text = f"{p['step_id']} {p['result']}: {p['summary']}"
    elif k == "step.completion.requested":
        text = f"{p['step_id']} {p['result']} once {', '.join(p['after_calls'])} succeed: {p['summary']}"
    elif k == "tool.called":
        text = f"{p['tool']} {p['arguments']}"
    elif k == "tool.result.received":
        text = f"{p['call_id']} {p['status']} ({p['raw_chars']} chars)"
    elif k.startswith("permission."):
        text = f"{p['tool']}: {p['reason']}"
    elif k == "error.occurred":
        text = f"{p['error_id']}: {p['message']}"
    elif k == "error.resolved":
        text = f"{p['error_id']}: {p['resolution']}"
    elif k == "context.built":
        text = f"{p['role']} call {p['call']}: {p['prompt_tokens']} tokens" + (
            " (transcript restarted)" if p["transcript_reset"] else ""
        )
    elif k == "review.completed":
        text = f"{p['verdict']}: {p['summary']}"
    elif k == "role.reported":
        n = len(p["items"])
        items = f" ({n} item{'s' if n != 1 else ''})" if n else ""
        text = f"{p['role']} {p['verdict'] or '(no verdict)'}: {p['summary']}{items}"
    elif k == "recovery.decided":
        text = f"{p['decision']}: {p['reason']}"
    elif k == "task.completed":
        text = f"{p['status']}: {p['summary']}"
    elif k == "fact.stale":
        text = f"{p['fact_id']}: {change_text(p['path'], p['cause'], p['old_sha'], p['new_sha'])}"
    elif k == "task.forked":
        text = f"forked from {p['parent_task_id']} at seq {p['fork_seq']}" + (f": {p['why']}" if p.get("why") else "")
    elif k == "state.edited":
        text = "edited " + ", ".join(sorted(f"{part}.{f}" for part, fs in p["changes"].items() for f in fs))
    elif k == "memory.confirmed":
        text = f"{p['namespace']} {p['kind']}: {p['text']}"
    elif k == "memory.forgotten":
        text = f"{p['namespace']} {p['key']}: {p['text']}" + (f" ({p['reason']})" if p.get("reason") else "")
    elif k == "memory.loaded":
        ms = p["memories"]
        text = f"{len(ms)} {'memory' if len(ms) == 1 else 'memories'} ({p['search']}): " + ", ".join(
            m["key"] + (" stale" if m["stale"] else "") + (" superseded" if m["superseded_by"] else "") for m in ms
        )
    elif k == "resume.started":
        text = (f"{p['node']} runs" if p.get("node") else "resumed") + (
            f", from checkpoint {p['from_checkpoint']}" if p.get("from_checkpoint") else ""
        )
    else:
        text = json.dumps(p, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."
