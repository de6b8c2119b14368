"""The one JSON Schema helper: validators built once per schema, and their errors in words a person reads.

Rubrics (a review's ``output_schema``), checks (``json_schema``), the judge's answer, structured generation
and the tournament's records all validate through here, so an error reads the same everywhere:
``dimensionScores.accuracy.score: 1.7 is above the maximum 1``. Wrong values (type, range, choice, length)
come before missing and unexpected fields, so a message that shows the first few shows those.

The contracts the harness ships (``harness/base/contracts/*.json``: the tournament's records, and the schemas
its loaders check files against) are read here too, and resolve ``$ref`` to one another (:func:`contract`,
:func:`contract_errors`).

``jsonschema`` is imported on first use: its import costs a noticeable share of a small run.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.base.errors import HarnessConfigError

if TYPE_CHECKING:
    import jsonschema
    from jsonschema.protocols import Validator

_CACHE_LIMIT = 256
_validators: dict[str, Any] = {}
_lock = threading.Lock()


class SchemaInvalid(ValueError):
    """The schema itself is not valid JSON Schema: ``where`` is the place inside it (``properties.a.type``; empty
    for the whole schema), ``problem`` one line in the harness's words, ``fix`` what to do."""

    fix = "make the schema valid JSON Schema (draft 2020-12, unless its $schema names another)"

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"not a valid JSON Schema at {where}: {problem}" if where else
                         f"not a valid JSON Schema: {problem}")


def validator_for(schema: dict[str, Any], *, registry: Any = None, formats: bool = False) -> Validator:
    """A validator of ``schema`` for the draft its ``$schema`` names (2020-12 when none), built once.

    ``registry`` resolves ``$ref`` to other schemas (``referencing.Registry``); ``formats`` checks ``format``
    (the formats of the schema's draft: ``date``, ``email``, ...). A schema that is not valid raises
    :class:`SchemaInvalid`. Keep the validator where one schema checks many values: building the cache key
    costs about as much as checking a small value.
    """
    key = json.dumps(schema, sort_keys=True, default=str) + f"|{id(registry) if registry is not None else ''}|{formats}"
    with _lock:
        found = _validators.get(key)
    if found is not None:
        return found
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        raise _schema_invalid(err) from None
    kwargs: dict[str, Any] = {}
    if registry is not None:
        kwargs["registry"] = registry
    if formats:  # the formats the schema's own draft defines
        kwargs["format_checker"] = cls.FORMAT_CHECKER
    validator = cls(schema, **kwargs)
    with _lock:
        if len(_validators) >= _CACHE_LIMIT:
            _validators.clear()
        _validators[key] = validator
    return validator


