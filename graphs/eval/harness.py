"""``taskctx eval``: deterministic scenario cases for the five ways context fails, for security
and for recovery.

A **case** is one JSON file (schema: :class:`Case`): the request and its constraints, the
permissions, a scripted sequence of model outputs per role (:class:`Turn`, with ``repeat`` for
long runs) and the tool results they get (inline ``result`` or ``tool_results`` keyed by call
id), optional crash points (:class:`Crash`: stop after N executor steps, or die inside a tool or
model call, simulated or with a real SIGKILL in a subprocess), events another actor records while
the run is paused (:class:`Inject`), answers to approval interrupts, and checks
(:data:`Check`) over the manifests (``context.built`` payload blocks), the rendered prompts (the
artifact at ``prompt_ref``), the final TaskContext, the event log and the tools that really ran.

Every case runs the real default graph (``build_orchestrator``) with a
:class:`~nodes.ScriptedChatModel` (its position comes from the call's ``role_call`` metadata, so
it survives a resume) and :class:`CaseTools` on throwaway SQLite stores; every resume builds a
new graph object on the same stores. Besides its own checks, each case checks two invariants:
the event log folds to the checkpointed state, and every recorded tool result is re-fetchable
byte-exact from the artifact store.

A case may list ``requires`` (``"approvals"``, ``"path_scopes"``): features of issue 3 that are
probed by behaviour; while a probe fails the case is reported as *pending*, not run.

``taskctx eval [--cases DIR] [--json]`` prints the pass rate per category and the context
statistics; exit code 0 when no case fails, 1 when one does, 2 on a bad case file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from context import Event, InvalidInputError, Permissions, TaskContext, replay
from nodes import ScriptedChatModel, ToolOutcome, complete, function_schema, plan, recover, review, tool_call

from .orchestrator import Project, build_orchestrator, new_task, open_project
from .runner import run_graph, thread_config

__all__ = [
    "CATEGORIES",
    "STAT_KEYS",
    "Case",
    "CaseError",
    "CaseResult",
    "CaseTools",
    "EvalReport",
    "Turn",
    "default_cases_dir",
    "eval_command",
    "format_report",
    "load_case",
    "load_cases",
    "run_case",
    "run_eval",
]

CATEGORIES = ("missing", "pollution", "conflict", "distortion", "overload", "security", "recovery")
STAT_KEYS = (
    "state_updates",
    "context_packs_built",
    "tool_results_compressed",
    "checkpoint_saves",
    "resume_events",
    "tasks_with_compression",
    "tasks_with_resume",
)
#: Features a case may require, each waiting for issue 3 until its probe passes.
FEATURES = {
    "approvals": "requires_approval enforced with an approval interrupt (issue 3)",
    "path_scopes": "file_scopes enforced on path arguments in the tool node (issue 3)",
}


class CaseError(InvalidInputError):
    """A case file that cannot be read or does not match the schema (names the file and field)."""


# --------------------------------------------------------------------------------------------
# schema
# --------------------------------------------------------------------------------------------
class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Generated(_M):
    """A generated output: ``line`` (``{n}`` = its 1-based number, ``{call}`` = the call id)
    repeated ``count`` times, or repeated until the output is exactly ``bytes`` bytes long (ASCII
    ``line`` only). ``{call}`` makes each call's output distinct, so the executor does not render
    it as a pointer to an identical earlier output."""

    line: str
    count: int | None = Field(default=None, ge=1)
    bytes: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one(self) -> "Generated":
        if (self.count is None) == (self.bytes is None):
            raise ValueError("give exactly one of count or bytes")
        return self

    def text(self) -> str:
        if self.count is not None:
            return "".join(self.line.replace("{n}", str(k)) + "\n" for k in range(1, self.count + 1))
        assert self.bytes is not None
        parts: list[str] = []
        size, k = 0, 0
        while size < self.bytes:
            k += 1
            ln = self.line.replace("{n}", str(k)) + "\n"
            parts.append(ln)
            size += len(ln)
        return "".join(parts)[: self.bytes]


class ToolResult(_M):
    """What a scripted tool call returns (see :class:`nodes.ToolOutcome`)."""

    status: Literal["ok", "error"] = "ok"
    output: str | Generated = ""
    kind: Literal["command", "file_read", "search", "other"] = "command"
    path: str | None = None
    modified: str | None = None

    def outcome(self, call_id: str = "") -> ToolOutcome:
        out = self.output if isinstance(self.output, str) else self.output.text().replace("{call}", call_id)
        return ToolOutcome(self.status, out, self.kind, self.path, self.modified)


class FindingSpec(_M):
    statement: str
    evidence_refs: list[str] = Field(default_factory=list)
    #: Ids of earlier findings (``<step>.f<k>``) this one replaces.
    supersedes: list[str] = Field(default_factory=list)


class PlanStepSpec(_M):
    id: str | None = None
    title: str
    description: str = ""
    expected_output: str = ""
    depends_on: list[str] = Field(default_factory=list)


_ACTIONS = ("plan", "tool", "complete", "review", "recover", "say", "repeat")


class Turn(_M):
    """One scripted model answer; exactly one action key.

    * ``plan``: step titles or step objects (with ``goal``, ``criteria``, ``reason``);
    * ``tool`` + ``args`` + ``id`` (+ ``thought``, ``result``): one tool call; ``result`` is the
      scripted tool result for that id;
    * ``complete``: the step summary (+ ``findings``, ``outcome``);
    * ``review``: approve|revise (+ ``summary``, ``issues``);
    * ``recover``: retry|replan|stop (+ ``reason``);
    * ``say``: a plain text answer;
    * ``repeat`` + ``turns``: the turns ``repeat`` times; ``{i}`` (1-based) in any string of them
      is replaced by the repetition number (``var`` names another placeholder, for nested repeats).
    """

    plan: list[str | PlanStepSpec] | None = None
    goal: str = ""
    criteria: list[str] = Field(default_factory=list)
    reason: str = ""
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    thought: str = ""
    result: ToolResult | None = None
    complete: str | None = None
    findings: list[str | FindingSpec] = Field(default_factory=list)
    outcome: Literal["success", "partial", "failed", "blocked"] = "success"
    review: Literal["approve", "revise"] | None = None
    summary: str = ""
    issues: list[str] = Field(default_factory=list)
    recover: Literal["retry", "replan", "stop"] | None = None
    say: str | None = None
    repeat: int | None = Field(default=None, ge=1)
    turns: list["Turn"] | None = None
    var: str = Field(default="i", pattern=r"^[a-z]$")

    @model_validator(mode="after")
    def _one_action(self) -> "Turn":
        given = [a for a in _ACTIONS if getattr(self, a) is not None]
        if len(given) != 1:
            raise ValueError(f"a turn needs exactly one of {', '.join(_ACTIONS)} (got {', '.join(given) or 'none'})")
        if self.tool is not None and not self.id:
            raise ValueError("a tool turn needs an id (tool results are keyed by call id)")
        if self.repeat is not None and not self.turns:
            raise ValueError("repeat needs turns")
        return self

    def message(self) -> AIMessage:
        if self.plan is not None:
            steps = [{"title": s} if isinstance(s, str) else s.model_dump(exclude_none=True) for s in self.plan]
            return plan(goal=self.goal, criteria=self.criteria, reason=self.reason, steps=steps)
        if self.tool is not None:
            return tool_call(self.tool, self.args, id=self.id, content=self.thought)
        if self.complete is not None:
            fs = [f if isinstance(f, str) else f.model_dump() for f in self.findings]
            return complete(self.complete, findings=fs, result=self.outcome)
        if self.review is not None:
            return review(self.review, self.summary, self.issues)
        if self.recover is not None:
            return recover(self.recover, self.reason)
        return AIMessage(content=self.say or "")


def _subst(value: Any, i: int, var: str = "i") -> Any:
    if isinstance(value, str):
        return value.replace("{" + var + "}", str(i))
    if isinstance(value, list):
        return [_subst(v, i, var) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, i, var) for k, v in value.items()}
    return value


def expand(turns: Iterable[Turn]) -> list[Turn]:
    """The turns with every ``repeat`` unrolled (``{i}`` substituted)."""
    out: list[Turn] = []
    for t in turns:
        if t.repeat is None:
            out.append(t)
            continue
        raw = [x.model_dump(exclude_defaults=True) for x in t.turns or []]
        for i in range(1, t.repeat + 1):
            out.extend(expand(Turn.model_validate(_subst(r, i, t.var)) for r in raw))
    return out


class ToolSpec(_M):
    name: str
    description: str = ""
    side_effects: bool = False


class ModelPoint(_M):
    role: str
    #: The role's call number (1-based).
    call: int = Field(ge=1)


class Crash(_M):
    """A crash point; exactly one of the three positions.

    * ``after_executor_steps``: ``run_graph(stop_after=N)`` (the process stops between nodes);
    * ``in_tool_call``: the process dies inside that tool call (``tool.called`` recorded, no result);
    * ``in_model_call``: the process dies inside that model call (nothing of the node committed).

    ``mode``: ``simulated`` (an exception unwinds the graph) or ``sigkill`` (a child process runs
    the case and kills itself with SIGKILL; only for the first crash, not ``after_executor_steps``).
    Every crash is followed by a resume with a new graph object on the same stores.
    """

    after_executor_steps: int | None = Field(default=None, ge=1)
    in_tool_call: str | None = None
    in_model_call: ModelPoint | None = None
    mode: Literal["simulated", "sigkill"] = "simulated"

    @model_validator(mode="after")
    def _one(self) -> "Crash":
        n = sum(x is not None for x in (self.after_executor_steps, self.in_tool_call, self.in_model_call))
        if n != 1:
            raise ValueError("a crash needs exactly one of after_executor_steps, in_tool_call, in_model_call")
        if self.mode == "sigkill" and self.after_executor_steps is not None:
            raise ValueError("mode sigkill needs in_tool_call or in_model_call")
        return self


class InjectEvent(_M):
    kind: str
    actor: Literal["user", "agent", "system", "tool"] = "user"
    payload: dict[str, Any] = Field(default_factory=dict)


class Inject(_M):
    """Events another actor records (e.g. an approval request from the UI) while the run is
    paused after ``after_executor_steps``; the run then continues (no resume event)."""

    after_executor_steps: int = Field(ge=1)
    events: list[InjectEvent] = Field(min_length=1)


# checks ------------------------------------------------------------------------------------
CallsSel = Literal["all", "first", "last", "after_first_reset"] | list[int]


class _Sel(_M):
    #: Whose model calls: a role, or ``*`` for every role.
    role: str = "executor"
    #: ``all``, ``first``, ``last``, ``after_first_reset`` or role-call numbers (1-based, negative from the end).
    calls: CallsSel = "all"
    #: Only calls made after at least this many tool results.
    min_steps: int = 0
    #: Only calls made after the first injected event (see ``inject``).
    after_inject: bool = False
    #: Only calls made before the event of this kind (first occurrence), e.g. ``permission.granted``.
    before_event: str | None = None


class PromptContains(_Sel):
    check: Literal["prompt_contains"]
    text: list[str]


class PromptExcludes(_Sel):
    check: Literal["prompt_excludes"]
    text: list[str]


class ExternalOnly(_Sel):
    """Every occurrence of each text is inside an ``<external_content>`` block (and it occurs)."""

    check: Literal["external_only"]
    text: list[str]


class ManifestCheck(_Sel):
    """The block (an id, or ``$latest_tool``: the newest tool call's block) in each selected
    call's manifest has these properties."""

    check: Literal["manifest"]
    block: str
    included: bool | None = None
    trust: str | None = None
    priority: str | None = None
    layer: str | None = None
    compressed: bool | None = None
    reason_contains: str | None = None
    superseded_by: str | None = None
    #: The block may be absent from a call (then only present ones are checked).
    optional: bool = False


class BudgetCheck(_Sel):
    """Every selected prompt fits ``budget - reserve_for_output`` and its manifest fits too."""

    check: Literal["within_budget"]


class ResetsCheck(_M):
    check: Literal["resets"]
    min: int = 0
    max: int | None = None


class RefetchCheck(_M):
    """Every compressed tool result is re-fetchable byte-exact; at least ``min_compressed``."""

    check: Literal["refetch"]
    min_compressed: int = 0
    #: Also fetch the ``#L<a>-<b>`` slice and compare it with those lines of the raw output.
    slice: list[int] | None = None


class StateCheck(_M):
    """A field of the final TaskContext at a dotted path (list indices allowed, ``-1`` = last)."""

    check: Literal["state"]
    path: str
    equals: Any = None
    contains: Any = None
    not_contains: Any = None
    length: int | None = None
    min_length: int | None = None
    is_null: bool | None = None


class EventsCheck(_M):
    """The event log: kinds present/absent, counts, an ordered subsequence, or the exact kind
    sequence of the events whose kind is in ``only``."""

    check: Literal["events"]
    contains: list[str] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    sequence: list[str | dict[str, Any]] = Field(default_factory=list)
    exact: list[str] | None = None
    only: list[str] | None = None


class EventCheck(_M):
    """Events of ``kind`` whose payload has these values: ``count`` of them (default: at least one)."""

    check: Literal["event"]
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    count: int | None = None


class ToolsRunCheck(_M):
    """Which scripted tool calls really ran (in this process, over every segment)."""

    check: Literal["tools_run"]
    not_run: list[str] = Field(default_factory=list)
    once: list[str] = Field(default_factory=list)


Check = Annotated[
    PromptContains | PromptExcludes | ExternalOnly | ManifestCheck | BudgetCheck | ResetsCheck | RefetchCheck
    | StateCheck | EventsCheck | EventCheck | ToolsRunCheck,
    Field(discriminator="check"),
]


class Case(_M):
    """One scenario (one JSON file in ``tests/eval_cases/``)."""

    id: str
    category: Literal["missing", "pollution", "conflict", "distortion", "overload", "security", "recovery"]
    description: str = ""
    request: str
    #: Hard constraints, verbatim; default: the request's own "do not ..." lines.
    constraints: list[str] | None = None
    success_criteria: list[str] = Field(default_factory=list)
    permissions: Permissions = Field(default_factory=Permissions)
    budget: int = Field(default=8000, ge=500)
    reserve_for_output: int = Field(default=1000, ge=0)
    #: Tools offered to the executor (default: every tool the script calls, no side effects).
    tools: list[ToolSpec] | None = None
    script: dict[Literal["planner", "executor", "reviewer", "recovery"], list[Turn]]
    tool_results: dict[str, ToolResult] = Field(default_factory=dict)
    crashes: list[Crash] = Field(default_factory=list)
    inject: list[Inject] = Field(default_factory=list)
    #: Answers to approval interrupts, in order (passed as ``Command(resume=answer)``).
    approvals: list[Any] = Field(default_factory=list)
    #: Files (path relative to the root: text) of a real workspace; the tools then include the
    #: workspace tools with their path policy (see :class:`WorkspaceCaseTools`).
    workspace: dict[str, str] | None = None
    requires: list[Literal["approvals", "path_scopes"]] = Field(default_factory=list)
    checks: list[Check] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "Case":
        if sum(c.mode == "sigkill" for c in self.crashes) > 1 or any(c.mode == "sigkill" for c in self.crashes[1:]):
            raise ValueError("crashes: only the first crash may use mode sigkill")
        return self


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = []
    for x in loc:
        if isinstance(x, int):
            parts.append(f"[{x}]")
        else:
            parts.append(("." if parts else "") + str(x))
    return "".join(parts) or "(top level)"


def load_case(path: str | Path) -> Case:
    """Read and validate one case; raises :class:`CaseError` naming the file and the field."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseError(f"{p}: cannot read the case file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise CaseError(f"{p}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    try:
        case = Case.model_validate(raw)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise CaseError(f"{p}: field {_field_path(first['loc'])}: {first['msg']}{more}") from exc
    return case


def load_cases(folder: str | Path) -> list[tuple[Path, Case]]:
    """Every ``*.json`` case in ``folder`` (sorted by file name); ids must be unique."""
    d = Path(folder)
    if not d.is_dir():
        raise CaseError(f"{d}: no such folder of eval cases; pass --cases DIR")
    files = sorted(d.glob("*.json"))
    if not files:
        raise CaseError(f"{d}: no *.json case files")
    out: list[tuple[Path, Case]] = []
    seen: dict[str, Path] = {}
    for f in files:
        c = load_case(f)
        if c.id in seen:
            raise CaseError(f"{f}: field id: {c.id!r} is already used by {seen[c.id].name}")
        seen[c.id] = f
        out.append((f, c))
    return out


def default_cases_dir() -> Path:
    """``tests/eval_cases`` of the working directory, else of the source checkout."""
    here = Path("tests/eval_cases")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[1] / "tests" / "eval_cases"


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
class SimulatedKill(BaseException):
    """Raised inside a tool or model call to stop the process there (not an ``Exception``, so
    nothing in the graph handles it as a tool error)."""


@dataclass
class _Plan:
    """A case, compiled: the per-role AI messages and the tool results by call id."""

    script: dict[str, list[AIMessage]]
    results: dict[str, ToolResult]
    tool_names: list[str]


def _compile(case: Case) -> _Plan:
    script: dict[str, list[AIMessage]] = {}
    results: dict[str, ToolResult] = {}
    names: list[str] = []
    for role, turns in case.script.items():
        flat = expand(turns)
        script[role] = [t.message() for t in flat]
        for t in flat:
            if t.tool is not None:
                if t.tool not in names:
                    names.append(t.tool)
                if t.result is not None:
                    results[str(t.id)] = t.result
    results.update(case.tool_results)
    return _Plan(script, results, names)


class CaseTools:
    """The tool executor of a case: scripted results by call id (as ``graphs.demo.DemoTools``).

    Records every call it really runs in ``executed``; dies (``SimulatedKill`` or SIGKILL) inside
    the call named by ``kill_call`` the first time it is run.
    """

    accepts_scopes = True  # execute(call_id, tool, arguments, scopes)

    def __init__(self, case: Case, compiled: _Plan, kill_call: str | None = None, sigkill: bool = False):
        self.case = case
        self.compiled = compiled
        self.kill_call = kill_call
        self.sigkill = sigkill
        self.executed: list[str] = []
        self.raw: dict[str, str] = {}
        self.workspace: Any = None

    def schemas(self) -> list[dict[str, Any]]:
        specs = self.case.tools or [ToolSpec(name=n) for n in self.compiled.tool_names]
        return [function_schema(s.name, s.description or f"Scripted tool {s.name}.") for s in specs]

    def has_side_effects(self, tool: str) -> bool:
        return any(s.name == tool and s.side_effects for s in self.case.tools or [])

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Any = ()) -> ToolOutcome:
        if self.kill_call is not None and call_id == self.kill_call:
            self.kill_call = None
            if self.sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedKill(f"killed inside tool call {call_id}")
        self.executed.append(call_id)
        spec = self.compiled.results.get(call_id)
        if spec is not None:
            out = spec.outcome(call_id)
        elif self.workspace is not None and tool in self._ws_names():
            out = self.workspace.execute(call_id, tool, arguments, scopes)
        else:
            out = ToolOutcome("error", f"eval: no scripted result for call id {call_id!r} ({tool})")
        self.raw[call_id] = out.output
        return out

    def _ws_names(self) -> set[str]:
        return {s.get("function", s).get("name") for s in self.workspace.schemas()} if self.workspace else set()


class WorkspaceCaseTools(CaseTools):
    """:class:`CaseTools` over a real workspace (the case's ``workspace`` files in a temp folder):
    the workspace tools' own policy (``check``: paths resolved, file scopes, risk) decides, calls
    without a scripted result run for real (issue 3's :class:`nodes.workspace.WorkspaceTools`)."""

    def __init__(self, case: Case, compiled: _Plan, root: Path, **kw: Any):
        super().__init__(case, compiled, **kw)
        from nodes.workspace import WorkspaceTools

        self.workspace = WorkspaceTools(root)

    def schemas(self) -> list[dict[str, Any]]:
        names = self._ws_names()
        own = [s for s in super().schemas() if s["function"]["name"] not in names]
        return [*self.workspace.schemas(), *own]

    def has_side_effects(self, tool: str) -> bool:
        return self.workspace.has_side_effects(tool) if tool in self._ws_names() else super().has_side_effects(tool)

    def check(self, tool: str, args: dict[str, Any], scopes: Any = ()) -> Any:
        if tool in self._ws_names():
            return self.workspace.check(tool, args, scopes)
        return ("medium", f"{tool} has side effects", ()) if super().has_side_effects(tool) else ("low", "", ())

    def recover(self, call_id: str, tool: str, arguments: dict[str, Any], scopes: Any = ()) -> Any:
        return self.workspace.recover(call_id, tool, arguments, scopes)


class CaseModel(ScriptedChatModel):
    """The case's scripted model; dies inside the model call named by ``kill_at`` (once)."""

    kill_at: tuple[str, int] | None = None
    sigkill: bool = False

    def _answer(self, messages: Any, meta: dict[str, Any]) -> AIMessage:
        if self.kill_at is not None and meta.get("role") == self.kill_at[0] \
                and int(meta.get("role_call", -1)) + 1 == self.kill_at[1]:
            self.kill_at = None
            if self.sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedKill(f"killed inside {meta.get('role')} model call {meta.get('role_call', 0) + 1}")
        return super()._answer(messages, meta)


@dataclass
class CaseResult:
    case: Case
    path: Path | None
    status: Literal["passed", "failed", "pending"]
    failures: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class _Run:
    case: Case
    events: list[Event]
    state: TaskContext
    prompts: dict[str, str]
    executed: list[str]
    raw: dict[str, str]
    stores: Any
    checkpoints: int
    inject_seq: int | None
    run_error: str | None
    project: Any = None
    tmp: Any = None


_PROBES: dict[str, bool] = {}


def _new_project(path: str) -> Project:
    return open_project(path)


def _tools(case: Case, compiled: _Plan, root: str | Path, **kw: Any) -> CaseTools:
    if case.workspace is None:
        return CaseTools(case, compiled, **kw)
    ws = Path(root) / "workspace"
    if ws.exists():  # a resume after a SIGKILL: the child's workspace, as it left it
        return WorkspaceCaseTools(case, compiled, ws, **kw)
    for rel, text in case.workspace.items():
        f = ws / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    ws.mkdir(parents=True, exist_ok=True)
    return WorkspaceCaseTools(case, compiled, ws, **kw)


def _graph(case: Case, project: Project, model: CaseModel, tools: CaseTools, budget: int | None) -> Any:
    return build_orchestrator(model, tools=tools, checkpointer=project.checkpointer, stores=project.stores,
                              budget=budget or case.budget, reserve_for_output=case.reserve_for_output)


def _task(case: Case) -> TaskContext:
    return new_task(case.request, case.id, constraints=case.constraints, success_criteria=case.success_criteria,
                    permissions=case.permissions)


def _child_main() -> None:  # pragma: no cover - runs in a subprocess that SIGKILLs itself
    """``python -c 'from graphs.eval import _child_main; _child_main()' CASE DB [BUDGET]``: run a
    case's first segment until its sigkill crash point."""
    case = load_case(sys.argv[1])
    budget = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    compiled = _compile(case)
    crash = case.crashes[0]
    tools = _tools(case, compiled, Path(sys.argv[2]).parent, kill_call=crash.in_tool_call, sigkill=True)
    model = CaseModel(script=compiled.script, sigkill=True,
                      kill_at=(crash.in_model_call.role, crash.in_model_call.call) if crash.in_model_call else None)
    project = _new_project(sys.argv[2])
    run_graph(_graph(case, project, model, tools, budget), project.stores, case.id, _task(case))
    print("finished without being killed")


def _execute(case: Case, path: Path | None, budget: int | None) -> _Run:
    compiled = _compile(case)
    tmp = tempfile.TemporaryDirectory(prefix="taskctx-eval-")
    sigkill = bool(case.crashes) and case.crashes[0].mode == "sigkill"
    crashes = list(case.crashes)
    db = ":memory:"
    run_error: str | None = None
    input_state: TaskContext | None = _task(case)
    resume = False
    if sigkill:
        if path is None:
            raise CaseError(f"case {case.id}: a sigkill crash needs the case file on disk")
        db = str(Path(tmp.name) / "eval.sqlite")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                          os.environ.get("PYTHONPATH")]))}
        child = subprocess.run(
            [sys.executable, "-c", "from graphs.eval import _child_main; _child_main()", str(path), db, str(budget or "")],
            capture_output=True, text=True, timeout=120, env=env,
        )
        if child.returncode != -signal.SIGKILL:
            raise RuntimeError(f"the child process was not killed (exit {child.returncode}): "
                               f"{(child.stdout + child.stderr).strip()[-500:]}")
        crashes.pop(0)
        input_state, resume = None, True
    project = _new_project(db)
    tools = _tools(case, compiled, tmp.name)
    model = CaseModel(script=compiled.script)
    stops: dict[int, list[Any]] = {}
    for c in crashes:
        if c.after_executor_steps is not None:
            stops.setdefault(c.after_executor_steps, []).append(c)
    for inj in case.inject:
        stops.setdefault(inj.after_executor_steps, []).append(inj)
    pending_kills = [c for c in crashes if c.after_executor_steps is None]
    approvals = list(case.approvals)
    inject_seq: int | None = None
    for _segment in range(200):
        if pending_kills and tools.kill_call is None and model.kill_at is None:
            k = pending_kills.pop(0)
            tools.kill_call = k.in_tool_call
            model.kill_at = (k.in_model_call.role, k.in_model_call.call) if k.in_model_call else None
        g = _graph(case, project, model, tools, budget)
        done_steps = 0
        if input_state is None:
            vals = g.get_state(thread_config(case.id)).values
            done_steps = TaskContext.model_validate(vals).progress.executor_steps if vals else 0
        nxt = min((s for s in stops if s > done_steps), default=None)
        try:
            res = run_graph(g, project.stores, case.id, input_state, stop_after=nxt, resume=resume)
        except SimulatedKill:
            input_state, resume = None, True
            continue
        except Exception as exc:  # noqa: BLE001 - a case run that raises is a failed case
            run_error = f"{type(exc).__name__}: {exc}"
            break
        input_state = None
        if res.stopped_early and nxt is not None:
            resume = False
            for item in stops.pop(nxt):
                if isinstance(item, Crash):
                    resume = True
                else:
                    inject_seq = _inject(project, g, case.id, item, inject_seq)
            continue
        snap = g.get_state(thread_config(case.id))
        interrupts = [i for t in snap.tasks for i in getattr(t, "interrupts", ())]
        if interrupts and approvals:
            from langgraph.types import Command

            input_state, resume = Command(resume=approvals.pop(0)), False  # type: ignore[assignment]
            continue
        if interrupts:
            run_error = f"the run is waiting on an interrupt and the case has no approval answer left: {interrupts[0].value!r}"
        break
    else:
        run_error = "the run did not finish in 200 segments"
    if run_error is None and (stops or pending_kills or tools.kill_call or model.kill_at):
        left = sorted(stops) or [k.in_tool_call or k.in_model_call for k in pending_kills] or [tools.kill_call or model.kill_at]
        run_error = f"the run finished before these crash or inject points were reached: {left}"
    events = project.stores.events.read(case.id)
    vals = _graph(case, project, model, tools, budget).get_state(thread_config(case.id)).values
    state = TaskContext.model_validate(vals) if vals else replay(events)
    nck = project.conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
                               (case.id,)).fetchone()[0]
    run = _Run(case=case, events=events, state=state, prompts={}, executed=tools.executed, raw=tools.raw,
               stores=project.stores, checkpoints=int(nck), inject_seq=inject_seq, run_error=run_error,
               project=project, tmp=tmp)
    return run


