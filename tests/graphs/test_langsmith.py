"""LangSmith tracing against a loopback ingest server (no network beyond 127.0.0.1).

The test sets the usual ``LANGSMITH_*`` variables (as docs/tutorials/inspect.md says), runs a short task that
is stopped after two executor steps and resumed, waits for the tracers, parses the multipart
bodies the LangSmith client posted and checks the run tree: one trace per invocation (root
``taskctx``), a run per role node under it, the model calls under their nodes (named
``<role>.model``, tagged ``role:<role>``, with the call's manifest and token measures as metadata,
equal to the ``context.built`` event of the same call), the two traces linked by ``thread_id``,
raw tool output absent (only its summary and ``artifact://`` ref), the API key absent, and any
secret-looking text in the trace exactly as the event log has it (masking cannot be bypassed).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langsmith_loopback import API_KEY, Ingest, clear_langsmith_caches

#: The loopback LangSmith's fixtures (langsmith_loopback, no_remote_network).
pytest_plugins = ["langsmith_loopback"]

# ---- the task -----------------------------------------------------------------------------
SECRET_HEAD = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub-token-shaped value early in the output
MIDDLE_MARKER = "RAW-ONLY-MIDDLE-7d1f0c"  # only in the part compression leaves out
SECRET_MIDDLE = "AKIA" + "Z7QX2M4N6P8R0T2V"  # an AWS-key-shaped value, also in the middle
BIG_LOG = (
    "build started\n"
    + f"using token {SECRET_HEAD}\n"
    + "".join(f"compile unit {i:04d} ok\n" for i in range(400))
    + f"{MIDDLE_MARKER} {SECRET_MIDDLE}\n"
    + "".join(f"link unit {i:04d} ok\n" for i in range(400))
    + "build finished: 800 units\n"
)


class BuildTools:
    def schemas(self) -> list[dict[str, Any]]:
        from nodes import function_schema

        return [function_schema("run_build", "Run the build.", {}), function_schema("list_dir", "List a folder.", {})]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        from nodes import ToolOutcome

        return ToolOutcome("ok", BIG_LOG if tool == "run_build" else "src/\ntests/\nREADME.md\n", "command")


def _model() -> Any:
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, review, tool_call

    return ScriptedChatModel(
        script={
            "planner": [
                plan("List the project", "Build it", goal="the project builds", criteria=["the build finishes"])
            ],
            "executor": [
                tool_call("list_dir", {}, id="c-ls"),
                complete("listed the project"),
                tool_call("run_build", {}, id="c-build"),
                complete("built", findings=["all 800 units built"]),
            ],
            "reviewer": [
                review("approve", "the build finishes").model_copy(
                    update={"usage_metadata": REVIEW_USAGE}  # as a provider reports it
                )
            ],
        }
    )


#: What the scripted reviewer's reply reports, in LangChain's ``usage_metadata`` shape.
REVIEW_USAGE = {
    "input_tokens": 1234,
    "output_tokens": 21,
    "total_tokens": 1255,
    "input_token_details": {"cache_read": 1024, "cache_creation": 0},
}


def test_trace_tree_metadata_and_resume_link(langsmith_loopback: Ingest, no_remote_network: list[Any]) -> None:
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_graph

    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        _model(), tools=BuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    first = run_graph(
        graph, stores, "ls-1", new_task("Build the project.\nDo not edit the sources.", "ls-1"), stop_after=1
    )
    assert first.stopped_early and not first.finished
    done = run_graph(graph, stores, "ls-1", None, resume=True)
    assert done.state.control.status == "completed"
    wait_for_all_tracers()

    events = stores.events.read("ls-1")
    runs = langsmith_loopback.runs()
    assert runs, "nothing was posted to the loopback LangSmith"
    assert not no_remote_network, f"connections beyond loopback were attempted: {no_remote_network}"
    assert all(path.startswith(("/info", "/runs", "/feedback")) for (_m, path, _h, _b) in langsmith_loopback.requests)
    # The client authenticated with the key, which never appears in a posted body.
    posts = [h for (m, _p, h, _b) in langsmith_loopback.requests if m == "POST"]
    assert posts and all({k.lower(): v for k, v in h.items()}.get("x-api-key") == API_KEY for h in posts)
    assert API_KEY.encode() not in langsmith_loopback.bodies()

    post = {rid: r["post"] for rid, r in runs.items()}
    meta = {rid: (r.get("post.extra") or {}).get("metadata", {}) for rid, r in runs.items()}
    children: dict[str | None, list[str]] = {}
    for rid, p in post.items():
        children.setdefault(p.get("parent_run_id"), []).append(rid)
    for ids in children.values():
        ids.sort(key=lambda i: post[i]["dotted_order"])

    # One trace per invocation (the run and its resume), both rooted at the graph, linked by thread_id.
    roots = children[None]
    assert [post[r]["name"] for r in roots] == ["taskctx run ls-1", "taskctx resume ls-1"]
    assert [sorted(post[r]["tags"]) for r in roots] == [
        ["command:run", "start", "stopped"],
        ["command:resume", "resume"],
    ]
    assert [(meta[r]["session_id"], meta[r]["command"]) for r in roots] == [("ls-1", "run"), ("ls-1", "resume")]
    assert meta[roots[0]]["roles"] == ["executor", "planner", "recovery", "reviewer"]
    # the stop after one executor step ends without an error (no GeneratorExit), its status in the metadata
    assert [p["name"] for p in post.values() if p.get("error")] == []
    assert [meta[r]["status"] for r in roots] == ["stopped", "completed"]
    assert (runs[roots[0]].get("post.outputs") or runs[roots[0]].get("patch.outputs")) == {
        "stopped": "stopped after 1 executor step (max_steps=1)"
    }
    assert len({post[r]["trace_id"] for r in roots}) == 2
    assert all(post[rid]["trace_id"] == post[rid]["id"] or post[rid].get("parent_run_id") for rid in post)
    assert [meta[r].get("thread_id") for r in roots] == ["ls-1", "ls-1"]
    resumed = [e for e in events if e.kind == "resume.started"]
    assert len(resumed) == 1
    assert "resume_token" not in meta[roots[0]]
    assert meta[roots[1]]["resume_token"] == resumed[0].payload["token"]
    assert {runs[r]["post"]["session_name"] for r in roots} == {"taskctx-test"}
    for _rid, p in post.items():  # every run is in one of the two traces
        assert p["trace_id"] in {post[r]["id"] for r in roots}

    # A run per node under the root; model calls under their role node.
    nodes = [rid for r in roots for rid in children.get(r, [])]
    assert [post[n]["name"] for n in nodes] == [
        "planner",
        "executor",
        "tools",
        "executor",
        "executor",
        "tools",
        "executor",
        "reviewer",
    ]
    assert [post[n]["name"] for n in children[roots[0]]] == ["planner", "executor", "tools"]  # stopped here
    for n in nodes:
        assert meta[n]["role"] == post[n]["name"] and meta[n]["thread_id"] == "ls-1"
    model_runs = []
    tool_runs: list[str] = []
    for n in nodes:
        kids = [k for k in children.get(n, []) if not post[k]["name"].startswith("after_")]
        role = post[n]["name"]
        if role == "tools":
            tool_runs.extend(kids)
            continue
        assert [post[k]["name"] for k in kids] == [f"{role}.model"]
        k = kids[0]
        assert post[k]["run_type"] == "llm" and f"role:{role}" in post[k]["tags"]
        model_runs.append(k)

    # Each model call's metadata is its context.built event: ids, budget, tokens, manifest.
    built = {e.payload["call"]: e.payload for e in events if e.kind == "context.built"}
    assert len(model_runs) == len(built) == 6
    for k in model_runs:
        m = meta[k]
        b = built[m["call"]]
        assert (m["task_id"], m["role"], m["step_id"], m["budget"]) == ("ls-1", b["role"], b["step_id"], b["budget"])
        assert (m["prompt_tokens"], m["cached_prefix_tokens"]) == (b["prompt_tokens"], b["cached_prefix_tokens"])
        assert m["manifest"]["blocks"] == [
            {x: blk[x] for x in ("id", "layer", "kind", "trust", "tokens", "included")} for blk in b["blocks"]
        ]
        assert m["manifest"]["included"] == [blk["id"] for blk in b["blocks"] if blk["included"]]
        assert m["manifest"]["dropped"] == [
            {"id": blk["id"], "reason": blk["reason"]} for blk in b["blocks"] if not blk["included"]
        ]
        assert "core.request" in m["manifest"]["included"]
        # The model run's inputs are the prompt messages (the prompt itself), nothing else.
        assert list(runs[k]["post.inputs"]) == ["messages"]
    assert [meta[k]["step_id"] for k in model_runs if meta[k]["role"] == "executor"] == ["s1", "s1", "s2", "s2"]
    # the executor's finding reaches the reviewer as the agent's claim, and the metadata says so
    rev = [k for k in model_runs if meta[k]["role"] == "reviewer"]
    assert [(b["id"], b["trust"]) for b in meta[rev[0]]["manifest"]["blocks"] if b["id"].startswith("finding.")] == [
        ("finding.s2.f1", "agent_claim")
    ]
    assert any(meta[k]["cached_prefix_tokens"] > 0 for k in model_runs)
    # provider usage: recorded in the reviewer's context.built, and the reviewer's model run in
    # LangSmith carries it as the reply's usage_metadata (LangSmith's token columns read it there)
    (rev_built,) = [e.payload for e in events if e.kind == "context.built" and e.payload["role"] == "reviewer"]
    assert rev_built["usage"] == {"input_tokens": 1234, "output_tokens": 21, "cache_read": 1024, "cache_creation": 0}
    (gen,) = runs[rev[0]]["post.outputs"]["generations"][0]
    assert gen["message"]["kwargs"]["usage_metadata"] == REVIEW_USAGE
    assert all(
        "usage_metadata" not in g["message"]["kwargs"] or g["message"]["kwargs"]["usage_metadata"] is None
        for k in model_runs
        if k != rev[0]
        for g in runs[k]["post.outputs"]["generations"][0]
    )

    # One tool run per tool call, under its tools run: the tool's name, its arguments, and the
    # result as the event log records it (the compressed summary and the ref), no error.
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    assert [(post[t]["name"], post[t]["run_type"], sorted(post[t]["tags"])) for t in tool_runs] == [
        ("list_dir", "tool", ["command:run", "seq:step:1", "start", "tool:list_dir"]),  # (the root's tags too)
        ("run_build", "tool", ["command:resume", "resume", "seq:step:1", "tool:run_build"]),
    ]
    assert [post[t]["parent_run_id"] for t in tool_runs] == [n for n in nodes if post[n]["name"] == "tools"]
    assert [runs[t]["post.inputs"] for t in tool_runs] == [{}, {}]
    assert [(meta[t]["call_id"], meta[t]["step_id"], meta[t]["task_id"]) for t in tool_runs] == [
        ("c-ls", "s1", "ls-1"),
        ("c-build", "s2", "ls-1"),
    ]
    for t, cid in zip(tool_runs, ["c-ls", "c-build"], strict=True):
        r = results[cid]
        assert runs[t]["post.outputs"] == {
            "output": {
                "status": "ok",
                "summary": r["result_summary"],
                "raw_ref": r["raw_ref"],
                "raw_chars": r["raw_chars"],
                "compressed": r["compressed"],
            }
        }
    assert results["c-build"]["compressed"] and results["c-build"]["raw_ref"] in results["c-build"]["result_summary"]
    # The reviewer's verdict is feedback on the root run of the invocation that reviewed.
    (review,) = [e.payload for e in events if e.kind == "review.completed"]
    (fb,) = langsmith_loopback.feedback()
    assert (fb["run_id"], fb["trace_id"], fb["key"], fb["score"], fb["value"]) == (
        roots[1],
        roots[1],
        "review",
        1,
        "approve",
    )
    assert fb["comment"] == review["summary"] == "the build finishes"
    (review_seq,) = [e.seq for e in events if e.kind == "review.completed"]
    assert fb["extra"] == {"issues": [], "seq": review_seq}

    # Artifacts stay out: the big log's middle (left out by compression) is nowhere in the trace,
    # its ref and its compressed summary are.
    body = langsmith_loopback.bodies().decode("utf-8")
    result = next(e.payload for e in events if e.kind == "tool.result.received" and e.payload["call_id"] == "c-build")
    assert result["compressed"] and result["raw_chars"] == len(BIG_LOG)
    # the artifact is the log as the store wrote it: exact but for its secrets (context.secrets)
    from context import masked_bytes

    stored = stores.artifacts.get(result["raw_ref"])
    assert stored == masked_bytes(BIG_LOG) and SECRET_HEAD.encode() not in stored and len(stored) < len(BIG_LOG)
    assert MIDDLE_MARKER not in body and SECRET_MIDDLE not in body
    assert result["raw_ref"] in body
    assert "compile unit 0200 ok" not in body
    # Secrets: whatever masking the tool layer applies, the trace holds tool output only as the
    # event log records it (no path from raw output to the trace bypasses the log).
    log_text = "".join(e.to_json() for e in events)
    assert (SECRET_HEAD in body) == (SECRET_HEAD in log_text)
    try:
        from context.secrets import mask_secrets
    except ImportError:  # the tool layer does not mask yet
        mask_secrets = None
    if mask_secrets is not None:  # it masks: the token is nowhere in the trace, its mask is
        assert mask_secrets(BIG_LOG).count >= 2
        assert SECRET_HEAD not in body and "[REDACTED:github_token]" in body
    assert SECRET_MIDDLE not in log_text
    # Trace size stays far from ingest limits (the state carries summaries and refs, not raw output).
    assert max(len(b) for (_m, _p, _h, b) in langsmith_loopback.requests) < 2_000_000


def test_tracing_off_posts_nothing(monkeypatch: pytest.MonkeyPatch, no_remote_network: list[Any]) -> None:
    """Without LANGSMITH_TRACING the same run makes no connection at all."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_graph

    for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.delenv(k, raising=False)
    clear_langsmith_caches()
    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        _model(), tools=BuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    assert run_graph(graph, stores, "ls-2", new_task("Build the project.", "ls-2")).state.control.status == "completed"
    wait_for_all_tracers()
    assert no_remote_network == []


