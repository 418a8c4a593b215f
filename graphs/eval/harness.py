"""Run one case (:func:`run_case`): the real default graph with the case's scripted model and tools.

Through its crash points (each followed by a resume with a new graph object), injected events
and approval answers; then the invariants, the case's checks and the context statistics.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langgraph.types import Command

from context import TaskContext, masked_bytes, new_event, replay
from context.events import MemoryNoted, TaskCreated

from ..memory_store import confirm_memory, forget_memory, list_memories, rebuild_memory
from ..orchestrator import build_orchestrator, new_task
from ..project import Project, open_project
from ..runner import run_graph, thread_config
from .cases import Case, CaseError, Crash, Inject, load_case
from .checks import run_check
from .finished import FinishedRun
from .mechanisms import MECHANISMS
from .scripted import CaseModel, CaseTools, CompiledCase, SimulatedKill, WorkspaceCaseTools, compile_case

__all__ = ["FEATURES", "MECHANISMS", "STAT_KEYS", "CaseResult", "probe", "run_case"]

STAT_KEYS = (
    "state_updates",
    "context_packs_built",
    "tool_results_compressed",
    "checkpoint_saves",
    "resume_events",
    "tasks_with_compression",
    "tasks_with_resume",
)
#: Features a case may require; a case waits (pending) until its feature's probe passes.
FEATURES = {
    "approvals": "requires_approval enforced with an approval interrupt",
    "path_scopes": "file_scopes enforced on path arguments in the tool node",
}


@dataclass
class CaseResult:
    """The result of one case: its status, failures, context statistics and time.

    Attributes:
        case: The case.
        path: Its file, or None.
        status: ``passed``, ``failed`` or ``pending`` (a feature it requires is missing).
        failures: One line per failure.
        stats: The context statistics (:data:`STAT_KEYS`).
        seconds: Wall time of the run.
        note: Why it is pending.
    """

    case: Case
    path: Path | None
    status: Literal["passed", "failed", "pending"]
    failures: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""

    @property
    def passed(self) -> bool:
        """Whether the case passed."""
        return self.status == "passed"


_PROBES: dict[str, bool] = {}


def check_off(off: Iterable[str]) -> frozenset[str]:
    """``off`` as a set of mechanism names.

    Args:
        off: Names of :data:`MECHANISMS`.

    Returns:
        The set.

    Raises:
        CaseError: A name is unknown (it and the known names are named).
    """
    bad = sorted(set(off) - set(MECHANISMS))
    if bad:
        raise CaseError(f"--off {bad[0]}: no such mechanism; use one of {', '.join(MECHANISMS)}")
    return frozenset(off)


def _new_project(path: str) -> Project:
    return open_project(path)


def _tools(case: Case, compiled: CompiledCase, root: str | Path, **kw: Any) -> CaseTools:
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


def _graph(
    case: Case,
    project: Project,
    model: CaseModel,
    tools: CaseTools,
    budget: int | None,
    off: frozenset[str] = frozenset(),
    root: Path | None = None,
) -> Any:
    return build_orchestrator(
        model,
        tools=tools,
        checkpointer=project.checkpointer,
        stores=project.stores,
        budget=budget or case.budget,
        reserve_for_output=case.reserve_for_output,
        memory=None if "memory" in off else project.memory(root),
        policies=[] if "policy" in off else None,
        freshness="freshness" not in off,
        reports="reports" not in off,
    )


def _workspace(case: Case, root: str | Path) -> Path | None:
    return Path(root) / "workspace" if case.workspace is not None else None


def _memory_ops(case: Case, project: Project, ws: Path | None) -> None:
    """Apply the case's :class:`MemoryOp` list (earlier tasks and the user) through :mod:`graphs.memory_store`.

    Then the case's workspace is written again.
    """

    def earlier_task(tid: str) -> None:
        if not project.stores.events.last_seq(tid):
            e = new_event(
                "task.created", TaskCreated(task_id=tid, original_request=f"(earlier task {tid})"), actor="user"
            )
            project.stores.events.append(tid, [e.model_copy(update={"seq": 1})])

    for op in case.memory:
        for rel, text in op.files_now.items():
            if ws is None:
                raise CaseError(f"case {case.id}: memory files_now needs a workspace")
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        if op.task_id:
            earlier_task(op.task_id)
        if op.confirm is not None:
            confirm_memory(
                project,
                op.confirm,
                kind=op.kind,
                namespace=op.namespace,
                subject=op.subject,
                files=op.files,
                root=ws,
                task_id=op.task_id,
            )
        elif op.forget is not None:
            keys = [v.record.key for v in list_memories(project) if v.record.text == op.forget]
            if not keys:
                raise CaseError(f"case {case.id}: memory forget {op.forget!r}: no stored memory has this text")
            for k in keys:
                forget_memory(project, k, reason="eval case")
        elif op.propose is not None:
            tid = str(op.task_id)
            e = new_event("memory.proposed", MemoryNoted(kind=op.kind, text=op.propose), actor="agent")
            project.stores.events.append(tid, [e.model_copy(update={"seq": project.stores.events.last_seq(tid) + 1})])
        elif op.rebuild:
            project.memory().clear()
            rebuild_memory(project)
    if ws is not None and case.memory:
        for rel, text in (case.workspace or {}).items():
            (ws / rel).write_text(text, encoding="utf-8")


def _task(case: Case) -> TaskContext:
    return new_task(
        case.request,
        case.id,
        constraints=case.constraints,
        success_criteria=case.success_criteria,
        permissions=case.permissions,
    )


def child_main() -> None:  # pragma: no cover - runs in a subprocess that SIGKILLs itself
    """Run a case's first segment until its sigkill crash point: the subprocess of a sigkill crash.

    Run as ``python -c 'from graphs.eval.harness import child_main; child_main()' CASE DB [BUDGET]``.
    """
    case = load_case(sys.argv[1])
    budget = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    compiled = compile_case(case)
    crash = case.crashes[0]
    tools = _tools(case, compiled, Path(sys.argv[2]).parent, kill_call=crash.in_tool_call, sigkill=True)
    model = CaseModel(
        script=compiled.script,
        sigkill=True,
        kill_at=(crash.in_model_call.role, crash.in_model_call.call) if crash.in_model_call else None,
    )
    project = _new_project(sys.argv[2])
    root = _workspace(case, Path(sys.argv[2]).parent)
    _memory_ops(case, project, root)
    run_graph(_graph(case, project, model, tools, budget, root=root), project.stores, case.id, _task(case))
    print("finished without being killed")


def _sigkill_child(case: Case, path: Path | None, budget: int | None, tmp: str) -> str:
    """Run the case's first segment in a subprocess that SIGKILLs itself at the first crash point.

    Returns:
        The path of the SQLite database the child left behind (in ``tmp``).

    Raises:
        CaseError: The case has no file on disk (the child loads it from there).
        RuntimeError: The child was not killed.
    """
    if path is None:
        raise CaseError(f"case {case.id}: a sigkill crash needs the case file on disk")
    db = str(Path(tmp) / "eval.sqlite")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])
        ),
    }
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from graphs.eval.harness import child_main; child_main()",
            str(path),
            db,
            str(budget or ""),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if child.returncode != -signal.SIGKILL:
        raise RuntimeError(
            f"the child process was not killed (exit {child.returncode}): "
            f"{(child.stdout + child.stderr).strip()[-500:]}"
        )
    return db


@dataclass
class _Segments:
    """A case run from segment to segment: its crash points, injections and approval answers."""

    case: Case
    project: Project
    model: CaseModel
    tools: CaseTools
    budget: int | None
    off: frozenset[str]
    root: Path | None
    #: Crash points and injections by the executor steps after which they happen.
    stops: dict[int, list[Crash | Inject]] = field(default_factory=dict)
    #: Crash points inside a tool or model call, in order; the first is armed at a time.
    kills: list[Crash] = field(default_factory=list)
    approvals: list[Any] = field(default_factory=list)
    inject_seq: int | None = None

    def graph(self) -> Any:
        """A new graph object on the run's stores."""
        return _graph(self.case, self.project, self.model, self.tools, self.budget, self.off, self.root)

    def arm_kill(self) -> None:
        """Arm the next crash point inside a call, when none is armed."""
        if self.kills and self.tools.kill_call is None and self.model.kill_at is None:
            k = self.kills.pop(0)
            self.tools.kill_call = k.in_tool_call
            self.model.kill_at = (k.in_model_call.role, k.in_model_call.call) if k.in_model_call else None

    def pause(self, graph: Any, at: int) -> bool:
        """Apply the crash points and injections of executor step ``at``; whether to resume next."""
        resume = False
        for item in self.stops.pop(at):
            _edit(self.tools, item)
            if isinstance(item, Crash):
                resume = True
            elif item.events:
                self.inject_seq = _inject(self.project, graph, self.case.id, item, self.inject_seq)
        return resume

    def run(self, input_state: TaskContext | Command | None, resume: bool) -> str | None:
        """Run every segment (at most 200); the error that ended the run, or None."""
        for _segment in range(200):
            self.arm_kill()
            g = self.graph()
            done_steps = 0
            if input_state is None:
                vals = g.get_state(thread_config(self.case.id)).values
                done_steps = TaskContext.model_validate(vals).progress.executor_steps if vals else 0
            nxt = min((s for s in self.stops if s > done_steps), default=None)
            try:
                res = run_graph(g, self.project.stores, self.case.id, input_state, stop_after=nxt, resume=resume)
            except SimulatedKill:
                input_state, resume = None, True
                continue
            except Exception as exc:  # noqa: BLE001 - a case run that raises is a failed case
                return f"{type(exc).__name__}: {exc}"
            input_state = None
            if res.stopped_early and nxt is not None:
                resume = self.pause(g, nxt)
                continue
            snap = g.get_state(thread_config(self.case.id))
            interrupts = [i for t in snap.tasks for i in getattr(t, "interrupts", ())]
            if interrupts and self.approvals:
                input_state, resume = Command(resume=self.approvals.pop(0)), False
                continue
            if interrupts:
                left = interrupts[0].value
                return f"the run is waiting on an interrupt and the case has no approval answer left: {left!r}"
            return self.unreached()
        return "the run did not finish in 200 segments"

    def unreached(self) -> str | None:
        """The crash or inject points the run finished before reaching, as an error, or None."""
        if not (self.stops or self.kills or self.tools.kill_call or self.model.kill_at):
            return None
        left = (
            sorted(self.stops)
            or [k.in_tool_call or k.in_model_call for k in self.kills]
            or [self.tools.kill_call or self.model.kill_at]
        )
        return f"the run finished before these crash or inject points were reached: {left}"


