"""Events: the append-only log that every other view of a task is derived from.

An :class:`Event` is ``id, seq, kind, timestamp, actor, payload, causation_id, correlation_id``;
its payload is validated against the model of its kind (:data:`PAYLOAD_MODELS`) when the event
is built, so the reducer never meets a malformed payload.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .blocks import ManifestEntry
from .literals import FactKind, RiskLevel, StaleCause, StepResult
from .memory import FileStamp, LoadedMemory, MemoryKind, MemoryNamespace
from .models import Finding, PlanStep
from .text import clean_tree, json_text

__all__ = [
    "EDITABLE_FIELDS",
    "PAYLOAD_MODELS",
    "Actor",
    "CheckpointCreated",
    "ContextBuilt",
    "ErrorOccurred",
    "ErrorResolved",
    "Event",
    "EventKind",
    "FactStale",
    "FileModified",
    "MemoryConfirmed",
    "MemoryForgotten",
    "MemoryLoaded",
    "MemoryNoted",
    "PermissionEvent",
    "PlanCreated",
    "RecoveryDecided",
    "ResumeStarted",
    "ReviewCompleted",
    "RoleReported",
    "StateEdited",
    "StepCompleted",
    "StepCompletionRequested",
    "StepStarted",
    "TaskCompleted",
    "TaskCreated",
    "TaskForked",
    "ToolCalled",
    "ToolResultReceived",
    "TranscriptReset",
    "UserInterrupted",
    "new_event",
    "utc_now",
]

Actor = Literal["user", "agent", "system", "tool"]

EventKind = Literal[
    "task.created",
    "plan.created",
    "plan.updated",
    "step.started",
    "step.completed",
    "step.completion.requested",
    "tool.called",
    "tool.result.received",
    "permission.requested",
    "permission.granted",
    "permission.denied",
    "checkpoint.created",
    "file.modified",
    "error.occurred",
    "error.resolved",
    "user.interrupted",
    "resume.started",
    "context.built",
    "review.completed",
    "recovery.decided",
    "task.completed",
    "memory.proposed",
    "memory.confirmed",
    "memory.forgotten",
    "memory.loaded",
    "state.edited",
    "fact.stale",
    "role.reported",
    "task.forked",
]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskCreated(_Payload):
    """Payload of ``task.created``: the request, its constraints and the caller's permissions."""

    task_id: str
    original_request: str
    constraints: list[str] = Field(default_factory=list)
    #: Where a constraint came from when not the caller: ``"request"`` (the wording heuristic).
    constraint_sources: dict[str, str] = Field(default_factory=dict)
    #: The data schema the task is recorded with (``context.models.SCHEMA_VERSION``; 0: before versions).
    schema_version: int = 0
    success_criteria: list[str] = Field(default_factory=list)
    non_goals: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    denied_tools: list[str] = Field(default_factory=list)
    requires_approval: list[str] = Field(default_factory=list)
    file_scopes: list[str] = Field(default_factory=list)


class TaskForked(_Payload):
    """Payload of ``task.forked``: a child task's first own event, right after its parent's prefix.

    The child's log is the parent's events up to ``fork_seq`` (read from the parent, never copied),
    then its own from ``fork_seq + 1`` (this one). ``workspace``: the child's copy of the workspace
    ("": it shares the parent's); ``restored``: the files in it set back to their bytes at the fork;
    ``left``: path -> why a file the parent changed after the fork was left as it is.
    """

    task_id: str
    parent_task_id: str
    fork_seq: int
    why: str = ""
    schema_version: int = 0
    workspace: str = ""
    restored: list[str] = Field(default_factory=list)
    left: dict[str, str] = Field(default_factory=dict)


class PlanCreated(_Payload):
    """Payload of ``plan.created`` and ``plan.updated`` (a new version replaces the plan)."""

    interpreted_goal: str = ""
    success_criteria: list[str] = Field(default_factory=list)
    non_goals: list[str] = Field(default_factory=list)
    #: Hard constraints the planner read in the request (added with source ``"planner"``).
    constraints: list[str] = Field(default_factory=list)
    steps: list[PlanStep]
    reason: str = ""


