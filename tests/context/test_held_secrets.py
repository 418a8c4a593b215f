"""Held secrets: found in a request, sealed as placeholders in every masking pass, revealed for a tool only."""

from __future__ import annotations

import pytest

from context import InvalidInputError
from context.held_secrets import (
    MissingSecretError,
    hold_secrets,
    placeholder_names,
    reveal_secrets,
    seal_secrets,
    secret_note,
    task_secrets,
)
from context.secrets import mask_secrets, mask_stream, masked_bytes, masked_events, safe_cut, take_secrets

PW = "Tr0ub4dor&3-horse"


def test_a_request_password_gets_a_stable_name_and_given_ones_keep_theirs() -> None:
    req = f"Log in as admin. Password: {PW}, then push with token ghp_{'a' * 36}. Again: password = {PW}"
    sealed, held = take_secrets(req, {"DB_PASSWORD": "s3cret-db-pw"})
    assert sealed == (
        "Log in as admin. Password: {{secret:CREDENTIAL}}, then push with token {{secret:GITHUB_TOKEN}}. "
        "Again: password = {{secret:CREDENTIAL}}"
    )
    assert held == {"DB_PASSWORD": "s3cret-db-pw", "CREDENTIAL": PW, "GITHUB_TOKEN": "ghp_" + "a" * 36}
    assert take_secrets(req, {"DB_PASSWORD": "s3cret-db-pw"}) == (sealed, held)  # stable
    # a second value of one kind gets the next name; a given value in the request is its placeholder
    sealed2, held2 = take_secrets(
        "password: first-pass-1 and secret_key = second-pass-2 use s3cret-db-pw", {"DB_PASSWORD": "s3cret-db-pw"}
    )
    assert (
        sealed2 == "password: {{secret:CREDENTIAL}} and secret_key = {{secret:CREDENTIAL_2}} use {{secret:DB_PASSWORD}}"
    )
    assert held2 == {"DB_PASSWORD": "s3cret-db-pw", "CREDENTIAL": "first-pass-1", "CREDENTIAL_2": "second-pass-2"}
    assert placeholder_names(sealed2) == ["CREDENTIAL", "CREDENTIAL_2", "DB_PASSWORD"]
    assert mask_secrets(sealed2).text == sealed2  # a placeholder is never masked again


def test_sealed_while_held_only_in_every_form() -> None:
    pin = "密码-Zürich-\udcff-42"
    text = f"echo {PW}\nwrapped: {PW[:6]}\n{PW[6:]}\nbytes: {pin}\nreplaced: {pin.replace(chr(0xDCFF), chr(0xFFFD))}"
    assert mask_secrets(text).text == text  # not held: no shape of its own
    with hold_secrets({"CREDENTIAL": PW, "PIN": pin}):
        m = mask_secrets(text)
        assert m.text == (
            "echo {{secret:CREDENTIAL}}\nwrapped: {{secret:CREDENTIAL}}\n\nbytes: {{secret:PIN}}\n"
            "replaced: {{secret:PIN}}"
        )
        assert (m.count, m.kinds) == (4, ("held",))
        assert m.text.count("\n") == text.count("\n")  # the line count is kept
        raw = f"out {pin}\n".encode("utf-8", "surrogateescape")
        assert b"\xff" in raw and masked_bytes(raw) == b"out {{secret:PIN}}\n"
        assert seal_secrets("no secret here") == ("no secret here", 0)
    assert mask_secrets(text).text == text  # dropped when the run ends


def test_a_held_value_across_a_chunk_boundary_is_sealed_and_never_cut() -> None:
    text = "x" * 50 + PW + "y" * 50
    with hold_secrets({"CREDENTIAL": PW}):
        assert safe_cut(text, 55) == 50
        pieces = [text[i : i + 20] for i in range(0, len(text), 20)]
        assert "".join(mask_stream(pieces, overlap=10)) == "x" * 50 + "{{secret:CREDENTIAL}}" + "y" * 50


def test_events_are_stored_with_placeholders() -> None:
    from context import new_event

    payload = {"call_id": "c1", "status": "ok", "result_summary": f"ok {PW}", "reads": {f"a-{PW}.txt": "00"}}
    e = new_event("tool.result.received", payload, actor="tool")
    with hold_secrets({"CREDENTIAL": PW}):
        (out,) = masked_events([e])
    assert out.payload["result_summary"] == "ok {{secret:CREDENTIAL}}"
    assert out.payload["reads"] == {"a-{{secret:CREDENTIAL}}.txt": "00"}


def test_reveal_for_the_tool_only_and_a_missing_name_is_named() -> None:
    args = {"argv": ["login", "--password", "{{secret:CREDENTIAL}}"], "n": 3, "path": "a-{{secret:CREDENTIAL}}.txt"}
    with hold_secrets({"CREDENTIAL": PW}):
        assert reveal_secrets(args) == {"argv": ["login", "--password", PW], "n": 3, "path": f"a-{PW}.txt"}
        with pytest.raises(MissingSecretError) as info:
            reveal_secrets({"x": "{{secret:OTHER}}"})
    assert str(info.value) == (
        "the arguments name the secret OTHER, which this task was not given (its secrets: CREDENTIAL); use one of "
        "those placeholders, or give the task the secret (--secret OTHER)"
    )
    with pytest.raises(MissingSecretError):
        reveal_secrets(args)  # not held any more
    # another run's held secret is not this task's to use
    with hold_secrets({"CREDENTIAL": PW, "OTHER_RUNS": "theirs-1234"}):
        assert reveal_secrets(args, ["CREDENTIAL"])["argv"][2] == PW
        with pytest.raises(
            MissingSecretError, match=r"secret OTHER_RUNS, which this task was not given \(its secrets: CREDENTIAL\)"
        ):
            reveal_secrets("{{secret:OTHER_RUNS}}", ["CREDENTIAL"])
    assert task_secrets("a {{secret:A}}", ["b {{secret:B}} {{secret:A}}"], ["{{secret:C}}"]) == ["A", "B", "C"]


def test_holding_refuses_bad_names_short_values_and_a_clash() -> None:
    with pytest.raises(InvalidInputError, match="secret name '1X' is not valid"):
        with hold_secrets({"1X": "long-enough"}):
            pass
    with pytest.raises(InvalidInputError, match="secret PIN is shorter than 4 characters"):
        with hold_secrets({"PIN": "123"}):
            pass
    with hold_secrets({"PIN": "1234-5678"}), hold_secrets({"PIN": "1234-5678"}):
        with pytest.raises(InvalidInputError, match="secret PIN is held by another run of this process"):
            with hold_secrets({"PIN": "8765-4321"}):
                pass
    assert secret_note("PIN") == (
        "The secret PIN is given for this task: write {{secret:PIN}} in a tool's arguments where its value "
        "belongs (the tool gets the value; it is never shown)."
    )
