"""The one template language: text with named slots, used by datasets, check options and judge templates.

A slot is ``{name}`` or ``{{ name }}`` (the second is how promptfoo, G-Eval and other published prompts write
it), where ``name`` is an identifier, optionally dotted (``{inputs.question}``). Every other brace is text:
``{"score": 1}`` and ``\\d{2,3}`` stay as written, so a published prompt or a regular expression needs no
escaping. A template that is exactly one slot keeps the value's own type (a number stays a number, a list a
list); inside longer text a value is written as text (JSON for anything but text).

Who fills the slots decides what the names mean: a dataset's columns, or a case's ``input``, ``expected``
and ``inputs.NAME`` (:func:`case_value`), or a judge's ``output`` and ``criteria`` besides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

SLOT = re.compile(r"\{\{\s*([A-Za-z_]\w*(?:\.\w+)*)\s*\}\}|\{([A-Za-z_]\w*(?:\.\w+)*)\}")

Lookup = Callable[[str], Any]
"""A slot's value by name; raises ``KeyError(name)`` for a name it does not know."""


def slots_in(text: str) -> list[str]:
    """The slot names ``text`` uses, in order, each once."""
    return list(dict.fromkeys(m[1] or m[2] for m in SLOT.finditer(text)))


def nested_slots(value: Any) -> list[str]:
    """The slot names used anywhere in a YAML value (its strings, its mappings' values, its lists)."""
    return list(dict.fromkeys(name for text in strings_in(value) for name in slots_in(text)))


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


def render(template: str, lookup: Lookup) -> Any:
    """``template`` with its slots filled; a template that is one slot is that slot's value, of its type."""
    whole = SLOT.fullmatch(template)
    if whole:
        return lookup(whole[1] or whole[2])
    return SLOT.sub(lambda m: as_text(lookup(m[1] or m[2])), template)


def render_text(template: str, lookup: Lookup) -> str:
    """``template`` with its slots filled, always as text (a prompt, a message)."""
    return SLOT.sub(lambda m: as_text(lookup(m[1] or m[2])), template)


def render_nested(value: Any, lookup: Lookup) -> Any:
    """A YAML value with every string in it rendered (:func:`render`)."""
    if isinstance(value, str):
        return render(value, lookup)
    if isinstance(value, Mapping):
        return {key: render_nested(item, lookup) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [render_nested(item, lookup) for item in value]
    return value


def as_text(value: Any) -> str:
    """How a value reads inside text: text as it is, anything else as JSON (``true``, ``3``, ``["a", "b"]``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # what JSON writes, without its cost (a dataset's numeric ids, by the 100,000)
    return json.dumps(value, ensure_ascii=False, default=str)


# --- a case's slots ----------------------------------------------------------------------------

CASE_SLOTS = ("input", "expected")
"""Slots every case fills, besides ``inputs.NAME`` and a bare input name."""

TEMPLATE_SLOTS = {
    "producer": ("input",),
    "reviser": ("input", "output", "feedback"),
    "evaluator": ("input", "expected", "output", "criteria", "rubric", "steps", "transcript"),
}
"""The slots a template of each role may use, besides ``inputs.NAME`` and a bare input name: a producer's and
a reviser's never include ``expected`` (the answer would leak to the agent)."""


def inputs_text(inputs: Mapping[str, Any]) -> str:
    """``{input}``: a case's one input as text, or each input as ``name: value`` lines when there are several."""
    if len(inputs) == 1:
        return as_text(next(iter(inputs.values())))
    return "\n".join(f"{name}: {as_text(value)}" for name, value in inputs.items())


def case_value(name: str, inputs: Mapping[str, Any], expected: Any, *, input_text: str | None = None) -> Any:
    """A slot a case fills: ``input``, ``expected``, ``inputs.NAME`` or an input's bare name. ``input_text`` is
    what ``{input}`` holds when the case says (a conversation: its user turns, or the turn answered), else
    :func:`inputs_text`.

    Raises ``KeyError(name)`` when the case has no such value (an ``expected`` of None counts as none)."""
    if name == "input":
        return inputs_text(inputs) if input_text is None else input_text
    if name == "expected":
        if expected is None:
            raise KeyError(name)
        return expected
    return value_at_name(inputs, name[len("inputs."):] if name.startswith("inputs.") else name)


MISSING = object()
"""What :func:`value_at` returns when nothing is at the path (``None`` is a value JSON can hold)."""


def value_at(document: Any, path: Iterable[str]) -> Any:
    """The value at a dotted path's parts (keys, or list indexes as digits), or ``MISSING``."""
    value = document
    for part in path:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def value_at_name(values: Mapping[str, Any], name: str) -> Any:
    """The value a dotted name reaches in ``values``; ``KeyError`` if none."""
    value = value_at(values, name.split("."))
    if value is MISSING:
        raise KeyError(name)
    return value


def missing_case_slots(names: list[str], inputs: Mapping[str, Any], expected: Any) -> list[str]:
    """The names among ``names`` that a case with these inputs and expected answer cannot fill."""
    missing = []
    for name in names:
        try:
            case_value(name, inputs, expected)
        except KeyError:
            missing.append(name)
    return missing
