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
    ("planner", "planner", 1, None, 487, 0, 62),
    ("executor", "executor", 1, "s1", 593, 0, 29),
    ("executor", "executor", 2, "s1", 639, 593, 44),
    ("executor", "executor", 3, "s2", 717, 639, 29),
    ("executor", "executor", 4, "s2", 763, 717, 44),
    ("reviewer", "reviewer", 1, None, 373, 0, 45),
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
    assert (ex.calls, ex.prompt_tokens, ex.cached_prefix_tokens, ex.reply_tokens) == (4, 2712, 1949, 146)
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
    assert price_for("claude-3-5-sonnet-latest", LIST_PRICES) == ("claude-3-5-sonnet", LIST_PRICES["claude-3-5-sonnet"])
    assert price_for("claude-opus-4-5@20251101", LIST_PRICES) == ("claude-opus-4-5", LIST_PRICES["claude-opus-4-5"])
    assert price_for("o3-mini-2025-01-31", LIST_PRICES) == ("o3-mini", LIST_PRICES["o3-mini"])
    # another model whose name starts with a listed one has a price of its own: none here
    for other in ("o3-pro", "gpt-5-pro", "gpt-5-codex", "o3-deep-research", "gpt-4o-realtime", "claude-opus-4-7"):
        assert price_for(other, LIST_PRICES) is None, other
    assert price_for("o3-pro-2025-06-10", LIST_PRICES) is None
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
    for bad in ("nan", "inf", "1e400", "-1"):  # (TOML reads 1e400 as inf)
        f.write_text(f'[models."gpt-4o"]\ninput = {bad}\n', encoding="utf-8")
        with pytest.raises(
            InvalidInputError, match=r"^price of 'gpt-4o': input must be a finite number >= 0 \(USD per 1M"
        ):
            load_prices(f)
    with pytest.raises(InvalidInputError, match="price of 'gpt-4o': unknown field"):
        price_table({"gpt-4o": {"inputs": 1}})
    with pytest.raises(InvalidInputError, match="price file .*nothere.toml"):
        load_prices(tmp_path / "nothere.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("models = 3\n", encoding="utf-8")
    with pytest.raises(InvalidInputError) as not_a_table:
        load_prices(bad)
    assert str(not_a_table.value) == (
        f"price file {str(bad)!r}: `models` is 3, not a table of models; give one table per model, "
        'e.g. [models."gpt-4o"] with input = 2.5 and output = 10.0 (USD per 1M tokens)'
    )
    assert price_table({"models": {"gpt-4o": {"output": 8}}})["gpt-4o"].output == 8.0
    with pytest.raises(InvalidInputError, match=r"^prices: `models` is 3, not a table of models; give model name"):
        price_table({"models": 3})


# ---- the views: inspect, list --json, the export, the report ------------------------------------
@pytest.fixture
def done_db(tmp_path: Path) -> Path:
    db = tmp_path / "v.sqlite"
    with graphs.open_project(db) as project:
        project.run(project.graph(_model(), tools=Shout()), "Shout hello, then bye.", task_id="mc3")
    return db


def _invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from graphs.cli import app

    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res


def test_inspect_shows_the_totals_and_each_call(done_db: Path) -> None:
    import json

    out = _invoke("inspect", "mc3", "--db", str(done_db), "--priced-as", "gpt-4o").stdout
    # the executor's 4 estimated calls at gpt-4o's prices: (593+639+717+763) in at $2.50, (29+44+29+44) out at $10
    ex = (2712 * 2.5 + 146 * 10) / 1e6
    assert (
        f"- executor: 4 calls, 2,712 prompt tokens counted (1,949 cached prefix); cost ${ex:,.6f}, 4 estimated" in out
    )
    assert (
        "- reviewer: 1 call, 373 prompt tokens counted (0 cached prefix); provider: 1,234 in, 21 out, "
        "1,024 cache read, 0 cache write; cost $0.002015;"
    ) in out
    assert "task: 6 calls, 3,572 prompt tokens counted (1,949 cached prefix); provider: 1,234 in" in out
    calls = _invoke("inspect", "mc3", "--db", str(done_db), "--calls").stdout.splitlines()
    lines = [ln for ln in calls if ln.startswith("- call ")]
    assert len(lines) == 6
    assert lines[2].startswith(
        "- call 3 executor (step s1, taskctx-scripted): 639 prompt tokens (593 cached prefix); 44 reply tokens counted; "
    )
    assert lines[2].endswith(" ms; n/a; dropped: -")  # no price for the scripted model
    assert lines[5].startswith(
        "- call 6 reviewer (step -, taskctx-scripted): 373 prompt tokens (0 cached prefix); provider 1,234 in, 21 out, "
        "1,024 cache read, 0 cache write; "
    )
    data = json.loads(_invoke("inspect", "mc3", "--db", str(done_db), "--calls", "--json").stdout)
    assert [c["prompt_tokens"] for c in data["calls"]] == [x[4] for x in CALLS]
    assert data["totals"]["task"]["units"] == pytest.approx(1757.3)
    assert "blocks" not in data["calls"][0] and data["calls"][0]["dropped"] == []


def test_list_json_and_the_export_carry_the_totals(done_db: Path, tmp_path: Path) -> None:
    import json

    (row,) = json.loads(_invoke("list", "--db", str(done_db), "--json").stdout)
    t = row["calls"]
    assert (t["calls"], t["prompt_tokens"], t["input_tokens"], t["cache_read"], t["usd"]) == (6, 3572, 1234, 1024, None)
    with graphs.open_project(done_db) as project:
        folder = project.export("mc3", tmp_path / "runs")
        calls = project.model_calls("mc3")
        totals = project.model_call_totals("mc3")
    lines = [json.loads(x) for x in (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [x["call"] for x in lines] == [1, 2, 3, 4, 5, 6]
    assert lines == [{**c.model_dump(mode="json", exclude={"blocks", "prompt"}), "dropped": []} for c in calls]
    assert json.loads((folder / "costs.json").read_text(encoding="utf-8")) == totals.model_dump(mode="json")
    assert totals.task.estimated == 5 and totals.roles["reviewer"].estimated == 0


#: Appended to a copy of the page: each cost bar's drawn height (its rects', px) into <pre id="bars">.
_BARS_JS = r"""<script>window.addEventListener("load",function(){
var out=Array.prototype.map.call(document.querySelectorAll("#cost-chart g.cost-bar"),function(g){
 var h={call:+g.dataset.call,role:g.dataset.role};
 g.querySelectorAll("rect").forEach(function(r){h[r.getAttribute("class")]=r.getBBox().height;});return h;});
var pre=document.createElement("pre");pre.id="bars";pre.textContent=JSON.stringify(out);document.body.appendChild(pre);});
</script>"""


@pytest.mark.browser  # skips without Chromium (tests/conftest.py)
def test_the_cost_chart_in_headless_chromium(done_db: Path, tmp_path: Path) -> None:
    """The report's cost chart, laid out by Chromium: one bar per call in its role, each part's height
    in proportion to its dollars (gpt-4o's prices: the reviewer's cached input at $1.25 per 1M)."""
    import html
    import json
    import shutil
    import subprocess

    page = tmp_path / "r.html"
    _invoke("report", "mc3", "--db", str(done_db), "--html", str(page), "--priced-as", "gpt-4o")
    text = page.read_text(encoding="utf-8")
    assert "<h2>Cost per model call</h2>" in text and 'id="cost-totals"' in text
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", _BARS_JS + "</body>"), encoding="utf-8")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.resolve().as_uri()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    bars = json.loads(html.unescape(proc.stdout.split('<pre id="bars">')[1].split("</pre>")[0]))
    assert [(b["call"], b["role"]) for b in bars] == [(i + 1, r[0]) for i, r in enumerate(CALLS)]
    assert [sorted(k for k in b if k not in ("call", "role")) for b in bars] == [["output", "uncached"]] * 5 + [
        ["cached", "output", "uncached"]
    ]
    px = bars[5]["cached"] / (1024 * 1.25)  # pixels per millionth of a dollar
    for b, (_, _, _, _, p, _, r) in zip(bars[:5], CALLS[:5], strict=True):
        assert b["uncached"] == pytest.approx(p * 2.5 * px, abs=0.15)
        assert b["output"] == pytest.approx(r * 10 * px, abs=0.15)
    assert bars[5]["uncached"] == pytest.approx(210 * 2.5 * px, abs=0.15)
