"""What every role renderer shares: the core layer, quoting of external content and agent claims, assembly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from context import ContextBlock, TaskContext, build_context, make_block
from context.blocks import BlockKind, Layer, Priority, Trust
from context.events import TranscriptReset
from context.freshness import change_text, short_sha, stale_line
from context.memory import LoadedMemory
from context.text import quote_name

from ..runtime import NodeEnv, Rendered
from .quoting import quote_agent, quote_external, quote_plan, tool_label

__all__ = [
    "STABLE_SLOTS",
    "Renderer",
    "assemble",
    "block",
    "constraints_text",
    "core_blocks",
    "criteria_text",
    "error_block",
    "finding_blocks",
    "governed_claims",
    "loaded_memory_blocks",
    "loaded_memory_text",
    "memory_block",
    "permissions_text",
    "plan_text",
    "plan_trust",
    "stale_text",
]


#: The slots that end a stable part of the layout (the core layer; the executor's checkpoint):
#: a provider that caches up to explicit breakpoints gets one after each (``Rendered.breakpoints``).
STABLE_SLOTS = ("msg:core", "msg:checkpoint")


class Renderer(Protocol):
    """Projects a TaskContext into one role's prompt (``role``: the role's name).

    Any object with a ``role`` and this ``render`` is a renderer; ``make_*_node(..., renderer=...)``
    takes one.
    """

    role: str

    def render(self, ctx: TaskContext, env: NodeEnv, tools: Sequence[dict[str, Any]]) -> Rendered:
        """Render the role's prompt of ``ctx``.

        Args:
            ctx: The state.
            env: The node environment (budget, counter, stores).
            tools: The tool schemas the call offers.

        Returns:
            The messages, tools and manifest.
        """
        ...


def permissions_text(ctx: TaskContext) -> str:
    """The permissions block: allowed, denied and approval-gated tools, and the file scopes.

    Args:
        ctx: The state.

    Returns:
        The block's text.
    """
    p = ctx.permissions

    def show(xs: list[str]) -> str:
        return ", ".join(xs) if xs else "(none)"

    return (
        "## Permissions (enforced by the tool node)\n"
        f"allowed tools: {show(p.allowed_tools) if p.allowed_tools else '(all offered tools)'}\n"
        f"denied tools: {show(p.denied_tools)}\n"
        f"require approval: {show(p.requires_approval)}\n"
        f"file scopes: {show(p.file_scopes) if p.file_scopes else '(whole workspace)'}"
    )


def governed_claims(ctx: TaskContext) -> list[str]:
    """The blocks whose claims about permissions the trusted permissions block overrides.

    The user's request (``user_claim``), whenever the task has any permission rule: the builder
    records it in the manifest (``superseded_by``); the request itself stays verbatim.

    Args:
        ctx: The state.

    Returns:
        The block ids (``["core.request"]`` or none).
    """
    p = ctx.permissions
    return ["core.request"] if (p.allowed_tools or p.denied_tools or p.requires_approval or p.file_scopes) else []


def plan_text(ctx: TaskContext) -> str:
    """The plan block: version and status (the app's), then the steps quoted as the planner's claim.

    Args:
        ctx: The state.

    Returns:
        The block's text; its trust is :func:`plan_trust`.
    """
    if not ctx.plan.steps:
        return "## Plan\n(no plan yet)"
    return f"## Plan v{ctx.plan.version} ({ctx.plan.status}), the steps as the planner wrote them:\n" + quote_plan(
        ctx.plan.lines(), ctx.plan.version
    )


def plan_trust(ctx: TaskContext) -> Trust:
    """The plan block's trust: ``agent_claim`` once the plan has steps (the planner's words).

    Args:
        ctx: The state.

    Returns:
        ``agent_claim``, or ``trusted_app`` before there is a plan.
    """
    return "agent_claim" if ctx.plan.steps else "trusted_app"


def block(
    env: NodeEnv,
    id: str,
    text: str,
    *,
    kind: BlockKind,
    layer: Layer,
    source: str,
    priority: Priority = "normal",
    trust: Trust = "trusted_app",
    observed_at: str = "",
    relevance: float = 0.5,
    slot: str = "msg:core",
    compressed: bool = False,
    tokens: int | None = None,
) -> ContextBlock:
    """A context block of a prompt, counted with the env's counter.

    Args:
        env: The node environment (its counter).
        id: The block's id (``core.request``, ``tool.<call id>``...).
        text: Its text.
        kind: What it holds (``state``, ``tool_result``...).
        layer: Its layer (``core``, ``step``, ``recent``...).
        source: Where it comes from, for the manifest.
        priority: ``required`` (never dropped), ``high``, ``normal`` or ``low``.
        trust: Its provenance (``trusted_app``... ``external_content``).
        observed_at: When its content was observed (ISO timestamp), or ``""``.
        relevance: 0..1, breaking ties between blocks of one priority.
        slot: The layout slot it goes into (``msg:core``...).
        compressed: Whether its text is compressed.
        tokens: Its tokens when known (e.g. of its messages); None: counted from ``text``.

    Returns:
        The block.
    """
    count = env.count_tokens if tokens is None else (lambda _text: tokens)
    return make_block(
        id,
        text,
        kind=kind,
        layer=layer,
        source=source,
        count_tokens=count,
        priority=priority,
        trust=trust,
        observed_at=observed_at,
        relevance=relevance,
        slot=slot,
        compressed=compressed,
    )


def constraints_text(ctx: TaskContext) -> str:
    """The hard-constraints block: every constraint verbatim, one ``- `` line each.

    The caller's first, then those found in the request's wording; those the planner added are
    quoted as its claim. A last line says which came from where when not all are the caller's:
    such a list is never presented as complete (the original request's own words govern).

    Args:
        ctx: The state.

    Returns:
        The block's text.
    """
    ident = ctx.identity
    head = "## Hard constraints (verbatim, never break them)"
    if not ident.constraints:
        return f"{head}\n- (none listed; every prohibition in the original request still holds)"
    planner = [c for c in ident.constraints if ident.constraint_sources.get(c) == "planner"]
    lines = [head, *(f"- {c}" for c in ident.constraints if c not in planner)]
    if planner:  # the planner's words: its claim, quoted (the block is then agent_claim)
        lines.append(
            "Added by the planner:\n" + quote_agent("\n".join(f"- {c}" for c in planner), source="planner constraints")
        )
    srcs = [ident.constraint_sources.get(c, "caller") for c in ident.constraints]
    if any(s != "caller" for s in srcs):
        n = {k: srcs.count(k) for k in ("caller", "request", "planner")}
        parts = [f"{n['caller']} given by the caller"] if n["caller"] else []
        if n["request"]:
            parts.append(f"{n['request']} found in the request's wording")
        if n["planner"]:
            parts.append(f"{n['planner']} added by the planner")
        lines.append(f"({'; '.join(parts)}: possibly incomplete, every prohibition in the original request holds)")
    return "\n".join(lines)


def criteria_text(ctx: TaskContext) -> tuple[str, Trust]:
    """The success-criteria block and its trust.

    The caller's criteria as ``- `` lines, then those the planner added quoted as its claim (the
    block is then ``agent_claim``).

    Args:
        ctx: The state.

    Returns:
        ``(text, trust)``.
    """
    ident = ctx.identity
    added = ident.planner_criteria()
    given = [c for c in ident.success_criteria if c not in added]
    lines = ["## Success criteria", *(f"- {c}" for c in given)]
    if not given and not added:
        lines.append("- (none given)")
    if not added:
        return "\n".join(lines), "trusted_app"
    claim = quote_agent("\n".join(f"- {c}" for c in added), source="planner criteria")
    lines.append(f"Added by the planner:\n{claim}")
    return "\n".join(lines), "agent_claim"


def core_blocks(
    ctx: TaskContext, env: NodeEnv, *, criteria: bool = True, constraints: bool = True, permissions: bool = True
) -> list[ContextBlock]:
    """The core layer, in every call verbatim: request, success criteria, hard constraints, permissions.

    All ``required`` (the builder never drops them) in slot ``msg:core``. The permissions block
    supersedes what the request claims about permissions (:func:`governed_claims`).

    Args:
        ctx: The state.
        env: The node environment.
        criteria: Include the success criteria.
        constraints: Include the hard constraints.
        permissions: Include the permissions.

    Returns:
        The blocks.
    """
    ident = ctx.identity
    out = [
        block(
            env,
            "core.request",
            f"## Original request (verbatim)\n{ident.original_request}",
            kind="user",
            layer="core",
            source="task.created",
            priority="required",
            trust="user_claim",
        ),
    ]
    if criteria:
        text, trust = criteria_text(ctx)
        out.append(
            block(
                env,
                "core.criteria",
                text,
                kind="state",
                layer="core",
                source="task.created+plan",
                priority="required",
                trust=trust,
            )
        )
    if constraints:
        text = constraints_text(ctx)
        out.append(
            block(
                env,
                "core.constraints",
                text,
                kind="user",
                layer="core",
                source="task.created",
                priority="required",
                trust="agent_claim" if '<external_content source="agent:' in text else "user_claim",
            )
        )
    if permissions:
        out.append(
            block(
                env,
                "core.permissions",
                permissions_text(ctx),
                kind="instruction",
                layer="core",
                source="task.created",
                priority="required",
            ).model_copy(update={"supersedes": governed_claims(ctx)})
        )
    return out + loaded_memory_blocks(ctx, env)


def loaded_memory_text(m: LoadedMemory) -> str:
    """One loaded memory as the prompt shows it: what it is, who confirmed it, the text, staleness.

    Args:
        m: The memory loaded (``memory.loaded``).

    Returns:
        The text.
    """
    where = f"in task {m.task_id}" if m.task_id else "outside a task"
    state = " (STALE)" if m.stale else ""
    label = {"fact": "fact", "preference": "preference", "convention": "convention"}[m.kind]
    lines = [
        f"## Remembered {m.namespace} {label}{state}: memory {m.key}, confirmed by {m.confirmed_by} {where} "
        f"at {m.confirmed_at}",
        m.text,
    ]
    for f in m.stale:
        now = f"sha256 {short_sha(f.current)} now" if f.current else "it is gone"
        lines.append(
            f"STALE: {quote_name(f.path)} changed since this was confirmed (sha256 {short_sha(f.recorded)} then, {now}); "
            "do not rely on it before re-reading the file."
        )
    return "\n".join(lines)


def loaded_memory_blocks(ctx: TaskContext, env: NodeEnv, *, slot: str = "msg:core") -> list[ContextBlock]:
    """The durable memories the task loaded, one trusted block each (``memory.<key>``).

    With provenance and, when a file they rest on changed, marked stale. A newer memory of the same
    subject supersedes the older one: the older block is dropped and the manifest says by which.

    Args:
        ctx: The state.
        env: The node environment.
        slot: The layout slot.

    Returns:
        The blocks.
    """
    out = []
    for m in ctx.memory.loaded:
        b = block(
            env,
            f"memory.{m.key}",
            loaded_memory_text(m),
            kind="memory",
            layer="core",
            source=f"memory.loaded:{m.namespace}",
            priority="high",
            observed_at=m.confirmed_at,
            relevance=min(1.0, max(0.0, m.score)),
            slot=slot,
        )
        older = [f"memory.{o.key}" for o in ctx.memory.loaded if o.superseded_by == m.key]
        out.append(b.model_copy(update={"supersedes": older}) if older else b)
    return out


def memory_block(ctx: TaskContext, env: NodeEnv, *, slot: str = "msg:core") -> ContextBlock | None:
    """The confirmed memory of the task (facts, preferences, conventions), trusted.

    A confirmed fact governs what the request only claims, so the block supersedes
    ``core.request`` in the manifest; the request stays verbatim. Working memory is not shown.

    Args:
        ctx: The state.
        env: The node environment.
        slot: The layout slot.

    Returns:
        The block, or None when nothing is confirmed.
    """
    m = ctx.memory
    if not (m.durable_facts or m.user_preferences or m.project_conventions):
        return None
    lines = ["## Confirmed facts (recorded by the app; they override what the request claims)"]
    lines += [f"- fact: {f}" for f in m.durable_facts]
    lines += [f"- user preference: {f}" for f in m.user_preferences]
    lines += [f"- project convention: {f}" for f in m.project_conventions]
    b = block(
        env,
        "memory.durable",
        "\n".join(lines),
        kind="memory",
        layer="core",
        source="memory.confirmed",
        priority="high",
        slot=slot,
    )
    return b.model_copy(update={"supersedes": ["core.request"]}) if m.durable_facts else b


def error_block(ctx: TaskContext, env: NodeEnv, *, slot: str) -> ContextBlock | None:
    """The task's unresolved error, quoted as external content (its message is cut from tool output).

    Args:
        ctx: The state.
        env: The node environment.
        slot: The layout slot.

    Returns:
        The block, or None when no error is open.
    """
    e = ctx.errors.last_error
    if e is None:
        return None
    text = f"Unresolved error {e.id} ({tool_label(e.source)}), message quoted from the tool output:\n" + quote_external(
        e.message, source=e.source or "error"
    )
    return block(
        env,
        "state.last_error",
        text,
        kind="tool_result",
        layer="recent",
        source=e.source or "error",
        priority="high",
        trust="external_content",
        observed_at=e.timestamp,
        slot=slot,
    )


def stale_text(ctx: TaskContext) -> str | None:
    """The stale facts of the task (``fact.stale``), one line each, and the files to re-read.

    Args:
        ctx: The state.

    Returns:
        The text, or None when no fact is stale.
    """
    marks = ctx.evidence.stale_facts
    if not marks:
        return None
    kinds = {"finding": "finding", "step": "step summary", "evidence": "output of call"}
    lines = ["## Stale facts (the workspace changed since they were drawn: never treat them as current)"]
    for m in marks:
        fid = m.fact_id.removeprefix("step:")
        lines.append(f"- {kinds[m.fact_kind]} {fid}: {change_text(m.path, m.cause, m.old_sha, m.new_sha)}")
    again = ctx.to_reread()
    if again:
        lines.append("Re-read before relying on them: " + ", ".join(map(quote_name, again)))
    return "\n".join(lines)


def finding_blocks(
    env: NodeEnv, findings: Sequence[Any], refs: Any, ctx: TaskContext | None = None
) -> list[ContextBlock]:
    """One ``finding.<id>`` block per finding, quoted as the agent's claim, newer ones more relevant.

    Each supersedes the findings it replaces. With ``ctx``, a stale finding's head line says so.

    Args:
        env: The node environment.
        findings: The findings.
        refs: ``refs(finding) -> str``: the head line's evidence part, which differs by role.
        ctx: The state, for staleness; None: not shown.

    Returns:
        The blocks.
    """
    n = len(findings)

    def head(f: Any) -> str:
        stale = stale_line(ctx, f.id) if ctx is not None else ""
        return f" [{stale}]" if stale else ""

    return [
        block(
            env,
            f"finding.{f.id}",
            f"- finding {f.id} {refs(f)}{head(f)}:\n" + quote_agent(f.statement, source=f"complete_step {f.id}"),
            kind="state",
            layer="recent",
            source="step.completed",
            priority="normal",
            trust=f.provenance,
            relevance=(i + 1) / n,
            slot="msg:state",
        ).model_copy(update={"supersedes": [f"finding.{x}" for x in f.supersedes]})
        for i, f in enumerate(findings)
    ]


def assemble(
    *,
    role: str,
    env: NodeEnv,
    system: str,
    candidates: list[ContextBlock],
    layout: list[str],
    tools: Sequence[dict[str, Any]],
    extra_messages: dict[str, list[BaseMessage]] | None = None,
    transcript_reset: bool | TranscriptReset = False,
    keep_last: int = 0,
) -> Rendered:
    """Choose the blocks within the budget and lay them out as chat messages.

    Args:
        role: The role (named in the manifest).
        env: The node environment (budget, reserve, counter).
        system: The role's instruction text: the system message, always first.
        candidates: The candidate blocks.
        layout: Message slots in order: ``"msg:<name>"`` joins the chosen blocks of that slot into
            one human message; ``"seq:<name>"`` sends each chosen block's ``extra_messages``.
        tools: The tool schemas.
        extra_messages: Block id -> its messages, for ``seq`` slots (e.g. transcript entries as an
            AI and a tool message).
        transcript_reset: The restart this prompt makes (executor), or False.
        keep_last: Calls kept across the restart.

    Returns:
        The rendered prompt.

    Raises:
        BudgetError: The required blocks do not fit the budget.
    """
    tools = list(tools)
    sys_msg = SystemMessage(content=system)
    # Overhead: tool schemas, the system message, the framing of each "msg" slot's message.
    # (a "seq" block's tokens are counted over its messages, framing included; a "msg" slot is
    # one message whose framing is not in its blocks' text tokens)
    overhead = env.count_messages([sys_msg], tools or None) + 4 * len(layout)
    result = build_context(
        candidates, budget=env.budget, reserve_for_output=env.reserve_for_output, overhead_tokens=overhead, role=role
    )
    chosen = {b.id: b for b in result.blocks}
    messages: list[BaseMessage] = [sys_msg]
    breakpoints: list[int] = []
    extra = extra_messages or {}
    for slot in layout:
        kind, name = slot.split(":", 1)
        members = [b for b in candidates if b.id in chosen and b.slot == slot]
        if not members:
            continue
        if kind == "msg":
            messages.append(HumanMessage(content="\n\n".join(b.text for b in members)))
            if slot in STABLE_SLOTS:
                breakpoints.append(len(messages) - 1)
        else:
            for b in members:
                messages.extend(extra[b.id])
    prompt_tokens = env.count_messages(messages, tools or None)
    return Rendered(
        messages=messages,
        tools=tools,
        manifest=result.manifest,
        blocks=result.blocks,
        prompt_tokens=prompt_tokens,
        transcript_reset=transcript_reset,
        keep_last=keep_last,
        breakpoints=breakpoints,
    )
