"""graphs.eval: ``taskctx eval``, deterministic scenario cases for the five ways context fails, for security
and for recovery.

A **case** is one JSON file (schema: :class:`Case`): the request and its constraints, the
permissions, a scripted sequence of model outputs per role (:class:`Turn`, with ``repeat`` for
long runs) and the tool results they get (inline ``result`` or ``tool_results`` keyed by call
id), optional crash points (:class:`Crash`: stop after N executor steps, or die inside a tool or
model call, simulated or with a real SIGKILL in a subprocess), events another actor records while
the run is paused (:class:`Inject`), answers to approval interrupts, and checks
(:data:`Check`, one handler per kind in :data:`CHECKS`) over the manifests (``context.built`` payload blocks), the rendered prompts (the
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

Where it sits in the pipeline: a case drives the real graph and checks what it left behind::

    case file (*.json) --> cases.py: Case --> scripted.py: CaseModel (answers per role)
                                                          + CaseTools (results by call id)
    harness.run_case: the real graph on throwaway stores; a crash, then a resume with a new graph
        events --> reducer --> TaskContext --> builder --> renderer --> model --> tool node --> events
                                 |             (manifests,              CaseModel  CaseTools    |
                                 |              prompts)                                        |
                                 +-------- checks.py: CHECKS, one handler per check kind <------+
    --> printing.py: EvalReport (pass rate per category, context statistics), as text or JSON
    --> suite.py: run_eval (a folder of cases); the ``eval`` typer command is graphs.cli.eval

Imports the wiring (``graphs.orchestrator``, ``graphs.runner``); the wiring never imports it.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from .cases import CATEGORIES, Case, CaseError, Turn, default_cases_dir, expand, load_case, load_cases
    from .checks import CHECKS, Check
    from .harness import STAT_KEYS, CaseResult, run_case
    from .printing import EvalReport, format_report
    from .scripted import CaseTools
    from .suite import run_eval

# imported on first use (PEP 562): ``import graphs.eval`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "CATEGORIES": ".cases",
        "Case": ".cases",
        "CaseError": ".cases",
        "Turn": ".cases",
        "default_cases_dir": ".cases",
        "expand": ".cases",
        "load_case": ".cases",
        "load_cases": ".cases",
        "CHECKS": ".checks",
        "Check": ".checks",
        "run_eval": ".suite",
        "STAT_KEYS": ".harness",
        "CaseResult": ".harness",
        "run_case": ".harness",
        "EvalReport": ".printing",
        "format_report": ".printing",
        "CaseTools": ".scripted",
    },
)

__all__ = [
    "CATEGORIES",
    "CHECKS",
    "STAT_KEYS",
    "Case",
    "CaseError",
    "CaseResult",
    "CaseTools",
    "Check",
    "EvalReport",
    "Turn",
    "default_cases_dir",
    "expand",
    "format_report",
    "load_case",
    "load_cases",
    "run_case",
    "run_eval",
]
