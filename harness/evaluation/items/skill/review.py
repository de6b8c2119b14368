"""``LLM_REVIEW``: an asset reviewed against a review rubric on the skill's ``evaluation_model``.

The review runs from the shared steps (``Attempt.evaluate`` with the review rubric): the rubric's checked
criteria are scored by their checks, the others by :class:`ReviewJudge`, which asks the evaluation model for each
criterion's verdict (pass, fail or indeterminate), its reasoning, its confidence and evidence quoted from the
asset. The step's ReviewResult is then shaped by :func:`review_shaper`: each criterion's ``evidence`` and
``confidence`` (the judge's stated confidence with one judge sample; with several, the share of samples that
agree with the verdict; 1.0 for a check, as ``confidence_basis`` says), ``criteria_results`` only with
``include_criteria_details``, and the rubric, model and skill it came from; it is checked against the shipped
contract and the document's rules before it is written (:func:`review_problems`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from harness.base import jsonschemas
from harness.base.errors import ValidationFailed
from harness.base.models import Rubric
from harness.base.requests import JudgeRequest, rubric_as_text
from harness.evaluation.evaluate import MAX_ANSWER_FIXES, MAX_ANSWER_TEXT
from harness.evaluation.runners import RunnerOutput
from harness.llm import ModelClient
from harness.loading.skills import Skill

MAX_EVIDENCE = 10  # quotes per criterion
VERDICTS = ("pass", "fail", "indeterminate")
INSTRUCTIONS = (
    "You review an asset against the criteria of a review rubric. For each criterion listed, answer:\n"
    "- verdict: pass when its pass condition holds, fail when its fail condition does, indeterminate only when "
    "the asset gives no way to tell;\n"
    "- reasoning: why, in a sentence or two;\n"
    "- confidence: from 0 to 1, how sure you are of the verdict;\n"
    "- evidence: short passages quoted word for word from the asset that show it (an empty list when there is "
    "nothing to quote).\n"
    "Then suggested_fixes: what would make each failed criterion pass. Submit with the submit_review tool.")


def answer_schema(criteria: tuple[str, ...]) -> dict[str, Any]:
    """What the evaluation model answers: per criterion a verdict, reasoning, confidence and evidence."""
    one = {"type": "object", "required": ["verdict", "reasoning", "confidence", "evidence"],
           "properties": {"verdict": {"enum": list(VERDICTS)},
                          "reasoning": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_TEXT},
                          "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                          "evidence": {"type": "array", "maxItems": MAX_EVIDENCE,
                                       "items": {"type": "string", "maxLength": MAX_ANSWER_TEXT}}},
           "additionalProperties": False}
    return {"type": "object", "required": ["criteria", "suggested_fixes"],
            "properties": {"criteria": {"type": "object", "required": list(criteria),
                                        "properties": {criterion: one for criterion in criteria},
                                        "additionalProperties": False},
                           "suggested_fixes": {"type": "array", "maxItems": MAX_ANSWER_FIXES,
                                               "items": {"type": "string", "maxLength": MAX_ANSWER_TEXT}}}}


class ReviewJudge:
    """The evaluation model as the judge of a review rubric's criteria, for one attempt: it keeps each judge
    sample's answers (evidence and stated confidence) for the ReviewResult."""

    def __init__(self, client: ModelClient):
        self.client = client
        self.answers: dict[int, dict[str, dict[str, Any]]] = {}  # judge sample -> criterion -> its answer
        self._lock = threading.Lock()

    def run(self, request: JudgeRequest) -> RunnerOutput:
        criteria = tuple(request.dimensions)
        prefix = f"{INSTRUCTIONS}\n\n{rubric_as_text(request.rubric, criteria)}"
        message = (f"Review this asset.\n\n## Inputs\n```json\n{json.dumps(request.inputs, default=str)}\n```\n\n"
                   f"## Asset\n{request.artifact}")
        extra = {"cache_extra": {"sample": request.sample}} if request.sample is not None else {}
        result = self.client.generate_json(system="", prompt=message, schema=answer_schema(criteria),
                                           tool_name="submit_review", cached_system_prefix=prefix, **extra)
        if not result.success:
            raise ValidationFailed(
                f"the evaluation model's review did not match its schema after {result.attempts} "
                f"attempts: {'; '.join(result.validation_errors[:3])} (fix: raise max_tokens or use a model that "
                "follows tool schemas)", list(result.validation_errors), result.raw_response, spend=result.spend)
        answers = (result.data or {})["criteria"]
        with self._lock:
            self.answers[request.sample or 0] = answers
        weights = {dim.id: dim.weight for dim in request.rubric.dimensions}
        scores = {criterion: {"score": int(answer["verdict"] == "pass"), "weight": weights[criterion],
                              "reason": answer["reasoning"],
                              **({"indeterminate": True} if answer["verdict"] == "indeterminate" else {})}
                  for criterion, answer in answers.items()}
        data = {"overallScore": 0.0, "passed": False, "dimensionScores": scores, "feedback": "",
                "suggestedFixes": list((result.data or {})["suggested_fixes"])}
        return RunnerOutput(data=data, spend=result.spend)


