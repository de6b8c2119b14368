"""The library of standard graders (docs/graders.md): the rubrics shipped with the harness, named ``graders/NAME``,
and the judges the model-graded ones bring.

A grader NAME is the rubric ``graders/NAME.yaml``. A model-graded grader has, in ``graders/judges/``, its evaluator
``NAME.evaluator.yaml``: the mapping an agent's ``evaluator:`` would hold (a chat template and the pattern its
verdict is read with, or a judge program), naming files in the same folder. An agent that names ``rubric:
graders/NAME`` and no ``evaluator:`` of its own is judged by it, on the judge's model (``judge:`` as usual);
``evaluator: graders/NAME`` uses it with a rubric of one's own. A pairwise judge of the library,
``judges/NAME.pair-judge.yaml``, holds what a pairwise file's ``judge:`` says of its prompt (``template``,
``system``, ``verdict``, ``verdicts``); ``judge: {template: graders/NAME}`` names it. The library's own files are
read from the library, never from the project: its folder is their only root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base.errors import did_you_mean
from harness.base.fields import Fields, Section
from harness.base.yamlfile import load_yaml
from harness.loading.rubrics import GRADERS, GRADERS_DIR, library_graders

JUDGES_DIR = GRADERS_DIR / "judges"
EVALUATOR_SUFFIX = ".evaluator.yaml"
PAIR_JUDGE_SUFFIX = ".pair-judge.yaml"
PAIR_JUDGE_KEYS = ("template", "system", "verdict", "verdicts")
DOCS = "docs/graders.md"


def is_library_name(ref: Any) -> bool:
    """Whether ``ref`` names a grader of the library (``graders/NAME``) rather than a file (``graders/x.txt``)."""
    return isinstance(ref, str) and ref.startswith(GRADERS) and ref != GRADERS and not Path(ref).suffix


def _named(suffix: str) -> list[str]:
    if not JUDGES_DIR.is_dir():
        return []
    return sorted(GRADERS + path.name[:-len(suffix)] for path in JUDGES_DIR.iterdir() if path.name.endswith(suffix))


def library_evaluators() -> list[str]:
    """The graders that bring an evaluator (the model-graded ones), as an agent names them."""
    return _named(EVALUATOR_SUFFIX)


def library_pair_judges() -> list[str]:
    """The library's pairwise judges, as a pairwise file's ``judge: {template: ...}`` names them."""
    return _named(PAIR_JUDGE_SUFFIX)


def in_library(path: Path) -> bool:
    """Whether ``path`` is one of the library's own files."""
    return path.resolve().is_relative_to(GRADERS_DIR.resolve())


def file_roots(path: Path, roots: tuple[Path, ...]) -> tuple[Path, ...]:
    """Where the files ``path`` names may lie: the library's folder for a file of the library, else ``roots``."""
    return (JUDGES_DIR,) if in_library(path) else roots


def implied_evaluator(rubric: Any) -> str | None:
    """The evaluator an agent that names ``rubric`` and no evaluator gets: the grader's own, if it brings one."""
    return rubric if is_library_name(rubric) and rubric in library_evaluators() else None


def evaluator_entry(ref: str, place: Fields, role: str) -> tuple[Path, Any]:
    """The evaluator of grader ``ref`` (``graders/NAME``): its entry file, and the mapping it holds."""
    known = library_evaluators()
    if role != "evaluator":
        raise place.error(None, f"{ref} is a grader of the library: it judges, and this runner is the {role}",
                          f"name it as the evaluator (`evaluator: {ref}`), or give the {role} a prompt or code")
    if ref not in known:
        problem = (f"{ref} is scored by checks alone and brings no evaluator" if ref in library_graders() else
                   f"no grader {ref!r} in the library{did_you_mean(ref, known)}")
        raise place.error(None, problem, f"use one of: {', '.join(known)} ({DOCS})")
    path = JUDGES_DIR / (ref.removeprefix(GRADERS) + EVALUATOR_SUFFIX)
    return path, load_yaml(path)


def pair_judge(ref: str, place: Fields, key: str) -> Section:
    """The library's pairwise judge ``ref``: its entry read as a pairwise file's ``judge:`` is, the files it names
    beside it."""
    known = library_pair_judges()
    if ref not in known:
        raise place.error(key, f"no pairwise judge {ref!r} in the library{did_you_mean(ref, known)}",
                          f"use one of: {', '.join(known)} ({DOCS}), or a template file of your own")
    path = JUDGES_DIR / (ref.removeprefix(GRADERS) + PAIR_JUDGE_SUFFIX)
    return Fields.of(path, roots=(JUDGES_DIR,)).section(load_yaml(path), known=PAIR_JUDGE_KEYS,
                                                        required=("template", "verdict", "verdicts"))
