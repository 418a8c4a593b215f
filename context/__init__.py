"""taskctx.context: the TaskContext contract and its machinery.

One turn of the loop, and who does each step. The steps in context/ are named by module; the
renderer, the model and the tool node live in ``nodes`` (public names given), wired by ``graphs``::

    events        events.py: Event, EventKind, one payload model per kind (PAYLOAD_MODELS).
      |           The append-only log that holds them, and the artifact store of exact
      |           tool outputs: store.py (SQLite) or pg_store.py (Postgres).
      v
    reducer       reducer.py: apply_event / replay, a pure left fold of the log; one
      |           handler per kind (FOLDS).
      v
    TaskContext   models.py: its parts (identity, plan, current_step, progress, control,
      |           permissions, evidence, events (a view of the log), memory, errors).
      v
    builder       builder.py: candidate ContextBlocks (trust-labelled) fitted into the token
      |           budget by build_context; its Manifest says what went in and why.
      v
    renderer      nodes: one per role (PlannerRenderer, ExecutorRenderer, ReviewerRenderer,
      |           RecoveryRenderer): TaskContext -> blocks -> chat messages.
      v
    model         a LangChain chat model (nodes.resolve_model; offline: nodes.ScriptedChatModel,
      |           nodes.ReplayChatModel).
      v
    tool node     nodes.make_tool_node: checks permissions, runs the calls, puts each raw
      |           output in the artifact store and its prompt form from compression.py
      |           (compress_tool_result) into tool.result.received.
      +--> new events appended to the log --> back to the top

Beside the loop: freshness.py says which facts (findings, step summaries, tool outputs) rest on
bytes the workspace no longer has (``fact.stale``; the world version); policy.py holds the
context policies, declarative rules for what the builder adds because a situation always needs
it (the nodes resolve them to blocks: ``nodes.render.policy_blocks``). secrets.py masks every secret-shaped value the stores write (the one
masking pass: mask_secrets, masked_events, masked_bytes); errors.py is the error tree that every step raises from (TaskctxError and
below; drawn in its docstring); text.py is where any str becomes bytes and back (lone
surrogates, control characters); verify.py checks a task's log and artifacts as read back; trajectory.py loads recorded agent runs
(load_trajectory), which `taskctx replay` and the bench feed through the loop (replay model
and replay tools); history.py reads back from the log what left
the state's windows (every error, every plan step: all_errors, all_plan_steps) for the views; catalog.py is the one answer to "which tasks exist" (list_tasks, find_task:
the task registry and the event log together), used by every command; memory.py is durable
memory across tasks, pure: the records LangGraph's long-term store holds (MemoryRecord, with
provenance and the files they rest on), what a task loaded (LoadedMemory: stale, superseded),
lexical relevance, and the store's contents rebuilt from the confirmation events.

This package never imports langgraph or langchain-core (enforced by import-linter), so it is
testable without a graph.
"""

from .builder import (
    BuildResult,
    ContextBlock,
    Manifest,
    ManifestEntry,
    approx_tokens,
    build_context,
    make_block,
)
from .catalog import NOT_STARTED, TaskInfo, find_task, list_tasks
from .compression import (
    COMMAND_LIMIT,
    FILE_LIMIT,
    SEARCH_LIMIT,
    Compressed,
    compress_tool_result,
    split_search_results,
)
from .errors import (
    ArtifactNotFoundError,
    BudgetError,
    ContextLengthError,
    DamagedStoreError,
    InvalidInputError,
    InvalidRefError,
    LogAheadError,
    ModelCallError,
    ModelConfigError,
    NotTaskctxDatabaseError,
    SequenceConflictError,
    StoreError,
    StoreOpenError,
    TaskctxError,
    TrajectoryError,
    UnknownTaskError,
)
from .events import PAYLOAD_MODELS, Event, EventKind, new_event, utc_now
from .history import all_errors, all_plan_steps
from .models import (
    AGENT_CLAIM,
    ApprovalRequest,
    Control,
    CurrentStep,
    ErrorRecord,
    Errors,
    EventSummary,
    EventsView,
    Evidence,
    Finding,
    Identity,
    LastStep,
    Memory,
    PendingCompletion,
    Permissions,
    Plan,
    PlanStep,
    Progress,
    ProviderUsage,
    TaskContext,
    ToolCallRecord,
    TranscriptCheckpoint,
    TranscriptNote,
)
from .reducer import apply_event, replay, summarize_event
from .secrets import mask_secrets, masked_bytes, masked_events
from .store import ArtifactRef, ArtifactStore, EventLog, SqliteStores, make_ref, parse_ref, slice_lines
from .trajectory import (
    RecordedStep,
    Trajectory,
    agent_request,
    classify_result,
    extract_constraints,
    load_trajectory,
    parse_action,
)

__all__ = [
    "AGENT_CLAIM",
    "COMMAND_LIMIT",
    "FILE_LIMIT",
    "NOT_STARTED",
    "PAYLOAD_MODELS",
    "SEARCH_LIMIT",
    "ApprovalRequest",
    "ArtifactNotFoundError",
    "ArtifactRef",
    "ArtifactStore",
    "BudgetError",
    "BuildResult",
    "Compressed",
    "ContextBlock",
    "ContextLengthError",
    "Control",
    "CurrentStep",
    "DamagedStoreError",
    "ErrorRecord",
    "Errors",
    "Event",
    "EventKind",
    "EventLog",
    "EventSummary",
    "EventsView",
    "Evidence",
    "Finding",
    "Identity",
    "InvalidInputError",
    "InvalidRefError",
    "LastStep",
    "LogAheadError",
    "Manifest",
    "ManifestEntry",
    "Memory",
    "ModelCallError",
    "ModelConfigError",
    "NotTaskctxDatabaseError",
    "PendingCompletion",
    "Permissions",
    "Plan",
    "PlanStep",
    "Progress",
    "ProviderUsage",
    "RecordedStep",
    "SequenceConflictError",
    "SqliteStores",
    "StoreError",
    "StoreOpenError",
    "TaskContext",
    "TaskInfo",
    "TaskctxError",
    "ToolCallRecord",
    "Trajectory",
    "TrajectoryError",
    "TranscriptCheckpoint",
    "TranscriptNote",
    "UnknownTaskError",
    "agent_request",
    "all_errors",
    "all_plan_steps",
    "apply_event",
    "approx_tokens",
    "build_context",
    "classify_result",
    "compress_tool_result",
    "extract_constraints",
    "find_task",
    "list_tasks",
    "load_trajectory",
    "make_block",
    "make_ref",
    "mask_secrets",
    "masked_bytes",
    "masked_events",
    "new_event",
    "parse_action",
    "parse_ref",
    "replay",
    "slice_lines",
    "split_search_results",
    "summarize_event",
    "utc_now",
]
