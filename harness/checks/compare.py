"""Checks against a reference answer: ``equals``, ``similar``, ``json_path`` and ``selected`` (a router's choice).

The reference is the case's ``expected`` unless the check gives its own ``value``; a list means any of these.
Text is compared after normalisation: ``normalize: true`` (the default) ignores case and runs of whitespace;
a list picks from ``case``, ``whitespace``, ``punctuation`` and ``articles`` (SQuAD's answer normalisation);
``false`` compares exactly.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, is_number, shown
from harness.base.slots import as_text
from harness.checks.base import REASON_ITEM_LIMIT, CheckContext, CheckResult, run_user_pattern
from harness.checks.json_schema import NotJson, artifact_json
from harness.checks.paths import MISSING, dotted, path_option, value_at
from harness.checks.registry import check_kind

NORMALIZATIONS = ("case", "whitespace", "punctuation", "articles")
DEFAULT_NORMALIZE = ("case", "whitespace")
METHODS = ("ratio", "tokens")
QUOTE_LIMIT = 60

_ARTICLES = re.compile(r"\b(?:a|an|the)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------------------------- text


def normalize_text(text: str, steps: tuple[str, ...]) -> str:
    """``text`` with the chosen normalisations applied, in SQuAD's order: case, punctuation, articles, whitespace."""
    if "case" in steps:
        text = text.casefold()
    if "punctuation" in steps:
        text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    if "articles" in steps:
        text = _ARTICLES.sub(" ", text)
    if "whitespace" in steps:
        text = " ".join(text.split())
    return text


def similarity(found: str, wanted: str, method: str) -> float:
    """0..1: difflib's ratio of the two texts, or (``tokens``) the overlap of their sets of words (Dice)."""
    if method == "tokens":
        a, b = set(_WORD.findall(found)), set(_WORD.findall(wanted))
        return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))
    return difflib.SequenceMatcher(None, found, wanted, autojunk=False).ratio()


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """A text as a reason shows it: quoted, on one line, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def quote_any(values: tuple[str, ...]) -> str:
    """``'Paris'``, or ``one of 'Paris', 'Paris, France'`` for several."""
    if len(values) == 1:
        return quote(values[0])
    shown_values = ", ".join(quote(v) for v in values[:REASON_ITEM_LIMIT])
    if len(values) > REASON_ITEM_LIMIT:
        shown_values += f" (+{len(values) - REASON_ITEM_LIMIT} more)"
    return f"one of {shown_values}"


def _how(steps: tuple[str, ...]) -> str:
    return f"ignoring {', '.join(s for s in NORMALIZATIONS if s in steps)}" if steps else "exactly"


# --------------------------------------------------------------------------------------------- options


def plain(value: Any) -> Any:
    """A YAML value as JSON would hold it (a date becomes its ISO text)."""
    return json.loads(json.dumps(value, default=str))


def parse_normalize(raw: Any, f: Fields, key: str = "normalize") -> tuple[str, ...]:
    """``normalize:``: true (case, whitespace), false (exact) or a list from :data:`NORMALIZATIONS`."""
    if isinstance(raw, bool):
        return DEFAULT_NORMALIZE if raw else ()
    if isinstance(raw, str) or not isinstance(raw, list):
        raise f.expected(key, f"true, false or a list from {', '.join(NORMALIZATIONS)}", raw,
                         "write normalize: [case, whitespace, punctuation, articles] or normalize: false")
    steps = [f.choice(step, f"{key}[{i}]", NORMALIZATIONS, "normalisation") for i, step in enumerate(raw)]
    return tuple(s for s in NORMALIZATIONS if s in steps)


def parse_values(raw: Any, f: Fields, key: str | None, example: str) -> tuple[str, ...]:
    """A value to compare with, as text: text, a number, true/false, or a non-empty list of them (any of these)."""
    value = plain(raw)
    items = value if isinstance(value, list) else [value]
    what = "text, a number or a non-empty list of them"
    if not items:
        raise f.expected(key, what, raw, f"write {example}")
    for index, item in enumerate(items):
        if not (isinstance(item, (str, bool)) or is_number(item)):
            at = f"{key or ''}[{index}]" if isinstance(value, list) else key
            raise f.expected(at, what, item, f"write {example}; compare a field of JSON with json_path")
    return tuple(as_text(item) for item in items)


def expected_values(context: CheckContext, place: Fields | None, example: str) -> tuple[str, ...]:
    """The case's expected answer as the values to compare with, or a HarnessConfigError naming the check."""
    where = place or Fields.of("<check>")
    if context.expected is None:
        raise where.error(None, "the case has no expected answer to compare with",
                          "add `expected:` to the case, or give the check its own `value:`")
    try:
        return parse_values(context.expected, where, None, example)
    except HarnessConfigError:
        raise where.error(None, f"the case's expected answer {shown(context.expected)} is not text, a number "
                          "or a list of them", "make `expected:` text (or a list of texts), or compare a field "
                          "of JSON with json_path") from None


