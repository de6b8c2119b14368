"""Checks that score an answer the way published evaluation suites do: ``f1`` (SQuAD's token overlap), ``match``
(a text or number at the beginning, the end or anywhere in the answer) and ``choice`` (the letters a
multiple-choice answer names). docs/graders.md cites where each comes from.

As in harness/checks/compare.py, the reference is the case's ``expected`` unless the check gives its own ``value``,
and a list means any of these (for ``choice``: the letters that together make the right answer).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.fields import Fields
from harness.checks.base import CheckContext, CheckResult
from harness.checks.compare import (
    NORMALIZATIONS,
    expected_values,
    normalize_text,
    parse_normalize,
    parse_values,
    quote,
    quote_any,
)
from harness.checks.registry import check_kind

SQUAD_NORMALIZE = NORMALIZATIONS  # case, punctuation, articles, whitespace: SQuAD's answer normalisation
LOCATIONS = ("begin", "end", "any", "exact")
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?")


def _reference(values: tuple[str, ...] | None, context: CheckContext, place: Fields | None,
               example: str) -> tuple[str, ...]:
    return values if values is not None else expected_values(context, place, example)


# --------------------------------------------------------------------------------------------- f1

_F1_EXAMPLE = 'f1: "{expected}" or f1: {value: [Paris, "the city of Paris"], normalize: [case, punctuation]}'


def token_f1(found: str, wanted: str, steps: tuple[str, ...]) -> float:
    """The harmonic mean of the precision and recall of the answer's words against the reference's, counted with
    repeats, after normalisation; two empty texts agree (1.0), one empty text does not (0.0)."""
    a, b = normalize_text(found, steps).split(), normalize_text(wanted, steps).split()
    if not a or not b:
        return float(a == b)
    common = sum((Counter(a) & Counter(b)).values())
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class F1Check:
    """Scores the token F1 of the answer against the best of the references: a score between 0 and 1, not a
    verdict (a threshold on the dimension or the rubric makes one)."""

    values: tuple[str, ...] | None = None
    normalize: tuple[str, ...] = SQUAD_NORMALIZE
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "f1"

    @property
    def case_slots(self) -> tuple[str, ...]:
        return ("expected",) if self.values is None else ()

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        wanted = _reference(self.values, context, self.place, _F1_EXAMPLE)
        score, best = max((token_f1(artifact, value, self.normalize), value) for value in wanted)
        reason = f"token F1 {score:.2f} against {quote(best)}"
        if score >= 1.0:
            return CheckResult(1.0, reason)
        return CheckResult(score, reason, (f"Answer with the words of {quote_any(wanted)}, and no others",))


@check_kind("f1")
def parse_f1(raw: Any, f: Fields) -> F1Check:
    if raw is True or raw == {}:
        return F1Check(place=f)
    if not isinstance(raw, Mapping):
        return F1Check(parse_values(raw, f, None, _F1_EXAMPLE), place=f)
    opts = f.mapping(raw, allowed=("value", "normalize"), example=_F1_EXAMPLE)
    return F1Check(parse_values(opts["value"], f, "value", _F1_EXAMPLE) if "value" in opts else None,
                   parse_normalize(opts["normalize"], f) if "normalize" in opts else SQUAD_NORMALIZE, place=f)


# --------------------------------------------------------------------------------------------- match

_MATCH_EXAMPLE = "match: {location: end, numeric: true} (the reference at the end of the answer, as a number)"


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _numbers_match(found: str, wanted: str, location: str) -> bool:
    """The number the reference is against the number at ``location`` of the answer (any of them for ``any``),
    compared as numbers: ``1,000`` is ``1000.0``, ``$42.`` holds ``42``."""
    target = _number(wanted.strip().strip("$%"))
    numbers = [n for n in (_number(m) for m in _NUMBER.findall(found)) if n is not None]
    if target is None or not numbers:
        return False
    if location == "exact":
        return len(numbers) == 1 and _number(found.strip().strip("$%.")) == target
    chosen = {"begin": numbers[:1], "end": numbers[-1:], "any": numbers}[location]
    return target in chosen


@dataclass(frozen=True)
class MatchCheck:
    """Score 1.0 when a reference is at ``location`` of the answer (both stripped, case ignored unless said):
    its beginning, its end, anywhere in it, or the whole of it; with ``numeric``, as a number."""

    values: tuple[str, ...] | None = None
    location: str = "end"
    ignore_case: bool = True
    numeric: bool = False
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "match"

    @property
    def case_slots(self) -> tuple[str, ...]:
        return ("expected",) if self.values is None else ()

    def matches(self, found: str, wanted: str) -> bool:
        if self.numeric:
            return _numbers_match(found, wanted, self.location)
        found, wanted = found.strip(), wanted.strip()
        if self.ignore_case:
            found, wanted = found.casefold(), wanted.casefold()
        if self.location == "begin":
            return found.startswith(wanted)
        if self.location == "end":
            return found.rstrip(".!").endswith(wanted.rstrip(".!"))
        return wanted in found if self.location == "any" else found == wanted

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        wanted = _reference(self.values, context, self.place, _MATCH_EXAMPLE)
        where = {"begin": "at the beginning of", "end": "at the end of", "any": "in", "exact": "as the whole of"}
        what = "the number " if self.numeric else ""
        for value in wanted:
            if self.matches(artifact, value):
                return CheckResult(1.0, f"{what}{quote(value)} {where[self.location]} the answer")
        tail = artifact.strip()[-40:] if self.location == "end" else artifact.strip()[:40]
        return CheckResult(0.0, f"{what}{quote_any(wanted)} not {where[self.location]} the answer ({quote(tail)})",
                           (f"Give {quote_any(wanted)} {where[self.location]} the answer",))


@check_kind("match")
def parse_match(raw: Any, f: Fields) -> MatchCheck:
    if raw is True or raw == {}:
        return MatchCheck(place=f)
    if not isinstance(raw, Mapping):
        return MatchCheck(parse_values(raw, f, None, _MATCH_EXAMPLE), place=f)
    opts = f.mapping(raw, allowed=("value", "location", "ignore_case", "numeric"), example=_MATCH_EXAMPLE)
    return MatchCheck(
        parse_values(opts["value"], f, "value", _MATCH_EXAMPLE) if "value" in opts else None,
        f.choice(opts["location"], "location", LOCATIONS, "location") if "location" in opts else "end",
        f.boolean(opts["ignore_case"], "ignore_case") if "ignore_case" in opts else True,
        f.boolean(opts["numeric"], "numeric") if "numeric" in opts else False,
        place=f,
    )


# --------------------------------------------------------------------------------------------- choice

_CHOICE_EXAMPLE = 'choice: "{expected}" (the right letter, e.g. B; a list when several letters make the answer)'
_ANSWER_LINE = re.compile(r"ANSWER\s*:\s*([A-Z](?:\s*(?:,|and|\s)\s*[A-Z])*)\b", re.IGNORECASE)
_LONE_LETTER = re.compile(r"^\W*([A-Z])\W*$", re.IGNORECASE)


def chosen_letters(answer: str) -> frozenset[str] | None:
    """The letters an answer chose: its last ``ANSWER: B`` (or ``ANSWER: A, C``) line, else an answer that is one
    letter (``B``, ``(B)``, ``B)``); None when it names none."""
    lines = _ANSWER_LINE.findall(answer)
    if lines:
        return frozenset(re.findall(r"[A-Z]", lines[-1].upper().replace("AND", " ")))
    lone = _LONE_LETTER.match(answer.strip())
    return frozenset(lone.group(1).upper()) if lone else None


@dataclass(frozen=True)
class ChoiceCheck:
    """Score 1.0 when the answer chose exactly the right letters (all of them, and no other)."""

    values: tuple[str, ...] | None = None
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "choice"

    @property
    def case_slots(self) -> tuple[str, ...]:
        return ("expected",) if self.values is None else ()

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        wanted = frozenset(value.strip().upper() for value in
                           _reference(self.values, context, self.place, _CHOICE_EXAMPLE))
        right = ", ".join(sorted(wanted))
        chosen = chosen_letters(artifact)
        if chosen is None:
            return CheckResult(0.0, f"no choice found (an `ANSWER: {right}` line or one letter); the right one is "
                               f"{right}", (f"End with the line `ANSWER: {right}`",))
        if chosen == wanted:
            return CheckResult(1.0, f"chose {right}")
        return CheckResult(0.0, f"chose {', '.join(sorted(chosen))}; the right one is {right}",
                           (f"Choose {right}",))


@check_kind("choice")
def parse_choice(raw: Any, f: Fields) -> ChoiceCheck:
    if raw is True or raw == {}:
        return ChoiceCheck(place=f)
    if isinstance(raw, Mapping):
        raw = f.mapping(raw, allowed=("value",), example=_CHOICE_EXAMPLE).get("value")
        if raw is None:
            return ChoiceCheck(place=f)
    values = parse_values(raw, f, None, _CHOICE_EXAMPLE)
    for index, value in enumerate(values):
        if "{" not in value and not re.fullmatch(r"\s*[A-Za-z]\s*", value):
            raise f.expected(f"[{index}]" if len(values) > 1 else None, "a letter (A, B, ...)", value,
                             f"write {_CHOICE_EXAMPLE}")
    return ChoiceCheck(values, place=f)
