"""The tool node, the tool-executor protocol, the replay tools, ``read_artifact`` and
``search_history``.

The executor appends ``tool.called`` for each call the model issues; the tool node then runs
every call still pending, one at a time: raw output → artifact store (exact bytes) → secrets
masked → compression → ``tool.result.received`` (its own transaction, so a crash mid-batch keeps
the results already recorded). A successful call resolves the open errors of its own plan step
(``error.resolved`` for each error whose ``step_id`` is the call's; with ``strict_resolution``
on the executor, instead only errors of an earlier call of the same tool with the same
arguments). Tool output is external content: it never reaches a system message.

**Permissions** are checked here, in code, for every call (:func:`nodes.permissions.assess`):
a refused call gets ``permission.denied`` and a ``denied`` result and never runs.

**Approvals.** A call that needs approval (``requires_approval`` or high risk) records
``permission.requested`` and calls LangGraph ``interrupt()`` with ``{type: "approval", call_id,
tool, arguments, risk, reason}``. The answer (``Command(resume=...)``) is ``{"action":
"approve"}``, ``{"action": "edit", "arguments": {...}}`` (checked by the policy again, not asked
again), ``{"action": "reject", "reason": "..."}`` or ``{"action": "respond", "message":
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

import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from context import (
    ArtifactNotFoundError,
    InvalidRefError,
    TaskContext,
    Trajectory,
    classify_result,
    compress_tool_result,
    parse_ref,
    slice_lines,
    summarize_event,
)
from context.compression import ResultKind
from context.events import (
    ErrorResolved,
    Event,
    EventKind,
    FileModified,
    PermissionEvent,
    ToolResultReceived,
)
from context.models import ToolCallRecord, arguments_dict

from .permissions import assess
from .runtime import NodeEnv, NodeRun
from .secrets import mask_secrets

__all__ = [
    "APPROVAL_ACTIONS",
    "CONTROL_TOOLS",
    "accepts_scopes",
    "READ_ARTIFACT_SCHEMA",
    "REJECTED_AGAIN",
    "SEARCH_HISTORY_SCHEMA",
    "normalize_answer",
    "ReplayTools",
    "ToolExecutor",
    "ToolOutcome",
    "function_schema",
    "make_tool_node",
    "RECORDED_ERROR",
]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returned: ``status`` ok|error, the raw ``output`` text, its compression
    ``kind``, and for file reads/writes the ``path``; ``modified`` (and ``modified_all`` for
    several files) the files the call changed."""

    status: str
    output: str
    kind: ResultKind = "command"
    path: str | None = None
    modified: str | None = None
    modified_all: tuple[str, ...] = ()


class ToolExecutor(Protocol):
    """Runs the task's tools. ``schemas()`` are OpenAI-format tool dicts offered to the executor.

    Optional class attributes and methods the tool node looks for:

    * ``accepts_scopes = True``: ``execute`` takes a fourth argument, the task's ``file_scopes``
      (``execute(call_id, tool, arguments, scopes)``); without it ``execute`` is called with three
      (:class:`~nodes.workspace.WorkspaceTools` sets it). When the attribute is missing, an
      ``execute`` with a parameter named ``scopes`` gets them too.
    * ``strict_resolution = True``: a success resolves only errors of an earlier call of the same
      tool with the same arguments (default: the open errors of the call's plan step).
    * ``check(tool, arguments, scopes) -> (risk, reason, paths)``: the executor's own policy
      (:func:`nodes.permissions.assess`; raise ``PolicyError`` to refuse).
    * ``recover(call_id, tool, arguments, scopes) -> Recovery``: checks a side-effecting call
      interrupted before its result was recorded (``done``, ``retry`` or ``ask``).
    """

    def schemas(self) -> list[dict[str, Any]]: ...
    def has_side_effects(self, tool: str) -> bool: ...
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome: ...


def function_schema(name: str, description: str, properties: dict[str, Any] | None = None,
                    required: Sequence[str] = ()) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = list(required)
    if properties is None:
        params["additionalProperties"] = True
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


