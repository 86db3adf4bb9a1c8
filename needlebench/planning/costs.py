"""What a run costs through a paid API, before the first request: prices read from a TOML file, per request.

A provider bills each request's prompt tokens at its input price (the part its prompt cache holds at the
cached-input price), and its output tokens at the output price; some bill a request whose prompt is above a
threshold at higher prices (tiers), and a batch job at a fraction of the online price. The plan knows each
request's prompt tokens (the rows' ``prompt_tokens``, in the model's tokens where its tokenizer was measured),
the output budget (an upper bound: a model may stop earlier) and how much of each prompt the request before it
shares in the order the run sends them (what a prefix cache can hold). Nothing here talks to a provider.

A prices file, per model abbr (``[default]`` for the rest); dollars per million tokens::

    [models.my-api-model]
    input = 2.5
    cached_input = 1.25     # optional: the input price
    output = 10.0
    batch = 0.5             # optional: a batch job's price as a fraction of the online one (1: no batch price)

    [[models.my-api-model.tiers]]
    above = 200000          # a prompt over this many tokens is billed at these prices
    input = 5.0
    cached_input = 2.5
    output = 15.0

    [models.my-local-model]
    device_hour = 2.0       # dollars per GPU-hour: a model on your own devices, priced by the run's ledger

A file that names a model the config does not have is refused (a typo would leave the model it meant priced by
``[default]``, or not at all); a model the file does not name, with no ``[default]``, is not priced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (pyproject installs tomli there)
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["Cost", "Price", "Prices", "Tier", "check_priced_models", "load_prices", "request_costs"]

MILLION = 1_000_000


@dataclass(frozen=True)
class Tier:
    """Prices in dollars per million tokens, for prompts above ``above`` tokens (0: every prompt).

    Args:
        above: the prompt tokens a request must exceed to be billed so.
        input: uncached prompt tokens.
        cached_input: prompt tokens the provider's cache holds.
        output: output tokens.
    """

    above: int
    input: float
    cached_input: float
    output: float


@dataclass(frozen=True)
class Price:
    """One model's prices: its base tier, the long-prompt tiers, and the batch fraction.

    Args:
        tiers: the base tier (``above`` 0) and the long-prompt tiers, by ``above``; none for a model priced by
            the device-hour only.
        batch: a batch job's price as a fraction of the online price (uncached).
        device_hour: dollars per device-hour (a GPU the model's tasks hold), where given: the run's ledger
            prices its device-seconds so (``report/ledger.py``).
    """

    tiers: tuple[Tier, ...]
    batch: float = 1.0
    device_hour: float | None = None

    def tier(self, prompt_tokens: float) -> Tier:
        """The tier a request with this many prompt tokens is billed at.

        Args:
            prompt_tokens: the request's prompt tokens.
        """
        return [t for t in self.tiers if prompt_tokens > t.above or t.above == 0][-1]


@dataclass(frozen=True)
class Prices:
    """The prices of a run's models, read from a prices file.

    Args:
        models: model abbr -> its price.
        default: the price of a model the file does not name (None: such a model is not priced).
        source: the file.
    """

    models: Mapping[str, Price] = field(default_factory=dict)
    default: Price | None = None
    source: str = ""

    def of(self, abbr: str) -> Price | None:
        """A model's price, or the default.

        Args:
            abbr: the model's abbr.
        """
        return self.models.get(abbr, self.default)

    def to_dict(self) -> dict[str, Any]:
        """The prices as JSON data (what a results bundle records, so ``needlebench verify`` prices alike)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Prices:
        """Prices from :meth:`to_dict`'s data.

        Args:
            data: the JSON data.
        """

        def price(p: Mapping[str, Any] | None) -> Price | None:
            if p is None:
                return None
            tiers = tuple(
                Tier(int(t["above"]), *(float(t[k]) for k in ("input", "cached_input", "output"))) for t in p["tiers"]
            )
            hour = p.get("device_hour")
            return Price(tiers, float(p.get("batch", 1.0)), None if hour is None else float(hour))

        models = {str(k): price(v) for k, v in dict(data.get("models") or {}).items()}
        return cls(
            {k: v for k, v in models.items() if v is not None}, price(data.get("default")), str(data.get("source", ""))
        )


@dataclass
class Cost:
    """What a set of requests costs, in dollars, and the tokens it is billed for.

    Args:
        requests: requests priced.
        prompt_tokens: their prompt tokens.
        cached_tokens: of those, what a prefix cache holds (each request's shared prefix with the one before).
        output_tokens: their output budget (an upper bound).
        online: online, with the cached-input price on the cached tokens.
        online_uncached: online, every prompt token at the input price.
        batch: a batch job (the batch fraction of ``online_uncached``).
        long_requests: requests billed at a long-prompt tier.
    """

    requests: int = 0
    prompt_tokens: float = 0.0
    cached_tokens: float = 0.0
    output_tokens: float = 0.0
    online: float = 0.0
    online_uncached: float = 0.0
    batch: float = 0.0
    long_requests: int = 0

    @property
    def cache_savings(self) -> float:
        """Dollars the cached-input price saves on the online run."""
        return self.online_uncached - self.online

    def add(self, other: Cost) -> None:
        """Add another set's cost to this one.

        Args:
            other: the cost to add.
        """
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def request_costs(price: Price, prompts: Sequence[float], cached: Sequence[float], output: float) -> Cost:
    """The cost of requests, each billed at the tier its prompt falls in.

    Args:
        price: the model's price.
        prompts: each request's prompt tokens.
        cached: each request's prompt tokens a prefix cache holds (at most its prompt).
        output: each request's output tokens (the budget).
    """
    cost = Cost()
    for tokens, hit in zip(prompts, cached, strict=True):
        hit = min(max(hit, 0.0), tokens)
        tier = price.tier(tokens)
        fresh = tokens * tier.input + output * tier.output
        cost.requests += 1
        cost.prompt_tokens += tokens
        cost.cached_tokens += hit
        cost.output_tokens += output
        cost.long_requests += tier.above > 0
        cost.online_uncached += fresh / MILLION
        cost.online += (fresh - hit * (tier.input - tier.cached_input)) / MILLION
    cost.batch = cost.online_uncached * price.batch
    return cost


def _table(value: Any, where: str) -> Mapping[str, Any]:
    """A TOML table, or one message naming where the file gives something else (``models.m = 3``)."""
    if not isinstance(value, dict):
        raise ConfigError(f"prices: {where} must be a table ([{where}]), got {value!r}")
    return value


def _number(table: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    """A price in dollars per million tokens: a finite number >= 0 (``nan`` and ``inf`` are TOML floats)."""
    value = table.get(key, default)
    if value is None:
        raise ConfigError(f"prices: {where}: {key} must be a number of dollars per million tokens >= 0; it is missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"prices: {where}: {key} must be a number of dollars per million tokens >= 0, got {value!r}")
    return float(value)


def _unknown(table: Mapping[str, Any], known: set[str], where: str) -> None:
    """Keys the file gives that no price has; a table among them is most often an abbr with a dot, unquoted."""
    unknown = sorted(set(table) - known)
    if not unknown:
        return
    hint = ""
    if any(isinstance(table[k], dict) for k in unknown):
        hint = f' (an abbr with a dot is quoted: [models."{where.removeprefix("models.")}.{unknown[0]}"])'
    raise ConfigError(f"prices: {where}: unknown key(s) {unknown}; valid: {sorted(known)}{hint}")


def _price(table: Mapping[str, Any], where: str) -> Price:
    table = _table(table, where)
    _unknown(table, {"input", "cached_input", "output", "batch", "tiers", "device_hour"}, where)
    hour = table.get("device_hour")
    if hour is not None and (isinstance(hour, bool) or not isinstance(hour, (int, float)) or not 0 <= hour < math.inf):
        raise ConfigError(
            f"prices: {where}: device_hour must be a number of dollars per device-hour >= 0, got {hour!r}"
        )
    if hour is not None and not {"input", "cached_input", "output", "tiers"} & set(table):
        return Price((), device_hour=float(hour))  # a model on the user's own devices
    base_input = _number(table, "input", where)
    base = Tier(0, base_input, _number(table, "cached_input", where, base_input), _number(table, "output", where))
    tiers = [base]
    listed = table.get("tiers", [])
    if not isinstance(listed, list):
        raise ConfigError(f"prices: {where}: tiers must be tables ([[{where}.tiers]]), got {listed!r}")
    for i, entry in enumerate(listed):
        at = f"{where} tier {i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"prices: {at} must be a table ([[{where}.tiers]]), got {entry!r}")
        t = entry
        above = t.get("above")
        if isinstance(above, bool) or not isinstance(above, int) or above <= 0:
            raise ConfigError(f"prices: {at}: above must be a positive number of prompt tokens, got {above!r}")
        if any(other.above == above for other in tiers):
            raise ConfigError(f"prices: {at}: another tier starts above {above} prompt tokens too")
        _unknown(t, {"above", "input", "cached_input", "output"}, at)
        tier_input = _number(t, "input", at)
        tiers.append(Tier(above, tier_input, _number(t, "cached_input", at, tier_input), _number(t, "output", at)))
    batch = table.get("batch", 1.0)
    if isinstance(batch, bool) or not isinstance(batch, (int, float)) or not 0 <= batch <= 1:
        raise ConfigError(
            f"prices: {where}: batch is a fraction of the online price (a number from 0 to 1), got {batch!r}"
        )
    return Price(tuple(sorted(tiers, key=lambda t: t.above)), float(batch), None if hour is None else float(hour))


def check_priced_models(prices: Prices, abbrs: Sequence[str], config: str) -> None:
    """Every model the prices file names is one of the config's: a name that is not is a typo, and the model
    it meant would be priced by ``[default]`` or not at all without a word.

    Args:
        prices: the prices file, read.
        abbrs: the config's model abbrs.
        config: the config's path, named in the message.

    Raises:
        ConfigError: the file prices a model the config does not have.
    """
    unknown = sorted(set(prices.models) - set(abbrs))
    if unknown:
        raise ConfigError(
            f"prices: {prices.source} prices model(s) {unknown} that {config} does not have; its models: {list(abbrs)}"
        )


def load_prices(path: Path | str) -> Prices:
    """A prices file (see the module), checked.

    Args:
        path: the TOML file.

    Raises:
        ConfigError: a missing, unreadable or malformed file, an unknown key, a price that is missing or not a
            finite number >= 0, or a batch fraction outside 0 to 1.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"prices: cannot read {p} ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"prices: {p} is not UTF-8 text (byte {exc.start}), so not TOML") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"prices: {p} is not TOML ({exc})") from None
    unknown = sorted(set(data) - {"models", "default"})
    if unknown:
        raise ConfigError(f"prices: {p}: unknown table(s) {unknown}; use [models.<abbr>] and [default]")
    listed = _table(data.get("models", {}), "models")
    models = {str(abbr): _price(table, f"models.{abbr}") for abbr, table in listed.items()}
    default = _price(data["default"], "default") if "default" in data else None
    if not models and default is None:
        raise ConfigError(f"prices: {p} prices no model; add [models.<abbr>] or [default]")
    return Prices(models, default, str(p))
