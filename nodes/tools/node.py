"""The tool node, :class:`TaskToolNode`: runs the calls the executor recorded, with
permissions, approvals and side-effect-safe resume.

The executor appends ``tool.called`` for each call the model issues; the tool node then runs
every call still pending, one at a time: raw output → artifact store (which masks secrets as it
writes: :mod:`context.secrets`) → the stored bytes compressed → ``tool.result.received`` (its own transaction, so a crash mid-batch keeps
the results already recorded). A successful call resolves the open errors of its own plan step
(``error.resolved`` for each error whose ``step_id`` is the call's; with ``strict_resolution``
on the executor, instead only errors of an earlier call of the same tool with the same
arguments). Tool output is external content: it never reaches a system message.

**Permissions** are checked here, in code, for every call (:func:`nodes.permissions.assess`):
a refused call gets ``permission.denied`` and a ``denied`` result and never runs.

**Approvals.** A call that needs approval (``requires_approval`` or high risk) records
``permission.requested`` and calls LangGraph ``interrupt()`` with ``{type: "approval", call_id,
tool, arguments, risk, reason}``. The answer (``Command(resume=...)``) is ``{"action":
"approve"}``, ``{"action": "edit", "arguments": {...}}`` (checked against the tool's schema and by the
policy again, not asked again: arguments that do not fit are denied), ``{"action": "reject", "reason": "..."}`` or ``{"action": "respond", "message":
"..."}``. Every payload also carries ``request_id`` (the id of its ``permission.requested``
event); an answer that names another ``request_id`` is not an answer to this question, which is
asked again. One question per node run: a second call that needs approval waits for the next run
of the node (the router sends the graph back here while calls are pending); the one exception is
a call approved in this run whose process died before its result was recorded, which may be put
up again ("run it again?").

A node re-runs from its first line on resume, and LangGraph matches resume values to
``interrupt()`` calls by their order within the node run. The ``permission.requested`` events
the node's earlier attempts appended (:class:`~nodes.runtime.NodeRun` ``own``) are the questions
of this node run in that order: each re-run calls ``interrupt()`` for them again, in the same
order, before it asks anything new (each returns its stored answer; an answer already acted on,
i.e. followed by ``permission.granted``/``denied``, is not acted on again). So a stored answer
never answers a new question, and ``permission.requested`` is appended once per question. A
``taskctx resume`` (a ``resume_token`` not yet recorded) is recorded first, ``resume.started``
in a batch of its own, so a resume that stops at an approval here is on the record too.

**A wait is a pause.** Before an answer is acted on, the workspace is fingerprinted like on a
resume (:meth:`TaskToolNode.waited`): a hand edit made while the task waited for the answer is
``fact.stale`` with cause ``approval``, recorded before the call acts (not blamed on the task's
own write afterwards). An approved write or patch of a file that changed while waiting is not
run: its arguments were made against bytes the file no longer has (a write would overwrite the
person's edit); it gets ``permission.denied`` (system) and a ``denied`` result that names the
change and asks for a re-read, and the executor makes the change again, put up again. Edited
arguments are the person's own, given after the change: they run.

A rejection is ``permission.denied`` by the user (the planner sees it); the same tool with the
same arguments is never put up again in this task: it is refused with an ``error`` result
(:data:`REJECTED_AGAIN`), which sends the run to recovery, which re-plans or stops. Earlier
rejections are looked up with the log's ``kinds`` filter (only ``permission.denied`` is read).

**Side effects.** Before a call with side effects runs, ``permission.granted`` is committed (by
the user after an approval, else by the system with the policy's risk): the marker that it may
have started. A call that has the marker but no result (the process died in between) is never
re-run blindly: the executor's ``recover()`` checks the workspace and the call is recorded as
done, run again, or put up for approval. Read-only calls simply run again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from context import COMMAND_LIMIT, TaskContext, compress_tool_result
from context.events import ErrorResolved, Event, FactStale, FileModified, PermissionEvent, ToolResultReceived
from context.freshness import change_text, find_stale
from context.models import RiskLevel, ToolCallRecord, arguments_dict
from context.text import clean, from_bytes

from ..permissions import Decision, assess
from ..runtime import NodeEnv, NodeRun
from .approvals import REJECTED_AGAIN, ApprovalQuestions, normalize_answer
from .builtin import READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA, read_artifact, search_history
from .protocol import ToolExecutor, ToolOutcome, check_arguments, parameters_of, scoped_execute

__all__ = ["TaskToolNode", "make_tool_node"]


def _canon(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


class TaskToolNode:
    """The graph's ``tools`` node: ``node(state, config) -> state update`` runs every pending
    call of ``state`` (a :class:`~context.TaskContext`) through ``tools`` (see module doc).

    ``env``: the node environment (event log, artifact store); ``tools``: the task's
    :class:`ToolExecutor`. Like LangGraph's prebuilt ``ToolNode`` it runs the calls the model
    issued, but it reads them from the event log and records every step there: permission
    checks, approvals (``interrupt()``), side-effect markers, results. Each ``record``/``deny``/
    ``grant``/``ask`` commits its events at once (its own transaction), so a crash keeps what
    was recorded; one instance serves every run (per-run state lives in a
    :class:`~nodes.runtime.NodeRun` and an :class:`ApprovalQuestions`).
    """

    def __init__(self, env: NodeEnv, tools: ToolExecutor):
        self.env = env
        self.tools = tools
        #: the executor's ``strict_resolution`` (see :meth:`resolutions`)
        self.strict = bool(getattr(tools, "strict_resolution", False))

    def __call__(self, state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        """One node run: a ``taskctx resume`` not yet recorded is recorded first
        (``resume.started``, a batch of its own); then each pending call in order
        (:meth:`handle`) until one has to wait for the next run. Returns the state update."""
        run = NodeRun(self.env, state, "tools", config)
        resumed = run.resume_events()
        if resumed:  # a `taskctx resume` (token not yet recorded): its own batch, before anything else
            run.commit(resumed)
        q = ApprovalQuestions(run.own)
        for rec in [r for r in run.ctx.evidence.recent_tool_calls if r.status == "pending"]:
            if not self.handle(run, q, rec):
                break
        return run.update()

    def handle(self, run: NodeRun, q: ApprovalQuestions, rec: ToolCallRecord) -> bool:
        """Run, refuse, recover or ask about one pending call. A call with a
        ``permission.granted`` marker from an earlier attempt uses the marker's arguments.
        Refused by the policy: ``permission.denied`` + a ``denied`` result. A side-effecting call
        with a marker: :meth:`resume_interrupted`. Needs approval: :meth:`seek_approval`. Else a
        side-effecting call gets ``permission.granted`` (system, the policy's risk) and then runs
        (:meth:`execute`). Returns False when the call waits for the next node run."""
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
        """A side-effecting call that may have started (it has its ``permission.granted``) but
        has no result: the executor's ``recover()`` checks the workspace. ``done``: its outcome is
        recorded (:meth:`record`); ``retry``: it runs again (:meth:`execute`); ``ask`` (or no
        ``recover``): put up as a ``high`` risk question "run it again?" (:meth:`ask`,
        :meth:`answered`). Returns False when that question has to wait for the next node run."""
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
        """A call the policy ``d`` says needs approval. Rejected by the user before (same tool,
        same arguments): ``permission.denied`` + an ``error`` result starting
        :data:`REJECTED_AGAIN`, not asked again. Else asked (:meth:`ask`) and the answer acted on
        (:meth:`answered`). Returns False when the question has to wait for the next node run."""
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

    def execute(self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], note: str = "") -> None:
        """Run the call now and :meth:`record` its outcome: ``read_artifact`` and
        ``search_history`` are answered from the task's own stores, every other tool by the
        executor (with the task's file scopes when it takes them). ``note`` heads the summary."""
        if rec.tool == "read_artifact":
            out = read_artifact(self.env, args)
        elif rec.tool == "search_history":
            out = search_history(self.env, run.task_id, args)
        else:
            out = scoped_execute(self.tools, rec.id, rec.tool, args, list(run.ctx.permissions.file_scopes))
        self.record(run, rec, args, out, note)

    def record(self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], out: ToolOutcome, note: str = "") -> None:
        """Commit one batch: ``tool.result.received`` (raw output in the artifact store, exact
        bytes but for secrets, which the store masks, any ``str``; the summary: the stored bytes
        with lone surrogates replaced, compressed (so a cut never splits a secret the store would
        have masked), headed ``[note]``; an output that cannot be stored or compressed is an
        ``error`` result naming the exception, so the call is never run again on resume), one
        ``file.modified`` per file the call changed, and on success the ``error.resolved`` events
        of :meth:`resolutions`."""
        try:
            ref = self.env.artifacts.put(out.output)  # any str (context.text.to_bytes), secrets masked
            stored = clean(from_bytes(self.env.artifacts.get(ref)))  # prompts get U+FFFD for a lone surrogate
            comp = compress_tool_result(stored, out.kind, ref, path=out.path)
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

    def changed_by_command(self, ctx: TaskContext, modified: list[str], written: dict[str, str]) -> dict[str, str]:
        """Files of the task's world that a side-effecting call changed without saying so (a
        command rewrote them): ``{path: sha now}``, from the executor's ``fingerprint``. Bytes
        already noticed as someone else's before the call (a ``fact.stale`` mark with that new
        sha: a hand edit found on resume or after an approval) are not the call's doing."""
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
        """``fact.stale`` for the facts of ``ctx`` (the state before this call) that the call's
        writes (``cause="write"``), reads of other bytes (``"reread"``) or HEAD make stale."""
        out = find_stale(ctx, written, "write", head=head)
        out += find_stale(ctx, {p: s for p, s in reads.items() if p not in written}, "reread")
        return [run.make("fact.stale", FactStale.model_validate(p), actor="system") for p in out]

    def store_arguments(self, rec: ToolCallRecord) -> None:
        """Put arguments over ``COMMAND_LIMIT`` chars in the artifact store: once the call has
        run, transcripts show them compressed with this ref (:func:`context.compression.compress_arguments`)."""
        if len(rec.arguments) > COMMAND_LIMIT:
            self.env.artifacts.put(rec.arguments)

    def resolutions(self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any]) -> list[Event]:
        """The ``error.resolved`` events (not yet committed) a success of ``rec`` earns: every
        open error of its plan step; with ``strict`` resolution instead every open error of an
        earlier call of the same tool with the same arguments (or of no known call)."""
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
                if prev is not None and _canon(arguments_dict(prev.arguments)) != _canon(args):
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
        """After a wait for an answer: the workspace fingerprinted against the task's world
        (:meth:`~nodes.runtime.NodeRun.fingerprint_events`, cause ``approval``); the
        ``fact.stale`` events are committed before the answer is acted on (idempotent: a re-run
        of the node records nothing twice). Returns the changed files (path -> sha now)."""
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
        """Commit ``permission.denied`` (by ``actor``: the system's policy or the user) and the
        call's result (``status`` denied, or error for a call rejected before) in one batch: the
        call is never run."""
        self.store_arguments(rec)
        run.commit(
            [
                run.make(
                    "permission.denied",
                    PermissionEvent(call_id=rec.id, tool=rec.tool, arguments=_canon(args), risk=risk, reason=reason),
                    actor=actor,
                ),
                run.make(
                    "tool.result.received",
                    ToolResultReceived(call_id=rec.id, status=status, result_summary=summary),
                    actor="system",
                ),
            ]
        )

    def grant(
        self, run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], risk: RiskLevel, reason: str, actor: str
    ) -> None:
        """Commit ``permission.granted`` (by the user after an approval, else by the system):
        for a side-effecting call, the marker that it may have started."""
        run.commit(
            [
                run.make(
                    "permission.granted",
                    PermissionEvent(call_id=rec.id, tool=rec.tool, arguments=_canon(args), risk=risk, reason=reason),
                    actor=actor,
                )
            ]
        )

    def parameters(self, tool: str) -> dict[str, Any] | None:
        """The JSON-schema ``parameters`` of ``tool`` (the executor's ``schemas()`` and the
        built-in tools'), or None: no schema, or an executor whose ``schemas()`` raises."""
        try:
            schemas = [*self.tools.schemas(), READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA]
        except Exception:  # noqa: BLE001 - an odd executor: the edit is then checked by the policy only
            return None
        return parameters_of(schemas, tool)

    def rejected_before(self, run: NodeRun, tool: str, args: dict[str, Any]) -> str | None:
        """The reason of the user's earlier rejection of ``tool`` with these exact arguments in
        this task (read from ``permission.denied`` events only), or None."""
        canon = _canon(args)
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
        """The ``interrupt()`` value of the question ``req`` (a ``permission.requested`` event):
        ``{type: "approval", task_id, call_id, step_id, tool, arguments, risk, reason, request_id}``."""
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
        """``interrupt()`` for ``req`` until the answer is one to ``req``: an answer naming
        another ``request_id`` is not an answer to this question (it is asked again). Re-runs
        make the same calls in the same order, so LangGraph hands back the same answers."""
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
        """The user's answer about ``rec`` (:func:`normalize_answer`). First the questions
        earlier attempts of this node run put are put again, in order (LangGraph returns their
        stored answers: resume values match ``interrupt()`` calls by order); the last one, when it
        is about this call and its answer was not acted on yet, is the question asked now. Else
        ``permission.requested`` is committed and put (raises LangGraph's interrupt until
        answered)."""
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
                    PermissionEvent(call_id=rec.id, tool=rec.tool, arguments=_canon(args), risk=risk, reason=reason),
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
        """Act on the answer ``ans``. First the workspace is checked like on a resume
        (:meth:`waited`: a hand edit made while the task waited is ``fact.stale``, cause
        ``approval``). approve: :meth:`approved`; edit: :meth:`edited`. reject / respond:
        ``permission.denied`` by the user and a ``denied`` result carrying the user's reason or
        message."""
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
        """Approved: ``permission.granted`` (user), then run. But when a file the call writes
        changed while waiting (``moved``: ``(path, sha now)`` pairs), the approved arguments were made against
        bytes the file no longer has: ``permission.denied`` (system) and a ``denied`` result naming
        the change and asking for a re-read (the call is not run; made again, it is put up again)."""
        if moved:
            what = "; ".join(change_text(p, "approval", run.ctx.evidence.world.get(p, ""), sha) for p, sha in moved)
            self.deny(
                run,
                rec,
                args,
                f"approved by the user, but {what}; not run",
                f"not run: {what}, after these arguments were made. Re-read {', '.join(p for p, _ in moved)} and make the "
                "change again on its current bytes (it will be put up for approval again).",
                risk=risk,
            )
            return
        self.grant(run, rec, args, risk, "approved by the user", "user")
        self.execute(run, rec, args, note)

    def edited(self, run: NodeRun, rec: ToolCallRecord, new: dict[str, Any], note: str) -> None:
        """Approved with edited arguments ``new`` (given after any change): checked against the
        tool's schema (:func:`.protocol.check_arguments`) and by the policy again (refused:
        ``permission.denied``, not run), then granted and run."""
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


def make_tool_node(env: NodeEnv, tools: ToolExecutor) -> TaskToolNode:
    """The graph's ``tools`` node over ``env`` and ``tools``: a :class:`TaskToolNode`, callable
    as ``node(state, config) -> state update`` (see module doc)."""
    return TaskToolNode(env, tools)