# --------------------------------------------------------------------------------------------- equals

_EQUALS_EXAMPLE = 'equals: "{expected}" or equals: {value: Paris, normalize: [case, whitespace, punctuation]}'


@dataclass(frozen=True)
class EqualsCheck:
    """Score 1.0 when the artifact, normalised, equals one of the values, normalised; else 0.0."""

    values: tuple[str, ...] | None = None
    """The accepted answers; None: the case's expected."""
    normalize: tuple[str, ...] = DEFAULT_NORMALIZE
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "equals"

    @property
    def case_slots(self) -> tuple[str, ...]:
        return ("expected",) if self.values is None else ()

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        wanted = self.values if self.values is not None else expected_values(context, self.place, _EQUALS_EXAMPLE)
        found = normalize_text(artifact, self.normalize)
        for value in wanted:
            if normalize_text(value, self.normalize) == found:
                return CheckResult(1.0, f"equals {quote(value)} ({_how(self.normalize)})")
        return CheckResult(0.0, f"expected {quote_any(wanted)}, found {quote(artifact)} ({_how(self.normalize)})",
                           (f"Answer with exactly {quote_any(wanted)} and nothing else",))


@check_kind("equals")
def parse_equals(raw: Any, f: Fields) -> EqualsCheck:
    if not isinstance(raw, Mapping):
        return EqualsCheck(parse_values(raw, f, None, _EQUALS_EXAMPLE), place=f)
    opts = f.mapping(raw, allowed=("value", "normalize"), example=_EQUALS_EXAMPLE)
    return EqualsCheck(
        parse_values(opts["value"], f, "value", _EQUALS_EXAMPLE) if "value" in opts else None,
        parse_normalize(opts["normalize"], f) if "normalize" in opts else DEFAULT_NORMALIZE,
        place=f,
    )


# --------------------------------------------------------------------------------------------- selected

_SELECTED_EXAMPLE = "selected: summarize, or selected: [summarize, digest]"
# where a router's JSON answer names what it chose
CHOICE_KEYS = ("skill", "agent", "selected", "selection", "choice", "route", "tool")


@dataclass(frozen=True)
class SelectedCheck:
    """Score 1.0 when a router chose one of ``values`` (the selection gate, checked by rule): the choice is the
    JSON answer's ``skill``, ``agent``, ``selected``, ``choice``, ``route`` or ``tool``, else its first line."""

    values: tuple[str, ...]
    kind = "selected"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        chosen = chosen_name(artifact)
        wanted = {normalize_text(v, NORMALIZATIONS[:3]) for v in self.values}
        if chosen is not None and normalize_text(chosen, NORMALIZATIONS[:3]) in wanted:
            return CheckResult(1.0, f"chose {quote(chosen)}")
        found = "no choice" if chosen is None else f"chose {quote(chosen)}"
        return CheckResult(0.0, f"{found}; the right one is {quote_any(self.values)}",
                           (f"Choose {quote_any(self.values)} for this request",))


