"""How the tool node runs a call and records what happens: results, permission markers, denials."""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForToolRun

from context import COMMAND_LIMIT, TaskContext, compress_tool_result
from context.events import ErrorResolved, Event, FactStale, FileModified, PermissionEvent, ToolResultReceived
from context.freshness import find_stale
from context.literals import RiskLevel
from context.models import ToolCallRecord, arguments_dict
from context.text import clean, from_bytes

from ..runtime import NodeEnv, NodeRun
from .builtin import READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA, read_artifact, search_history
from .progress import progress_scope, report_progress
from .protocol import ToolExecutor, ToolOutcome, parameters_of, scoped_execute, secrets_of
from .tool_runs import end_tool_run, start_tool_run

__all__ = ["CallRecorder", "canonical_arguments"]


def canonical_arguments(args: dict[str, Any]) -> str:
    """A call's arguments as the permission events record them.

    Args:
        args: The arguments.

    Returns:
        Sorted-key JSON, non-ASCII characters as themselves.
    """
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


class CallRecorder:
    """The tool node's steps that run a call and record what happens, each in its own transaction.

    :class:`~nodes.tools.TaskToolNode` adds the decisions (permissions, approvals, recovery).

    Args:
        env: The node environment (event log, artifact store).
        tools: The task's :class:`~nodes.tools.ToolExecutor`.
    """

    def __init__(self, env: NodeEnv, tools: ToolExecutor):
        self.env = env
        self.tools = tools
        #: the executor's ``strict_resolution`` (see :meth:`resolutions`)
        self.strict = bool(getattr(tools, "strict_resolution", False))

    def execute(self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], note: str = "") -> None:
        """Run the call now and :meth:`record` its outcome.

        ``read_artifact`` and ``search_history`` are answered from the task's own stores, every other
        tool by the executor (with the task's file scopes when it takes them).

        Args:
            run: This node run.
            rec: The call.
            args: Its arguments.
            note: A note that heads the result's summary (``""``: none).
        """
        traced = start_tool_run(run, rec, args)
        if rec.tool == "read_artifact":
            out = read_artifact(self.env, args)
        elif rec.tool == "search_history":
            out = search_history(self.env, run.task_id, args)
        else:
            with progress_scope():  # the stream writer, looked up once for the call and its output lines
                report_progress("tool.started", rec.id, rec.tool)
                scopes, names = list(run.ctx.permissions.file_scopes), secrets_of(run.ctx)
                out = scoped_execute(self.tools, rec.id, rec.tool, args, scopes, names)
                report_progress("tool.finished", rec.id, rec.tool, status=out.status, output_chars=len(out.output))
        self.record(run, rec, args, out, note, traced=traced)

    def record(
        self,
        run: NodeRun,
        rec: ToolCallRecord,
        args: dict[str, Any],
        out: ToolOutcome,
        note: str = "",
        *,
        traced: CallbackManagerForToolRun | None = None,
    ) -> None:
        """Commit a call's outcome in one batch.

        The batch: ``tool.result.received`` (the raw output in the artifact store, which masks secrets;
        the summary compressed from the stored bytes, headed ``[note]``), one ``file.modified`` per file
        the call changed, the ``error.resolved`` events of :meth:`resolutions` on success, and with
        freshness the ``fact.stale`` events of :meth:`stale_events`. An output that cannot be stored
        or compressed is an ``error`` result naming the exception, so the call is never run again.
        Once committed, the call's tool run (:mod:`nodes.tools.tool_runs`) ends with the result.

        Args:
            run: This node run.
            rec: The call.
            args: Its arguments.
            out: What the tool returned.
            note: A note that heads the summary (``""``: none).
            traced: The call's tool run, started when the call started (None: start it now).
        """
        traced = traced or start_tool_run(run, rec, args)
        try:
            # any str (context.text.to_bytes), or the bytes a tool returned as they are; secrets masked
            ref = self.env.artifacts.put(out.raw if out.raw is not None else out.output)
            stored = clean(from_bytes(self.env.artifacts.get(ref)))  # prompts get U+FFFD for a lone surrogate
            comp = compress_tool_result(stored, out.kind, ref, path=out.path, tool=rec.tool)
        except Exception as exc:  # recorded as an error result: never re-run on each resume
            text = clean(f"error: the output of {rec.tool} could not be recorded ({type(exc).__name__}: {exc})")
            out = ToolOutcome("error", text, modified=out.modified, modified_all=out.modified_all)
            ref, comp = None, compress_tool_result(text, "command", "")
        summary = f"[{note}]\n{comp.text}" if note else comp.text
        self.store_arguments(rec)
        reads, written = dict(out.reads), dict(out.written)
        before = run.ctx
        batch = [
            run.make(
                "tool.result.received",
                ToolResultReceived(
                    call_id=rec.id,
                    status="ok" if out.status == "ok" else "error",
                    result_summary=summary,
                    raw_ref=ref,
                    raw_chars=len(out.output),
                    compressed=comp.compressed,
                    reads=reads,
                    head=out.head,
                ),
                actor="tool",
            )
        ]
        modified = list(out.modified_all or ((out.modified,) if out.modified else ()))
        if self.env.freshness and self.tools.has_side_effects(rec.tool):
            written.update(self.changed_by_command(before, modified, written))
        for path in [*modified, *(p for p in written if p not in modified)]:
            batch.append(
                run.make(
                    "file.modified",
                    FileModified(path=path, call_id=rec.id, raw_ref=ref, sha256=written.get(path, "")),
                    actor="tool",
                )
            )
        if out.status == "ok":
            batch += self.resolutions(run, rec, args)
        if self.env.freshness:
            batch += self.stale_events(run, before, reads, written, out.head)
        run.commit(batch)
        end_tool_run(traced, "ok" if out.status == "ok" else "error", summary, ref, len(out.output), comp.compressed)

    def changed_by_command(self, ctx: TaskContext, modified: list[str], written: dict[str, str]) -> dict[str, str]:
        """The files of the task's world a call with side effects changed without saying so.

        From the executor's ``fingerprint``. Bytes already noticed as someone else's before the call
        (a ``fact.stale`` with that new sha: a hand edit found on resume or after an approval) are not
        the call's doing.

        Args:
            ctx: The state before the call.
            modified: The files the call says it changed.
            written: The files it wrote, path -> sha256.

        Returns:
            ``{path: sha256 now}`` of the other changed files.
        """
        fp = getattr(self.tools, "fingerprint", None)
        paths = [p for p in ctx.evidence.world if p not in written and p not in modified]
        if fp is None or not paths:
            return {}
        now, _ = fp(paths)
        noticed = {(s.path, s.new_sha) for s in ctx.evidence.stale_facts}
        return {p: sha for p, sha in now.items() if sha != ctx.evidence.world.get(p) and (p, sha) not in noticed}

    def stale_events(
        self, run: NodeRun, ctx: TaskContext, reads: dict[str, str], written: dict[str, str], head: str | None
    ) -> list[Event]:
        """``fact.stale`` for the facts a call's writes, reads of other bytes or HEAD make stale.

        Args:
            run: This node run.
            ctx: The state before the call.
            reads: The files the call read, path -> sha256 (cause ``reread``).
            written: The files it wrote, path -> sha256 (cause ``write``).
            head: The HEAD the call saw, or None.

        Returns:
            The events, not yet committed.
        """
        out = find_stale(ctx, written, "write", head=head)
        out += find_stale(ctx, {p: s for p, s in reads.items() if p not in written}, "reread")
        return [run.make("fact.stale", FactStale.model_validate(p), actor="system") for p in out]

    def store_arguments(self, rec: ToolCallRecord) -> None:
        """Store arguments over ``COMMAND_LIMIT`` chars in the artifact store.

        Once the call has run, transcripts show such arguments compressed, with this ref
        (:func:`context.compression.compress_arguments`).

        Args:
            rec: The call.
        """
        if len(rec.arguments) > COMMAND_LIMIT:
            self.env.artifacts.put(rec.arguments)

    def resolutions(self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any]) -> list[Event]:
        """The ``error.resolved`` events a success of ``rec`` earns, not yet committed.

        Every open error of its plan step; with the executor's ``strict_resolution`` instead every
        open error of an earlier call of the same tool with the same arguments (or of no known call).

        Args:
            run: This node run.
            rec: The call that succeeded.
            args: Its arguments.

        Returns:
            The events.
        """
        done = {e.id for e in run.ctx.errors.resolved_errors}
        calls = {r.id: r for r in run.ctx.evidence.recent_tool_calls}
        out = []
        for err in run.ctx.errors.error_history:
            if err.id in done:
                continue
            if self.strict:
                if err.source != f"tool:{rec.tool}":
                    continue
                prev = calls.get(err.call_id or "")
                if prev is not None and canonical_arguments(arguments_dict(prev.arguments)) != canonical_arguments(
                    args
                ):
                    continue
            elif err.step_id != rec.step_id:
                continue
            out.append(
                run.make(
                    "error.resolved",
                    ErrorResolved(error_id=err.id, resolution=f"later call {rec.id} ({rec.tool}) succeeded"),
                    actor="system",
                )
            )
        return out

    def waited(self, run: NodeRun) -> dict[str, str]:
        """Fingerprint the workspace after a wait for an answer, and commit what changed.

        The ``fact.stale`` events (cause ``approval``) are committed before the answer is acted on;
        idempotent, so a re-run of the node records nothing twice.

        Args:
            run: This node run.

        Returns:
            The changed files, path -> sha256 now.
        """
        stale, changed = run.fingerprint_events("approval")
        if stale:
            run.commit(stale)
        return changed

    def deny(
        self,
        run: NodeRun,
        rec: ToolCallRecord,
        args: dict[str, Any],
        reason: str,
        summary: str,
        *,
        actor: str = "system",
        status: Literal["denied", "error"] = "denied",
        risk: RiskLevel = "high",
    ) -> None:
        """Commit ``permission.denied`` and the call's result in one batch: the call is never run.

        Args:
            run: This node run.
            rec: The call.
            args: The arguments denied.
            reason: Why (the ``permission.denied`` reason).
            summary: The result the executor reads.
            actor: Who denies: ``system`` (the policy) or ``user``.
            status: The result's status: ``denied``, or ``error`` for a call rejected before.
            risk: The call's risk level.
        """
        self.store_arguments(rec)
        traced = start_tool_run(run, rec, args)
        run.commit(
            [
                run.make(
                    "permission.denied",
                    PermissionEvent(
                        call_id=rec.id, tool=rec.tool, arguments=canonical_arguments(args), risk=risk, reason=reason
                    ),
                    actor=actor,
                ),
                run.make(
                    "tool.result.received",
                    ToolResultReceived(call_id=rec.id, status=status, result_summary=summary),
                    actor="system",
                ),
            ]
        )
        end_tool_run(traced, status, summary)

    def grant(
        self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], risk: RiskLevel, reason: str, actor: str
    ) -> None:
        """Commit ``permission.granted``: for a call with side effects, the marker that it may have started.

        Args:
            run: This node run.
            rec: The call.
            args: The arguments granted.
            risk: The call's risk level.
            reason: Why it may run.
            actor: ``user`` after an approval, else ``system``.
        """
        run.commit(
            [
                run.make(
                    "permission.granted",
                    PermissionEvent(
                        call_id=rec.id, tool=rec.tool, arguments=canonical_arguments(args), risk=risk, reason=reason
                    ),
                    actor=actor,
                )
            ]
        )

    def parameters(self, tool: str) -> dict[str, Any] | None:
        """The JSON-schema ``parameters`` of ``tool`` among the executor's and the built-in schemas.

        Args:
            tool: The tool's name.

        Returns:
            The schema, or None: no schema, or an executor whose ``schemas()`` raises.
        """
        try:
            schemas = [*self.tools.schemas(), READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA]
        except Exception:  # noqa: BLE001 - an odd executor: the edit is then checked by the policy only
            return None
        return parameters_of(schemas, tool)