class StepStarted(_Payload):
    """Payload of ``step.started``: the step and what the executor gets for it."""

    step_id: str
    objective: str = ""
    expected_output: str = ""
    input_context: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    risk_level: RiskLevel = "low"


class StepCompleted(_Payload):
    """Payload of ``step.completed``: the result, summary and findings of a step."""

    step_id: str
    result: StepResult = "success"
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)
    changed_artifacts: list[str] = Field(default_factory=list)
    unresolved_issues: list[str] = Field(default_factory=list)
    #: Addition (freshness): the files the step's calls read (path -> sha256 hex) and the HEAD then.
    rests_on: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class StepCompletionRequested(_Payload):
    """Payload of ``step.completion.requested``: ``complete_step`` sent with the step's last calls.

    The step completes once the calls in ``after_calls`` have finished; see
    :class:`~context.models.PendingCompletion`.
    """

    step_id: str
    after_calls: list[str] = Field(default_factory=list)
    result: StepResult = "success"
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)
    unresolved_issues: list[str] = Field(default_factory=list)


class ToolCalled(_Payload):
    """Payload of ``tool.called``: a tool call as the model issued it."""

    call_id: str
    step_id: str | None = None
    tool: str
    #: JSON text of the arguments as the model issued them.
    arguments: str = "{}"
    thought: str = ""
    idempotency_key: str = ""
    has_side_effects: bool = False


class ToolResultReceived(_Payload):
    """Payload of ``tool.result.received``: a call's status, prompt form and raw output's ref."""

    call_id: str
    status: Literal["ok", "error", "denied"] = "ok"
    #: What enters prompts: the compressed form (or the whole output when short).
    result_summary: str = ""
    raw_ref: str | None = None
    raw_chars: int = 0
    compressed: bool = False
    #: Addition (freshness): the workspace files the call read, path -> sha256 hex of the bytes
    #: read (``ToolOutcome.reads``), and the git HEAD commit when it ran (None: not known).
    reads: dict[str, str] = Field(default_factory=dict)
    head: str | None = None


class PermissionEvent(_Payload):
    """Payload of ``permission.requested|granted|denied``."""

    call_id: str
    tool: str
    arguments: str = "{}"
    risk: RiskLevel = "low"
    reason: str = ""


class CheckpointCreated(_Payload):
    """Payload of ``checkpoint.created``: a good checkpoint to roll back to."""

    checkpoint_id: str


class FileModified(_Payload):
    """Payload of ``file.modified``: a workspace file the task changed."""

    path: str
    call_id: str | None = None
    raw_ref: str | None = None
    #: Addition (freshness): sha256 hex of the file's bytes after the change ("" : not known).
    sha256: str = ""


class ErrorOccurred(_Payload):
    """Payload of ``error.occurred``: an error, and the step and call it came from."""

    error_id: str
    source: str = ""
    message: str = ""
    step_id: str | None = None
    call_id: str | None = None


class ErrorResolved(_Payload):
    """Payload of ``error.resolved``: how an error was settled."""

    error_id: str
    resolution: str = ""


class UserInterrupted(_Payload):
    """Payload of ``user.interrupted``."""

    reason: str = ""


class ResumeStarted(_Payload):
    """Payload of ``resume.started``: one resume of the task, and the node that picked it up."""

    token: str = ""
    from_checkpoint: str | None = None
    #: Addition: the node (role) that picked the task up: the first node the resume ran, a
    #: custom role included (None in logs written before it was recorded).
    node: str | None = None


class TranscriptReset(_Payload):
    """The executor's decision to restart its transcript at this call, with its numbers.

    Part of ``context.built``. Tokens by the graph's counter; costs in units of one uncached input token under ``rule``
    (``nodes.pricing``). ``reason``: ``"cost"`` (the restart is expected to pay), ``"budget"``
    (the prompt does not fit without it) or ``"notes"`` (the transcript holds the most state
    notes it may). ``removed``: tokens the restart takes out (the old checkpoint block, the calls
    that leave, the older notes); ``resent``: tokens it sends again uncached (the new checkpoint
    block, the kept calls but the latest). ``expected_saving``: this call's cost without the
    restart minus the expected mean cost per call of the transcript the restart starts (over
    ``horizon`` calls, the length that makes that mean least); negative when forced.
    ``digests``: how many of the kept calls (the oldest) are shown as their one-line digest from
    here until they leave the transcript.
    """

    reason: Literal["cost", "budget", "notes"]
    removed: int
    resent: int
    expected_saving: float
    horizon: int = 1
    rule: str = ""
    digests: int = 0


