"""Recorded agent trajectories: loading them, and reading a request's goal and constraints.

A trajectory file is JSON Lines (the format of ``shared/data/trajectories/README.md``): a header
``{"id", "source_repo", "source_path", "license", "task", "n_steps", "meta"}``, then one
``{"step", "thought", "action", "observation"}`` per step.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compression import ResultKind
from .errors import TrajectoryError
from .text import cut

__all__ = [
    "RecordedStep",
    "Trajectory",
    "agent_request",
    "classify_result",
    "extract_constraints",
    "is_prohibition",
    "load_trajectory",
    "normalize_typography",
    "parse_action",
    "request_goal",
]

#: Where the trajectory format is described (as the README's paths give it).
_FORMAT_DOC = "../shared/data/trajectories/README.md"


@dataclass(frozen=True)
class RecordedStep:
    """One recorded step: the agent's thought, its action (parsed into tool and arguments), what it saw."""

    step: int
    thought: str
    action: str
    observation: str
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Trajectory:
    """A recorded agent run: its header and its steps."""

    id: str
    task: str
    meta: dict[str, Any]
    steps: list[RecordedStep] = field(default_factory=list)
    path: str = ""

    @property
    def request(self) -> str:
        """What the agent was asked (see :func:`agent_request`)."""
        return agent_request(self.task, self.meta)

    @property
    def goal(self) -> str:
        """The request's first meaningful line (:func:`request_goal`)."""
        return request_goal(self.request)


def agent_request(task: str, meta: dict[str, Any]) -> str:
    """The request the recorded agent saw.

    tau-bench's ``task`` is the simulated user's instruction (the agent never saw it), so its
    first user message is used instead.

    Args:
        task: The header's ``task``.
        meta: The header's ``meta`` (``first_user_message``, when there is one).

    Returns:
        The request.
    """
    first = meta.get("first_user_message")
    return first if isinstance(first, str) and first.strip() else task


#: Lines of a recorded request that carry no goal: blank, a lone tag (``<uploaded_files>``,
#: ``<task>``), a lone absolute path, a bare header (``ISSUE:``, ``# Problem Statement``).
_NO_GOAL_LINE = re.compile(
    r"^(?:<[^<>]*>|/\S*|ISSUE:|#+\s*(?:problem statement|issue(?: description)?)|description)?$", re.I
)
#: Harness boilerplate at the start of a line (the agent frameworks' request templates), cut off;
#: what follows it on the line (if anything) is the goal.
_BOILERPLATE = re.compile(
    r"^(?:"
    r"I've uploaded an? .*?(?:repository|repo)\b(?: in the directory \S+?)?\.(?:\s+|$)"
    r"(?:Consider the following [^:]*:)?"
    r"|We're currently solving the following (?:issue|CTF challenge)[^.]*\.\s*(?:Here's the issue text:)?"
    r"|Please fix the following issue for the repository in \S+"
    r"|Environment has been set up for you[^.]*\.\s*(?:You may assume [^.]*\.)?"
    r")\s*",
    re.I,
)
#: A lead-in left at the end of a goal line ("... The description is:").
_TRAILING_LEADIN = re.compile(r"\s*(?:The description is|Here's the issue text):\s*$", re.I)


def request_goal(request: str, limit: int = 200) -> str:
    """The first meaningful line of a recorded request.

    Blank lines, lone tags and paths, bare headers and the harness boilerplate of the recorded
    agents ("I've uploaded a ... repository in the directory ...", "We're currently solving the
    following ...", "Please fix the following issue for the repository in ...") are skipped
    (boilerplate at the start of a line is cut off and the rest of the line kept).

    Args:
        request: The request.
        limit: The most characters kept (a longer line is cut there and says so:
            :func:`context.text.cut`).

    Returns:
        The goal line; the first non-blank line when none is meaningful, ``""`` for an empty
        request.
    """
    lines = [ln.strip() for ln in request.splitlines()]
    for ln in lines:
        if _NO_GOAL_LINE.match(ln):
            continue
        rest = _TRAILING_LEADIN.sub("", _BOILERPLATE.sub("", ln, count=1)).strip()
        if rest and not _NO_GOAL_LINE.match(rest):
            return cut(rest, limit)
    return cut(next((ln for ln in lines if ln), ""), limit)


