"""Evaluation: deterministic checks plus the judge, and an overall score the harness computes itself.

The judge's own ``overallScore`` and ``passed`` are never trusted: the overall score is recomputed
from the rubric's weights. A dimension nobody could score (no model, the judge said indeterminate)
has no score; the verdict is then still known when the other dimensions already decide it (their
bounds), and indeterminate otherwise.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.base.clock import utc_now
from harness.base.conversation import reduce_turns
from harness.base.errors import ModelUnavailable, ValidationFailed
from harness.base.models import Dimension, DimensionScore, EvaluatorOutput, Rubric
from harness.base.requests import JudgeRequest, Subject
from harness.base.usage import Spend
from harness.checks import CheckContext
from harness.checks.transforms import noted
from harness.evaluation.artifact_items import count_items
from harness.evaluation.cascade import CASCADE_KEY
from harness.evaluation.conversation import check_turns
from harness.evaluation.ensemble import Combined, combine, item_agreement, judges_of, sample_scores
from harness.evaluation.judge_schema import (  # noqa: F401 - answer_shape and the limits: re-exported
    MAX_ANSWER_FIXES, MAX_ANSWER_TEXT, answer_shape, judge_schema, validation_errors)
from harness.evaluation.runners import Runner, RunnerOutput

SCORE_DECIMALS = 6


@dataclass(frozen=True)
class DimensionVerdict:
    score: float | None
    weight: float
    reason: str
    source: str  # "check", "judge" or "none"
    fixes: tuple[str, ...] = ()
    sample_scores: tuple[float, ...] = ()  # each judge sample's score, when there were several
    answer: dict[str, Any] = field(default_factory=dict)  # the judge's rating or label, on the dimension's own scale
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)  # a judge ensemble's: each judge's own answer


@dataclass(frozen=True)
class Evaluation:
    rubric: Rubric
    threshold: float
    dimensions: dict[str, DimensionVerdict]
    feedback: str
    suggested_fixes: list[str]
    spend: Spend = field(default_factory=Spend)  # the judge's calls, per model
    indeterminate_reason: str | None = None
    judge_reported_score: float | None = None
    samples: list[float] = field(default_factory=list)
    items_evaluated: int = 1  # the artifact's items (a rubric's ``items:``), else the artifact itself
    reasoning: str | None = None  # what the judge wrote before its verdict (reasoning first, a parsed verdict)
    # a judge ensemble's: its judges, those that answered, each dimension's votes and the agreement between them
    judge_agreement: dict[str, Any] | None = None
    cascade: dict[str, Any] | None = None  # a judge cascade's: which judge decided, why, both answers (cascade.py)

    @property
    def model(self) -> str | None:
        """The judge's model (the one that answered most, should several have)."""
        return self.spend.model

    @property
    def bounds(self) -> tuple[float, float]:
        """The lowest and highest overall score the unscored dimensions still allow."""
        known = sum(d.weight * d.score for d in self.dimensions.values() if d.score is not None)
        unknown = sum(d.weight for d in self.dimensions.values() if d.score is None)
        return round(known, SCORE_DECIMALS), round(known + unknown, SCORE_DECIMALS)

    @property
    def overall(self) -> float | None:
        low, high = self.bounds
        return low if low == high else None

    @property
    def failed_gates(self) -> list[str]:
        """The dimensions scored below their ``min_score``, as ``id score < min``."""
        return [f"{dim.id} {verdict.score:.2f} < {dim.min_score:g}" for dim in self.rubric.dimensions
                if dim.min_score is not None and (verdict := self.dimensions[dim.id]).score is not None
                and verdict.score < dim.min_score - 1e-9]

    @property
    def passed(self) -> bool | None:
        """True or False when the verdict is known, None when it is indeterminate. A dimension below its
        ``min_score`` fails the evaluation whatever the weighted score; one not scored keeps it open."""
        low, high = self.bounds
        if high < self.threshold or self.failed_gates:
            return False
        gates_open = any(dim.min_score is not None and self.dimensions[dim.id].score is None
                         for dim in self.rubric.dimensions)
        if low >= self.threshold and not gates_open:
            return True
        return None

    @property
    def unstable(self) -> bool:
        """True when the judge's samples disagree on the verdict."""
        return len({s >= self.threshold for s in self.samples}) > 1

    @property
    def indeterminate_dimensions(self) -> list[str]:
        return [name for name, d in self.dimensions.items() if d.score is None and d.source != "skipped"]

    @property
    def not_judged(self) -> list[str]:
        """Dimensions the judge was not asked about: the checks had decided the verdict already."""
        return [name for name, d in self.dimensions.items() if d.source == "skipped"]

    def to_output(self) -> EvaluatorOutput:
        """The seed's EvaluatorOutput; unknown scores are null and listed in metadata."""
        low, high = self.bounds
        metadata: dict[str, Any] = {
            "rubricVersion": self.rubric.version,
            "evaluatedAt": utc_now(),
            "itemsEvaluated": self.items_evaluated,
            "rubric": self.rubric.name,
            "threshold": self.threshold,
            "scoreBounds": [low, high],
            "indeterminate": self.indeterminate_dimensions,
            "scoredBy": {name: d.source for name, d in self.dimensions.items()},
        }
        if self.not_judged:
            metadata["notJudged"] = self.not_judged
        if self.failed_gates:
            metadata["failedGates"] = self.failed_gates
        if self.reasoning:
            metadata["reasoning"] = self.reasoning
        if self.judge_reported_score is not None:
            metadata["judgeReportedScore"] = self.judge_reported_score
        if self.model:
            metadata["judgeModel"] = self.model
        if self.samples:
            metadata["samples"] = self.samples
            metadata["sampleSpread"] = {"min": min(self.samples), "max": max(self.samples),
                                        "stdev": round(statistics.pstdev(self.samples), SCORE_DECIMALS)}
            metadata["unstable"] = self.unstable
        if self.judge_agreement is not None:
            metadata["judges"] = {**self.judge_agreement, "answers": {
                name: d.judges for name, d in self.dimensions.items() if d.judges}}
        if self.cascade is not None:
            metadata["cascade"] = self.cascade
        return EvaluatorOutput(
            overallScore=self.overall,
            passed=bool(self.passed),
            dimensionScores={name: DimensionScore(score=d.score, weight=round(d.weight, SCORE_DECIMALS),
                                                  reason=d.reason, **d.answer)
                             for name, d in self.dimensions.items()},
            feedback=self.feedback,
            suggestedFixes=self.suggested_fixes,
            metadata=metadata,
        )


    def to_review(self, evaluation_ms: int, total_ms: int) -> dict[str, Any]:
        """The review contract's ReviewResult: one entry per criterion, pass/fail/indeterminate.

        A criterion passes at a full score (the judge answers pass/fail criteria with 1 or 0; a check's
        fraction below 1 is a failure). ``confidence`` is 1.0 for a check; for the judge it is the share of
        samples that agree on the verdict (1.0 with one sample: ``--harness-judge-samples`` measures it)."""
        results, issues, unknown = [], [], []
        for dim in self.rubric.dimensions:
            verdict = self.dimensions[dim.id]
            if verdict.score is None:
                state = "indeterminate"
                unknown.append(dim.id)
            else:
                state = "pass" if verdict.score >= 1.0 - 1e-9 else "fail"
                if state == "fail":
                    issues.append(f"{dim.name or dim.id}: {verdict.reason}")
            votes = [score >= 1.0 - 1e-9 for score in verdict.sample_scores]
            confidence = 1.0 if not votes else max(votes.count(True), votes.count(False)) / len(votes)
            results.append({"criterion_id": dim.id, "criterion_name": dim.name or dim.id, "verdict": state,
                            "reasoning": verdict.reason, "confidence": confidence})
        return {"pass": bool(self.passed), "issues": issues, "suggested_fixes": list(self.suggested_fixes),
                "indeterminate": unknown, "criteria_results": results,
                "timings_ms": {"evaluation": evaluation_ms, "total": total_ms}}


