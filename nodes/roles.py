"""Node factories for the four roles: planner, executor, reviewer, recovery.

Each factory takes a chat model, the :class:`~nodes.runtime.NodeEnv` and optionally a renderer,
and returns a LangGraph node ``(state: TaskContext, config) -> dict`` of changed parts. A node:

1. catches up (:class:`~nodes.runtime.NodeRun`): if its crashed earlier attempt already
   recorded its output, it returns that without calling the model again;
2. renders its role's prompt (only its layers), records a ``context.built`` event with the
   manifest, calls the model with the manifest as run metadata;
3. appends the events the answer means, in one transaction, and returns the folded parts.

Wire them into your own ``StateGraph(TaskContext)``; ``graphs.build_orchestrator`` is one such
wiring.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import re
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp

from context import BudgetError, ContextLengthError, Event, Finding, PlanStep, TaskContext, TaskctxError, replay
from context.events import (
    CheckpointCreated,
    ErrorOccurred,
    ErrorResolved,
    FactStale,
    MemoryLoaded,
    PlanCreated,
    RecoveryDecided,
    ReviewCompleted,
    StepCompleted,
    StepCompletionRequested,
    StepStarted,
    TaskCompleted,
    TaskCreated,
    ToolCalled,
)
from context.freshness import HEAD_PATH, about
from context.models import SCHEMA_VERSION, ToolCallRecord, arguments_dict
from context.text import cut

from .render import ExecutorRenderer, PlannerRenderer, RecoveryRenderer, Renderer, ReviewerRenderer
from .runtime import NodeEnv, NodeRun, usage_of
from .schemas import COMPLETE_STEP, DECIDE_RECOVERY, SUBMIT_PLAN, SUBMIT_REVIEW
from .tools import CONTROL_TOOLS, READ_ARTIFACT_SCHEMA, REJECTED_AGAIN, ToolExecutor

__all__ = [
    "MAX_REVIEW_ROUNDS",
    "MAX_REJECTED_REPEATS",
    "MAX_STEP_ERRORS",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "memory_loaded_events",
    "task_created_event",
]

Node = Callable[[TaskContext, RunnableConfig], dict[str, Any]]

#: Reviews that may send the work back before the task stops as failed.
MAX_REVIEW_ROUNDS = 3
#: A prompt the provider refuses as too long is rebuilt once, at a budget this share of its
#: droppable (not required) blocks' tokens smaller.
REBUILD_CUT = 0.25
#: Open errors (failures no later success of the step resolved) one step may have before recovery
#: stops the task whatever the model says.
MAX_STEP_ERRORS = 10
#: Calls repeated after the user rejected them before recovery stops the task (the first
#: repeat re-plans: retrying a rejected call would only repeat it).
MAX_REJECTED_REPEATS = 2


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def reply_text(ai: AIMessage) -> str:
    """The text of a model reply: its content, or, when the content is a list of blocks
    (Anthropic: text + tool_use), the text blocks joined; the tool calls are kept as tool calls
    (``ai.tool_calls``), never repeated as text."""
    if isinstance(ai.content, str):
        return ai.content
    return "\n".join(
        b if isinstance(b, str) else str(b.get("text", ""))
        for b in ai.content
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
    )


def _tool_args(ai: AIMessage, name: str) -> dict[str, Any] | None:
    for tc in ai.tool_calls:
        if tc["name"] == name:
            return dict(tc["args"])
    return None


def task_created_event(run: NodeRun) -> Event:
    """``task.created`` from the task's input state (identity + permissions)."""
    i, p = run.input.identity, run.input.permissions
    return run.make(
        "task.created",
        TaskCreated(
            task_id=i.task_id,
            original_request=i.original_request,
            constraints=i.constraints,
            constraint_sources=i.constraint_sources,
            schema_version=SCHEMA_VERSION,
            success_criteria=i.success_criteria,
            non_goals=i.non_goals,
            allowed_tools=p.allowed_tools,
            denied_tools=p.denied_tools,
            requires_approval=p.requires_approval,
            file_scopes=p.file_scopes,
        ),
        actor="user",
    )


