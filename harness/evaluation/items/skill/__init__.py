"""The skill kind: ``*.skill.yaml`` files (the skill document's SkillDescriptor), each case or dataset row an item.

One item is one attempt of the skill on the case's input, from the shared steps (recorded like every item,
under ``runs/{cycle}/{skill_id}``):

1. the input is validated against ``input_schema``: a bad input ends the attempt before anything runs
   (``validation_failed``, exit code 65: the data is wrong) and no model is called;
2. the skill runs: ``LLM_JSON_GENERATION`` generates (:mod:`.generation`, its GenerationResult written),
   ``template_type: null`` calls its handler (:mod:`.handlers`), ``LLM_REVIEW`` makes the asset (its handler's
   output, else the input) and reviews it (:mod:`.review`, its ReviewResult written);
3. the output is validated against ``output_schema`` and must hold each of ``produces_artifacts``: else
   ``validation_failed``, exit code 84;
4. the output is scored: a generation's or a handler's by its schema check and the case's ``checks:`` (passing at
   ``policy.threshold``, default every check), a review by its rubric (its verdict is the item's).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base import jsonschemas, slots
from harness.base.errors import ExitCode, HarnessConfigError, ValidationFailed
from harness.base.models import DEFAULT_THRESHOLD, Case, Dimension, ModelSettings, Rubric
from harness.base.requests import Subject
from harness.checks import MISSING, CheckContext, JsonSchemaCheck, check_slots, value_at
from harness.evaluation.items.kinds import ItemContext, ItemKind, ItemSpec, item_kind
from harness.evaluation.items.skill.generation import generate
from harness.evaluation.items.skill.handlers import call_handler
from harness.evaluation.items.skill.review import ReviewJudge, review_problems, review_shaper
from harness.evaluation.runners import RunnerOutput
from harness.evaluation.steps import Attempt, LoopResult
from harness.loading.per_case import with_additions
from harness.loading.skills import SKILL_SUFFIXES, Skill, load_skill


class InputRejected(ValidationFailed):
    """The case's input does not match the skill's ``input_schema``: the skill never ran."""

    exit_code = ExitCode.DATA_ERROR


@dataclass(frozen=True)
class SkillWork:
    """What one skill item runs: the skill, the case, and the rubric its output is scored by."""

    skill: Skill
    case: Case
    rubric: Rubric


@item_kind
class SkillKind(ItemKind):
    name = "skill"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name.endswith(SKILL_SUFFIXES)

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        skill = load_skill(path, prompts_dir=context.prompts_dir, rubrics_dir=context.rubrics_dir,
                           import_root=context.import_root, input_roots=context.input_roots,
                           check_kinds=context.check_kinds(), data_modules=context.data_modules)
        if skill.review is not None:
            base = context.rubric(skill.review.rubric_path)
            names = tuple(filter(None, (base.name, base.rubric_id)))
            threshold = base.effective_threshold(DEFAULT_THRESHOLD)
        else:
            base, names, threshold = skill_rubric(skill), (skill_rubric_name(skill),), skill.policy.threshold
        models = tuple(model.qualified for model in skill_models(skill, context))
        for case in skill.cases:
            rubric = with_additions(base, case) if case.checks else base
            _check_slots(case, rubric)
            yield ItemSpec(name=case.id, label=f"{skill.skill_id}@{skill.version}[{case.id}] ({skill.kind})",
                           payload=SkillWork(skill, case, rubric), line=case.line, rubrics=names,
                           agent=skill.skill_id, case=case.id, threshold=threshold, models=models)

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> LoopResult:
        work: SkillWork = spec.payload
        run = context.item_run(nodeid, spec, work.rubric)
        skill, case = work.skill, work.case
        run.start(1, operator_type=skill.kind, version=skill.version, inputs=case.inputs,
                  goal=case.description or skill.description)
        with run.attempt() as attempt:
            skill_attempt(work, attempt, context)
            attempt.decide()
        return run.finish()


def skill_attempt(work: SkillWork, attempt: Attempt, context: ItemContext) -> Any:
    """One attempt of the skill on its case's input (steps 1-4 above, up to the verdict, which the caller decides):
    the output returned, a ReviewResult for a review (a construct's phase run by a skill writes it where the phase
    produces)."""
    skill, case = work.skill, work.case
    problems = jsonschemas.errors(case.inputs, skill.input_schema, formats=True)
    if problems:
        raise InputRejected(f"the input does not match {skill.skill_id}'s input_schema: "
                            f"{'; '.join(problems[:3])}; the skill did not run", problems)
    checks = CheckContext(inputs=case.inputs, today=case.today or dt.datetime.now(dt.timezone.utc).date(),
                          expected=case.expected)
    about = Subject(skill.skill_id, case.id, attempt.number, case.inputs, case.expected)
    if skill.review is not None:
        return _review(work, attempt, context, checks, about)
    if skill.generation is not None:
        output = generate(skill, case.inputs, attempt, context.model_client(skill.generation.model))
        attempt.keep(_json_text(skill, output), role="generator")
    else:
        output = _handler_output(skill, case, attempt, context, as_json=True)
    _check_output(skill, output, "output")
    attempt.evaluate(context=checks, about=about)
    return output


def skill_rubric_name(skill: Skill) -> str:
    return f"skill:{skill.skill_id}"


def skill_rubric(skill: Skill) -> Rubric:
    """What a generation's or a handler's output is scored by before a case adds its checks: its output_schema."""
    assert skill.output_schema is not None
    schema_check = JsonSchemaCheck(skill.output_schema, source="text",
                                   validator=jsonschemas.validator_for(skill.output_schema, formats=True))
    dimension = Dimension(id="output_schema", weight=1.0, description="the output matches the skill's output_schema",
                          check=schema_check)
    return Rubric(name=skill_rubric_name(skill), path=skill.path, title=skill.title, version=skill.version,
                  description=skill.description, threshold=skill.policy.threshold, dimensions=(dimension,))


def _json_text(skill: Skill, output: Any) -> str:
    """An output as the attempt's artifact: its JSON (what the schema check and the case's checks read)."""
    try:
        return json.dumps(output, indent=2, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        problem = f"(root): {type(output).__name__} is not JSON ({exc})"
        raise ValidationFailed(f"the output of {skill.skill_id} is not JSON: {problem}",
                               [problem]) from None


def skill_models(skill: Skill, context: ItemContext) -> list[ModelSettings]:
    """The models a skill calls: its generation's, or its review's (``--harness-judge-model`` applied)."""
    if skill.generation is not None:
        return [skill.generation.model]
    if skill.review is not None:
        return [_evaluation_model(skill, context)]
    return []


def _evaluation_model(skill: Skill, context: ItemContext) -> ModelSettings:
    """The review's model: ``evaluation_model``, unless ``--harness-judge-model`` puts every judge on another."""
    assert skill.review is not None
    settings = skill.review.evaluation_model
    return dataclasses.replace(settings, model=context.judge_model) if context.judge_model else settings