def chosen_name(artifact: str) -> str | None:
    """What a router's answer names: a choice key of its JSON object, else its first line that says something."""
    text = artifact.strip()
    if text.startswith("{"):
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if isinstance(answer, Mapping):
            for key in CHOICE_KEYS:
                if isinstance(answer.get(key), str):
                    return answer[key]
            return None
    for line in text.splitlines():
        line = line.strip().strip("`*_\"'. ")
        if line:
            return line
    return None


@check_kind("selected")
def parse_selected(raw: Any, f: Fields) -> SelectedCheck:
    return SelectedCheck(parse_values(raw, f, None, _SELECTED_EXAMPLE))


# --------------------------------------------------------------------------------------------- similar

_SIMILAR_EXAMPLE = 'similar: {value: "{expected}", threshold: 0.8, method: ratio}'


@dataclass(frozen=True)
class SimilarCheck:
    """The artifact's similarity to the closest value (difflib ratio, or word-set overlap with ``tokens``),
    after normalisation. Without a threshold the score is the similarity; with one, 1.0 at or above it."""

    values: tuple[str, ...] | None = None
    """The reference answers; None: the case's expected."""
    threshold: float | None = None
    method: str = "ratio"
    normalize: tuple[str, ...] = DEFAULT_NORMALIZE
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "similar"

    @property
    def case_slots(self) -> tuple[str, ...]:
        return ("expected",) if self.values is None else ()

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        wanted = self.values if self.values is not None else expected_values(context, self.place, _SIMILAR_EXAMPLE)
        found = normalize_text(artifact, self.normalize)
        best, closest = max(((similarity(found, normalize_text(v, self.normalize), self.method), v) for v in wanted),
                            key=lambda pair: pair[0])
        reason = f"similarity {best:.2f} to {quote(closest)} ({self.method}"
        if self.threshold is None:
            fixes = () if best >= 1.0 else (f"Bring the answer closer to {quote(closest)} (similarity {best:.2f})",)
            return CheckResult(best, reason + ")", fixes)
        reason += f", threshold {self.threshold:.2f})"
        if best >= self.threshold - 1e-9:
            return CheckResult(1.0, reason)
        return CheckResult(0.0, reason, (f"Bring the answer closer to {quote(closest)} (similarity {best:.2f}, "
                                         f"need {self.threshold:.2f})",))


@check_kind("similar")
def parse_similar(raw: Any, f: Fields) -> SimilarCheck:
    if not isinstance(raw, Mapping):
        return SimilarCheck(parse_values(raw, f, None, _SIMILAR_EXAMPLE), place=f)
    opts = f.mapping(raw, allowed=("value", "threshold", "method", "normalize"), example=_SIMILAR_EXAMPLE)
    return SimilarCheck(
        parse_values(opts["value"], f, "value", _SIMILAR_EXAMPLE) if "value" in opts else None,
        f.unit_score(opts["threshold"], "threshold") if "threshold" in opts else None,
        f.choice(opts["method"], "method", METHODS, "similarity method") if "method" in opts else "ratio",
        parse_normalize(opts["normalize"], f) if "normalize" in opts else DEFAULT_NORMALIZE,
        place=f,
    )


# --------------------------------------------------------------------------------------------- json_path

_TESTS = ("equals", "in", "matches", "exists")
_JSON_PATH_EXAMPLE = "json_path: {path: answer.items.0.name, equals: Paris}"


def same_value(found: Any, wanted: Any, steps: tuple[str, ...]) -> bool:
    """JSON values compared: as normalised text when either is text (``"42"`` equals 42), else as data
    (true is not 1)."""
    if isinstance(found, str) or isinstance(wanted, str):
        return normalize_text(as_text(found), steps) == normalize_text(as_text(wanted), steps)
    if isinstance(found, bool) != isinstance(wanted, bool):
        return False
    return bool(found == wanted)


