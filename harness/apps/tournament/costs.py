"""The ``cost`` record of a tournament step (a research brief, a plan, an executor, an iteration's totals).

Every sum goes through :class:`~harness.base.usage.Spend`, the one account the engine and the records keep:
a record is read back into a ``Spend`` (:func:`spend_of`), merged, and written out again (:func:`cost_record`).
A model with no price makes the cost unknown, never $0: ``cost_usd`` (a number, as the contract wants) then
counts the priced models only, ``cost_known`` is false, and ``model_usage`` says which model had no price.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.base.usage import Spend, Usage


def cost_record(spend: Spend) -> dict[str, Any]:
    """The ``cost`` record of ``spend``: tokens, ``cost_usd``, the model that took most calls, the calls,
    ``cost_known``, and ``model_usage`` (per model, as the run record's ``model_usage``)."""
    record: dict[str, Any] = {**spend.usage.as_dict(), "cost_usd": round(spend.known_cost_usd, 6),
                              "model": spend.model, "calls": spend.calls, "cost_known": spend.cost_known}
    if spend:
        record["model_usage"] = spend.by_model()
    return record


def no_cost() -> dict[str, Any]:
    """The ``cost`` record of a step that called no model."""
    return cost_record(Spend())


def spend_of(record: Mapping[str, Any] | None) -> Spend:
    """The ``Spend`` a ``cost`` record holds: per model from its ``model_usage``; a record written before
    ``model_usage`` existed is one entry for its ``model``."""
    spend = Spend()
    if not record:
        return spend
    per_model = record.get("model_usage")
    if isinstance(per_model, Mapping) and per_model:
        for model, entry in per_model.items():
            entry = entry if isinstance(entry, Mapping) else {}
            spend.add(str(model), Usage.from_dict(dict(entry)), _cost(entry.get("cost_usd")),
                      calls=int(entry.get("calls") or 0), cached=int(entry.get("cached") or 0))
        return spend
    usage, calls = Usage.from_dict(dict(record)), int(record.get("calls") or 0)
    if usage.total_tokens or calls:
        known = record.get("cost_known", True) is not False
        spend.add(record.get("model"), usage, _cost(record.get("cost_usd")) if known else None, calls=calls)
    return spend


def total_cost(*records: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``cost`` record of several steps together (records that are None count nothing)."""
    spend = Spend()
    for record in records:
        spend.merge(spend_of(record))
    return cost_record(spend)


def unpriced(record: Mapping[str, Any] | None) -> list[str]:
    """The models of a ``cost`` record that have no price (their cost is unknown)."""
    return _unpriced(spend_of(record))


def cost_said(record: Mapping[str, Any] | None) -> str:
    """A step's cost as the run's lines show it: ``$0.0160``; ``cost unknown (local/m has no price)`` when no
    model of it had a price; ``$0.0120 and an unknown cost (...)`` when some had one."""
    spend = spend_of(record)
    missing = _unpriced(spend)
    if not missing:
        return f"${spend.known_cost_usd:.4f}"
    why = f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no price"
    priced = any(entry.cost_usd is not None for entry in spend.models.values())
    return f"${spend.known_cost_usd:.4f} and an unknown cost ({why})" if priced else f"cost unknown ({why})"


def _unpriced(spend: Spend) -> list[str]:
    return sorted(model for model, entry in spend.models.items() if entry.cost_usd is None)


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