def _inject(project: Project, graph: Any, task_id: str, inj: Inject, first_seq: int | None) -> int:
    """Append the injected events and fold them into the checkpoint (as the tools node did)."""
    from context import new_event

    cfg = thread_config(task_id)
    ctx = TaskContext.model_validate(graph.get_state(cfg).values)
    evs = [new_event(e.kind, e.payload, actor=e.actor, correlation_id=task_id) for e in inj.events]  # type: ignore[arg-type]
    numbered = [e.model_copy(update={"seq": ctx.events.cursor + 1 + i}) for i, e in enumerate(evs)]
    appended = project.stores.events.append(task_id, numbered)
    new = replay(appended, ctx)
    parts = {p: getattr(new, p) for p in type(new).model_fields if getattr(new, p) != getattr(ctx, p)}
    graph.update_state(cfg, parts, as_node="tools")
    return first_seq if first_seq is not None else appended[0].seq


# --------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------
@dataclass
class _Call:
    event: Event
    role: str
    role_call: int
    steps_before: int
    reset: bool


def _calls(run: _Run) -> list[_Call]:
    out: list[_Call] = []
    steps = 0
    per_role: Counter[str] = Counter()
    for e in run.events:
        if e.kind == "tool.result.received":
            steps += 1
        elif e.kind == "context.built":
            role = e.payload["role"]
            per_role[role] += 1
            out.append(_Call(e, role, per_role[role], steps, bool(e.payload.get("transcript_reset"))))
    return out


