"""An agent's ``variants:``: a matrix of the settings compared (models x producers x producer options x sampling),
each combination a variant that runs every one of the agent's cases (docs/comparisons.md).

Each axis is a list (each value named for itself: a model by its name, a prompt by its file's stem) or a mapping
of names to values. A variant is named by its values' names joined with ``+`` in the order the axes are
written (``claude-haiku-4-5+terse``): the name is the last part of each of its items' node ids
(``case-1[claude-haiku-4-5+terse]``).
A variant is the agent's own entry with its values written in, read exactly as agents.yaml reads an agent, so a
variant's prompt file, model or option is checked like any other, and an error names the variant it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import product
from pathlib import PurePosixPath
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fields import Section, is_number, shown

AXES = ("model", "producer", "options", "temperature", "max_tokens")
MODEL_AXES = ("model", "temperature", "max_tokens")  # settings of a model the harness calls for the producer
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # no "+": it joins the names; no brackets: the node id
JOIN = "+"
MAX_VARIANTS = 256  # more is a matrix written by mistake (every case runs once per variant)


@dataclass(frozen=True)
class Variant:
    """One combination: its name, and per axis the value's name and the value."""

    name: str
    values: tuple[tuple[str, str, Any], ...]  # (axis, the value's name, the value)

    @property
    def settings(self) -> dict[str, str]:
        """What the records and reports show of it: per axis, the value's name."""
        return {axis: label for axis, label, _ in self.values}

    def agent_entry(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The agent's entry in agents.yaml with this variant's values written in (and no ``variants:``)."""
        entry = {key: value for key, value in raw.items() if key != "variants"}
        for axis, _, value in self.values:
            if axis == "producer":
                entry["producer"] = value
        for axis, _, value in self.values:
            if axis == "options":
                producer = entry["producer"]
                entry["producer"] = {**producer, **value} if isinstance(producer, Mapping) else {
                    "prompt": producer, **value}
            elif axis in MODEL_AXES:
                settings = value if isinstance(value, Mapping) else {axis: value}  # `model:` settings, or one
                entry["model"] = {**(entry.get("model") or {}), **settings}
                for role in ("producer", "reviser"):  # a runner's own model would win over the agent's
                    own = entry.get(role)
                    if axis == "model" and isinstance(own, Mapping) and "model" in own:
                        entry[role] = {**own, "model": settings["model"]}
        return entry


def agent_variants(agent: Section) -> list[Variant]:
    """The variants ``agent``'s ``variants:`` declares, in the order of its axes; [] when it declares none."""
    if "variants" not in agent:
        return []
    matrix = agent.section("variants", known=AXES,
                           example="`variants: {model: [claude-haiku-4-5, openai/gpt-4.1-mini]}`")
    axes = []
    for axis, raw in matrix.raw.items():
        axes.append([(axis, label, value) for label, value in _axis_values(matrix, str(axis), raw)])
    if not axes:
        raise matrix.error(None, "declares no axis", f"give at least one of: {', '.join(AXES)}")
    variants = [Variant(JOIN.join(label for _, label, _ in combo), tuple(combo)) for combo in product(*axes)]
    if len(variants) > MAX_VARIANTS:
        raise matrix.error(None, f"makes {len(variants)} variants, more than {MAX_VARIANTS}",
                           "every case runs once per variant: vary fewer settings at once")
    return variants


def _axis_values(matrix: Section, axis: str, raw: Any) -> Iterator[tuple[str, Any]]:
    place = matrix.fields.nested(axis)
    if isinstance(raw, Mapping):
        named = list(raw.items())
        for label, _ in named:
            if not isinstance(label, str) or not _NAME.match(label):
                raise place.error(str(label), f"{shown(label)} is not a variant name",
                                  "name it with letters, digits, `_`, `.` or `-` (a `+` joins the names of a "
                                  "variant's values)")
    elif isinstance(raw, list):
        named = [(_value_name(axis, value), value) for value in raw]
    else:
        raise place.expected(None, "a list of values or a mapping of names to values", raw,
                             f"write e.g. `{axis}: [first, second]` or `{axis}: {{a: first, b: second}}`")
    if len(named) < 1:
        raise place.error(None, "has no value", f"list the values of {axis} to compare, or remove the axis")
    seen: dict[str, int] = {}
    for index, (label, value) in enumerate(named):
        where = label if isinstance(raw, Mapping) else f"[{index}]"
        _check_value(place, where, axis, value)
        if not label:
            raise place.error(where, f"cannot name {shown(value)}",
                              f"name the values: `{axis}: {{a: ..., b: ...}}`")
        if label in seen:
            raise place.error(where, f"names a variant {label!r}, as [{seen[label]}] does",
                              f"name the values apart: `{axis}: {{a: ..., b: ...}}`")
        seen[label] = index
    return iter(named)


def _value_name(axis: str, value: Any) -> str:
    """A value's own name: a model's last part, a file's stem, a function's name, ``t0.7``, ``max512``."""
    if axis == "model" and isinstance(value, (str, Mapping)):
        name = str(value.get("model", "") if isinstance(value, Mapping) else value).rsplit("/", 1)[-1]
    elif axis == "producer":
        target = value if isinstance(value, str) else next(
            (v for k, v in value.items() if k in ("prompt", "template", "python", "command")), "") if isinstance(
            value, Mapping) else ""
        target = str(target)
        name = target.rsplit(":", 1)[-1] if ":" in target else PurePosixPath(target.split()[0] if target.split()
                                                                            else "").stem
    elif axis == "temperature" and is_number(value):
        name = f"t{value:g}"
    elif axis == "max_tokens" and is_number(value):
        name = f"max{value:g}"
    else:
        return ""  # options: a mapping has no name of its own
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip("_.-")
    return name if name and _NAME.match(name) else ""


def _check_value(place: Any, where: str, axis: str, value: Any) -> None:
    """What each axis takes; the agent's entry, read again per variant, checks the rest (a file, a model's
    provider)."""
    if axis == "model" and not (isinstance(value, str) or (isinstance(value, Mapping) and "model" in value)):
        raise place.expected(where, "a model name, or `model:` settings with a `model`", value,
                             "write e.g. `claude-haiku-4-5`, or `{model: openai/llama3, base_url: ...}`")
    if axis == "producer" and not isinstance(value, (str, Mapping)):
        raise place.expected(where, "a producer (a .md prompt, or `{python: ...}`, `{command: ...}`)", value)
    if axis == "options" and not isinstance(value, Mapping):
        raise place.expected(where, "a mapping of the producer's options", value,
                             "write e.g. `options: {terse: {style: terse}, warm: {style: warm}}`")
    if axis in ("temperature", "max_tokens") and not is_number(value):
        raise place.expected(where, "a number", value)


def variant_error(error: HarnessConfigError, agent: str, variant: Variant) -> HarnessConfigError:
    """An error met reading a variant's entry, naming the variant where it names the agent's field (the value came
    from ``variants:``): ``agents.writer.producer`` becomes ``agents.writer.variants (producer: warm): producer``.
    A reader that names its place in the file's path (``agents.yaml: agents.writer.producer``) is rewritten alike."""
    axes = ", ".join(f"{axis}: {label}" for axis, label, _ in variant.values)
    ours = f"agents.{agent}."

    def named(text: str) -> str:
        return re.sub(rf"(^|: ){re.escape(ours)}", rf"\g<1>{ours}variants ({axes}): ", text, count=1)

    return HarnessConfigError(named(error.path), named(error.field) if error.field else None, error.problem,
                              error.fix)
