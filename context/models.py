"""The TaskContext contract: ten parts, with docs/design.md's field names.

TaskContext is the working state of one task. It is *derived*: ``context.reducer.replay``
folds the event log into it, and a LangGraph checkpoint holds it between nodes. Field names
are the contract that renderers, the CLI and the UI read. Every field is typed (no ``Any``
holding models) so a checkpoint round-trips under ``LANGGRAPH_STRICT_MSGPACK=true``.

Additions to docs/design.md's list (all derived by the reducer, documented where defined):
``progress.executor_steps``, ``evidence.transcript_checkpoint``, ``evidence.omitted_calls``,
``events.counts``, ``ToolCallRecord.thought``, ``Finding.provenance``, ``LastStep.provenance``;
freshness (:mod:`context.freshness`): ``Finding.rests_on``/``head``, ``LastStep.rests_on``/``head``,
``ToolCallRecord.reads``/``head``, ``evidence.world``, ``evidence.head``, ``evidence.stale_facts``
(``fact.stale``) and the derived ``evidence.world_version``.

Source: docs/design.md "The TaskContext contract".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .memory import LoadedMemory

__all__ = [
    "AGENT_CLAIM",
    "ApprovalRequest",
    "arguments_dict",
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
    "Permissions",
    "Plan",
    "PendingCompletion",
    "PlanStep",
    "Progress",
    "StaleFact",
    "TaskContext",
    "ToolCallRecord",
    "TranscriptCheckpoint",
    "TranscriptNote",
    "PlanStatus",
    "StepStatus",
    "StepResult",
    "ControlStatus",
    "RiskLevel",
    "RECENT_EVENTS_WINDOW",
    "FINDINGS_WINDOW",
    "ERRORS_WINDOW",
    "PLAN_DONE_WINDOW",
    "COMPLETED_WINDOW",
    "PLAN_FULL_STEPS",
    "PLAN_RUN_MIN",
    "PLAN_DIGEST_MAX",
    "STALE_WINDOW",
]

PlanStatus = Literal["draft", "approved", "executing", "revising", "completed"]
StepStatus = Literal["pending", "running", "blocked", "done", "skipped", "failed"]
StepResult = Literal["success", "failed", "partial", "blocked"]
ControlStatus = Literal["idle", "running", "waiting_user", "blocked", "failed", "completed"]
RiskLevel = Literal["low", "medium", "high"]
#: Addition: who wrote a text. ``agent_claim``: a model wrote it after reading tool output
#: (findings, step summaries, reviews, recovery diagnoses), so it is the agent's claim, not the
#: app's word: prompts quote it like tool output (``context.builder.Trust`` ranks it below
#: ``user_claim``, above ``external_content``).
Provenance = Literal["trusted_app", "user_claim", "agent_claim", "external_content"]
AGENT_CLAIM: Provenance = "agent_claim"

#: How many event summaries ``TaskContext.events.recent`` keeps (the full log is in the store).
RECENT_EVENTS_WINDOW = 20
#: How many findings ``TaskContext.evidence.findings`` keeps (older ones stay in the event log),
#: so a checkpoint's size does not grow with the number of steps.
FINDINGS_WINDOW = 10
#: How many resolved errors ``TaskContext.errors`` keeps (the most recent; open errors are always
#: kept, and so is a resolved error whose call is still in the executor transcript). The others
#: stay in the event log (``error.occurred`` / ``error.resolved``), where inspect and the report read them.
ERRORS_WINDOW = 10
#: How many done (or skipped) steps ``plan.steps`` keeps (the most recent); older ones leave the
#: state for the digest ``plan.done_digest`` (their titles and results stay in the event log).
PLAN_DONE_WINDOW = 20
#: How many ids ``progress.completed_steps`` keeps (the most recent; ``completed_count`` counts all).
COMPLETED_WINDOW = 20
#: How many ``fact.stale`` marks ``TaskContext.evidence.stale_facts`` keeps (the log has them all).
STALE_WINDOW = 50
#: Prompts collapse a run of at least this many consecutive done (or skipped) plan steps ...
PLAN_RUN_MIN = 3
#: ... in plans of more than this many steps (the executor's one-line plan status: always).
PLAN_FULL_STEPS = 20


#: The version of taskctx's stored data (event payloads and the checkpointed TaskContext).
#: Recorded in ``task.created`` and folded into ``events.schema_version``; ``taskctx resume``
#: refuses data of a newer version. Migrations (each tested): 0 -> 1 adds ``constraint_sources``,
#: ``PlanCreated.constraints`` and the version itself, all defaulting to what schema 0 meant, so a
#: schema-0 task resumes unchanged (it keeps version 0: its log and checkpoint agree).
#: 1 -> 2 (issues 11, 14, 15, 16) adds event kinds (``fact.stale``, ``memory.loaded``,
#: ``memory.forgotten``) and fields (``progress.usage``, the windows' counts and ``done_digest``,
#: freshness fields, ``memory.loaded``, ``transcript_reset``'s numbers), all with defaults, so
#: data of 0 and 1 reads back; an older taskctx refuses data of 2 by its version.
SCHEMA_VERSION = 2


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
    ``criteria_sources`` marks the success criteria the planner added."""

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
        """The success criteria the planner added, in order."""
        return [c for c in self.success_criteria if self.criteria_sources.get(c) == "planner"]