def _select(run: _Run, sel: _Sel) -> list[_Call]:
    calls = [c for c in _calls(run) if sel.role == "*" or c.role == sel.role]
    if sel.min_steps:
        calls = [c for c in calls if c.steps_before >= sel.min_steps]
    if sel.after_inject:
        calls = [c for c in calls if run.inject_seq is not None and c.event.seq > run.inject_seq]
    if sel.before_event:
        first = next((e.seq for e in run.events if e.kind == sel.before_event), None)
        if first is not None:
            calls = [c for c in calls if c.event.seq < first]
    if sel.calls == "all":
        return calls
    if sel.calls == "first":
        return calls[:1]
    if sel.calls == "last":
        return calls[-1:]
    if sel.calls == "after_first_reset":
        idx = next((i for i, c in enumerate(calls) if c.reset), None)
        return [] if idx is None else calls[idx:]
    by_n = {c.role_call: c for c in calls}
    n = len(calls)
    out = []
    for k in sel.calls:
        c = by_n.get(k) if k > 0 else (calls[n + k] if -n <= k < 0 else None)
        if c is not None:
            out.append(c)
    return out


def _prompt(run: _Run, c: _Call) -> str:
    ref = c.event.payload.get("prompt_ref")
    if not ref:
        return ""
    if ref not in run.prompts:
        run.prompts[ref] = run.stores.artifacts.get(ref).decode("utf-8")
    return run.prompts[ref]


