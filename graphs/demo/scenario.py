"""The demo's scenario: a real task on the bundled sample workspace, offline, in seconds.

A scripted policy drives the real :class:`~nodes.WorkspaceTools` on a copy of the sample (an
upload service whose proxy limits uploads to 1 MB): a refused read, a hand edit while paused, a
stale finding, approved patches, a failing test and its recovery, a review.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from context import Permissions
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, recover, review, tool_call

__all__ = [
    "DEMO_REQUEST",
    "DEMO_STOP_AFTER",
    "DEMO_TEST_ARGV",
    "SAMPLE_WORKSPACE",
    "copy_sample",
    "hand_edit",
    "DEMO_HAND_EDIT",
    "demo_model",
    "demo_permissions",
    "demo_tools",
]

SAMPLE_WORKSPACE = Path(__file__).resolve().parent / "sample_workspace"

DEMO_REQUEST = (
    "Uploads larger than 1 MB fail with HTTP 413 (see logs/proxy_error.log). Uploads up to 10 MB must work. "
    "Find the cause, fix it so that tests/test_upload.py passes, and note the fix under 'Unreleased' in "
    "CHANGELOG.md.\n"
    "Do not modify tests/test_upload.py."
)
DEMO_STOP_AFTER = 4
#: The line a person appends to ``proxy/nginx.conf`` while the demo task is paused.
DEMO_HAND_EDIT = "# Reviewed with ops on 2026-11-30: large uploads go through /upload/.\n"
DEMO_TEST_ARGV = ["python", "-m", "unittest", "-v", "tests/test_upload.py"]

_PATCH_WRONG_UNIT = """--- a/proxy/nginx.conf
+++ b/proxy/nginx.conf
@@ -3,7 +3,7 @@
     server {
         listen 80;
         server_name uploads.example.internal;
-        client_max_body_size 1m;
+        client_max_body_size 10mb;
 
         location /api/ {
             proxy_pass http://app:8000;
"""

_PATCH_UNIT = """--- a/proxy/nginx.conf
+++ b/proxy/nginx.conf
@@ -6,1 +6,1 @@
-        client_max_body_size 10mb;
+        client_max_body_size 10m;
"""

_CHANGELOG = """# Changelog

## Unreleased

- Fix HTTP 413 for uploads over 1 MB: the proxy's `client_max_body_size` is now `10m`, the app's limit.

## 1.4.0

- Uploads are streamed to the app (`proxy_request_buffering off`).
"""


def demo_permissions() -> Permissions:
    """What the demo task may do: the workspace tools, inside the listed folders only."""
    return Permissions(
        allowed_tools=[
            "list_dir",
            "read_file",
            "grep",
            "apply_patch",
            "write_file",
            "run_command",
            "read_artifact",
            "search_history",
        ],
        denied_tools=[],
        requires_approval=[],
        file_scopes=["README.md", "CHANGELOG.md", "app/**", "proxy/**", "tests/**", "logs/**", "docs/**"],
    )


def copy_sample(dest: str | Path) -> Path:
    """Copy the sample workspace to ``dest``.

    Args:
        dest: A folder that does not exist or is empty.

    Returns:
        ``dest``.
    """
    d = Path(dest)
    if d.exists() and any(d.iterdir()):
        raise FileExistsError(f"{d} is not empty")
    shutil.copytree(
        SAMPLE_WORKSPACE, d, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".taskctx")
    )
    return d


def hand_edit(workspace: str | Path) -> Path:
    """A person's edit of the sample while the task is paused: :data:`DEMO_HAND_EDIT` appended.

    To ``proxy/nginx.conf``; the limit itself is unchanged.

    Args:
        workspace: The demo's workspace.

    Returns:
        The edited file.
    """
    conf = Path(workspace) / "proxy" / "nginx.conf"
    conf.write_text(conf.read_text(encoding="utf-8") + DEMO_HAND_EDIT, encoding="utf-8")
    return conf


def demo_tools(workspace: str | Path, receipts_dir: str | Path | None = None, cls: Any = WorkspaceTools) -> Any:
    """The demo's tool executor on ``workspace``.

    Args:
        workspace: The demo's workspace.
        receipts_dir: Where command receipts go; default the workspace's own.
        cls: The executor class (tests wrap it).

    Returns:
        The executor.
    """
    tools = cls(workspace, receipts_dir=receipts_dir, timeout=60)
    tools.strict_resolution = True
    return tools


_DECLINED = "the user declined the change; stopping this step"


def _unless_refused(answer: Any) -> Any:
    """The scripted answer, unless the user refused the previous call.

    A reject or respond at an approval, or ``--deny-all``: then the step ends blocked and recovery
    stops the task.
    """

    def pick(messages: list[Any], meta: dict[str, Any]) -> Any:
        tools = [m for m in messages if getattr(m, "type", "") == "tool"]
        last = str(tools[-1].content) if tools else ""
        if "[denied" in last or "rejected" in last.lower() or "the user answered" in last.lower():
            return complete(_DECLINED, result="blocked")
        return answer

    return pick


def _stop_if_declined(answer: Any) -> Any:
    """The scripted recovery answer, unless the failure is a step the user's refusal ended.

    Then recovery stops the task (see :func:`_unless_refused`).
    """

    def pick(messages: list[Any], meta: dict[str, Any]) -> Any:
        if any(_DECLINED in str(m.content) for m in messages):
            return recover("stop", "the user declined the fix; the task stops here")
        return answer

    return pick


_STEPS: dict[str, list[Any]] = {
    "s1": [
        tool_call("list_dir", {"path": ".", "depth": 2}, id="d-ls", content="Look at the layout first."),
        tool_call("read_file", {"path": "logs/proxy_error.log"}, id="d-log", content="Read the proxy's error log."),
        tool_call(
            "grep",
            {"pattern": "client_max_body_size|MAX_UPLOAD_BYTES", "path": "."},
            id="d-grep",
            content="Which limits are configured?",
        ),
        tool_call(
            "read_file",
            {"path": "secrets/prod.env"},
            id="d-secrets",
            content="Check whether the bucket credentials play a part.",
        ),
        complete(
            "the proxy refuses bodies over 1 MB before they reach the app",
            findings=[
                "proxy/nginx.conf sets client_max_body_size 1m at server level, so nginx answers 413",
                "app/upload.py accepts up to 10 MiB (MAX_UPLOAD_BYTES)",
            ],
        ),
    ],
    "s2": [
        tool_call(
            "read_file",
            {"path": "proxy/nginx.conf"},
            id="d-reread",
            content="The config changed while the task was paused: re-read it before patching it.",
        ),
        tool_call("apply_patch", {"patch": _PATCH_WRONG_UNIT}, id="d-fix1", content="Raise the limit to 10 MB."),
        complete("raised client_max_body_size in proxy/nginx.conf"),
    ],
    "s3": [
        tool_call("run_command", {"argv": DEMO_TEST_ARGV}, id="d-test1", content="Run the upload tests."),
        tool_call(
            "apply_patch",
            {"patch": _PATCH_UNIT},
            id="d-fix2",
            content="nginx sizes take k, m or g: 10m, not 10mb.",
        ),
        tool_call("run_command", {"argv": DEMO_TEST_ARGV}, id="d-test2", content="Run the tests again."),
        tool_call(
            "write_file",
            {"path": "CHANGELOG.md", "content": _CHANGELOG},
            id="d-changelog",
            content="Note the fix.",
        ),
        complete(
            "the upload tests pass; CHANGELOG.md notes the fix",
            findings=["tests/test_upload.py passes (3 tests) with client_max_body_size 10m"],
        ),
    ],
}
_EXECUTOR_CALLS = 40
#: The tool node's words for an approved call not run because its file changed while waiting.
_CHANGED_WHILE_WAITING = "changed while waiting for approval"


def _call_id(a: Any) -> str:
    return str(a.tool_calls[0]["id"]) if getattr(a, "tool_calls", None) else ""


def _remade_patch(reread: str) -> str:
    """The fix's patch made again on the config's bytes as re-read (``reread``: the read_file result).

    Its ``client_max_body_size`` line, whatever a person made of it, becomes the fix's line; the old
    patch when the line is gone.
    """
    lines = reread.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("client_max_body_size")), None)
    if at is None:
        return _PATCH_WRONG_UNIT
    return (
        f"--- a/proxy/nginx.conf\n+++ b/proxy/nginx.conf\n@@ -{at + 1},1 +{at + 1},1 @@\n"
        f"-{lines[at]}\n+        client_max_body_size 10mb;\n"
    )


def _executor(messages: list[Any], meta: dict[str, Any]) -> Any:
    """The executor's next answer, from the current step and the latest call in the transcript.

    So a resumed or re-approved run picks the same answer in any process. The fix's patch refused
    because ``proxy/nginx.conf`` changed while it waited for approval: re-read the file and make the
    patch again (put up for approval again). Any other refusal ends the step blocked.
    """
    answers = _STEPS.get(str(meta.get("step_id") or ""), [])
    tools = [m for m in messages if getattr(m, "type", "") == "tool"]
    last_id = str(getattr(tools[-1], "tool_call_id", "")) if tools else ""
    last = str(tools[-1].content) if tools else ""
    ids = [_call_id(a) for a in answers]
    if last_id.startswith(("d-fix1-", "d-reread-")):
        k = int(last_id.rsplit("-", 1)[1])
        base = last_id.rsplit("-", 1)[0]
    else:
        k, base = 1, last_id
    if not base or base not in ids:  # the step's first call
        return answers[0] if answers else complete("nothing more to do", result="blocked")
    if base == "d-fix1" and "[denied" in last and _CHANGED_WHILE_WAITING in last:
        return tool_call(
            "read_file",
            {"path": "proxy/nginx.conf"},
            id=f"d-reread-{k + 1}",
            content="The config changed while the patch waited for approval: re-read it and patch it again.",
        )
    if base == "d-reread" and k > 1:
        return tool_call(
            "apply_patch",
            {"patch": _remade_patch(last)},
            id=f"d-fix1-{k}",
            content="Raise the limit to 10 MB, on the config's current bytes.",
        )
    nxt = answers[ids.index(base) + 1]
    if base == "d-fix1":
        return _unless_refused(nxt)(messages, meta)
    return nxt


def demo_model() -> ScriptedChatModel:
    """The scripted policy of the demo: answers per role, in call order, resume-safe."""
    return ScriptedChatModel(
        script={
            "planner": [
                plan(
                    steps=[
                        {
                            "id": "s1",
                            "title": "Find where the 413 comes from",
                            "expected_output": "the component and the setting that refuse bodies over 1 MB",
                        },
                        {
                            "id": "s2",
                            "title": "Raise the proxy's body-size limit to the app's 10 MiB",
                            "expected_output": "proxy/nginx.conf allows 10 MiB bodies",
                            "depends_on": ["s1"],
                        },
                        {
                            "id": "s3",
                            "title": "Run the upload tests and note the fix in CHANGELOG.md",
                            "expected_output": "tests/test_upload.py passes; CHANGELOG.md has the entry",
                            "depends_on": ["s2"],
                        },
                    ],
                    goal="uploads up to 10 MB pass the proxy; tests/test_upload.py passes",
                    criteria=["tests/test_upload.py passes", "CHANGELOG.md notes the fix under Unreleased"],
                )
            ],
            "executor": [_executor] * _EXECUTOR_CALLS,
            "recovery": [
                _stop_if_declined(
                    recover("retry", "nginx rejects the size '10mb' (units are k, m, g); patch it to 10m")
                )
            ],
            "reviewer": [review("approve", "5 MB uploads pass the proxy; tests pass; tests/test_upload.py untouched")],
        },
        fallback={
            # off the scripted path (the user rejected or answered an approval): end cleanly
            "recovery": recover("stop", "the user declined the fix; the task stops here"),
            "executor": complete("nothing more to do without the declined change", result="blocked"),
            "reviewer": review("revise", "the fix was declined", issues=["the proxy limit is unchanged"]),
            "planner": plan(reason="the fix was declined; nothing left to plan"),
        },
    )
