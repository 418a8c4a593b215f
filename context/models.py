"""The TaskContext: the working state of one task, in ten typed parts.

``context.reducer.replay`` folds the event log into it and a LangGraph checkpoint holds it
between nodes. Every class here stays in this module: checkpoints name them by module path
(``langgraph.json`` allow-lists them).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .literals import ControlStatus, FactKind, PlanStatus, Provenance, RiskLevel, StaleCause, StepResult, StepStatus
from .memory import LoadedMemory
from .plan_digest import extend_digest, group_line, group_runs, in_digest, join_head
from .reports import RoleReport
from .usage import ProviderUsage
from .windows import PLAN_DIGEST_MAX, PLAN_DONE_WINDOW, PLAN_FULL_STEPS, PLAN_RUN_MIN
from .world import world_version

__all__ = [
    "SCHEMA_VERSION",
    "ApprovalRequest",
    "Control",
    "CurrentStep",
    "ErrorRecord",
    "Errors",
    "EventSummary",
    "EventsView",
    "Evidence",
    "Finding",
    "Identity",
    "LastStep",
    "Memory",
    "PendingCompletion",
    "Permissions",
    "Plan",
    "PlanStep",
    "Progress",
    "StaleFact",
    "TaskContext",
    "ToolCallRecord",
    "TranscriptCheckpoint",
    "TranscriptNote",
    "arguments_dict",
]

#: The version of taskctx's stored data (event payloads and the checkpointed TaskContext),
#: recorded in ``task.created`` and folded into ``events.schema_version``; ``taskctx resume``
#: refuses data of a newer version. Every field added since version 0 has a default that means
#: what older data meant, so data of 0 to 3 reads back (the docs list each migration).
SCHEMA_VERSION = 4


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# 1. identity ------------------------------------------------------------------------------
class Identity(_Part):
    """Who asked for what. ``original_request`` and ``constraints`` are kept verbatim.

    ``constraint_sources`` says where each hard constraint came from: ``"caller"`` (given to
    ``new_task(constraints=...)`` / ``taskctx run --constraint``; also every constraint it does
    not name), ``"request"`` (found in the request's wording by
    :func:`~context.trajectory.extract_constraints`, a heuristic) or ``"planner"`` (the planner's
    ``submit_plan`` ``constraints``). ``interpreted_goal`` is the planner's (its claim);
    ``criteria_sources`` marks the success criteria the planner added.
    """

    task_id: str = ""
    original_request: str = ""
    interpreted_goal: str = ""
    success_criteria: list[str] = Field(default_factory=list)
    non_goals: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    constraint_sources: dict[str, str] = Field(default_factory=dict)
    #: ``"planner"`` for each success criterion the planner added (``submit_plan``): the model's
    #: reading of the request, quoted as its claim in prompts; the others are the caller's.
    criteria_sources: dict[str, str] = Field(default_factory=dict)

    def planner_criteria(self) -> list[str]:
        """The success criteria the planner added (source ``"planner"``), in order."""
        return [c for c in self.success_criteria if self.criteria_sources.get(c) == "planner"]


# 2. plan ----------------------------------------------------------------------------------
class PlanStep(_Part):
    """One step of the plan: what to do, after which steps, and its status."""

    id: str
    title: str
    description: str = ""
    status: StepStatus = "pending"
    depends_on: list[str] = Field(default_factory=list)
    expected_output: str = ""


class Plan(_Part):
    """The plan as a window: every step not yet done, plus the last done or skipped ones.

    Older done steps leave ``steps`` for ``done_digest`` (see :mod:`context.windows`); their
    titles and results stay in the event log.
    """

    version: int = 0
    status: PlanStatus = "draft"
    steps: list[PlanStep] = Field(default_factory=list)
    current_step_id: str | None = None
    #: Addition: ids of done steps folded out of ``steps``, as ranges (``s1-s990``) or single ids.
    done_digest: list[str] = Field(default_factory=list)
    #: Addition: how many done steps were folded out of ``steps``.
    done_folded: int = 0

    def is_folded(self, step_id: str) -> bool:
        """Whether a step is a done step folded out of ``steps`` (in ``done_digest``).

        Args:
            step_id: The step id.
        """
        return in_digest(self.done_digest, step_id)

    def fold_done(self, window: int = PLAN_DONE_WINDOW) -> Plan:
        """A copy with the done (or skipped) steps beyond the last ``window`` in the digest.

        Args:
            window: How many done or skipped steps stay in ``steps`` (this plan itself is
                returned when no more are there).
        """
        done = [i for i, s in enumerate(self.steps) if s.status in ("done", "skipped")]
        if len(done) <= window:
            return self
        out = set(done[: len(done) - window])
        digest, added = extend_digest(self.done_digest, (self.steps[i].id for i in sorted(out)))
        return self.model_copy(
            update={
                "steps": [s for i, s in enumerate(self.steps) if i not in out],
                "done_digest": digest[-PLAN_DIGEST_MAX:],
                "done_folded": self.done_folded + added,
            }
        )

    def runs(
        self, *, min_run: int = PLAN_RUN_MIN, statuses: tuple[str, ...] = ("done", "skipped")
    ) -> list[list[PlanStep]]:
        """The steps in order, runs of one status grouped (:func:`~context.plan_digest.group_runs`).

        For prompts of long plans: "s1-s150 done" instead of 150 lines (the steps stay in the
        state and the log).

        Args:
            min_run: The shortest run of consecutive steps with one status that is grouped.
            statuses: The statuses whose runs are grouped.
        """
        return group_runs(self.steps, min_run=min_run, statuses=statuses)

    def folded_head(self, groups: list[list[PlanStep]]) -> tuple[str, int, list[list[PlanStep]]]:
        """``(ids, count, rest of groups)`` of the folded steps (:func:`~context.plan_digest.join_head`).

        Args:
            groups: The plan's groups of steps (:meth:`runs`).
        """
        return join_head(self.done_digest, self.done_folded, groups)

    def digest_line(self) -> str:
        """The folded done steps in one line (``s1-s990 [done] 990 steps ...``); empty when none."""
        if not self.done_folded:
            return ""
        return f"{', '.join(self.done_digest)} [done] {self.done_folded} steps (titles and results in the event log)"

    def lines(self, *, detail: bool = True) -> list[str]:
        """The plan as prompt lines: one per step, runs of done steps in one line in long plans.

        A plan is long with more than :data:`~context.windows.PLAN_FULL_STEPS` steps, or folded ones.

        Args:
            detail: Add each step's dependencies and expected output
                (``s1 [done] Title after s0: expected ...``); without it ``s1 [done] Title``.
        """
        groups = self.runs() if len(self.steps) > PLAN_FULL_STEPS or self.done_folded else [[x] for x in self.steps]
        out: list[str] = []
        if self.done_folded:
            ids, n, groups = self.folded_head(groups)
            out.append(f"{ids} [done] {n} steps (titles and results in the event log)")
        return out + [group_line(g, detail=detail) for g in groups]


# 3. current_step --------------------------------------------------------------------------
class CurrentStep(_Part):
    """The running step as the executor sees it: objective, tools, constraints, risk."""

    objective: str = ""
    expected_output: str = ""
    input_context: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    risk_level: RiskLevel = "low"


# 4. progress ------------------------------------------------------------------------------
class LastStep(_Part):
    """The last completed step: its result, summary and findings (the executor's claim)."""

    id: str
    result: StepResult
    summary: str = ""
    findings: list[str] = Field(default_factory=list)
    changed_artifacts: list[str] = Field(default_factory=list)
    unresolved_issues: list[str] = Field(default_factory=list)
    #: Addition: who wrote ``summary``, ``findings`` and ``unresolved_issues`` (the executor model).
    provenance: Provenance = "agent_claim"
    #: Addition (freshness): the workspace files the step's tool calls read, path -> sha256 hex
    #: of the bytes read, and the git HEAD commit then (None: not a git repository).
    rests_on: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class Progress(_Part):
    """What the task has done: completed steps, executor steps, changed files, usage, role reports."""

    #: The ids of the last :data:`~context.windows.COMPLETED_WINDOW` steps completed done,
    #: oldest first.
    completed_steps: list[str] = Field(default_factory=list)
    #: Addition: steps completed done in this task (``completed_steps`` is its window).
    completed_count: int = 0
    last_step: LastStep | None = None
    #: Addition: tool results received in this task (one executor step = one tool result).
    executor_steps: int = 0
    #: Addition: paths from ``file.modified`` events, in order of first change.
    changed_artifacts: list[str] = Field(default_factory=list)
    #: Addition: the provider's reported usage, summed (``None`` until a call reports one).
    usage: ProviderUsage | None = None
    #: Addition (schema 3): the last reports of each role (``role.reported``, the reviewer's
    #: ``review.completed``), in log order; see :mod:`context.reports`.
    reports: list[RoleReport] = Field(default_factory=list)

    def completed_text(self) -> str:
        """``s1, s2`` (``(none)`` when empty); ``120 in all, the last 20: s101, ...`` past the window."""
        ids = ", ".join(self.completed_steps) or "(none)"
        extra = self.completed_count > len(self.completed_steps)
        return f"{self.completed_count} in all, the last {len(self.completed_steps)}: {ids}" if extra else ids


# 5. control + permissions -----------------------------------------------------------------
class ApprovalRequest(_Part):
    """A tool call waiting for a person's approval."""

    call_id: str
    tool: str
    #: The call's arguments as JSON text.
    arguments: str = "{}"
    risk: RiskLevel = "high"
    reason: str = ""


class Finding(_Part):
    """A statement the executor drew from evidence, with the refs that back it."""

    id: str
    statement: str
    evidence_refs: list[str] = Field(default_factory=list)
    #: Ids of earlier findings this one replaces (a ruled-out hypothesis, an outdated summary).
    supersedes: list[str] = Field(default_factory=list)
    #: Addition: who wrote ``statement`` (the executor model, in ``complete_step``).
    provenance: Provenance = "agent_claim"
    #: Addition (freshness): the files its evidence read, path -> sha256 hex of the bytes read,
    #: and the git HEAD commit then (None: not a git repository). See :mod:`context.freshness`.
    rests_on: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class PendingCompletion(_Part):
    """A ``complete_step`` the executor sent together with the step's last tool calls.

    Recorded by ``step.completion.requested``. The executor records ``step.completed`` from it,
    without another model call, once every call in ``after_calls`` has finished: all ``ok`` for a
    ``success``/``partial`` result, any status for ``failed``/``blocked``. A call that failed or
    was rejected (for a success) or whose arguments the approver edited sets ``not_applied``:
    the model is then asked again, and its prompt says why.
    """

    step_id: str
    after_calls: list[str] = Field(default_factory=list)
    result: StepResult = "success"
    summary: str = ""
    #: Findings as the model gave them; one without refs gets the step's last refs on completion.
    findings: list[Finding] = Field(default_factory=list)
    unresolved_issues: list[str] = Field(default_factory=list)
    #: Why it will not be applied (a call failed or was rejected, or the approver edited its
    #: arguments); empty while it may still be. The executor prompt says so, and the model is asked again.
    not_applied: str = ""


class Control(_Part):
    """Where the task stands: its status and what it waits for (a question, an approval)."""

    status: ControlStatus = "idle"
    pending_question: str | None = None
    pending_approval: ApprovalRequest | None = None
    pending_completion: PendingCompletion | None = None
    checkpoint_id: str | None = None
    rollback_available: bool = False


class Permissions(_Part):
    """What the caller allows: tools allowed, denied or needing approval, and file scopes."""

    allowed_tools: list[str] = Field(default_factory=list)
    denied_tools: list[str] = Field(default_factory=list)
    requires_approval: list[str] = Field(default_factory=list)
    #: Globs relative to the workspace root.
    file_scopes: list[str] = Field(default_factory=list)


# 6. evidence ------------------------------------------------------------------------------
def arguments_dict(text: str) -> dict[str, object]:
    """A call's arguments as a dict: the JSON object, or ``{"input": value}`` for any other text.

    Args:
        text: The arguments as JSON text (``ToolCallRecord.arguments``).
    """
    try:
        val = json.loads(text)
    except json.JSONDecodeError:
        return {"input": text}
    return val if isinstance(val, dict) else {"input": val}


class ToolCallRecord(_Part):
    """One tool call in the executor transcript: its arguments, status and prompt form."""

    id: str
    step_id: str | None = None
    tool: str
    #: The call's arguments as JSON text (kept as text so any JSON shape round-trips).
    arguments: str = "{}"
    #: The compressed form that enters prompts (never the raw output unless it was short).
    result_summary: str = ""
    status: Literal["pending", "ok", "error", "denied"] = "pending"
    timestamp: str = ""
    #: ``artifact://sha256:<hex>`` of the exact raw output.
    raw_ref: str | None = None
    #: Addition: the agent's text that accompanied the call.
    thought: str = ""
    #: Addition: ``result_summary`` is a compressed form of the raw output (from the event).
    compressed: bool = False
    #: Addition (freshness): the workspace files the call read, path -> sha256 hex of the bytes
    #: read, and the git HEAD commit when it ran (None: not a git repository or not known).
    reads: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class TranscriptCheckpoint(_Part):
    """The working state materialised from the log when the executor transcript last restarted.

    Renderers draw the checkpoint block from it, so the block is identical on every call until
    the next restart (a stable, cacheable prefix).
    """

    at_seq: int
    plan_version: int
    plan_lines: list[str] = Field(default_factory=list)
    #: Addition: ``"<id> (<result>): <summary>"`` of the last completed step, the executor's
    #: claim (prompts quote it); empty before the first step completes.
    step_summary: str = ""
    #: One line per tool call that left the transcript (the app's digest: call, status, ref).
    completed_summaries: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    omitted_summary: str = ""
    #: Addition: how many of the calls the restart kept are shown as their one-line digest
    #: until they leave (a restart the budget forced to digest them); 0 in older checkpoints.
    digests: int = 0


class TranscriptNote(_Part):
    """A state delta ("## Now") the executor transcript shows after its first ``at`` tool calls.

    It holds the current step, plan progress, last step and pending approval. The executor
    appends one only when the delta changed, so an unchanged delta is not sent again.
    """

    at: int
    text: str


class StaleFact(_Part):
    """One ``fact.stale`` mark: a fact rests on bytes the workspace no longer has.

    The fact ``fact_id`` (a finding id, a step summary ``step:<id>``, or a tool call id for its
    output) rests on ``path`` at ``old_sha``; the workspace now has ``new_sha`` there (``""``:
    the file is gone). ``path`` is ``"HEAD"`` when the git HEAD commit moved (the shas are then
    commits). ``cause``: who noticed (:data:`~context.literals.StaleCause`). ``needs_reread``:
    the task has not read the file's new bytes yet (a file the task wrote itself, or one it has
    read again since, does not need it).
    """

    fact_id: str
    fact_kind: FactKind = "finding"
    path: str
    old_sha: str = ""
    new_sha: str = ""
    cause: StaleCause = "reread"
    seq: int = 0
    needs_reread: bool = True


class Evidence(_Part):
    """What the task has seen: the transcript's tool calls, findings, the world it read."""

    #: Tool calls since the executor transcript last restarted (oldest first).
    recent_tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    #: Addition: state deltas shown in the executor transcript since it last restarted.
    transcript_notes: list[TranscriptNote] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    omitted_summary: str = ""
    #: Addition: how many tool calls have left the transcript (their refs stay in the log).
    omitted_calls: int = 0
    transcript_checkpoint: TranscriptCheckpoint | None = None
    #: Addition (freshness): what the task has read or written of the workspace, path -> sha256
    #: hex of the latest bytes it saw, and the git HEAD commit it last saw (None: none seen).
    world: dict[str, str] = Field(default_factory=dict)
    head: str | None = None
    #: Addition (freshness): the facts found stale (``fact.stale``), oldest first, the last
    #: :data:`~context.windows.STALE_WINDOW`.
    stale_facts: list[StaleFact] = Field(default_factory=list)

    @property
    def world_version(self) -> str:
        """The fingerprint of ``world`` and ``head`` (:func:`world_version`)."""
        return world_version(self.world, self.head)


# 7. events --------------------------------------------------------------------------------
class EventSummary(_Part):
    """One event of the log in one line (``events.recent``)."""

    seq: int
    kind: str
    actor: str
    timestamp: str
    summary: str = ""


class EventsView(_Part):
    """The state's view of the log: the cursor and a bounded window (the log is in the store)."""

    cursor: int = 0
    recent: list[EventSummary] = Field(default_factory=list)
    #: Addition: events folded so far, per kind (and ``context.built:<role>`` per role).
    counts: dict[str, int] = Field(default_factory=dict)
    #: Addition: per role, the message fingerprints of its last prompt (cached-prefix measure).
    prompt_fingerprints: dict[str, list[str]] = Field(default_factory=dict)
    #: Addition: the token of the last ``resume.started`` (one per resume).
    last_resume_token: str = ""
    #: The data schema the task was recorded with (``task.created``'s ``schema_version``; 0: a
    #: task recorded before versions). See :data:`SCHEMA_VERSION`.
    schema_version: int = 0


# 8. memory --------------------------------------------------------------------------------
class Memory(_Part):
    """What the task remembers: durable facts, preferences, conventions, working memory."""

    durable_facts: list[str] = Field(default_factory=list)
    user_preferences: list[str] = Field(default_factory=list)
    project_conventions: list[str] = Field(default_factory=list)
    working_memory: list[str] = Field(default_factory=list)
    #: Addition: the durable memories this task loaded from the long-term store at its start
    #: (``memory.loaded``; a later ``memory.forgotten`` removes one). See :mod:`context.memory`.
    loaded: list[LoadedMemory] = Field(default_factory=list)


# errors -----------------------------------------------------------------------------------
class ErrorRecord(_Part):
    """One error of the task, with its resolution once resolved."""

    id: str
    step_id: str | None = None
    source: str = ""
    message: str = ""
    call_id: str | None = None
    timestamp: str = ""
    resolution: str | None = None


class Errors(_Part):
    """The task's errors, as a window (bound: :data:`~context.windows.ERRORS_WINDOW`).

    ``error_history``: every open error, plus the resolved ones ``resolved_errors`` keeps, in
    order. ``resolved_errors``: the last resolved ones, plus any whose call is still in
    ``evidence.recent_tool_calls`` (so a failed call is never recorded twice). Every error stays
    in the event log; ``occurred_count`` and ``resolved_count`` count them all.
    """

    last_error: ErrorRecord | None = None
    error_history: list[ErrorRecord] = Field(default_factory=list)
    resolved_errors: list[ErrorRecord] = Field(default_factory=list)
    #: Addition: ``error.occurred`` events folded (new error ids are numbered from it).
    occurred_count: int = 0
    #: Addition: errors resolved (``error.resolved`` events that resolved an error).
    resolved_count: int = 0


class TaskContext(BaseModel):
    """The working state of one task, shared by every role node of the graph.

    Shape: ten typed parts (identity, plan, current_step, progress, control, permissions,
    evidence, events, memory, errors). ``graph.invoke()`` and ``get_state().values`` return a
    dict; rebuild with ``TaskContext.model_validate(values)``.
    """

    model_config = ConfigDict(extra="forbid")

    identity: Identity = Field(default_factory=Identity)
    plan: Plan = Field(default_factory=Plan)
    current_step: CurrentStep | None = None
    progress: Progress = Field(default_factory=Progress)
    control: Control = Field(default_factory=Control)
    permissions: Permissions = Field(default_factory=Permissions)
    evidence: Evidence = Field(default_factory=Evidence)
    events: EventsView = Field(default_factory=EventsView)
    memory: Memory = Field(default_factory=Memory)
    errors: Errors = Field(default_factory=Errors)

    @property
    def task_id(self) -> str:
        """The task's id (``identity.task_id``)."""
        return self.identity.task_id

    def next_runnable_step(self) -> PlanStep | None:
        """The first pending step whose dependencies are all done (None if there is none)."""
        done = {s.id for s in self.plan.steps if s.status in ("done", "skipped")}
        for s in self.plan.steps:
            if s.status == "pending" and all(d in done or self.plan.is_folded(d) for d in s.depends_on):
                return s
        return None

    def unrecorded_tool_errors(self) -> list[ToolCallRecord]:
        """Failed tool calls not yet in ``error_history``, in order.

        Recovery records them; routing sends the graph to recovery while there are any.
        """
        recorded = {e.call_id for e in self.errors.error_history}
        return [r for r in self.evidence.recent_tool_calls if r.status == "error" and r.id not in recorded]

    def completion_ready(self) -> bool:
        """Whether the executor may record ``step.completed`` from the pending ``complete_step``.

        True for a pending completion of the running step, still applicable, whose calls have
        all finished (see :class:`PendingCompletion`).
        """
        pc = self.control.pending_completion
        if pc is None or pc.step_id != self.plan.current_step_id or pc.not_applied:
            return False
        status = {r.id: r.status for r in self.evidence.recent_tool_calls}
        return all(status.get(c) not in (None, "pending") for c in pc.after_calls)

    def failed_step(self) -> LastStep | None:
        """The last step when it ended ``failed`` or ``blocked`` and recovery has not decided yet.

        None otherwise; a retry sets the plan step back to pending.
        """
        ls = self.progress.last_step
        if ls is None or ls.result not in ("failed", "blocked"):
            return None
        step = self.step(ls.id)
        return ls if step is not None and step.status in ("failed", "blocked") else None

    def stale(self, fact_id: str) -> list[StaleFact]:
        """The ``fact.stale`` marks of one fact, oldest first.

        Args:
            fact_id: A finding id, ``step:<id>`` or a tool call id.
        """
        return [s for s in self.evidence.stale_facts if s.fact_id == fact_id]

    def to_reread(self) -> list[str]:
        """Paths a stale fact rests on whose new bytes the task has not read yet (in order, once)."""
        return list(dict.fromkeys(s.path for s in self.evidence.stale_facts if s.needs_reread))

    def step(self, step_id: str | None) -> PlanStep | None:
        """The plan step with an id, or None.

        Args:
            step_id: The step id (None finds nothing).
        """
        for s in self.plan.steps:
            if s.id == step_id:
                return s
        return None
