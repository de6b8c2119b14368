"""The items of a structured artifact, as a rubric's ``items:`` declares them.

Two contracts need them: the evaluator output's ``metadata.itemsEvaluated`` counts the items (the ten
targets of a target list), and ``margin_required`` (seed 000 section 7) compares the top two candidates
of a selector's ranking.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from harness.base.models import ItemsSpec
from harness.checks import MISSING, value_at

_FENCED = re.compile(r"```[ \t]*(json|ya?ml)[ \t]*\r?\n(.*?)```", re.IGNORECASE | re.DOTALL)


def artifact_document(artifact: str) -> Any:
    """The artifact's data: the first fenced ```json or ```yaml block, else the whole text as JSON or YAML.

    None when it holds no data (plain prose parses as a YAML string, which is not data either)."""
    block = _FENCED.search(artifact)
    language, text = (block[1].lower(), block[2]) if block else ("", artifact)
    try:
        return json.loads(text)
    except ValueError:
        if language == "json":
            return None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return document if isinstance(document, (Mapping, list)) else None


def find_items(artifact: str, spec: ItemsSpec) -> tuple[list[Any] | None, str | None]:
    """(the list at the spec's path, None), or (None, why it could not be read)."""
    where = ".".join(spec.path)
    value = artifact_document(artifact)
    if value is None:
        return None, "the artifact holds no JSON or YAML"
    value = value_at(value, spec.path)
    if value is MISSING:
        return None, f"the artifact has no {where!r}"
    if not isinstance(value, list):
        return None, f"{where!r} in the artifact is not a list"
    return value, None


def count_items(artifact: str, spec: ItemsSpec | None) -> int:
    """How many items the artifact holds: 1 when the rubric declares none, 0 when its list is missing."""
    if spec is None:
        return 1
    found, _ = find_items(artifact, spec)
    return len(found) if found is not None else 0


@dataclass(frozen=True)
class Ranking:
    """The top two candidates of a selector's artifact, by their scores."""

    top: str
    top_score: float
    second: str | None
    second_score: float | None

    @property
    def gap(self) -> float | None:
        return None if self.second_score is None else round(self.top_score - self.second_score, 6)


def read_ranking(artifact: str, spec: ItemsSpec) -> tuple[Ranking | None, str | None]:
    """(the ranking, None), or (None, why the artifact's candidates cannot be ranked)."""
    assert spec.score is not None
    found, problem = find_items(artifact, spec)
    if found is None:
        return None, problem
    where = ".".join(spec.path)
    scored: list[tuple[float, str]] = []
    for index, item in enumerate(found):
        value = item.get(spec.score) if isinstance(item, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None, f"{where}[{index}] has no number in {spec.score!r}"
        label = item.get(spec.label) if spec.label else None
        scored.append((float(value), str(label) if label not in (None, "") else f"{where}[{index}]"))
    if not scored:
        return None, f"{where!r} in the artifact is an empty list"
    scored.sort(key=lambda pair: -pair[0])
    (top_score, top), rest = scored[0], scored[1:]
    if not rest:
        return Ranking(top, top_score, None, None), None
    return Ranking(top, top_score, rest[0][1], rest[0][0]), None
