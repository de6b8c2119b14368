"""The judge of an imported promptfoo config: a grader of the library where one judges its model-graded asserts as
promptfoo does, else a judge template of the project's own.

An agent has one evaluator, so every model-graded assert of the config has the same judge:

- all of them ``llm-rubric`` and no ``defaultTest.options.rubricPrompt``: ``evaluator: graders/llm-rubric``,
  promptfoo's llm-rubric judge from the library (docs/graders.md), each assert's text the criterion it reads;
- all of them ``g-eval``, at most one a test, every test with vars (the judge shows ``{input}``):
  ``graders/g-eval``, each criterion rated from 1 to 5 by evaluation steps written from it (``scale: [1, 5]``);
- all of them ``model-graded-closedqa``, one in every test, every test with vars: ``graders/closedqa``, each
  test's criterion its case's ``expected:``, its vars filled in (that judge reads one criterion, as ``{expected}``);
- otherwise a copy of the library's llm-rubric template in the suite, ``judges/llm-rubric.yaml``, whose
  ``{rubric}`` is the whole rubric, so that the judge reads the levels of the criteria with choices or a scale;
  the asserts it judges in place of their own prompts keep their ``not carried over:`` lines. A custom
  ``rubricPrompt`` is the project's own template, whatever the asserts, as promptfoo grades them all with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.apps.importers import Plan
from harness.apps.importers.chat import template_text
from harness.apps.importers.promptfoo_asserts import Dim
from harness.base import slots
from harness.base.yamlfile import load_yaml
from harness.loading.library import EVALUATOR_SUFFIX, JUDGES_DIR
from harness.loading.rubrics import GRADERS

TEMPLATE = "judges/llm-rubric.yaml"
LLM_RUBRIC = f"{GRADERS}llm-rubric"
G_EVAL = f"{GRADERS}g-eval"
CLOSEDQA = f"{GRADERS}closedqa"
G_EVAL_SCALE = [1, 5]  # the library's G-Eval rates from 1 to 5 (promptfoo's from 0 to 10); the score is 0 to 1


@dataclass
class Judge:
    """The agent's ``evaluator:``, the comment above it in agents.yaml, the files it needs in the suite, and the
    ``expected:`` it needs of each case (by the case's id)."""

    evaluator: str | dict[str, Any]
    credit: str
    files: dict[str, str] = field(default_factory=dict)
    expected: dict[str, str] = field(default_factory=dict)


def judge_of(default: Mapping[str, Any], plan: Plan, rubric_dims: list[Dim], cases: list[dict[str, Any]],
             custom: tuple[str, str] | None) -> Judge:
    """The judge of the config's model-graded asserts (``rubric_dims``, defaultTest's, and each case's ``dims``),
    ``custom`` the rubricPrompt's template file (its path in the suite, its text) when the config has one; the
    dimensions a library grader carries are reshaped for it, and their fallback lines taken back."""
    judged = [d for d in rubric_dims + [d for c in cases for d in c["dims"]] if d.judge is not None]
    kinds = {d.kind for d in judged}
    if custom is not None:
        path, text = custom
        return Judge({"template": path, "slots": _slots(kinds)}, f"{path}: defaultTest.options.rubricPrompt, the "
                     "judge of every model-graded assert", {path: text})
    if kinds == {"llm-rubric"}:
        return Judge(LLM_RUBRIC, f"{LLM_RUBRIC}: promptfoo's llm-rubric judge, from the library (docs/graders.md)")
    shared = default.get("vars") if isinstance(default.get("vars"), Mapping) else {}
    counts = [sum(d.judge is not None for d in rubric_dims + c["dims"]) for c in cases]
    with_vars = all(c["vars"] or shared for c in cases)
    if kinds == {"g-eval"} and with_vars and max(counts) <= 1:
        for dim in judged:
            dim.judge = {"scale": list(G_EVAL_SCALE)}
            _take_back(plan, dim)
        return Judge(G_EVAL, f"{G_EVAL}: promptfoo's g-eval asserts by the library's G-Eval (docs/graders.md): "
                     "steps written from each criterion, then a rating from 1 to 5")
    if kinds == {"model-graded-closedqa"} and with_vars and set(counts) == {1}:
        expected = {c["id"]: _filled(next(d for d in rubric_dims + c["dims"] if d.judge is not None),
                                     {**shared, **c["vars"]}) for c in cases}
        if all(text is not None for text in expected.values()):
            for dim in judged:
                _take_back(plan, dim)
            return Judge(CLOSEDQA, f"{CLOSEDQA}: promptfoo's model-graded-closedqa asserts by the library's closed "
                         "QA judge (docs/graders.md); each case's criterion is its expected:",
                         expected={case: text for case, text in expected.items() if text is not None})
    return Judge({"template": TEMPLATE, "slots": _slots(kinds)}, f"{TEMPLATE}: a copy of {LLM_RUBRIC}'s judge "
                 "(docs/graders.md) that shows the whole rubric, the levels of each criterion too",
                 {TEMPLATE: library_template()})


def library_template() -> str:
    """The chat template of the library's llm-rubric judge, as a project's own copy of it."""
    entry = load_yaml(JUDGES_DIR / f"llm-rubric{EVALUATOR_SUFFIX}")
    messages = load_yaml(JUDGES_DIR / entry["template"])
    return template_text([{"role": str(m["role"]), "content": str(m["content"])} for m in messages],
                         comment=f"A copy of {LLM_RUBRIC}'s judge (harness/loading/graders/judges/): promptfoo's "
                                 "llm-rubric judge in its two roles.")


def _slots(kinds: set[str]) -> dict[str, str]:
    """``{rubric}`` is one line per criterion when every criterion is an llm-rubric's text, else the whole rubric
    (choices and scales need their levels)."""
    return {"output": "output", "rubric": "criteria"} if kinds == {"llm-rubric"} else {"output": "output"}


def _take_back(plan: Plan, dim: Dim) -> None:
    if dim.note in plan.notes:
        plan.notes.remove(dim.note)


def _filled(dim: Dim, variables: Mapping[str, Any]) -> str | None:
    """A criterion with the test's vars filled in (promptfoo renders an assert's value with them); None when a
    slot names no var, or a var that is no plain value."""
    def value(name: str) -> Any:
        found = slots.value_at_name(variables, name.removeprefix("inputs."))
        if not isinstance(found, (str, int, float, bool)) or str(found).startswith("file://"):
            raise KeyError(name)
        return found

    try:
        return slots.render_text(dim.criterion or dim.description, value)
    except KeyError:
        return None
