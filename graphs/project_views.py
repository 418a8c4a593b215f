"""What a :class:`graphs.Project` shows of its tasks: the views, the model calls, the export.

:class:`ProjectViews` holds the read-only methods of a project (``inspect``, ``model_calls``,
``model_call_totals``, ``tasks``, ``export``), on the project's ``stores`` and ``checkpointer``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from context import CallTotals, ModelCall, TaskInfo, call_totals, list_tasks

from .costs import Prices, priced_calls
from .inspection import TaskView, inspect_task
from .runner import export_run

__all__ = ["DEFAULT_OUT", "ProjectViews"]

#: Where a run command exports a task (``<out>/<task_id>/``) when no ``--out`` is given.
DEFAULT_OUT = Path(".taskctx/runs")


class ProjectViews:
    """The read-only methods of a project, on its ``stores`` and ``checkpointer``."""

    stores: Any
    checkpointer: Any

    def inspect(self, task_id: str, *, full: bool = False) -> TaskView:
        """What ``taskctx inspect`` shows of a task (read-only).

        Args:
            task_id: The task.
            full: Read and fold the whole log (else a long sound log is read from its checkpoint).

        Returns:
            The view (:class:`graphs.TaskView`).

        Raises:
            UnknownTaskError: The database does not know the task.
            UnshowableTaskError: The task is too damaged to show.
        """
        return inspect_task(self.stores, self.checkpointer, task_id, full=full)

    def model_calls(
        self, task_id: str, *, prices: Prices = None, priced_as: str | None = None, prompts: bool = False
    ) -> list[ModelCall]:
        """One record per model call of a task (a running one's so far), from its event log, priced.

        Args:
            task_id: The task.
            prices: The price table: None (the list prices, :data:`nodes.prices.LIST_PRICES`), a
                TOML or JSON file, or model name -> prices over them (USD per 1M tokens).
            priced_as: Price every call as this model (an offline model's as the one it stands for).
            prompts: Read each call's prompt as sent from the artifact store into ``prompt``.

        Returns:
            The calls in order (:class:`context.ModelCall`).

        Raises:
            UnknownTaskError: The database has no events of the task.
            InvalidInputError: ``prices`` is not a price table.
        """
        artifacts = self.stores.artifacts if prompts else None
        return priced_calls(self.stores.events, task_id, prices=prices, priced_as=priced_as, artifacts=artifacts)

    def model_call_totals(self, task_id: str, *, prices: Prices = None, priced_as: str | None = None) -> CallTotals:
        """A task's model calls summed for the task and per role (tokens, usage, latency, cost).

        Args:
            task_id: The task.
            prices: As in :meth:`model_calls`.
            priced_as: As in :meth:`model_calls`.

        Returns:
            The totals (:class:`context.CallTotals`).

        Raises:
            UnknownTaskError: As in :meth:`model_calls`.
        """
        calls = priced_calls(self.stores.events, task_id, prices=prices, priced_as=priced_as, manifests=False)
        return call_totals(calls)

    def tasks(self) -> list[TaskInfo]:
        """Every task of the database, the most recent activity first (damaged ones marked).

        Returns:
            One :class:`context.TaskInfo` per task (:func:`context.list_tasks`); a registered task
            with no event whose checkpoint has folded events is damaged
            (:func:`graphs.diagnosis.unstarted_damage`), not "not started".
        """
        from dataclasses import replace

        from .diagnosis import unstarted_damage

        out = []
        for t in list_tasks(self.stores):
            found = [] if t.started or t.damage else unstarted_damage(self.stores, self.checkpointer, t.task_id)
            out.append(replace(t, status="damaged", damage=tuple(found)) if found else t)
        return out

    def export(self, task_id: str, out: str | Path = DEFAULT_OUT) -> Path:
        """Write a task's run files to ``<out>/<task_id>/`` (:func:`graphs.runner.export_run`).

        Args:
            task_id: The task.
            out: The export root.

        Returns:
            The task's folder (``trace.jsonl``, ``state.json``, ``context_pack.md``, ``manifests.jsonl``).

        Raises:
            UnknownTaskError: The task has no events.
        """
        return export_run(self.stores, task_id, out)
