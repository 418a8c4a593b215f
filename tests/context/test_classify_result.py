"""classify_result: a shell's output is a command's; any other tool's is labelled as that tool's."""

from __future__ import annotations

from pathlib import Path

import pytest

from context import classify_result, compress_tool_result, load_trajectory
from context.compression import COMMAND_LIMIT

REF = "artifact://sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("tool", "args", "kind"),
    [
        ("read_log", {"name": "app"}, "other"),
        ("kv_get", {"key": "k"}, "other"),
        ("get_reservation_details", {}, "other"),
        ("execute_bash", {"command": "ls"}, "command"),
        ("run_command", {"command": "ls"}, "command"),
        ("str_replace_editor", {"command": "str_replace"}, "command"),
        ("str_replace_editor", {"command": "view"}, "file_read"),
        ("grep", {}, "search"),
    ],
)
def test_kinds(tool: str, args: dict[str, str], kind: str) -> None:
    assert classify_result(tool, args) == kind


def test_a_cut_output_of_another_tool_names_the_tool() -> None:
    raw = "\n".join(f"line {i}" for i in range(2_000))
    shown = compress_tool_result(raw, classify_result("read_log", {}), REF, tool="read_log")
    assert shown.compressed and "[tool output: read_log, 2000 lines" in shown.text
    assert "command output" not in shown.text
    bash = compress_tool_result(raw, classify_result("execute_bash", {}), REF, tool="execute_bash")
    assert "[command output: 2000 lines" in bash.text


def test_the_shared_runs_compress_as_before(trajectories_dir: Path) -> None:
    # the bench rows replay these outputs: every one compresses exactly as under the old rule
    # (unknown tools as "command"), so no row moves
    steps = [s for p in sorted(trajectories_dir.glob("*.jsonl")) for s in load_trajectory(p).steps]
    assert len(steps) >= 300
    for s in steps:
        kind = classify_result(s.tool, s.arguments)
        old = "command" if kind == "other" else kind
        path = s.arguments.get("path")
        path = path if isinstance(path, str) else None
        assert compress_tool_result(s.observation, kind, REF, path=path, tool=s.tool) == compress_tool_result(
            s.observation, old, REF, path=path, tool=s.tool
        ), s.tool
    assert all(len(s.observation) <= COMMAND_LIMIT for s in steps if classify_result(s.tool, s.arguments) == "other")
