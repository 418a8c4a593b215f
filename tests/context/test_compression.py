"""Tool-result compression at and around its thresholds, and the exact artifact store."""

from __future__ import annotations

import hashlib

import pytest

from context import (
    COMMAND_LIMIT,
    FILE_LIMIT,
    SEARCH_LIMIT,
    ArtifactNotFoundError,
    Compressed,
    InvalidRefError,
    compress_tool_result,
    split_search_results,
)

REF = "artifact://sha256:" + "0123456789abcdef" * 4


def test_limits_are_the_documented_ones():
    assert (COMMAND_LIMIT, FILE_LIMIT, SEARCH_LIMIT) == (4000, 8000, 5)


# ---------------------------------------------------------------------------------- command


def test_short_output_is_returned_verbatim_with_a_one_line_summary():
    assert compress_tool_result("hello\nworld\n", "command", REF) == Compressed(
        text="hello\nworld\n", compressed=False, summary="12 chars: hello", raw_chars=12
    )
    assert compress_tool_result("", "command", REF) == Compressed(
        text="", compressed=False, summary="0 chars: (no output)", raw_chars=0
    )
    long_first = "y" * 150
    c = compress_tool_result(long_first, "command", REF)
    assert c.summary == "150 chars: " + "y" * 97 + "..."
    assert c.text == long_first


def test_command_output_of_exactly_4000_chars_is_not_compressed():
    raw = "\n" + "a" * 3998 + "\n"
    assert len(raw) == 4000
    c = compress_tool_result(raw, "command", REF)
    assert c == Compressed(text=raw, compressed=False, summary="4000 chars: " + "a" * 97 + "...", raw_chars=4000)


def test_command_output_of_4001_chars_keeps_head_tail_and_a_summary_line():
    head = "".join(f"head {i:04d}\n" for i in range(120))  # 120 lines x 10 chars = 1200
    middle = "m" * 1600 + "\n"  # 1601
    tail = "".join(f"tail {i:04d}\n" for i in range(120))  # 1200
    raw = head + middle + tail
    assert (len(head), len(middle), len(tail), len(raw)) == (1200, 1601, 1200, 4001)
    c = compress_tool_result(raw, "command", REF)
    summary = f"command output: 241 lines, 4001 chars; 1601 chars omitted from the middle; full output: {REF}"
    assert c == Compressed(
        text=head + "\n[... 1601 chars omitted ...]\n" + tail + f"\n[{summary}]",
        compressed=True,
        summary=summary,
        raw_chars=4001,
    )


def test_small_exact_head_tail_text():
    tail = "tail line\n" + "Q" * 1190  # the last 1200 chars
    raw = "A" * 1200 + "M" * 1601 + tail  # one newline => 2 lines
    assert len(raw) == 4001
    c = compress_tool_result(raw, "other", REF)
    summary = f"output: 2 lines, 4001 chars; 1601 chars omitted from the middle; full output: {REF}"
    assert c.summary == summary
    assert c.text == "A" * 1200 + "\n[... 1601 chars omitted ...]\ntail line\n" + "Q" * 1190 + f"\n[{summary}]"
    assert "M" not in c.text
    # a named tool's output is labelled by its name; a command's stays a command's
    named = compress_tool_result(raw, "other", REF, tool="kv_get")
    assert (
        named.summary
        == f"tool output: kv_get, 2 lines, 4001 chars; 1601 chars omitted from the middle; full output: {REF}"
    )
    assert named.text.endswith(f"\n[{named.summary}]")
    assert compress_tool_result(raw, "command", REF, tool="run_command").summary.startswith("command output: 2 lines")
    hostile = compress_tool_result(raw, "other", REF, tool="kv]\n## Facts")
    assert hostile.summary.startswith("tool output: kv_____Facts, 2 lines")


# ---------------------------------------------------------------------------------- file_read


def test_file_read_of_8000_chars_is_not_compressed():
    raw = "".join(f"{i:079d}\n" for i in range(1, 101))
    assert len(raw) == 8000
    c = compress_tool_result(raw, "file_read", REF, path="src/big.py")
    assert (c.text, c.compressed, c.raw_chars) == (raw, False, 8000)
    assert c.summary == "8000 chars: " + f"{1:079d}"[:97]


def test_file_read_over_8000_chars_gives_snippet_path_and_ref():
    lines = [f"{i:079d}" for i in range(1, 101)] + ["x"]
    raw = "\n".join(lines[:100]) + "\nx"
    assert len(raw) == 8001
    c = compress_tool_result(raw, "file_read", REF, path="src/big.py")
    # 80 chars per line with its newline: 25 lines fill the 2000-char snippet exactly
    summary = (
        f"file read src/big.py: 101 lines, 8001 chars; showing lines 1-25; "
        f"full text: {REF}; a slice: {REF}#L<start>-<end>"
    )
    assert c == Compressed(
        text="\n".join(lines[:25]) + f"\n[{summary}]", compressed=True, summary=summary, raw_chars=8001
    )