def check_review(review: dict[str, Any], rubric: Rubric) -> list[str]:
    """The review's errors against the rubric's ``output_schema`` (none when it declares none)."""
    if rubric.output_schema is None:
        return []
    return validation_errors(review, rubric.output_schema)


def evaluate(artifact: str, *, rubric: Rubric, threshold: float, context: CheckContext,
             judge: Runner | None, about: Subject, samples: int = 1,
             revision_follows: bool = True, always_judge: bool = False) -> Evaluation:
    """Score every dimension: checks first, then the judge for the rest (``samples`` times, concurrently).

    ``about`` names the agent, case, attempt and inputs the artifact answers. The judge is not called when
    the checks alone decide the verdict and nothing would read its feedback: a pass (nothing is revised),
    or a fail when no revision follows (``revision_follows`` False: the last attempt, a calibration example);
    unless ``always_judge`` (the agent's ``always_judge: true``), which wants a score for every item.

    On a conversation (``about.conversation``) the artifact is its transcript, and a ``per_turn`` dimension scores
    each reply instead: its check runs on each, the judge is asked once per reply with the conversation up to it
    (docs/conversations.md)."""
    if rubric.transform is not None:  # the artifact as the rubric scores it; the record keeps it as produced
        artifact = rubric.transform.apply(artifact)
    verdicts: dict[str, DimensionVerdict] = {}
    talk = about.conversation
    for dim in rubric.dimensions:
        if dim.check is not None and dim.per_turn and talk is not None:
            score, reason, fixes = check_turns(dim, talk, rubric.transform, context)
            verdicts[dim.id] = DimensionVerdict(score, dim.weight, reason, "check", fixes)
        elif dim.check is not None:
            seen = dim.transform.apply(artifact) if dim.transform is not None else artifact
            result = dim.check.run(seen, context)
            verdicts[dim.id] = DimensionVerdict(result.score, dim.weight, noted(seen, result.reason), "check",
                                                tuple(result.fixes))
    judged = [d.id for d in rubric.judged_dimensions]
    decided = _decided_by_checks(verdicts, rubric, threshold)
    if judged and not always_judge and (decided == "pass" or (decided == "fail" and not revision_follows)):
        why = (f"not judged: the checks already decide the verdict ({decided})"
               + ("" if decided == "pass" else " and no revision follows"))
        for dim in rubric.judged_dimensions:
            verdicts[dim.id] = DimensionVerdict(None, dim.weight, why, "skipped")
        judged = []
    feedback_parts: list[str] = []
    judge_fixes: list[str] = []
    spend, why_unknown, reported, reasoning, cascade = Spend(), None, None, None, None
    agreement: dict[str, Any] | None = None
    sample_overalls: list[float] = []
    whole = [d for d in rubric.judged_dimensions if d.id in judged and not (d.per_turn and talk is not None)]
    if len(whole) < len(judged):  # a conversation's per_turn dimensions: the judge asked once per reply
        by_turn, judge_fixes = _judge_turns(judge, about, rubric, [d for d in rubric.judged_dimensions
                                                                   if d.id in judged and d.per_turn],
                                            samples, threshold, spend)
        verdicts.update(by_turn)
        judged = [d.id for d in whole]
        unscored = [name for name, verdict in by_turn.items() if verdict.score is None]
        if unscored:
            why_unknown = "not scored (indeterminate): the judge could not score " + ", ".join(unscored)
    if judged:
        try:
            asked = _judge_request(about, rubric, judged, artifact, threshold=threshold, verdicts=verdicts)
            answers = _sample_judge(judge, asked, samples)
        except ModelUnavailable as exc:
            why_unknown = f"not scored (indeterminate): {exc}"
            answers = []
            spend.merge(getattr(exc, "spend", None) or Spend())  # a judge ensemble's judges that did answer
        if not answers:
            for dim in whole:
                verdicts[dim.id] = DimensionVerdict(None, dim.weight, why_unknown or "not scored", "none")
        else:
            for answer in answers:
                spend.merge(answer.spend)
            first = answers[0].data or {}
            reported = first.get("overallScore")
            reasoning = str((first.get("metadata") or {}).get("reasoning") or "")[:MAX_ANSWER_TEXT] or None
            cascade = (first.get("metadata") or {}).get(CASCADE_KEY)  # which judge of a cascade decided
            feedback_parts.append(str(first.get("feedback", "")).strip())
            judge_fixes += [str(f) for a in answers for f in (a.data or {}).get("suggestedFixes", [])]
            datas = [a.data or {} for a in answers]
            ensemble = judges_of(first) is not None
            if ensemble:  # several judges: each dimension their aggregate (harness.evaluation.ensemble)
                combined = {dim.id: combine(dim, datas, threshold) for dim in whole}
                for dim in whole:
                    verdicts[dim.id] = _of_judges(dim, combined[dim.id])
                agreement = item_agreement(datas, combined)
            else:
                for dim in whole:
                    verdicts[dim.id] = _combine_samples(dim, datas)
            if len(answers) > 1:
                checked = sum(v.weight * v.score for name, v in verdicts.items()
                              if v.score is not None and name not in {d.id for d in whole})
                for data in datas:
                    given = (sample_scores(whole, data, threshold) if ensemble else
                             {d.id: None if data["dimensionScores"][d.id].get("indeterminate")
                              else d.score_of(data["dimensionScores"][d.id]) for d in whole})
                    if all(score is not None for score in given.values()):
                        sample_overalls.append(round(checked + sum(
                            d.weight * given[d.id] for d in whole), SCORE_DECIMALS))
            if any(v.score is None for v in verdicts.values()) and why_unknown is None:
                why_unknown = "not scored (indeterminate): the judge could not score " + ", ".join(
                    k for k, v in verdicts.items() if v.score is None)
    ordered = {d.id: verdicts[d.id] for d in rubric.dimensions}
    fixes = _unique([f for v in ordered.values() for f in v.fixes] + judge_fixes)
    evaluation = Evaluation(rubric=rubric, threshold=threshold, dimensions=ordered, feedback="",
                            suggested_fixes=fixes, spend=spend, indeterminate_reason=why_unknown,
                            judge_reported_score=reported, samples=sample_overalls, reasoning=reasoning,
                            items_evaluated=count_items(artifact, rubric.items), judge_agreement=agreement,
                            cascade=cascade)
    summary = _summary(evaluation)
    feedback = " ".join(p for p in [summary, *feedback_parts] if p)
    return Evaluation(**{**evaluation.__dict__, "feedback": feedback})


