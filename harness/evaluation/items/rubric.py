"""The rubric kind: each rubric file in the rubrics folder is an item that checks its version against git
(``valid``), and one item per gold example and anti-pattern that checks its calibration (seed 000 section 8):
gold examples score at or above the threshold, anti-patterns below it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.base.models import DEFAULT_THRESHOLD, Rubric
from harness.base.requests import Subject
from harness.checks import CheckContext
from harness.evaluation.evaluate import evaluate
from harness.evaluation.items.kinds import ItemContext, ItemFailed, ItemKind, ItemSkipped, ItemSpec, item_kind
from harness.evaluation.runners import Runner
from harness.loading import RUBRIC_SUFFIXES
from harness.loading.versioning import check_version_bump


@dataclass(frozen=True)
class Calibration:
    rubric: Rubric
    example: Path | None  # None: the rubric file's own validity
    gold: bool = True
    threshold: float = DEFAULT_THRESHOLD


@item_kind
class RubricKind(ItemKind):
    name = "rubric"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.suffix in RUBRIC_SUFFIXES and path.parent == rubrics_dir

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        rubric = context.rubric(path)
        names = tuple(filter(None, (rubric.name, rubric.rubric_id)))
        yield ItemSpec(name="valid", label=f"{rubric.name}: valid", payload=Calibration(rubric, None), line=0,
                       rubrics=names, concurrent=False)
        threshold = rubric.effective_threshold(DEFAULT_THRESHOLD)
        for kind, paths in (("gold", rubric.examples.gold), ("anti", rubric.examples.anti_patterns)):
            for example in paths:
                name = f"{kind}[{example.stem}]"
                yield ItemSpec(name=name, label=f"{rubric.name}: {name}", line=0, rubrics=names, concurrent=False,
                               payload=Calibration(rubric, example, kind == "gold", threshold))

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> None:
        item: Calibration = spec.payload
        if item.example is None:
            check_version_bump(item.rubric)  # parsing validated the file: what is left is its version
            return None
        rubric = item.rubric
        context_ = CheckContext(inputs=rubric.examples.inputs, today=_examples_today(rubric),
                                expected=rubric.examples.expected)
        evaluation = evaluate(item.example.read_text(encoding="utf-8"), rubric=rubric, threshold=item.threshold,
                              context=context_, judge=_calibration_judge(context, rubric),
                              about=Subject(rubric.agent or "", item.example.stem, 1, dict(rubric.examples.inputs),
                                            rubric.examples.expected),
                              revision_follows=False)
        low, high = evaluation.bounds
        score = f"{low:.2f}" if low == high else f"{low:.2f}..{high:.2f}"
        if evaluation.passed is None:
            raise ItemSkipped(f"{evaluation.indeterminate_reason}; calibration not decided ({score})")
        if evaluation.passed != item.gold:
            expected = "at or above" if item.gold else "below"
            dims = "; ".join(f"{name} {d.score:.2f} ({d.reason})" for name, d in evaluation.dimensions.items()
                             if d.score is not None)
            raise ItemFailed(f"{item.example.name} scores {score}, expected {expected} the threshold "
                             f"{item.threshold:.2f}: {dims}")
        return None


def _examples_today(rubric: Rubric) -> dt.date:
    value = rubric.examples.inputs.get("today")
    return value if isinstance(value, dt.date) else dt.datetime.now(dt.timezone.utc).date()


def _calibration_judge(context: ItemContext, rubric: Rubric) -> Runner | None:
    """The evaluator of the first agent of the calibration suite (ini harness_suite) that uses this rubric."""
    suite_path = context.calibration_suite
    if not rubric.judged_dimensions or suite_path is None:
        return None
    suite = context.suite(suite_path)
    for agent in suite.agents.values():
        if agent.rubric_path == rubric.path.resolve() and agent.evaluator is not None:
            return context.make_runner(agent.evaluator, "evaluator", agent)
    return None
