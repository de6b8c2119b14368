"""Fill a judge's answer schema with scores: the EvaluatorOutput the fake model servers answer with.

Shared by the fake Anthropic and OpenAI servers (their ``judge_responder`` helpers), so both fakes
answer the same schema the same way and a fix to the filling rules reaches both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["evaluator_output", "placeholder"]


def evaluator_output(
    schema: Mapping[str, Any], given: Mapping[str, float], default: float, threshold: float
) -> dict[str, Any]:
    """An EvaluatorOutput (seed 000 section 2) that ``schema`` accepts, scoring each dimension from ``given``.

    The dimensions are ``dimensionScores``' required properties (else all its properties); one not in
    ``given`` scores ``default``. Weights are the schema's ``const`` when it has one, else equal. Fields
    the schema requires that a judge cannot know get a placeholder of the right type, so a stricter
    schema still validates without the fake knowing its fields.
    """
    props = _resolve(schema, schema).get("properties") or {}
    dims_schema = _resolve(schema, props.get("dimensionScores") or {})
    dim_props = dims_schema.get("properties") or {}
    names = list(dims_schema.get("required") or dim_props)

    weights: dict[str, float] = {}
    for name in names:
        fields = _resolve(schema, dim_props.get(name) or {}).get("properties") or {}
        weight_schema = _resolve(schema, fields.get("weight") or {})
        weights[name] = float(weight_schema["const"]) if "const" in weight_schema else 1.0 / max(len(names), 1)

    dims: dict[str, Any] = {}
    for name in names:
        score = float(given.get(name, default))
        dim_schema = _resolve(schema, dim_props.get(name) or {})
        if dim_schema.get("type") in ("number", "integer"):
            dims[name] = score
            continue
        value: dict[str, Any] = {
            "score": score,
            "weight": weights[name],
            "reason": f"fake judge: {name} scored {score:g}",
        }
        dim_fields = dim_schema.get("properties")
        if dim_fields:
            value.update(_on_the_dimensions_scale(schema, dim_fields, score))
            value = {k: v for k, v in value.items() if k in dim_fields}
            for key in dim_schema.get("required") or []:
                if key not in value:
                    value[key] = placeholder(schema, dim_fields.get(key) or {})
        dims[name] = value

    total_weight = sum(weights.values())
    overall = sum(float(given.get(n, default)) * weights[n] for n in names) / total_weight if total_weight else default
    low = [n for n in names if float(given.get(n, default)) < 1.0]
    answer: dict[str, Any] = {
        "overallScore": round(overall, 6),
        "passed": overall >= threshold,
        "dimensionScores": dims,
        "feedback": "fake judge: " + (f"improve {', '.join(low)}" if low else "all dimensions met"),
        "suggestedFixes": [f"Improve {n}" for n in low],
    }
    if props:
        answer = {k: v for k, v in answer.items() if k in props}
        for key in _resolve(schema, schema).get("required") or []:
            if key not in answer:
                answer[key] = placeholder(schema, props.get(key) or {})
    return answer


def _on_the_dimensions_scale(root: Mapping[str, Any], fields: Mapping[str, Any], score: float) -> dict[str, Any]:
    """``score`` as a dimension with its own scale asks for it: the nearest rating of a ``rating`` range, the
    nearest of a score's allowed levels, or a ``label`` (the first: the schema does not say what labels are
    worth)."""
    rating = _resolve(root, fields.get("rating") or {})
    if rating.get("enum"):  # a stepped scale: the nearest of its ratings
        ratings = rating["enum"]
        target = min(ratings) + score * (max(ratings) - min(ratings))
        return {"rating": min(ratings, key=lambda value: abs(value - target))}
    if "minimum" in rating and "maximum" in rating:
        low, high = int(rating["minimum"]), int(rating["maximum"])
        return {"rating": low + round(score * (high - low))}
    levels = _resolve(root, fields.get("score") or {}).get("enum")
    if levels:
        return {"score": min(levels, key=lambda level: abs(float(level) - score))}
    labels = _resolve(root, fields.get("label") or {}).get("enum")
    return {"label": labels[0]} if labels else {}


def _resolve(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow local ``$ref`` pointers (``#/$defs/x``) so nested schemas can be read."""
    for _ in range(20):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            break
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/"):
            if not part:
                continue
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, Mapping) else {}
        node = target
    return node if isinstance(node, Mapping) else {}


_FORMATTED = {"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00Z",
              "email": "fake@example.com", "uri": "https://example.com/fake", "uuid": "00000000-0000-4000-8000-000000000000"}


def placeholder(root: Mapping[str, Any], node: Mapping[str, Any]) -> Any:
    """A value of the right shape for a schema the judge has no data for."""
    node = _resolve(root, node)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    options = node.get("anyOf") or node.get("oneOf")
    if options and "type" not in node:  # a pydantic Optional: the first option that is not null
        chosen = next((o for o in options if _resolve(root, o).get("type") != "null"), options[0])
        return placeholder(root, chosen)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or "properties" in node:
        fields = node.get("properties") or {}
        return {k: placeholder(root, fields.get(k) or {}) for k in node.get("required") or []}
    if kind == "array":
        count = int(node.get("minItems", 0))
        return [placeholder(root, node.get("items") or {}) for _ in range(count)]
    if kind == "string":
        if node.get("format") in _FORMATTED:  # checked by the generation's validator: a value of its format
            return _FORMATTED[node["format"]]
        return "fake" + "x" * max(0, int(node.get("minLength", 0)) - 4)
    if kind == "integer":
        return int(node.get("minimum", 0))
    if kind == "number":
        return float(node.get("minimum", 0.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "fake"
