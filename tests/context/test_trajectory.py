"""``context.load_trajectory`` and ``parse_action`` on synthetic files, and on the recorded data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from context import RecordedStep, TrajectoryError, load_trajectory, parse_action

HEADER = {
    "id": "demo-1",
    "source_repo": "example/repo",
    "source_path": "runs/demo.json",
    "license": "MIT",
    "task": "Fix the bug in foo.py",
    "meta": {"model": "gpt-x", "first_user_message": "Hi, please fix foo"},
}


def write(tmp_path: Path, lines: list, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines), encoding="utf-8")
    return p


def step(i, action, observation="ok", thought="think"):
    return {"step": i, "thought": thought, "action": action, "observation": observation}


# ---------------------------------------------------------------------------------- parse_action


def test_parse_action_json_with_object_arguments():
    action = json.dumps({"name": "str_replace_editor", "arguments": {"command": "view", "path": "/repo/a.py"}})
    assert parse_action(action) == ("str_replace_editor", {"command": "view", "path": "/repo/a.py"})


def test_parse_action_json_with_string_arguments():
    action = json.dumps({"name": "execute_bash", "arguments": json.dumps({"command": "ls -la"})})
    assert parse_action(action) == ("execute_bash", {"command": "ls -la"})
    # a non-JSON string / a non-object value is wrapped as {"input": ...}
    assert parse_action(json.dumps({"name": "run", "arguments": "ls -la"})) == ("run", {"input": "ls -la"})
    assert parse_action(json.dumps({"name": "run_ipython", "arguments": [1, 2]})) == ("run_ipython", {"input": [1, 2]})
    assert parse_action("  " + json.dumps({"name": "respond", "arguments": {"content": "Hello"}}) + "\n") == (
        "respond",
        {"content": "Hello"},
    )


def test_parse_action_swe_agent_command_strings():
    assert parse_action("open src/foo.py 10") == ("open", {"command": "open src/foo.py 10"})
    edit = "edit 5:7\n    return x\nend_of_edit"
    assert parse_action(edit) == ("edit", {"command": edit})
    assert parse_action("  ls -la \n") == ("ls", {"command": "ls -la"})
    assert parse_action("./rock --flag") == ("__rock", {"command": "./rock --flag"})
    assert parse_action("") == ("noop", {"command": ""})
    # JSON-looking text that does not parse is a command
    assert parse_action("{not json") == ("_not", {"command": "{not json"})
    # JSON without a string "name" is a command too
    assert parse_action('{"tool": "x"}') == ("__tool__", {"command": '{"tool": "x"}'})


def test_parse_action_invalid_tool_call_marker():
    text = "[invalid tool call: the call itself is not recorded in the source trajectory]"
    assert parse_action(text) == ("invalid_tool_call", {"recorded": text})


# ---------------------------------------------------------------------------------- load_trajectory


def test_load_trajectory_reads_header_and_all_action_forms(tmp_path):
    invalid = "[invalid tool call: not recorded]"
    p = write(
        tmp_path,
        [
            HEADER,
            step(1, json.dumps({"name": "execute_bash", "arguments": {"command": "pytest"}}), "1 failed"),
            step(2, "open foo.py", "[File: foo.py]", thought=None),
            step(3, invalid, "", thought=""),
        ],
    )
    t = load_trajectory(p)
    assert (t.id, t.task, t.path) == ("demo-1", "Fix the bug in foo.py", str(p))
    assert t.meta == {"model": "gpt-x", "first_user_message": "Hi, please fix foo"}
    assert t.request == "Hi, please fix foo"
    assert t.steps == [
        RecordedStep(
            step=1,
            thought="think",
            action='{"name": "execute_bash", "arguments": {"command": "pytest"}}',
            observation="1 failed",
            tool="execute_bash",
            arguments={"command": "pytest"},
        ),
        RecordedStep(
            step=2,
            thought="",
            action="open foo.py",
            observation="[File: foo.py]",
            tool="open",
            arguments={"command": "open foo.py"},
        ),
        RecordedStep(
            step=3,
            thought="",
            action=invalid,
            observation="",
            tool="invalid_tool_call",
            arguments={"recorded": invalid},
        ),
    ]


def test_load_trajectory_without_meta_uses_task_as_request(tmp_path):
    head = {k: v for k, v in HEADER.items() if k != "meta"}
    p = write(tmp_path, [head, {"action": "ls", "observation": "a"}, {"action": "pwd", "observation": "/"}])
    t = load_trajectory(p)
    assert t.meta == {}
    assert t.request == "Fix the bug in foo.py"
    # without "step", the step number is the line index
    assert [(s.step, s.tool) for s in t.steps] == [(1, "ls"), (2, "pwd")]


def test_missing_file(tmp_path):
    p = tmp_path / "nope.jsonl"
    with pytest.raises(TrajectoryError, match="trajectory file not found") as ei:
        load_trajectory(p)
    assert str(p) in str(ei.value)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path, content):
    p = tmp_path / "empty.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value) == f"trajectory {p} is empty; line 1 must be the header with id and task"


def test_bad_json_line_names_file_and_line(tmp_path):
    p = write(tmp_path, [HEADER, step(1, "ls"), '{"step": 2, "action": "ls",', step(3, "ls")])
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value).startswith(f"{p}:3: not valid JSON (")
    assert str(ei.value).endswith("); each line must be one JSON object")


def test_bad_json_line_number_counts_blank_lines(tmp_path):
    # regression: blank lines were dropped before numbering, so the message named line 3
    p = write(tmp_path, [HEADER, "", step(1, "ls"), "not json"])
    with pytest.raises(TrajectoryError, match="^" + re.escape(f"{p}:4: not valid JSON")):
        load_trajectory(p)


def test_non_object_line(tmp_path):
    p = write(tmp_path, [HEADER, [1, 2]])
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value) == f"{p}:2: expected a JSON object, got list"


@pytest.mark.parametrize("task", [None, "", "   ", 7])
def test_header_without_task(tmp_path, task):
    head = dict(HEADER)
    if task is None:
        del head["task"]
    else:
        head["task"] = task
    p = write(tmp_path, [head, step(1, "ls")])
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert (
        str(ei.value)
        == f"{p}:1: header lacks a non-empty string 'task'; see the format in ../shared/data/trajectories/README.md"
    )


def test_header_only_and_step_without_observation(tmp_path):
    p = write(tmp_path, [HEADER], name="head.jsonl")
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value) == f"{p}: header only, no recorded steps to replay"

    p = write(tmp_path, [HEADER, step(1, "ls"), {"step": 2, "action": "ls"}], name="noobs.jsonl")
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value) == f"{p}:3: step lacks a string 'observation'"


# ---------------------------------------------------------------------------------- recorded data


def test_all_recorded_trajectories_load_with_header_step_counts(trajectories_dir: Path):
    files = sorted(trajectories_dir.glob("*.jsonl"))
    assert len(files) == 16
    for f in files:
        header = json.loads(f.read_text(encoding="utf-8").splitlines()[0])
        t = load_trajectory(f)
        assert t.id == header["id"], f.name
        assert len(t.steps) == header["n_steps"], f.name
        assert all(s.tool for s in t.steps), f.name


def test_header_n_steps_must_match_the_steps(tmp_path):
    p = write(tmp_path, [{**HEADER, "n_steps": 3}, step(1, "ls")])
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(p)
    assert str(ei.value) == (
        f"{p}: the header says n_steps=3 but the file holds 1 steps; "
        "the file looks truncated or edited: restore it from the source"
    )


def test_directory_is_named_as_such(tmp_path):
    with pytest.raises(TrajectoryError) as ei:
        load_trajectory(tmp_path)
    assert str(ei.value).startswith(f"{tmp_path} is a directory; pass one .jsonl file")


#: The goal of each shared trajectory: its request's first meaningful line.
GOALS = {
    "moatless-django-14730": "Prevent developers from defining a related_name on symmetrical ManyToManyFields",
    "moatless-django-15695": "RenameIndex() crashes when unnamed index is moving backward and forward.",
    "moatless-matplotlib-23299": (
        "[Bug]: get_backend() clears figures from Gcf.figs if they were created under rc_context"
    ),
    "moatless-pytest-5227": "Improve default logging format",
    "moatless-requests-863": "Allow lists in the dict values of the hooks argument",
    "moatless-sphinx-10325": "inherited-members should support more than one class",
    "moatless-sympy-14024": "Inconsistency when simplifying (-a)**x * a**(-x), a a positive integer",
    "moatless-sympy-23262": "Python code printer not respecting tuple with one element",
    "openhands-ponyc-4588": "Incorrect aliasing of iso when using match",
    "openhands-ponyc-4595": "ponyc segfaults when trying to match using a single element tuple form",
    "openhands-resolver-pr-viewer-darkmode": (
        "It'd be nice if this app could also support dark mode, we can add a toggle that can turn on dark mode."
    ),
    "sweagent-ctf-rev-rock": 'The CTF challenge is a reverse engineering problem named "Rock", worth 100 points.',
    "sweagent-ctf-web-i-got-id": 'The CTF challenge is a web security problem named "I Got Id", worth 10 points.',
    "sweagent-pydicom-1458": "Pixel Representation attribute should be optional for pixel data handler",
    "taubench-airline-t17-r3": (
        "Hi there! I need to reschedule my upcoming flight from IAH to SEA from May 23 to May 24 and upgrade to "
        "business class for all passengers. Can you help with that?"
    ),
    "taubench-airline-t2-r1": (
        "Hi, I'm having a bit of a situation with my flights and need to downgrade them from business to economy "
        "class. Can you assist me with that?"
    ),
}
BOILERPLATE_STARTS = (
    "I've uploaded",
    "We're currently solving",
    "Please fix the following",
    "Environment has",
    "<",
    "/",
)


def test_goal_of_every_shared_trajectory_is_its_first_meaningful_line(trajectories_dir: Path) -> None:
    trajs = [load_trajectory(p) for p in sorted(trajectories_dir.glob("*.jsonl"))]
    assert {t.id: t.goal for t in trajs} == GOALS
    for t in trajs:
        assert t.goal and t.goal == t.goal.strip() and not t.goal.startswith(BOILERPLATE_STARTS), t.id
        assert t.goal in t.request  # a line (or the end of one) of the request, verbatim


def test_request_goal_skips_boilerplate_lines_and_prefixes() -> None:
    from context.trajectory import request_goal

    assert request_goal("<uploaded_files>\n/workspace/x\n</uploaded_files>\n\nFix the parser\nmore") == "Fix the parser"
    assert (
        request_goal(
            "I've uploaded a python code repository in the directory proj__1.2. Consider the following PR "
            "description:\n\n<pr_description>\nAdd a --json flag\n</pr_description>"
        )
        == "Add a --json flag"
    )
    assert request_goal("Count the words.\nThen stop.") == "Count the words."
    # a cut goal says so: the first 200 chars, an ellipsis and how many chars were left out
    assert request_goal("x" * 300) == "x" * 200 + "… (100 chars more)"
    assert request_goal("y" * 200) == "y" * 200  # exactly the limit: whole
    assert request_goal("Fix it\n" + "z" * 205, limit=201) == "Fix it"
    assert request_goal("") == "" and request_goal("\n<task>\n</task>\n") == "<task>"  # nothing better


def test_a_replayed_thought_that_is_cut_says_so() -> None:
    from context.text import cut
    from context.trajectory import RecordedStep, Trajectory
    from nodes import RECORDED_THOUGHT, ReplayChatModel

    assert cut("abc", 3) == "abc" and cut("abcd", 3) == "abc… (1 chars more)"
    long = "word " * 100  # 500 chars; whitespace runs fold to one space: 499
    traj = Trajectory(
        "t", "do it", {}, [RecordedStep(1, long, "ls -la", "a b", "run_command", {"argv": ["ls", "-la"]})]
    )
    ai = ReplayChatModel(trajectory=traj)._answer([], {"role": "executor", "executor_steps": 0, "step_id": "s1"})
    done = next(c for c in ai.tool_calls if c["name"] == "complete_step")
    assert done["args"]["findings"] == [
        {"statement": f"{RECORDED_THOUGHT} " + ("word " * 60)[:300] + "… (199 chars more)"}
    ]
