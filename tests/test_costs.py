"""``needlebench plan --prices``: what a run costs through a paid API, against a hand computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from needlebench.commands.cli import main
from needlebench.commands.plan import plan_config
from needlebench.errors import ConfigError
from needlebench.planning.costs import load_prices, request_costs

PRICES = """
[models.long]
input = 2.0
cached_input = 0.5
output = 8.0
batch = 0.5

[[models.long.tiers]]
above = 200000
input = 4.0
cached_input = 1.0
output = 12.0

[default]
input = 1.0
output = 1.0
"""


@pytest.fixture()
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(PRICES, encoding="utf-8")
    return path


def test_request_costs_equal_a_hand_computation(prices: Path) -> None:
    """Three requests, one over the long-prompt threshold, with cached prefixes and a 100-token budget each."""
    price = load_prices(prices).of("long")
    cost = request_costs(price, [1000, 300_000, 5000], [0, 800, 4000], 100)
    # online, cached input priced as such: (1000*2 + 100*8) + (299200*4 + 800*1 + 100*12) + (1000*2 + 4000*0.5
    # + 100*8) = 2800 + 1198800 + 4800 = 1206400 per million
    assert cost.online == pytest.approx(1_206_400 / 1e6)
    # uncached: 2800 + (300000*4 + 1200) + (5000*2 + 800) = 2800 + 1201200 + 10800 = 1214800 per million
    assert cost.online_uncached == pytest.approx(1_214_800 / 1e6)
    assert cost.cache_savings == pytest.approx((800 * 3 + 4000 * 1.5) / 1e6)
    assert cost.batch == pytest.approx(0.5 * 1_214_800 / 1e6)
    assert (cost.requests, cost.long_requests, cost.prompt_tokens, cost.cached_tokens, cost.output_tokens) == (
        3, 1, 306_000, 4800, 300)  # fmt: skip


def test_plan_prices_each_dataset_and_the_totals(prices: Path, capsys: pytest.CaptureFixture) -> None:
    """Each priced model's datasets carry their cost in the plan's JSON; the total is their sum; a model the
    file names is priced by its table, another by [default]; the terminal shows the cost table."""
    report = plan_config(str(ROOT / "tests" / "configs" / "plan_tiny.py"), prices_path=str(prices))
    long = next(m for m in report.models if m.abbr == "long")
    for d in long.datasets:  # no tokenizer here: billed in cl100k tokens; the budget as output
        assert d.cost.requests == d.samples and d.cost.prompt_tokens == d.prompt_tokens
        assert d.cost.output_tokens == d.output_tokens and d.cost.long_requests == 0
        assert d.cost.cached_tokens == pytest.approx(d.prefix_tokens, abs=1)
        assert d.cost.online_uncached == pytest.approx((2 * d.prompt_tokens + 8 * d.output_tokens) / 1e6)
        assert d.cost.online == pytest.approx(d.cost.online_uncached - 1.5 * d.cost.cached_tokens / 1e6)
    assert long.cost.online == pytest.approx(sum(d.cost.online for d in long.datasets))
    assert long.cost.batch == pytest.approx(0.5 * sum(d.cost.online_uncached for d in long.datasets))
    short = next(m for m in report.models if m.abbr == "short")  # [default]: 1 $ per million in and out
    assert short.cost.online_uncached == pytest.approx((short.prompt_tokens + short.output_tokens) / 1e6)
    assert main(["plan", str(ROOT / "tests" / "configs" / "plan_tiny.py"), "--prices", str(prices), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["models"][0]["cost"]["online"] == pytest.approx(long.cost.online)
    assert main(["plan", str(ROOT / "tests" / "configs" / "plan_tiny.py"), "--prices", str(prices)]) == 0
    assert "cache saves $" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.m]\ninput = 1\n", "output must be a number"),
        ("[models.m]\ninput = 1\noutput = 1\nbatch = 2\n", "batch is a fraction"),
        ("[models.m]\ninput = 1\noutput = 1\nsurcharge = 1\n", r"unknown key\(s\) \['surcharge'\]"),
        ("[models.m]\ninput = 1\noutput = 1\n[[models.m.tiers]]\nabove = 0\ninput = 2\noutput = 2\n", "above must"),
        ("[model.m]\ninput = 1\n", r"unknown table\(s\) \['model'\]"),
        ("[models.m\n", "is not TOML"),
    ],
)
def test_a_bad_prices_file_is_one_message(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_prices(path)