# 2. plan ----------------------------------------------------------------------------------
class PlanStep(_Part):
    id: str
    title: str
    description: str = ""
    status: StepStatus = "pending"
    depends_on: list[str] = Field(default_factory=list)
    expected_output: str = ""


#: How many entries ``plan.done_digest`` keeps (ranges like ``s1-s990`` or single ids).
PLAN_DIGEST_MAX = 50


def _id_parts(step_id: str) -> tuple[str, int] | None:
    """``"s12"`` -> ``("s", 12)``; None for an id that does not end in digits."""
    head = step_id.rstrip("0123456789")
    tail = step_id[len(head) :]
    return (head, int(tail)) if tail and not (len(tail) > 1 and tail[0] == "0") else None


def _digest_ranges(entry: str) -> tuple[str, int, int] | None:
    lo, sep, hi = entry.partition("-")
    a = _id_parts(lo)
    if a is None:
        return None
    if not sep:
        return a[0], a[1], a[1]
    b = _id_parts(hi)
    return (a[0], a[1], b[1]) if b is not None and b[0] == a[0] and b[1] >= a[1] else None


class Plan(_Part):
    """The plan as a window (bound: every step not yet done, plus the last
    :data:`PLAN_DONE_WINDOW` done or skipped ones). Older done steps leave ``steps``: their ids go
    to ``done_digest`` (id ranges, e.g. ``["s1-s990"]``, at most :data:`PLAN_DIGEST_MAX` entries)
    and ``done_folded`` counts them; their titles and results stay in the event log."""

    version: int = 0
    status: PlanStatus = "draft"
    steps: list[PlanStep] = Field(default_factory=list)
    current_step_id: str | None = None
    #: Addition: ids of done steps folded out of ``steps``, as ranges (``s1-s990``) or single ids.
    done_digest: list[str] = Field(default_factory=list)
    #: Addition: how many done steps were folded out of ``steps``.
    done_folded: int = 0

    def is_folded(self, step_id: str) -> bool:
        """Whether ``step_id`` is a done step folded out of ``steps`` (in ``done_digest``)."""
        parts = _id_parts(step_id)
        for entry in self.done_digest:
            if entry == step_id:
                return True
            r = _digest_ranges(entry) if parts is not None else None
            if r is not None and parts is not None and r[0] == parts[0] and r[1] <= parts[1] <= r[2]:
                return True
        return False

    def fold_done(self, window: int = PLAN_DONE_WINDOW) -> Plan:
        """This plan with its done (or skipped) steps beyond the last ``window`` moved to the digest."""
        done = [i for i, s in enumerate(self.steps) if s.status in ("done", "skipped")]
        if len(done) <= window:
            return self
        out = set(done[: len(done) - window])
        digest = list(self.done_digest)
        added = 0
        for i in sorted(out):
            sid = self.steps[i].id
            if self.is_folded(sid) or sid in digest:  # listed again by a re-plan: folded once
                continue
            added += 1
            parts = _id_parts(sid)
            last = _digest_ranges(digest[-1]) if digest and parts is not None else None
            if last is not None and parts is not None and last[0] == parts[0] and parts[1] == last[2] + 1:
                digest[-1] = f"{last[0]}{last[1]}-{sid}"
            else:
                digest.append(sid)
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
        """The steps in order, grouped: each group is one step, or a run of at least ``min_run``
        consecutive steps with the same status in ``statuses`` (for prompts of long plans: "s1-s150
        done" instead of 150 lines; the steps stay in the state and the log)."""
        out: list[list[PlanStep]] = []
        for step in self.steps:
            if out and step.status in statuses and out[-1][-1].status == step.status:
                out[-1].append(step)
            else:
                out.append([step])
        return [g for grp in out for g in ([grp] if len(grp) >= min_run else [[x] for x in grp])]

    def folded_head(self, groups: list[list[PlanStep]]) -> tuple[str, int, list[list[PlanStep]]]:
        """The folded done steps as ``(ids, count, rest of groups)``: when the digest is one range
        and ``groups`` starts with done steps that continue it, they join it (``s1-s297``, 297)."""
        ids, n = ", ".join(self.done_digest), self.done_folded
        if len(self.done_digest) == 1 and groups and groups[0][0].status == "done":
            r, first = _digest_ranges(self.done_digest[0]), _id_parts(groups[0][0].id)
            if r is not None and first is not None and first[0] == r[0] and first[1] == r[2] + 1:
                g = groups[0]
                return f"{r[0]}{r[1]}-{g[-1].id}", n + len(g), groups[1:]
        return ids, n, groups

    def digest_line(self) -> str:
        """The folded done steps in one line (``s1-s990 [done] 990 steps ...``); empty when none."""
        if not self.done_folded:
            return ""
        return f"{', '.join(self.done_digest)} [done] {self.done_folded} steps (titles and results in the event log)"

    def lines(self, *, detail: bool = True) -> list[str]:
        """One line per step (``s1 [done] Title after s0: expected ...``; without ``detail``
        only ``s1 [done] Title``), runs of done steps collapsed into one line when the plan has
        more than ``PLAN_FULL_STEPS`` steps."""
        groups = self.runs() if len(self.steps) > PLAN_FULL_STEPS or self.done_folded else [[x] for x in self.steps]
        out = []
        if self.done_folded:
            ids, n, groups = self.folded_head(groups)
            out.append(f"{ids} [done] {n} steps (titles and results in the event log)")
        for g in groups:
            if len(g) > 1:
                out.append(f"{g[0].id}-{g[-1].id} [{g[0].status}] {len(g)} steps (titles and results in the event log)")
                continue
            s = g[0]
            dep = f" after {', '.join(s.depends_on)}" if s.depends_on and detail else ""
            exp = f": expected {s.expected_output}" if s.expected_output and detail else ""
            out.append(f"{s.id} [{s.status}] {s.title}{dep}{exp}")
        return out