READ_ARTIFACT_SCHEMA = function_schema(
    "read_artifact",
    "Fetch the exact text of an artifact ref (artifact://sha256:<hex>, optionally #L<start>-<end>).",
    {"ref": {"type": "string"}},
    ["ref"],
)

SEARCH_HISTORY_SCHEMA = function_schema(
    "search_history",
    "Search this task's event log (tool calls, results, denials, errors, plans) for a text.",
    {"query": {"type": "string"}},
    ["query"],
)

#: Start of the result of a call the user already rejected (same tool, same arguments).
REJECTED_AGAIN = "refused: the user already rejected this exact call"
APPROVAL_ACTIONS = ("approve", "edit", "reject", "respond")

#: Tools the nodes handle themselves (not run by a ToolExecutor).
CONTROL_TOOLS = {"complete_step", "submit_plan", "submit_review", "decide_recovery"}

#: Marks a recorded observation as a failed call (checked on its first 2,000 chars).
RECORDED_ERROR = re.compile(
    r"^(Error|ERROR|error:)|Traceback \(most recent call last\)|command not found|No such file or directory"
    r"|^\[invalid tool call|ERROR:",
    re.M,
)


class ReplayTools:
    """Tools of a recorded trajectory: call ``rec-<i>`` returns step i's recorded observation.

    A call id that is not in the recording is an error outcome (never a crash). An observation
    matching :data:`RECORDED_ERROR` is returned with status ``error``.
    """

    def __init__(self, trajectory: Trajectory):
        self.trajectory = trajectory
        self.by_id = {f"rec-{i}": s for i, s in enumerate(trajectory.steps, start=1)}

    def schemas(self) -> list[dict[str, Any]]:
        names = sorted({s.tool for s in self.trajectory.steps})
        return [function_schema(n, f"Recorded tool {n} (replayed from {self.trajectory.id}).") for n in names]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        step = self.by_id.get(call_id)
        if step is None:
            return ToolOutcome("error", f"replay: no recorded step for call id {call_id!r}")
        status = "error" if RECORDED_ERROR.search(step.observation[:2000]) else "ok"
        kind = classify_result(step.tool, step.arguments)
        path = step.arguments.get("path") or step.arguments.get("file_path")
        if not path and isinstance(step.arguments.get("files"), list) and step.arguments["files"]:
            first = step.arguments["files"][0]
            path = first.get("file_path") if isinstance(first, dict) else None
        modified = None
        if step.tool == "str_replace_editor" and step.arguments.get("command") in ("create", "str_replace", "insert"):
            modified = str(path) if path else None
        elif step.tool in ("edit", "create") and isinstance(path, str):
            modified = path
        return ToolOutcome(status, step.observation, kind, str(path) if path else None, modified)


def _read_artifact(env: NodeEnv, arguments: dict[str, Any]) -> ToolOutcome:
    """The artifact (or its ``#L`` slice), secrets masked: the whole artifact is masked first and
    then sliced (masking keeps line numbers), so a slice inside a key block is masked too."""
    ref = str(arguments.get("ref", ""))
    try:
        r = parse_ref(ref)
        data = env.artifacts.get(f"artifact://sha256:{r.digest}")
    except (InvalidRefError, ArtifactNotFoundError) as exc:
        return ToolOutcome("error", str(exc))
    text = mask_secrets(data.decode("utf-8", errors="replace")).text
    if r.start is not None:
        text = slice_lines(text.encode("utf-8"), r.start, r.end or r.start).decode("utf-8")
    return ToolOutcome("ok", text, "other")


#: Every event kind but ``context.built`` (manifests are large and not history to search).
_SEARCHED_KINDS = tuple(k for k in get_args(EventKind) if k != "context.built")


