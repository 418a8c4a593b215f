"""A frozen corpus of real event logs, one folder per data schema version
(tests/fixtures/event_logs/v<N>/, recorded by make_corpus.py there): the current code reads every
log of every version, and the reducer folds each to exactly the state stored beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context import replay
from context.events import Event
from context.models import SCHEMA_VERSION
from context.verify import check_events

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "event_logs"
LOGS = sorted(CORPUS.glob("v*/*.jsonl"))


def _version(log: Path) -> int:
    return int(log.parent.name.removeprefix("v"))


def test_the_corpus_holds_every_schema_version_up_to_the_current_one() -> None:
    assert sorted({_version(log) for log in LOGS}) == list(range(SCHEMA_VERSION + 1)), (
        f"record v{SCHEMA_VERSION} with tests/fixtures/event_logs/make_corpus.py (its docstring says how)"
    )


@pytest.mark.parametrize("log", LOGS, ids=[f"{p.parent.name}/{p.stem}" for p in LOGS])
def test_a_frozen_log_is_read_and_folds_to_its_stored_state(log: Path) -> None:
    lines = log.read_text(encoding="utf-8").splitlines()
    events = [Event.model_validate_json(line) for line in lines]
    assert check_events(events) == []
    state = replay(events)
    assert state.events.schema_version == _version(log)
    stored = log.with_suffix(".state.json").read_text(encoding="utf-8")
    assert json.loads(state.model_dump_json()) == json.loads(stored)  # a readable diff first
    assert state.model_dump_json(indent=2) + "\n" == stored
    if _version(log) == SCHEMA_VERSION:  # the current code writes back the very bytes it reads
        assert [e.to_json() for e in events] == lines
