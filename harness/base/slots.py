"""The one template language: text with named slots, used by datasets, check options and judge templates.

A slot is ``{name}`` or ``{{ name }}`` (the second is how promptfoo, G-Eval and other published prompts write
it), where ``name`` is an identifier, optionally dotted (``{inputs.question}``). Every other brace is text:
``{"score": 1}`` and ``\\d{2,3}`` stay as written, so a published prompt or a regular expression needs no
escaping. A template that is exactly one slot keeps the value's own type (a number stays a number, a list a
list); inside longer text a value is written as text (JSON for anything but text).

Who fills the slots decides what the names mean: a dataset's columns, or a case's ``input``, ``expected``
and ``inputs.NAME`` (:func:`case_value`), or a judge's ``output`` and ``criteria`` besides.

A slot may pass its value through filters, ``{choices|lettered}`` or ``{{ answer | letter }}`` (:data:`FILTERS`):
a list as ``A) ...`` lines, ``1. ...`` lines or its letters ``A, B, C``, an index 0, 1, 2 as its letter, a value
as JSON. Only the known filters make a slot; :func:`filter_problem` finds a slot with an unknown one, so a loader
can refuse it (a misspelt filter would otherwise stay text). A filter given a value it cannot take raises
:class:`SlotFilterError`.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from harness.base.errors import ExitCode, HarnessError


class SlotFilterError(HarnessError):
    """A slot's filter was given a value it cannot take (``{choices|lettered}`` of a text): one line, which the
    caller places in its file and field."""

    exit_code = ExitCode.DATA_ERROR


def _items(value: Any, name: str) -> Sequence[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise SlotFilterError(f"{name} takes a list, got {_shown(value)} (a CSV cell is text: keep lists in JSON "
                              "Lines or JSON)")
    if len(value) > len(string.ascii_uppercase):
        raise SlotFilterError(f"{name} takes at most 26 items (A to Z), got {len(value)}")
    return value


def _letter(value: Any) -> str:
    index = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(string.ascii_uppercase):
        raise SlotFilterError(f"letter takes an index from 0 to 25 (0 is A), got {_shown(value)}")
    return string.ascii_uppercase[index]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


FILTERS: dict[str, Callable[[Any], str]] = {
    "lettered": lambda v: "\n".join(f"{string.ascii_uppercase[i]}) {as_text(item)}"
                                    for i, item in enumerate(_items(v, "lettered"))),
    "letters": lambda v: ", ".join(string.ascii_uppercase[:len(_items(v, "letters"))]),
    "numbered": lambda v: "\n".join(f"{i}. {as_text(item)}" for i, item in enumerate(_items(v, "numbered"), 1)),
    "letter": _letter,
    "json": lambda v: json.dumps(v, ensure_ascii=False, default=str),
}
"""A slot's filters by name, each a value to text: ``lettered`` (a list as ``A) first`` lines), ``letters``
(``A, B, C, D``, one per item), ``numbered`` (``1. first`` lines), ``letter`` (an index, 0 for A; a number or
digits) and ``json`` (the value as JSON, text quoted)."""

_NAME = r"[A-Za-z_]\w*(?:\.\w+)*"
_KNOWN = r"(?:\s*\|\s*(?:" + "|".join(sorted(FILTERS, key=len, reverse=True)) + r")\b)*"
SLOT = re.compile(rf"\{{\{{\s*({_NAME}){_KNOWN}\s*\}}\}}|\{{({_NAME}){_KNOWN}\}}")
"""A slot: group 1 (``{{ name }}``) or group 2 (``{name}``) is its name; its filters follow it in the text."""
_FILTERED = re.compile(rf"\{{\{{\s*{_NAME}(?:\s*\|\s*\w+)+\s*\}}\}}|\{{{_NAME}(?:\s*\|\s*\w+)+\}}")

KEEP = object()
"""What a lookup returns to leave its slot as written, filters and all (for whoever fills it later)."""

Lookup = Callable[[str], Any]
"""A slot's value by name; raises ``KeyError(name)`` for a name it does not know."""


def filter_problem(text: str) -> str | None:
    """Why a slot in ``text`` does not read (a filter we do not have, ``{choices|leterred}``), or None."""
    for match in _FILTERED.finditer(text):
        for name in _filters_of(match[0]):
            if name not in FILTERS:
                return (f"{match[0]} uses the filter {name!r}, which does not exist (filters: "
                        f"{', '.join(sorted(FILTERS))})")
    return None


def nested_filter_problem(value: Any) -> str | None:
    """:func:`filter_problem` of every string in a YAML value."""
    return next((problem for text in strings_in(value) if (problem := filter_problem(text))), None)


def _filters_of(slot: str) -> list[str]:
    return [part.strip() for part in slot.strip("{} \t\n").split("|")[1:]]


def _value(match: re.Match[str], lookup: Lookup) -> Any:
    value = lookup(match[1] or match[2])
    if value is KEEP:
        return match[0]
    for name in _filters_of(match[0]):
        value = FILTERS[name](value)
    return value


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
        return _value(whole, lookup)
    return SLOT.sub(lambda m: as_text(_value(m, lookup)), template)


def render_text(template: str, lookup: Lookup) -> str:
    """``template`` with its slots filled, always as text (a prompt, a message)."""
    return SLOT.sub(lambda m: as_text(_value(m, lookup)), template)


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