def _execute(case: Case, path: Path | None, budget: int | None, off: frozenset[str] = frozenset()) -> FinishedRun:
    compiled = compile_case(case)
    tmp = tempfile.TemporaryDirectory(prefix="taskctx-eval-")
    crashes = list(case.crashes)
    sigkill = bool(crashes) and crashes[0].mode == "sigkill"
    db = ":memory:"
    input_state: TaskContext | None = _task(case)
    resume = False
    if sigkill:
        db = _sigkill_child(case, path, budget, tmp.name)
        crashes.pop(0)
        input_state, resume = None, True
    project = _new_project(db)
    tools = _tools(case, compiled, tmp.name)
    root = _workspace(case, tmp.name)
    if not sigkill:  # (the child applied them to the same database)
        _memory_ops(case, project, root)
    model = CaseModel(script=compiled.script)
    seg = _Segments(case, project, model, tools, budget, off, root, approvals=list(case.approvals))
    for c in crashes:
        if c.after_executor_steps is not None:
            seg.stops.setdefault(c.after_executor_steps, []).append(c)
    for inj in case.inject:
        seg.stops.setdefault(inj.after_executor_steps, []).append(inj)
    seg.kills = [c for c in crashes if c.after_executor_steps is None]
    run_error = seg.run(input_state, resume)
    events = project.stores.events.read(case.id)
    vals = seg.graph().get_state(thread_config(case.id)).values
    state = TaskContext.model_validate(vals) if vals else replay(events)
    nck = project.conn.execute(
        "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''", (case.id,)
    ).fetchone()[0]
    return FinishedRun(
        case_id=case.id,
        reserve_for_output=case.reserve_for_output,
        events=events,
        state=state,
        prompts={},
        executed=tools.executed,
        raw=tools.raw,
        stores=project.stores,
        checkpoints=int(nck),
        inject_seq=seg.inject_seq,
        run_error=run_error,
        project=project,
        tmp=tmp,
    )