def _decided_by_checks(verdicts: dict[str, DimensionVerdict], rubric: Rubric, threshold: float) -> str | None:
    """"pass" when even a judge's zeros keep the score at the threshold (and no judged dimension has a gate),
    "fail" when even its ones leave it below or a check failed its gate, None when the judge decides."""
    checked = sum(v.weight * v.score for v in verdicts.values() if v.score is not None)
    open_dims = [d for d in rubric.dimensions if d.id not in verdicts or verdicts[d.id].score is None]
    open_weight = sum(d.weight for d in open_dims)
    if any(d.min_score is not None and (v := verdicts.get(d.id)) is not None and v.score is not None
           and v.score < d.min_score - 1e-9 for d in rubric.dimensions):
        return "fail"  # a check below its min_score: no judge's answer can pass it
    if round(checked, SCORE_DECIMALS) >= threshold and not any(d.min_score is not None for d in open_dims):
        return "pass"
    if round(checked + open_weight, SCORE_DECIMALS) < threshold:
        return "fail"
    return None


def _combine_samples(dim: Dimension, answers: list[dict[str, Any]]) -> DimensionVerdict:
    """The mean of the samples that scored the dimension; indeterminate when none did."""
    given = [a["dimensionScores"][dim.id] for a in answers]
    scored = [g for g in given if not g.get("indeterminate")]
    if not scored:
        return DimensionVerdict(None, dim.weight, str(given[0]["reason"]), "none")
    scores = [dim.score_of(g) for g in scored]
    mean = sum(scores) / len(scores)
    reason = str(scored[0]["reason"])
    if len(given) > 1:
        reason = f"{reason} [samples: {', '.join(f'{x:.2f}' for x in scores)}]"
    return DimensionVerdict(round(mean, SCORE_DECIMALS), dim.weight, reason, "judge",
                            sample_scores=tuple(scores) if len(given) > 1 else (),
                            answer=dim.raw_answer(scored[0]) if len(scored) == 1 else {})