def review_shaper(skill: Skill, rubric: Rubric, judge: ReviewJudge, model: str,
                  kept: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The step's ReviewResult as the skill writes it (see the module's docstring); the result is also appended
    to ``kept``. A result that breaks the review contract is never written: that would be the harness's bug."""
    assert skill.review is not None
    checked = {dim.id for dim in rubric.dimensions if dim.check is not None}

    def shape(review: dict[str, Any]) -> dict[str, Any]:
        results = [_criterion(entry, entry["criterion_id"] in checked, judge) for entry in review["criteria_results"]]
        shaped = {key: value for key, value in review.items() if key != "criteria_results"}
        if skill.review.include_criteria_details:
            shaped["criteria_results"] = results
        shaped.update(rubric={"rubric_id": rubric.rubric_id, "version": rubric.version}, evaluation_model=model,
                      skill={"skill_id": skill.skill_id, "version": skill.version})
        problems = review_problems(shaped, rubric)
        if problems:
            raise RuntimeError(f"harness bug: the ReviewResult of {skill.skill_id} breaks the review contract: "
                               f"{'; '.join(problems)}")
        kept.append(shaped)
        return shaped

    return shape


def _criterion(entry: dict[str, Any], by_check: bool, judge: ReviewJudge) -> dict[str, Any]:
    """One criterion's result with its evidence and a confidence that says what it is."""
    if by_check:
        return {**entry, "evidence": [], "confidence": 1.0, "confidence_basis": "check"}
    given = [sample[entry["criterion_id"]] for sample in judge.answers.values() if entry["criterion_id"] in sample]
    if not given:  # nobody judged it (no model): no confidence to state
        return {**entry, "evidence": [], "confidence": 0.0, "confidence_basis": "judge"}
    if len(given) == 1:
        return {**entry, "evidence": list(given[0]["evidence"]), "confidence": float(given[0]["confidence"]),
                "confidence_basis": "judge"}
    agreeing = [answer for answer in given if answer["verdict"] == entry["verdict"]]
    evidence = list(dict.fromkeys(quote for answer in agreeing for quote in answer["evidence"]))[:MAX_EVIDENCE]
    return {**entry, "evidence": evidence, "confidence": round(len(agreeing) / len(given), 6),
            "confidence_basis": "samples"}


def review_problems(review: dict[str, Any], rubric: Rubric) -> list[str]:
    """Every way ``review`` breaks the review contract: the shipped schema, and the document's rules that need the
    rubric (an indeterminate criterion is not also an issue; one ``criteria_results`` entry per criterion; a failed
    review names its issues unless only indeterminate criteria kept it from passing)."""
    problems = jsonschemas.contract_errors("review_result", review)
    names = {dim.id: dim.name or dim.id for dim in rubric.dimensions}
    for criterion in review.get("indeterminate", []):
        if any(issue.startswith(f"{names.get(criterion, criterion)}:") for issue in review.get("issues", [])):
            problems.append(f"indeterminate criterion {criterion} is also an issue")
    results = review.get("criteria_results")
    if results is not None:
        if len(results) != len(rubric.dimensions):
            problems.append(f"criteria_results has {len(results)} entries for {len(rubric.dimensions)} criteria")
        failed = [r["criterion_id"] for r in results if r.get("verdict") == "fail"]
        if review.get("pass") is False and not review.get("issues") and failed:
            problems.append(f"issues is empty though {', '.join(failed)} failed")
    return problems
