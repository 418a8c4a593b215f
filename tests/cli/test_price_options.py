"""``--priced-as`` a model the price table lacks: refused in one line naming it and the known ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import graphs
import nodes
from nodes.testing import complete, plan, review, tool_call


class Shout:
    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        return arguments["text"].upper()


@pytest.fixture
def done_db(tmp_path: Path) -> Path:
    db = tmp_path / "v.sqlite"
    model = nodes.ScriptedChatModel(
        script={
            "planner": [plan("Shout hello")],
            "executor": [tool_call("shout", {"text": "hello"}, id="c1"), complete("shouted hello")],
            "reviewer": [review("approve", "it was shouted")],
        }
    )
    with graphs.open_project(db) as project:
        project.run(project.graph(model, tools=Shout()), "Shout hello.", task_id="mc3")
    return db


def test_an_unknown_priced_as_model_is_refused_naming_it_and_the_known_ones(done_db: Path, tmp_path: Path) -> None:
    """``--priced-as`` a model the price table lacks: inspect and report exit 2 with one line that
    names the model, the known models and the price file that would price it; the API raises the
    same. A price file that gives the model its price makes it known."""
    from typer.testing import CliRunner

    from context import InvalidInputError
    from graphs.cli import app
    from nodes.prices import LIST_PRICES

    known = ", ".join(sorted(LIST_PRICES))
    want = (
        f"error: --priced-as 'gpt-9-mega': no price for this model; the known models are {known} (a dated name "
        "such as gpt-4o-2024-08-06 takes its base model's price); pick one, or give its price in a price file: "
        '--prices FILE with [models."gpt-9-mega"] input = ..., output = ... (USD per 1M tokens)\n'
    )
    page = tmp_path / "r.html"
    for args in (
        ["inspect", "mc3", "--db", str(done_db), "--priced-as", "gpt-9-mega"],
        ["inspect", "mc3", "--db", str(done_db), "--calls", "--priced-as", "gpt-9-mega"],
        ["report", "mc3", "--db", str(done_db), "--html", str(page), "--priced-as", "gpt-9-mega"],
    ):
        res = CliRunner().invoke(app, args)
        assert (res.exit_code, res.stdout, res.stderr) == (2, "", want), args
    assert not page.exists()
    with graphs.open_project(done_db, readonly=True) as project:
        with pytest.raises(InvalidInputError, match=r"^--priced-as 'gpt-9-mega': no price for this model"):
            project.model_calls("mc3", priced_as="gpt-9-mega")
    prices = tmp_path / "p.toml"
    prices.write_text('[models."gpt-9-mega"]\ninput = 1.0\noutput = 4.0\n')
    with graphs.open_project(done_db, readonly=True) as project:
        calls = project.model_calls("mc3", prices=str(prices), priced_as="gpt-9-mega")
    # no provider usage: every counted prompt token at the input price (no cache price given), replies at output
    assert [c.role for c in calls] == ["planner", "executor", "executor", "reviewer"]
    assert [c.cost.usd if c.cost else None for c in calls] == pytest.approx(
        [(c.prompt_tokens * 1.0 + (c.reply_tokens or 0) * 4.0) / 1e6 for c in calls]
    )
    assert all(c.cost is not None and c.cost.price == "gpt-9-mega" and c.cost.estimated for c in calls)
    res = CliRunner().invoke(
        app, ["inspect", "mc3", "--db", str(done_db), "--prices", str(prices), "--priced-as", "gpt-9-mega"]
    )
    total = sum(c.cost.usd for c in calls if c.cost and c.cost.usd)
    assert res.exit_code == 0 and f"cost ${total:,.6f}" in res.stdout
