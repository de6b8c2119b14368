"""What a judge program file is, read: its steps, each step's typed answer and where it leads, its score rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.base import slots
from harness.base.fields import is_number
from harness.base.models import Frozen
from harness.loading.pipelines import StageOutput

PROGRAM_SUFFIXES = (".steps.yaml", ".steps.yml")
SLOT_NAME = re.compile(r"[A-Za-z_]\w*")  # a step's name and a for_each element's: slots of one word
TOP_KEYS = ("judge", "version", "description", "system", "steps", "score")
STEP_KEYS = ("name", "description", "prompt", "answer", "for_each", "as", "next", "end", "scores", "once", "verdict",
             "weighted")
SCORE_KEYS = ("dimension", "dimensions", "from", "reduce", "empty")
# the slots the harness fills; a step may not take one of their names
HARNESS_SLOTS = ("input", "inputs", "output", "expected", "criteria", "rubric", "steps", "transcript", "index")
RUBRIC_SLOTS = ("criteria", "rubric", "steps")  # all a step made once per rubric may read
JUDGE_SLOTS = ("output", "transcript", *RUBRIC_SLOTS)  # the harness's slots that no case fills
MAX_ELEMENTS = 100  # a list step's answer holds at most this many elements (each a call of a for_each step)
MAX_REASON = 4000
DEFAULT_SYSTEM = ("You are a careful, impartial evaluator. Do exactly what each instruction asks, and answer in "
                  "the form it asks for.")
ANSWER_EXAMPLE = ("`answer: text`, `answer: list`, `answer: {label: [yes, no]}`, `answer: {rating: [1, 5]}` or "
                  "`answer: {number: [0, 1]}`")
DOCS = "docs/judge-programs.md"


class StepAnswer(Frozen):
    """What a step answers: ``text`` (free text), ``list`` (of strings), ``label`` (one of ``labels``), ``number``
    or ``rating`` (a whole number) from ``low`` to ``high``. ``output`` is the JSON it is asked for, the pipeline's
    typed output (None: free text)."""

    kind: str
    labels: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 1.0
    output: StageOutput | None = None

    @property
    def words(self) -> str:
        if self.kind == "label":
            return f"label ({', '.join(self.labels)})"
        if self.kind in ("number", "rating"):
            return f"{self.kind} {self.low:g}..{self.high:g}"
        return self.kind

    def normalized(self, value: Any) -> float | None:
        """A number or rating as a score from 0 to 1 (its place on its range); None for any other answer."""
        if self.kind not in ("number", "rating") or not is_number(value):
            return None
        return (float(value) - self.low) / (self.high - self.low)


class ProgramStep(Frozen):
    name: str
    index: int
    line: int
    prompt: str
    answer: StepAnswer
    description: str | None = None
    for_each: str | None = None  # runs once per element of that step's list
    element: str = "item"  # the slot holding the element (``as:``)
    next: dict[str, str | float] = Field(default_factory=dict)  # by label: the next step's name, or a score
    goto: str | None = None  # ``next: STEP``: the next step whatever the answer
    end: bool = False  # the program ends here (a step without ``next:`` is otherwise followed by the one below it)
    scores: dict[str, float] = Field(default_factory=dict)  # a label's score
    once: bool = False  # made once per rubric version and session, and reused
    # ``verdict: PATTERN``: asked in free text, the answer read from the last match of the pattern's group
    verdict: re.Pattern[str] | None = None
    weighted: bool = False  # with a verdict and a rating: weighted by its token's probabilities (G-Eval)

    @property
    def over_input(self) -> str | None:
        """``for_each: inputs.NAME``: the case input whose elements this step goes over (None: a step's list)."""
        return self.for_each if self.for_each is not None and self.for_each.startswith("inputs.") else None

    @property
    def gives_score(self) -> bool:
        return bool(self.scores) or self.answer.kind in ("number", "rating")

    def score_of(self, value: Any) -> float | None:
        """The score one answer gives: its label's, or a number or rating on its range."""
        if self.answer.kind == "label":
            return self.scores.get(value)
        return self.answer.normalized(value)


class ScoreRule(Frozen):
    """How the program scores: ``dimensions`` (empty: every dimension the judge is asked for), from the step
    ``source`` (None: the step the program ends at), a for_each step's verdicts combined by ``reduce``."""

    field: str
    dimensions: tuple[str, ...] = ()
    source: str | None = None
    reduce: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    empty: float | None = None  # the score of an empty list (None: not scored)


class JudgeProgram(Frozen):
    path: Path
    name: str
    version: str
    description: str | None = None
    system: str = DEFAULT_SYSTEM
    steps: tuple[ProgramStep, ...]
    scores: tuple[ScoreRule, ...]

    def step(self, name: str) -> ProgramStep:
        return next(s for s in self.steps if s.name == name)

    def following(self, step: ProgramStep, value: Any) -> str | float | None:
        """What comes after ``step`` answered ``value``: the next step's name, a score that ends the program, or
        None (the program ends at ``step``)."""
        if step.goto is not None:
            return step.goto
        if isinstance(value, str) and value in step.next:
            return step.next[value]
        if step.end or step.index + 1 == len(self.steps):
            return None
        return self.steps[step.index + 1].name


def labelled(raw: Any) -> Any:
    """Labels as written: YAML reads an unquoted yes or no as true or false, so a label (in a list, a mapping's
    keys, or alone) that YAML made true or false is the label yes or no again."""
    if isinstance(raw, bool):
        return "yes" if raw else "no"
    if isinstance(raw, list):
        return [labelled(item) for item in raw]
    if isinstance(raw, Mapping):
        return {labelled(key): value for key, value in raw.items()}
    return raw


def successors(program: JudgeProgram, step: ProgramStep) -> list[str | float | None]:
    """Where ``step`` may lead: a step's name, a score that ends the program, None (it ends there)."""
    if step.goto is not None:
        return [step.goto]
    after: list[str | float | None] = list(step.next.values())
    if step.answer.kind != "label" or any(label not in step.next for label in step.answer.labels):
        after.append(None if step.end or step.index + 1 == len(program.steps) else program.steps[step.index + 1].name)
    return after


def terminal(program: JudgeProgram) -> list[ProgramStep]:
    """The steps the program can end at (no score given by a ``next:`` in between)."""
    return [step for step in program.steps if None in successors(program, step)]


def case_slots(program: JudgeProgram) -> dict[str, str]:
    """The slots the program's steps take from the case (``{input}``, ``{expected}``, ``{inputs.context}``, the input a
    step goes over), each with the first step that uses it: every case must fill them, checked at collection."""
    names = {step.name for step in program.steps}
    found: dict[str, str] = {}
    for step in program.steps:
        own = (step.element, "index") if step.for_each is not None else ()
        used = [name for name in slots.slots_in(step.prompt)
                if name.partition(".")[0] not in names and name not in own and name not in JUDGE_SLOTS]
        for name in ([step.over_input] if step.over_input else []) + used:
            found.setdefault(name, step.name)
    return found
