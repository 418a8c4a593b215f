"""Comparing two runs of one task (``invoke`` and a streamed run, say): timestamps and ids aside."""

from __future__ import annotations

import json
import re
from typing import Any

from context import TaskContext

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_LATENCY = re.compile(r'"latency_ms": \d+')
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def comparable(events: list[Any], state: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run's event log and final state with what differs between two equal runs taken out.

    An event's ``id`` and ``timestamp`` are dropped; a model call's ``latency_ms`` becomes
    ``<ms>`` (a measurement, like a timestamp); every timestamp left becomes ``<ts>``, every
    UUID (checkpoint ids, message ids) ``<uuid:n>``, ``n`` its order of first appearance, so two
    runs compare equal exactly when they differ in those alone (the same id in two places stays
    the same placeholder).

    Args:
        events: The task's event log.
        state: Its final state (a TaskContext, or the checkpoint's values).

    Returns:
        ``(the events as JSON dicts, the state as a JSON dict)``.
    """
    seen: dict[str, str] = {}

    def norm(text: str) -> str:
        text = _LATENCY.sub('"latency_ms": "<ms>"', _TIMESTAMP.sub("<ts>", text))
        return _UUID.sub(lambda m: seen.setdefault(m.group(0), f"<uuid:{len(seen)}>"), text)

    log = [json.loads(norm(json.dumps(e.model_dump(mode="json", exclude={"id", "timestamp"})))) for e in events]
    st = TaskContext.model_validate(state).model_dump(mode="json")
    return log, json.loads(norm(json.dumps(st, sort_keys=True)))
