"""The case file schema of ``taskctx eval`` (one JSON file per case) and its loaders."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from context import InvalidInputError, Permissions
from nodes import ToolOutcome
from nodes.testing import complete, plan, recover, review, tool_call

from .checks import Check

__all__ = [
    "CATEGORIES",
    "Case",
    "CaseError",
    "Crash",
    "Generated",
    "Inject",
    "InjectEvent",
    "MemoryOp",
    "ModelPoint",
    "ToolResult",
    "ToolSpec",
    "Turn",
    "default_cases_dir",
    "expand",
    "load_case",
    "load_cases",
]

#: A case's category: the five ways context fails, then the mechanisms' own categories.
Category = Literal[
    "missing",
    "pollution",
    "conflict",
    "distortion",
    "overload",
    "security",
    "recovery",
    "provenance",
    "memory",
    "freshness",
    "policy",
]
#: The categories in report order (one list: ``Case.category`` is typed by it).
CATEGORIES: tuple[str, ...] = get_args(Category)


class CaseError(InvalidInputError):
    """A case file that cannot be read or does not match the schema (names the file and field)."""


# --------------------------------------------------------------------------------------------
# schema
# --------------------------------------------------------------------------------------------
class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Generated(_M):
    """A generated output: ``line`` repeated ``count`` times, or until it is ``bytes`` bytes long.

    In ``line``, ``{n}`` is the line's 1-based number and ``{call}`` the call id (``bytes``: ASCII
    ``line`` only). ``{call}`` makes each call's output distinct, so the executor does not render
    it as a pointer to an identical earlier output.
    """

    line: str
    count: int | None = Field(default=None, ge=1)
    bytes: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one(self) -> Generated:
        if (self.count is None) == (self.bytes is None):
            raise ValueError("give exactly one of count or bytes")
        return self

    def text(self) -> str:
        """The generated output."""
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
        """The result as the tool returns it.

        Args:
            call_id: The call's id (``{call}`` in a generated output).

        Returns:
            The outcome (see :class:`nodes.ToolOutcome`).
        """
        out = self.output if isinstance(self.output, str) else self.output.text().replace("{call}", call_id)
        return ToolOutcome(self.status, out, self.kind, self.path, self.modified)


class FindingSpec(_M):
    """A finding of a scripted ``complete``: its statement, evidence refs and the findings it replaces."""

    statement: str
    evidence_refs: list[str] = Field(default_factory=list)
    #: Ids of earlier findings (``<step>.f<k>``) this one replaces.
    supersedes: list[str] = Field(default_factory=list)


class PlanStepSpec(_M):
    """A step of a scripted ``plan`` (as the planner's ``submit_plan`` gives it)."""

    id: str | None = None
    title: str
    description: str = ""
    expected_output: str = ""
    depends_on: list[str] = Field(default_factory=list)


_ACTIONS = ("plan", "tool", "complete", "review", "recover", "say", "repeat")


class Turn(_M):
    """One scripted model answer; exactly one action key.

    * ``plan``: step titles or step objects (with ``goal``, ``criteria``, ``constraints``, ``reason``);
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
    #: Hard constraints the planner adds (``submit_plan`` ``constraints``).
    constraints: list[str] = Field(default_factory=list)
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
    turns: list[Turn] | None = None
    var: str = Field(default="i", pattern=r"^[a-z]$")

    @model_validator(mode="after")
    def _one_action(self) -> Turn:
        given = [a for a in _ACTIONS if getattr(self, a) is not None]
        if len(given) != 1:
            raise ValueError(f"a turn needs exactly one of {', '.join(_ACTIONS)} (got {', '.join(given) or 'none'})")
        if self.tool is not None and not self.id:
            raise ValueError("a tool turn needs an id (tool results are keyed by call id)")
        if self.repeat is not None and not self.turns:
            raise ValueError("repeat needs turns")
        return self

    def message(self) -> AIMessage:
        """The turn as the model's AI message (one tool call, or text for ``say``)."""
        if self.plan is not None:
            steps = [{"title": s} if isinstance(s, str) else s.model_dump(exclude_none=True) for s in self.plan]
            return plan(
                goal=self.goal, criteria=self.criteria, reason=self.reason, steps=steps, constraints=self.constraints
            )
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
    """The turns with every ``repeat`` unrolled and ``{i}`` substituted.

    Args:
        turns: Scripted turns.

    Returns:
        The flat list.
    """
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
    """A tool the case offers: its name, description and whether it has side effects."""

    name: str
    description: str = ""
    side_effects: bool = False


class ModelPoint(_M):
    """A model call of a role: ``role`` and its 1-based call number."""

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

    ``edits``: with ``after_executor_steps``, files of the workspace (path relative to its root:
    new text) a person changes while the task is paused, before the resume (a path under
    ``.git/`` moves HEAD).
    """

    after_executor_steps: int | None = Field(default=None, ge=1)
    in_tool_call: str | None = None
    in_model_call: ModelPoint | None = None
    mode: Literal["simulated", "sigkill"] = "simulated"
    edits: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> Crash:
        n = sum(x is not None for x in (self.after_executor_steps, self.in_tool_call, self.in_model_call))
        if n != 1:
            raise ValueError("a crash needs exactly one of after_executor_steps, in_tool_call, in_model_call")
        if self.mode == "sigkill" and self.after_executor_steps is not None:
            raise ValueError("mode sigkill needs in_tool_call or in_model_call")
        if self.edits and self.after_executor_steps is None:
            raise ValueError("edits need after_executor_steps (the task is paused there)")
        return self


class InjectEvent(_M):
    """An event another actor records: its kind, actor and payload."""

    kind: str
    actor: Literal["user", "agent", "system", "tool"] = "user"
    payload: dict[str, Any] = Field(default_factory=dict)


class Inject(_M):
    """Events another actor records while the run is paused after ``after_executor_steps``.

    For example an approval request from a UI; the run then continues (no resume event).
    """

    after_executor_steps: int = Field(ge=1)
    events: list[InjectEvent] = Field(default_factory=list)
    #: Files of the workspace (path: new text) a person changes at that point; the run goes on
    #: without a resume, so only a later read of the file can notice.
    edits: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _something(self) -> Inject:
        if not self.events and not self.edits:
            raise ValueError("an inject needs events or edits")
        return self


class MemoryOp(_M):
    """One change to the durable memory before the case's task starts, through :mod:`graphs.memory_store`.

    What earlier tasks and the user did, applied in order; exactly one action:

    * ``confirm`` (the text, with ``kind``, ``namespace``, ``subject``, ``files`` it rests on and
      ``task_id``: the earlier task it was confirmed in, recorded as a task of its own);
    * ``forget``: the text of the stored memory to forget;
    * ``propose``: working memory of the earlier task ``task_id`` (``memory.proposed``), never
      confirmed;
    * ``rebuild``: clear the store, then rebuild it from the confirmation events.

    ``files_now``: workspace files (path: text) written before the action (the world as it was
    then); after the last op the case's own ``workspace`` is written again.
    """

    confirm: str | None = None
    forget: str | None = None
    propose: str | None = None
    rebuild: bool | None = None
    kind: Literal["fact", "preference", "convention"] = "fact"
    namespace: Literal["user", "project"] = "project"
    subject: str = ""
    files: list[str] = Field(default_factory=list)
    task_id: str | None = None
    files_now: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> MemoryOp:
        given = [a for a in ("confirm", "forget", "propose", "rebuild") if getattr(self, a) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a memory op needs exactly one of confirm, forget, propose, rebuild (got {given or 'none'})"
            )
        if self.propose is not None and not self.task_id:
            raise ValueError("propose needs the task_id of the earlier task whose working memory it is")
        return self


class Case(_M):
    """One scenario (one JSON file in ``graphs/eval/case_files/``)."""

    id: str
    category: Category
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
    #: What earlier tasks and the user did to the durable memory before this task (in order).
    memory: list[MemoryOp] = Field(default_factory=list)
    checks: list[Check] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Case:
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
    """Read and validate one case file.

    Args:
        path: The JSON file.

    Returns:
        The case.

    Raises:
        CaseError: The file cannot be read or does not match the schema (the file and the field
            are named).
    """
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
    """Every ``*.json`` case in ``folder``, sorted by file name.

    Args:
        folder: The folder of cases.

    Returns:
        ``(path, case)`` pairs.

    Raises:
        CaseError: A case does not load, or two share an id.
    """
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


#: The cases shipped with taskctx (package data of ``graphs.eval``).
CASES_DIR = Path(__file__).resolve().parent / "case_files"


def default_cases_dir() -> Path:
    """The folder of the eval cases shipped in the package.

    Returns:
        ``graphs/eval/case_files`` of the installed package (absolute).
    """
    return CASES_DIR
