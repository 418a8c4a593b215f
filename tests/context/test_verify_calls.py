"""check_events on tool calls: a reused call id is another call, an answer without a run is no damage."""

from __future__ import annotations

from context import new_event
from context.verify import check_events


def _log(*items: tuple[str, dict[str, object], str]) -> list[object]:
    head = [new_event("task.created", {"task_id": "t", "original_request": "Do it."}, actor="user")]
    rows = head + [new_event(kind, payload, actor=actor) for kind, payload, actor in items]
    return [e.model_copy(update={"seq": i}) for i, e in enumerate(rows, 1)]


def _called(key: str) -> tuple[str, dict[str, object], str]:
    return ("tool.called", {"call_id": "call_0", "tool": "kv_set", "idempotency_key": key}, "agent")


def _result(actor: str = "tool") -> tuple[str, dict[str, object], str]:
    return ("tool.result.received", {"call_id": "call_0", "status": "ok"}, actor)


def test_one_call_id_of_two_answers_is_two_calls() -> None:
    assert check_events(_log(_called("m1:call_0"), _result(), _called("m2:call_0"), _result())) == []


def test_a_call_recorded_twice_is_damage() -> None:
    found = check_events(_log(_called("m1:call_0"), _result(), _called("m1:call_0"), _result()))
    assert found == ["event log: seq 4 calls call_0 again (first called at seq 2)"]
    found = check_events(_log(_called("m1:call_0"), _result(), _result()))
    assert found == ["event log: seq 4 answers call call_0 again (first answered at seq 3)"]


def test_an_answer_without_a_run_is_no_damage_a_tools_result_without_a_call_is() -> None:
    # a reviewer's rejection (by the user), a call left when a new message came (by the system)
    assert check_events(_log(_result("user"), _called("m2:call_0"), _result(), _result("system"))) == []
    assert check_events(_log(_result())) == ["event log: seq 2 answers call call_0, which was not called before it"]