def _check_slots(case: Case, rubric: Rubric) -> None:
    """Every slot a case's checks fill (``{expected}``, ``{inputs.title}``) can be filled from the case."""
    for dim in rubric.dimensions:
        missing = slots.missing_case_slots(list(check_slots(dim.check)), case.inputs, case.expected)
        if missing:
            raise HarnessConfigError(case.path, f"case {case.id}", f"the check {dim.id} uses {{{missing[0]}}}, which "
                                     "this case cannot fill", "give the case `expected:`" if missing[0] == "expected"
                                     else f"give the case an input {missing[0].removeprefix('inputs.')!r}")


def _handler_output(skill: Skill, case: Case, attempt: Attempt, context: ItemContext, *, as_json: bool) -> Any:
    """The handler's output on the case's input, kept as the attempt's artifact (its commands recorded): as JSON,
    or, for an asset to review, text as it is."""
    made = call_handler(skill, dict(case.inputs), project=context.import_root, work_dir=context.work_dir,
                        unconfined=context.unconfined_runners)
    attempt.outputs.append(RunnerOutput(commands=made.commands))
    text = made.output if isinstance(made.output, str) and not as_json else _json_text(skill, made.output)
    attempt.keep(text, role="handler")
    return made.output


def _check_output(skill: Skill, output: Any, what: str) -> None:
    """The output against ``output_schema`` (when it has one) and ``produces_artifacts``: ValidationFailed (84)."""
    if skill.output_schema is not None:
        problems = jsonschemas.errors(output, skill.output_schema, formats=True)
        if problems:
            raise ValidationFailed(f"the {what} does not match {skill.skill_id}'s output_schema: "
                                   f"{'; '.join(problems[:3])}", problems)
    for artifact in skill.produces_artifacts:
        value = value_at(output, artifact.path)
        if value is MISSING or value in (None, "", [], {}):
            where = ".".join(artifact.path) or "$"
            problem = f"produces_artifacts.{artifact.name}: the {what} has nothing at {where}"
            raise ValidationFailed(problem, [problem])


def _review(work: SkillWork, attempt: Attempt, context: ItemContext, checks: CheckContext,
            about: Subject) -> dict[str, Any]:
    """The asset (the handler's output, else the input) reviewed against the review rubric; its ReviewResult
    recorded, then checked against the skill's output_schema and produces_artifacts."""
    skill, case = work.skill, work.case
    if skill.implementation is not None:
        _handler_output(skill, case, attempt, context, as_json=False)
    else:
        attempt.keep(slots.inputs_text(case.inputs), role="input")
    settings = _evaluation_model(skill, context)
    client = context.model_client(settings)
    judge = ReviewJudge(client)
    kept: list[dict[str, Any]] = []
    attempt.evaluate(judge=judge, context=checks, about=about, samples=context.judge_samples, revision_follows=True,
                     shape_review=review_shaper(skill, work.rubric, judge, client.model, kept))
    _check_output(skill, kept[-1], "ReviewResult")
    stated = [float(answer["confidence"]) for sample in judge.answers.values() for answer in sample.values()
              if isinstance(answer, dict) and "confidence" in answer]
    # the execution result's confidence: the judge's own, over its criteria and samples (none: checks only)
    attempt.run.confidence = round(sum(stated) / len(stated), 6) if stated else None
    return kept[-1]


__all__ = ["InputRejected", "SkillKind", "SkillWork", "review_problems", "skill_attempt", "skill_rubric"]
