"""The JSON Schema of a judge's answer: EvaluatorOutput restricted to the judged dimensions, each on its own scale,
and the limits on what an answer may hold (docs/design.md, "Limits")."""

from __future__ import annotations

import functools
from typing import Any

from harness.base import jsonschemas
from harness.base.models import Dimension, Rubric, rating_schema

# An answer's text fields are kept in eval.json and in SQLite; a judge that writes more is refused (the
# model is asked once again, with the error), not stored (docs/design.md, "Limits").
MAX_ANSWER_TEXT = 20_000
MAX_ANSWER_FIXES = 50


def judge_schema(rubric: Rubric, dimension_ids: list[str]) -> dict[str, Any]:
    """EvaluatorOutput (seed 000 section 2) restricted to the dimensions the judge must score, each answered on
    its own scale: a score from 0 to 1 (one of the levels when they are exhaustive, 0 or 1 for a pass/fail
    criterion), a whole-number ``rating`` on a ``scale``, or a ``label`` among the ``choices``.

    Built once per set of dimensions and shared by every evaluation that asks for it: do not modify it.
    """
    wanted = set(dimension_ids)
    return _judge_schema(tuple((d.id, answer_shape(d)) for d in rubric.dimensions if d.id in wanted))


def answer_shape(dim: Dimension) -> tuple[Any, ...]:
    """What the judge answers for ``dim``, as a hashable key of its schema."""
    if dim.scale is not None:
        return ("rating", *dim.scale, dim.step)
    if dim.choices:
        return ("label", *dim.choices)
    if dim.binary:
        return ("score", 0, 1)
    if dim.exhaustive:
        return ("score", *sorted(dim.scoring))
    return ("score",)


@functools.lru_cache(maxsize=256)
def _judge_schema(shapes: tuple[tuple[str, tuple[Any, ...]], ...]) -> dict[str, Any]:
    def dimension(shape: tuple[Any, ...]) -> dict[str, Any]:
        kind, *values = shape
        if kind == "rating":
            answer = {"rating": rating_schema(*values)}
        elif kind == "label":
            answer = {"label": {"enum": values}}
        elif values:
            answer = {"score": {"enum": values}}
        else:
            answer = {"score": {"type": "number", "minimum": 0, "maximum": 1}}
        required = [kind, "weight", "reason"] if kind == "score" else [kind, "reason"]
        return {
            "type": "object",
            "required": required,
            "properties": {
                **answer,
                "weight": {"type": "number", "minimum": 0, "maximum": 1},
                "reason": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_TEXT},
                "indeterminate": {"type": "boolean"},
            },
        }

    dimension_ids = [dim_id for dim_id, _ in shapes]
    return {
        "type": "object",
        "required": ["overallScore", "passed", "dimensionScores", "feedback", "suggestedFixes"],
        "properties": {
            "overallScore": {"type": "number", "minimum": 0, "maximum": 1},
            "passed": {"type": "boolean"},
            "dimensionScores": {"type": "object", "required": dimension_ids,
                                "properties": {dim_id: dimension(shape) for dim_id, shape in shapes},
                                "additionalProperties": False},
            "feedback": {"type": "string", "maxLength": MAX_ANSWER_TEXT},
            "suggestedFixes": {"type": "array", "maxItems": MAX_ANSWER_FIXES,
                               "items": {"type": "string", "maxLength": MAX_ANSWER_TEXT}},
            "metadata": {"type": "object"},
        },
    }


def validation_errors(data: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``data`` breaks ``schema``, one readable line each (the one JSON Schema helper's words)."""
    return jsonschemas.errors(data, schema)
