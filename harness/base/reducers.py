"""Reducers of per-element verdicts: how a judge program's answers about each element of a list (a verdict per
statement, a rating per claim) become one score from 0 to 1 (docs/judge-programs.md).

A reducer is registered by name (:func:`verdict_reducer`, as Inspect registers its score reducers) and named in
the judge program's ``score:`` block, never a hard-coded mean::

    score: {from: verdicts, reduce: share, of: [yes, idk]}

Each says what it reads: the elements' ``labels`` (``share``, ``all``, ``any``, ``weighted``) or their ``scores``
(``mean``, ``min``, ``max``, ``median``: a label's score from the step's ``scores:``, or a rating or number on its
range), and the options it takes. The loader checks the name and the options when the file is read; a reducer
returns the score and a line saying how it was reached, which the evaluation's reason shows.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Reads = Literal["labels", "scores"]
OptionKind = Literal["labels", "weights"]  # a label or a list of labels; a score per label


@dataclass(frozen=True)
class Verdict:
    """One element's answer: its ``value`` (a label, a number) and, where the step gives one, its ``score``."""

    value: Any
    score: float | None = None


ReduceFunction = Callable[[Sequence[Verdict], Mapping[str, Any]], tuple[float, str]]


@dataclass(frozen=True)
class Reducer:
    """A named way to make one score of many verdicts."""

    name: str
    reads: Reads
    function: ReduceFunction
    options: Mapping[str, OptionKind]  # the options it takes, each of a kind the loader checks
    required: tuple[str, ...]
    summary: str

    def reduce(self, verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
        """The score of ``verdicts`` (at least one) and how it was reached, in a line."""
        return self.function(verdicts, options)


REDUCERS: dict[str, Reducer] = {}


def verdict_reducer(name: str, *, reads: Reads, summary: str, options: Mapping[str, OptionKind] | None = None,
                    required: Sequence[str] = ()) -> Callable[[ReduceFunction], ReduceFunction]:
    """Register the decorated function as the reducer ``name`` (a plugin may add its own the same way, before
    collection: a later registration of a name replaces the earlier one)."""

    def register(function: ReduceFunction) -> ReduceFunction:
        REDUCERS[name] = Reducer(name, reads, function, dict(options or {}), tuple(required), summary)
        return function

    return register


def _labels(option: Any) -> tuple[str, ...]:
    return (option,) if isinstance(option, str) else tuple(option)


def _share_line(name: str, wanted: tuple[str, ...], hits: int, total: int) -> tuple[float, str]:
    score = hits / total
    return score, f"{name} of {' or '.join(wanted)}: {hits} of {total} = {score:.2f}"


@verdict_reducer("share", reads="labels", options={"of": "labels"}, required=("of",),
                 summary="the share of elements whose label is `of` (a label or a list of labels)")
def _share(verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
    wanted = _labels(options["of"])
    return _share_line("share", wanted, sum(v.value in wanted for v in verdicts), len(verdicts))


@verdict_reducer("all", reads="labels", options={"of": "labels"}, required=("of",),
                 summary="1 when every element's label is `of`, else 0")
def _all(verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
    wanted = _labels(options["of"])
    hits = sum(v.value in wanted for v in verdicts)
    return float(hits == len(verdicts)), f"all {' or '.join(wanted)}: {hits} of {len(verdicts)}"


@verdict_reducer("any", reads="labels", options={"of": "labels"}, required=("of",),
                 summary="1 when at least one element's label is `of`, else 0")
def _any(verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
    wanted = _labels(options["of"])
    hits = sum(v.value in wanted for v in verdicts)
    return float(hits > 0), f"any {' or '.join(wanted)}: {hits} of {len(verdicts)}"


@verdict_reducer("weighted", reads="labels", options={"weights": "weights"}, required=("weights",),
                 summary="the mean of each element's label's weight (`weights: {yes: 1, idk: 0.5, no: 0}`)")
def _weighted(verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
    weights = options["weights"]
    score = sum(float(weights[v.value]) for v in verdicts) / len(verdicts)
    counts = ", ".join(f"{n} {label}" for label in weights if (n := sum(v.value == label for v in verdicts)))
    return score, f"weighted mean of {len(verdicts)} labels ({counts}) = {score:.2f}"


def _of_scores(name: str, how: Callable[[list[float]], float]) -> ReduceFunction:
    def reduce(verdicts: Sequence[Verdict], options: Mapping[str, Any]) -> tuple[float, str]:
        scores = [v.score for v in verdicts if v.score is not None]
        score = how(scores)
        return score, f"{name} of {len(scores)} scores ({', '.join(f'{s:.2f}' for s in scores)}) = {score:.2f}"

    return reduce


for _name, _how in (("mean", statistics.fmean), ("min", min), ("max", max), ("median", statistics.median)):
    verdict_reducer(_name, reads="scores", summary=f"the {_name} of the elements' scores")(_of_scores(_name, _how))
