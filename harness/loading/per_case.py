"""A case's own rubric, and the collection check that everything a case feeds can be fed.

A case may add judged dimensions (``criteria:``) and checks (``checks:``) to its agent's rubric, and the rubric's
text may hold case slots (``{expected}``, ``{inputs.criterion}``). :func:`rubric_for_case` gives the rubric as
that case is scored by: the rubric itself when the case changes nothing (most cases, shared by all), else a copy
with the additions weighed in and the slots filled. :class:`CaseFit` checks, once per case at collection, that
every slot the rubric's checks, the agent's templates and its verdict pattern use can be filled from the case:
a case that cannot is one error naming the file, the case and the slot, before any model is called.
"""

from __future__ import annotations

from pathlib import Path

from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.models import AgentConfig, Case, Dimension, Rubric
from harness.checks.base import check_slots
from harness.loading.conversations import conversation_problem, user_text
from harness.loading.judge_programs import JudgeProgram, case_slots
from harness.loading.library import in_library

# The slots a template fills without the case: the artifact (a conversation's transcript), the judged dimensions,
# a reviser's feedback.
_FILLED_BY_THE_HARNESS = frozenset({"output", "transcript", "criteria", "rubric", "steps", "feedback"})


def rubric_text_slots(rubric: Rubric) -> list[str]:
    """The case slots used in the rubric's own text (its description, its dimensions' texts)."""
    texts = [rubric.description or ""]
    for dim in rubric.dimensions:
        texts.extend([dim.description, dim.name or "", *dim.scoring.values(), *dim.steps, *dim.choice_text.values()])
    return slots.nested_slots(texts)


class CaseFit:
    """What an agent's cases must be able to fill, worked out once per agent and checked for each case."""

    def __init__(self, agent: AgentConfig, rubric: Rubric, program: JudgeProgram | None = None):
        self.agent = agent
        self.rubric = rubric
        # an evaluator that is a judge program: the case slots its steps use (its inputs, {expected})
        self.program_slots = {} if program is None else {
            name: f"{_judge_of(program.path, f'the judge program {program.name}')} (step {step})"
            for name, step in case_slots(program).items()}
        self.text_slots = rubric_text_slots(rubric)
        self.check_slots = {name: dim.id for dim in rubric.dimensions if dim.check is not None
                            for name in check_slots(dim.check)}
        self.template_slots = {(role, name): template.slot_for(name) for role, template in agent.templates.items()
                               for name in slots.slots_in(template.text)
                               if template.slot_for(name) not in _FILLED_BY_THE_HARNESS}

    def rubric_for(self, case: Case) -> Rubric:
        """The rubric ``case`` is scored by, after checking that the case can fill every slot."""
        rubric = self.rubric
        if case.criteria or case.checks:
            rubric = with_additions(rubric, case)
            if case.criteria and self.agent.evaluator is None:
                raise _case_error(case, "adds criteria for the judge, but the agent has no evaluator",
                                  f"give agent {self.agent.name} an `evaluator:`, or make them `checks:`")
        elif not self.rubric.dimensions:
            raise _case_error(case, f"rubric {rubric.name} has no dimensions of its own and the case adds none",
                              "add `criteria:` or `checks:` to the case, or dimensions to the rubric")
        text_slots = self.text_slots if rubric is self.rubric else rubric_text_slots(rubric)
        self._check_fits(case, rubric, text_slots)
        if text_slots:
            rubric = _filled(rubric, case)
        return rubric

    def _check_fits(self, case: Case, rubric: Rubric, text_slots: list[str]) -> None:
        wanted: list[tuple[str, str]] = [(name, f"rubric {rubric.name}'s text") for name in text_slots]
        checks = self.check_slots if rubric is self.rubric else {
            name: dim.id for dim in rubric.dimensions if dim.check is not None for name in check_slots(dim.check)}
        wanted += [(name, f"the check of dimension {dim_id}") for name, dim_id in checks.items()]
        wanted += [(ours, _judge_of(path := self.agent.templates[role].path, f"the {role} template {path.name}")
                    + (f" (slot {{{name}}})" if ours != name else ""))
                   for (role, name), ours in self.template_slots.items()]
        wanted += list(self.program_slots.items())
        for name, user in wanted:
            if slots.missing_case_slots([name], case.inputs, case.expected):
                raise _case_error(case, f"{user} uses {{{name}}}, which this case cannot fill ({_has(case)})",
                                  _fill_fix(name, mappable=" template " in user))
        verdict = self.agent.judge_style.verdict
        judged = [d.id for d in rubric.judged_dimensions]
        if verdict is not None and judged:
            if verdict.groupindex:
                unread = [d for d in judged if d not in verdict.groupindex]
                if unread:
                    raise _case_error(case, f"the verdict pattern has no group named {unread[0]!r}, a judged "
                                      "dimension", f"add (?P<{unread[0]}>...) to the pattern, one group per "
                                      f"judged dimension ({', '.join(judged)})")
            elif len(judged) > 1:
                raise _case_error(case, f"the verdict pattern's one group cannot give {len(judged)} judged "
                                  f"dimensions ({', '.join(judged)})", "name a group per dimension: (?P<id>...)")
        evaluator = self.agent.evaluator
        if (self.agent.judge_style.weighted and judged and evaluator is not None
                and not any(d.scale is not None for d in rubric.judged_dimensions)):
            raise HarnessConfigError(evaluator.file, f"{evaluator.field}.score", "`weighted` weighs a rating on a "
                                     f"scale, and no judged dimension of rubric {rubric.name} ({', '.join(judged)}) "
                                     "has one", "give the dimension a `scale:` (e.g. `scale: [1, 5]`), or remove "
                                     "`score: weighted`")
        problem = conversation_problem(case, rubric, self.agent) if case.turns else None
        if problem is not None:
            raise _case_error(case, *problem)


