"""Check options with case slots: ``contains: {all: ["{expected}"]}``, filled from each case when the check runs.

Any kind's options (built-in or a plugin's) may hold slots (harness/base/slots.py): ``{expected}``, ``{input}``,
``{inputs.NAME}`` or an input's bare name. A slot that is a whole option keeps the value's type, so
``contains: {any: "{expected}"}`` with a list expected is a list. Braces that are not a slot stay text:
``regex: '\\d{2,3}'`` is an ordinary regex.

At load time the options are parsed once with every slot filled with a placeholder (the slot as written,
else a number, a list or true, for options whose type the case decides), so a mistake in the rest of the
options is a load-time error naming the file and the field. At run time the options are filled from the
case and parsed by the same kind's parser; parsed checks are cached per filled options.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, shown
from harness.checks.base import Check, CheckContext, CheckResult, check_slots

CACHE_SIZE = 256
"""Parsed checks kept per templated check (one per distinct filled options)."""

# What a slot is filled with at load time, tried in turn until the options parse.
_PLACEHOLDERS: tuple[Callable[[str], Any], ...] = (
    lambda name: "{" + name + "}",
    lambda name: 1,
    lambda name: ["{" + name + "}"],
    lambda name: True,
)


@dataclass(frozen=True)
class _Filled:
    """Options filled from a case, compared and hashed by their JSON text (the parse cache's key)."""

    key: str
    options: Any = field(compare=False)


@dataclass(frozen=True)
class TemplatedCheck:
    """A check whose options hold case slots: filled from the case, then parsed and run, on every run."""

    kind: str
    options: Any
    """The options as written, slots and all."""
    case_slots: tuple[str, ...]
    """The slot names a case must fill (those in the options, and any the kind fills by default)."""
    place: Fields = field(compare=False, repr=False)
    parse: Callable[[_Filled], Check] = field(compare=False, repr=False)

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        return self.check_for(context).run(artifact, context)

    def check_for(self, context: CheckContext) -> Check:
        """The check this case's values make of the options; a HarnessConfigError when they make none."""
        filled: dict[str, Any] = {}

        def lookup(name: str) -> Any:
            try:
                value = slots.case_value(name, context.inputs, context.expected, input_text=context.input_text)
            except KeyError:
                raise missing_slot(self.place, name, context.inputs) from None
            filled[name] = value
            return value

        try:
            options = slots.render_nested(self.options, lookup)
        except slots.SlotFilterError as exc:
            raise self.place.error(None, f"filled from the case: {exc}",
                                   "correct the case's value, or the slot's filter") from None
        try:
            key = json.dumps(options, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):  # a key JSON cannot hold (a date): repr tells options apart as well
            key = repr(options)
        try:
            return self.parse(_Filled(key, options))
        except HarnessConfigError as err:
            values = ", ".join(f"{{{name}}} = {shown(value)}" for name, value in filled.items())
            names = ", ".join(f"{{{name}}}" for name in filled)
            fix = f"correct the case's {names} so the filled option is valid" + (f", or {err.fix}" if err.fix else "")
            raise HarnessConfigError(err.path, err.field, f"filled from the case ({values}): {err.problem}",
                                     fix) from None


def missing_slot(place: Fields, name: str, inputs: Mapping[str, Any]) -> HarnessConfigError:
    """The error for a slot a case cannot fill."""
    if name == "expected":
        return place.error(None, "the case has no expected answer to fill {expected}",
                           "add `expected:` to the case, or take {expected} out of the check")
    have = ", ".join(map(str, inputs)) or "none"
    return place.error(None, f"the case has no input for {{{name}}} (its inputs: {have})",
                       f"add it to the case's inputs, or take {{{name}}} out of the check")


def templated_check(kind: str, options: Any, parser: Callable[[Any, Fields], Check], place: Fields) -> TemplatedCheck:
    """A check of ``kind`` whose ``options`` hold slots, validated as far as the options alone allow.

    Raises the parser's HarnessConfigError when no placeholder makes the options parse, unless the failing
    option is one whole slot and the failure changes with the placeholder (a file name, say: only the case's
    value can tell)."""
    names = slots.nested_slots(options)
    errors: list[HarnessConfigError] = []
    sample: Check | None = None
    for placeholder in _PLACEHOLDERS:
        try:
            sample = parser(slots.render_nested(options, placeholder), place)
            break
        except HarnessConfigError as err:
            errors.append(err)
        except slots.SlotFilterError:
            continue  # a filter this placeholder does not suit ({x|letter} of text): the next one may
    if sample is None and errors:
        first = errors[0]
        depends_on_value = len({(err.field, err.problem) for err in errors}) > 1
        if not depends_on_value or first.field not in set(_whole_slot_fields(options, place.field)):
            raise first
    needed = tuple(dict.fromkeys([*names, *check_slots(sample)]))

    @functools.lru_cache(maxsize=CACHE_SIZE)
    def parse(filled: _Filled) -> Check:
        return parser(filled.options, place)

    return TemplatedCheck(kind, options, needed, place, parse)


def _whole_slot_fields(value: Any, where: str) -> Iterator[str]:
    """The dotted fields (as :class:`Fields` names them) whose value is exactly one slot."""
    if isinstance(value, str):
        if slots.SLOT.fullmatch(value):
            yield where
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _whole_slot_fields(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _whole_slot_fields(item, f"{where}[{index}]")
