"""The workspace tools one by one, secret masking, and read_artifact / search_history in the
tool node."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import Permissions, SqliteStores, parse_ref
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import PolicyError, ScriptedChatModel, WorkspaceTools, mask_secrets
from nodes.testing import complete, plan, review, tool_call
from nodes.workspace import PatchError, apply_unified_diff, glob_match, parse_unified_diff


@pytest.fixture
def ws(tmp_path: Path) -> WorkspaceTools:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    (root / "src" / "pkg" / "b.txt").write_text("alpha\nbeta\n")
    (root / "notes.md").write_text("alpha notes\n")
    return WorkspaceTools(root, receipts_dir=tmp_path / "receipts", timeout=5)


def test_list_read_grep(ws: WorkspaceTools) -> None:
    assert ws.execute("1", "list_dir", {"path": "."}).output == "notes.md\nsrc/\n"
    deep = ws.execute("2", "list_dir", {"path": "src", "depth": 2}).output
    assert deep == "src/pkg/\nsrc/pkg/a.py\nsrc/pkg/b.txt\n"
    r = ws.execute("3", "read_file", {"path": "src/pkg/a.py", "start_line": 3, "end_line": 4})
    assert (r.status, r.output, r.kind, r.path) == ("ok", "line 3\nline 4\n", "file_read", "src/pkg/a.py")
    assert ws.execute("4", "read_file", {"path": "nope.txt"}).status == "error"
    g = ws.execute("5", "grep", {"pattern": r"^alpha", "path": ".", "glob": "*.txt"})
    assert g.output == "src/pkg/b.txt:1: alpha\n" and g.kind == "search"
    assert ws.execute("6", "grep", {"pattern": "(", "path": "."}).output.startswith("refused: bad regex")


def test_grep_says_what_its_bounds_left_unsearched(ws: WorkspaceTools) -> None:
    from nodes.workspace.process import GREP_BYTES

    logs = ws.root / "logs"
    logs.mkdir()
    line = b"compile unit ok\n"
    big = line * (GREP_BYTES // len(line) + 10) + b"NEEDLE at the end\n"
    (logs / "big.log").write_bytes(big)
    (logs / "wide.log").write_bytes(b"x" * 2500 + b" NEEDLE\nshort NEEDLE\n" + "\u6587".encode() * 2100 + b"NEEDLE\n")
    (logs / "small.log").write_bytes(b"no match here\n")
    g = ws.execute("1", "grep", {"pattern": "NEEDLE", "path": "logs"})
    assert (g.status, g.kind) == ("ok", "search")
    assert g.output == (
        "logs/wide.log:2: short NEEDLE\n"
        f"note: logs/big.log: only the first 2,000,000 of {len(big):,} bytes searched; use run_command (e.g. grep) "
        "to search the rest\n"
        "note: logs/wide.log: 2 lines longer than 2,000 characters searched in their first 2,000; use run_command "
        "(e.g. grep) to search the rest\n"
    )
    # nothing found, and a part unsearched: not a bare "(no matches)"
    only = ws.execute("2", "grep", {"pattern": "NEEDLE", "path": "logs/big.log"})
    assert only.output.startswith("(no matches)\nnote: logs/big.log: only the first 2,000,000 of ")
    # a file read whole says nothing more
    assert ws.execute("3", "grep", {"pattern": "absent", "path": "logs/small.log"}).output == "(no matches)\n"


def test_write_and_patch(ws: WorkspaceTools) -> None:
    w = ws.execute("1", "write_file", {"path": "src/new/c.py", "content": "x = 1\n"})
    assert w.status == "ok" and w.modified == "src/new/c.py" and (ws.root / "src/new/c.py").read_text() == "x = 1\n"
    patch = (
        "--- a/src/pkg/a.py\n+++ b/src/pkg/a.py\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n"
        "@@ -18,3 +18,4 @@\n line 18\n line 19\n line 20\n+line 21\n"
        "--- /dev/null\n+++ b/src/pkg/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    )
    p = ws.execute("2", "apply_patch", {"patch": patch})
    assert p.status == "ok", p.output
    assert p.modified_all == ("src/pkg/a.py", "src/pkg/new.txt")
    text = (ws.root / "src/pkg/a.py").read_text()
    assert "LINE 3\n" in text and text.endswith("line 20\nline 21\n")
    assert (ws.root / "src/pkg/new.txt").read_text() == "one\ntwo\n"
    # a hunk that does not match changes nothing (all files checked before any is written)
    bad = (
        "--- a/src/pkg/b.txt\n+++ b/src/pkg/b.txt\n@@ -1 +1 @@\n-alpha\n+ALPHA\n"
        "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-not there\n+x\n"
    )
    out = ws.execute("3", "apply_patch", {"patch": bad})
    assert out.status == "error" and "does not match" in out.output
    assert (ws.root / "src/pkg/b.txt").read_text() == "alpha\nbeta\n"
    assert ws.execute("4", "apply_patch", {"patch": "not a diff"}).output.startswith("refused: not a unified diff")


def test_unified_diff_offsets_and_reverse() -> None:
    fp = parse_unified_diff("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n")[0]
    shifted = "x\ny\na\nb\n"  # the hunk is found two lines lower
    assert apply_unified_diff(shifted, fp) == "x\ny\na\nB\n"
    assert apply_unified_diff("x\ny\na\nB\n", fp, reverse=True) == shifted
    with pytest.raises(PatchError):
        apply_unified_diff("nothing\n", fp)


def test_run_command(ws: WorkspaceTools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-reach-the-child-000000000")
    (ws.root / "show_env.py").write_text(
        "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))\n"
    )
    r = ws.execute("c1", "run_command", {"argv": ["python", "show_env.py"]})
    assert r.status == "ok" and r.output.startswith("$ python show_env.py\n") and "[exit code 0]" in r.output
    assert "OPENAI_API_KEY" not in r.output.split("\n")[1] and "None" in r.output
    (ws.root / "fail.py").write_text("import sys\nprint('boom')\nsys.exit(3)\n")
    f = ws.execute("c2", "run_command", {"argv": ["python", "fail.py"]})
    assert f.status == "error" and "boom" in f.output and "[exit code 3]" in f.output
    (ws.root / "slow.py").write_text("import time\ntime.sleep(30)\n")
    s = ws.execute("c3", "run_command", {"argv": ["python", "slow.py"], "timeout": 1})
    assert s.status == "error" and "timed out after 1s" in s.output
    risk, _, _ = ws.check("run_command", {"argv": ["python", "-m", "unittest"]})
    assert risk == "medium"
    assert ws.check("run_command", {"argv": ["git", "status"]})[0] == "low"
    assert ws.check("run_command", {"argv": ["python", "slow.py"]})[0] == "high"
    assert ws.check("write_file", {"path": "deploy.yml", "content": ""})[0] == "high"
    assert ws.check("write_file", {"path": "src/x.py", "content": ""})[0] == "medium"


def test_the_command_table_is_the_one_command_policy(ws: WorkspaceTools) -> None:
    from nodes.workspace import COMMANDS, DEFAULT_PROGRAMS, FORBIDDEN_PROGRAMS, GIT_READ_ONLY, PYTHON_MODULES

    names = [n for row in COMMANDS for n in row.names]
    assert len(names) == len(set(names)) == 64  # every program in one row
    assert DEFAULT_PROGRAMS == (
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "diff",
        "git",
        "python",
        "python3",
        "pytest",
        "echo",
        "pwd",
    )
    assert (
        len(FORBIDDEN_PROGRAMS) == 51 and {"bash", "env", "xargs", "sudo", "sed", "curl", "pip"} <= FORBIDDEN_PROGRAMS
    )
    assert GIT_READ_ONLY == {"status", "diff", "log", "show", "ls-files", "rev-parse", "blame"}
    assert PYTHON_MODULES == {"pytest", "unittest", "py_compile"}
    # the row's risk, unless its argument rule says otherwise; a program in no row: medium
    assert [ws.check("run_command", {"argv": argv})[:2] for argv in (["wc", "notes.md"], ["pytest", "-q"])] == [
        ("low", "runs wc"),
        ("medium", "runs pytest"),
    ]
    extra = WorkspaceTools(ws.root, programs=("sort", "bash", "ls"))
    assert extra.programs == {"sort", "ls"}
    assert extra.check("run_command", {"argv": ["sort", "notes.md"]})[:2] == ("medium", "runs sort")
    with pytest.raises(PolicyError, match=r"^bash is a shell, launcher or interpreter that is never run$"):
        extra.check("run_command", {"argv": ["bash"]})
    with pytest.raises(
        PolicyError,
        match=r"^git commit is not a read-only git subcommand \(blame, diff, log, ls-files, "
        r"rev-parse, show, status\)$",
    ):
        ws.check("run_command", {"argv": ["git", "commit"]})


def test_globs() -> None:
    assert glob_match("app/x/y.py", "app/**") and glob_match("app/y.py", "app/**/*.py")
    assert glob_match("README.md", "README.md") and not glob_match("docs/README.md", "README.md")
    assert glob_match("a/b/c.conf", "**/*.conf") and glob_match("c.conf", "**/*.conf")
    assert not glob_match("appx/y.py", "app/**") and not glob_match("app/x/y.py", "app/*")


SAMPLES = {
    "openai_key": "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx1234",
    "aws_access_key_id": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "github_token": "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack_token": "xoxb-123456789012-abcdefghijkl",
    "google_api_key": "key=AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "credential": 'db_password: "hunter2hunter2"',
    "url_password": "postgres://app:s3cr3tpass@db:5432/app",
    "stripe_key": "sk_live_abcdefghijklmnop1234",
}


def test_mask_secrets() -> None:
    for kind, text in SAMPLES.items():
        m = mask_secrets(text)
        assert m.count >= 1 and "[REDACTED:" in m.text, (kind, m.text)
    pem = "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nz\n"
    m = mask_secrets(pem)
    assert m.text.count("\n") == pem.count("\n") and "b3BlbnNzaC1rZXk" not in m.text and m.text.startswith("a\n")
    unterminated = mask_secrets("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA")
    assert "MIIEow" not in unterminated.text
    for harmless in (
        "client_max_body_size 10m;",
        "max_tokens = 1000000000",
        "token = ${API_TOKEN}",
        "def secret_sauce():",
    ):
        assert mask_secrets(harmless).text == harmless


def test_read_artifact_masks_every_slice_and_search_history(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    key = "-----BEGIN RSA PRIVATE KEY-----\nSECRETLINE1abc\nSECRETLINE2def\n-----END RSA PRIVATE KEY-----\n"
    (root / "key.pem").write_text("header\n" + key + "footer\n")
    stores = SqliteStores(":memory:")

    def read_slice(messages, meta):
        # the output is short, so the prompt shows it whole and without its ref: the model would
        # find the ref in the checkpoint once the call leaves the transcript; the log has it
        rf = next(e for e in stores.events.read("ra") if e.kind == "tool.result.received")
        assert rf.payload["call_id"] == "rf" and rf.payload["raw_ref"] not in str(messages[-1].content)
        ref = parse_ref(rf.payload["raw_ref"])
        return tool_call("read_artifact", {"ref": f"{ref}#L3-4"}, id="ra")

    model = ScriptedChatModel(
        script={
            "planner": [plan("Read")],
            "executor": [
                tool_call("read_file", {"path": "key.pem"}, id="rf"),
                read_slice,
                tool_call("search_history", {"query": "read_file"}, id="sh"),
                complete("read"),
            ],
            "reviewer": [review("approve")],
        }
    )
    g = build_orchestrator(
        model,
        tools=WorkspaceTools(root, receipts_dir=tmp_path / "r"),
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
        stores=stores,
    )
    r = run_graph(g, stores, "ra", new_task("Read the key.", "ra", permissions=Permissions(file_scopes=["*.pem"])))
    calls = {c.id: c for c in r.state.evidence.recent_tool_calls}
    assert "SECRETLINE" not in calls["rf"].result_summary and "[REDACTED:private_key]" in calls["rf"].result_summary
    # the store masked the key block as it wrote it (lines kept), so the slice is masked too
    assert stores.artifacts.get(calls["rf"].raw_ref) == b"header\n" + b"[REDACTED:private_key]\n" * 4 + b"footer\n"
    assert calls["ra"].result_summary == "[REDACTED:private_key]\n[REDACTED:private_key]\n"
    assert calls["sh"].result_summary.startswith('#6 tool.called [agent] read_file {"path": "key.pem"}')
    assert os.path.exists(root / "key.pem")


#: 1 MB on one line: 131,072 numbered cells of 8 chars ("0000000,0000001,...").
ONE_LINE = "".join(f"{i:07d}," for i in range(131_072))


def test_read_artifact_reaches_the_middle_of_a_1mb_single_line() -> None:
    from nodes import NodeEnv
    from nodes.tools import read_artifact

    env = NodeEnv.sqlite()
    ref = env.artifacts.put(ONE_LINE)
    assert len(ONE_LINE) == 1_048_576

    def read(r: str) -> tuple[str, str]:
        out = read_artifact(env, {"ref": r})
        return out.status, out.output

    # chars 524289-524312 (1-based, inclusive: the compression notes' "chars 1-1200" count)
    assert read(f"{ref}#C524289-524312") == ("ok", "[chars 524289-524312 of 1048576]\n0065536,0065537,0065538,")
    assert read(f"{ref}#C1048561-2000000") == ("ok", "[chars 1048561-1048576 of 1048576]\n0131070,0131071,")
    # after a #L slice (here the one line), and without a window: the text whole, as before
    assert read(f"{ref}#L1-1#C1-8") == ("ok", "[chars 1-8 of 1048576]\n0000000,")
    assert read(ref) == ("ok", ONE_LINE)
    assert [read(f"{ref}#C0-8"), read(f"{ref}#C9-8"), read(f"{ref}#C2000000-2000001")] == [
        ("error", "bad char range #C0-8: need 1 <= start <= end"),
        ("error", "bad char range #C9-8: need 1 <= start <= end"),
        ("error", "char range #C2000000-2000001 starts past the end (1048576 chars); start at 1048576 or less"),
    ]


def test_the_executor_reads_the_middle_of_a_long_line_through_the_tool_node() -> None:
    from nodes import ToolOutcome
    from nodes.tools import function_schema

    class Dump:
        def schemas(self):
            return [function_schema("dump", "Print a long line.")]

        def has_side_effects(self, tool):
            return False

        def execute(self, call_id, tool, arguments):
            return ToolOutcome("ok", ONE_LINE)

    stores = SqliteStores(":memory:")

    def read_middle(messages, meta):
        ref = next(e for e in stores.events.read("mid") if e.kind == "tool.result.received").payload["raw_ref"]
        return tool_call("read_artifact", {"ref": f"{ref}#C524289-524304"}, id="rm")

    model = ScriptedChatModel(
        script={
            "planner": [plan("Dump")],
            "executor": [tool_call("dump", {}, id="d1"), read_middle, complete("read")],
            "reviewer": [review("approve")],
        }
    )
    g = build_orchestrator(model, tools=Dump(), checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    run_graph(g, stores, "mid", new_task("Dump and read the middle.", "mid"))
    got = [e.payload for e in stores.events.read("mid") if e.kind == "tool.result.received"]
    assert got[0]["compressed"] and "0065536," not in got[0]["result_summary"]  # the middle is cut away
    # its note names the window that reads it (the tool's schema names only #L: every prompt carries it)
    assert "(one line: #C<start>-<end> after the ref reads chars start-end)" in got[0]["result_summary"]
    assert (got[1]["call_id"], got[1]["compressed"], got[1]["result_summary"]) == (
        "rm",
        False,
        "[chars 524289-524304 of 1048576]\n0065536,0065537,",
    )