# 3. current_step --------------------------------------------------------------------------
class CurrentStep(_Part):
    objective: str = ""
    expected_output: str = ""
    input_context: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    risk_level: RiskLevel = "low"


# 4. progress ------------------------------------------------------------------------------
class LastStep(_Part):
    id: str
    result: StepResult
    summary: str = ""
    findings: list[str] = Field(default_factory=list)
    changed_artifacts: list[str] = Field(default_factory=list)
    unresolved_issues: list[str] = Field(default_factory=list)
    #: Addition: who wrote ``summary``, ``findings`` and ``unresolved_issues`` (the executor model).
    provenance: Provenance = AGENT_CLAIM
    #: Addition (freshness): the workspace files the step's tool calls read, path -> sha256 hex
    #: of the bytes read, and the git HEAD commit then (None: not a git repository).
    rests_on: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class ProviderUsage(_Part):
    """Addition (issue 11): the provider's reported usage summed over the task's model calls that
    reported one (``context.built.usage``; scripted and replay models report none). All counts
    are tokens as the provider counted them; ``counted`` is taskctx's own count of the same
    prompts (:mod:`context.tokens`), so ``input_tokens - counted`` is the difference."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    counted: int = 0


class Progress(_Part):
    #: The ids of the last :data:`COMPLETED_WINDOW` steps completed done, oldest first.
    completed_steps: list[str] = Field(default_factory=list)
    #: Addition: steps completed done in this task (``completed_steps`` is its window).
    completed_count: int = 0

    def completed_text(self) -> str:
        """``s1, s2`` (``(none)`` when empty); ``120 in all, the last 20: s101, ...`` past the window."""
        ids = ", ".join(self.completed_steps) or "(none)"
        extra = self.completed_count > len(self.completed_steps)
        return f"{self.completed_count} in all, the last {len(self.completed_steps)}: {ids}" if extra else ids

    last_step: LastStep | None = None
    #: Addition: tool results received in this task (one executor step = one tool result).
    executor_steps: int = 0
    #: Addition: paths from ``file.modified`` events, in order of first change.
    changed_artifacts: list[str] = Field(default_factory=list)
    #: Addition: the provider's reported usage, summed (``None`` until a call reports one).
    usage: ProviderUsage | None = None


# 5. control + permissions -----------------------------------------------------------------
class ApprovalRequest(_Part):
    call_id: str
    tool: str
    #: The call's arguments as JSON text.
    arguments: str = "{}"
    risk: RiskLevel = "high"
    reason: str = ""


class Finding(_Part):
    id: str
    statement: str
    evidence_refs: list[str] = Field(default_factory=list)
    #: Ids of earlier findings this one replaces (a ruled-out hypothesis, an outdated summary).
    supersedes: list[str] = Field(default_factory=list)
    #: Addition: who wrote ``statement`` (the executor model, in ``complete_step``).
    provenance: Provenance = AGENT_CLAIM
    #: Addition (freshness): the files its evidence read, path -> sha256 hex of the bytes read,
    #: and the git HEAD commit then (None: not a git repository). See :mod:`context.freshness`.
    rests_on: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class PendingCompletion(_Part):
    """Addition: a ``complete_step`` the executor model sent together with the step's last tool
    calls (``step.completion.requested``). The executor records ``step.completed`` from it,
    without another model call, once every call in ``after_calls`` has finished: all ``ok`` for a
    ``success``/``partial`` result, any status for ``failed``/``blocked``. A call that failed or
    was rejected (for a success) or whose arguments the approver edited sets ``not_applied``:
    the model is then asked again, and its prompt says why."""

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
    status: ControlStatus = "idle"
    pending_question: str | None = None
    pending_approval: ApprovalRequest | None = None
    pending_completion: PendingCompletion | None = None
    checkpoint_id: str | None = None
    rollback_available: bool = False


class Permissions(_Part):
    allowed_tools: list[str] = Field(default_factory=list)
    denied_tools: list[str] = Field(default_factory=list)
    requires_approval: list[str] = Field(default_factory=list)
    #: Globs relative to the workspace root.
    file_scopes: list[str] = Field(default_factory=list)


# 6. evidence ------------------------------------------------------------------------------
def arguments_dict(text: str) -> dict[str, object]:
    """A call's arguments JSON text as a dict (``{"input": value}`` when it is not a JSON object)."""
    import json

    try:
        val = json.loads(text)
    except json.JSONDecodeError:
        return {"input": text}
    return val if isinstance(val, dict) else {"input": val}


