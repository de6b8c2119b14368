"""Judge programs (``*.steps.yaml``): a judge of several model calls, named by an evaluator ``{steps: FILE}``.

Each step is one model call whose prompt is a template with slots (the case's ``{input}``, ``{output}``,
``{expected}``, ``{criteria}``, and every earlier step's answer by the step's name) and whose answer is typed:
``text``, ``list`` (of strings), ``{label: [...]}``, ``{number: [low, high]}`` or ``{rating: [low, high]}``. A step
may run once per element of an earlier list (``for_each:``), choose the step that comes next by its label
(``next:``), give a score (``scores:`` per label, a rating, a number), or be made once per rubric version and reused
(``once: true``, G-Eval's evaluation steps). ``score:`` says which dimensions the program scores and how: the step
it ends at, or a named step, its per-element verdicts combined by a registered reducer (harness.base.reducers).
Every mistake is one ``HarnessConfigError`` naming the file, the field and the fix: an unknown step, a loop, a
``for_each`` over a step that is no list, an unknown reducer. docs/judge-programs.md says what each field does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.base.fields import Fields
from harness.base.yamlfile import load_yaml
from harness.loading.judge_programs.model import (
    DEFAULT_SYSTEM,
    DOCS,
    HARNESS_SLOTS,
    PROGRAM_SUFFIXES,
    SLOT_NAME,
    STEP_KEYS,
    TOP_KEYS,
    JudgeProgram,
    ProgramStep,
    ScoreRule,
    StepAnswer,
    case_slots,
)
from harness.loading.judge_programs.score import score_rules
from harness.loading.judge_programs.steps import check_flow, read_step

__all__ = ["PROGRAM_SUFFIXES", "JudgeProgram", "ProgramStep", "ScoreRule", "StepAnswer", "case_slots",
           "load_judge_program"]


def load_judge_program(path: Path, *, roots: Sequence[Path] = ()) -> JudgeProgram:
    """A judge program file, every rule checked; each mistake one ``HarnessConfigError`` (file, field, fix)."""
    top = Fields.of(path, roots=roots).section(load_yaml(path), known=TOP_KEYS, required=("steps",),
                                               example=f"a judge program ({DOCS})")
    listed = top.raw["steps"]
    if not isinstance(listed, list) or not listed:
        raise top.fields.expected("steps", "a list with at least one step", listed,
                                  "add `- {name: verdict, prompt: '...', answer: {label: [yes, no]}}`")
    names: list[str] = []
    for index, item in enumerate(listed):
        place = top.fields.nested(f"steps[{index}]").section(item, known=STEP_KEYS, required=("name", "prompt"))
        name = place.fields.string(place.raw["name"], "name", what="a step name")
        if not SLOT_NAME.fullmatch(name):
            raise place.error("name", f"step name {name!r} cannot be a slot",
                              "use letters, digits and '_', starting with a letter (the prompts write {name})")
        if name in HARNESS_SLOTS:
            raise place.error("name", f"{name!r} is a slot the harness fills", "give the step another name")
        if name in names:
            raise place.error("name", f"step {name!r} is listed twice", "give each step its own name")
        names.append(name)
    steps = tuple(read_step(top.fields.nested(f"steps[{i}]").section(item, known=STEP_KEYS), i, names, listed)
                  for i, item in enumerate(listed))
    program = JudgeProgram(
        path=path, name=top.fields.identifier(top.raw.get("judge", _stem(path)), "judge", "judge name"),
        version=top.version("version") if "version" in top else "1.0.0", description=top.text("description"),
        system=top.fields.string(top.raw["system"], "system") if "system" in top else DEFAULT_SYSTEM,
        steps=steps, scores=())
    check_flow(top, program)
    return program.model_copy(update={"scores": score_rules(top, program)})


def _stem(path: Path) -> str:
    name = path.name
    return next((name[:-len(s)] for s in PROGRAM_SUFFIXES if name.endswith(s)), path.stem)