def _edit(tools: CaseTools, item: Crash | Inject) -> None:
    """A person's edits of the workspace while the task is paused (``Crash.edits``, ``Inject.edits``)."""
    if not item.edits:
        return
    if tools.workspace is None:
        raise CaseError("edits need a case workspace")
    for rel, text in item.edits.items():
        f = Path(tools.workspace.root) / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")


def _inject(project: Project, graph: Any, task_id: str, inj: Inject, first_seq: int | None) -> int:
    """Append the injected events and fold them into the checkpoint (as the tools node did)."""
    cfg = thread_config(task_id)
    ctx = TaskContext.model_validate(graph.get_state(cfg).values)
    evs = [new_event(e.kind, e.payload, actor=e.actor, correlation_id=task_id) for e in inj.events]  # type: ignore[arg-type]
    numbered = [e.model_copy(update={"seq": ctx.events.cursor + 1 + i}) for i, e in enumerate(evs)]
    appended = project.stores.events.append(task_id, numbered)
    new = replay(appended, ctx)
    parts = {p: getattr(new, p) for p in type(new).model_fields if getattr(new, p) != getattr(ctx, p)}
    graph.update_state(cfg, parts, as_node="tools")
    return first_seq if first_seq is not None else appended[0].seq


def _invariants(run: FinishedRun) -> list[str]:
    f = []
    folded = replay(run.events)
    if folded != run.state:
        diff = [p for p in type(folded).model_fields if getattr(folded, p) != getattr(run.state, p)]
        f.append(f"invariant: the event log does not fold to the checkpointed state (parts differ: {', '.join(diff)})")
    for e in run.events:
        if e.kind == "tool.result.received" and e.payload.get("raw_ref"):
            raw = run.raw.get(e.payload["call_id"])
            data = run.stores.artifacts.get(e.payload["raw_ref"])
            if raw is not None and data != masked_bytes(raw):  # exact, secrets masked (context.secrets)
                f.append(f"invariant: artifact of {e.payload['call_id']} is not the exact tool output")
    return f


