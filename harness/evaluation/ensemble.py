"""Judge ensembles: several judge models asked the same question, their answers combined per dimension.

``judge: {models: [claude-sonnet-4-6, openai/gpt-4.1, mock/score-0.8], aggregate: majority}`` in agents.yaml. Each
judge is asked exactly as a single judge is (:class:`harness.evaluation.llm_judge.LlmJudge`); :func:`ask_judges`
asks them all at once and hands the evaluation one answer that carries every judge's own (under the answer's
``metadata.ensemble``); :func:`combine` turns those into a dimension's score; :func:`item_agreement` measures how
far the judges agree on one item and :func:`agreement_lines` over a session. docs/model-calls.md, "Judge
ensembles", says what each aggregate does and what the agreement counts.

* ``mean``, ``min``, ``median``: of the scores of the judges that scored the dimension.
* ``majority``: on a dimension whose answers are categories (a label, a rating, pass/fail, a level of exhaustive
  levels), the answer most judges gave, a tie going to the lowest-scoring of the tied answers; on a continuous score,
  the low median (the lower middle score for an even number): the score of a judge on the majority's side of any
  threshold, so it agrees with a pass/fail vote of the judges, a tie going to the lower score. Ties are said in the
  dimension's reason.

A judge's *vote* is what the agreement counts: its label or rating, pass/fail for a pass/fail criterion, its level
for exhaustive levels, and for a continuous score pass/fail against the dimension's ``min_score`` (else the item's
threshold). With ``--harness-judge-samples K`` each judge answers K times: its score is the mean of its samples (as
a single judge's), its vote the most common of its samples' votes (the vote of its mean score when continuous).
"""

from __future__ import annotations

import contextvars
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness.base.errors import HarnessError, ModelCallError, ModelUnavailable, ValidationFailed
from harness.base.models import Dimension
from harness.base.stats import kappa, observed_agreement
from harness.base.usage import Spend
from harness.evaluation.runners import RunnerOutput
from harness.llm import CostCapReached

ENSEMBLE_KEY = "ensemble"  # where an answer's metadata carries the judges' own answers
MAX_FIXES = 50  # the judge schema's suggestedFixes bound (harness.evaluation.evaluate.MAX_ANSWER_FIXES)
DECIMALS = 6
Vote = str | int | float


# --- asking -------------------------------------------------------------------------------------------------


def ask_judges(judges: Sequence[tuple[str, Callable[[], RunnerOutput]]], aggregate: str) -> RunnerOutput:
    """Ask every judge at once (a thread each, with this thread's context: their model calls stay tied to the
    item) and return one answer: the first judge that answered gives the answer's own fields, its
    ``suggestedFixes`` are every answering judge's, and ``metadata.ensemble`` holds each judge's dimension scores
    or its error. Every judge's calls are in the answer's spend, a failed judge's too.

    A judge that fails is recorded as failed and the others carry on. When none answered: the cost cap's error as
    it came; the one kind of error all the judges failed with (invalid answers, model calls that failed); else the
    item is not scored (:class:`ModelUnavailable`), naming each judge's failure."""
    with ThreadPoolExecutor(max_workers=len(judges), thread_name_prefix="harness-judges") as pool:
        futures = [(name, pool.submit(contextvars.copy_context().run, ask)) for name, ask in judges]
        results: dict[str, RunnerOutput | HarnessError] = {}
        for name, future in futures:
            try:
                results[name] = future.result()
            except HarnessError as exc:
                results[name] = exc
    spend = Spend()
    for result in results.values():
        spent = result.spend if isinstance(result, RunnerOutput) else getattr(result, "spend", None)
        if spent is not None:
            spend.merge(spent)
    failed = {name: result for name, result in results.items() if isinstance(result, HarnessError)}
    cap = next((exc for exc in failed.values() if isinstance(exc, CostCapReached)), None)
    if cap is not None:
        cap.spend = spend  # what the judges that answered cost is billed all the same
        raise cap
    answered = {name: result.data or {} for name, result in results.items() if isinstance(result, RunnerOutput)}
    if not answered:
        raise _none_answered(failed, spend)
    lead = next(iter(answered.values()))
    fixes = list(dict.fromkeys(str(fix) for data in answered.values() for fix in data.get("suggestedFixes", [])))
    own = {name: ({"dimensionScores": answered[name].get("dimensionScores", {})} if name in answered else
                  {"error": str(failed[name]), "unscored": isinstance(failed[name], ModelUnavailable)})
           for name in results}
    data = {**lead, "suggestedFixes": fixes[:MAX_FIXES],
            "metadata": {**(lead.get("metadata") or {}), ENSEMBLE_KEY: {"aggregate": aggregate, "judges": own}}}
    return RunnerOutput(data=data, spend=spend)


