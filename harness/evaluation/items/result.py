"""What one item came to, and the one codec of it: the only writer and reader of an item's ``user_properties``.

Every kind of item ends in an :class:`ItemResult`. It travels on pytest's reports as ``user_properties``
(JUnit XML writes them, pytest-xdist replays them on the controller): :meth:`ItemResult.properties` writes
them, :meth:`ItemResult.read` reads them back, and the terminal summary, the Markdown and HTML reports and the
compare gate read nothing else. docs/design.md, "Results on reports", lists the names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from harness.evaluation.steps import LoopResult

PREFIX = "harness_"


@dataclass(frozen=True)
class ItemResult:
    """One item's result, whatever its kind; ``outcome`` is the harness's word: passed, failed, escalated,
    indeterminate, error, validation_failed or interrupted."""

    outcome: str
    kind: str = "case"
    exit_code: int | None = None  # the exit codes' list: 0 passed, 1 below the bar, 65 a command's own, 143 SIGTERM
    agent: str | None = None
    case: str | None = None
    variant: str | None = None  # the agent's variant it ran (``variants:``)
    rubric: str | None = None
    cycle: str | None = None
    score: float | None = None
    threshold: float | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0  # of the models with a price; ``models`` says which had none
    models: dict[str, dict[str, Any]] | None = None  # per model, when there were several or one had no price
    artifact: str | None = None
    dimensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    cached_answers: int = 0  # model answers replayed from the response cache
    samples: list[float] | None = None  # judge samples' overall scores
    unstable: bool = False  # the samples fell on both sides of the threshold
    staged: bool = False  # recorded as several runs (a pipeline's stages, a construct's phases): its last is not it
    unscored: str | None = None  # why an indeterminate item was not scored
    unconfined: tuple[str, ...] = ()  # its commands that ran without the sandbox (agent.role)
    not_run: str | None = None  # why it was not run: "cost_cap" or "stop"
    regression: dict[str, Any] | None = None  # the compare gate's finding against the baseline cycle
    baseline_score: float | None = None
    # what a kind of its own reports beside (a goal's score, metric and phase): each written ``harness_<name>``
    facts: dict[str, Any] = field(default_factory=dict)
    # a judge ensemble's: the judges, those that answered, each dimension's votes and their kappa (ensemble.py)
    judge_agreement: dict[str, Any] | None = None
    cascade: dict[str, Any] | None = None  # a judge cascade's: which judge decided, why, both answers (cascade.py)

    @classmethod
    def of_run(cls, run: LoopResult, *, kind: str, agent: str | None, case: str | None, rubric: str | None,
               threshold: float | None, cycle: str | None, variant: str | None = None) -> ItemResult:
        """The result of an item that ran from the shared steps."""
        spend = run.spend
        usage = spend.usage
        evaluation = run.last_evaluation
        dims = {} if evaluation is None else {
            name: {"score": d.score, "weight": round(d.weight, 6), "reason": d.reason, **d.answer,
                   **({"judges": d.judges} if d.judges else {})}
            for name, d in evaluation.dimensions.items()}
        samples = evaluation.samples if evaluation is not None and evaluation.samples else None
        return cls(
            outcome=run.outcome, kind=kind, exit_code=run.exit_code, agent=agent, case=case, variant=variant,
            rubric=rubric, cycle=cycle,
            score=run.final_score, threshold=threshold, attempts=run.final_attempt,
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_write_tokens, cache_read_tokens=usage.cache_read_tokens,
            cost_usd=spend.known_cost_usd,
            # per model only where the totals hide something: two models, or one without a price
            models=spend.by_model() if len(spend.models) > 1 or not spend.cost_known else None,
            artifact=run.artifact_path, dimensions=dims, cached_answers=spend.cached, samples=samples,
            unstable=bool(samples) and bool(evaluation and evaluation.unstable),
            judge_agreement=evaluation.judge_agreement if evaluation is not None else None,
            cascade=evaluation.cascade if evaluation is not None else None,
            unscored=run.escalation_reason if run.outcome == "indeterminate" else None,
            unconfined=tuple(f"{agent}.{role}" for role in run.unconfined_roles))

    # -- the codec ------------------------------------------------------------------------------------

    def properties(self) -> list[tuple[str, Any]]:
        """The ``user_properties`` of this result: each field that holds something, JSON for the nested ones."""
        out: list[tuple[str, Any]] = []
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "facts":
                out.extend((PREFIX + name, fact) for name, fact in value.items() if name not in _FIELDS)
                continue
            if value is None or value == () or (spec.name in _OMITTED_WHEN_FALSE and not value):
                continue
            if spec.name in _JSON:
                value = json.dumps(value)
            elif spec.name == "unconfined":
                value = ",".join(value)
            elif spec.name == "cost_usd":  # a number, or "unknown": never $0 for a model with no price
                value = round(value, 6) if self.cost_known or value > 0 else "unknown"
            out.append((PREFIX + spec.name, value))
        return out

    @classmethod
    def read(cls, properties: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> ItemResult | None:
        """The result that :meth:`properties` wrote; None for an item that carries none (not ours, or not run)."""
        props = dict(properties.items() if isinstance(properties, Mapping) else properties)
        if PREFIX + "outcome" not in props:
            return None
        given: dict[str, Any] = {}
        for spec in fields(cls):
            raw = props.get(PREFIX + spec.name)
            if raw is None or spec.name == "facts":
                continue
            given[spec.name] = _decode(spec.name, raw)
        given["facts"] = {name[len(PREFIX):]: value for name, value in props.items()
                          if name.startswith(PREFIX) and name[len(PREFIX):] not in _FIELDS}
        return cls(**given)

    @staticmethod
    def not_run_property(cause: str) -> tuple[str, Any]:
        """The one property of an item the session stopped before it ran."""
        return PREFIX + "not_run", cause

    @staticmethod
    def read_not_run(properties: Iterable[tuple[str, Any]]) -> str | None:
        return dict(properties).get(PREFIX + "not_run")

    def gate_properties(self, regression: dict[str, Any] | None, baseline_score: float | None) -> list[tuple[str, Any]]:
        """The properties the compare gate adds to an item's result."""
        out: list[tuple[str, Any]] = []
        if baseline_score is not None:
            out.append((PREFIX + "baseline_score", baseline_score))
        if regression is not None:
            out.append((PREFIX + "regression", json.dumps(regression)))
        return out

    # -- what reports read ------------------------------------------------------------------------------

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def unpriced_models(self) -> list[str]:
        return sorted(model for model, spent in (self.models or {}).items() if spent.get("cost_usd") is None)

    @property
    def cost_known(self) -> bool:
        """Whether ``cost_usd`` is the whole cost: no model it called lacked a price."""
        return not self.unpriced_models

    @property
    def no_score(self) -> str | None:
        """Why an item that ran has no score, in a few words (None when it has one)."""
        return None if self.score is not None else why_no_score(self.outcome, self.unscored)

    @property
    def spread(self) -> float | None:
        return max(self.samples) - min(self.samples) if self.samples else None

    def answers(self) -> dict[str, Any]:
        """Per dimension with a scale or choices, the judge's own rating or label."""
        return {dim_id: dim.get("label", dim.get("rating")) for dim_id, dim in self.dimensions.items()
                if isinstance(dim, dict) and dim.get("label", dim.get("rating")) is not None}