# ---- the CLI, as the docs say: set the variables, run the commands --------------------------
MINI_TRAJECTORY = (
    "\n".join(
        json.dumps(x)
        for x in [
            {
                "id": "mini-1",
                "source_repo": "local/test",
                "source_path": "mini.json",
                "license": "MIT",
                "task": "List the files, then read README.md.\nDo not modify any file.",
                "n_steps": 3,
                "meta": {},
            },
            {
                "step": 1,
                "thought": "Look around.",
                "observation": "README.md\nsrc\n",
                "action": json.dumps({"name": "execute_bash", "arguments": {"command": "ls"}}),
            },
            {
                "step": 2,
                "thought": "Read it.",
                "observation": "# mini\nA tiny project.\n",
                "action": json.dumps(
                    {"name": "str_replace_editor", "arguments": {"command": "view", "path": "README.md"}}
                ),
            },
            {
                "step": 3,
                "thought": "Done.",
                "observation": "",
                "action": json.dumps({"name": "finish", "arguments": {}}),
            },
        ]
    )
    + "\n"
)

#: Runs the CLI in a child process that refuses (and reports) any connection beyond loopback.
GUARDED_CLI = """
import socket, sys
_real = socket.socket.connect
def _connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "localhost", "::1"):
        sys.stderr.write(f"REFUSED {address}\\n")
        raise OSError("network beyond loopback refused")
    return _real(self, address)
socket.socket.connect = _connect
from graphs.cli import main
sys.argv = ["taskctx", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_cli_replay_and_resume_are_two_linked_traces(langsmith_loopback: Ingest, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    traj = tmp_path / "mini.jsonl"
    traj.write_text(MINI_TRAJECTORY, encoding="utf-8")
    env = {**os.environ}  # the LANGSMITH_* variables the fixture set
    common = ["--db", str(tmp_path / "t.sqlite"), "--out", str(tmp_path / "runs")]
    for args in (
        ["replay", str(traj), "--task-id", "cli-1", "--max-steps", "1", *common],
        ["resume", "cli-1", *common],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", GUARDED_CLI, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "REFUSED" not in proc.stderr, proc.stderr
    # Each process flushed its trace before exiting (nothing to wait for here).
    runs = langsmith_loopback.runs()
    roots = sorted(
        (r["post"] for r in runs.values() if not r["post"].get("parent_run_id")), key=lambda p: p["dotted_order"]
    )
    metas = [runs[p["id"]]["post.extra"]["metadata"] for p in roots]
    assert [p["name"] for p in roots] == ["taskctx replay cli-1", "taskctx resume cli-1"]
    assert [sorted(p["tags"])[0] for p in roots] == ["command:replay", "command:resume"]
    assert [m["thread_id"] for m in metas] == ["cli-1", "cli-1"]
    assert roots[0]["trace_id"] != roots[1]["trace_id"]
    assert "resume_token" not in metas[0] and metas[1]["resume_token"]
    models = [r["post"] for r in runs.values() if r["post"]["name"].endswith(".model")]
    assert {m["name"] for m in models} == {"planner.model", "executor.model", "reviewer.model"}
    assert all(runs[m["id"]]["post.extra"]["metadata"]["task_id"] == "cli-1" for m in models)
    assert API_KEY.encode() not in langsmith_loopback.bodies()


# ---- no network: an endpoint that refuses, one that accepts and never answers ---------------
@pytest.fixture
def fresh_langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """``monkeypatch`` with no langsmith client yet; the test's ``LANGSMITH_*`` changes, its client
    and langsmith's cached reads of the variables all end with the test."""
    import langsmith.run_trees as rt

    monkeypatch.setattr(rt, "_CLIENT", None)
    clear_langsmith_caches()
    yield monkeypatch
    monkeypatch.undo()
    clear_langsmith_caches()