def _search_history(env: NodeEnv, task_id: str, arguments: dict[str, Any], limit: int = 30) -> ToolOutcome:
    query = str(arguments.get("query", "")).strip().lower()
    if not query:
        return ToolOutcome("error", "search_history needs a non-empty query")
    hits = []
    for e in env.events.read(task_id, kinds=_SEARCHED_KINDS):
        line = f"#{e.seq} {e.kind} [{e.actor}] {summarize_event(e)}"
        if query in line.lower() or query in json.dumps(e.payload, ensure_ascii=False).lower():
            hits.append(line)
    if not hits:
        return ToolOutcome("ok", f"(no events match {query!r})\n", "other")
    shown = hits[-limit:]
    more = f"({len(hits) - len(shown)} older matches not shown)\n" if len(hits) > len(shown) else ""
    return ToolOutcome("ok", more + "\n".join(shown) + "\n", "other")


def _canon(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def normalize_answer(answer: Any) -> dict[str, Any]:
    """An approval answer as ``{"action": ..., ...}``; anything unreadable is a rejection."""
    if isinstance(answer, str) and answer in APPROVAL_ACTIONS:
        answer = {"action": answer}
    if not isinstance(answer, dict) or answer.get("action") not in APPROVAL_ACTIONS:
        return {"action": "reject", "reason": f"unreadable approval answer {str(answer)[:100]!r}"}
    out = dict(answer)
    if out["action"] == "edit" and not isinstance(out.get("arguments"), dict):
        return {"action": "reject", "reason": "edit without an arguments object"}
    return out


def accepts_scopes(tools: Any) -> bool:
    """Whether ``tools.execute`` takes the file scopes as a fourth argument: the executor's
    ``accepts_scopes`` attribute, else whether ``execute`` has a parameter named ``scopes``."""
    flag = getattr(tools, "accepts_scopes", None)
    if flag is not None:
        return bool(flag)
    try:
        return "scopes" in inspect.signature(tools.execute).parameters
    except (TypeError, ValueError):
        return False


def _scoped_execute(tools: Any, call_id: str, tool: str, args: dict[str, Any], scopes: list[str]) -> ToolOutcome:
    try:
        if accepts_scopes(tools):
            return tools.execute(call_id, tool, args, scopes)
        return tools.execute(call_id, tool, args)
    except Exception as exc:  # a crashing tool is an error result, not a crashed graph
        return ToolOutcome("error", f"error: tool {tool} raised {type(exc).__name__}: {exc}")


class _Questions:
    """The approval questions of one node run, in ``interrupt()`` order: the
    ``permission.requested`` events its earlier attempts appended (``own``), then the ones this
    attempt appends. ``pos``: how many of them this attempt has put so far."""

    def __init__(self, own: Sequence[Event]):
        self.own = list(own)
        self.asked: list[Event] = [e for e in own if e.kind == "permission.requested"]
        self.pos = 0

    def acted_on(self, req: Event) -> bool:
        """An earlier attempt acted on the answer to ``req`` (granted or denied the call after it)."""
        return any(e.kind in ("permission.granted", "permission.denied") and e.seq > req.seq
                   and e.payload["call_id"] == req.payload["call_id"] for e in self.own)


def make_tool_node(env: NodeEnv, tools: ToolExecutor) -> Callable[[TaskContext, RunnableConfig], dict[str, Any]]:
    """The graph's ``tools`` node: runs every pending call (see module doc)."""
    strict = bool(getattr(tools, "strict_resolution", False))

    def record(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], out: ToolOutcome, note: str = "") -> None:
        ref = env.artifacts.put(out.output)
        masked = mask_secrets(out.output).text
        comp = compress_tool_result(masked, out.kind, ref, path=out.path)
        summary = f"[{note}]\n{comp.text}" if note else comp.text
        batch = [run.make("tool.result.received", ToolResultReceived(
            call_id=rec.id, status="ok" if out.status == "ok" else "error", result_summary=summary,
            raw_ref=ref, raw_chars=len(out.output), compressed=comp.compressed), actor="tool")]
        for path in out.modified_all or ((out.modified,) if out.modified else ()):
            batch.append(run.make("file.modified", FileModified(path=path, call_id=rec.id, raw_ref=ref), actor="tool"))
        if out.status == "ok":
            done = {e.id for e in run.ctx.errors.resolved_errors}
            calls = {r.id: r for r in run.ctx.evidence.recent_tool_calls}
            for err in run.ctx.errors.error_history:
                if err.id in done:
                    continue
                if strict:
                    if err.source != f"tool:{rec.tool}":
                        continue
                    prev = calls.get(err.call_id or "")
                    if prev is not None and _canon(arguments_dict(prev.arguments)) != _canon(args):
                        continue
                elif err.step_id != rec.step_id:
                    continue
                batch.append(run.make("error.resolved", ErrorResolved(
                    error_id=err.id, resolution=f"later call {rec.id} ({rec.tool}) succeeded"), actor="system"))
        run.commit(batch)

    def deny(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], reason: str, summary: str, *,
             actor: str = "system", status: str = "denied", risk: str = "high") -> None:
        run.commit([
            run.make("permission.denied", PermissionEvent(call_id=rec.id, tool=rec.tool, arguments=_canon(args),
                                                         risk=risk, reason=reason), actor=actor),
            run.make("tool.result.received", ToolResultReceived(call_id=rec.id, status=status, result_summary=summary),
                     actor="system"),
        ])

    def grant(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], risk: str, reason: str, actor: str) -> None:
        run.commit([run.make("permission.granted", PermissionEvent(
            call_id=rec.id, tool=rec.tool, arguments=_canon(args), risk=risk, reason=reason), actor=actor)])

    def execute(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], note: str = "") -> None:
        if rec.tool == "read_artifact":
            out = _read_artifact(env, args)
        elif rec.tool == "search_history":
            out = _search_history(env, run.task_id, args)
        else:
            out = _scoped_execute(tools, rec.id, rec.tool, args, list(run.ctx.permissions.file_scopes))
        record(run, rec, args, out, note)

    def rejected_before(run: NodeRun, tool: str, args: dict[str, Any]) -> str | None:
        canon = _canon(args)
        for e in env.events.read(run.task_id, kinds=("permission.denied",)):
            if (e.actor == "user" and e.payload["tool"] == tool
                    and e.payload["arguments"] == canon and e.payload["reason"].startswith("rejected by the user")):
                return e.payload["reason"]
        return None

    def payload(run: NodeRun, req: Event) -> dict[str, Any]:
        """The ``interrupt()`` value of the question ``req`` (a ``permission.requested`` event)."""
        p = req.payload
        rec = next((r for r in run.ctx.evidence.recent_tool_calls if r.id == p["call_id"]), None)
        return {"type": "approval", "task_id": run.task_id, "call_id": p["call_id"],
                "step_id": rec.step_id if rec is not None else None, "tool": p["tool"],
                "arguments": arguments_dict(p["arguments"]), "risk": p["risk"], "reason": p["reason"],
                "request_id": req.id}

    def put(run: NodeRun, req: Event) -> Any:
        """``interrupt()`` for ``req`` until the answer is one to ``req``: an answer naming
        another ``request_id`` is not an answer to this question (it is asked again). Re-runs
        make the same calls in the same order, so LangGraph hands back the same answers."""
        while True:
            answer = interrupt(payload(run, req))
            rid = answer.get("request_id") if isinstance(answer, dict) else None
            if rid is None or rid == req.id:
                return answer

    def ask(run: NodeRun, q: _Questions, rec: ToolCallRecord, args: dict[str, Any], risk: str,
            reason: str) -> dict[str, Any]:
        # The questions earlier attempts of this node run put, in order: ask each again (LangGraph
        # returns its stored answer: resume values are matched to interrupt() calls by order).
        # The last one, when it is about this call and its answer was not acted on yet, is the
        # question asked now; any other answer was acted on already and is not used again.
        while q.pos < len(q.asked):
            req = q.asked[q.pos]
            q.pos += 1
            if q.pos == len(q.asked) and req.payload["call_id"] == rec.id and not q.acted_on(req):
                return normalize_answer(put(run, req))
            put(run, req)
        req = run.commit([run.make("permission.requested", PermissionEvent(
            call_id=rec.id, tool=rec.tool, arguments=_canon(args), risk=risk, reason=reason), actor="system")])[0]
        q.asked.append(req)
        q.pos += 1
        return normalize_answer(put(run, req))

    def answered(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any], risk: str, ans: dict[str, Any],
                 note: str = "") -> None:
        action = ans["action"]
        if action == "approve":
            grant(run, rec, args, risk, "approved by the user", "user")
            execute(run, rec, args, note)
        elif action == "edit":
            new = dict(ans["arguments"])
            d = assess(rec.tool, new, run.ctx.permissions, tools)
            if not d.allowed:
                deny(run, rec, new, f"edited arguments refused: {d.reason}",
                     f"refused by the tool node: the edited arguments break the policy ({d.reason}); not run")
                return
            grant(run, rec, new, d.risk, "approved with arguments edited by the user", "user")
            execute(run, rec, new, "the user edited the arguments before approving" + (f"; {note}" if note else ""))
        elif action == "reject":
            why = " ".join(str(ans.get("reason") or "no reason given").split())[:500]
            deny(run, rec, args, f"rejected by the user: {why}",
                 f"the user rejected this call ({why}); it was not run. Do not ask for it again with the same "
                 "arguments: choose another approach or finish the step.", actor="user", risk=risk)
        else:
            msg = " ".join(str(ans.get("message") or "").split())[:2000]
            deny(run, rec, args, f"the user answered instead of approving: {msg}",
                 f"not run; instead of approving, the user says: {msg}", actor="user", risk=risk)

    def tools_node(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env, state, "tools", config)
        resumed = run.resume_events()
        if resumed:  # a `taskctx resume` (token not yet recorded): its own batch, before anything else
            run.commit(resumed)
        q = _Questions(run.own)
        # calls whose question this node run already put and acted on: one question per node run,
        # except putting such a call up again when it was cut off before its result was recorded
        put_before = {e.payload["call_id"] for e in q.asked if q.acted_on(e)}
        asked = False
        for rec in [r for r in run.ctx.evidence.recent_tool_calls if r.status == "pending"]:
            marker = next((e for e in reversed(run.own) if e.kind == "permission.granted"
                           and e.payload["call_id"] == rec.id), None)
            args = arguments_dict(marker.payload["arguments"]) if marker is not None else arguments_dict(rec.arguments)
            perms = run.ctx.permissions
            d = assess(rec.tool, args, perms, tools)
            if not d.allowed:
                deny(run, rec, args, d.reason, f"refused by the tool node: {d.reason}; the call was not run")
                continue
            side = tools.has_side_effects(rec.tool)
            if marker is not None and side:
                rcv = getattr(tools, "recover", None)
                r = rcv(rec.id, rec.tool, args, list(perms.file_scopes)) if rcv else None
                state_ = r.state if r is not None else "ask"
                note_ = r.note if r is not None else "the tool cannot check its own side effects"
                if state_ == "done" and r is not None and r.outcome is not None:
                    record(run, rec, args, r.outcome, f"recovered after an interruption: {note_}")
                elif state_ == "retry":
                    execute(run, rec, args, f"run again after an interruption: {note_}")
                else:
                    if asked or (put_before - {rec.id}):
                        break
                    asked = True
                    ans = ask(run, q, rec, args, "high", f"interrupted before its result was recorded: {note_}; "
                                                        "run it again?")
                    answered(run, rec, args, "high", ans, "run again after an interruption, approved by the user")
                continue
            if d.needs_approval and marker is None:
                prior = rejected_before(run, rec.tool, args)
                if prior is not None:
                    deny(run, rec, args, f"already {prior}; not asked again",
                         f"{REJECTED_AGAIN} ({prior}); it was not run and will not be put up for approval again. "
                         "Choose another approach or stop.", status="error", risk=d.risk)
                    continue
                if asked or put_before:
                    break
                asked = True
                ans = ask(run, q, rec, args, d.risk, d.reason or f"{rec.tool} needs approval")
                answered(run, rec, args, d.risk, ans)
                continue
            if side and marker is None:
                grant(run, rec, args, d.risk, f"allowed by policy ({d.risk} risk){': ' + d.reason if d.reason else ''}",
                      "system")
            execute(run, rec, args)
        return run.update()

    return tools_node