def _of_judges(dim: Dimension, combined: Combined) -> DimensionVerdict:
    """A dimension a judge ensemble scored: the judges' scores stand where a single judge's samples would (a
    review's confidence is then the share of judges agreeing on its verdict)."""
    return DimensionVerdict(combined.score, dim.weight, combined.reason, "judge" if combined.score is not None
                            else "none", sample_scores=combined.scores if len(combined.scores) > 1 else (),
                            answer=combined.answer, judges=combined.judges)


def _judge_request(about: Subject, rubric: Rubric, judged: list[str], artifact: str, turn: int | None = None, *,
                   threshold: float | None = None, verdicts: dict[str, DimensionVerdict] | None = None) -> JudgeRequest:
    """What the judge is asked about ``artifact``: on a conversation the transcript, or the reply to ``turn``
    (with that turn's reference as the expected answer); with ``verdicts``, what the rest of the rubric gave."""
    talk = about.conversation
    expected = about.expected if turn is None or talk is None else talk.expected_at(turn)
    settled = None if verdicts is None else sum(v.weight * v.score for v in verdicts.values() if v.score is not None)
    return JudgeRequest(agent=about.agent, case=about.case, attempt=about.attempt, inputs=about.inputs,
                        expected=expected, artifact=artifact, rubric=rubric, dimensions=tuple(judged),
                        schema=judge_schema(rubric, judged), conversation=talk, turn=turn, threshold=threshold,
                        settled=settled)