@functools.lru_cache(maxsize=None)
def contract(name: str) -> dict[str, Any]:
    """The shipped contract ``name`` (``harness/base/contracts/<name>.json``). Do not modify it."""
    text = resources.files(__package__).joinpath("contracts", f"{name}.json").read_text("utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def _contracts_registry() -> Any:
    from referencing import Registry, Resource

    names = sorted(p.name.removesuffix(".json") for p in resources.files(__package__).joinpath("contracts").iterdir()
                   if p.name.endswith(".json"))
    return Registry().with_resources([(contract(n)["$id"], Resource.from_contents(contract(n))) for n in names])


def contract_errors(name: str, data: Any) -> list[str]:
    """Every way ``data`` breaks the shipped contract ``name`` (formats checked, ``$ref`` to the other contracts
    resolved), one readable line each."""
    return errors(data, contract(name), registry=_contracts_registry(), formats=True)


def check_schema(schema: dict[str, Any]) -> None:
    """Raise :class:`SchemaInvalid` when ``schema`` is not a valid JSON Schema."""
    validator_for(schema)


def errors(data: Any, schema: dict[str, Any], **options: Any) -> list[str]:
    """Every way ``data`` breaks ``schema``, one readable line each (see the module docstring)."""
    return error_lines(validator_for(schema, **options).iter_errors(data))


def error_lines(found: Iterable[jsonschema.ValidationError], prefix: str = "") -> list[str]:
    """The errors a validator found, one readable line each, in the order a person fixes them: wrong values
    before missing and unexpected fields, then by place (list items by their number). ``prefix`` goes before
    each path, as in :func:`error_line`."""
    ordered = sorted(found, key=lambda e: (e.validator in ("required", "additionalProperties"),
                                           [(1, 0, str(p)) if isinstance(p, str) else (0, p, "")
                                            for p in e.absolute_path], e.message))
    return [error_line(e, prefix) for e in ordered]


def error_line(error: jsonschema.ValidationError, prefix: str = "") -> str:
    """One error in the harness's words (``prefix`` goes before its path: the list item a check looked at).
    The library's own message is the last resort, for the keywords this does not word."""
    where, problem = _where_and_problem(error, prefix)
    return f"{where or '(root)'}: {problem}"


def _path(parts: Iterable[str | int], prefix: str = "") -> str:
    """``targets[2].name`` from ``("targets", 2, "name")``; empty for no parts and no prefix."""
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_invalid(error: jsonschema.SchemaError) -> SchemaInvalid:
    """A schema's own mistake, worded as a value's: ``minimum: 'x' is text, not a number``."""
    where, problem = _where_and_problem(error, "")
    if error.absolute_path and error.absolute_path[-1] == "type" and error.validator == "anyOf":
        problem = f"{_shown(error.instance)} is not a JSON Schema type (use one of {', '.join(sorted(_TYPE_WORDS))})"
    return SchemaInvalid(where, problem)


def _where_and_problem(error: jsonschema.ValidationError, prefix: str) -> tuple[str, str]:
    where = _path(error.absolute_path, prefix)
    value, expected, kind = error.instance, error.validator_value, error.validator
    shown = _shown(value)
    if kind == "required" and isinstance(value, dict):
        missing = [str(name) for name in expected if name not in value]
        # one error per missing field: the one this error names (its message quotes it), else the first
        name = next((m for m in missing if repr(m) in error.message), missing[0] if missing else "?")
        return _path([name], where), "missing"
    if kind == "additionalProperties" and isinstance(value, dict):
        allowed = set(error.schema.get("properties") or {})
        extra = sorted(str(k) for k in value if k not in allowed)
        return _path([", ".join(extra)], where), f"not expected (allowed: {', '.join(sorted(allowed))})"
    if kind == "type":
        wanted = " or ".join(_TYPE_WORDS.get(t, t) for t in ([expected] if isinstance(expected, str) else expected))
        return where, f"{shown} is {_TYPE_WORDS.get(_json_type(value), _json_type(value))}, not {wanted}"
    if kind in ("maximum", "exclusiveMaximum"):
        return where, f"{shown} is above the maximum {expected}" + (" (exclusive)" if kind[0] == "e" else "")
    if kind in ("minimum", "exclusiveMinimum"):
        return where, f"{shown} is below the minimum {expected}" + (" (exclusive)" if kind[0] == "e" else "")
    if kind == "enum":
        return where, f"{shown} is not one of {', '.join(_shown(v) for v in expected)}"
    if kind == "const":
        return where, f"{shown} is not {_shown(expected)}"
    if kind == "format":
        return where, f"{shown} is not a valid {expected}"
    if kind == "pattern":
        return where, f"{shown} does not match the pattern {expected!r}"
    if kind == "maxLength" and isinstance(value, str):
        return where, f"{len(value):,} characters, more than the maximum {expected:,}"
    if kind == "minLength" and isinstance(value, str):
        return where, "empty" if not value else f"{len(value)} characters, fewer than the minimum {expected}"
    if kind == "maxItems" and isinstance(value, list):
        return where, (f"{_items(len(value))}, expected none" if expected == 0 else
                       f"{_items(len(value))}, more than the maximum {expected}")
    if kind == "minItems" and isinstance(value, list):
        return where, "empty" if not value else f"{_items(len(value))}, fewer than the minimum {expected}"
    if kind == "uniqueItems" and isinstance(value, list):
        return where, "items repeat, where each must be different"
    return where, " ".join(error.message.split())[:300]


def _items(count: int) -> str:
    return f"{count} item{'s' * (count != 1)}"


_TYPE_WORDS = {"number": "a number", "integer": "a whole number", "string": "text", "boolean": "true or false",
               "object": "an object", "array": "a list", "null": "null"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def _shown(value: Any, limit: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_contract(name: str, path: Path | str, raw: Any, fix: str) -> None:
    """A user file read field by field, checked once more against its shipped contract ``name``: whatever the
    reading let through (it should be nothing) is still one ``HarnessConfigError`` naming the field, never a file
    the contract refuses."""
    found = contract_errors(name, json.loads(json.dumps(raw, default=str)))
    if found:
        where, _, problem = found[0].partition(": ")
        raise HarnessConfigError(path, None if where == "(root)" else where, problem, fix)