class ContextBuilt(_Payload):
    """Payload of ``context.built``: one model call's prompt, its budget and its manifest."""

    call: int
    role: str
    step_id: str | None = None
    budget: int
    prompt_tokens: int
    cached_prefix_tokens: int = 0
    blocks_in: int = 0
    blocks_out: int = 0
    #: The executor transcript restarted from a checkpoint block at this call: the decision's
    #: numbers (:class:`TranscriptReset`; ``True`` in logs written before they were recorded).
    transcript_reset: bool | TranscriptReset = False
    #: With ``transcript_reset``: how many most recent tool calls stay in the transcript.
    keep_last: int = 0
    #: Executor: the state delta appended to the transcript at this call (it changed since the
    #: last one shown), folded into ``evidence.transcript_notes``.
    delta_note: str | None = None
    #: The manifest: every candidate block, in or out, with why and its tokens.
    blocks: list[ManifestEntry] = Field(default_factory=list)
    #: ``artifact://`` ref of the prompt as sent (rendered as text).
    prompt_ref: str | None = None
    #: One ``<sha256 prefix>:<tokens>`` per prompt message, for the next call's cached prefix.
    fingerprints: list[str] = Field(default_factory=list)
    #: Why this prompt was rebuilt at a smaller budget (the provider refused the first one as
    #: too long for the model), or ``None``.
    rebuilt: str | None = None
    #: What the provider reported for this call (LangChain's ``usage_metadata``):
    #: ``{input_tokens, output_tokens, cache_read, cache_creation}``, ``None`` when the model
    #: reports none (scripted and replay models).
    usage: dict[str, int] | None = None
    #: Addition (schema 3): the model that answered, as LangChain names it (``ls_model_name``,
    #: else the model class's type), and its provider (``ls_provider``); ``None`` in older logs.
    model: str | None = None
    provider: str | None = None
    #: Addition (schema 3): wall-clock milliseconds the model call took (the answered request;
    #: ``None`` in older logs).
    latency_ms: int | None = None
    #: Addition (schema 3): the reply's tokens by the graph's counter (text and tool calls;
    #: ``None`` in older logs).
    reply_tokens: int | None = None
    #: Addition: a ``create_agent`` model call's answer, for a resume whose checkpoint
    #: lacks it (the middleware gives it again instead of a new call): ``{at, last, id, content,
    #: tool_calls}``, ``at`` the request's message count and ``last`` a digest of its last
    #: message; ``None`` for the graph's calls and in older logs (and then not written, so a log
    #: without answers is written as before).
    answer: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class ReviewCompleted(_Payload):
    """Payload of ``review.completed``: the reviewer's verdict on the task."""

    verdict: Literal["approve", "revise"]
    summary: str = ""
    issues: list[str] = Field(default_factory=list)


#: A role's name as a report records it: the node's name (letters, digits, ``_.:-``, 1-64 chars).
ROLE_NAME = r"^[A-Za-z0-9_.:\-]{1,64}$"


class RoleReported(_Payload):
    """Payload of ``role.reported``: what a role (a custom one, say a tester) found.

    ``role`` is the node that reports (``nodes.report`` fills it in); ``verdict`` a short word of
    the role's own vocabulary (``pass``, ``fail``, ``revise``...: one line, at most 40 chars);
    ``summary`` and ``items`` (issues, failing checks...) what it found; ``refs`` what it rests
    on (artifact refs, finding ids). Everything but ``role`` is the role's claim: prompts quote
    it. The report changes no control flow: a router reads ``progress.reports`` to act on it.
    """

    role: str = Field(pattern=ROLE_NAME)
    verdict: str = Field(default="", max_length=40, pattern=r"^[^\r\n]*$")
    summary: str = ""
    items: list[str] = Field(default_factory=list)
    refs: list[str] = Field(default_factory=list)
    step_id: str | None = None