def _judge_turns(judge: Runner | None, about: Subject, rubric: Rubric, dims: list[Dimension], samples: int,
                 threshold: float, spend: Spend) -> tuple[dict[str, DimensionVerdict], list[str]]:
    """The ``per_turn`` judged dimensions: the judge asked about each reply (``samples`` times), given the
    conversation up to it; each dimension's reply scores combined by its reducer. Adds the calls to ``spend``."""
    talk = about.conversation
    assert talk is not None
    scored: dict[str, list[tuple[float | None, str]]] = {dim.id: [] for dim in dims}
    fixes: list[str] = []
    for turn, reply in enumerate(talk.replies, 1):
        seen = rubric.transform.apply(reply) if rubric.transform is not None else reply
        try:
            answers = _sample_judge(judge, _judge_request(about, rubric, [d.id for d in dims], seen, turn), samples)
        except ModelUnavailable as exc:  # no judge: the dimensions stay unscored, no later turn is asked
            spend.merge(getattr(exc, "spend", None) or Spend())
            for dim in dims:
                scored[dim.id].append((None, f"not scored (indeterminate): {exc}"))
            break
        datas = [answer.data or {} for answer in answers]
        for answer in answers:
            spend.merge(answer.spend)
        for dim in dims:
            verdict = (_of_judges(dim, combine(dim, datas, threshold)) if judges_of(datas[0]) is not None
                       else _combine_samples(dim, datas))
            scored[dim.id].append((verdict.score, verdict.reason))
        fixes += [f"turn {turn}: {fix}" for data in datas for fix in data.get("suggestedFixes", [])]
    verdicts = {}
    for dim in dims:
        assert dim.per_turn is not None
        score, reason = reduce_turns(dim.per_turn, scored[dim.id])
        verdicts[dim.id] = DimensionVerdict(None if score is None else round(score, SCORE_DECIMALS), dim.weight,
                                            reason, "judge" if score is not None else "none")
    return verdicts, fixes


def _sample_judge(judge: Runner | None, request: JudgeRequest, samples: int) -> list[RunnerOutput]:
    if samples <= 1:
        return [_ask_judge(judge, request)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=samples, thread_name_prefix="harness-judge") as pool:
        # each with this thread's context: the samples' model calls stay tied to the item
        futures = [pool.submit(contextvars.copy_context().run, _ask_judge, judge,
                               dataclasses.replace(request, sample=index)) for index in range(samples)]
        return [f.result() for f in futures]


def _ask_judge(judge: Runner | None, request: JudgeRequest) -> RunnerOutput:
    """Ask the judge, whatever its kind, and check its answer against the request's schema, unless the judge
    checked it against that very schema as it came (an LLM judge's answer: a second pass costs about 0.2 ms)."""
    if judge is None:
        raise ModelUnavailable("no evaluator is configured for the judged dimensions " + ", ".join(request.dimensions))
    answer = judge.run(request)
    checked = answer.checked_against is request.schema and answer.data is not None
    errors = [] if checked else validation_errors(answer.data, request.schema)
    if errors:
        raise ValidationFailed(f"the evaluator's answer does not match EvaluatorOutput: "
                               f"{'; '.join(errors[:3])} (fix: make the evaluator return overallScore, passed, "
                               "feedback, suggestedFixes and dimensionScores with a score from 0 to 1 and a reason "
                               f"for each of {', '.join(request.dimensions)})", errors, json.dumps(answer.data)[:2000],
                               spend=answer.spend)
    return answer


def _summary(evaluation: Evaluation) -> str:
    low, high = evaluation.bounds
    verdict = evaluation.passed
    if verdict is None:
        return (f"{evaluation.indeterminate_reason}. Scored dimensions give {low:.2f}..{high:.2f} "
                f"against threshold {evaluation.threshold:.2f}.")
    weakest = sorted(((d.score, name) for name, d in evaluation.dimensions.items() if d.score is not None))[:2]
    weak = ", ".join(f"{name} {score:.2f}" for score, name in weakest if score < 1.0)
    score = f"{low:.2f}" if low == high else f"{low:.2f}..{high:.2f}"
    word = "meets" if verdict else "below"
    text = f"Overall {score} {word} threshold {evaluation.threshold:.2f}."
    if evaluation.failed_gates:
        text += f" Below min_score: {', '.join(evaluation.failed_gates)}."
    elif not verdict and weak:
        text += f" Weakest: {weak}."
    return text


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in items if not (i in seen or seen.add(i))]