class ToolCallRecord(_Part):
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
    """Addition: the working state materialised from the event log when the executor
    transcript last restarted. Renderers draw the checkpoint block from it, so the block is
    identical on every call until the next restart (a stable, cacheable prefix)."""

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
    """Addition: a state delta ("## Now": current step, plan progress, last step, pending
    approval) the executor transcript shows after its first ``at`` tool calls. The executor
    appends one only when the delta changed, so an unchanged delta is not sent again."""

    at: int
    text: str


#: What made a fact stale (see :class:`StaleFact`); :data:`context.freshness.Cause` is this.
StaleCause = Literal["write", "reread", "resume", "approval", "head"]
#: What a stale fact is: a finding, a step summary or a tool call's evidence.
FactKind = Literal["finding", "step", "evidence"]


class StaleFact(_Part):
    """Addition (freshness): one ``fact.stale`` mark. The fact ``fact_id`` (a finding id, a
    step summary ``step:<id>``, or a tool call id for its output) rests on ``path`` at
    ``old_sha``; the workspace now has ``new_sha`` there (``""``: the file is gone). ``path`` is
    ``"HEAD"`` when the git HEAD commit moved (the shas are then commits). ``cause``: ``write``
    (the task itself changed the file), ``reread`` (a later read showed other bytes), ``resume``
    (the workspace was fingerprinted on resume and differs: someone else changed it),
    ``approval`` (the same, when an approval answer continued the task), ``head``
    (HEAD moved). ``needs_reread``: the task has not read the file's new bytes yet (a file the
    task wrote itself, or one it has read again since, does not need it)."""

    fact_id: str
    fact_kind: FactKind = "finding"
    path: str
    old_sha: str = ""
    new_sha: str = ""
    cause: StaleCause = "reread"
    seq: int = 0
    needs_reread: bool = True


