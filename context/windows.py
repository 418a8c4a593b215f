"""How much of a task the TaskContext keeps: the windows that bound a checkpoint's size.

The event log keeps everything; each window says how many of the most recent items a part of
the state holds (``context.history`` reads the rest back from the log).
"""

from __future__ import annotations

__all__ = [
    "COMPLETED_WINDOW",
    "DEGRADED_ARGS_CHARS",
    "ERRORS_WINDOW",
    "FINDINGS_WINDOW",
    "NARROW_CHECKPOINT_ITEMS",
    "NARROW_DELTA_TOKENS",
    "NARROW_TEXT_CHARS",
    "PLAN_DIGEST_MAX",
    "PLAN_DONE_WINDOW",
    "PLAN_FULL_STEPS",
    "PLAN_ROOM_TOKENS",
    "PLAN_RUN_MIN",
    "RECENT_EVENTS_WINDOW",
    "REPORTS_PER_ROLE",
    "REPORT_ITEMS_KEPT",
    "STALE_WINDOW",
]

#: How many event summaries ``TaskContext.events.recent`` keeps (the full log is in the store).
RECENT_EVENTS_WINDOW = 20
#: How many findings ``TaskContext.evidence.findings`` keeps (older ones stay in the event log),
#: so a checkpoint's size does not grow with the number of steps.
FINDINGS_WINDOW = 10
#: How many resolved errors ``TaskContext.errors`` keeps (the most recent; open errors are always
#: kept, and so is a resolved error whose call is still in the executor transcript). The others
#: stay in the event log (``error.occurred`` / ``error.resolved``), where inspect and the report
#: read them.
ERRORS_WINDOW = 10
#: How many done (or skipped) steps ``plan.steps`` keeps (the most recent); older ones leave the
#: state for the digest ``plan.done_digest`` (their titles and results stay in the event log).
PLAN_DONE_WINDOW = 20
#: How many entries ``plan.done_digest`` keeps (ranges like ``s1-s990`` or single ids).
PLAN_DIGEST_MAX = 50
#: How many ids ``progress.completed_steps`` keeps (the most recent; ``completed_count`` counts all).
COMPLETED_WINDOW = 20
#: How many ``fact.stale`` marks ``TaskContext.evidence.stale_facts`` keeps (the log has them all).
STALE_WINDOW = 50
#: How many reports of each role ``progress.reports`` keeps (the most recent; the log has all).
REPORTS_PER_ROLE = 3
#: How many items of one report ``progress.reports`` keeps (the first; ``items_total`` counts all).
REPORT_ITEMS_KEPT = 20
#: Prompts collapse a run of at least this many consecutive done (or skipped) plan steps ...
PLAN_RUN_MIN = 3
#: ... in plans of more than this many steps (the executor's one-line plan status: always).
PLAN_FULL_STEPS = 20

#: A prompt whose required blocks do not fit degrades them in a declared order (docs/design.md
#: "Context blocks, trust and budget"). Narrowed, the state delta is cut to at most this many
#: tokens (the plan as one line of counts, the step's texts cut) ...
NARROW_DELTA_TOKENS = 300
#: ... each of its texts (the current step, the last step's summary, an approval's arguments) to
#: at most this many chars ...
NARROW_TEXT_CHARS = 300
#: ... and the checkpoint block keeps this many of its findings and left calls (the newest).
NARROW_CHECKPOINT_ITEMS = 3
#: A call shown as its digest (the last degrade step) shows at most this many chars of its
#: arguments (head and tail around the ref of the full arguments).
DEGRADED_ARGS_CHARS = 600
#: Before the plan exists (the task-start check), the room kept for what the plan adds to every
#: executor call's required blocks: the criteria and constraints it adds, the current step.
PLAN_ROOM_TOKENS = 150
