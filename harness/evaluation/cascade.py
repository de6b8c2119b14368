"""A judge cascade: a cheap judge answers first; the named judge is asked only when that answer is uncertain.

``judge: {model: claude-sonnet-4-6, cascade: {first: claude-haiku-4-5, escalate_when: {margin: 0.1}}}``
(harness.loading.cascade reads it). The first judge is asked exactly as the named judge would be (the same cached
prefix, message and schema). Its answer decides the item unless it is uncertain:

- a dimension it could not judge (``indeterminate``);
- a dimension's score within ``margin`` of that dimension's ``min_score``;
- the item's score with its answer (the checks' part of the rubric included) within ``margin`` of the threshold;
- no valid answer (a failed call, an answer still invalid after its retry, no key for its model).

An uncertain answer goes to the named judge, whose answer decides. Either way the answer's ``metadata.cascade``
says which judge decided and why, and keeps both judges' answers (each dimension's score and reason); the
evaluation records it (eval.json ``metadata.cascade``, the item's ``harness_cascade``) and the session summary
counts the escalations. Both judges' calls are in the answer's spend, each under its model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.base.errors import HarnessError, ModelCallError, ModelUnavailable, ValidationFailed
from harness.base.fields import one_line
from harness.base.requests import JudgeRequest
from harness.base.usage import Spend
from harness.evaluation.runners import RunnerOutput
from harness.llm import CostCapReached

CASCADE_KEY = "cascade"  # in a judge's answer metadata, in eval.json's metadata, and the item's result
Ask = Callable[[], RunnerOutput]


def ask_cascade(first: tuple[str, Ask], named: tuple[str, Ask], request: JudgeRequest, margin: float) -> RunnerOutput:
    """The first judge's answer when it is certain, else the named judge's; ``metadata.cascade`` says which."""
    (first_name, ask_first), (named_name, ask_named) = first, named
    spend = Spend()
    try:
        answer = ask_first()
    except CostCapReached:
        raise  # the cap stops the item: no second judge is asked past it
    except (ModelCallError, ModelUnavailable, ValidationFailed) as exc:
        spend.merge(getattr(exc, "spend", None) or Spend())
        why, own = f"{first_name} gave no valid answer", {"error": one_line(str(exc), 300)}
        data: dict[str, Any] = {}
    else:
        spend.merge(answer.spend)
        data = answer.data or {}
        why, own = uncertainty(request, data, margin), _answer(data)
    record = {"first": first_name, "named": named_name, "margin": margin, "answers": {first_name: own}}
    if why is None:
        return RunnerOutput(data=_with(data, {**record, "decided_by": first_name, "escalated": False}), spend=spend)
    try:
        decided = ask_named()
    except HarnessError as exc:  # the named judge's failure is the item's, as a single judge's is; both cost
        exc.spend = _merged(spend, getattr(exc, "spend", None))  # type: ignore[attr-defined]
        raise
    named_data = decided.data or {}
    record = {**record, "decided_by": named_name, "escalated": True, "why": why,
              "answers": {**record["answers"], named_name: _answer(named_data)}}
    return RunnerOutput(data=_with(named_data, record), spend=_merged(spend, decided.spend))


def uncertainty(request: JudgeRequest, data: Mapping[str, Any], margin: float) -> str | None:
    """Why the answer ``data`` to ``request`` is uncertain (``margin``: how close to a threshold is too close),
    or None when it decides the item."""
    dims = [dim for dim in request.rubric.dimensions if dim.id in request.dimensions]
    given = data.get("dimensionScores") or {}
    unjudged = [dim.id for dim in dims if not isinstance(given.get(dim.id), Mapping) or given[dim.id].get(
        "indeterminate")]
    if unjudged:
        return f"it could not judge {', '.join(unjudged)}"
    scores = {dim.id: dim.score_of(given[dim.id]) for dim in dims}
    for dim in dims:
        if dim.min_score is not None and abs(scores[dim.id] - dim.min_score) <= margin + 1e-9:
            return f"{dim.id} {scores[dim.id]:.2f} is within {margin:g} of its min_score {dim.min_score:g}"
    threshold = request.threshold if request.threshold is not None else request.rubric.threshold
    judged = sum(dim.weight * scores[dim.id] for dim in dims)
    if request.settled is not None:  # the whole item's score: the checks' part and the judge's
        score = request.settled + judged
    else:  # the judged dimensions' own
        score = judged / (sum(dim.weight for dim in dims) or 1.0)
    if abs(score - threshold) <= margin + 1e-9:
        return f"its score {score:.2f} is within {margin:g} of the threshold {threshold:.2f}"
    return None


def _answer(data: Mapping[str, Any]) -> dict[str, Any]:
    """What is kept of one judge's answer: its overall score as it gave it, and each dimension's answer."""
    return {"overallScore": data.get("overallScore"), "dimensionScores": {
        name: {key: value for key, value in dict(answer).items() if key != "weight"}
        for name, answer in (data.get("dimensionScores") or {}).items() if isinstance(answer, Mapping)}}


def _with(data: Mapping[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    return {**data, "metadata": {**(data.get("metadata") or {}), CASCADE_KEY: record}}


def _merged(*spends: Spend | None) -> Spend:
    total = Spend()
    for spend in spends:
        if spend is not None:
            total.merge(spend)
    return total