def _where(c: _Call) -> str:
    return f"{c.role} call {c.role_call} (after {c.steps_before} tool results)"


_EXT = re.compile(r"<external_content[^>]*>.*?</external_content>", re.S)


def _dig(obj: Any, path: str) -> Any:
    cur: Any = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    for part in path.split("."):
        if isinstance(cur, list):
            cur = cur[int(part)]
        elif isinstance(cur, dict):
            if part not in cur:
                raise KeyError(f"no field {part!r} in {path!r}")
            cur = cur[part]
        else:
            raise KeyError(f"{path!r}: cannot go into {type(cur).__name__} at {part!r}")
    return cur


def _payload_matches(e: Event, want: dict[str, Any]) -> bool:
    return all(e.payload.get(k) == v for k, v in want.items())


def _check(run: _Run, chk: Any) -> list[str]:  # noqa: C901 - one branch per check kind
    f: list[str] = []
    name = chk.check
    if isinstance(chk, _Sel):
        calls = _select(run, chk)
        if not calls:
            return [f"{name}: no {chk.role} model call matches the selection"]
    if name == "prompt_contains":
        for c in calls:
            p = _prompt(run, c)
            for t in chk.text:
                if t not in p:
                    f.append(f"prompt_contains: {t!r} is not in the prompt of {_where(c)}")
                    break
    elif name == "prompt_excludes":
        for c in calls:
            p = _prompt(run, c)
            for t in chk.text:
                if t in p:
                    f.append(f"prompt_excludes: {t!r} is in the prompt of {_where(c)}")
                    break
    elif name == "external_only":
        seen = {t: 0 for t in chk.text}
        for c in calls:
            p = _prompt(run, c)
            spans = [(m.start(), m.end()) for m in _EXT.finditer(p)]
            for t in chk.text:
                for m in re.finditer(re.escape(t), p):
                    seen[t] += 1
                    if not any(a <= m.start() and m.end() <= b for a, b in spans):
                        f.append(f"external_only: {t!r} appears outside <external_content> in {_where(c)}")
                        break
        f += [f"external_only: {t!r} never appears in the selected prompts" for t, n in seen.items() if n == 0]
    elif name == "manifest":
        for c in calls:
            blocks = c.event.payload["blocks"]
            bid = chk.block
            if bid == "$latest_tool":
                tools = [b for b in blocks if b["id"].startswith("tool.")]
                b = tools[-1] if tools else None
            else:
                b = next((x for x in blocks if x["id"] == bid), None)
            if b is None:
                if not chk.optional:
                    f.append(f"manifest: no block {bid} in {_where(c)}")
                continue
            for key in ("included", "trust", "priority", "layer", "compressed", "superseded_by"):
                want = getattr(chk, key)
                if want is not None and b.get(key) != want:
                    f.append(f"manifest: block {b['id']} has {key}={b.get(key)!r}, want {want!r} in {_where(c)}"
                             f" (reason: {b['reason']})")
            if chk.reason_contains and chk.reason_contains not in b["reason"]:
                f.append(f"manifest: block {b['id']} reason {b['reason']!r} lacks {chk.reason_contains!r} in {_where(c)}")
    elif name == "within_budget":
        for c in calls:
            p = c.event.payload
            limit = p["budget"] - run.case.reserve_for_output
            if p["prompt_tokens"] > limit:
                f.append(f"within_budget: {_where(c)} has {p['prompt_tokens']} prompt tokens, over {limit}")
            used = sum(b["tokens"] for b in p["blocks"] if b["included"])
            if used > limit:
                f.append(f"within_budget: {_where(c)} includes {used} block tokens, over {limit}")
    elif name == "resets":
        n = sum(1 for c in _calls(run) if c.role == "executor" and c.reset)
        if n < chk.min or (chk.max is not None and n > chk.max):
            f.append(f"resets: {n} transcript restarts, want {chk.min}..{chk.max if chk.max is not None else 'any'}")
    elif name == "refetch":
        comp = [e for e in run.events if e.kind == "tool.result.received" and e.payload.get("compressed")]
        if len(comp) < chk.min_compressed:
            f.append(f"refetch: {len(comp)} compressed tool results, want at least {chk.min_compressed}")
        for e in comp:
            cid = e.payload["call_id"]
            data = run.stores.artifacts.get(e.payload["raw_ref"])
            raw = run.raw.get(cid)
            if raw is not None and data != raw.encode("utf-8"):
                f.append(f"refetch: artifact of {cid} differs from the raw tool output")
            if chk.slice and raw is not None:
                a, b = chk.slice
                got = run.stores.artifacts.get(f"{e.payload['raw_ref']}#L{a}-{b}")
                want = "".join(raw.splitlines(keepends=True)[a - 1 : b]).encode("utf-8")
                if got != want:
                    f.append(f"refetch: slice #L{a}-{b} of {cid} differs from those lines of the raw output")
    elif name == "state":
        try:
            v = _dig(run.state, chk.path)
        except (KeyError, IndexError, ValueError) as exc:
            return [f"state: {exc}"]
        if "equals" in chk.model_fields_set and v != chk.equals:
            f.append(f"state: {chk.path} is {v!r}, want {chk.equals!r}")
        if "contains" in chk.model_fields_set and not _contains(v, chk.contains):
            f.append(f"state: {chk.path} ({_short(v)}) does not contain {chk.contains!r}")
        if "not_contains" in chk.model_fields_set and _contains(v, chk.not_contains):
            f.append(f"state: {chk.path} ({_short(v)}) contains {chk.not_contains!r}")
        if chk.length is not None and len(v) != chk.length:
            f.append(f"state: {chk.path} has length {len(v)}, want {chk.length}")
        if chk.min_length is not None and len(v) < chk.min_length:
            f.append(f"state: {chk.path} has length {len(v)}, want at least {chk.min_length}")
        if chk.is_null is not None and (v is None) != chk.is_null:
            f.append(f"state: {chk.path} is {_short(v)}, want {'null' if chk.is_null else 'a value'}")
    elif name == "events":
        kinds = [e.kind for e in run.events]
        cnt = Counter(kinds)
        f += [f"events: no {k} event" for k in chk.contains if not cnt[k]]
        f += [f"events: {cnt[k]} {k} events, want none" for k in chk.absent if cnt[k]]
        f += [f"events: {cnt[k]} {k} events, want {n}" for k, n in chk.counts.items() if cnt[k] != n]
        if chk.sequence:
            i = 0
            for e in run.events:
                want = chk.sequence[i]
                k, pl = (want, {}) if isinstance(want, str) else (want["kind"], want.get("payload", {}))
                if e.kind == k and _payload_matches(e, pl):
                    i += 1
                    if i == len(chk.sequence):
                        break
            if i < len(chk.sequence):
                f.append(f"events: the log lacks the sequence {chk.sequence} in order (matched {i} of them)")
        if chk.exact is not None:
            got = [k for k in kinds if chk.only is None or k in chk.only]
            if got != chk.exact:
                f.append(f"events: kinds {got} != {chk.exact}")
    elif name == "event":
        hits = [e for e in run.events if e.kind == chk.kind and _payload_matches(e, chk.payload)]
        if chk.count is None and not hits:
            f.append(f"event: no {chk.kind} event with {chk.payload}")
        elif chk.count is not None and len(hits) != chk.count:
            f.append(f"event: {len(hits)} {chk.kind} events with {chk.payload}, want {chk.count}")
    elif name == "tools_run":
        cnt = Counter(run.executed)
        f += [f"tools_run: {cid} ran {cnt[cid]} times, want never" for cid in chk.not_run if cnt[cid]]
        f += [f"tools_run: {cid} ran {cnt[cid]} times, want once" for cid in chk.once if cnt[cid] != 1]
    return f