def with_additions(rubric: Rubric, case: Case) -> Rubric:
    """The rubric plus the case's own dimensions. The rubric's dimensions together weigh 1 (as the rubric
    splits it), each added dimension its own weight; then every weight is divided by the total."""
    added = (*case.criteria, *case.checks)
    taken = {d.id for d in rubric.dimensions}
    for dim in added:
        if dim.id in taken:
            raise _case_error(case, f"adds a dimension {dim.id!r}, which its rubric {rubric.name} already has "
                              "(or the case adds twice)", "give the case's criterion or check its own id")
        taken.add(dim.id)
    total = (1.0 if rubric.dimensions else 0.0) + sum(d.weight for d in added)
    dimensions = tuple(d.model_copy(update={"weight": d.weight / total}) for d in (*rubric.dimensions, *added))
    return rubric.model_copy(update={"dimensions": dimensions, "variant": case.id})


def _filled(rubric: Rubric, case: Case) -> Rubric:
    def fill(text: str) -> str:
        return slots.render_text(text, lambda name: slots.case_value(name, case.inputs, case.expected,
                                                                     input_text=user_text(case)))

    def filled_dimension(dim: Dimension) -> Dimension:
        return dim.model_copy(update={
            "description": fill(dim.description), "name": fill(dim.name) if dim.name else dim.name,
            "scoring": {level: fill(text) for level, text in dim.scoring.items()},
            "steps": tuple(fill(step) for step in dim.steps),
            "choice_text": {label: fill(text) for label, text in dim.choice_text.items()}})

    return rubric.model_copy(update={
        "description": fill(rubric.description) if rubric.description else rubric.description,
        "dimensions": tuple(filled_dimension(d) for d in rubric.dimensions), "variant": case.id})


def _has(case: Case) -> str:
    inputs = ", ".join(case.inputs) or "none"
    return f"inputs: {inputs}; " + ("an expected answer" if case.expected is not None else "no expected answer")


def _fill_fix(name: str, *, mappable: bool) -> str:
    if name == "expected":
        return "give the case `expected:` (a dataset: `expected: \"{column}\"`)"
    fix = f"give the case an input {name.removeprefix('inputs.').split('.')[0]!r}"
    return fix + ", or map the template's slot to another (`slots:`)" if mappable else fix


def _judge_of(path: Path, otherwise: str) -> str:
    """Who uses a slot, in words: a library grader's judge by the grader's name (docs/graders.md), else
    ``otherwise``."""
    return f"grader graders/{path.name.split('.')[0]}'s judge ({path.name})" if in_library(path) else otherwise


def _case_error(case: Case, problem: str, fix: str) -> HarnessConfigError:
    return HarnessConfigError(case.path, f"case {case.id}", problem, fix)