def _none_answered(failed: Mapping[str, HarnessError], spend: Spend) -> HarnessError:
    errors = list(failed.values())
    text = (f"no judge of the ensemble answered ({len(errors)} asked): "
            + "; ".join(f"{name}: {exc}" for name, exc in failed.items()))
    if all(isinstance(exc, ValidationFailed) for exc in errors):
        first = errors[0]
        assert isinstance(first, ValidationFailed)
        return ValidationFailed(text, [e for exc in errors for e in getattr(exc, "errors", [])][:10],
                                first.raw_response, spend=spend)
    if all(isinstance(exc, ModelCallError) for exc in errors):
        return ModelCallError(text, errors[0].exit_code, spend=spend)  # type: ignore[arg-type]
    unavailable = ModelUnavailable(text)
    unavailable.spend = spend  # type: ignore[attr-defined]  # the judges that failed otherwise may have cost
    return unavailable


def judges_of(data: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ensemble part of an answer (its aggregate and each judge's answers), None for one judge's answer."""
    metadata = (data or {}).get("metadata") or {}
    found = metadata.get(ENSEMBLE_KEY) if isinstance(metadata, Mapping) else None
    return found if isinstance(found, Mapping) else None


# --- combining ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Combined:
    """One dimension as the ensemble scored it."""

    score: float | None  # None: no judge scored it
    reason: str
    answer: dict[str, Any]  # the rating or label the score stands for, when it stands for one
    judges: dict[str, dict[str, Any]]  # each judge's own answer: score, reason, vote (rating, label, samples) or error
    scores: tuple[float, ...]  # the scores of the judges that scored it, in the order they are listed


def categorical(dim: Dimension) -> bool:
    """Whether a judge answers ``dim`` with one of a few categories (a rating, a label, pass/fail, a level)."""
    return dim.scale is not None or bool(dim.choices) or dim.binary or dim.exhaustive


def cut_of(dim: Dimension, threshold: float) -> float:
    """Where a continuous score turns from fail to pass: the dimension's ``min_score``, else the item's threshold."""
    return dim.min_score if dim.min_score is not None else threshold


def vote_of(dim: Dimension, answer: Mapping[str, Any], threshold: float) -> Vote:
    """What one answer counts as in a majority and in the agreement."""
    if dim.scale is not None:
        return dim.rating_value(answer["rating"])
    if dim.choices:
        return str(answer["label"])
    score = dim.score_of(dict(answer))
    if dim.binary:
        return "pass" if score >= 1.0 - 1e-9 else "fail"
    if dim.exhaustive:
        return score
    return "pass" if score >= cut_of(dim, threshold) - 1e-9 else "fail"


def vote_score(dim: Dimension, vote: Vote) -> float:
    """The score a categorical vote stands for."""
    if dim.scale is not None:
        return dim.score_of({"rating": vote})
    if dim.choices:
        return dim.choices[str(vote)]
    if vote in ("pass", "fail"):
        return 1.0 if vote == "pass" else 0.0
    return float(vote)


def _most_common(votes: list[Vote], score: Callable[[Vote], float]) -> tuple[Vote, list[Vote]]:
    """The vote given most, a tie going to the lowest-scoring; and the votes it was tied with (itself included)."""
    counts: dict[Vote, int] = {}
    for vote in votes:
        counts[vote] = counts.get(vote, 0) + 1
    top = max(counts.values())
    tied = sorted((vote for vote, count in counts.items() if count == top), key=score)
    return tied[0], tied


def _raw(dim: Dimension, vote: Vote) -> dict[str, Any]:
    if dim.scale is not None:
        return {"rating": dim.rating_value(vote)}
    if dim.choices:
        return {"label": str(vote)}
    return {}


def _judge_answer(dim: Dimension, given: list[Mapping[str, Any]], threshold: float) -> dict[str, Any]:
    """One judge's answer to ``dim`` over its samples (each an entry of the ensemble's answer)."""
    answers = [g["dimensionScores"][dim.id] for g in given if "dimensionScores" in g]
    scored = [a for a in answers if not a.get("indeterminate")]
    if not scored:
        if answers:
            return {"score": None, "reason": str(answers[0].get("reason", "")), "indeterminate": True}
        failure = next(g for g in given if "error" in g)
        unscored = {"unscored": True} if failure.get("unscored") else {}
        return {"score": None, "error": str(failure["error"]), **unscored}
    scores = [dim.score_of(dict(a)) for a in scored]
    mean = round(sum(scores) / len(scores), DECIMALS)
    if categorical(dim):
        vote, _ = _most_common([vote_of(dim, a, threshold) for a in scored], lambda v: vote_score(dim, v))
    else:
        vote = vote_of(dim, {"score": mean}, threshold)
    entry: dict[str, Any] = {"score": mean, "reason": str(scored[0]["reason"]), "vote": vote}
    raws = [dim.raw_answer(dict(a)) for a in scored]
    if all(raw == raws[0] for raw in raws):
        entry.update(raws[0])
    if len(given) > 1:
        entry["samples"] = [round(score, DECIMALS) for score in scores]
    return entry


def combine(dim: Dimension, answers: Sequence[Mapping[str, Any]], threshold: float) -> Combined:
    """``dim`` scored by the ensemble from its answers (one per judge sample, each carrying every judge's)."""
    parts = [judges_of(data) or {} for data in answers]
    aggregate = str(parts[0].get("aggregate", "mean"))
    names = list(parts[0].get("judges", {}))
    judges = {name: _judge_answer(dim, [part["judges"][name] for part in parts if name in part.get("judges", {})],
                                  threshold) for name in names}
    scored = {name: entry for name, entry in judges.items() if entry["score"] is not None}
    listing = ", ".join(f"{name} {_shown(entry)}" for name, entry in judges.items())
    if not scored:
        reason = f"no judge of the ensemble scored it [{listing}]"
        return Combined(None, reason, {}, judges, ())
    scores = [entry["score"] for entry in scored.values()]
    answer: dict[str, Any] = {}
    tie = ""
    if aggregate == "majority" and categorical(dim):
        vote, tied = _most_common([entry["vote"] for entry in scored.values()], lambda v: vote_score(dim, v))
        score = vote_score(dim, vote)
        answer = _raw(dim, vote)
        if len(tied) > 1:
            tie = f"; a tie between {' and '.join(str(v) for v in tied)}: the lower, {vote}, taken"
    elif aggregate == "majority":
        score = statistics.median_low(scores)
        passes = sum(entry["vote"] == "pass" for entry in scored.values())
        if passes * 2 == len(scores):
            tie = (f"; a tie between pass and fail at {cut_of(dim, threshold):g}: the lower score taken")
    elif aggregate == "min":
        score = min(scores)
    elif aggregate == "median":
        score = statistics.median(scores)
    else:
        score = sum(scores) / len(scores)
    score = round(score, DECIMALS)
    source = next((entry for entry in scored.values() if abs(entry["score"] - score) < 1e-9), None)
    if not answer and source is not None:
        answer = {key: source[key] for key in ("rating", "label") if key in source}
    counted = (f"{len(scored)} judge{'s' * (len(scored) != 1)}" if len(scored) == len(judges)
               else f"{len(scored)} of {len(judges)} judges")
    reason = f"{(source or next(iter(scored.values())))['reason']} [{aggregate} of {counted}: {listing}{tie}]"
    return Combined(score, reason, answer, judges, tuple(scores))


def _shown(entry: Mapping[str, Any]) -> str:
    if entry.get("error") is not None:
        return "not scored" if entry.get("unscored") else "failed"
    if entry["score"] is None:
        return "indeterminate"
    raw = entry.get("label", entry.get("rating"))
    return f"{entry['score']:.2f}" if raw is None else f"{raw} ({entry['score']:.2f})"


def sample_scores(dims: Iterable[Dimension], answer: Mapping[str, Any], threshold: float) -> dict[str, float | None]:
    """Per dimension, the ensemble's score from one sample's answer (a sample's overall, for ``unstable``)."""
    return {dim.id: combine(dim, [answer], threshold).score for dim in dims}


# --- agreement ------------------------------------------------------------------------------------------------


def item_agreement(answers: Sequence[Mapping[str, Any]], judged: Mapping[str, Combined]) -> dict[str, Any]:
    """What an item's result keeps of its ensemble: the aggregate, the judges (as listed), those that answered and
    those that failed, each dimension's votes, and the agreement over the dimensions every answering judge voted
    on (Cohen's kappa for two judges, Fleiss' for three or more; ``observed`` is the share of agreeing pairs)."""
    part = judges_of(answers[0]) or {}
    names = list(part.get("judges", {}))
    failed: dict[str, str] = {}
    for name in names:
        given = [(judges_of(a) or {}).get("judges", {}).get(name, {}) for a in answers]
        if all("error" in g for g in given):
            failed[name] = str(given[0]["error"])
    raters = [name for name in names if name not in failed]
    ratings = {dim_id: {name: combined.judges.get(name, {}).get("vote") for name in names}
               for dim_id, combined in judged.items()}
    subjects = [[votes[name] for name in raters] for votes in ratings.values()
                if all(votes[name] is not None for name in raters)]
    statistic, value = kappa(subjects) if len(raters) >= 2 and subjects else (_kappa_name(len(raters)), None)
    observed = observed_agreement(subjects) if len(raters) >= 2 else None
    return {"aggregate": str(part.get("aggregate", "mean")), "judges": names, "answered": raters, "failed": failed,
            "statistic": statistic, "kappa": None if value is None else round(value, 4),
            "observed": None if observed is None else round(observed, 4), "subjects": len(subjects),
            "ratings": ratings}


def _kappa_name(raters: int) -> str:
    return "Cohen's kappa" if raters == 2 else "Fleiss' kappa"


def agreement_lines(items: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """The session's agreement between judges: per ensemble and set of judges that answered (a judge with no key
    answers no item), every (item, dimension) they all voted on is one subject; one line each, e.g. ``judges agree:
    Fleiss' kappa 0.62 over 150 dimension ratings (3 judges: a, b, c); observed agreement 81%``."""
    pooled: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[list[Vote]], list[int]]] = {}
    for item in items:
        if not item:
            continue
        names = tuple(item.get("judges") or ())
        raters = tuple(item.get("answered") or names)
        if len(raters) < 2:
            continue
        subjects, left_out = pooled.setdefault((names, raters), ([], [0]))
        for votes in (item.get("ratings") or {}).values():
            if all(votes.get(name) is not None for name in raters):
                subjects.append([votes[name] for name in raters])
            else:
                left_out[0] += 1
    lines = []
    for (names, raters), (subjects, left_out) in pooled.items():
        statistic, value = kappa(subjects) if subjects else (_kappa_name(len(raters)), None)
        observed = observed_agreement(subjects)
        who = (f"{len(raters)} judges: " if raters == names else
               f"{len(raters)} of {len(names)} judges answered: ") + ", ".join(raters)
        ratings = f"{len(subjects)} dimension rating{'s' * (len(subjects) != 1)}"
        if not subjects:
            line = f"judges agree: no dimension rated by all {who}"
        elif value is None:
            line = (f"judges agree: {statistic} undefined over {ratings} ({who}): every vote was {subjects[0][0]}, "
                    "nothing to tell from chance")
        else:
            line = f"judges agree: {statistic} {value:.2f} over {ratings} ({who})"
        if observed is not None:
            line += f"; observed agreement {observed:.0%}"
        if left_out[0]:
            line += f"; {left_out[0]} left out (a judge gave no vote)"
        lines.append(line)
    return lines