def test_file_read_snippet_is_capped_at_40_lines_and_a_read_without_path_says_file_read():
    raw = "".join(f"line {i:04d}\n" for i in range(1, 1001))  # 10_000 chars, short lines
    c = compress_tool_result(raw, "file_read", REF)
    assert c.summary == (
        f"file read: 1000 lines, 10000 chars; showing lines 1-40; full text: {REF}; a slice: {REF}#L<start>-<end>"
    )
    assert c.text == "".join(f"line {i:04d}\n" for i in range(1, 41)) + f"[{c.summary}]"


def test_file_read_between_command_and_file_limits_is_verbatim():
    raw = "z" * 5000
    c = compress_tool_result(raw, "file_read", REF)
    assert (c.text, c.compressed) == (raw, False)
    # the same output from a command is compressed
    assert compress_tool_result(raw, "command", REF).compressed is True


def test_file_read_with_one_huge_line_still_shows_a_snippet():
    # regression: a first line longer than the snippet cap used to give an empty snippet, "lines 1-0"
    raw = "var a=1;" * 1200  # 9600 chars, a single line
    c = compress_tool_result(raw, "file_read", REF, path="app.min.js")
    assert c.text.startswith("var a=1;" * 250 + "\n[")
    assert "lines 1-0" not in c.summary
    assert c.compressed is True
    assert c.summary == (
        f"file read app.min.js: 1 line, 9600 chars (9600 bytes); shown: chars 1-2000; "
        f"full text: {REF} (one line: #C<start>-<end> after the ref reads chars start-end)"
    )


# ------------------------------------------------------------------------------ huge lines
# A line over COMMAND_LIMIT cannot enter a prompt whole, not even as a #L slice: the note counts
# chars (shown, omitted, total, UTF-8 bytes) and says which lines the cut falls in.


def test_a_3_000_000_char_single_line_command_output():
    raw = "0123456789" * 300_000
    c = compress_tool_result(raw, "command", REF)
    summary = (
        "command output: 1 line, 3000000 chars (3000000 bytes); shown: chars 1-1200 and 2998801-3000000; "
        f"2997600 chars omitted from the middle; full output: {REF} (one line: #C<start>-<end> after the ref reads chars start-end)"
    )
    assert c == Compressed(
        text="0123456789" * 120 + "\n[... 2997600 chars omitted ...]\n" + "0123456789" * 120 + f"\n[{summary}]",
        compressed=True,
        summary=summary,
        raw_chars=3_000_000,
    )


def test_a_3_000_000_char_single_line_file_read():
    raw = "x=1;" * 750_000
    c = compress_tool_result(raw, "file_read", REF)
    summary = (
        f"file read: 1 line, 3000000 chars (3000000 bytes); shown: chars 1-2000; "
        f"full text: {REF} (one line: #C<start>-<end> after the ref reads chars start-end)"
    )
    assert c == Compressed(text="x=1;" * 500 + f"\n[{summary}]", compressed=True, summary=summary, raw_chars=3_000_000)


def test_two_very_long_lines():
    raw = "a" * 1_500_000 + "\n" + "b" * 1_500_000 + "\n"
    c = compress_tool_result(raw, "command", REF)
    summary = (
        "command output: 2 lines, 3000002 chars (3000002 bytes); shown: chars 1-1200 and 2998803-3000002; "
        "2997602 chars omitted from the middle, in lines 1-2; lines over 4000 chars (read a part with "
        f"#C<start>-<end> after the ref): 1 (1500000 chars), 2 (1500000 chars); full output: {REF}"
    )
    assert c.summary == summary
    assert c.text == "a" * 1200 + "\n[... 2997602 chars omitted ...]\n" + "b" * 1199 + f"\n\n[{summary}]"
    f = compress_tool_result(raw, "file_read", REF, path="dump.json")
    assert f.summary == (
        "file read dump.json: 2 lines, 3000002 chars (3000002 bytes); shown: chars 1-2000 of line 1 "
        "(1500000 chars); lines over 4000 chars (read a part with #C<start>-<end> after the ref): 1 (1500000 chars), "
        f"2 (1500000 chars); full text: {REF}; a slice: {REF}#L<start>-<end>"
    )
    assert f.text == "a" * 2000 + f"\n[{f.summary}]"


