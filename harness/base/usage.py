"""Tokens and dollars: the one account every caller sums model usage in.

:class:`Usage` is the tokens of one or more calls. :class:`Spend` is what a piece of work (an attempt, a
tournament step, a session) cost, per model: the engine, the judges, the tournament and the records all
add to one and read from one, so a total is computed in one place. A cost is ``None`` when a model has no
price (a new release, a local model): it is unknown, never guessed at another model's price, and any
total that includes it is unknown too.

This module sits at the bottom of the import graph: it imports nothing of the harness.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


@dataclass(frozen=True)
class Usage:
    """Tokens of one or more calls; ``+`` sums them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(*(getattr(self, kind) + getattr(other, kind) for kind in TOKEN_KINDS))

    @property
    def total_tokens(self) -> int:
        return sum(getattr(self, kind) for kind in TOKEN_KINDS)

    def as_dict(self) -> dict[str, int]:
        return {kind: getattr(self, kind) for kind in TOKEN_KINDS}

    @classmethod
    def from_dict(cls, data: Any) -> Usage:
        """The tokens in a mapping written by :meth:`as_dict` (missing kinds are 0)."""
        data = data if isinstance(data, dict) else {}
        return cls(**{kind: int(data.get(kind) or 0) for kind in TOKEN_KINDS})


def add_costs(a: float | None, b: float | None) -> float | None:
    """The sum of two costs; unknown (None) when either is."""
    return None if a is None or b is None else a + b


@dataclass
class ModelSpend:
    """What the calls to one model took: calls, tokens, and the cost (None when the model has no price)."""

    calls: int = 0
    usage: Usage = Usage()
    cost_usd: float | None = 0.0
    cached: int = 0  # answers the response cache replayed: no tokens, no cost

    def as_dict(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 8)
        return {"calls": self.calls, **self.usage.as_dict(), "cost_usd": cost, "cached": self.cached}


def shown_cost(known_usd: float, complete: bool = True) -> str:
    """A cost as people read it, the same everywhere it is shown: ``$0.0123``; ``unknown`` when a model had no
    price and nothing else was priced (never ``$0.0000``); ``$0.0123 + unknown`` when some of it was."""
    if complete:
        return f"${known_usd:.4f}"
    return f"${known_usd:.4f} + unknown" if known_usd > 0 else "unknown"


@dataclass
class Spend:
    """Per-model usage and cost of a piece of work; thread-safe, ``+`` merges two.

    ``add`` takes one call (or an already-summed group of calls); ``usage``, ``cost_usd`` and ``calls`` are
    the totals; ``by_model()`` is what the records keep (``attempt_details.model_usage``).
    """

    models: dict[str, ModelSpend] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, model: str | None, usage: Usage, cost_usd: float | None, *, calls: int = 1,
            cached: int = 0) -> None:
        key = model or "unknown"
        with self._lock:
            entry = self.models.setdefault(key, ModelSpend())
            entry.calls += calls
            entry.usage = entry.usage + usage
            entry.cost_usd = add_costs(entry.cost_usd, cost_usd)
            entry.cached += cached

    def merge(self, other: Spend) -> None:
        for model, entry in list(other.models.items()):
            self.add(model, entry.usage, entry.cost_usd, calls=entry.calls, cached=entry.cached)

    def __add__(self, other: Spend) -> Spend:
        total = Spend()
        total.merge(self)
        total.merge(other)
        return total

    @property
    def usage(self) -> Usage:
        total = Usage()
        for entry in list(self.models.values()):
            total = total + entry.usage
        return total

    @property
    def cost_usd(self) -> float | None:
        """The total in USD; None when any model's cost is unknown."""
        total: float | None = 0.0
        for entry in list(self.models.values()):
            total = add_costs(total, entry.cost_usd)
        return total

    @property
    def known_cost_usd(self) -> float:
        """What the priced models cost (the unpriced ones left out): a lower bound of the total."""
        return sum(entry.cost_usd or 0.0 for entry in list(self.models.values()))

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None

    @property
    def calls(self) -> int:
        return sum(entry.calls for entry in list(self.models.values()))

    @property
    def cached(self) -> int:
        return sum(entry.cached for entry in list(self.models.values()))

    @property
    def model(self) -> str | None:
        """The model that took the most calls (the record's one ``model`` column), or None."""
        if not self.models:
            return None
        return max(self.models.items(), key=lambda kv: kv[1].calls)[0]

    def by_model(self) -> dict[str, dict[str, Any]]:
        return {model: entry.as_dict() for model, entry in sorted(self.models.items())}

    def __bool__(self) -> bool:
        return bool(self.models)
