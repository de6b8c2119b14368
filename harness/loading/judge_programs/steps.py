"""A judge program's steps read one by one (each answer's type, its for_each, its slots, its next:, its scores), then
the flow they make: a DAG from the first step, with no loop and no step that never runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.base import slots
from harness.base.errors import did_you_mean
from harness.base.fields import Fields, Section, is_number
from harness.loading.judge_programs.model import (
    ANSWER_EXAMPLE,
    HARNESS_SLOTS,
    MAX_ELEMENTS,
    MAX_REASON,
    RUBRIC_SLOTS,
    SLOT_NAME,
    JudgeProgram,
    ProgramStep,
    StepAnswer,
    labelled,
    successors,
)
from harness.loading.pipelines import StageOutput

INPUT_NAME = re.compile(r"inputs(\.\w+)+")


def read_step(step: Section, index: int, names: list[str], listed: list[Any]) -> ProgramStep:
    name = names[index]
    answer = _answer(step, name)
    prompt = step.fields.string(step.raw["prompt"], "prompt", what="the step's prompt (text with slots)")
    problem = slots.filter_problem(prompt)
    if problem:
        raise step.error("prompt", problem, "use one of the filters, or remove the '|'")
    once = step.boolean("once", False)
    for_each, element = _for_each(step, index, names, listed, once)
    _check_slots(step, prompt, index, names, for_each, once, listed)
    flow = _next(step, index, names, answer, for_each)
    scores = _scores(step, answer)
    return ProgramStep(name=name, index=index, line=getattr(step.raw, "line", 0), prompt=prompt, answer=answer,
                       description=step.text("description"), for_each=for_each, element=element, once=once,
                       end=step.boolean("end", False), scores=scores, **flow, **_verdict(step, answer))


def _verdict(step: Section, answer: StepAnswer) -> dict[str, Any]:
    """``verdict: PATTERN``: the answer (a label, number or rating) read from free text, the last match of the
    pattern's group; with ``weighted: true`` a rating weighted by its token's probabilities (G-Eval)."""
    if "verdict" not in step:
        if "weighted" in step:
            raise step.error("weighted", "weighs a rating read from free text, and this step has no verdict:",
                             "add e.g. `verdict: 'Score: (\\d)'`, or remove weighted")
        return {}
    if answer.kind not in ("label", "number", "rating"):
        raise step.error("verdict", f"reads a label, number or rating from free text, and this step answers "
                         f"{answer.words}", "give the step e.g. `answer: {rating: [1, 5]}`, or remove verdict")
    pattern = step.fields.regex(step.raw["verdict"], "verdict")
    if pattern.groups < 1:
        raise step.error("verdict", f"the pattern {pattern.pattern!r} has no group to read the answer from",
                         "put the answer in a group, e.g. 'Score: (\\d)'")
    weighted = step.boolean("weighted", False)
    if weighted and answer.kind != "rating":
        raise step.error("weighted", f"weighs a rating by its token's probabilities, and this step answers "
                         f"{answer.words}", "answer `{rating: [1, 5]}`, or remove weighted")
    return {"verdict": pattern, "weighted": weighted}


def _answer(step: Section, name: str) -> StepAnswer:
    raw = step.raw.get("answer", "text")
    if isinstance(raw, str):
        kind = step.fields.choice(raw, "answer", ("text", "list"), "answer type", fix=f"write {ANSWER_EXAMPLE}")
        if kind == "text":
            return StepAnswer(kind="text")
        schema = {"type": "object", "required": ["answer"], "properties": {
            "reason": {"type": "string", "maxLength": MAX_REASON},
            "answer": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": MAX_ELEMENTS}}}
        return StepAnswer(kind="list", output=StageOutput(json_schema=schema, named=f"{name}: a list of strings"))
    typed = step.section("answer", known=("label", "number", "rating"), example=ANSWER_EXAMPLE)
    if len(typed.raw) != 1:
        raise step.error("answer", "names no answer type, or several", f"write {ANSWER_EXAMPLE}")
    kind = next(iter(typed.raw))
    if kind == "label":
        labels = typed.fields.string_list(labelled(typed.raw["label"]), "label", example="`label: [yes, no, idk]`")
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise typed.error("label", f"{list(labels)} is not two or more different labels",
                              "list each label once, e.g. `label: [yes, no, idk]`")
        answer: dict[str, Any] = {"enum": list(labels)}
        made = StepAnswer(kind="label", labels=labels)
    else:
        bounds = typed.raw[kind]
        whole = kind == "rating"
        fit = (lambda v: isinstance(v, int) and not isinstance(v, bool)) if whole else is_number
        if not isinstance(bounds, list) or len(bounds) != 2 or not all(fit(v) for v in bounds) \
                or not bounds[0] < bounds[1]:
            what = "whole numbers" if whole else "numbers"
            raise typed.fields.expected(kind, f"[low, high], two {what} with low below high", bounds,
                                        f"write e.g. `{kind}: {'[1, 5]' if whole else '[0, 1]'}`")
        answer = {"type": "integer" if whole else "number", "minimum": bounds[0], "maximum": bounds[1]}
        made = StepAnswer(kind=kind, low=float(bounds[0]), high=float(bounds[1]))
    schema = {"type": "object", "required": ["reason", "answer"], "properties": {
        "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON}, "answer": answer}}
    return made.model_copy(update={"output": StageOutput(json_schema=schema, named=f"{name}: {made.words}")})


def _for_each(step: Section, index: int, names: list[str], listed: list[Any],
              once: bool) -> tuple[str | None, str]:
    """``for_each: STEP`` (an earlier step answering a list) or ``for_each: inputs.NAME`` (a case's input: a list, or
    a text as one element), and ``as:`` (the element's slot, default ``item``)."""
    if "for_each" not in step:
        if "as" in step:
            raise step.error("as", "names the element of a for_each step, and this step has no for_each",
                             "add `for_each: STEP`, or remove as")
        return None, "item"
    given = step.raw["for_each"]
    if isinstance(given, str) and given.startswith("inputs."):  # the contexts a RAG case is given, say
        if not INPUT_NAME.fullmatch(given):
            raise step.error("for_each", f"{given!r} is not an input's name", "write e.g. `for_each: inputs.context`")
        source, raw = given, {"answer": "list"}
    else:
        source = _earlier(step, "for_each", index, names)
        raw = listed[names.index(source)]
    kind = raw.get("answer", "text") if isinstance(raw, Mapping) else "text"
    if kind != "list" or (isinstance(raw, Mapping) and "for_each" in raw):
        what = "a list per element" if kind == "list" else (kind if isinstance(kind, str) else
                                                              f"a {next(iter(kind), 'typed')} answer")
        raise step.error("for_each", f"for_each over a non-list step: {source} answers {what}",
                         "name an earlier step with `answer: list` (and no for_each of its own), or a case's input "
                         "(`inputs.NAME`)")
    if once:
        raise step.error("once", "a step made once per rubric runs once, not once per element",
                         "remove once, or for_each")
    element = step.text("as") or "item"
    if not SLOT_NAME.fullmatch(element) or element in names or element in HARNESS_SLOTS:
        raise step.error("as", f"{element!r} cannot name the element (a slot name that no step or harness slot "
                         "has)", "write e.g. `as: statement`")
    return source, element


def _earlier(step: Section, key: str, index: int, names: list[str]) -> str:
    """The name at ``key``, a step listed before this one."""
    raw = step.raw[key]
    if not isinstance(raw, str) or raw not in names:
        raise step.error(key, f"no step {raw!r}{did_you_mean(raw, names)}", f"use one of: {', '.join(names[:index])}"
                         if index else "name a step listed before this one")
    if names.index(raw) >= index:
        raise step.error(key, f"step {raw!r} is not answered before this one", "name a step listed before it")
    return raw


def _check_slots(step: Section, prompt: str, index: int, names: list[str], for_each: str | None, once: bool,
                 listed: list[Any]) -> None:
    """A slot naming a step names an earlier one (``{x}``, its answer; ``{x.reason}``, its reason); ``{index}`` and
    the element are a for_each step's; a step made once reads only the rubric and the other steps made once."""
    for name in slots.slots_in(prompt):
        head, _, rest = name.partition(".")
        if head in names:
            if names.index(head) >= index:
                raise step.error("prompt", f"uses {{{name}}}, but step {head} is not answered before this one",
                                 "a step reads only the answers of the steps listed before it")
            if rest not in ("", "reason"):
                raise step.error("prompt", f"uses {{{name}}}: a step's slots are {{{head}}} (its answer) and "
                                 f"{{{head}.reason}}", f"write {{{head}}} or {{{head}.reason}}")
            earlier = listed[names.index(head)]
            if once and not (isinstance(earlier, Mapping) and earlier.get("once") is True):
                raise step.error("prompt", f"uses {{{name}}}, a case's answer, in a step made once per rubric",
                                 "a step with `once: true` reads only {criteria}, {rubric}, {steps} and other "
                                 "steps made once")
        elif name == "index" and for_each is None:
            raise step.error("prompt", "uses {index}, the element's number in a for_each step, and this step has "
                             "no for_each", "add `for_each: STEP`, or remove the slot")
        elif once and name not in RUBRIC_SLOTS:
            raise step.error("prompt", f"uses {{{name}}} in a step made once per rubric: the same for every case",
                             "a step with `once: true` reads only {criteria}, {rubric}, {steps} and other steps "
                             "made once; remove once, or the slot")


def _next(step: Section, index: int, names: list[str], answer: StepAnswer,
          for_each: str | None) -> dict[str, Any]:
    """``next: STEP`` (whatever the answer) or ``next: {LABEL: STEP or SCORE}`` (a label step's branches)."""
    if "next" not in step:
        return {}
    if for_each is not None:
        raise step.error("next", "a for_each step gives many answers, so none of them can choose the next step",
                         "branch on a step that answers once, or remove next")
    raw = step.raw["next"]
    if isinstance(raw, str):
        return {"goto": _target(step.fields.nested("next"), None, raw, names, index)}
    if answer.kind != "label":
        raise step.error("next", f"branches by label, and this step answers {answer.words}",
                         "give the step `answer: {label: [...]}`, or write `next: STEP`")
    branches = step.fields.nested("next").section(labelled(raw), known=answer.labels,
                                                  example="`next: {yes: detail, no: 0.0}`")
    return {"next": {str(label): _target(branches.fields, str(label), target, names, index)
                     for label, target in branches.raw.items()}}


def _target(place: Fields, key: str | None, raw: Any, names: list[str], index: int) -> str | float:
    if is_number(raw):
        return place.number(raw, key, low=0.0, high=1.0)
    if not isinstance(raw, str) or raw not in names:
        raise place.error(key, f"no step {raw!r}{did_you_mean(raw, names)}",
                          f"name a step ({', '.join(names)}) or give a score from 0 to 1 that ends the program")
    if raw == names[index]:
        raise place.error(key, f"step {raw} leads to itself: a loop", "name another step, or a score")
    return raw


def _scores(step: Section, answer: StepAnswer) -> dict[str, float]:
    if "scores" not in step:
        return {}
    if answer.kind != "label":
        raise step.error("scores", f"gives a score per label, and this step answers {answer.words}",
                         "remove scores (a rating or number is scored on its range), or answer a label")
    given = step.fields.nested("scores").section(labelled(step.raw["scores"]), known=answer.labels,
                                                 example="`scores: {yes: 1.0, no: 0.0}`")
    missing = [label for label in answer.labels if label not in given.raw]
    if missing:
        raise given.error(None, f"has no score for {', '.join(missing)}", "give every label a score from 0 to 1")
    return {str(label): given.fields.unit_score(value, str(label)) for label, value in given.raw.items()}


# --- the flow: no loop, every step reachable -----------------------------------------------------


def check_flow(top: Section, program: JudgeProgram) -> None:
    """The steps form a DAG from the first: a loop is refused, naming it; so is a step that can never run."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def walk(name: str) -> None:
        state[name] = 1
        path.append(name)
        step = program.step(name)
        for target in successors(program, step):
            if not isinstance(target, str):
                continue
            if state.get(target) == 1:
                loop = " -> ".join(path[path.index(target):] + [target])
                raise top.error(f"steps[{step.index}].next", f"the steps loop: {loop}",
                                "a judge program is a DAG: point next: at a later step or a score")
            if target not in state:
                walk(target)
        path.pop()
        state[name] = 2

    walk(program.steps[0].name)
    for step in program.steps:
        if step.name not in state:
            raise top.error(f"steps[{step.index}]", f"step {step.name} never runs: no step before it leads to it",
                            "point a next: at it, or remove it")
