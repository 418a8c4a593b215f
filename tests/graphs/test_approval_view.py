"""What an approval asks for is shown in full (graphs/report/approval.py): the exact terminal
text of a 2.6 kB ``write_file`` (its last line present), a patch (real newlines, +/- lines), a
command (shlex-joined argv), a 5,000-line write (cut, with the note naming the command that prints
the full arguments), arguments laden with control and bidi characters (escaped), and the same
views in the HTML report (``<pre>``, escaped, diff lines classed by +/-).

Terminal text is ``Console(record=True, width=100).export_text()``; rich pads code lines to the
width, so lines are compared with their trailing spaces stripped."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from graphs.report.approval import (
    MAX_CHARS,
    MAX_LINES,
    approval_html,
    approval_renderable,
    approval_view,
    escape_controls,
)


def _text(req: dict[str, Any]) -> str:
    c = Console(record=True, width=100, file=io.StringIO())
    c.print(approval_renderable(req))
    return "\n".join(line.rstrip() for line in c.export_text().split("\n"))


def _req(tool: str, arguments: Any, **kw: Any) -> dict[str, Any]:
    return (
        {"type": "approval", "task_id": "t1", "call_id": "c1", "tool": tool, "arguments": arguments}
        | {
            "risk": "high",
            "reason": "writes app/limits.py",
        }
        | kw
    )


LIMITS = [
    f"UPLOAD_LIMIT_{i:02d} = {i} * 1024 * 1024  # bytes accepted by worker {i:02d} of the upload service"
    for i in range(1, 29)
] + ["MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # the line that matters: 10 MiB, as the proxy allows"]
LIMITS_PY = "\n".join(LIMITS) + "\n"


def test_write_file_shown_as_the_whole_file_with_its_last_line() -> None:
    assert len(LIMITS_PY.encode()) == 2_545  # a 2.6 kB write: the old view cut it at 600 chars
    out = _text(_req("write_file", {"path": "app/limits.py", "content": LIMITS_PY}))
    expected = [
        "  approval requested: write_file app/limits.py (2,545 bytes, 29 lines)  [call c1]",
        "    risk high: writes app/limits.py",
        *[f"    {n:>4} {line}" for n, line in enumerate(LIMITS, 1)],
        "",
    ]
    assert out.split("\n") == expected
    assert out.split("\n")[-2] == (
        "      29 MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # the line that matters: 10 MiB, as the proxy allows"
    )
    v = approval_view("write_file", {"path": "app/limits.py", "content": LIMITS_PY})
    assert (v.lexer, v.line_numbers, v.note, v.tail) == ("python", True, "", "")
    # the log stores arguments as JSON text: the same view
    assert approval_view("write_file", json.dumps({"path": "app/limits.py", "content": LIMITS_PY})) == v


PATCH = """--- a/proxy/nginx.conf
+++ b/proxy/nginx.conf
@@ -6,1 +6,1 @@
-        client_max_body_size 10mb;
+        client_max_body_size 10m;
"""


def test_patch_shown_as_a_diff_with_real_newlines() -> None:
    out = _text(_req("apply_patch", {"patch": PATCH}, risk="high", reason="writes proxy/nginx.conf"))
    assert out == (
        "  approval requested: apply_patch proxy/nginx.conf (5 lines of diff)  [call c1]\n"
        "    risk high: writes proxy/nginx.conf\n"
        "    --- a/proxy/nginx.conf\n"
        "    +++ b/proxy/nginx.conf\n"
        "    @@ -6,1 +6,1 @@\n"
        "    -        client_max_body_size 10mb;\n"
        "    +        client_max_body_size 10m;\n"
    )
    assert "\\n" not in out


def test_command_shown_as_its_argv_joined_for_a_shell() -> None:
    argv = ["python", "-m", "pytest", "tests/test upload.py", "-k", "not slow; rm -rf /"]
    out = _text(_req("run_command", {"argv": argv, "timeout": 60}, risk="medium", reason="runs python"))
    assert out == (
        '  approval requested: run_command {"timeout": 60}  [call c1]\n'
        "    risk medium: runs python\n"
        "    $ python -m pytest 'tests/test upload.py' -k 'not slow; rm -rf /'\n"
    )


def test_other_arguments_as_pretty_json() -> None:
    out = _text(_req("send_mail", {"to": "ops@example.com", "cc": ["a", "b"]}, risk="medium", reason="sends mail"))
    assert out == (
        "  approval requested: send_mail  [call c1]\n"
        "    risk medium: sends mail\n"
        "    {\n"
        '      "cc": [\n'
        '        "a",\n'
        '        "b"\n'
        "      ],\n"
        '      "to": "ops@example.com"\n'
        "    }\n"
    )


def test_a_5000_line_write_is_cut_with_a_note_naming_the_full_arguments() -> None:
    content = "".join(f"row {i}\n" for i in range(1, 5001))
    out = _text(_req("write_file", {"path": "data/rows.txt", "content": content}, reason="writes data/"))
    lines = out.split("\n")
    assert lines[0] == "  approval requested: write_file data/rows.txt (43,893 bytes, 5,000 lines)  [call c1]"
    assert lines[2:4] == ["        1 row 1", "        2 row 2"]
    assert lines[121] == "      120 row 120"
    assert lines[122:124] == [
        "    ... 4,840 lines not shown (lines 121-4,960 of 5,000, 42,682 chars); the full arguments: `taskctx",
        "    inspect t1 --json` (control.pending_approval.arguments)",
    ]
    assert lines[124] == "      4961 row 4961"
    assert lines[-2] == "      5000 row 5000"
    assert len(lines) == 2 + 120 + 2 + 40 + 1
    # a single huge line is cut inside it, and says so
    v = approval_view("write_file", {"path": "app.min.js", "content": "x" * 30_000}, full_hint="HINT")
    assert (len(v.head), len(v.tail), v.tail_start) == (11_999, 3_999, 1)
    assert v.note == "... 14,002 chars not shown (inside line 1 of 1); the full arguments: HINT"
    # up to the limits nothing is cut
    assert approval_view("write_file", {"path": "a.txt", "content": "r\n" * MAX_LINES}).note == ""
    assert approval_view("write_file", {"path": "a.txt", "content": "r" * MAX_CHARS}).note == ""


def test_the_cut_note_names_a_command_that_prints_the_full_arguments(tmp_path: Any) -> None:
    """``taskctx inspect TASK --json`` prints ``control.pending_approval.arguments`` whole."""
    from typer.testing import CliRunner

    from context import SqliteStores, new_event
    from context.events import PermissionEvent, TaskCreated
    from graphs.cli import app

    content = "".join(f"row {i}\n" for i in range(1, 5001))
    args = json.dumps({"content": content, "path": "data/rows.txt"}, sort_keys=True)
    db = tmp_path / "t.sqlite"
    stores = SqliteStores(db)
    stores.events.append(
        "t1",
        [
            new_event("task.created", TaskCreated(task_id="t1", original_request="write rows"), actor="user"),
            new_event(
                "permission.requested",
                PermissionEvent(call_id="c1", tool="write_file", arguments=args, risk="high", reason="writes data/"),
                actor="system",
            ),
        ],
    )
    stores.close()
    r = CliRunner().invoke(app, ["inspect", "t1", "--json", "--db", str(db)])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.stdout)["control"]["pending_approval"]["arguments"]
    assert json.loads(shown)["content"] == content
    # the text view shows the pending approval as the prompt does (cut, with the note)
    r = CliRunner().invoke(app, ["inspect", "t1", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "  approval requested: write_file data/rows.txt (43,893 bytes, 5,000 lines)  [call c1]" in r.stdout
    assert "4,840 lines not shown (lines 121-4,960 of 5,000, 42,682 chars)" in r.stdout
    assert "5000 row 5000" in r.stdout


def test_control_and_bidi_characters_are_escaped_never_sent_raw() -> None:
    raw = "ok\x1b[2J\x07 \u202eexe.txt\u202c \u2066x\u2069 \x9b\x7f tab\tend\r\nnext\rline"
    assert escape_controls(raw) == (
        "ok\\x1b[2J\\x07 \\u202eexe.txt\\u202c \\u2066x\\u2069 \\x9b\\x7f tab\tend\nnext\\x0dline"
    )
    out = _text(
        _req(
            "write_file",
            {"path": "notes\u202etxt.sh", "content": "echo hi\x1b[31m\n# \u2067evil\u2069\n"},
            reason="writes\x1b[0m a file",
        )
    )
    assert out == (
        "  approval requested: write_file notes\\u202etxt.sh (26 bytes, 2 lines)  [call c1]\n"
        "    risk high: writes\\x1b[0m a file\n"
        "      1 echo hi\\x1b[31m\n"
        "      2 # \\u2067evil\\u2069\n"
    )
    out = _text(_req("send", {"to": "ops\u202e\x9b"}, reason="r"))
    assert '"to": "ops\\u202e\\x9b"' in out
    for bad in ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2067", "\u2069"):
        assert bad not in out


def test_html_view_is_escaped_and_colours_diff_lines() -> None:
    page = approval_html("apply_patch", json.dumps({"patch": PATCH}), full_hint="H")
    assert page == (
        '<div class="approval-title"><code>apply_patch proxy/nginx.conf (5 lines of diff)</code></div>'
        '<pre class="approval" data-lexer="diff"><span class="dfile">--- a/proxy/nginx.conf</span>\n'
        '<span class="dfile">+++ b/proxy/nginx.conf</span>\n'
        '<span class="dhunk">@@ -6,1 +6,1 @@</span>\n'
        '<span class="ddel">-        client_max_body_size 10mb;</span>\n'
        '<span class="dadd">+        client_max_body_size 10m;</span></pre>'
    )
    page = approval_html("write_file", {"path": "a.html", "content": "<script>x()</script>\n\x1b!"}, full_hint="H")
    assert page == (
        '<div class="approval-title"><code>write_file a.html (23 bytes, 2 lines)</code></div>'
        '<pre class="approval" data-lexer="html"><span class="ln">1</span>&lt;script&gt;x()&lt;/script&gt;\n'
        '<span class="ln">2</span>\\x1b!</pre>'
    )


def _cut_task(db: Any) -> None:
    from context import SqliteStores, new_event
    from context.events import PermissionEvent, TaskCreated

    content = "".join(f"row {i}\n" for i in range(1, 301))
    args = json.dumps({"content": content, "path": "data/rows.txt"}, sort_keys=True)
    stores = SqliteStores(db)
    stores.events.append(
        "t1",
        [
            new_event("task.created", TaskCreated(task_id="t1", original_request="write rows"), actor="user"),
            new_event(
                "permission.requested",
                PermissionEvent(call_id="c1", tool="write_file", arguments=args, risk="high", reason="writes data/"),
                actor="system",
            ),
        ],
    )
    stores.close()


def test_the_cut_note_wraps_at_80_columns_names_the_db_and_no_line_ends_in_spaces(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """In a pipe (80 columns) the note used to be cropped ("the full argume"), without ``--db``,
    and every code line was padded with spaces to 80 columns."""
    from typer.testing import CliRunner

    from graphs.cli import app
    from graphs.cli import core as common

    monkeypatch.setattr(common.console, "width", 80)
    monkeypatch.chdir(tmp_path)
    db = "other.sqlite"
    _cut_task(db)
    r = CliRunner().invoke(app, ["inspect", "t1", "--db", str(db)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.split("\n")
    i = next(n for n, line in enumerate(lines) if "lines not shown" in line)
    assert lines[i - 1 : i + 4] == [
        "      120 row 120",
        "    ... 140 lines not shown (lines 121-260 of 300, 1,121 chars); the full",
        f"    arguments: `taskctx inspect t1 --json --db {db}`",
        "    (control.pending_approval.arguments)",
        "      261 row 261",
    ]
    assert [line for line in lines if line != line.rstrip()] == []
    # the command it names works as printed
    r = CliRunner().invoke(app, ["inspect", "t1", "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(json.loads(r.stdout)["control"]["pending_approval"]["arguments"])["path"] == "data/rows.txt"
    # `taskctx approve`'s view (and the prompts') name the db the same way
    c = Console(record=True, width=80, file=io.StringIO(), soft_wrap=True)  # as graphs.cli.core.console
    monkeypatch.setattr(common, "console", c)
    from graphs.cli import approve as approve_mod

    monkeypatch.setattr(approve_mod, "console", c)
    req = _req("write_file", {"path": "data/rows.txt", "content": "".join(f"row {i}\n" for i in range(1, 301))})
    approve_mod.show_request(req, db)
    out = c.export_text().split("\n")
    assert f"    arguments: `taskctx inspect t1 --json --db {db}`" in out
    assert [line for line in out if line != line.rstrip()] == []