_INVALID = re.compile(r"^\[invalid tool call")


def parse_action(action: str) -> tuple[str, dict[str, Any]]:
    """Parse a recorded action.

    Args:
        action: A JSON string ``{"name", "arguments"}`` (OpenHands, moatless-tools, tau-bench) or
            a raw command string (SWE-agent).

    Returns:
        ``(tool name, arguments dict)``; a command string is ``(its first word, {"command": ...})``.
    """
    text = action.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = {"input": args}
            if not isinstance(args, dict):
                args = {"input": args}
            return obj["name"], args
    if _INVALID.match(text):
        return "invalid_tool_call", {"recorded": text}
    first = text.split(None, 1)[0] if text else "noop"
    name = re.sub(r"[^A-Za-z0-9_-]", "_", first)[:64] or "command"
    return name, {"command": text}


_SEARCH = {
    "semanticsearch",
    "findclass",
    "findfunction",
    "findcodesnippet",
    "grep",
    "search_dir",
    "search_file",
    "find_file",
    "search",
    "search_history",
}
_READ = {"viewcode", "open", "read_file", "cat", "decompile"}


#: Tools whose output is a command's: shells, interpreters, and an editor's command results.
_COMMAND = {
    "bash",
    "shell",
    "execute_bash",
    "execute_command",
    "run",
    "run_command",
    "run_ipython",
    "python",
    "ipython",
    "terminal",
    "str_replace_editor",
    "edit",
    "create",
}


def classify_result(tool: str, arguments: dict[str, Any]) -> ResultKind:
    """Which compression rule a tool's output falls under.

    Args:
        tool: The tool name.
        arguments: The call's arguments.

    Returns:
        ``search``, ``file_read``, ``command`` (a shell, an interpreter or an editor command), or
        ``other`` for any other tool (its cut output's note names the tool, not a command).
    """
    t = tool.lower()
    if t in _SEARCH or t.startswith("search_") or t.startswith("find"):
        return "search"
    if t in _READ or (t == "str_replace_editor" and arguments.get("command") == "view"):
        return "file_read"
    return "command" if t in _COMMAND else "other"


#: Typography a request may hold, as plain ASCII (matched on; the constraint itself stays verbatim).
_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201b": "'",
        "\u02bc": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u00a0": " ",
        "\u202f": " ",
    }
)
#: Where an imperative starts: the sentence's start, or after "please", "and", "you must"...
_IMPERATIVE = r"(?:^|\b(?:please|and|but|also|so|just|you|you must|you should|we must|always)\s+)"
_CONSTRAINT = re.compile(
    # prohibitions anywhere in a sentence (not a first-person statement: "I don't know why")
    r"(?<!\bi )(?<!\bwe )(?<!\bthat )(?<!\bwhich )"
    r"\b(?:do not|don't|dont|must not|mustn't|must never|should never|should not|shouldn't|may not|"
    r"are not allowed|is not allowed|not allowed to|not permitted|is forbidden|are forbidden|is prohibited|"
    r"are prohibited|under no circumstances|refrain from|only if|without (?:modifying|changing|touching|editing|"
    r"breaking|deleting|removing))\b"
    # imperatives: "Please never ...", "Avoid ...", "No changes to ..."
    rf"|{_IMPERATIVE}(?:never|avoid|no (?:\w+[- ])?(?:changes?|edits?|modifications?|pushes|pushing|commits?|"
    r"deletions?|force[- ]push(?:es|ing)?|touching|new dependenc(?:y|ies)))\b"
    r"|^no\s+\S+.*\b(?:to|in|on|of)\b",
    re.IGNORECASE,
)
#: A list marker at the start of a line: "-", "*", "+", "•", "1.", "2)", "(3)".
_MARKER = re.compile(r"^\s*(?:[-*+\u2022]|\(?\d{1,3}[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def normalize_typography(text: str) -> str:
    """A text as constraints are matched on it.

    Args:
        text: Any text.

    Returns:
        Its NFKC form, typographic quotes, apostrophes and dashes as ASCII, no-break spaces as
        spaces (``"Don\u2019t"`` -> ``"Don't"``).
    """
    return unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY)