def memory_loaded_events(run: NodeRun) -> list[Event]:
    """``memory.loaded`` with the durable memories relevant to the request
    (:meth:`nodes.memory_source.MemorySource.load`), when the env has a long-term store and any is
    relevant; else nothing."""
    if run.env.memory is None:
        return []
    found = run.env.memory.load(run.input.identity.original_request)
    if not found:
        return []
    return [run.make("memory.loaded", MemoryLoaded(memories=found, search=run.env.memory.search_kind), actor="system")]


#: The attempt a role node is in (its NodeRun, and the ``context.built`` of a model call that
#: answered), for :func:`_guarded` to record a failure with the call it cost.
_ATTEMPT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("taskctx_attempt", default=None)


def _prologue(run: NodeRun) -> tuple[list[Event], TaskContext]:
    pre: list[Event] = []
    if run.ctx.events.cursor == 0:
        pre.append(task_created_event(run))
        pre += memory_loaded_events(run)
    pre += run.resume_events()
    att = _ATTEMPT.get()
    if att is not None:  # the node appends its step.started to this same list
        att.update(run=run, pre=pre)
    return pre, replay(pre, run.ctx)


def _model_call(
    run: NodeRun,
    model: BaseChatModel,
    renderer: Renderer,
    ctx: TaskContext,
    tools: list[dict[str, Any]],
    step_id: str | None,
) -> tuple[Event, AIMessage]:
    try:
        rendered = renderer.render(ctx, run.env, tools)
    except BudgetError as exc:  # name the task, so the message says which one to rerun
        raise (exc if exc.task_id or not exc.minimum else exc.for_task(ctx.identity.task_id)) from None
    built = run.context_built(renderer.role, rendered, step_id, ctx)
    try:
        ai = run.call_model(model, renderer.role, rendered, built, ctx)
    except ContextLengthError as exc:
        # once: the prompt again with a quarter of its droppable blocks' tokens less, recorded
        optional = sum(b.token_estimate for b in rendered.blocks if b.priority != "required")
        if optional == 0:
            raise ContextLengthError(
                f"{exc.cause}; the prompt holds only required blocks ({rendered.prompt_tokens:,} tokens), so a smaller "
                "budget cannot shorten it: use a model with a larger context window",
                status=exc.status,
                role=exc.role,
            ) from exc
        refused = rendered.prompt_tokens
        smaller = run.env.reserve_for_output + refused - math.ceil(optional * REBUILD_CUT)
        env = dataclasses.replace(run.env, budget=min(run.env.budget, smaller))
        rendered = renderer.render(ctx, env, tools)
        built = run.context_built(renderer.role, rendered, step_id, ctx)
        reason = (
            f"{exc.cause}; the prompt of {refused:,} tokens rebuilt at budget {env.budget:,} (was {run.env.budget:,})"
        )
        built = built.model_copy(update={"payload": {**built.payload, "rebuilt": reason}})
        ai = run.call_model(model, renderer.role, rendered, built, ctx)
    usage = usage_of(ai)
    if usage is not None:
        built = built.model_copy(update={"payload": {**built.payload, "usage": usage}})
    att = _ATTEMPT.get()
    if att is not None:
        att["built"] = built
    return built, ai