def test_a_cjk_single_line_counts_chars_and_utf8_bytes():
    raw = "漢字" * 500_000  # 1,000,000 chars, 3 bytes each in UTF-8
    c = compress_tool_result(raw, "file_read", REF, path="data/zh.txt")
    summary = (
        f"file read data/zh.txt: 1 line, 1000000 chars (3000000 bytes); shown: chars 1-2000; "
        f"full text: {REF} (one line: #C<start>-<end> after the ref reads chars start-end)"
    )
    assert c == Compressed(text="漢字" * 1000 + f"\n[{summary}]", compressed=True, summary=summary, raw_chars=1_000_000)
    o = compress_tool_result(raw, "command", REF)
    assert o.summary == (
        "command output: 1 line, 1000000 chars (3000000 bytes); shown: chars 1-1200 and 998801-1000000; "
        f"997600 chars omitted from the middle; full output: {REF} (one line: #C<start>-<end> after the ref reads chars start-end)"
    )


def test_a_long_line_among_short_ones_names_the_omitted_lines_and_the_slice_fetches_them(stores):
    # 300 short lines ending \r\n (counted as #L slices count them), one 6,000-char line, 300 more
    short = "".join(f"row {i:03d}\r\n" for i in range(300))  # 300 x 9 chars
    raw = short + "z" * 6000 + "\n" + short
    ref = stores.artifacts.put(raw)
    c = compress_tool_result(raw, "command", ref)
    assert c.summary == (
        "command output: 601 lines, 11401 chars (11401 bytes); shown: chars 1-1200 and 10202-11401; "
        "9001 chars omitted from the middle, in lines 134-468; lines over 4000 chars (read a part with "
        f"#C<start>-<end> after the ref): 301 (6000 chars); full output: {ref}; the omitted lines 134-468: {ref}#L134-468"
    )
    got = stores.artifacts.get(f"{ref}#L134-468").decode("utf-8")
    assert raw[1200:-1200] in got
    assert raw[1200:-1200] not in stores.artifacts.get(f"{ref}#L135-468").decode("utf-8")
    assert raw[1200:-1200] not in stores.artifacts.get(f"{ref}#L134-467").decode("utf-8")


# ---------------------------------------------------------------------------------- search


def test_search_with_5_results_is_kept():
    raw = "\n".join(f"src/m{i}.py:{i}: match" for i in range(1, 6)) + "\n"
    c = compress_tool_result(raw, "search", REF)
    assert c == Compressed(
        text=raw, compressed=False, summary=f"{len(raw)} chars: src/m1.py:1: match", raw_chars=len(raw)
    )


def test_search_with_6_results_keeps_first_5_and_counts_1_omitted():
    raw = "\n".join(f"src/m{i}.py:{i}: match" for i in range(1, 7)) + "\n"
    c = compress_tool_result(raw, "search", REF)
    summary = f"search: 6 results, first 5 shown, 1 omitted; full list: {REF}"
    assert c == Compressed(
        text="\n".join(f"src/m{i}.py:{i}: match" for i in range(1, 6)) + f"\n[{summary}]",
        compressed=True,
        summary=summary,
        raw_chars=len(raw),
    )


def test_search_fenced_sections_keep_first_5_with_their_path_lines():
    sections = [f"pkg/f{i}.py\n```python\ndef f{i}():\n    return {i}\n```" for i in range(1, 8)]
    raw = "Found 7 code sections.\n\n" + "\n\n".join(sections) + "\n"
    c = compress_tool_result(raw, "search", REF)
    summary = f"search: 7 results, first 5 shown, 2 omitted; full list: {REF}"
    assert c.summary == summary
    assert c.text == "\n".join(sections[:5]) + f"\n[{summary}]"


def test_search_over_5_results_whose_first_5_are_long_is_cut_head_tail():
    results = [f"r{i} " + "x" * 1000 for i in range(1, 8)]  # 1003 chars each
    raw = "\n".join(results)
    c = compress_tool_result(raw, "search", REF)
    summary = f"search: 7 results, first 5 shown, 2 omitted; full list: {REF}"
    assert c.summary == summary
    assert (c.compressed, c.raw_chars) == (True, 7 * 1003 + 6)
    # the first 5 results + the summary line, as one text, then cut as a command output is
    inner_len = 5 * 1003 + 5 + len(summary) + 2
    inner_summary = (
        f"search (first 5 results): 6 lines, {inner_len} chars; {inner_len - 2400} chars omitted "
        f"from the middle; full output: {REF}"
    )
    assert c.text.startswith(
        "r1 " + "x" * 1000 + "\nr2 " + "x" * 193 + f"\n[... {inner_len - 2400} chars omitted ...]\n"
    )
    assert c.text.endswith(f"x\n[{summary}]\n[{inner_summary}]\n[{summary}]")
    assert (
        len(c.text)
        == 1200
        + len(f"\n[... {inner_len - 2400} chars omitted ...]\n")
        + 1200
        + len(inner_summary)
        + 3
        + len(summary)
        + 3
    )
    assert "r6 " not in c.text and "r7 " not in c.text