def is_prohibition(sentence: str) -> bool:
    """Whether a sentence says what must not be done (the heuristic of :func:`extract_constraints`).

    Args:
        sentence: One sentence (matched after :func:`normalize_typography`).

    Returns:
        True for a prohibition.
    """
    return _CONSTRAINT.search(normalize_typography(sentence).strip()) is not None


def extract_constraints(request: str, limit: int = 8) -> list[str]:
    """Hard constraints found in the wording of a request (a heuristic: the request governs).

    Each sentence (of each line, list markers such as ``- ``, ``1.`` or ``2)`` stripped) that
    says what must not be done ("do not", "don't", "must not", "never", "avoid", "no changes to",
    ...), anywhere in the sentence, matched after normalising typography (``Don’t`` is
    ``Don't``). A request that is one sentence is the request, not a constraint of itself.

    Args:
        request: The request.
        limit: The most constraints returned.

    Returns:
        The constraints, copied verbatim, in order.
    """
    whole = " ".join(request.split())
    out: list[str] = []
    for line in request.splitlines():
        s = _MARKER.sub("", line, count=1).strip()
        if not s:
            continue
        for part in _SENTENCE_END.split(s):
            p = part.strip()
            if not p or p in out or len(p) > 400 or " ".join(p.split()) == whole:
                continue
            if is_prohibition(p):
                out.append(p)
            if len(out) >= limit:
                return out
    return out


def load_trajectory(path: str | Path) -> Trajectory:
    """Read one trajectory file.

    Args:
        path: A ``.jsonl`` trajectory file.

    Returns:
        The trajectory, each action parsed (:func:`parse_action`).

    Raises:
        TrajectoryError: The file is missing, not UTF-8 JSON Lines, lacks its header or steps, or
            holds fewer steps than its header says (the message names the file, the line and the
            fix).
    """
    p = Path(path)
    if p.is_dir():
        raise TrajectoryError(f"{p} is a directory; pass one .jsonl file from it (or use `taskctx bench {p}`)")
    if not p.is_file():
        raise TrajectoryError(
            f"trajectory file not found: {p}; pass a .jsonl from ../shared/data/trajectories/ (format in {_FORMAT_DOC})"
        )
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"cannot read trajectory {p}: {exc}; it must be UTF-8 JSON Lines") from exc
    numbered = [(n, ln) for n, ln in enumerate(lines, start=1) if ln.strip()]
    if not numbered:
        raise TrajectoryError(f"trajectory {p} is empty; line 1 must be the header with id and task")

    def obj(i: int) -> dict[str, Any]:
        lineno, text = numbered[i]
        try:
            o = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(
                f"{p}:{lineno}: not valid JSON ({exc.msg}); each line must be one JSON object"
            ) from exc
        if not isinstance(o, dict):
            raise TrajectoryError(f"{p}:{lineno}: expected a JSON object, got {type(o).__name__}")
        return o

    head = obj(0)
    for key in ("id", "task"):
        if not isinstance(head.get(key), str) or not head[key].strip():
            raise TrajectoryError(
                f"{p}:{numbered[0][0]}: header lacks a non-empty string {key!r}; see the format in {_FORMAT_DOC}"
            )
    steps: list[RecordedStep] = []
    for i in range(1, len(numbered)):
        o = obj(i)
        lineno = numbered[i][0]
        for key in ("action", "observation"):
            if not isinstance(o.get(key), str):
                raise TrajectoryError(f"{p}:{lineno}: step lacks a string {key!r}")
        thought = o.get("thought") or ""
        if not isinstance(thought, str):
            raise TrajectoryError(f"{p}:{lineno}: 'thought' must be a string or null")
        tool, args = parse_action(o["action"])
        steps.append(
            RecordedStep(
                step=int(o.get("step", i)),
                thought=thought,
                action=o["action"],
                observation=o["observation"],
                tool=tool,
                arguments=args,
            )
        )
    if not steps:
        raise TrajectoryError(f"{p}: header only, no recorded steps to replay")
    declared = head.get("n_steps")
    if isinstance(declared, int) and declared != len(steps):
        raise TrajectoryError(
            f"{p}: the header says n_steps={declared} but the file holds {len(steps)} steps; "
            "the file looks truncated or edited: restore it from the source"
        )
    meta = head.get("meta")
    if not isinstance(meta, dict):
        meta = {}
    return Trajectory(id=head["id"], task=head["task"], meta=meta, steps=steps, path=str(p))