@dataclass(frozen=True)
class JsonPathCheck:
    """Score 1.0 when the value at ``path`` in the artifact's JSON passes the test: it equals one of
    ``values`` (``equals``, ``in``), it matches ``pattern`` (``matches``) or it is there, or not (``exists``)."""

    path: tuple[str, ...]
    test: str
    values: tuple[Any, ...] = ()
    pattern: re.Pattern[str] | None = None
    exists: bool = True
    normalize: tuple[str, ...] = DEFAULT_NORMALIZE
    place: Fields | None = field(default=None, compare=False, repr=False)
    kind = "json_path"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        try:
            document = artifact_json(artifact)
        except NotJson as exc:
            return CheckResult(0.0, exc.problem, (exc.fix,))
        where = dotted(self.path)
        value = value_at(document, self.path)
        if self.test == "exists":
            there = value is not MISSING
            must = "must be" if self.exists else "must not be"
            reason = f"{where} is {'there' if there else 'missing'} in the JSON ({must})"
            if there == self.exists:
                return CheckResult(1.0, reason)
            fix = f"Add {where} to the JSON" if self.exists else f"Remove {where} from the JSON"
            return CheckResult(0.0, reason, (fix,))
        if value is MISSING:
            return CheckResult(0.0, f"no value at {where} in the JSON", (f"Add {where} to the JSON",))
        found = as_text(value)
        if self.test == "matches":
            assert self.pattern is not None
            shown_pattern = f"/{self.pattern.pattern}/"
            place = self.place or Fields.of("<check>")
            count = run_user_pattern(self.pattern, found, str(place.path), place.where("matches")).count
            reason = f"{where} = {quote(found)} {'matches' if count else 'does not match'} {shown_pattern}"
            return CheckResult(1.0, reason) if count else CheckResult(
                0.0, reason, (f"Make {where} match {shown_pattern} (now {quote(found)})",))
        wanted = tuple(as_text(v) for v in self.values)
        if any(same_value(value, v, self.normalize) for v in self.values):
            return CheckResult(1.0, f"{where} = {quote(found)} ({_how(self.normalize)})")
        return CheckResult(0.0, f"{where} = {quote(found)}, expected {quote_any(wanted)} ({_how(self.normalize)})",
                           (f"Make {where} {quote_any(wanted)} (now {quote(found)})",))


@check_kind("json_path")
def parse_json_path(raw: Any, f: Fields) -> JsonPathCheck:
    opts = f.mapping(raw, allowed=("path", *_TESTS, "normalize"), example=_JSON_PATH_EXAMPLE,
                     required_any=("path",))
    given = [test for test in _TESTS if test in opts]
    if len(given) != 1:
        problem = f"has {' and '.join(given)}" if given else "has no test"
        raise f.error(None, f"{problem}; a json_path check has exactly one of {', '.join(_TESTS)}",
                      f"write e.g. {_JSON_PATH_EXAMPLE}")
    test = given[0]
    path = path_option(opts["path"], f, "path")
    if "normalize" in opts and test not in ("equals", "in"):
        raise f.error("normalize", f"normalize has no meaning with {test}", "drop normalize, or test with equals/in")
    normalize = parse_normalize(opts["normalize"], f) if "normalize" in opts else DEFAULT_NORMALIZE
    if test == "exists":
        return JsonPathCheck(path, test, exists=f.boolean(opts["exists"], "exists"), place=f)
    if test == "matches":
        return JsonPathCheck(path, test, pattern=f.regex(opts["matches"], "matches"), place=f)
    values = plain(opts[test])
    if test == "in":
        values = values if isinstance(values, list) else [values]
        if not values:
            raise f.expected("in", "a non-empty list of values", opts[test], "write in: [Paris, Lyon]")
    else:
        values = [values]
    return JsonPathCheck(path, test, tuple(values), normalize=normalize, place=f)