def _stats(run: FinishedRun) -> dict[str, int]:
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


def _close(run: FinishedRun) -> None:
    run.project.close()
    run.tmp.cleanup()


def probe(feature: str) -> bool:
    """Whether a feature a case may require is there, checked by behaviour once per process.

    Args:
        feature: A name of :data:`FEATURES`.

    Returns:
        True when the feature works.
    """
    if feature in _PROBES:
        return _PROBES[feature]
    ok = False
    try:
        if feature == "approvals":
            case = Case.model_validate(
                {
                    "id": "probe-approvals",
                    "category": "security",
                    "request": "probe",
                    "permissions": {"requires_approval": ["deploy"]},
                    "script": {
                        "planner": [{"plan": ["deploy"]}],
                        "executor": [
                            {"tool": "deploy", "id": "p1", "result": {"output": "deployed"}},
                            {"complete": "done"},
                        ],
                        "reviewer": [{"review": "approve"}],
                    },
                    "approvals": [{"action": "reject", "reason": "probe"}],
                    "checks": [{"check": "events", "contains": []}],
                }
            )
            run = _execute(case, None, None)
            kinds = {e.kind for e in run.events}
            ok = "permission.requested" in kinds and "p1" not in run.executed
            _close(run)
        elif feature == "path_scopes":
            case = Case.model_validate(
                {
                    "id": "probe-paths",
                    "category": "security",
                    "request": "probe",
                    "permissions": {"file_scopes": ["src/**"]},
                    "workspace": {"src/a.txt": "a", "secret.txt": "s"},
                    "script": {
                        "planner": [{"plan": ["read"]}],
                        "executor": [
                            {
                                "tool": "read_file",
                                "args": {"path": "../secret.txt"},
                                "id": "p1",
                                "result": {"output": "secret", "kind": "file_read"},
                            },
                            {"complete": "done"},
                        ],
                        "reviewer": [{"review": "approve"}],
                    },
                    "checks": [{"check": "events", "contains": []}],
                }
            )
            run = _execute(case, None, None)
            ok = "p1" not in run.executed and any(e.kind == "permission.denied" for e in run.events)
            _close(run)
    except Exception:  # noqa: BLE001 - a probe that crashes means the feature is not usable
        ok = False
    _PROBES[feature] = ok
    return ok


def run_case(
    case: Case, path: Path | None = None, *, budget: int | None = None, off: Iterable[str] = frozenset()
) -> CaseResult:
    """Run one case and its checks.

    Besides its own checks, each case checks two invariants: the event log folds to the
    checkpointed state, and every recorded tool result is re-fetchable byte-exact.

    Args:
        case: The case.
        path: Its file (a sigkill crash runs it from there), or None.
        budget: A token budget overriding the case's.
        off: Mechanisms switched off (:data:`MECHANISMS`), to show which cases fail without them.

    Returns:
        The result (``pending`` when a feature it requires is missing).

    Raises:
        CaseError: An unknown mechanism in ``off``.
    """
    off = check_off(off)
    missing = [f for f in case.requires if not probe(f)]
    if missing:
        return CaseResult(case, path, "pending", note="waits for " + "; ".join(FEATURES[m] for m in missing))
    t0 = time.perf_counter()
    try:
        run = _execute(case, path, budget, off)
    except Exception as exc:  # noqa: BLE001
        return CaseResult(case, path, "failed", [f"run: {type(exc).__name__}: {exc}"], seconds=time.perf_counter() - t0)
    failures: list[str] = []
    try:
        if run.run_error:
            failures.append(f"run: {run.run_error}")
        failures += _invariants(run)
        for chk in case.checks:
            failures += run_check(run, chk)
        stats = _stats(run)
    finally:
        _close(run)
    return CaseResult(case, path, "failed" if failures else "passed", failures, stats, time.perf_counter() - t0)
