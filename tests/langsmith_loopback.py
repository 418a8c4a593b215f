"""A loopback LangSmith for tests (and for trying tracing offline): an ingest server on 127.0.0.1.

``langsmith_loopback`` (a fixture) starts a stdlib HTTP server that takes what the LangSmith client
posts (``/runs/multipart``, ``/runs``, ``/feedback``) and sets the ``LANGSMITH_*`` variables the docs
tell users to set, pointing at it; :meth:`Ingest.runs` parses the posted runs, :meth:`Ingest.feedback`
the posted feedback. ``no_remote_network`` refuses any connection beyond loopback. Import the
fixtures into a test module (``from langsmith_loopback import langsmith_loopback, no_remote_network``).
"""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

API_KEY = "lsv2_pt_00000000000000000000000000000000_testkey0"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


# ---- loopback LangSmith -------------------------------------------------------------------
@dataclass
class Ingest:
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    def bodies(self) -> bytes:
        return b"".join(b for (_m, _p, _h, b) in self.requests)

    def feedback(self) -> list[dict[str, Any]]:
        """Every feedback posted (``POST /feedback``), in order."""
        return [json.loads(b) for (m, p, _h, b) in self.requests if m == "POST" and p.startswith("/feedback")]

    def runs(self) -> dict[str, dict[str, Any]]:
        """run id -> {"post": {...}, "post.inputs": {...}, "patch": {...}, ...} from every multipart body.

        A run's error (a part of its own) is also ``post["error"]``.
        """
        runs: dict[str, dict[str, Any]] = {}
        for method, path, headers, body in self.requests:
            if method != "POST" or not path.startswith("/runs/multipart"):
                continue
            msg = email.message_from_bytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body, policy=email.policy.HTTP
            )
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                op, rid, *rest = name.split(".")
                key = op + ("." + rest[0] if rest else "")
                data = json.loads(part.get_payload(decode=True))
                slot = runs.setdefault(rid, {})
                if key in slot and isinstance(slot[key], dict):
                    slot[key].update(data)
                else:
                    slot[key] = data
        # Merge patches over posts so callers see the final run.
        for r in runs.values():
            for k in list(r):
                if k.startswith("patch"):
                    target = "post" + k[5:]
                    if isinstance(r[k], dict) and isinstance(r.get(target), dict):
                        r[target].update(r[k])
                    else:
                        r[target] = r[k]
            if "post.error" in r and isinstance(r.get("post"), dict):  # the error is a part of its own
                r["post"]["error"] = r["post.error"]
        return runs


def _handler(ingest: Ingest) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # /info: no batch_ingest_config (a partial one makes the flush hang)
            ingest.requests.append(("GET", self.path, dict(self.headers), b""))
            self._reply(200, json.dumps({"version": "x"}).encode() if self.path.startswith("/info") else b"{}")

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            ingest.requests.append(("POST", self.path, dict(self.headers), self.rfile.read(n)))
            self._reply(202, b"{}")

        do_PATCH = do_POST

    return H


@pytest.fixture
def no_remote_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Refuse (and record) any connection or name lookup that is not loopback."""
    refused: list[Any] = []
    real_connect, real_gai = socket.socket.connect, socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in LOOPBACK:
            refused.append(address)
            raise OSError(f"test: network beyond loopback refused: {address}")
        return real_connect(self, address)

    def getaddrinfo(host: Any, *a: Any, **kw: Any) -> Any:
        if host not in LOOPBACK and host is not None:
            refused.append(host)
            raise socket.gaierror(f"test: name lookup refused: {host}")
        return real_gai(host, *a, **kw)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return refused


def clear_langsmith_caches() -> None:
    import langsmith.env._runtime_env as rtenv
    import langsmith.utils as lsu

    lsu.get_env_var.cache_clear()
    lsu.get_tracer_project.cache_clear()
    rtenv.get_langchain_env_var_metadata.cache_clear()


@pytest.fixture
def langsmith_loopback(monkeypatch: pytest.MonkeyPatch, no_remote_network: list[Any]) -> Iterator[Ingest]:
    import langsmith.run_trees as rt

    ingest = Ingest()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ingest))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for k in ("LANGCHAIN_TRACING_V2", "LANGCHAIN_API_KEY", "LANGCHAIN_ENDPOINT", "LANGCHAIN_PROJECT"):
        monkeypatch.delenv(k, raising=False)
    # The variables the docs tell users to set:
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("LANGSMITH_API_KEY", API_KEY)
    monkeypatch.setenv("LANGSMITH_PROJECT", "taskctx-test")
    monkeypatch.setenv("LANGSMITH_DISABLE_RUN_COMPRESSION", "true")
    monkeypatch.setattr(rt, "_CLIENT", None)  # a fresh client that reads the variables above
    clear_langsmith_caches()
    try:
        yield ingest
    finally:
        client = rt._CLIENT
        if client is not None:
            client.flush()
        monkeypatch.undo()  # env back before the caches are cleared again
        clear_langsmith_caches()
        server.shutdown()
        server.server_close()
