"""Prices: USD per million tokens of each kind, the default table and a user's own.

A model is priced by the name records give it (``claude-sonnet-4-6``, ``openai/gpt-4.1-mini``); a dated
snapshot (``claude-sonnet-4-5-20250929``) is priced as its alias. A model with no price has an unknown cost
(``None``): never another model's price.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.base.usage import Usage
from harness.base.yamlfile import load_yaml, read_text


class Price(NamedTuple):
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float


# The default table: USD per million tokens (input, output, cache write (5 min), cache read), from the providers'
# price pages. OpenAI charges nothing extra to write its prompt cache: its cache write is its input price.
PRICES_PER_MTOK: dict[str, Price] = {
    "claude-sonnet-4-6": Price(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4-5": Price(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4": Price(3.0, 15.0, 3.75, 0.30),
    "claude-3-7-sonnet": Price(3.0, 15.0, 3.75, 0.30),
    "claude-opus-4-6": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": Price(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4": Price(15.0, 75.0, 18.75, 1.50),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
    "openai/gpt-5": Price(1.25, 10.0, 1.25, 0.125),
    "openai/gpt-5-mini": Price(0.25, 2.0, 0.25, 0.025),
    "openai/gpt-5-nano": Price(0.05, 0.40, 0.05, 0.005),
    "openai/gpt-4.1": Price(2.0, 8.0, 2.0, 0.50),
    "openai/gpt-4.1-mini": Price(0.40, 1.60, 0.40, 0.10),
    "openai/gpt-4.1-nano": Price(0.10, 0.40, 0.10, 0.025),
    "openai/gpt-4o": Price(2.50, 10.0, 2.50, 1.25),
    "openai/gpt-4o-mini": Price(0.15, 0.60, 0.15, 0.075),
    "openai/o3": Price(2.0, 8.0, 2.0, 0.50),
    "openai/o4-mini": Price(1.10, 4.40, 1.10, 0.275),
}
BATCH_DISCOUNT = 0.5  # Message Batches cost half the price of direct calls, every token kind
_DATED_SNAPSHOT = re.compile(r"^(?P<alias>.+)-(?:\d{8}|\d{4}-\d{2}-\d{2})$")  # Anthropic's and OpenAI's dates
_PRICE_FIELDS = Price._fields


def _price_key(model: str, table: Mapping[str, Price] | None = None) -> str | None:
    table = PRICES_PER_MTOK if table is None else table
    if model in table:
        return model
    match = _DATED_SNAPSHOT.match(model)  # "claude-sonnet-4-5-20250929", "openai/gpt-4.1-2025-04-14": as their alias
    if match and match.group("alias") in table:
        return match.group("alias")
    return None


def known_price(model: str, *, table: Mapping[str, Price] | None = None) -> bool:
    """True when ``model`` (an alias or a dated snapshot of one) is in the price table."""
    return _price_key(model, table) is not None


def price_usd(
    model: str, usage: Usage, *, table: Mapping[str, Price] | None = None, batch: bool = False
) -> float | None:
    """Cost of ``usage`` on ``model`` in USD, or None when the table has no price for it (never another
    model's price). ``batch`` applies the Message Batches discount; ``table`` defaults to
    :data:`PRICES_PER_MTOK` (see :func:`load_price_table` for a user's own)."""
    table = PRICES_PER_MTOK if table is None else table
    key = _price_key(model, table)
    if key is None:
        return None
    p_in, p_out, p_write, p_read = table[key]
    total = (
        usage.input_tokens * p_in
        + usage.output_tokens * p_out
        + usage.cache_write_tokens * p_write
        + usage.cache_read_tokens * p_read
    )
    return total / 1_000_000 * (BATCH_DISCOUNT if batch else 1.0)


def missing_price_line(model: str) -> str:
    """The one line that says a model has no price and how to give it one."""
    return (f"{model} has no price: its tokens are recorded, its cost is unknown; add it to a price file "
            f"(ini harness_prices), e.g. `{model}: {{input: 0.4, output: 1.6}}` in USD per million tokens")


def load_price_table(path: Path | str) -> dict[str, Price]:
    """The default table updated with a user's file: ``{model: {input, output, cache_write, cache_read}}``.

    YAML, or JSON for a ``.json`` file; USD per million tokens. A model already in the table may give
    only the fields it changes; a new model needs ``input`` and ``output``, and its cache prices
    default to Anthropic's multipliers (write 1.25x input, read 0.1x input). Every mistake is a
    HarnessConfigError naming the file and the field (``prices.yaml: claude-x.output: ...``).
    """
    path = Path(path)
    top = Fields.of(path).section(_read_price_file(path), known=None,
                                  example="`claude-sonnet-4-6: {input: 3, output: 15, cache_write: 3.75, "
                                          "cache_read: 0.3}`")
    table = dict(PRICES_PER_MTOK)
    for model, raw_row in top.raw.items():
        top.fields.string(model, str(model), what="a model name")
        base_key = _price_key(model)
        # a model of its own has no row in the default table to take the prices it leaves out from
        row = top.fields.nested(model).section(raw_row, known=_PRICE_FIELDS,
                                               required=("input", "output") if base_key is None else (),
                                               example="USD per million tokens, e.g. `{input: 3, output: 15}`")
        values = PRICES_PER_MTOK[base_key]._asdict() if base_key is not None else {}
        values.update({name: row.number(name, low=0.0) for name in _PRICE_FIELDS if name in row})
        values.setdefault("cache_write", values["input"] * 1.25)
        values.setdefault("cache_read", values["input"] * 0.1)
        table[model] = Price(**values)
    return table


def _read_price_file(path: Path) -> Any:
    if path.suffix.lower() != ".json":
        return load_yaml(path)
    text = read_text(path)  # the size limit and a clear line for a file that is not UTF-8
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessConfigError(path, f"line {exc.lineno}", exc.msg, "fix the JSON syntax") from None
