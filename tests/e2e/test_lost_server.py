"""A Postgres server that goes away for good during a run: one line naming it, nothing lost, a resume goes on.

A throwaway cluster (``initdb``/``pg_ctl`` from ``/usr/lib/postgresql/*/bin``, as the postgres
user when run as root, on a free port >= 5500) serves one task. The task's first tool call stops
the server (``pg_ctl stop -m immediate``) and returns; recording its result then finds no server.
The run ends with :class:`context.ServerLostError`: one line naming the server, the cause
(``connection refused``) and ``taskctx resume``. With the server started again a resume from
a new project (a new command) runs the call again and completes the task, every event recorded
before the loss kept as it was. The wait is :data:`context.pg_server.SERVER_WAIT_SECONDS`
(30 s; 2 s here, so the test is quick).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import graphs
import nodes
from context import ServerLostError
from nodes.testing import complete, plan, review, tool_call

pytestmark = pytest.mark.postgres


@dataclass
class Cluster:
    bin: str
    data: str
    port: int
    as_pg: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        opts = f"-p {self.port} -k {self.data}/.. -c listen_addresses=127.0.0.1"
        cmd = [*self.as_pg, f"{self.bin}/pg_ctl", "-D", self.data, "-l", f"{self.data}/../log", "-w", *args]
        if args[0] == "start":
            cmd += ["-o", opts]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def _free_port() -> int:
    for port in range(5500 + os.getpid() % 300, 6500):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 5500-6500")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.skip("no initdb in /usr/lib/postgresql/*/bin")
    pgbin = os.path.dirname(bins[-1])
    # (a folder of its own under /tmp: as root, the postgres user must reach it, and pytest's
    # tmp_path is under a folder only root may enter)
    root = tempfile.mkdtemp(prefix="taskctx-lost-pg-")
    as_pg: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_pg = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(root, "data")
    subprocess.run(
        [*as_pg, f"{pgbin}/initdb", "-D", data, "-U", "postgres", "--auth=trust"], check=True, capture_output=True
    )
    c = Cluster(pgbin, data, _free_port(), as_pg)
    c.ctl("start")
    try:
        yield c
    finally:
        subprocess.run([*as_pg, f"{pgbin}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


class StopsTheServer:
    """``look`` stops the server on its first call (the events recorded so far noted first)."""

    def __init__(self, cluster: Cluster, project: Any) -> None:
        self.cluster, self.project, self.calls = cluster, project, 0
        self.before: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("look", "Look around.", {})]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        self.calls += 1
        if self.calls == 1 and self.project is not None:
            self.before = [e.id for e in self.project.stores.events.read("lost-1")]
            self.cluster.ctl("stop", "-m", "immediate")
            self.stopped_at = time.monotonic()
        return "README.md\n"


def _model() -> Any:
    return nodes.ScriptedChatModel(
        script={
            "planner": [plan("Look around")],
            "executor": [tool_call("look", {}, id="c1"), complete("looked", findings=["a README is there"])],
            "reviewer": [review("approve", "looked")],
        }
    )


def test_a_server_stopped_for_good_is_one_line_and_a_resume_continues(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from context import pg_server

    monkeypatch.setattr(pg_server, "SERVER_WAIT_SECONDS", float(os.environ.get("TASKCTX_TEST_PG_WAIT", "2")))
    project = graphs.open_project(cluster.url)
    tools = StopsTheServer(cluster, project)
    with pytest.raises(ServerLostError) as info:
        project.run(project.graph(_model(), tools=tools), "Look around.", task_id="lost-1")
    print(f"lost server reported {time.monotonic() - tools.stopped_at:.1f} s after the stop")
    line = str(info.value)
    assert line == (
        f"lost the Postgres server at {cluster.url}: connection refused (no answer within {pg_server.SERVER_WAIT_SECONDS:g} s); every event "
        "recorded before is kept; start the server (or restore the network), then continue with "
        "`taskctx resume TASK --db URL` (a command that only reads: run it again)"
    )
    assert "\n" not in line and tools.calls == 1
    assert tools.before[-1:] and len(tools.before) >= 4  # task.created ... tool.called were recorded
    project.close()

    cluster.ctl("start")
    again = graphs.open_project(cluster.url)  # a new command
    try:
        kept = [e.id for e in again.stores.events.read("lost-1")]
        assert kept == tools.before  # nothing recorded before the loss is lost
        tools.project = None
        done = again.resume("lost-1", graph=again.graph(_model(), tools=tools))
        assert done.state.control.status == "completed"
        events = again.stores.events.read("lost-1")
        assert [e.id for e in events[: len(kept)]] == kept
        assert tools.calls == 2  # the call whose result was not recorded ran again (it has no side effects)
        assert [e.kind for e in events[len(kept) :]][:2] == ["resume.started", "tool.result.received"]
    finally:
        again.close()