def _plan_steps(ctx: TaskContext, raw_steps: list[Any]) -> list[PlanStep]:
    kept = [s for s in ctx.plan.steps if s.status in ("done", "skipped")]
    used = {s.id for s in kept}
    out = list(kept)
    n = len(ctx.plan.steps) + ctx.plan.done_folded
    for raw in raw_steps:
        if not isinstance(raw, dict):
            raw = {"title": str(raw)}
        sid = str(raw.get("id") or "")
        if not sid or sid in used or ctx.plan.is_folded(sid):  # a folded done step's id is taken too
            n += 1
            sid = f"s{n}"
            while sid in used or ctx.plan.is_folded(sid):
                n += 1
                sid = f"s{n}"
        used.add(sid)
        out.append(
            PlanStep(
                id=sid,
                title=str(raw.get("title") or sid),
                description=str(raw.get("description") or ""),
                expected_output=str(raw.get("expected_output") or ""),
                depends_on=[str(d) for d in raw.get("depends_on") or [] if str(d) in used],
            )
        )
    return out


#: Exceptions a role node lets through (not a node failure): taskctx's own (budget, damaged store,
#: a provider failure as ModelCallError: issue 11's exit 3, nothing recorded), LangGraph's control
#: flow (interrupts), and the store's I/O. Anything else (a model answer the node cannot use, a bug
#: in a custom renderer) is a node failure (:func:`_guarded`).
_PASS_THROUGH: tuple[type[BaseException], ...] = (TaskctxError, GraphBubbleUp, OSError, sqlite3.Error)


def _is_store_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "psycopg"


def _step_started(run: NodeRun, step: PlanStep) -> Event:
    return run.make(
        "step.started",
        StepStarted(
            step_id=step.id,
            objective=step.title + (f": {step.description}" if step.description else ""),
            expected_output=step.expected_output,
            constraints=[],
        ),
    )


