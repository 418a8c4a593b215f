"""Loopback servers that speak the OpenAI Chat Completions and Anthropic Messages wire formats,
for the real provider clients (langchain-openai, langchain-anthropic) without a network
(used by ``tests/e2e/test_providers.py`` and ``tests/e2e/test_streaming_providers.py``).

A request with ``"stream": true`` is answered in the format's server-sent events (:meth:`Stub.sse`):
OpenAI's ``chat.completion.chunk`` lines (text word by word, tool-call arguments in pieces, the
usage chunk when ``stream_options.include_usage`` asks for it, then ``[DONE]``); Anthropic's
``message_start`` (input and cache usage), ``content_block_start/delta/stop`` per block,
``message_delta`` (the stop reason and the whole usage, as the API now sends it: langchain-anthropic
reads the usage from there) and ``message_stop``.

Each stub is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1, answering per role from a script of
``AIMessage``s (the role is read from the system prompt), or with a queued fault (an HTTP error,
a hang). It records every request body, and closes itself (a hang is bounded: it waits at most
10 s, and is released when the server closes).

Run one by hand, answering with the bundled sample's fix (docs/howto/providers.md)::

    python tests/provider_stub.py openai 8765      # or: anthropic 8765
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import AIMessage

from graphs.demo.scenario import DEMO_TEST_ARGV
from nodes.testing import ARGS_CHUNK, complete, plan, review, text_pieces, tool_call

ROLES = ("planner", "executor", "reviewer", "recovery")

FIX = """--- a/proxy/nginx.conf
+++ b/proxy/nginx.conf
@@ -3,7 +3,7 @@
     server {
         listen 80;
         server_name uploads.example.internal;
-        client_max_body_size 1m;
+        client_max_body_size 10m;
 
         location /api/ {
             proxy_pass http://app:8000;
"""


def sample_script() -> dict[str, list[AIMessage]]:
    """The sample workspace's fix: one step, patch, run the tests, complete; the reviewer approves."""
    return {
        "planner": [
            plan(
                steps=[{"id": "s1", "title": "Raise the proxy body limit to 10m and run the upload tests"}],
                goal="uploads up to 10 MB pass the proxy",
                criteria=["tests/test_upload.py passes"],
            )
        ],
        "executor": [
            tool_call("apply_patch", {"patch": FIX}, content="Raise client_max_body_size to the app's 10 MiB."),
            tool_call("run_command", {"argv": DEMO_TEST_ARGV}, content="Run the upload tests."),
            complete("client_max_body_size is 10m; the upload tests pass"),
        ],
        "reviewer": [review("approve", "the proxy allows 10 MiB; tests pass")],
        "recovery": [],
    }


class Stub:
    """A loopback server of one wire format (``openai`` or ``anthropic``)."""

    def __init__(self, wire: str, script: dict[str, list[AIMessage]], ids: str = "", port: int = 0):
        self.wire = wire
        self.ids = ids  # a fixed tool-call id format (e.g. one that repeats); default call_<n>_<i> / toolu_<n>_<i>
        self.script = {r: list(script.get(r, [])) for r in ROLES}
        self.faults: list[Any] = []  # popped one per request: (status, body[, headers]) or "hang"
        self.requests: list[dict[str, Any]] = []
        self.closing = threading.Event()
        self.calls = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                stub.requests.append(body)
                fault = stub.faults.pop(0) if stub.faults else None
                if fault == "hang":
                    stub.closing.wait(10)
                    return
                if fault is not None:
                    status, payload, *headers = fault
                    return self._send(status, payload, headers[0] if headers else {})
                answer = stub.answer(body)
                if body.get("stream"):
                    return self._send_sse(stub.sse(body, answer))
                self._send(200, answer)

            def _send_sse(self, events: list[tuple[str | None, Any]]) -> None:
                self.send_response(200)  # HTTP/1.0: the body ends when the connection closes
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for name, data in events:
                    head = f"event: {name}\n" if name else ""
                    body = data if isinstance(data, str) else json.dumps(data)
                    self.wfile.write(f"{head}data: {body}\n\n".encode())
                    self.wfile.flush()

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.wire == "openai" else "")

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    # -- answers ---------------------------------------------------------------------------
    @staticmethod
    def role_of(body: dict[str, Any]) -> str:
        system = body.get("system")
        if system is None:
            system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), "")
        text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
        return next(r for r in ROLES if f"You are the {r}" in text)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        role = self.role_of(body)
        ai = self.script[role].pop(0) if self.script[role] else complete("nothing left", result="blocked")
        self.calls += 1
        n = self.calls
        if self.wire == "openai":
            calls = [
                {
                    "id": (self.ids or "call_{n}_{i}").format(n=n, i=i),
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                }
                for i, c in enumerate(ai.tool_calls)
            ]
            msg: dict[str, Any] = {"role": "assistant", "content": ai.content or None}
            if calls:
                msg["tool_calls"] = calls
            return {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {
                    "prompt_tokens": 1000 + n,
                    "completion_tokens": 20,
                    "total_tokens": 1020 + n,
                    "prompt_tokens_details": {"cached_tokens": 512},
                },
            }
        content: list[dict[str, Any]] = [{"type": "text", "text": ai.content}] if ai.content else []
        content += [
            {
                "type": "tool_use",
                "id": (self.ids or "toolu_{n}_{i}").format(n=n, i=i),
                "name": c["name"],
                "input": c["args"],
            }
            for i, c in enumerate(ai.tool_calls)
        ]
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": "tool_use" if ai.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 100 + n,
                "output_tokens": 20,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 0,
            },
        }

    # -- streaming ---------------------------------------------------------------------------
    def sse(self, body: dict[str, Any], answer: dict[str, Any]) -> list[tuple[str | None, Any]]:
        """``answer`` (a whole response) as the format's server-sent events: ``(event name, data)``."""
        return self._openai_sse(body, answer) if self.wire == "openai" else self._anthropic_sse(answer)

    @staticmethod
    def _openai_sse(body: dict[str, Any], answer: dict[str, Any]) -> list[tuple[str | None, Any]]:
        head = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        (choice,) = answer["choices"]
        msg = choice["message"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
            return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in text_pieces(msg["content"] or "")]
        for i, c in enumerate(msg.get("tool_calls", [])):
            fn = c["function"]
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": c["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            args = fn["arguments"]
            out += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": args[k : k + ARGS_CHUNK]}}]})
                for k in range(0, len(args), ARGS_CHUNK)
            ]
        out.append(chunk({}, choice["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append((None, {**head, "choices": [], "usage": answer["usage"]}))
        return [*out, (None, "[DONE]")]

    @staticmethod
    def _anthropic_sse(answer: dict[str, Any]) -> list[tuple[str | None, Any]]:
        usage = answer["usage"]
        start = {**answer, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        out: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(answer["content"]):
            if block["type"] == "text":
                first, deltas = (
                    {"type": "text", "text": ""},
                    [{"type": "text_delta", "text": piece} for piece in text_pieces(block["text"])],
                )
            else:
                args = json.dumps(block["input"])
                first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": args[k : k + ARGS_CHUNK]}
                    for k in range(0, len(args), ARGS_CHUNK)
                ]
            out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
            out += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
            out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        delta = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
        out.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": usage},
            )
        )
        return [*out, ("message_stop", {"type": "message_stop"})]


OPENAI_401 = (401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
OPENAI_429 = (429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}, {"retry-after": "0"})
OPENAI_500 = (500, {"error": {"message": "The server had an error", "type": "server_error"}}, {"retry-after": "0"})
OPENAI_LONG = (
    400,
    {
        "error": {
            "message": "This model's maximum context length is 2000 tokens. However, your messages resulted in 2500 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)
ANTHROPIC_401 = (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})


def main(argv: list[str]) -> int:
    """``provider_stub.py openai|anthropic PORT``: serve the sample's script until Ctrl-C. It
    answers one run of the sample (a role whose script ran out answers "blocked"): start it
    again for another run."""
    if len(argv) != 2 or argv[0] not in ("openai", "anthropic") or not argv[1].isdigit():
        print("usage: python tests/provider_stub.py openai|anthropic PORT", file=sys.stderr)
        return 2
    stub = Stub(argv[0], sample_script(), port=int(argv[1]))
    print(f"{argv[0]} stub on {stub.url} (Ctrl-C stops it)", flush=True)
    try:
        with stub:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    raise SystemExit(main(sys.argv[1:]))