@pytest.fixture
def refused_endpoint() -> str:
    """A loopback port nothing listens on (bound, then closed): connections are refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback socket that accepts connections and never answers; it closes them and itself
    when the test ends (or after 120 s at the latest)."""
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(32)
    srv.settimeout(0.2)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass
        for c in conns:
            c.close()
        srv.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()


def _replay_mini(cwd: Path, tracing_endpoint: str | None) -> subprocess.CompletedProcess[str]:
    """``taskctx replay`` of the mini trajectory in ``cwd`` (relative --db/--out), with tracing to
    ``tracing_endpoint`` or without tracing; connections beyond loopback are refused."""
    import os
    import sys

    cwd.mkdir()
    (cwd / "mini.jsonl").write_text(MINI_TRAJECTORY, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    if tracing_endpoint:
        env |= {"LANGSMITH_TRACING": "true", "LANGSMITH_ENDPOINT": tracing_endpoint, "LANGSMITH_API_KEY": API_KEY}
    args = ["replay", "mini.jsonl", "--task-id", "off-1", "--db", "t.sqlite", "--out", "runs"]
    return subprocess.run(
        [sys.executable, "-c", GUARDED_CLI, *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd
    )


def _events(folder: Path) -> list[dict[str, Any]]:
    """The exported event log without the fields that differ between any two runs: event id, time,
    a model call's latency and LangGraph's (time-based) checkpoint id."""
    out = []
    for line in (folder / "runs" / "off-1" / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        e = {k: v for k, v in json.loads(line).items() if k not in ("id", "timestamp")}
        if e["kind"] == "checkpoint.created":
            e["payload"] = {k: v for k, v in e["payload"].items() if k != "checkpoint_id"}
        if e["kind"] == "context.built":  # a model call's wall-clock time differs
            e["payload"] = {k: v for k, v in e["payload"].items() if k != "latency_ms"}
        out.append(e)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["refused_endpoint", "silent_endpoint"])
def test_cli_without_network_says_so_once_and_runs_as_untraced(
    endpoint: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """With tracing on and the endpoint refusing connections (or accepting and never answering)
    the replay completes, stderr holds one ``tracing:`` line and nothing else, and the task's
    events and output are those of an untraced run."""
    url = request.getfixturevalue(endpoint)
    plain = _replay_mini(tmp_path / "plain", None)
    traced = _replay_mini(tmp_path / "traced", url)
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr[-2000:]
    assert traced.returncode == 0, traced.stderr[-2000:]
    tail = "the run goes on, its trace is not uploaded (unset LANGSMITH_TRACING to turn tracing off)"
    notice = f"tracing: LangSmith at {url} did not take the trace ({{}}); {tail}"
    # The endpoint that never answers: the 5 s wait at exit ends first, or (a slow machine) the
    # 10 s read timeout of langsmith's /info fetch.
    reasons = ["connection refused"] if endpoint == "refused_endpoint" else ["no answer within 5 s", "timed out"]
    lines = traced.stderr.splitlines()
    assert len(lines) == 1 and lines[0] in [notice.format(r) for r in reasons], traced.stderr[-3000:]
    assert traced.stdout == plain.stdout
    assert "task off-1: completed" in traced.stdout
    events = _events(tmp_path / "traced")
    assert events == _events(tmp_path / "plain")
    assert [e["kind"] for e in events][:3] == ["task.created", "context.built", "plan.created"]
    assert events[-1]["kind"] == "task.completed"


def test_tracing_session_sets_only_what_the_user_left_unset(
    fresh_langsmith: pytest.MonkeyPatch, refused_endpoint: str, no_remote_network: list[Any]
) -> None:
    """Off: nothing is set. On: ``LANGSMITH_USE_DAEMON`` and a client with short timeouts and no
    connection retries, unless the user set the variable or configured a client; env restored."""
    import os

    import langsmith
    import langsmith.run_trees as rt

    from graphs.tracing import tracing_session

    monkeypatch = fresh_langsmith
    for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGSMITH_USE_DAEMON"):
        monkeypatch.delenv(k, raising=False)
    clear_langsmith_caches()
    said: list[str] = []
    with tracing_session(notify=said.append) as client:
        assert client is None and "LANGSMITH_USE_DAEMON" not in os.environ and rt._CLIENT is None

    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", refused_endpoint)
    monkeypatch.setenv("LANGSMITH_API_KEY", API_KEY)
    monkeypatch.setenv("LANGSMITH_DISABLE_RUN_COMPRESSION", "true")
    clear_langsmith_caches()
    told = threading.Event()
    with tracing_session(notify=lambda line: (said.append(line), told.set())) as client:
        assert client is rt._CLIENT and client.api_url == refused_endpoint
        assert client.timeout_ms == (3_000, 10_000) and client.retry_config.connect == 0
        assert os.environ["LANGSMITH_USE_DAEMON"] == "true" and client._use_daemon_threads
        told.wait(60)  # the upload thread's /info fetch fails at once (refused, not retried)
    assert said == [
        f"tracing: LangSmith at {refused_endpoint} did not take the trace (connection refused); the run goes on, "
        "its trace is not uploaded (unset LANGSMITH_TRACING to turn tracing off)"
    ]
    assert "LANGSMITH_USE_DAEMON" not in os.environ

    monkeypatch.setenv("LANGSMITH_USE_DAEMON", "false")
    mine = langsmith.Client(auto_batch_tracing=False)  # the user's own client (no upload thread)
    langsmith.configure(client=mine)
    clear_langsmith_caches()
    with tracing_session(notify=said.append) as client:
        assert client is mine and os.environ["LANGSMITH_USE_DAEMON"] == "false"
    assert os.environ["LANGSMITH_USE_DAEMON"] == "false" and rt._CLIENT is mine
    assert len(said) == 1  # nothing queued, nothing more said
    assert no_remote_network == []


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (401, "authentication failed: check LANGSMITH_API_KEY"),
        (403, "forbidden: check LANGSMITH_API_KEY and LANGSMITH_WORKSPACE_ID"),
        (429, "rate limited"),
    ],
)
def test_tracing_session_names_a_refused_key(
    status: int, reason: str, fresh_langsmith: pytest.MonkeyPatch, no_remote_network: list[Any]
) -> None:
    """An endpoint that answers every request with ``status``: the one line gives the reason."""

    from graphs.tracing import tracing_session

    class Refuse(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    for k, v in {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": url,
        "LANGSMITH_API_KEY": API_KEY,
        "LANGSMITH_DISABLE_RUN_COMPRESSION": "true",
    }.items():
        fresh_langsmith.setenv(k, v)
    clear_langsmith_caches()
    said: list[str] = []
    told = threading.Event()
    try:
        with tracing_session(notify=lambda line: (said.append(line), told.set())):
            told.wait(60)  # 429 is retried 3 times with backoff (0.5-2 s) before the fetch fails
    finally:
        server.shutdown()
        server.server_close()
    assert said == [
        f"tracing: LangSmith at {url} did not take the trace ({reason}); the run goes on, "
        "its trace is not uploaded (unset LANGSMITH_TRACING to turn tracing off)"
    ]
    assert no_remote_network == []


class ApprovalBuildTools(BuildTools):
    def has_side_effects(self, tool: str) -> bool:
        return tool == "run_build"


def test_an_approval_pause_is_traced_as_a_pause_not_an_error(
    langsmith_loopback: Ingest, no_remote_network: list[Any]
) -> None:
    """A run stops for an approval and is approved: the first trace's ``tools`` run ends with
    outputs that say it waits for approval (and the request id), tag ``paused:approval``, no
    error; the approved run is the next trace of the same thread."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import Permissions, SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_with_approvals

    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        _model(), tools=ApprovalBuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    asked: list[dict[str, Any]] = []
    task = new_task("Build the project.", "ls-ap", permissions=Permissions(requires_approval=["run_build"]))
    done = run_with_approvals(
        graph, stores, "ls-ap", task, answer=lambda req: asked.append(req) or {"action": "approve"}
    )
    assert done.state.control.status == "completed" and [a["call_id"] for a in asked] == ["c-build"]
    wait_for_all_tracers()

    events = stores.events.read("ls-ap")
    request_id = next(e.id for e in events if e.kind == "permission.requested")
    assert asked[0]["request_id"] == request_id
    runs = langsmith_loopback.runs()
    post = {rid: r["post"] for rid, r in runs.items()}
    roots = sorted(
        (rid for rid, p in post.items() if not p.get("parent_run_id")), key=lambda r: post[r]["dotted_order"]
    )
    assert [post[r]["name"] for r in roots] == ["taskctx run ls-ap", "taskctx run ls-ap"]
    assert [sorted(post[r]["tags"]) for r in roots] == [
        ["command:run", "paused:approval", "start"],
        ["approval", "command:run"],
    ]
    meta = {rid: (r.get("post.extra") or {}).get("metadata", {}) for rid, r in runs.items()}
    # the first root is the pause (not the state it stopped at), the second answers it
    assert [meta[r]["status"] for r in roots] == ["paused", "completed"]
    assert [meta[r].get("thread_id") for r in roots] == ["ls-ap", "ls-ap"]
    assert runs[roots[0]]["post.outputs"] == {
        "paused": "paused for approval",
        "requests": [{"request_id": request_id, "call_id": "c-build", "tool": "run_build", "risk": "medium"}],
    }
    assert [meta[r].get("approval_request_ids") for r in roots] == [[request_id], None]
    assert [meta[r].get("answers_request_id") for r in roots] == [None, request_id]
    # no run of either trace is an error
    assert [p["name"] for p in post.values() if p.get("error")] == []
    tools = [rid for rid, p in post.items() if p["name"] == "tools" and p["trace_id"] == post[roots[0]]["id"]]
    paused = [rid for rid in tools if "paused:approval" in (post[rid].get("tags") or [])]
    assert len(paused) == 1
    out = runs[paused[0]].get("post.outputs") or runs[paused[0]].get("patch.outputs")
    assert out == {
        "paused": "waiting for approval",
        "requests": [{"request_id": request_id, "call_id": "c-build", "tool": "run_build", "risk": "medium"}],
    }
    assert meta[paused[0]]["approval_request_ids"] == [request_id]
    # the approved run is traced in the second trace: its tools run ran the build, no pause
    second = [rid for rid, p in post.items() if p["name"] == "tools" and p["trace_id"] == post[roots[1]]["id"]]
    assert second and not any("paused:approval" in (post[r].get("tags") or []) for r in second)


def test_trace_anonymizer_masks_every_string_of_a_run() -> None:
    """The client tracing_session installs masks secrets in run inputs, outputs and errors (a
    model's reply is traced before the executor records it, so before the store masks it)."""
    from graphs.tracing import trace_anonymizer

    token = "ghp_" + "R2d2C3p0L1u2k3e4S5k6y7W8a9l0k1e2r3S4"
    run = {"messages": [{"content": f"use {token}\\n", "n": 1}], "note": "plain"}
    assert trace_anonymizer()(run) == {
        "messages": [{"content": "use [REDACTED:github_token]\\n", "n": 1}],
        "note": "plain",
    }


def test_a_rejected_approval_pause_is_traced_as_a_pause_and_the_rejection_is_no_error(
    langsmith_loopback: Ingest, no_remote_network: list[Any]
) -> None:
    """The same pause answered with a rejection: the first trace's ``tools`` run is the pause,
    and no run of either trace is posted as an error (the refused call is a result, not a failure
    of the graph)."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import Permissions, SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_with_approvals

    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        _model(), tools=ApprovalBuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    task = new_task("Build the project.", "ls-rj", permissions=Permissions(requires_approval=["run_build"]))
    run_with_approvals(graph, stores, "ls-rj", task, answer=lambda req: {"action": "reject", "reason": "not now"})
    wait_for_all_tracers()
    events = stores.events.read("ls-rj")
    request_id = next(e.id for e in events if e.kind == "permission.requested")
    assert [e.actor for e in events if e.kind == "permission.denied"] == ["user"]
    runs = langsmith_loopback.runs()
    post = {rid: r["post"] for rid, r in runs.items()}
    assert [p["name"] for p in post.values() if p.get("error")] == []
    paused = [rid for rid, p in post.items() if "paused:approval" in (p.get("tags") or [])]
    paused.sort(key=lambda r: post[r]["dotted_order"])
    assert [post[r]["name"] for r in paused] == ["taskctx run ls-rj", "tools"]  # the root ends as its pause
    meta = (runs[paused[1]].get("post.extra") or {}).get("metadata", {})
    assert meta["approval_request_ids"] == [request_id]


class FailingTools(BuildTools):
    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        from nodes import ToolOutcome

        if tool == "run_build":
            return ToolOutcome("error", "make: *** [all] Error 2\n", "command")
        return super().execute(call_id, tool, arguments)


def test_a_tool_error_is_an_errored_tool_run(langsmith_loopback: Ingest, no_remote_network: list[Any]) -> None:
    """A tool whose result is an ``error``: its tool run carries the error (the recorded summary);
    the ``list_dir`` run beside it none."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_graph
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, review, tool_call

    model = ScriptedChatModel(
        script={
            "planner": [plan("Build it", goal="the project builds", criteria=["the build finishes"])],
            "executor": [
                tool_call("list_dir", {"path": "."}, id="c-ls"),
                tool_call("run_build", {"target": "all"}, id="c-build"),
                complete("the build failed"),
            ],
            "reviewer": [review("revise", "the build fails", issues=["make exits 2"])],
        }
    )
    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        model, tools=FailingTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    run_graph(graph, stores, "ls-er", new_task("Build the project.", "ls-er"), stop_after=4)
    wait_for_all_tracers()
    events = stores.events.read("ls-er")
    results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"}
    runs = langsmith_loopback.runs()
    tools = sorted(
        (r for r in runs.values() if r["post"]["run_type"] == "tool"), key=lambda r: r["post"]["dotted_order"]
    )
    assert [(r["post"]["name"], r["post.inputs"]) for r in tools] == [
        ("list_dir", {"path": "."}),
        ("run_build", {"target": "all"}),
    ]
    summary = results["c-build"]["result_summary"]
    errors = [r["post"].get("error") for r in tools]
    assert errors[0] is None and errors[1].startswith(f"ToolException({summary!r})")  # (then LangChain's trace)
    assert results["c-build"]["status"] == "error"
    assert "outputs" not in tools[1]["post"] and not tools[1].get("post.outputs")
    assert langsmith_loopback.feedback() == []  # the task ended on its errors: no review, no feedback


def test_a_revise_verdict_is_feedback_with_score_0(langsmith_loopback: Ingest) -> None:
    from uuid import uuid4

    from graphs.tracing import PausedRunTracer

    tracer = PausedRunTracer()
    root = uuid4()
    tracer.root_ids.append(root)
    assert tracer.post_feedback({"verdict": "revise", "summary": "the build fails", "issues": ["make exits 2"]})
    (f,) = langsmith_loopback.feedback()
    assert (f["run_id"], f["trace_id"], f["key"], f["score"], f["value"], f["comment"], f["extra"]) == (
        str(root),
        str(root),
        "review",
        0,
        "revise",
        "the build fails",
        {"issues": ["make exits 2"]},
    )


def test_plain_langgraph_invocations_are_named_as_the_tasks_runs(
    langsmith_loopback: Ingest, no_remote_network: list[Any]
) -> None:
    """graph.stream / graph.invoke, no taskctx runner: the roots are named, tagged and grouped as the task's."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task, thread_config

    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        _model(), tools=BuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    cfg = {**thread_config("ls-plain"), "tags": ["mine"], "metadata": {"team": "ops"}}
    for _update in graph.stream(new_task("Build the project.", "ls-plain"), cfg, stream_mode="updates"):
        break  # the caller stops reading after the planner
    assert graph.invoke(None, {**thread_config("ls-plain"), "run_name": "my resume"})["control"].status == "completed"
    wait_for_all_tracers()
    runs = langsmith_loopback.runs()
    roots = sorted(
        (r["post"] for r in runs.values() if r["post"].get("parent_run_id") is None), key=lambda p: p["dotted_order"]
    )
    assert [(p["name"], sorted(p["tags"])) for p in roots] == [
        ("taskctx run ls-plain", ["command:run", "mine", "start"]),
        ("my resume", ["command:resume", "resume"]),  # a run_name given wins; the tags and metadata stay
    ]
    meta = [(runs[p["id"]].get("post.extra") or {}).get("metadata", {}) for p in roots]
    assert [(m["thread_id"], m["session_id"], m["command"], m.get("team")) for m in meta] == [
        ("ls-plain", "ls-plain", "run", "ops"),
        ("ls-plain", "ls-plain", "resume", None),
    ]
    assert meta[0]["roles"] == ["executor", "planner", "recovery", "reviewer"]
    # (the stop is LangChain's own: a stream the caller left ends its root with GeneratorExit; the
    # taskctx runner's stopped/paused statuses and review feedback come with project.run and the CLI)
    first = runs[roots[0]["id"]]
    assert str(first.get("post", {}).get("error") or first.get("patch", {}).get("error") or "").startswith(
        "GeneratorExit"
    )
    assert not no_remote_network


def test_every_verdict_of_an_invocation_is_feedback_a_revise_then_an_approve(
    langsmith_loopback: Ingest, no_remote_network: list[Any]
) -> None:
    """A revise the same invocation recovers from is feedback too (score 0, with its issues), in order."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langgraph.checkpoint.memory import InMemorySaver

    from context import SqliteStores
    from graphs import build_orchestrator, checkpoint_serde, new_task
    from graphs.runner import run_graph
    from nodes import ScriptedChatModel
    from nodes.testing import complete, plan, review

    model = ScriptedChatModel(
        script={
            "planner": [plan("List the project"), plan("List the project again")],
            "executor": [complete("listed"), complete("listed, with tests")],
            "reviewer": [
                review("revise", "the tests are not listed", issues=["tests/ missing"]),
                review("approve", "listed"),
            ],
        }
    )
    stores = SqliteStores(":memory:")
    graph = build_orchestrator(
        model, tools=BuildTools(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores
    )
    done = run_graph(graph, stores, "ls-rv", new_task("List the project.", "ls-rv"))
    assert done.state.control.status == "completed"
    wait_for_all_tracers()
    reviews = [e for e in stores.events.read("ls-rv") if e.kind == "review.completed"]
    assert [r.payload["verdict"] for r in reviews] == ["revise", "approve"]
    (root,) = [rid for rid, r in langsmith_loopback.runs().items() if r["post"].get("parent_run_id") is None]
    got = [
        (f["run_id"], f["key"], f["score"], f["value"], f["comment"], f["extra"]) for f in langsmith_loopback.feedback()
    ]
    assert got == [
        (
            root,
            "review",
            0,
            "revise",
            "the tests are not listed",
            {"issues": ["tests/ missing"], "seq": reviews[0].seq},
        ),
        (root, "review", 1, "approve", "listed", {"issues": [], "seq": reviews[1].seq}),
    ]
    assert len({f["id"] for f in langsmith_loopback.feedback()}) == 2
    assert not no_remote_network


def test_feedback_to_a_refused_endpoint_is_said_once_and_the_run_goes_on(
    fresh_langsmith: pytest.MonkeyPatch, refused_endpoint: str
) -> None:
    """The reviewer's feedback to a LangSmith that refuses connections: no exception, one
    ``tracing:`` line naming the endpoint and the cause."""
    from uuid import uuid4

    from graphs.tracing import PausedRunTracer, tracing_session

    for k in ("LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGSMITH_USE_DAEMON"):
        fresh_langsmith.delenv(k, raising=False)
    fresh_langsmith.setenv("LANGSMITH_TRACING", "true")
    fresh_langsmith.setenv("LANGSMITH_ENDPOINT", refused_endpoint)
    fresh_langsmith.setenv("LANGSMITH_API_KEY", API_KEY)
    said: list[str] = []
    with tracing_session(notify=said.append, flush_seconds=0.5) as client:
        tracer = PausedRunTracer(client=client)
        assert tracer.post_feedback({"verdict": "approve", "summary": "ok"}) is False  # no root run yet
        tracer.root_ids.append(uuid4())
        assert tracer.post_feedback({"verdict": "approve", "summary": "ok"}) is False
    assert len(said) == 1 and said[0].startswith(f"tracing: LangSmith at {refused_endpoint} did not take the trace (")
    assert "connection refused" in said[0]