def _contains(v: Any, x: Any) -> bool:
    if isinstance(v, str):
        return str(x) in v
    if isinstance(v, list):
        return x in v or any(isinstance(i, str) and isinstance(x, str) and x in i for i in v)
    if isinstance(v, dict):
        return x in v
    return False


def _short(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= 200 else s[:197] + "..."


def _invariants(run: _Run) -> list[str]:
    f = []
    folded = replay(run.events)
    if folded != run.state:
        diff = [p for p in type(folded).model_fields if getattr(folded, p) != getattr(run.state, p)]
        f.append(f"invariant: the event log does not fold to the checkpointed state (parts differ: {', '.join(diff)})")
    for e in run.events:
        if e.kind == "tool.result.received" and e.payload.get("raw_ref"):
            raw = run.raw.get(e.payload["call_id"])
            data = run.stores.artifacts.get(e.payload["raw_ref"])
            if raw is not None and data != raw.encode("utf-8"):
                f.append(f"invariant: artifact of {e.payload['call_id']} is not the exact tool output")
    return f


def _stats(run: _Run) -> dict[str, int]:
    cnt = Counter(e.kind for e in run.events)
    compressed = sum(1 for e in run.events if e.kind == "tool.result.received" and e.payload.get("compressed"))
    return {
        "state_updates": max(0, run.checkpoints - 1),
        "context_packs_built": cnt["context.built"],
        "tool_results_compressed": compressed,
        "checkpoint_saves": run.checkpoints,
        "resume_events": cnt["resume.started"],
        "tasks_with_compression": int(compressed > 0),
        "tasks_with_resume": int(cnt["resume.started"] > 0),
    }


def _close(run: _Run) -> None:
    run.project.close()
    run.tmp.cleanup()


def probe(feature: str) -> bool:
    """Whether a feature a case may require is there (checked by behaviour, once per process)."""
    if feature in _PROBES:
        return _PROBES[feature]
    ok = False
    try:
        if feature == "approvals":
            case = Case.model_validate({
                "id": "probe-approvals", "category": "security", "request": "probe",
                "permissions": {"requires_approval": ["deploy"]},
                "script": {"planner": [{"plan": ["deploy"]}],
                           "executor": [{"tool": "deploy", "id": "p1", "result": {"output": "deployed"}},
                                        {"complete": "done"}],
                           "reviewer": [{"review": "approve"}]},
                "approvals": [{"action": "reject", "reason": "probe"}],
                "checks": [{"check": "events", "contains": []}],
            })
            run = _execute(case, None, None)
            kinds = {e.kind for e in run.events}
            ok = "permission.requested" in kinds and "p1" not in run.executed
            _close(run)
        elif feature == "path_scopes":
            case = Case.model_validate({
                "id": "probe-paths", "category": "security", "request": "probe",
                "permissions": {"file_scopes": ["src/**"]}, "workspace": {"src/a.txt": "a", "secret.txt": "s"},
                "script": {"planner": [{"plan": ["read"]}],
                           "executor": [{"tool": "read_file", "args": {"path": "../secret.txt"}, "id": "p1",
                                         "result": {"output": "secret", "kind": "file_read"}},
                                        {"complete": "done"}],
                           "reviewer": [{"review": "approve"}]},
                "checks": [{"check": "events", "contains": []}],
            })
            run = _execute(case, None, None)
            ok = "p1" not in run.executed and any(e.kind == "permission.denied" for e in run.events)
            _close(run)
    except Exception:  # noqa: BLE001 - a probe that crashes means the feature is not usable
        ok = False
    _PROBES[feature] = ok
    return ok


def run_case(case: Case, path: Path | None = None, *, budget: int | None = None) -> CaseResult:
    """Run one case and its checks (``budget`` overrides the case's)."""
    missing = [f for f in case.requires if not probe(f)]
    if missing:
        return CaseResult(case, path, "pending", note="waits for " + "; ".join(FEATURES[m] for m in missing))
    t0 = time.perf_counter()
    try:
        run = _execute(case, path, budget)
    except Exception as exc:  # noqa: BLE001
        return CaseResult(case, path, "failed", [f"run: {type(exc).__name__}: {exc}"], seconds=time.perf_counter() - t0)
    failures: list[str] = []
    try:
        if run.run_error:
            failures.append(f"run: {run.run_error}")
        failures += _invariants(run)
        for chk in case.checks:
            failures += _check(run, chk)
        stats = _stats(run)
    finally:
        _close(run)
    return CaseResult(case, path, "failed" if failures else "passed", failures, stats, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
@dataclass
class EvalReport:
    folder: Path
    results: list[CaseResult]

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if r.status == "failed"]

    def by_category(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for cat in CATEGORIES:
            rs = [r for r in self.results if r.case.category == cat]
            out[cat] = {"cases": len(rs), "passed": sum(r.status == "passed" for r in rs),
                        "failed": sum(r.status == "failed" for r in rs), "pending": sum(r.status == "pending" for r in rs)}
        return out

    def stats(self) -> dict[str, int]:
        tot = dict.fromkeys(STAT_KEYS, 0)
        for r in self.results:
            for k, v in r.stats.items():
                tot[k] += v
        return tot

    def to_json(self) -> dict[str, Any]:
        cats = self.by_category()
        return {
            "cases_dir": str(self.folder),
            "total": {"cases": len(self.results), "passed": sum(r.passed for r in self.results),
                      "failed": len(self.failed), "pending": sum(r.status == "pending" for r in self.results)},
            "categories": {k: {**v, "pass_rate": _rate(v)} for k, v in cats.items()},
            "stats": self.stats(),
            "cases": [{"id": r.case.id, "category": r.case.category, "file": r.path.name if r.path else None,
                       "status": r.status, "failures": r.failures, "note": r.note, "stats": r.stats,
                       "seconds": round(r.seconds, 3)} for r in self.results],
        }


def _rate(v: dict[str, int]) -> float | None:
    ran = v["passed"] + v["failed"]
    return round(v["passed"] / ran, 4) if ran else None


def run_eval(folder: str | Path | None = None, *, only: Iterable[str] | None = None,
             categories: Iterable[str] | None = None, budget: int | None = None,
             on_result: Callable[[CaseResult], None] | None = None) -> EvalReport:
    """Load and run every case of ``folder`` (default :func:`default_cases_dir`); ``only`` picks
    case ids (``CaseError`` names any that does not exist)."""
    d = Path(folder) if folder is not None else default_cases_dir()
    cases = load_cases(d)
    ids, cats = set(only or ()), set(categories or ())
    unknown = sorted(ids - {c.id for _, c in cases})
    if unknown:
        raise CaseError(f"no case with id {', '.join(unknown)} in {d}; `taskctx eval --json` lists the case ids")
    results = []
    for p, c in cases:
        if (ids and c.id not in ids) or (cats and c.category not in cats):
            continue
        r = run_case(c, p, budget=budget)
        results.append(r)
        if on_result:
            on_result(r)
    return EvalReport(d, results)


def format_report(rep: EvalReport) -> str:
    folder = Path(rep.folder)
    try:
        folder = folder.resolve().relative_to(Path.cwd().resolve())  # as the user would type it
    except ValueError:
        pass
    n = len(rep.results)
    lines = [f"taskctx eval: {n} case{'' if n == 1 else 's'} from {folder}", ""]
    lines.append(f"{'category':<12} {'cases':>5} {'passed':>6} {'failed':>6} {'pending':>7} {'pass rate':>9}")
    cats = rep.by_category()
    for k, v in cats.items():
        rate = _rate(v)
        lines.append(f"{k:<12} {v['cases']:>5} {v['passed']:>6} {v['failed']:>6} {v['pending']:>7} "
                     f"{'-' if rate is None else f'{rate:.0%}':>9}")
    tot = rep.to_json()["total"]
    ran = tot["passed"] + tot["failed"]
    total_rate = f"{tot['passed'] / ran:.0%}" if ran else "-"
    lines.append(f"{'total':<12} {tot['cases']:>5} {tot['passed']:>6} {tot['failed']:>6} {tot['pending']:>7} "
                 f"{total_rate:>9}")
    lines += ["", "context statistics"]
    lines += [f"  {k:<24} {v:>8,}" for k, v in rep.stats().items()]
    pend = [r for r in rep.results if r.status == "pending"]
    if pend:
        lines += ["", "pending (not run until the feature is there):"]
        lines += [f"  {r.case.id}: {r.note}" for r in pend]
    if rep.failed:
        lines += ["", "failed:"]
        for r in rep.failed:
            lines.append(f"  {r.case.id} ({r.case.category}, {r.path.name if r.path else '-'}):")
            lines += [f"    - {x}" for x in r.failures[:8]]
            if len(r.failures) > 8:
                lines.append(f"    - ... {len(r.failures) - 8} more")
    return "\n".join(lines)


def eval_command(
    cases: Annotated[Path | None, typer.Option("--cases", help="Folder of case files (*.json); default tests/eval_cases.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    case_id: Annotated[list[str] | None, typer.Option("--case", help="Run only this case id (repeatable).")] = None,
) -> None:
    """Run the scenario cases: pass rate per category and context statistics."""
    try:
        rep = run_eval(cases, only=case_id)
    except CaseError as exc:
        sys.stderr.write("error: " + " ".join(str(exc).split()) + "\n")
        raise typer.Exit(2) from exc
    if as_json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(format_report(rep) + "\n")
    if rep.failed:
        raise typer.Exit(1)