_JSON = frozenset({"models", "dimensions", "samples", "regression", "judge_agreement", "cascade"})
_FIELDS = frozenset(spec.name for spec in fields(ItemResult))
_OMITTED_WHEN_FALSE = frozenset({"unstable", "staged"})
_INTS = frozenset({"attempts", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens",
                   "cached_answers"})
_FLOATS = frozenset({"score", "threshold", "cost_usd", "baseline_score"})


def _decode(name: str, raw: Any) -> Any:
    """A property's value as the result holds it (xdist and JUnit may hand back text)."""
    if name in _JSON:
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                return None
        return raw
    if name == "unconfined":
        return tuple(filter(None, str(raw).split(",")))
    if name in _OMITTED_WHEN_FALSE:
        return raw in (True, "True", "true")
    if name == "exit_code":  # unreadable is unknown, never 0 (success)
        number = number_or_none(raw)
        return None if number is None else int(number)
    if name in _INTS:
        try:
            return int(raw)
        except (TypeError, ValueError):
            return 0
    if name == "cost_usd":  # "unknown" reads as nothing priced (``models`` says which had no price)
        return number_or_none(raw) or 0.0
    if name in _FLOATS:
        return number_or_none(raw)
    return raw


NO_SCORE = {  # why an item that ran has no score, by its outcome
    "failed": "the checks decided it before judging",
    "passed": "the checks decided it before judging",  # or, a kind whose items no rubric scores, nothing did
    "error": "an error ended it before scoring",
    "validation_failed": "an output failed validation",
    "escalated": "escalated before scoring",
    "interrupted": "interrupted before scoring",
}


def item_title(agent: str, case: str, variant: str | None = None) -> str:
    """How reports name an item: ``writer[case-1]``, and its variant when the agent has some."""
    return f"{agent}[{case}]" + (f" (variant {variant})" if variant else "")


def why_no_score(outcome: str, unscored: str | None = None) -> str:
    """Why an item with ``outcome`` has no score: nobody could score it (``unscored``, an indeterminate item's
    reason), or what ended it first."""
    if outcome == "indeterminate":
        return (unscored or "not scored").removeprefix("not scored (indeterminate): ")
    return NO_SCORE.get(outcome, outcome)


def number_or_none(value: Any) -> float | None:
    """A property's number (JUnit and xdist may hand back text); None for nothing, text that is no number, NaN."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
