"""An existing ``create_agent`` agent (three ``@tool`` tools, ``kv_set`` with a side effect), for the middleware tests.

Run as a script (``python agent_example.py DB THREAD [kill-after-tool|kill-in-tool]``) it runs the agent
on a SQLite file with LangGraph's SQLite checkpointer, and can kill itself with SIGKILL at a chosen point.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from nodes import ScriptedChatModel

REQUEST = "Find the failed worker in the app log and record it under key 'failed'. Do not delete the log."
#: The log read_log returns: long enough to be compressed (bytes are checked against its ref).
LOG = "\n".join(
    f"2026-12-01T10:{i // 60:02d}:{i % 60:02d} worker-{i} " + ("FAILED exit 137" if i == 271 else "ok")
    for i in range(400)
)
#: Where kv_set writes (one line per run of the tool): its side effect, counted by the tests.
KV_FILE = os.environ.get("AGENT_EXAMPLE_KV", "")
KILL = os.environ.get("AGENT_EXAMPLE_KILL", "")
#: Set: every model answer's call id is new (as a real provider's), and each answer naming a tool
#: is noted there, one line per model call.
UNIQUE = os.environ.get("AGENT_EXAMPLE_UNIQUE", "")
#: LangGraph's durability for the run (default: the agent's default).
DURABILITY = os.environ.get("AGENT_EXAMPLE_DURABILITY", "")
#: Set: the checkpoint after the model step that calls kv_set is not written (as a crash during
#: an ``async`` write), while that step's writes are (pending on the checkpoint before it).
#: ``all``: no checkpoint holding an AI or tool message is written, nor its writes (the whole
#: turn runs again from its request).
LOSE_STEP = os.environ.get("AGENT_EXAMPLE_LOSE_STEP", "")
#: ``none``: the run is ``invoke(None)``, ``new``: a new message, whatever ``get_state().next`` says.
RESUME = os.environ.get("AGENT_EXAMPLE_RESUME", "")
#: The first message of a run that starts anew (default: the request).
ASK = os.environ.get("AGENT_EXAMPLE_ASK", "") or REQUEST


def _id(name: str) -> str:
    if not UNIQUE:
        return name
    with open(UNIQUE, "a") as fh:
        fh.write(name + "\n")
    return f"{name}-{uuid.uuid4().hex[:8]}"


@tool
def read_log(name: str) -> str:
    """Read a log file of the app by name."""
    return LOG


@tool
def kv_get(key: str) -> str:
    """Read a key of the key-value store."""
    if KV_FILE and Path(KV_FILE).exists():
        for line in reversed(Path(KV_FILE).read_text().splitlines()):
            k, _, v = line.partition("=")
            if k == key:
                return v
    return "(not set)"


@tool
def kv_set(key: str, value: str) -> str:
    """Set a key of the key-value store (a side effect)."""
    if KV_FILE:
        with open(KV_FILE, "a") as fh:
            fh.write(f"{key}={value}\n")
    if KILL == "kill-in-tool":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"stored {key}"


TOOLS = [read_log, kv_get, kv_set]


def answer(messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
    """The agent's model: read the log, then set the key, then say done (decided from the prompt)."""
    done = {m.name for m in messages if isinstance(m, ToolMessage)}
    if "read_log" not in done:
        return AIMessage(
            content="I will read the log first.",
            tool_calls=[{"name": "read_log", "args": {"name": "app"}, "id": _id("call-read"), "type": "tool_call"}],
        )
    if "kv_set" not in done:
        return AIMessage(
            content="worker-271 failed; recording it.",
            tool_calls=[
                {
                    "name": "kv_set",
                    "args": {"key": "failed", "value": "worker-271"},
                    "id": _id("call-set"),
                    "type": "tool_call",
                }
            ],
        )
    return AIMessage(content="Recorded: worker-271 failed.")


def model() -> ScriptedChatModel:
    """The scripted model (every call answered by :func:`answer`)."""
    return ScriptedChatModel(script={}, fallback={"agent": answer, "*": answer})


class KillAfterTool(AgentMiddleware):  # type: ignore[type-arg]
    """Outermost: SIGKILL after kv_set ran and its result was recorded, before any checkpoint."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        out = handler(request)
        if KILL == "kill-after-tool" and request.tool_call["name"] == "kv_set":
            os.kill(os.getpid(), signal.SIGKILL)
        return out


def _losing_saver(conn: sqlite3.Connection) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class LosingSaver(SqliteSaver):
        """Drops the checkpoint whose last message calls kv_set, or with ``all`` each holding a reply (``LOSE_STEP``)."""

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            last = (checkpoint["channel_values"].get("messages") or [None])[-1]
            lost = isinstance(last, AIMessage) and any(tc["name"] == "kv_set" for tc in last.tool_calls)
            if LOSE_STEP == "all":
                lost = any(
                    isinstance(m, AIMessage | ToolMessage) for m in checkpoint["channel_values"].get("messages") or []
                )
            if LOSE_STEP and lost:
                cfg = config["configurable"]
                return {"configurable": {**cfg, "checkpoint_id": checkpoint["id"]}}
            kept.add(checkpoint["id"])
            return super().put(config, checkpoint, metadata, new_versions)

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            if LOSE_STEP != "all" or config["configurable"].get("checkpoint_id") in kept:
                super().put_writes(config, writes, task_id, task_path)

    kept: set[str] = set()  # (with ``all``: the writes of a checkpoint not written are lost with it)

    return LosingSaver(conn)


def main(db: str, thread: str) -> None:
    from graphs.middleware import TaskContextMiddleware

    saver = _losing_saver(sqlite3.connect(db + ".checkpoints", check_same_thread=False))
    agent = create_agent(
        model(),
        TOOLS,
        middleware=[KillAfterTool(), TaskContextMiddleware(db, side_effects=["kv_set"])],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": thread}}
    state = agent.get_state(cfg)
    kw: dict[str, Any] = {"durability": DURABILITY} if DURABILITY else {}
    # the usual check: a step to run (an empty ``next`` also when a step's writes are pending)
    again = (state.next or RESUME == "none") and RESUME != "new"
    out = agent.invoke(None if again else {"messages": [{"role": "user", "content": ASK}]}, cfg, **kw)
    print(out["messages"][-1].content)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
