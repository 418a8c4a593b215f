"""The executor prompt's texts: the checkpoint, the transcript entries and the state delta ("## Now")."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from context import TaskContext
from context.compression import compress_arguments
from context.freshness import stale_line
from context.models import ToolCallRecord, arguments_dict
from context.plan_digest import status_digest
from context.text import cut, quote_name
from context.windows import DEGRADED_ARGS_CHARS, NARROW_CHECKPOINT_ITEMS, NARROW_TEXT_CHARS

from .quoting import quote_agent, quote_external, quote_plan, tool_label
from .reuse import reuse_spans

__all__ = ["DIGEST_LINE_CHARS", "MADE_UP_TOOL", "checkpoint_text", "delta_text", "entry_messages", "shown_output"]

#: A digest entry shows at most this many chars of its output's last line (:func:`shown_output`).
DIGEST_LINE_CHARS = 300


def checkpoint_text(ctx: TaskContext, *, narrow: bool = False) -> str | None:
    """The checkpoint block: the working state materialised at the last transcript restart.

    The plan as the planner wrote it, what was done before the transcript (the last step's
    summary, the calls that left it) and the findings, each quoted as the agent's claim.

    Args:
        ctx: The state.
        narrow: The narrowed form (a degrade step): the plan as one line of counts, the
            summary cut to ``NARROW_TEXT_CHARS`` chars, the newest ``NARROW_CHECKPOINT_ITEMS``
            left calls and findings (the rest stay in the event log).

    Returns:
        The text, or None before the first restart.
    """
    cp = ctx.evidence.transcript_checkpoint
    if cp is None:
        return None
    if narrow:
        keep = NARROW_CHECKPOINT_ITEMS
        cp = cp.model_copy(
            update={
                "step_summary": cut(cp.step_summary, NARROW_TEXT_CHARS),
                "completed_summaries": cp.completed_summaries[-keep:],
                "findings": cp.findings[-keep:],
            }
        )
        plan = f"## Working state at the last checkpoint (narrowed; plan v{cp.plan_version}): " + status_digest(
            ctx.plan.steps, ctx.plan.done_folded, ctx.plan.current_step_id
        )
        lines = [plan]
    else:
        lines = [
            f"## Working state at the last checkpoint (materialised from the event log; plan v{cp.plan_version}), "
            "the steps as the planner wrote them:",
            quote_plan(cp.plan_lines, cp.plan_version),
        ]
    if cp.step_summary or cp.completed_summaries:
        lines.append("Done before this transcript:")
        if cp.step_summary:  # the executor's summary: its claim, quoted
            lines.append("- last step:\n" + quote_agent(cp.step_summary, source="complete_step"))
        if cp.completed_summaries:  # the calls that left the transcript: their arguments are the executor's
            calls = "\n".join(cp.completed_summaries)
            lines.append("- calls:\n" + quote_agent(calls, source="executor"))
    if cp.findings:
        lines.append("Findings (the executor's claims):")
        lines += [
            f"- {f.id} [{', '.join(f.evidence_refs) or 'no refs'}]"
            + (f" [{stale}]" if (stale := stale_line(ctx, f.id)) else "")
            + ":\n"
            + quote_agent(f.statement, source=f"complete_step {f.id}")
            for f in cp.findings
        ]
    lines.append(cp.omitted_summary)
    return "\n".join(lines)


#: The name a transcript's tool call carries when the model's was not a tool name (:func:`tool_label`).
MADE_UP_TOOL = "made_up_tool"


def _call_name(tool: str) -> str:
    return tool if tool_label(tool) == tool else MADE_UP_TOOL


def entry_messages(rec: ToolCallRecord, body: str, *, degraded: bool = False) -> list[BaseMessage]:
    """One call as its AI tool-call message and its tool message, never one without the other.

    A call that has run shows its arguments compressed
    (:func:`context.compression.compress_arguments`: each long string as head + tail + size + the
    ref of the full arguments). The ref is given only where the output is not shown whole.

    Args:
        rec: The call.
        body: Its output as shown (:func:`shown_output`), quoted as external content.
        degraded: The call is shown as its digest (a degrade step): arguments over
            ``DEGRADED_ARGS_CHARS`` chars are cut to head and tail around their ref.

    Returns:
        ``[AIMessage, ToolMessage]``.
    """
    # once the call has run, long arguments are compressed like outputs (head, tail, size, ref)
    if rec.status == "pending":
        args = rec.arguments
    elif degraded:
        half = DEGRADED_ARGS_CHARS // 2 - 100  # room for the note with the ref
        args = compress_arguments(rec.arguments, limit=DEGRADED_ARGS_CHARS, head=half, tail=half)[0]
    else:
        args = compress_arguments(rec.arguments)[0]
    ai = AIMessage(
        # the executor's own earlier words, written after reading tool output: its claim, quoted (the
        # message's tool call names the call: no id in the source, fewer tokens)
        content=quote_agent(rec.thought, source="executor") if rec.thought else "",
        # a name that is not a tool name (a model made it up) never goes back as one: providers
        # refuse it, and its text would reach the prompt unquoted
        tool_calls=[{"name": _call_name(rec.tool), "args": arguments_dict(args), "id": rec.id, "type": "tool_call"}],
    )
    # the tool message answers its call (tool_call_id, and the tool is named there); the ref is
    # given once (a compressed body already ends with it), and only where the output is not
    # shown whole (compressed, a digest, a pointer): a whole output's ref earns nothing here
    # (about 45 tokens a call; the checkpoint names it once the call leaves the transcript)
    whole = not rec.compressed and body == rec.result_summary and rec.status != "pending"
    ref = None if whole or (rec.raw_ref and rec.raw_ref in body) else rec.raw_ref
    content = quote_external(body, source=None, ref=ref)
    return [
        ai,
        ToolMessage(content=content, tool_call_id=rec.id, status="error" if rec.status == "error" else "success"),
    ]


def shown_output(
    rec: ToolCallRecord, *, digest: bool = False, same_as: str | None = None, earlier: Sequence[tuple[str, str]] = ()
) -> str:
    """The output of one call as its tool message shows it, inside the external-content tags.

    An entry depends only on earlier ones, so the transcript stays append-only.

    Args:
        rec: The call.
        digest: Show a one-line digest (status and at most ``DIGEST_LINE_CHARS`` chars of the
            output's last line).
        same_as: The id of an earlier call with the same artifact ref, shown in full: the output
            is then a pointer to it.
        earlier: ``(call id, output as shown)`` of the entries before it: runs of lines shown there
            become pointers (:func:`~nodes.render.reuse.reuse_spans`).

    Returns:
        The text.
    """
    if rec.status == "pending":
        body = "(no result recorded yet)"
    elif same_as is not None:
        body = (
            f"[identical to the output of call {same_as} above ({len(rec.result_summary)} chars); "
            f"full output: {rec.raw_ref}]"
        )
    elif digest:
        first = rec.result_summary.strip().splitlines()
        body = f"[digest] {rec.status}; {(first[-1] if first else '')[:DIGEST_LINE_CHARS]}"
    else:
        body = reuse_spans(rec.result_summary, earlier)
    if rec.status == "denied":
        body = f"[denied by the tool node] {body}"
    return body


def delta_text(ctx: TaskContext, *, narrow: bool = False) -> str:
    """The state delta ("## Now"): the current step, the plan's progress, the last step, approvals.

    Args:
        ctx: The state.
        narrow: The narrowed form (a degrade step): the plan as one line of counts
            (:func:`~context.plan_digest.status_digest`), each text cut to ``NARROW_TEXT_CHARS``
            chars (the renderer then cuts the whole to ``NARROW_DELTA_TOKENS`` tokens).

    Returns:
        The text.
    """
    if narrow:
        return _narrow_delta(ctx)
    lines = ["## Now"]
    step = ctx.step(ctx.plan.current_step_id)
    cs = ctx.current_step
    if step is not None and cs is not None:
        said = cs.objective or step.title
        if cs.expected_output:
            said += f"\nExpected output: {cs.expected_output}"
        # the planner's words (a re-plan is written after reading findings): its claim, quoted
        lines.append(
            f"Current step {step.id}, as the planner wrote it:\n" + quote_agent(said, source=f"planner {step.id}")
        )
        if cs.allowed_tools:
            lines.append(f"Tools for this step: {', '.join(cs.allowed_tools)}")
        for c in cs.constraints:
            lines.append(f"Step constraint: {c}")
        lines.append(f"Risk: {cs.risk_level}")
    else:
        lines.append("No step is running.")
    if ctx.plan.steps:
        groups = ctx.plan.runs(statuses=("done", "skipped", "pending"))
        folded = []
        if ctx.plan.done_folded:
            ids, _, groups = ctx.plan.folded_head(groups)
            folded = [f"{ids} done"]
        lines.append(
            "Plan: "
            + " · ".join(
                folded
                + [f"{g[0].id} {g[0].status}" if len(g) == 1 else f"{g[0].id}-{g[-1].id} {g[0].status}" for g in groups]
            )
        )
    if ctx.progress.last_step is not None:
        ls = ctx.progress.last_step
        stale = stale_line(ctx, f"step:{ls.id}")
        lines.append(
            f"Last step {ls.id} ({ls.result}){f' [{stale}]' if stale else ''}:\n"
            + quote_agent(ls.summary, source=f"complete_step {ls.id}")
        )
    again = ctx.to_reread()
    if again:
        lines.append(f"Re-read before acting (facts resting on them are stale): {', '.join(map(quote_name, again))}")
    pc = ctx.control.pending_completion
    if pc is not None and pc.not_applied and pc.step_id == ctx.plan.current_step_id:
        lines.append(
            f"Your complete_step sent with {', '.join(pc.after_calls)} was not applied: {pc.not_applied}. "
            "Call complete_step again when the step is done."
        )
    if ctx.control.pending_approval is not None:
        a = ctx.control.pending_approval
        lines.append(
            f"Waiting for approval of {tool_label(a.tool)} ({a.risk} risk): {a.reason}; the call's arguments:\n"
            + quote_agent(a.arguments, source=f"executor {a.call_id}")
        )
    return "\n".join(lines)


def _narrow_delta(ctx: TaskContext) -> str:
    """The narrowed state delta: the step and the last step cut, the plan as its digest."""
    lines = ["## Now (narrowed to fit the budget; the full state is in the event log)"]
    step = ctx.step(ctx.plan.current_step_id)
    cs = ctx.current_step
    if step is not None and cs is not None:
        said = cut(cs.objective or step.title, NARROW_TEXT_CHARS)
        if cs.expected_output:
            said += f"\nExpected output: {cut(cs.expected_output, NARROW_TEXT_CHARS)}"
        lines.append(f"Current step {step.id}:\n" + quote_agent(said, source=f"planner {step.id}"))
        if cs.allowed_tools:
            lines.append(cut(f"Tools for this step: {', '.join(cs.allowed_tools)}", NARROW_TEXT_CHARS))
    else:
        lines.append("No step is running.")
    if ctx.plan.steps or ctx.plan.done_folded:
        lines.append("Plan: " + status_digest(ctx.plan.steps, ctx.plan.done_folded, ctx.plan.current_step_id))
    if ctx.progress.last_step is not None:
        ls = ctx.progress.last_step
        summary = cut(ls.summary, NARROW_TEXT_CHARS)
        lines.append(f"Last step {ls.id} ({ls.result}):\n" + quote_agent(summary, source=f"complete_step {ls.id}"))
    again = ctx.to_reread()
    if again:
        lines.append(cut(f"Re-read before acting: {', '.join(map(quote_name, again))}", NARROW_TEXT_CHARS))
    pc = ctx.control.pending_completion
    if pc is not None and pc.not_applied and pc.step_id == ctx.plan.current_step_id:
        lines.append(cut(f"Your complete_step was not applied: {pc.not_applied}. Call it again.", NARROW_TEXT_CHARS))
    if ctx.control.pending_approval is not None:
        a = ctx.control.pending_approval
        lines.append(
            f"Waiting for approval of {tool_label(a.tool)} ({a.risk} risk): {cut(a.reason, NARROW_TEXT_CHARS)}; "
            "the call's arguments:\n" + quote_agent(cut(a.arguments, NARROW_TEXT_CHARS), source=f"executor {a.call_id}")
        )
    return "\n".join(lines)