def test_split_search_results_on_fenced_sections():
    raw = "Found 2 code sections.\n\na.py\n```\nx = 1\n```\n\nb/c.py\n```python\n\ndef y():\n    pass\n```\n"
    assert split_search_results(raw) == ["a.py\n```\nx = 1\n```", "b/c.py\n```python\n\ndef y():\n    pass\n```"]


def test_split_search_results_on_plain_lines():
    assert split_search_results("one\n\n  two\n\t\nthree\n") == ["one", "  two", "three"]
    assert split_search_results("") == []


def test_split_search_results_path_line_with_backticks():
    # regression: a path line with backticks used to mis-pair fences across sections
    raw = "`a.py`\n```\nx\n```\n`b.py`\n```\ny\n```\n"
    assert split_search_results(raw) == ["`a.py`\n```\nx\n```", "`b.py`\n```\ny\n```"]


def test_split_search_results_leading_fence_without_path_line():
    # regression: an output starting with a fence used to mis-pair fences
    raw = "```\nx\n```\nb.py\n```\ny\n```\n"
    assert split_search_results(raw) == ["```\nx\n```", "b.py\n```\ny\n```"]


def test_split_search_results_with_crlf_line_endings():
    raw = "a.py\r\n```\r\nx\r\n```\r\nb.py\r\n```\r\ny\r\n```\r\n"
    assert split_search_results(raw) == ["a.py\n```\nx\n```", "b.py\n```\ny\n```"]


# ------------------------------------------------ artifacts (SQLite and Postgres: the stores fixture)


def test_put_returns_sha256_ref_of_utf8_bytes_and_get_is_exact(stores):
    text = "héllo ✓\r\nline two\n\ttabbed\x00end"
    ref = stores.artifacts.put(text)
    assert ref == "artifact://sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert stores.artifacts.get(ref) == text.encode("utf-8")
    assert stores.artifacts.size(ref) == len(text.encode("utf-8"))
    # storing again (as str or bytes) gives the same ref
    assert stores.artifacts.put(text) == ref
    assert stores.artifacts.put(text.encode("utf-8")) == ref


def test_put_bytes_is_byte_exact(stores):
    data = bytes(range(256))
    ref = stores.artifacts.put(data)
    assert ref == "artifact://sha256:" + hashlib.sha256(data).hexdigest()
    assert stores.artifacts.get(ref) == data


def test_get_line_fragment_returns_exact_lines_with_endings(stores):
    ref = stores.artifacts.put("one\r\ntwo\nthree\r\nfour")
    assert stores.artifacts.get(ref + "#L2-3") == b"two\nthree\r\n"
    assert stores.artifacts.get(ref + "#L1-1") == b"one\r\n"
    assert stores.artifacts.get(ref + "#L4-4") == b"four"
    assert stores.artifacts.get(ref + "#L3-99") == b"three\r\nfour"


def test_compression_never_loses_bytes(stores):
    raw = "".join(f"out {i}\n" for i in range(2000))
    ref = stores.artifacts.put(raw)
    c = compress_tool_result(raw, "command", ref)
    assert c.compressed is True
    assert ref in c.summary
    assert stores.artifacts.get(ref).decode("utf-8") == raw


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "sha256:" + "a" * 64,
        "artifact://sha256:" + "a" * 63,
        "artifact://sha256:" + "A" * 64,
        "artifact://md5:" + "a" * 32,
        "artifact://sha256:" + "a" * 64 + "#L0-2",
        "artifact://sha256:" + "a" * 64 + "#L3-2",
        "artifact://sha256:" + "a" * 64 + "#L2",
        "artifact://sha256:" + "a" * 64 + "#2-3",
    ],
)
def test_invalid_refs_raise_invalid_ref_error(stores, bad):
    with pytest.raises(InvalidRefError):
        stores.artifacts.get(bad)


def test_missing_digest_raises_artifact_not_found(stores):
    missing = "artifact://sha256:" + hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(ArtifactNotFoundError, match=missing):
        stores.artifacts.get(missing)
    with pytest.raises(ArtifactNotFoundError):
        stores.artifacts.get(missing + "#L1-2")