class RecoveryDecided(_Payload):
    """Payload of ``recovery.decided``: retry the step, replan, or stop."""

    error_id: str | None = None
    decision: Literal["retry", "replan", "stop"]
    reason: str = ""


class TaskCompleted(_Payload):
    """Payload of ``task.completed``: how the task ended."""

    status: Literal["completed", "failed"] = "completed"
    summary: str = ""


class MemoryNoted(_Payload):
    """Payload of ``memory.proposed`` (working memory, per task)."""

    kind: MemoryKind = "fact"
    text: str


class MemoryConfirmed(MemoryNoted):
    """Payload of ``memory.confirmed``: durable, written to the long-term store.

    See :mod:`context.memory`. ``namespace`` (``user`` or ``project``), ``subject`` (a newer
    confirmed memory of the same subject supersedes an older one), ``files`` (what it rests on:
    path + sha256 when confirmed), ``confirmed_by`` and ``task_id`` (the task it was confirmed
    in, when the event is not in that task's own log) are its provenance; all have defaults, so
    an older ``{"kind", "text"}`` payload reads back as before.
    """

    namespace: MemoryNamespace = "project"
    subject: str = ""
    files: list[FileStamp] = Field(default_factory=list)
    confirmed_by: str = "user"
    task_id: str | None = None


class MemoryForgotten(_Payload):
    """Payload of ``memory.forgotten``: the durable memory ``key`` leaves the long-term store.

    ``namespace`` is where it lived, ``text`` what it said, ``reason`` why it was forgotten.
    """

    key: str
    namespace: MemoryNamespace = "project"
    text: str = ""
    reason: str = ""


class MemoryLoaded(_Payload):
    """Payload of ``memory.loaded``: the durable memories a new task loaded for its request.

    Each comes with provenance, staleness and what supersedes it; ``search`` says how they were
    found (``lexical`` or ``semantic``).
    """

    memories: list[LoadedMemory] = Field(default_factory=list)
    search: Literal["lexical", "semantic"] = "lexical"


#: The fields a state edit (``graph.update_state`` from outside a node, e.g. LangGraph Studio's
#: state editor) may change, per part; every other part is derived from the event log.
EDITABLE_FIELDS: dict[str, frozenset[str]] = {
    "identity": frozenset(
        {"interpreted_goal", "success_criteria", "criteria_sources", "non_goals", "constraints", "constraint_sources"}
    ),
    "permissions": frozenset({"allowed_tools", "denied_tools", "requires_approval", "file_scopes"}),
    "memory": frozenset({"durable_facts", "user_preferences", "project_conventions", "working_memory"}),
}


class StateEdited(_Payload):
    """Payload of ``state.edited``: a state write that did not come from a node.

    ``graph.update_state`` from outside a node is recorded so the log and the checkpoint agree.
    ``changes``: part -> {field: new value (JSON)}, only :data:`EDITABLE_FIELDS`; ``as_node``:
    the node the writer named.
    """

    changes: dict[str, dict[str, Any]]
    as_node: str | None = None

    @model_validator(mode="after")
    def _editable(self) -> StateEdited:
        for part, fields in self.changes.items():
            bad = set(fields) - EDITABLE_FIELDS.get(part, frozenset())
            if bad:
                raise ValueError(f"{part}.{sorted(bad)[0]} is not an editable field")
        return self


class FactStale(_Payload):
    """Payload of ``fact.stale``: a fact rests on bytes the workspace no longer has.

    See :class:`~context.models.StaleFact` for the fields, :mod:`context.freshness` for who
    notices.
    """

    fact_id: str
    fact_kind: FactKind = "finding"
    path: str
    old_sha: str = ""
    new_sha: str = ""
    cause: StaleCause = "reread"