class Evidence(_Part):
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
    #: :data:`STALE_WINDOW`.
    stale_facts: list[StaleFact] = Field(default_factory=list)

    @property
    def world_version(self) -> str:
        """The fingerprint of what the task has seen: ``"wv:" + sha256[:16]`` of the sorted
        ``world`` items and ``head`` (``"wv:none"`` before the first read)."""
        from .freshness import world_version

        return world_version(self.world, self.head)


# 7. events --------------------------------------------------------------------------------
class EventSummary(_Part):
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
    durable_facts: list[str] = Field(default_factory=list)
    user_preferences: list[str] = Field(default_factory=list)
    project_conventions: list[str] = Field(default_factory=list)
    working_memory: list[str] = Field(default_factory=list)
    #: Addition: the durable memories this task loaded from the long-term store at its start
    #: (``memory.loaded``; a later ``memory.forgotten`` removes one). See :mod:`context.memory`.
    loaded: list[LoadedMemory] = Field(default_factory=list)


# errors -----------------------------------------------------------------------------------
class ErrorRecord(_Part):
    id: str
    step_id: str | None = None
    source: str = ""
    message: str = ""
    call_id: str | None = None
    timestamp: str = ""
    resolution: str | None = None


class Errors(_Part):
    """The task's errors, as a window (bound: :data:`ERRORS_WINDOW`).

    ``error_history``: every open error, plus the resolved ones ``resolved_errors`` keeps, in the
    order they occurred. ``resolved_errors``: the last :data:`ERRORS_WINDOW` errors resolved, plus
    any whose call is still in ``evidence.recent_tool_calls`` (so a failed call is never recorded
    twice). Every error, resolved or not, stays in the event log (``error.occurred``,
    ``error.resolved``); ``occurred_count`` and ``resolved_count`` count them all."""

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
        return self.identity.task_id

    def next_runnable_step(self) -> PlanStep | None:
        """The first pending step whose dependencies are all done (None if there is none)."""
        done = {s.id for s in self.plan.steps if s.status in ("done", "skipped")}
        for s in self.plan.steps:
            if s.status == "pending" and all(d in done or self.plan.is_folded(d) for d in s.depends_on):
                return s
        return None

    def unrecorded_tool_errors(self) -> list[ToolCallRecord]:
        """Failed tool calls not yet in ``error_history`` (recovery records them; routing sends
        the graph to recovery while there are any)."""
        recorded = {e.call_id for e in self.errors.error_history}
        return [r for r in self.evidence.recent_tool_calls if r.status == "error" and r.id not in recorded]

    def completion_ready(self) -> bool:
        """A pending ``complete_step`` for the running step, still applicable, whose calls have
        all finished (see :class:`PendingCompletion`): the executor records ``step.completed``
        from it without a model call."""
        pc = self.control.pending_completion
        if pc is None or pc.step_id != self.plan.current_step_id or pc.not_applied:
            return False
        status = {r.id: r.status for r in self.evidence.recent_tool_calls}
        return all(status.get(c) not in (None, "pending") for c in pc.after_calls)

    def failed_step(self) -> LastStep | None:
        """The last step when it ended ``failed`` or ``blocked`` and recovery has not decided on it
        yet (its plan step still has that status; a retry sets it back to pending)."""
        ls = self.progress.last_step
        if ls is None or ls.result not in ("failed", "blocked"):
            return None
        step = self.step(ls.id)
        return ls if step is not None and step.status in ("failed", "blocked") else None

    def stale(self, fact_id: str) -> list[StaleFact]:
        """The ``fact.stale`` marks of one fact (a finding id, ``step:<id>`` or a call id)."""
        return [s for s in self.evidence.stale_facts if s.fact_id == fact_id]

    def to_reread(self) -> list[str]:
        """Paths a stale fact rests on whose new bytes the task has not read yet (in order)."""
        return list(dict.fromkeys(s.path for s in self.evidence.stale_facts if s.needs_reread))

    def step(self, step_id: str | None) -> PlanStep | None:
        """The plan step with this id, or None."""
        for s in self.plan.steps:
            if s.id == step_id:
                return s
        return None