def _guarded(role: str, env: NodeEnv, node: Node) -> Node:
    """``node`` that records a failure instead of raising it again on every resume.

    A non-provider exception of the node (see ``_PASS_THROUGH``) is recorded, in one transaction
    with the node's prologue (``task.created``, ``resume.started``, ``step.started``), as
    ``error.occurred`` (source ``node:<role>``, message ``<role> node failed: <Type>: <text>``),
    after the ``context.built`` of the model call when the model answered (the call happened and
    is counted; a scripted or replayed model moves on to its next answer), and routed on: the executor's running step ends ``failed`` (``step.completed``), so the graph
    goes to recovery (which stops the task after ``MAX_STEP_ERRORS`` errors in one step); a
    planner, reviewer or recovery failure ends the task ``failed`` (``task.completed``: running
    the same node again would meet the same failure). The next resume continues from there;
    it never calls the failing node again silently."""

    def guarded(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        att: dict[str, Any] = {}
        token = _ATTEMPT.set(att)
        try:
            return node(state, config)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            if _is_store_error(exc):
                raise
            return _record_failure(role, env, state, config, exc, att)
        finally:
            _ATTEMPT.reset(token)

    guarded.__name__ = getattr(node, "__name__", role)
    guarded.__doc__ = node.__doc__
    return guarded


def _record_failure(
    role: str, env: NodeEnv, state: TaskContext, config: RunnableConfig, exc: Exception, att: dict[str, Any]
) -> dict[str, Any]:
    # the failed attempt's own prologue (and step.started), when it got that far: nothing of it
    # was appended, and its events are older than the model call's
    run: NodeRun = att["run"] if "run" in att else NodeRun(env, state, role, config)
    pre: list[Event] = list(att["pre"]) if "pre" in att else _prologue(run)[0]
    ctx = replay(pre, run.ctx)
    built: Event | None = att.get("built")
    text = " ".join(str(exc).split())
    message = f"{role} node failed: {type(exc).__name__}" + (f": {text}" if text else "")
    message = message if len(message) <= 300 else message[:297] + "..."
    if role == "executor" and ctx.plan.current_step_id is None:
        nxt = ctx.next_runnable_step()
        if nxt is not None:  # the step the failed attempt was starting
            started = _step_started(run, nxt)
            pre.append(started)
            ctx = replay([started], ctx)
    if built is not None:  # the model answered: its call is recorded (the manifest, the tokens it took)
        pre.append(built)
        ctx = replay([built], ctx)
    step_id = ctx.plan.current_step_id
    events = [
        run.make(
            "error.occurred",
            ErrorOccurred(
                error_id=f"err-{len(ctx.errors.error_history) + 1}",
                source=f"node:{role}",
                message=message,
                step_id=step_id,
            ),
            actor="system",
        )
    ]
    if role == "executor" and step_id is not None:
        events.append(
            run.make("step.completed", StepCompleted(step_id=step_id, result="failed", summary=message), actor="system")
        )
    else:
        events.append(run.make("task.completed", TaskCompleted(status="failed", summary=message), actor="system"))
    run.commit([*pre, *events])
    return run.update()


def make_planner_node(model: BaseChatModel, env: NodeEnv, renderer: Renderer | None = None) -> Node:
    """The planner: writes ``plan.created`` (first plan) or ``plan.updated`` (re-plan)."""
    rend = renderer or PlannerRenderer()

    def planner(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "planner", config)
        if run.replayed:
            return run.update()
        pre, ctx = _prologue(run)
        built, ai = _model_call(run, model, rend, ctx, [SUBMIT_PLAN], None)
        args = _tool_args(ai, "submit_plan")
        if args is None:
            text = reply_text(ai)
            args = {
                "steps": [{"title": text.strip()[:200] or "Do the task"}],
                "reason": "model gave no submit_plan call",
            }
        steps = _plan_steps(ctx, list(args.get("steps") or []))
        payload = PlanCreated(
            interpreted_goal=str(args.get("interpreted_goal") or ""),
            success_criteria=[str(c) for c in args.get("success_criteria") or []],
            non_goals=[str(c) for c in args.get("non_goals") or []],
            constraints=[str(c) for c in args.get("constraints") or []],
            steps=steps,
            reason=str(args.get("reason") or ""),
        )
        kind = "plan.created" if ctx.plan.version == 0 else "plan.updated"
        events = [run.make(kind, payload)]
        if not steps:  # nothing to execute: the task ends here, and says why
            events.append(
                run.make("task.completed", TaskCompleted(status="failed", summary="the planner gave no steps"))
            )
        run.commit([*pre, built, *events])
        return run.update()

    return _guarded("planner", env, planner)


def _raw_findings(step_id: str, raw: Any) -> list[Finding]:
    """The findings of a ``complete_step`` call as the model gave them (refs may be empty)."""
    out = []
    for i, f in enumerate(raw or [], start=1):
        if isinstance(f, dict):
            stmt, ev = str(f.get("statement") or ""), [str(r) for r in f.get("evidence_refs") or []]
        else:
            stmt, ev = str(f), []
        if stmt:
            sup = [str(s) for s in f.get("supersedes") or []] if isinstance(f, dict) else []
            out.append(Finding(id=f"{step_id}.f{i}", statement=stmt, evidence_refs=ev, supersedes=sup))
    return out


def _with_refs(
    ctx: TaskContext, step_id: str, findings: list[Finding], older: Sequence[ToolCallRecord] = ()
) -> list[Finding]:
    """A finding without refs gets the refs of the step's last 3 tool results; each finding rests
    on the files its evidence calls read (:func:`_rests_on`; the calls of the transcript, and
    ``older``: those read back from the log, :func:`_older_evidence`) that its statement names, or
    all of them when it names none (:func:`context.freshness.about`)."""
    refs = [r.raw_ref for r in ctx.evidence.recent_tool_calls if r.step_id == step_id and r.raw_ref][-3:]
    out = [f if f.evidence_refs else f.model_copy(update={"evidence_refs": list(refs)}) for f in findings]
    written = _written_by(ctx, step_id)
    calls = [*older, *ctx.evidence.recent_tool_calls]
    based = [_rests_on(ctx, f, [r for r in calls if r.raw_ref in f.evidence_refs], written) for f in out]
    return [f.model_copy(update={"rests_on": about(f.statement, f.rests_on)}) if f.rests_on else f for f in based]


def _older_evidence(run: NodeRun, ctx: TaskContext, findings: list[Finding]) -> list[ToolCallRecord]:
    """The calls whose artifacts ``findings`` cite but that have left the transcript (a restart
    since): read back from the log (``tool.result.received`` only, and only when a finding cites
    such a ref), with what they read and the HEAD then; oldest first."""
    recent = {r.raw_ref for r in ctx.evidence.recent_tool_calls}
    want = {x for f in findings for x in f.evidence_refs} - recent
    if not want:
        return []
    out = []
    for e in run.env.events.read(run.task_id, kinds=("tool.result.received",)):
        p = e.payload
        if e.seq <= ctx.events.cursor and p.get("raw_ref") in want and (p.get("reads") or p.get("head")):
            out.append(
                ToolCallRecord(
                    id=p["call_id"], tool="", raw_ref=p["raw_ref"], reads=dict(p.get("reads") or {}), head=p.get("head")
                )
            )
    return out


def _written_by(ctx: TaskContext, step_id: str) -> set[str]:
    """The files the step's own successful write or patch calls changed (their findings and
    summary are about what they wrote)."""
    out: set[str] = set()
    for r in ctx.evidence.recent_tool_calls:
        if r.step_id != step_id or r.status != "ok":
            continue
        args = arguments_dict(r.arguments)
        if r.tool == "write_file":
            out.add(str(args.get("path", "")))
        elif r.tool == "apply_patch":
            out.update(
                ln[4:].strip().removeprefix("b/")
                for ln in str(args.get("patch", "")).splitlines()
                if ln.startswith("+++ ")
            )
    return out


def _rests_on(ctx: TaskContext, fact: Any, calls: list[ToolCallRecord], written: set[str] | None = None) -> Any:
    """``fact`` (a Finding or StepCompleted) with ``rests_on``: the files ``calls`` read, path ->
    sha256 of the bytes read (the latest read of a path wins; a file in ``written``, which the
    step itself changed, at the bytes it wrote), and ``head``: the HEAD they saw."""
    files: dict[str, str] = {}
    head = None
    for r in calls:
        files.update(r.reads)
        head = r.head if r.head is not None else head
    for path in written or ():
        if path in files and path in ctx.evidence.world:
            files[path] = ctx.evidence.world[path]
    if not files and head is None:
        return fact
    return fact.model_copy(update={"rests_on": files, "head": head})


def _completion_args(step_id: str, args: dict[str, Any]) -> tuple[str, str, list[Finding], list[str]]:
    """``(result, summary, findings, unresolved_issues)`` of a ``complete_step`` call."""
    result = args.get("result") if args.get("result") in ("success", "partial", "failed", "blocked") else "success"
    return (
        str(result),
        str(args.get("summary") or ""),
        _raw_findings(step_id, args.get("findings")),
        [str(u) for u in args.get("unresolved_issues") or []],
    )


def _step_completed(
    run: NodeRun,
    ctx: TaskContext,
    step_id: str,
    result: str,
    summary: str,
    findings: list[Finding],
    unresolved: list[str],
) -> list[Event]:
    """``step.completed`` and, for a step that succeeded, the errors it settles and the last
    good checkpoint."""
    older = _older_evidence(run, ctx, findings)
    completed = StepCompleted(
        step_id=step_id,
        result=result,
        summary=summary,
        findings=_with_refs(ctx, step_id, findings, older),
        unresolved_issues=unresolved,
    )
    completed = _rests_on(
        ctx, completed, [r for r in ctx.evidence.recent_tool_calls if r.step_id == step_id], _written_by(ctx, step_id)
    )
    events = [run.make("step.completed", completed)]
    if run.env.freshness:
        events += _born_stale(run, ctx, completed, older)
    if result in ("success", "partial"):
        events += _resolved_by_step(run, ctx, step_id)
        # the checkpoint this node started from holds the step's recorded work: the last
        # good checkpoint recovery can point at (LangGraph passes it as checkpoint_map[""])
        cp = ((run.config.get("configurable") or {}).get("checkpoint_map") or {}).get("")
        if cp:
            events.append(run.make("checkpoint.created", CheckpointCreated(checkpoint_id=str(cp)), actor="system"))
    return events


def _born_stale(
    run: NodeRun, ctx: TaskContext, completed: StepCompleted, older: Sequence[ToolCallRecord] = ()
) -> list[Event]:
    """``fact.stale`` for the new findings and step summary that rest on evidence already
    stale (a call whose file changed before the step ended): they are stale from the start."""
    by_ref = {r.raw_ref: r.id for r in [*older, *ctx.evidence.recent_tool_calls] if r.raw_ref}
    step_calls = [r.id for r in ctx.evidence.recent_tool_calls if r.step_id == completed.step_id]
    facts: list[tuple[str, str, list[str], dict[str, str]]] = [
        (f.id, "finding", [by_ref[x] for x in f.evidence_refs if x in by_ref], {**f.rests_on, HEAD_PATH: f.head or ""})
        for f in completed.findings
    ]
    facts.append(
        (f"step:{completed.step_id}", "step", step_calls, {**completed.rests_on, HEAD_PATH: completed.head or ""})
    )
    out = []
    for fid, kind, calls, rests_on in facts:
        seen: set[tuple[str, str]] = set()
        for m in ctx.evidence.stale_facts:
            if m.fact_id in calls and rests_on.get(m.path) == m.old_sha and (m.path, m.new_sha) not in seen:
                seen.add((m.path, m.new_sha))
                payload = FactStale(
                    fact_id=fid, fact_kind=kind, path=m.path, old_sha=m.old_sha, new_sha=m.new_sha, cause=m.cause
                )
                out.append(run.make("fact.stale", payload, actor="system"))
    return out


def _resolved_by_step(run: NodeRun, ctx: TaskContext, step_id: str) -> list[Event]:
    """``error.resolved`` for each open error that a successful step settles: errors of this
    step, and errors of steps a re-plan replaced (their work is what this step did instead)."""
    done = {e.id for e in ctx.errors.resolved_errors}
    in_plan = {s.id for s in ctx.plan.steps}
    return [
        run.make("error.resolved", ErrorResolved(error_id=e.id, resolution=f"step {step_id} completed"), actor="system")
        for e in ctx.errors.error_history
        if e.id not in done and (e.step_id == step_id or (e.step_id is not None and e.step_id not in in_plan))
    ]


def make_executor_node(
    model: BaseChatModel, env: NodeEnv, tools: ToolExecutor, renderer: Renderer | None = None
) -> Node:
    """The executor: starts the next runnable step, asks the model for tool calls
    (``tool.called``, run by the tool node) or ``complete_step`` (``step.completed``)."""
    rend = renderer or ExecutorRenderer()

    def executor(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "executor", config)
        if run.replayed:
            return run.update()
        pre, ctx = _prologue(run)
        if ctx.plan.current_step_id is None:
            nxt = ctx.next_runnable_step()
            if nxt is None:
                run.commit(pre)
                return run.update()
            started = _step_started(run, nxt)
            pre.append(started)
            ctx = replay([started], ctx)
        step_id = ctx.plan.current_step_id
        if ctx.completion_ready():  # complete_step came with the step's last calls, and they have finished
            pc = ctx.control.pending_completion
            assert pc is not None
            run.commit(
                [
                    *pre,
                    *_step_completed(
                        run, ctx, pc.step_id, pc.result, pc.summary, list(pc.findings), list(pc.unresolved_issues)
                    ),
                ]
            )
            return run.update()
        schemas = [*tools.schemas(), READ_ARTIFACT_SCHEMA, COMPLETE_STEP]
        minimum = getattr(rend, "minimum_budget", None)
        if minimum is not None and not ctx.events.counts.get("context.built:executor"):
            # the task's first executor call, before any tool runs: a budget too small for a
            # degraded call later fails now, not after a side effect
            need = minimum(ctx, env, schemas)
            if need > env.budget:
                raise BudgetError(
                    role="executor",
                    task_id=ctx.identity.task_id,
                    required=need - env.reserve_for_output,
                    reserve=env.reserve_for_output,
                    budget=env.budget,
                )
        built, ai = _model_call(run, model, rend, ctx, schemas, step_id)
        thought = reply_text(ai)
        work = [tc for tc in ai.tool_calls if tc["name"] not in CONTROL_TOOLS]
        events: list[Event] = []
        used = {r.id for r in ctx.evidence.recent_tool_calls}
        if work:
            for i, tc in enumerate(work):
                # ids go back to the provider: keep them in the strictest format (Anthropic's
                # ^[a-zA-Z0-9_-]+$); a repeated id gets "_<cursor>"
                cid = _ID_UNSAFE.sub("_", tc.get("id") or "") or f"call_{uuid.uuid4().hex[:12]}"
                if cid in used:
                    cid = f"{cid}_{ctx.events.cursor}"
                used.add(cid)
                events.append(
                    run.make(
                        "tool.called",
                        ToolCalled(
                            call_id=cid,
                            step_id=step_id,
                            tool=tc["name"],
                            arguments=json.dumps(tc["args"], sort_keys=True, ensure_ascii=False),
                            thought=thought if i == 0 else "",
                            idempotency_key=f"{run.task_id}:{cid}",
                            has_side_effects=tools.has_side_effects(tc["name"]),
                        ),
                    )
                )
            done = _tool_args(ai, "complete_step")
            if done is not None and step_id is not None:  # finish the step once these calls succeed
                result, summary, findings, unresolved = _completion_args(step_id, done)
                events.append(
                    run.make(
                        "step.completion.requested",
                        StepCompletionRequested(
                            step_id=step_id,
                            after_calls=[ev.payload["call_id"] for ev in events],
                            result=result,
                            summary=summary,
                            findings=findings,
                            unresolved_issues=unresolved,
                        ),
                    )
                )
        else:
            args = _tool_args(ai, "complete_step") or {"summary": cut(thought.strip(), 500)}
            result, summary, findings, unresolved = _completion_args(step_id or "", args)
            events += _step_completed(run, ctx, step_id or "", result, summary, findings, unresolved)
        run.commit([*pre, built, *events])
        return run.update()

    return _guarded("executor", env, executor)


def make_reviewer_node(model: BaseChatModel, env: NodeEnv, renderer: Renderer | None = None) -> Node:
    """The reviewer: ``review.completed``; approve ends the task (``task.completed``), revise
    sends it to the planner (at most ``MAX_REVIEW_ROUNDS`` times, then the task fails)."""
    rend = renderer or ReviewerRenderer()

    def reviewer(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "reviewer", config)
        if run.replayed:
            return run.update()
        pre, ctx = _prologue(run)
        built, ai = _model_call(run, model, rend, ctx, [SUBMIT_REVIEW], None)
        # no verdict is no approval: a reviewer that answers in prose sends the work back
        args = _tool_args(ai, "submit_review") or {
            "verdict": "revise",
            "summary": reply_text(ai)[:500],
            "issues": ["the reviewer gave no verdict (no submit_review call)"],
        }
        verdict = "revise" if args.get("verdict") == "revise" else "approve"
        review = ReviewCompleted(
            verdict=verdict, summary=str(args.get("summary") or ""), issues=[str(i) for i in args.get("issues") or []]
        )
        events = [run.make("review.completed", review)]
        rounds = ctx.events.counts.get("review.completed", 0) + 1
        if verdict == "approve":
            events.append(run.make("task.completed", TaskCompleted(status="completed", summary=review.summary)))
        elif rounds >= MAX_REVIEW_ROUNDS:
            events.append(
                run.make(
                    "task.completed",
                    TaskCompleted(
                        status="failed",
                        summary=f"review asked for revisions {rounds} times: {'; '.join(review.issues)}",
                    ),
                )
            )
        run.commit([*pre, built, *events])
        return run.update()

    return _guarded("reviewer", env, reviewer)


def make_recovery_node(model: BaseChatModel, env: NodeEnv, renderer: Renderer | None = None) -> Node:
    """Recovery: records each new failure in ``error_history`` (``error.occurred``), then
    ``recovery.decided``: retry (back to the executor), replan (planner) or stop (task failed).
    After ``MAX_STEP_ERRORS`` open errors in one step (failures no success of the step has
    resolved since) it stops whatever the model says."""
    rend = renderer or RecoveryRenderer()

    def recovery(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "recovery", config)
        if run.replayed:
            return run.update()
        pre, ctx = _prologue(run)
        n = max(ctx.errors.occurred_count, len(ctx.errors.error_history))  # the history is a window
        failures: list[ErrorOccurred] = []
        for rec in ctx.unrecorded_tool_errors():
            n += 1
            lines = rec.result_summary.strip().splitlines()
            at = next((i for i, ln in enumerate(lines) if "rror" in ln or "Traceback" in ln), 0)
            msg = " ".join(ln.strip() for ln in lines[at : at + 3] if ln.strip()) if lines else ""
            failures.append(
                ErrorOccurred(
                    error_id=f"err-{n}",
                    source=f"tool:{rec.tool}",
                    message=msg.strip()[:300],
                    step_id=rec.step_id,
                    call_id=rec.id,
                )
            )
        failed = ctx.failed_step()
        if failed is not None:
            n += 1
            failures.append(
                ErrorOccurred(
                    error_id=f"err-{n}",
                    source=f"step:{failed.id}",
                    message=f"step {failed.id} ended {failed.result}: {failed.summary}"[:300],
                    step_id=failed.id,
                )
            )
        for f in failures:
            ev = run.make("error.occurred", f, actor="system")
            pre.append(ev)
            ctx = replay([ev], ctx)
        step_id = ctx.plan.current_step_id or (failed.id if failed is not None else None)
        built, ai = _model_call(run, model, rend, ctx, [DECIDE_RECOVERY], step_id)
        args = _tool_args(ai, "decide_recovery") or {"decision": "retry", "reason": reply_text(ai)[:300]}
        decision = args.get("decision") if args.get("decision") in ("retry", "replan", "stop") else "retry"
        reason = str(args.get("reason") or "")
        # open errors of the step: failures since its last success (a resolved error left the
        # state's window, or a later call of the step succeeded: the step is moving)
        settled = {e.id for e in ctx.errors.resolved_errors}
        step_errors = sum(1 for e in ctx.errors.error_history if e.step_id == step_id and e.id not in settled)
        if decision == "retry" and step_errors >= MAX_STEP_ERRORS:
            decision, reason = "stop", f"{step_errors} errors in step {step_id}; {reason}"
        last = ctx.errors.last_error
        if last is not None and last.message.startswith(REJECTED_AGAIN):
            repeats = sum(1 for e in ctx.errors.error_history if e.message.startswith(REJECTED_AGAIN))
            if repeats >= MAX_REJECTED_REPEATS:
                decision, reason = "stop", f"the agent repeated a call the user rejected {repeats} times; {reason}"
            elif decision == "retry":
                decision, reason = "replan", f"retrying would repeat a call the user rejected; {reason}"
        events = [
            run.make(
                "recovery.decided",
                RecoveryDecided(error_id=last.id if last else None, decision=decision, reason=reason),
            )
        ]
        if decision == "stop":
            events.append(run.make("task.completed", TaskCompleted(status="failed", summary=reason)))
        run.commit([*pre, built, *events])
        return run.update()

    return _guarded("recovery", env, recovery)
