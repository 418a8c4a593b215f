"""Approval answers and the approval questions of one tool-node run (in ``interrupt()`` order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context.events import Event

__all__ = ["APPROVAL_ACTIONS", "REJECTED_AGAIN", "ApprovalQuestions", "normalize_answer"]

#: Start of the result of a call the user already rejected (same tool, same arguments).
REJECTED_AGAIN = "refused: the user already rejected this exact call"


APPROVAL_ACTIONS = ("approve", "edit", "reject", "respond")


def normalize_answer(answer: Any) -> dict[str, Any]:
    """An approval answer as ``{"action": ..., ...}``; anything unreadable is a rejection.

    Args:
        answer: The resume value: an action name, or a dict with ``action`` (``approve``, ``edit``
            with ``arguments``, ``reject`` with ``reason``, ``respond`` with ``message``).

    Returns:
        The answer as a dict.
    """
    if isinstance(answer, str) and answer in APPROVAL_ACTIONS:
        answer = {"action": answer}
    if not isinstance(answer, dict) or answer.get("action") not in APPROVAL_ACTIONS:
        return {"action": "reject", "reason": f"unreadable approval answer {str(answer)[:100]!r}"}
    out = dict(answer)
    if out["action"] == "edit" and not isinstance(out.get("arguments"), dict):
        return {"action": "reject", "reason": "edit without an arguments object"}
    return out


class ApprovalQuestions:
    """The approval questions of one node run, in ``interrupt()`` order.

    The ``permission.requested`` events its earlier attempts appended, then the ones this attempt
    appends (``asked``); ``pos`` counts those this attempt has put so far. ``put_before``: the calls
    whose question an earlier attempt put and acted on; ``put_now``: whether this attempt has put a
    question (one question per node run).

    Args:
        own: The events earlier attempts of this node run appended.
    """

    def __init__(self, own: Sequence[Event]):
        self.own = list(own)
        self.asked: list[Event] = [e for e in own if e.kind == "permission.requested"]
        self.pos = 0
        self.put_before = {e.payload["call_id"] for e in self.asked if self.acted_on(e)}
        self.put_now = False

    def acted_on(self, req: Event) -> bool:
        """Whether an earlier attempt acted on the answer to ``req`` (granted or denied the call after it).

        Args:
            req: A ``permission.requested`` event.

        Returns:
            True when a ``permission.granted`` or ``permission.denied`` of its call follows it.
        """
        return any(
            e.kind in ("permission.granted", "permission.denied")
            and e.seq > req.seq
            and e.payload["call_id"] == req.payload["call_id"]
            for e in self.own
        )

    def may_ask(self, again: str | None = None) -> bool:
        """Whether this attempt may put a new question: none put yet, in this attempt or an earlier one.

        Args:
            again: The call being put up again after an interruption: its own earlier question does
                not count.

        Returns:
            True when a question may be put.
        """
        return not self.put_now and not (self.put_before - {again})
