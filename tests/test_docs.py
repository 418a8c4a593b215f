"""Every fenced code block of README.md and docs/**/*.md runs, so the docs cannot rot.

The conventions (CONTRIBUTING.md, "Docs"):

- ```python blocks run in order, one namespace per page, in a fresh process per page;
- ```bash blocks run with ``bash -e`` (a pipe's status is its last command's), each on its own, in the page's folder (the same
  folder for every block of the page, so a later block sees what an earlier one wrote);
- output and other examples go in fences that never run: ```text, ```console, ```json, ```toml,
  ```yaml, ```diff; a fence without a language is refused;
- an HTML comment on the line right before a fence changes how it runs:
  ``<!-- docs-test: slow -->`` (runs only under ``pytest -m slow``),
  ``<!-- docs-test: postgres -->`` (runs against a fresh database of ``TASKCTX_TEST_PG``; the URL
  ``postgresql://postgres@127.0.0.1:5433/postgres`` in the block is replaced by it),
  ``<!-- docs-test: skip REASON -->`` (never runs; the test says why).

A page's folder looks like a clone of the repository (its top-level files, linked) with
``../shared/data/trajectories`` beside it, linked to the folder the ``trajectories_dir`` fixture
finds (tests/conftest.py). Without one, the page runs up to the first block that names that
folder and the rest is skipped with the fixture's reason. Slow blocks are skipped unless
``-m slow`` is given (the suite's other slow tests run by default: these take minutes each).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: How the docs name the recorded trajectories: beside the user's clone.
TRAJECTORIES_PATH = "../shared/data/trajectories"
DOC_URL = "postgresql://postgres@127.0.0.1:5433/postgres"

RUN = ("python", "bash")
SHOWN = ("text", "console", "json", "toml", "yaml", "diff")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(slow|postgres|skip)\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)[^`]*$")
BLOCK_TIMEOUT = 600
#: Top-level entries of the repository a page's folder does not get (state, caches, the venv).
#: Set in the environment of the blocks: a docs block that runs the suite skips these tests.
NESTED = "TASKCTX_DOCS_BLOCK"
NOT_LINKED = {".git", ".venv", ".taskctx", ".ci", "site", "build", "dist", ".mypy_cache", ".pytest_cache"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str = ""  # slow, postgres, skip or ""
    reason: str = ""  # a skip's reason

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def needs_trajectories(self) -> bool:
        return TRAJECTORIES_PATH in self.code


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the marker comment right before each."""
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{ticks}`*\s*$", lines[i]):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1  # the closing fence
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        out.append(
            Block(
                page=page,
                line=start + 1,
                lang=lang,
                code="\n".join(body) + "\n",
                marker=marker.group(1) if marker else "",
                reason=marker.group(2) if marker else "",
            )
        )
    return out


ALL_BLOCKS = {p.relative_to(REPO).as_posix(): parse_blocks(p) for p in doc_pages()}


@pytest.fixture
def recorded(request: pytest.FixtureRequest) -> tuple[Path | None, str]:
    """The ``trajectories_dir`` fixture's folder, or None and the reason it skipped."""
    try:
        return request.getfixturevalue("trajectories_dir"), ""
    except pytest.skip.Exception as exc:
        return None, str(exc)


def _page_folder(tmp_path: Path, trajectories: Path | None) -> Path:
    """A folder that looks like a clone (top-level entries linked) with the trajectories beside
    it, where the docs' ``../shared/data/trajectories`` finds them."""
    clone = tmp_path / "taskctx"
    clone.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in NOT_LINKED:
            (clone / entry.name).symlink_to(entry)
    if trajectories is not None:
        link = (clone / TRAJECTORIES_PATH).resolve()
        link.parent.mkdir(parents=True)
        link.symlink_to(trajectories)
    return clone


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_API_URL"):
        env.pop(key, None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's taskctx
    env["LANGSMITH_TRACING"] = "false"
    env["LANGGRAPH_STRICT_MSGPACK"] = "true"
    env["PYTHONUNBUFFERED"] = "1"
    env[NESTED] = "1"  # a block that runs pytest does not run the docs blocks again
    # the worktree's packages, as the tests import them (an editable install may point elsewhere)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


#: Runs a page's blocks in order in one process: python blocks exec'd in one namespace, bash
#: blocks as subprocesses (own session, killed with what they left in the background).
RUNNER = r"""
import json, os, signal, subprocess, sys, traceback
blocks = json.load(open(sys.argv[1]))
report = sys.argv[2]
ns = {"__name__": "__main__"}
done = []
for b in blocks:
    print(f"\n===== {b['where']} ({b['lang']})", flush=True)
    try:
        if b["lang"] == "python":
            exec(compile(b["code"], b["where"], "exec"), ns)
            sys.stdout.flush()
        else:
            p = subprocess.Popen(["bash", "-e", "-c", b["code"]], start_new_session=True)
            try:
                rc = p.wait(timeout=b["timeout"])
            finally:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            if rc != 0:
                raise RuntimeError(f"bash exited with {rc}")
    except BaseException:
        json.dump({"done": done, "failed": b["where"], "error": traceback.format_exc()}, open(report, "w"))
        sys.exit(1)
    done.append(b["where"])
json.dump({"done": done, "failed": None, "error": ""}, open(report, "w"))
"""


def run_blocks(blocks: list[Block], folder: Path, replace: dict[str, str] | None = None) -> None:
    payload = []
    for b in blocks:
        code = b.code
        for old, new in (replace or {}).items():
            code = code.replace(old, new)
        payload.append({"where": b.where, "lang": b.lang, "code": code, "timeout": BLOCK_TIMEOUT})
    spec, report = folder.parent / "blocks.json", folder.parent / "report.json"
    spec.write_text(json.dumps(payload))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(spec), str(report)],
        cwd=folder,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=BLOCK_TIMEOUT * max(1, len(blocks)))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"{output}\n===== CPU {cpu:.1f} s ({len(blocks)} blocks)")  # shown with pytest -rP (or -s)
    result = json.loads(report.read_text()) if report.exists() else {"failed": "?", "error": "no report"}
    if proc.returncode != 0 or result["failed"]:
        pytest.fail(
            f"docs block {result['failed']} failed:\n{result['error']}\n--- output (last 6,000 chars) ---\n"
            f"{output[-6000:]}",
            pytrace=False,
        )


def _page_params() -> list:
    return [pytest.param(page, id=page) for page, blocks in ALL_BLOCKS.items() if _plain(blocks)]


def _plain(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.lang in RUN and not b.marker]


def _marked(marker: str) -> list:
    return [
        pytest.param(b, id=b.where)
        for blocks in ALL_BLOCKS.values()
        for b in blocks
        if b.lang in RUN and b.marker == marker
    ]


@pytest.mark.parametrize("page", _page_params())
def test_page_blocks_run(page: str, tmp_path: Path, recorded: tuple[Path | None, str]) -> None:
    """A page's python and bash blocks (unmarked), in order, in one folder."""
    if os.environ.get(NESTED):
        pytest.skip("run from a docs block: the docs blocks do not run themselves")
    trajectories, why = recorded
    blocks = _plain(ALL_BLOCKS[page])
    skipped: list[Block] = []
    if trajectories is None:
        first = next((i for i, b in enumerate(blocks) if b.needs_trajectories), None)
        if first is not None:
            blocks, skipped = blocks[:first], blocks[first:]
    if blocks:
        run_blocks(blocks, _page_folder(tmp_path, trajectories))
    if skipped:
        pytest.skip(f"{len(skipped)} block(s) from {skipped[0].where} on need the recorded trajectories: {why}")


@pytest.mark.slow
@pytest.mark.parametrize("block", _marked("slow"))
def test_slow_block_runs(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest, recorded: tuple[Path | None, str]
) -> None:
    """A block marked ``<!-- docs-test: slow -->`` (minutes: the full bench), only under -m slow."""
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("a slow docs block (minutes): run it with pytest -m slow tests/test_docs.py")
    trajectories, why = recorded
    if block.needs_trajectories and trajectories is None:
        pytest.skip(f"needs the recorded trajectories: {why}")
    run_blocks([block], _page_folder(tmp_path, trajectories))


@pytest.mark.postgres
@pytest.mark.parametrize("block", _marked("postgres"))
def test_postgres_block_runs(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest, recorded: tuple[Path | None, str]
) -> None:
    """A block marked ``<!-- docs-test: postgres -->``, against a fresh database of TASKCTX_TEST_PG."""
    trajectories, why = recorded
    if block.needs_trajectories and trajectories is None:
        pytest.skip(f"needs the recorded trajectories: {why}")
    db = request.getfixturevalue("pg_db")
    run_blocks([block], _page_folder(tmp_path, trajectories), replace={DOC_URL: db})


@pytest.mark.parametrize("block", _marked("skip"))
def test_skipped_block_says_why(block: Block) -> None:
    """A block marked ``<!-- docs-test: skip REASON -->`` never runs; the reason is shown."""
    assert block.reason, f"{block.where}: a skipped docs block must give its reason"
    pytest.skip(f"not run: {block.reason}")


def test_every_fence_has_a_known_language() -> None:
    bad = [
        f"{b.where}: ```{b.lang or '(none)'}"
        for blocks in ALL_BLOCKS.values()
        for b in blocks
        if b.lang not in RUN + SHOWN
    ]
    assert not bad, f"fences must be one of {RUN + SHOWN} (CONTRIBUTING.md, 'Docs'): {bad}"


def test_markers_sit_on_runnable_blocks() -> None:
    bad = [
        f"{b.where}: {b.marker} on ```{b.lang}"
        for bs in ALL_BLOCKS.values()
        for b in bs
        if b.marker and b.lang not in RUN
    ]
    assert not bad, bad


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md is at most 200 lines: move the detail into docs/"
    links = re.findall(r"\]\(((?!https?://|#)[^)\s]+)\)", text)
    missing = [link for link in links if not (REPO / link.split("#")[0]).exists()]
    assert links and not missing, f"README links to missing files: {missing}"


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")]
    assert pages and not [p for p in pages if p not in nav], "add every docs/ page to mkdocs.yml's nav"
