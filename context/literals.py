"""The closed vocabularies of the TaskContext: statuses, results, risk levels, provenance."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "AGENT_CLAIM",
    "ControlStatus",
    "FactKind",
    "PlanStatus",
    "Provenance",
    "RiskLevel",
    "StaleCause",
    "StepResult",
    "StepStatus",
]

PlanStatus = Literal["draft", "approved", "executing", "revising", "completed"]
StepStatus = Literal["pending", "running", "blocked", "done", "skipped", "failed"]
StepResult = Literal["success", "failed", "partial", "blocked"]
#: ``forked`` is never folded: it is what ``inspect`` shows of a fork not run yet (``context.lineage.FORKED``).
ControlStatus = Literal["idle", "running", "waiting_user", "blocked", "failed", "completed", "forked"]
RiskLevel = Literal["low", "medium", "high"]
#: Who wrote a text. ``agent_claim``: a model wrote it after reading tool output (findings, step
#: summaries, reviews, recovery diagnoses), so it is the agent's claim, not the app's word: prompts
#: quote it like tool output (``context.blocks.Trust`` ranks it below ``user_claim``, above
#: ``external_content``).
Provenance = Literal["trusted_app", "user_claim", "agent_claim", "external_content"]
AGENT_CLAIM: Provenance = "agent_claim"
#: What made a fact stale (``context.models.StaleFact``): ``write`` (the task itself changed the
#: file), ``reread`` (a later read showed other bytes), ``resume`` (the workspace was
#: fingerprinted on resume and differs: someone else changed it), ``approval`` (the same, when an
#: approval answer continued the task), ``head`` (the git HEAD moved).
StaleCause = Literal["write", "reread", "resume", "approval", "head"]
#: What a stale fact is: a finding, a step summary or a tool call's evidence.
FactKind = Literal["finding", "step", "evidence"]
