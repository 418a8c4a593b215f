"""The tool node, :class:`TaskToolNode`: runs the calls the executor recorded, with permissions and approvals.

Every step is recorded in the event log as it happens (each in its own transaction), so a crash
keeps what was recorded and a call with side effects is never re-run blindly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.types import interrupt

from context import TaskContext
from context.events import Event, PermissionEvent
from context.freshness import change_text
from context.literals import RiskLevel
from context.models import ToolCallRecord, arguments_dict

from ..permissions import Decision, assess
from ..runtime import NodeEnv, NodeRun
from .approvals import REJECTED_AGAIN, ApprovalQuestions, normalize_answer
from .builtin import BUILTIN_TOOLS
from .parallel import DEFAULT_MAX_PARALLEL, run_at_once
from .protocol import ToolExecutor, check_arguments, run_off_loop, scoped_execute, secrets_of
from .recording import CallRecorder, canonical_arguments
from .tool_runs import start_tool_run
from .toolset import executor_of

__all__ = ["TaskToolNode", "make_tool_node"]


class TaskToolNode(CallRecorder, RunnableCallable):
    """The graph's ``tools`` node: runs every pending call of the state through ``tools``.

    Like LangGraph's prebuilt ``ToolNode`` it runs the calls the model issued, but it reads them
    from the event log and records every step there: permission checks, approvals
    (``interrupt()``), side-effect markers, results. Each ``record``/``deny``/``grant``/``ask``
    commits its events at once, in its own transaction, so a crash keeps what was recorded. One
    instance serves every run: per-run state lives in a :class:`~nodes.runtime.NodeRun` and an
    :class:`~nodes.tools.ApprovalQuestions`. LangGraph runs :meth:`__call__` under ``invoke`` and
    :meth:`acall` under ``ainvoke``.

    Consecutive read-only calls of the pending ones (:meth:`at_once`) run at the same time, up to
    ``max_parallel`` (and the executor's own ``max_parallel``, when it has one), and are recorded in
    call order once all have returned (:meth:`run_read_only`): the event log is the one a run of
    them one by one records. Calls with side effects, calls that need approval and the built-in
    tools run one by one.

    Args:
        env: The node environment (event log, artifact store).
        tools: The task's :class:`~nodes.tools.ToolExecutor`.
        max_parallel: The most read-only calls of one answer running at the same time (1: one by one).

    Raises:
        ValueError: ``max_parallel``, or the executor's ``max_parallel``, is below 1.
    """

    def __init__(self, env: NodeEnv, tools: ToolExecutor, max_parallel: int = DEFAULT_MAX_PARALLEL):
        CallRecorder.__init__(self, env, tools)
        RunnableCallable.__init__(self, self.__call__, self.acall, name="tools", trace=False)
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be at least 1 (got {max_parallel}); 1 runs the calls one by one")
        own = getattr(tools, "max_parallel", None)  # an executor that is not thread-safe says 1
        self.max_parallel = min(max_parallel, int(own)) if own is not None else max_parallel
        if self.max_parallel < 1:
            raise ValueError(
                f"{type(tools).__name__}.max_parallel must be at least 1 (got {own}); 1 runs the calls one by one"
            )

    async def acall(self, state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        """One node run, the async way: :meth:`__call__` in a worker thread, so the event loop never waits.

        An executor's ``aexecute`` is awaited on the run's event loop meanwhile
        (:func:`~nodes.tools.run_off_loop`); the event log is written from the worker thread.

        Args:
            state: The graph state (a TaskContext).
            config: The LangGraph run config.

        Returns:
            The state update.
        """
        return await run_off_loop(self.__call__, state, config)

    def __call__(self, state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        """One node run: records a resume not yet recorded, then handles each pending call in order.

        A ``taskctx resume`` (a ``resume_token`` not yet recorded) is recorded first, ``resume.started``
        in a batch of its own; then the pending calls in order until one waits for the next run:
        a run of two or more read-only calls together (:meth:`run_read_only`; not with
        ``max_parallel`` 1), any other by :meth:`handle`.

        Args:
            state: The graph state (a TaskContext).
            config: The LangGraph run config.

        Returns:
            The state update.
        """
        run = NodeRun(self.env, state, "tools", config)
        resumed = run.resume_events()
        if resumed:  # a `taskctx resume` (token not yet recorded): its own batch, before anything else
            run.commit(resumed)
        q = ApprovalQuestions(run.own)
        pending = [r for r in run.ctx.evidence.recent_tool_calls if r.status == "pending"]
        i = 0
        while i < len(pending):
            batch = self.at_once(run, pending[i:]) if self.max_parallel > 1 else []
            if len(batch) > 1:
                self.run_read_only(run, batch)
                i += len(batch)
                continue
            if not self.handle(run, q, pending[i]):
                break
            i += 1
        return run.update()

    def at_once(self, run: NodeRun, pending: Sequence[ToolCallRecord]) -> list[tuple[ToolCallRecord, dict[str, Any]]]:
        """The leading calls of ``pending`` that may run at the same time, with their arguments.

        A call may when the executor says it has no side effects, the policy allows it without
        approval, it has no ``permission.granted`` marker and it is not a built-in tool (those read
        the task's own stores, which the calls before them write). Such calls change nothing, so
        the policy's decision about each is the one it makes when they run one by one.

        Args:
            run: This node run.
            pending: The pending calls, in call order.

        Returns:
            ``(call, arguments)`` of the leading calls that may, in order (empty when the first may not).
        """
        out: list[tuple[ToolCallRecord, dict[str, Any]]] = []
        granted = {e.payload["call_id"] for e in run.own if e.kind == "permission.granted"}
        for rec in pending:
            if rec.tool in BUILTIN_TOOLS or rec.id in granted or self.tools.has_side_effects(rec.tool):
                break
            args = arguments_dict(rec.arguments)
            d = assess(rec.tool, args, run.ctx.permissions, self.tools)
            if not d.allowed or d.needs_approval:
                break
            out.append((rec, args))
        return out

    def run_read_only(self, run: NodeRun, batch: Sequence[tuple[ToolCallRecord, dict[str, Any]]]) -> None:
        """Run read-only calls at the same time (:func:`~nodes.tools.parallel.run_at_once`), then record each in order.

        Only the executor's ``execute`` runs in the worker threads; every outcome is recorded
        (:meth:`record`) on this thread, in call order, whatever order the calls finished in. A call
        that raises is its own ``error`` result. A crash before a call's result is recorded runs it
        again on the next attempt, as it does one by one (read-only calls have no marker).

        Args:
            run: This node run.
            batch: ``(call, arguments)`` from :meth:`at_once`.
        """
        scopes = list(run.ctx.permissions.file_scopes)
        names = secrets_of(run.ctx)
        jobs = [partial(scoped_execute, self.tools, rec.id, rec.tool, args, scopes, names) for rec, args in batch]
        traced = [start_tool_run(run, rec, args) for rec, args in batch]
        for (rec, args), out, t in zip(batch, run_at_once(jobs, self.max_parallel), traced, strict=True):
            self.record(run, rec, args, out, traced=t)

    def handle(self, run: NodeRun, q: ApprovalQuestions, rec: ToolCallRecord) -> bool:
        """Run, refuse, recover or ask about one pending call.

        A call with a ``permission.granted`` marker from an earlier attempt uses the marker's
        arguments. Refused by the policy: ``permission.denied`` and a ``denied`` result. A call with
        side effects and a marker: :meth:`resume_interrupted`. Needs approval: :meth:`seek_approval`.
        Else a call with side effects gets ``permission.granted`` (system) and runs (:meth:`execute`).

        Args:
            run: This node run.
            q: The approval questions of this node run.
            rec: The pending call.

        Returns:
            False when the call waits for the next node run, else True.
        """
        marker = next(
            (e for e in reversed(run.own) if e.kind == "permission.granted" and e.payload["call_id"] == rec.id), None
        )
        args = arguments_dict(marker.payload["arguments"]) if marker is not None else arguments_dict(rec.arguments)
        d = assess(rec.tool, args, run.ctx.permissions, self.tools)
        if not d.allowed:
            self.deny(run, rec, args, d.reason, f"refused by the tool node: {d.reason}; the call was not run")
            return True
        side = self.tools.has_side_effects(rec.tool)
        if marker is not None and side:
            return self.resume_interrupted(run, q, rec, args)
        if d.needs_approval and marker is None:
            return self.seek_approval(run, q, rec, args, d)
        if side and marker is None:
            self.grant(
                run,
                rec,
                args,
                d.risk,
                f"allowed by policy ({d.risk} risk){': ' + d.reason if d.reason else ''}",
                "system",
            )
        self.execute(run, rec, args)
        return True

    def resume_interrupted(self, run: NodeRun, q: ApprovalQuestions, rec: ToolCallRecord, args: dict[str, Any]) -> bool:
        """Recover a call with side effects that may have started (it has its marker) but has no result.

        The executor's ``recover()`` checks the workspace: ``done`` records the outcome found,
        ``retry`` runs it again, ``ask`` (or no ``recover``) puts up a ``high`` risk question "run it
        again?".

        Args:
            run: This node run.
            q: The approval questions of this node run.
            rec: The interrupted call.
            args: The arguments its marker granted.

        Returns:
            False when the question has to wait for the next node run, else True.
        """
        recover = getattr(self.tools, "recover", None)
        r = recover(rec.id, rec.tool, args, list(run.ctx.permissions.file_scopes)) if recover else None
        state = r.state if r is not None else "ask"
        note = r.note if r is not None else "the tool cannot check its own side effects"
        if state == "done" and r is not None and r.outcome is not None:
            self.record(run, rec, args, r.outcome, f"recovered after an interruption: {note}")
        elif state == "retry":
            self.execute(run, rec, args, f"run again after an interruption: {note}")
        else:
            if not q.may_ask(again=rec.id):
                return False
            ans = self.ask(
                run, q, rec, args, "high", f"interrupted before its result was recorded: {note}; run it again?"
            )
            self.answered(run, rec, args, "high", ans, "run again after an interruption, approved by the user")
        return True

    def seek_approval(
        self, run: NodeRun, q: ApprovalQuestions, rec: ToolCallRecord, args: dict[str, Any], d: Decision
    ) -> bool:
        """Ask about a call the policy says needs approval, and act on the answer.

        A call the user rejected before (same tool, same arguments) is not asked again: it gets
        ``permission.denied`` and an ``error`` result starting :data:`~nodes.tools.REJECTED_AGAIN`.

        Args:
            run: This node run.
            q: The approval questions of this node run.
            rec: The pending call.
            args: The call's arguments.
            d: The policy's decision (risk, reason, the paths it writes).

        Returns:
            False when the question has to wait for the next node run, else True.
        """
        prior = self.rejected_before(run, rec.tool, args)
        if prior is not None:
            self.deny(
                run,
                rec,
                args,
                f"already {prior}; not asked again",
                f"{REJECTED_AGAIN} ({prior}); it was not run and will not be put up for approval again. "
                "Choose another approach or stop.",
                status="error",
                risk=d.risk,
            )
            return True
        if not q.may_ask():
            return False
        ans = self.ask(run, q, rec, args, d.risk, d.reason or f"{rec.tool} needs approval")
        self.answered(run, rec, args, d.risk, ans, targets=d.paths)
        return True

    def rejected_before(self, run: NodeRun, tool: str, args: dict[str, Any]) -> str | None:
        """The reason of the user's earlier rejection of ``tool`` with these exact arguments, or None.

        Only ``permission.denied`` events of the task are read.

        Args:
            run: This node run.
            tool: The tool's name.
            args: The call's arguments.

        Returns:
            The rejection's reason, or None.
        """
        canon = canonical_arguments(args)
        for e in self.env.events.read(run.task_id, kinds=("permission.denied",)):
            if (
                e.actor == "user"
                and e.payload["tool"] == tool
                and e.payload["arguments"] == canon
                and e.payload["reason"].startswith("rejected by the user")
            ):
                return str(e.payload["reason"])
        return None

    def payload(self, run: NodeRun, req: Event) -> dict[str, Any]:
        """The ``interrupt()`` value of the question ``req``.

        Args:
            run: This node run.
            req: The question's ``permission.requested`` event.

        Returns:
            ``{type: "approval", task_id, call_id, step_id, tool, arguments, risk, reason, request_id}``.
        """
        p = req.payload
        rec = next((r for r in run.ctx.evidence.recent_tool_calls if r.id == p["call_id"]), None)
        return {
            "type": "approval",
            "task_id": run.task_id,
            "call_id": p["call_id"],
            "step_id": rec.step_id if rec is not None else None,
            "tool": p["tool"],
            "arguments": arguments_dict(p["arguments"]),
            "risk": p["risk"],
            "reason": p["reason"],
            "request_id": req.id,
        }

    def put(self, run: NodeRun, req: Event) -> Any:
        """Call ``interrupt()`` for ``req`` until the answer is one to ``req``.

        An answer naming another ``request_id`` is not an answer to this question: it is asked
        again. Re-runs make the same calls in the same order, so LangGraph hands back the same answers.

        Args:
            run: This node run.
            req: The question's ``permission.requested`` event.

        Returns:
            The answer, as given.
        """
        while True:
            answer = interrupt(self.payload(run, req))
            rid = answer.get("request_id") if isinstance(answer, dict) else None
            if rid is None or rid == req.id:
                return answer

    def ask(
        self,
        run: NodeRun,
        q: ApprovalQuestions,
        rec: ToolCallRecord,
        args: dict[str, Any],
        risk: RiskLevel,
        reason: str,
    ) -> dict[str, Any]:
        """The user's answer about ``rec``, asked with ``interrupt()``.

        The questions earlier attempts of this node run put are put again first, in order (LangGraph
        returns their stored answers: resume values match ``interrupt()`` calls by order); the last
        one, when it is about this call and not acted on yet, is the question asked now. Else
        ``permission.requested`` is committed and put.

        Args:
            run: This node run.
            q: The approval questions of this node run.
            rec: The call.
            args: Its arguments.
            risk: Its risk level.
            reason: Why it needs approval.

        Returns:
            The answer (:func:`~nodes.tools.normalize_answer`).
        """
        q.put_now = True
        while q.pos < len(q.asked):
            req = q.asked[q.pos]
            q.pos += 1
            if q.pos == len(q.asked) and req.payload["call_id"] == rec.id and not q.acted_on(req):
                return normalize_answer(self.put(run, req))
            self.put(run, req)
        req = run.commit(
            [
                run.make(
                    "permission.requested",
                    PermissionEvent(
                        call_id=rec.id, tool=rec.tool, arguments=canonical_arguments(args), risk=risk, reason=reason
                    ),
                    actor="system",
                )
            ]
        )[0]
        q.asked.append(req)
        q.pos += 1
        return normalize_answer(self.put(run, req))

    def answered(
        self,
        run: NodeRun,
        rec: ToolCallRecord,
        args: dict[str, Any],
        risk: RiskLevel,
        ans: dict[str, Any],
        note: str = "",
        targets: Sequence[str] = (),
    ) -> None:
        """Act on the answer ``ans`` about ``rec``.

        First the workspace is checked like on a resume (:meth:`waited`). ``approve``: :meth:`approved`;
        ``edit``: :meth:`edited`; ``reject`` / ``respond``: ``permission.denied`` by the user and a
        ``denied`` result carrying the user's reason or message.

        Args:
            run: This node run.
            rec: The call.
            args: Its arguments.
            risk: Its risk level.
            ans: The answer (:func:`~nodes.tools.normalize_answer`).
            note: A note for the result's summary.
            targets: The files the call writes (the policy's paths).
        """
        changed = self.waited(run)
        action = ans["action"]
        if action == "approve":
            self.approved(run, rec, args, risk, note, [(p, changed[p]) for p in targets if p in changed])
        elif action == "edit":
            self.edited(run, rec, dict(ans["arguments"]), note)
        elif action == "reject":
            why = " ".join(str(ans.get("reason") or "no reason given").split())[:500]
            self.deny(
                run,
                rec,
                args,
                f"rejected by the user: {why}",
                f"the user rejected this call ({why}); it was not run. Do not ask for it again with the same "
                "arguments: choose another approach or finish the step.",
                actor="user",
                risk=risk,
            )
        else:
            msg = " ".join(str(ans.get("message") or "").split())[:2000]
            self.deny(
                run,
                rec,
                args,
                f"the user answered instead of approving: {msg}",
                f"not run; instead of approving, the user says: {msg}",
                actor="user",
                risk=risk,
            )

    def approved(
        self,
        run: NodeRun,
        rec: ToolCallRecord,
        args: dict[str, Any],
        risk: RiskLevel,
        note: str,
        moved: Sequence[tuple[str, str]],
    ) -> None:
        """Grant and run an approved call, unless a file it writes changed while it waited.

        Then the approved arguments were made against bytes the file no longer has: ``permission.denied``
        (system) and a ``denied`` result naming the change and asking for a re-read; made again, the
        call is put up again.

        Args:
            run: This node run.
            rec: The call.
            args: Its arguments.
            risk: Its risk level.
            note: A note for the result's summary.
            moved: ``(path, sha256 now)`` of each file it writes that changed while waiting.
        """
        if moved:
            what = "; ".join(change_text(p, "approval", run.ctx.evidence.world.get(p, ""), sha) for p, sha in moved)
            self.deny(
                run,
                rec,
                args,
                f"approved by the user, but {what}; not run",
                f"not run: {what}, after these arguments were made. Re-read {', '.join(p for p, _ in moved)} and make "
                "the change again on its current bytes (it will be put up for approval again).",
                risk=risk,
            )
            return
        self.grant(run, rec, args, risk, "approved by the user", "user")
        self.execute(run, rec, args, note)

    def edited(self, run: NodeRun, rec: ToolCallRecord, new: dict[str, Any], note: str) -> None:
        """Grant and run a call approved with edited arguments, once they pass the checks again.

        The edited arguments (the person's own, given after any change) are checked against the tool's
        schema (:func:`~nodes.tools.check_arguments`) and by the policy; refused, they get
        ``permission.denied`` and are not run.

        Args:
            run: This node run.
            rec: The call.
            new: The edited arguments.
            note: A note for the result's summary.
        """
        problem = check_arguments(rec.tool, self.parameters(rec.tool), new)
        if problem is not None:  # whoever answered (CLI, Python API, LangGraph Server)
            self.deny(
                run,
                rec,
                new,
                f"edited arguments refused: {problem}",
                f"refused by the tool node: the edited arguments do not fit the tool ({problem}); not run",
            )
            return
        d = assess(rec.tool, new, run.ctx.permissions, self.tools)
        if not d.allowed:
            self.deny(
                run,
                rec,
                new,
                f"edited arguments refused: {d.reason}",
                f"refused by the tool node: the edited arguments break the policy ({d.reason}); not run",
            )
            return
        self.grant(run, rec, new, d.risk, "approved with arguments edited by the user", "user")
        self.execute(run, rec, new, "the user edited the arguments before approving" + (f"; {note}" if note else ""))


def make_tool_node(
    env: NodeEnv, tools: ToolExecutor | Sequence[Any], max_parallel: int = DEFAULT_MAX_PARALLEL
) -> TaskToolNode:
    """The graph's ``tools`` node over ``env`` and ``tools``.

    Args:
        env: The node environment.
        tools: The task's tool executor, or a list of LangChain tools (``@tool``, MCP tools) and
            executors (:func:`~nodes.tools.from_langchain_tools`; receipts' outputs in
            ``env.artifacts``, no receipts folder: pass ``from_langchain_tools(...,
            receipts_dir=...)`` for one).
        max_parallel: The most read-only calls of one model answer running at the same time
            (1: every call one by one; an executor's own ``max_parallel`` lowers it).

    Returns:
        A :class:`TaskToolNode`, callable as ``node(state, config) -> state update``.

    Raises:
        ValueError: ``max_parallel``, or the executor's ``max_parallel``, is below 1; a list's
            tools share a name.
        TypeError: A list item is neither a LangChain tool nor a ToolExecutor.
    """
    tx = executor_of(tools, artifacts=env.artifacts)
    env.use_workspace(tx)  # (the freshness check of a resume fingerprints it)
    return TaskToolNode(env, tx, max_parallel)