PAYLOAD_MODELS: dict[str, type[_Payload]] = {
    "task.created": TaskCreated,
    "plan.created": PlanCreated,
    "plan.updated": PlanCreated,
    "step.started": StepStarted,
    "step.completed": StepCompleted,
    "step.completion.requested": StepCompletionRequested,
    "tool.called": ToolCalled,
    "tool.result.received": ToolResultReceived,
    "permission.requested": PermissionEvent,
    "permission.granted": PermissionEvent,
    "permission.denied": PermissionEvent,
    "checkpoint.created": CheckpointCreated,
    "file.modified": FileModified,
    "error.occurred": ErrorOccurred,
    "error.resolved": ErrorResolved,
    "user.interrupted": UserInterrupted,
    "resume.started": ResumeStarted,
    "context.built": ContextBuilt,
    "review.completed": ReviewCompleted,
    "recovery.decided": RecoveryDecided,
    "task.completed": TaskCompleted,
    "memory.proposed": MemoryNoted,
    "memory.confirmed": MemoryConfirmed,
    "memory.forgotten": MemoryForgotten,
    "memory.loaded": MemoryLoaded,
    "state.edited": StateEdited,
    "fact.stale": FactStale,
    "role.reported": RoleReported,
    "task.forked": TaskForked,
}


def utc_now() -> str:
    """The current time as ISO-8601 UTC with milliseconds, e.g. ``2026-11-30T12:00:00.000Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Event(BaseModel):
    """One entry of the event log.

    ``payload`` is a JSON object validated against ``PAYLOAD_MODELS[kind]`` when the event is
    built (``pydantic.ValidationError`` names the field), defaults filled in and its text clean
    UTF-8 (a lone surrogate becomes U+FFFD; the exact bytes of a tool's output are in the
    artifact its ``raw_ref`` names: :mod:`context.text`). ``seq`` is the per-task sequence number
    (1, 2, ...) the event log assigns; ``timestamp`` is ISO-8601 UTC.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    seq: int = 0
    kind: EventKind
    timestamp: str
    actor: Actor
    payload: dict[str, Any] = Field(default_factory=dict)
    causation_id: str | None = None
    correlation_id: str | None = None

    @model_validator(mode="after")
    def _check_payload(self) -> Event:
        model = PAYLOAD_MODELS[self.kind]
        # Normalise: defaults filled in, so equal events compare equal after a round trip; text is
        # clean UTF-8 (a lone surrogate becomes U+FFFD; exact tool output lives in the artifact).
        dumped = model.model_validate(self.payload).model_dump(mode="json")
        object.__setattr__(self, "payload", clean_tree(dumped))
        return self

    def typed(self) -> Any:
        """The payload as its kind's pydantic model (``PAYLOAD_MODELS[kind]``)."""
        return PAYLOAD_MODELS[self.kind].model_validate(self.payload)

    def to_json(self) -> str:
        """The event as one line of JSON, keys sorted (UTF-8 text: :func:`context.text.json_text`)."""
        return json_text(self.model_dump(mode="json"), sort_keys=True)


def new_event(
    kind: EventKind,
    payload: BaseModel | dict[str, Any],
    *,
    actor: Actor,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    timestamp: str | None = None,
) -> Event:
    """Build an event with a fresh id (``evt_<32 hex>``); the log assigns ``seq`` on append.

    Args:
        kind: The event kind.
        payload: Its payload: the kind's payload model, or a dict of its fields.
        actor: Who caused it (``user``, ``agent``, ``system`` or ``tool``).
        correlation_id: Groups the events of one exchange.
        causation_id: What caused it (a node run writes ``<task>#<cursor>:<node>``).
        timestamp: ISO-8601 UTC (default: :func:`utc_now`).

    Returns:
        The event, ``seq == 0``.

    Raises:
        pydantic.ValidationError: The payload is not valid for ``kind`` (the error names the field).
    """
    data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
    return Event(
        id=f"evt_{uuid.uuid4().hex}",
        kind=kind,
        timestamp=timestamp or utc_now(),
        actor=actor,
        payload=data,
        causation_id=causation_id,
        correlation_id=correlation_id,
    )
