"""``Project.model_calls`` and ``model_call_totals``: one typed record per model call, from the
event log (SQLite and Postgres, a stopped task and the same task finished), with exact tokens,
and costs checked against a hand computation from the price table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import graphs
import nodes
from context import InvalidInputError, UnknownTaskError
from nodes.prices import LIST_PRICES, ModelPrice, load_prices, price_for, price_table
from nodes.testing import complete, plan, review, tool_call

#: What the scripted reviewer's reply reports, in LangChain's ``usage_metadata`` shape.
REVIEW_USAGE = {
    "input_tokens": 1234,
    "output_tokens": 21,
    "total_tokens": 1255,
    "input_token_details": {"cache_read": 1024, "cache_creation": 0},
}


class Shout:
    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        return arguments["text"].upper()


def _model() -> nodes.ScriptedChatModel:
    return nodes.ScriptedChatModel(
        script={
            "planner": [plan("Shout hello", "Shout bye")],
            "executor": [
                *(tool_call("shout", {"text": "hello"}, id="c1"), complete("shouted hello")),
                *(tool_call("shout", {"text": "bye"}, id="c2"), complete("shouted bye")),
            ],
            "reviewer": [review("approve", "both were shouted").model_copy(update={"usage_metadata": REVIEW_USAGE})],
        }
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("pg_db") if request.param == "postgres" else str(tmp_path / "t.sqlite")


#: (role, node, role_call, step, prompt tokens, cached prefix, reply tokens) per call, as counted (o200k_base).
CALLS = [
    ("planner", "planner", 1, None, 487, 0, 61),
    ("executor", "executor", 1, "s1", 593, 0, 29),
    ("executor", "executor", 2, "s1", 639, 593, 43),
    ("executor", "executor", 3, "s2", 717, 639, 29),
    ("executor", "executor", 4, "s2", 763, 717, 43),
    ("reviewer", "reviewer", 1, None, 373, 0, 44),
]


def test_model_calls_of_a_stopped_then_finished_task(db: str) -> None:
    with graphs.open_project(db) as project:
        graph = project.graph(_model(), tools=Shout())
        first = project.run(graph, "Shout hello, then bye.", task_id="mc1", max_steps=1)
        assert first.stopped_early
        stopped = project.model_calls("mc1")
        assert [(c.call, c.role, c.step_id) for c in stopped] == [(1, "planner", None), (2, "executor", "s1")]
        project.resume("mc1", graph=graph)
        calls = project.model_calls("mc1", prompts=True)
        events = [e for e in project.stores.events.read("mc1") if e.kind == "context.built"]

    got = [
        (c.role, c.node, c.role_call, c.step_id, c.prompt_tokens, c.cached_prefix_tokens, c.reply_tokens) for c in calls
    ]
    assert got == CALLS
    assert [c.call for c in calls] == [1, 2, 3, 4, 5, 6]
    assert stopped == [c.model_copy(update={"prompt": None}) for c in calls[:2]]  # the same records, read mid-run
    for c, e in zip(calls, events, strict=True):  # each record is its context.built event
        p = e.payload
        assert (c.seq, c.timestamp, c.budget, c.prompt_ref) == (e.seq, e.timestamp, p["budget"], p["prompt_ref"])
        assert [b.model_dump() for b in c.blocks] == p["blocks"]
        assert (c.blocks_in, c.blocks_out) == (p["blocks_in"], p["blocks_out"])
        assert (c.model, c.provider) == ("taskctx-scripted", "scriptedchatmodel")
        assert isinstance(c.latency_ms, int) and c.latency_ms >= 0
        assert c.prompt is not None and "Shout hello, then bye." in c.prompt
    assert "core.request" not in calls[0].dropped and all(not c.dropped for c in calls)
    assert [c.usage for c in calls[:5]] == [None] * 5
    u = calls[5].usage
    assert u is not None and (u.input_tokens, u.output_tokens, u.cache_read, u.cache_creation) == (1234, 21, 1024, 0)

    # no price for the scripted model: no dollars; the prompt's cost in input-token units under the
    # flat rule (the bench's: a shared prefix at 0.1), estimated but for the reviewer's usage
    assert [c.cost.usd for c in calls if c.cost] == [None] * 6
    assert [c.cost.estimated for c in calls if c.cost] == [True] * 5 + [False]
    units = [487, 593, 639 - 593 + 59.3, 717 - 639 + 63.9, 763 - 717 + 71.7, 210 + 102.4]
    assert [c.cost.units for c in calls if c.cost] == pytest.approx(units)


def test_costs_and_totals_by_hand_from_the_price_table(tmp_path: Path) -> None:
    with graphs.open_project(tmp_path / "t.sqlite") as project:
        project.run(project.graph(_model(), tools=Shout()), "Shout hello, then bye.", task_id="mc2")
        as_4o = project.model_calls("mc2", priced_as="gpt-4o")
        totals = project.model_call_totals("mc2", priced_as="gpt-4o")
        own = {
            "taskctx-scripted": {
                "provider": "anthropic",
                "input": 3,
                "output": 15,
                "cache_read": 0.3,
                "cache_write": 3.75,
            }
        }
        as_claude = project.model_calls("mc2", prices=own)
        with pytest.raises(UnknownTaskError, match="no events for task 'nope'"):
            project.model_calls("nope")

    # gpt-4o: $2.50 in, $1.25 cached, $10 out per 1M. Estimated calls: OpenAI caches prefixes of
    # 1,024 tokens and more, none here, so the counted prompt at the input price, the counted reply
    # at the output price; the reviewer: the provider's 1,234 in (1,024 cached) and 21 out.
    want = [(p * 2.5 + r * 10) / 1e6 for (_, _, _, _, p, _, r) in CALLS[:5]]
    want.append(((1234 - 1024) * 2.5 + 1024 * 1.25 + 21 * 10) / 1e6)
    assert [c.cost.usd for c in as_4o if c.cost] == pytest.approx(want)
    assert want[5] == pytest.approx(0.002015)
    assert {c.cost.price for c in as_4o if c.cost} == {"gpt-4o"} and {c.cost.rule for c in as_4o if c.cost} == {
        "openai-auto"
    }
    assert totals.task.calls == 6 and totals.task.usd == pytest.approx(sum(want))
    assert list(totals.roles) == ["planner", "executor", "reviewer"]
    ex = totals.roles["executor"]
    assert (ex.calls, ex.prompt_tokens, ex.cached_prefix_tokens, ex.reply_tokens) == (4, 2712, 1949, 144)
    assert ex.usd == pytest.approx(sum(want[1:5])) and ex.estimated == 4 and ex.unpriced == 0
    rv = totals.roles["reviewer"]
    assert (rv.usage_calls, rv.input_tokens, rv.output_tokens, rv.cache_read, rv.cache_creation) == (
        1,
        1234,
        21,
        1024,
        0,
    )
    assert totals.task.prompt_tokens == sum(x[4] for x in CALLS) == 3572
    assert totals.task.latency_ms == sum(c.latency_ms or 0 for c in as_4o)

    # an Anthropic price given for the scripted model: its cache rule (1,024-token minimum, writes
    # at 1.25x) prices the estimated calls: nothing cached, every counted prompt token written
    claude = [(p * 3.75 + r * 15) / 1e6 for (_, _, _, _, p, _, r) in CALLS[:5]]
    claude.append(((1234 - 1024) * 3 + 1024 * 0.3 + 21 * 15) / 1e6)
    assert [c.cost.usd for c in as_claude if c.cost] == pytest.approx(claude)
    assert [c.cost.cache_write for c in as_claude if c.cost] == [x[4] for x in CALLS[:5]] + [0]


def test_the_price_table_finds_dated_names_and_takes_overrides(tmp_path: Path) -> None:
    assert price_for("gpt-4o-2024-08-06", LIST_PRICES) == ("gpt-4o", LIST_PRICES["gpt-4o"])
    assert price_for("gpt-4o-mini-2024-07-18", LIST_PRICES) == ("gpt-4o-mini", LIST_PRICES["gpt-4o-mini"])
    assert price_for("openai/gpt-4.1-mini", LIST_PRICES) == ("gpt-4.1-mini", LIST_PRICES["gpt-4.1-mini"])
    assert price_for("claude-sonnet-4-5-20250929", LIST_PRICES) == (
        "claude-sonnet-4-5",
        LIST_PRICES["claude-sonnet-4-5"],
    )
    assert price_for("gpt-4oo", LIST_PRICES) is None and price_for(None, LIST_PRICES) is None
    assert LIST_PRICES["claude-sonnet-4-5"] == ModelPrice("anthropic", 3.0, 15.0, 0.3, 3.75)
    assert LIST_PRICES["gpt-4o-mini"] == ModelPrice("openai", 0.15, 0.6, 0.075, 0.15)

    f = tmp_path / "prices.toml"
    f.write_text('[models."gpt-4o"]\ninput = 2.0\n\n[models.local-llm]\ninput = 0.5\noutput = 1.0\n', encoding="utf-8")
    table = load_prices(f)
    assert table["gpt-4o"] == ModelPrice("openai", 2.0, 10.0, 1.25, 2.5)  # the rest stays the list price
    assert table["local-llm"] == ModelPrice("", 0.5, 1.0, 0.5, 0.5)
    j = tmp_path / "prices.json"
    j.write_text('{"gpt-4o": {"output": 8}}', encoding="utf-8")
    assert load_prices(j)["gpt-4o"].output == 8.0
    with pytest.raises(InvalidInputError, match=r"price of 'x': output missing \(USD per 1M tokens\)"):
        price_table({"x": {"input": 1}})
    with pytest.raises(InvalidInputError, match="price of 'gpt-4o': unknown field"):
        price_table({"gpt-4o": {"inputs": 1}})
    with pytest.raises(InvalidInputError, match="price file .*nothere.toml"):
        load_prices(tmp_path / "nothere.toml")
