"""Deterministic rubric checks: a dimension scored by code instead of the LLM judge.

A rubric dimension may declare ``check:`` with exactly one kind::

    dimensions:
      trigger_recency:
        weight: 0.20
        check:
          date_age: {windows: {14: 1.0, 30: 0.8, 60: 0.5}}

The loader calls :func:`parse_check` once with the raw YAML value; every mistake is a
:class:`~harness.errors.HarnessConfigError` naming the file, the field and the fix. At evaluation time
the judge calls ``check.run(artifact, context)``, which returns a :class:`CheckResult`. Checks are
frozen and hold no state between runs, so one check may run on many threads at once.

Kinds: ``regex``, ``contains``, ``json_schema``, ``length``, ``banned_phrases``, ``date_age``, ``python``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import functools
import importlib
import inspect
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

from harness import safe_regex
from harness.errors import AgentRunError, HarnessConfigError
from harness.safe_regex import backtracking_problem
from harness.yamlfile import parse_yaml, read_text

__all__ = [
    "KNOWN_KINDS",
    "BannedPhrasesCheck",
    "Check",
    "CheckContext",
    "CheckResult",
    "ContainsCheck",
    "DateAgeCheck",
    "JsonSchemaCheck",
    "LengthCheck",
    "PythonCheck",
    "RegexCheck",
    "parse_check",
]


# --------------------------------------------------------------------------------------------- contract


@dataclass(frozen=True)
class CheckContext:
    """What a check may look at besides the artifact."""

    inputs: Mapping[str, Any]
    """The case's inputs, already loaded (fixture files are parsed YAML/JSON or text)."""
    today: dt.date
    """"Now" for date windows: UTC today unless the case pins it."""


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one artifact."""

    score: float
    """0.0 .. 1.0"""
    reason: str
    """One line saying what was found, e.g. ``3/4 dates within 14 days; stale: 2025-12-01``."""
    fixes: tuple[str, ...] = ()
    """Actionable suggested fixes for the reviser."""


class Check(Protocol):
    """A parsed deterministic check; ``run`` is pure and thread-safe."""

    kind: str

    def run(self, artifact: str, context: CheckContext) -> CheckResult: ...


KNOWN_KINDS: tuple[str, ...] = (
    "regex",
    "contains",
    "json_schema",
    "length",
    "banned_phrases",
    "date_age",
    "python",
)


# --------------------------------------------------------------------------------------------- helpers

_REASON_ITEM_LIMIT = 3
_TEXT_LIMIT = 120


def _one_line(text: str, limit: int = _TEXT_LIMIT) -> str:
    """Collapse whitespace so a reason stays on one line, and cap its length."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _quoted_list(values: Iterable[str], limit: int = _REASON_ITEM_LIMIT) -> str:
    items = [repr(v) for v in values]
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def _plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{count} {word}s"


@functools.lru_cache(maxsize=1024)
def _phrase_regex(phrase: str, *, case_sensitive: bool) -> re.Pattern[str]:
    """Match ``phrase`` as a whole phrase: any run of whitespace matches any other, and a phrase that
    starts or ends with a word character does not match inside a longer word ('AI' is not in 'said')."""
    body = r"\s+".join(re.escape(part) for part in phrase.split())
    if re.match(r"\w", phrase.strip()):
        body = r"(?<!\w)" + body
    if re.search(r"\w$", phrase.strip()):
        body += r"(?!\w)"
    return re.compile(body, 0 if case_sensitive else re.IGNORECASE)


def _count(pattern: re.Pattern[str], text: str) -> int:
    return sum(1 for _ in pattern.finditer(text))


class _Fields:
    """Validates one mapping of a check's options and builds errors that name file and field."""

    def __init__(self, path: Path, field: str) -> None:
        self.path = path
        self.field = field

    def error(self, key: str | None, problem: str, fix: str | None = None) -> HarnessConfigError:
        where = f"{self.field}.{key}" if key else self.field
        return HarnessConfigError(self.path, where, problem, fix)

    def mapping(
        self, raw: Any, *, allowed: Sequence[str], example: str, required_any: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        if not isinstance(raw, Mapping):
            raise self.error(
                None, f"expected a mapping, got {type(raw).__name__} {_one_line(repr(raw), 60)}", f"write {example}"
            )
        for key in raw:
            if not isinstance(key, str) or key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.error(
                    str(key), f"unknown key {key!r}{hint}", f"use only {', '.join(allowed)}"
                )
        if required_any and not any(key in raw for key in required_any):
            wanted = " or ".join(required_any)
            raise self.error(None, f"needs at least one of {wanted}", f"write {example}")
        return raw

    def string(self, raw: Any, key: str | None, *, what: str = "a non-empty string") -> str:
        if not isinstance(raw, str) or not raw.strip():
            raise self.error(key, f"expected {what}, got {_one_line(repr(raw), 60)}", f"give {what}")
        return raw

    def boolean(self, raw: Any, key: str) -> bool:
        if not isinstance(raw, bool):
            raise self.error(key, f"expected true or false, got {_one_line(repr(raw), 60)}", "write true or false")
        return raw

    def integer(self, raw: Any, key: str, *, minimum: int) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
            raise self.error(
                key, f"expected a whole number >= {minimum}, got {_one_line(repr(raw), 60)}",
                f"write a whole number >= {minimum}",
            )
        return raw

    def unit_score(self, raw: Any, key: str) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0.0 <= float(raw) <= 1.0:
            raise self.error(
                key, f"expected a score between 0.0 and 1.0, got {_one_line(repr(raw), 60)}",
                "write a number from 0.0 to 1.0",
            )
        return float(raw)

    def string_list(self, raw: Any, key: str | None, *, example: str) -> tuple[str, ...]:
        if isinstance(raw, str) or not isinstance(raw, Sequence) or not raw:
            raise self.error(key, f"expected a non-empty list of strings, got {_one_line(repr(raw), 60)}",
                             f"write {example}")
        out = []
        for index, item in enumerate(raw):
            where = f"{key}[{index}]" if key else f"[{index}]"
            out.append(self.string(item, where))
        return tuple(out)

    def regex(self, raw: Any, key: str | None, flags: int = 0) -> re.Pattern[str]:
        text = self.string(raw, key, what="a regular expression")
        try:
            compiled = re.compile(text, flags)
        except re.error as exc:
            raise self.error(
                key, f"invalid regular expression {text!r}: {exc}",
                "fix the pattern (quote it in YAML with single quotes so backslashes stay literal)",
            ) from None
        problem = backtracking_problem(text, flags)
        if problem:
            raise self.error(
                key, f"pattern {_one_line(text, 80)!r} can backtrack without bound: {problem}",
                "let each part of the text match one way only, e.g. (\\w+\\s)* instead of (\\w+\\s?)*, "
                "or make the inner quantifier possessive (\\w++) or the group atomic (?>...)",
            )
        return compiled


# --------------------------------------------------------------------------------------------- regex

_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


@dataclass(frozen=True)
class RegexCheck:
    """Score 1.0 when ``pattern`` occurs at least ``min_count`` times (or never, if not ``must_match``)."""

    pattern: re.Pattern[str]
    min_count: int = 1
    must_match: bool = True
    path: str = field(default="", compare=False, repr=False)
    field_name: str = field(default="", compare=False, repr=False)
    kind = "regex"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        matches = _run_user_pattern(self.pattern, artifact, self.path, self.field_name)
        found = matches.count
        shown = f"/{_one_line(self.pattern.pattern, 60)}/"
        if self.must_match:
            reason = f"{_plural(found, 'match')} of {shown} (need at least {self.min_count})"
            if found >= self.min_count:
                return CheckResult(1.0, reason)
            return CheckResult(0.0, reason, (f"Add text matching {shown} ({found} found, {self.min_count} needed)",))
        reason = f"{_plural(found, 'match')} of {shown} (need none)"
        if found == 0:
            return CheckResult(1.0, reason)
        samples = _quoted_list(matches.distinct)
        return CheckResult(0.0, f"{reason}: {samples}", (f"Remove text matching {shown}: {samples}",))


def _run_user_pattern(pattern: re.Pattern[str], text: str, path: str, field_name: str) -> safe_regex.Matches:
    """A rubric's own pattern, run where it can be stopped (harness/safe_regex.py)."""
    try:
        return safe_regex.finditer(pattern, text)
    except safe_regex.RegexTimeout as exc:
        raise HarnessConfigError(path, field_name, f"pattern {_one_line(pattern.pattern, 60)!r} {exc} and was "
                                 "stopped (catastrophic backtracking)",
                                 "simplify the pattern: no nested or overlapping quantifiers such as (a+)+ or "
                                 "\\d+\\d+") from None


def _parse_regex(raw: Any, f: _Fields) -> RegexCheck:
    if isinstance(raw, str):
        return RegexCheck(f.regex(raw, None), path=str(f.path), field_name=f.field)
    opts = f.mapping(
        raw, allowed=("pattern", "flags", "min_count", "must_match"),
        example="regex: {pattern: 'BU: \\w+', flags: i, min_count: 1}", required_any=("pattern",),
    )
    flags = 0
    if "flags" in opts:
        letters = f.string(opts["flags"], "flags", what="a string of flag letters from 'imsx'")
        bad = sorted(set(letters) - set(_REGEX_FLAGS))
        if bad:
            raise f.error("flags", f"unknown regex flag(s) {''.join(bad)!r}",
                          "use letters from 'imsx' (i ignore case, m multiline, s dot matches newline, x verbose)")
        for letter in letters:
            flags |= _REGEX_FLAGS[letter]
    must_match = f.boolean(opts["must_match"], "must_match") if "must_match" in opts else True
    min_count = f.integer(opts["min_count"], "min_count", minimum=1) if "min_count" in opts else 1
    if not must_match and "min_count" in opts:
        raise f.error("min_count", "min_count has no meaning with must_match: false (the pattern must never occur)",
                      "drop min_count or set must_match: true")
    return RegexCheck(f.regex(opts["pattern"], "pattern", flags), min_count, must_match, path=str(f.path),
                      field_name=f"{f.field}.pattern")


# --------------------------------------------------------------------------------------------- contains


@dataclass(frozen=True)
class ContainsCheck:
    """Score = fraction of ``all`` phrases present, times 0/1 for "at least one of ``any``" when given.

    Phrases match whole words, and any whitespace matches any whitespace."""

    all: tuple[str, ...] = ()
    any: tuple[str, ...] = ()
    case_sensitive: bool = False
    kind = "contains"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        def present(phrase: str) -> bool:
            return _phrase_regex(phrase, case_sensitive=self.case_sensitive).search(artifact) is not None

        parts: list[str] = []
        fixes: list[str] = []
        score = 1.0
        if self.all:
            missing = [p for p in self.all if not present(p)]
            score = (len(self.all) - len(missing)) / len(self.all)
            part = f"{len(self.all) - len(missing)}/{len(self.all)} required phrases present"
            if missing:
                part += f"; missing: {_quoted_list(missing)}"
            parts.append(part)
            fixes.extend(f"Add {p!r}" for p in missing)
        if self.any:
            hits = [p for p in self.any if present(p)]
            if hits:
                parts.append(f"found {_quoted_list(hits, 1)} of any-of list")
            else:
                score = 0.0
                parts.append(f"none of {_quoted_list(self.any)} present")
                fixes.append(f"Add at least one of {_quoted_list(self.any, len(self.any))}")
        return CheckResult(score, "; ".join(parts), tuple(fixes))


def _parse_contains(raw: Any, f: _Fields) -> ContainsCheck:
    example = "contains: {all: [LinkedIn], any: [Bitwage, TeamPay, Mining]}"
    opts = f.mapping(raw, allowed=("all", "any", "case_sensitive"), example=example, required_any=("all", "any"))
    return ContainsCheck(
        all=f.string_list(opts["all"], "all", example=example) if "all" in opts else (),
        any=f.string_list(opts["any"], "any", example=example) if "any" in opts else (),
        case_sensitive=f.boolean(opts["case_sensitive"], "case_sensitive") if "case_sensitive" in opts else False,
    )


# --------------------------------------------------------------------------------------------- json_schema

_JSON_BLOCK = re.compile(r"```[ \t]*json[ \t]*\r?\n(.*?)```", re.IGNORECASE | re.DOTALL)
_NAME_FIELDS = ("name", "id", "company")
_SOURCES = ("auto", "json_block", "text")


def _json_path(parts: Iterable[str | int], prefix: str = "") -> str:
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


MISSING = object()


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


@dataclass(frozen=True)
class JsonSchemaCheck:
    """Validate the artifact's JSON (or each element of a list inside it) against a JSON Schema.

    ``format`` keywords (``date``, ``email``, ...) are checked, not just annotations."""

    schema: Mapping[str, Any]
    source: str = "auto"
    items: tuple[str, ...] = ()
    validator: Validator | None = field(default=None, compare=False, repr=False)
    kind = "json_schema"

    def _document(self, artifact: str) -> tuple[Any, CheckResult | None]:
        block = _JSON_BLOCK.search(artifact) if self.source != "text" else None
        if self.source == "json_block" and block is None:
            return None, CheckResult(0.0, "no ```json block found", ("Put the JSON output in a ```json fenced block",))
        text = block.group(1) if block else artifact
        where = "```json block" if block else "artifact"
        try:
            return json.loads(text), None
        except json.JSONDecodeError as exc:
            reason = f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            return None, CheckResult(0.0, reason, (f"Make the {where} valid JSON ({exc.msg} at line {exc.lineno})",))

    def _errors(self, instance: Any, prefix: str = "") -> list[str]:
        assert self.validator is not None
        errors = sorted(
            self.validator.iter_errors(instance),
            key=lambda e: [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in e.absolute_path],
        )
        return [f"{_json_path(e.absolute_path, prefix)}: {_one_line(e.message, 100)}" for e in errors]

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        document, failed = self._document(artifact)
        if failed is not None:
            return failed
        if not self.items:
            errors = self._errors(document)
            if not errors:
                return CheckResult(1.0, "JSON matches the schema")
            shown = "; ".join(errors[:_REASON_ITEM_LIMIT])
            more = f" (+{len(errors) - _REASON_ITEM_LIMIT} more)" if len(errors) > _REASON_ITEM_LIMIT else ""
            return CheckResult(0.0, f"{_plural(len(errors), 'schema error')}: {shown}{more}",
                               tuple(f"Fix {e}" for e in errors))

        dotted = ".".join(self.items)
        value = value_at(document, self.items)
        if value is MISSING:
            return CheckResult(0.0, f"no value at {dotted!r} in the JSON", (f"Add the list {dotted!r} to the JSON",))
        if not isinstance(value, list):
            return CheckResult(0.0, f"{dotted!r} is a {type(value).__name__}, not a list",
                               (f"Make {dotted!r} a JSON list",))
        if not value:
            return CheckResult(0.0, f"{dotted!r} is an empty list", (f"Add at least one item to {dotted!r}",))
        invalid: list[tuple[str, str]] = []
        for index, element in enumerate(value):
            errors = self._errors(element, f"{dotted}[{index}]")
            if errors:
                invalid.append((self._label(element, index), errors[0]))
        valid = len(value) - len(invalid)
        reason = f"{valid}/{len(value)} items in {dotted!r} valid"
        if invalid:
            reason += "; invalid: " + "; ".join(f"{label} ({error})" for label, error in invalid[:_REASON_ITEM_LIMIT])
            if len(invalid) > _REASON_ITEM_LIMIT:
                reason += f" (+{len(invalid) - _REASON_ITEM_LIMIT} more)"
        return CheckResult(valid / len(value), reason, tuple(f"Fix {label}: {error}" for label, error in invalid))

    @staticmethod
    def _label(element: Any, index: int) -> str:
        if isinstance(element, Mapping):
            for key in _NAME_FIELDS:
                name = element.get(key)
                if isinstance(name, (str, int)) and not isinstance(name, bool) and str(name).strip():
                    return f"item {index} {_one_line(str(name), 40)!r}"
        return f"item {index}"


def _load_schema_file(raw: str, f: _Fields, base_dir: Path) -> Any:
    target = Path(raw) if Path(raw).is_absolute() else base_dir / raw
    if not target.is_file():
        raise f.error("schema", f"cannot read schema file {raw!r} ({target}): no such file",
                      f"check the path; relative paths resolve from {base_dir}")
    text = read_text(target)  # the size limit, and one line for a byte that is not UTF-8
    if target.suffix.lower() in (".yaml", ".yml"):
        return parse_yaml(text, target)  # the nesting and alias guards of every YAML file
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise f.error("schema", f"schema file {raw!r} is not valid JSON: {exc.msg} at line {exc.lineno} "
                      f"column {exc.colno}", "fix the JSON in the schema file") from None
    except RecursionError:
        raise f.error("schema", f"schema file {raw!r} is nested too deeply", "flatten the schema") from None


def _parse_json_schema(raw: Any, f: _Fields, base_dir: Path) -> JsonSchemaCheck:
    example = "json_schema: {schema: schemas/target.json, items: targets}"
    opts = f.mapping(raw, allowed=("schema", "source", "items"), example=example, required_any=("schema",))
    schema_raw = opts["schema"]
    if isinstance(schema_raw, str):
        schema = _load_schema_file(f.string(schema_raw, "schema"), f, base_dir)
        origin = f"schema file {schema_raw!r}"
    elif isinstance(schema_raw, Mapping):
        schema, origin = schema_raw, "inline schema"
    else:
        raise f.error("schema", f"expected an inline mapping or a file path, got {type(schema_raw).__name__}",
                      f"write {example} or an inline mapping such as schema: {{type: object}}")
    if not isinstance(schema, Mapping):
        raise f.error("schema", f"{origin} is a {type(schema).__name__}, not a JSON Schema object",
                      "make the schema a JSON object such as {\"type\": \"object\"}")
    schema = json.loads(json.dumps(schema, default=str))  # plain dicts; YAML dates become strings
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        at = _json_path(exc.absolute_path)
        raise f.error("schema", f"{origin} is not a valid JSON Schema: {_one_line(exc.message)} (at {at})",
                      "make the schema valid for its $schema metaschema (Draft 2020-12 by default)") from None
    source = "auto"
    if "source" in opts:
        source = f.string(opts["source"], "source")
        if source not in _SOURCES:
            raise f.error("source", f"unknown source {source!r}", f"use one of {', '.join(_SOURCES)}")
    items: tuple[str, ...] = ()
    if "items" in opts:
        dotted = f.string(opts["items"], "items", what="a dotted path such as 'targets' or 'data.targets'")
        items = tuple(dotted.split("."))
        if any(not part.strip() for part in items):
            raise f.error("items", f"bad dotted path {dotted!r}",
                          "write keys separated by single dots, e.g. data.targets")
    return JsonSchemaCheck(schema, source, items, cls(schema, format_checker=cls.FORMAT_CHECKER))


# --------------------------------------------------------------------------------------------- length

_LENGTH_UNITS = ("chars", "words", "lines")


def _measure(artifact: str, unit: str) -> int:
    if unit == "chars":
        return len(artifact)
    if unit == "words":
        return len(artifact.split())
    return len(artifact.splitlines())


@dataclass(frozen=True)
class LengthCheck:
    """Score 1.0 when the artifact's chars, words and lines are all inside the given bounds.

    Words are whitespace-separated runs; lines are ``str.splitlines()``."""

    bounds: tuple[tuple[str, int | None, int | None], ...]
    """(unit, min, max) per constrained unit."""
    kind = "length"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        parts: list[str] = []
        fixes: list[str] = []
        for unit, low, high in self.bounds:
            value = _measure(artifact, unit)
            limit = f"{low}..{high}" if low is not None and high is not None else (
                f"min {low}" if low is not None else f"max {high}")
            parts.append(f"{value} {unit} ({limit})")
            if low is not None and value < low:
                fixes.append(f"Lengthen to at least {low} {unit} (now {value})")
            if high is not None and value > high:
                fixes.append(f"Shorten to at most {high} {unit} (now {value})")
        return CheckResult(0.0 if fixes else 1.0, "; ".join(parts), tuple(fixes))


def _parse_length(raw: Any, f: _Fields) -> LengthCheck:
    keys = tuple(f"{edge}_{unit}" for unit in _LENGTH_UNITS for edge in ("min", "max"))
    opts = f.mapping(raw, allowed=keys, example="length: {max_words: 400}", required_any=keys)
    bounds = []
    for unit in _LENGTH_UNITS:
        low = f.integer(opts[f"min_{unit}"], f"min_{unit}", minimum=0) if f"min_{unit}" in opts else None
        high = f.integer(opts[f"max_{unit}"], f"max_{unit}", minimum=0) if f"max_{unit}" in opts else None
        if low is not None and high is not None and high < low:
            raise f.error(f"max_{unit}", f"max_{unit} ({high}) is below min_{unit} ({low})",
                          f"make max_{unit} at least {low}")
        if low is not None or high is not None:
            bounds.append((unit, low, high))
    return LengthCheck(tuple(bounds))


# --------------------------------------------------------------------------------------------- banned_phrases


@dataclass(frozen=True)
class BannedPhrasesCheck:
    """Score 1.0 when no banned phrase occurs (whole words; any whitespace matches any whitespace)."""

    phrases: tuple[str, ...]
    case_sensitive: bool = False
    kind = "banned_phrases"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        found = [
            (phrase, n) for phrase in self.phrases
            if (n := _count(_phrase_regex(phrase, case_sensitive=self.case_sensitive), artifact))
        ]
        if not found:
            return CheckResult(1.0, f"none of {_plural(len(self.phrases), 'banned phrase')} found")
        shown = ", ".join(f"{phrase!r} x{n}" for phrase, n in found[:_REASON_ITEM_LIMIT])
        if len(found) > _REASON_ITEM_LIMIT:
            shown += f" (+{len(found) - _REASON_ITEM_LIMIT} more)"
        return CheckResult(0.0, f"banned phrases found: {shown}",
                           tuple(f"Remove banned phrase {phrase!r}" for phrase, _ in found))


def _parse_banned(raw: Any, f: _Fields) -> BannedPhrasesCheck:
    example = "banned_phrases: [synergy, 'as an AI']"
    if not isinstance(raw, Mapping):
        return BannedPhrasesCheck(f.string_list(raw, None, example=example))
    opts = f.mapping(raw, allowed=("phrases", "case_sensitive"), example=example, required_any=("phrases",))
    return BannedPhrasesCheck(
        f.string_list(opts["phrases"], "phrases", example=example),
        f.boolean(opts["case_sensitive"], "case_sensitive") if "case_sensitive" in opts else False,
    )


# --------------------------------------------------------------------------------------------- date_age

_ISO_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
_AGGREGATES = ("mean", "min")


def _as_date(value: Any, fmt: str | None = None) -> dt.date | None:
    """A date from a date, a datetime or a string (ISO, or ``fmt`` for strptime); None if it is not one."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            if fmt is not None:
                return dt.datetime.strptime(text, fmt).date()
            try:
                return dt.date.fromisoformat(text)
            except ValueError:
                return dt.datetime.fromisoformat(text).date()
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class DateAgeCheck:
    """Score the dates found in the artifact by age. ``windows`` maps a maximum age in days to the
    score of a date at most that old (the smallest window that holds the date wins); older than every
    window scores 0.0; future dates count as age 0."""

    windows: tuple[tuple[int, float], ...]
    """Sorted by days ascending."""
    pattern: re.Pattern[str] = _ISO_DATE
    date_format: str | None = None
    as_of: dt.date | None = None
    as_of_input: str | None = None
    aggregate: str = "mean"
    none_found: float = 0.0
    path: str = field(default="", compare=False, repr=False)
    field_name: str = field(default="", compare=False, repr=False)
    kind = "date_age"

    def _reference(self, context: CheckContext) -> dt.date:
        if self.as_of_input is None:
            return self.as_of or context.today
        if self.as_of_input not in context.inputs:
            raise HarnessConfigError(
                self.path, f"{self.field_name}.as_of.input",
                f"the case has no input {self.as_of_input!r} to read as_of from "
                f"(inputs: {', '.join(sorted(map(str, context.inputs))) or 'none'})",
                f"add inputs.{self.as_of_input} (YYYY-MM-DD) to the case, or pin as_of to a date",
            )
        value = _as_date(context.inputs[self.as_of_input])
        if value is None:
            raise HarnessConfigError(
                self.path, f"{self.field_name}.as_of.input",
                f"input {self.as_of_input!r} is {_one_line(repr(context.inputs[self.as_of_input]), 60)}, not a date",
                f"set inputs.{self.as_of_input} to a date such as 2026-01-31",
            )
        return value

    def _score_for(self, age: int) -> float:
        for days, score in self.windows:
            if age <= days:
                return score
        return 0.0

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        as_of = self._reference(context)
        dates: dict[dt.date, None] = {}
        unparseable: list[str] = []
        if self.pattern is _ISO_DATE:
            found = [match.group(1) for match in self.pattern.finditer(artifact)]
        else:
            found = list(_run_user_pattern(self.pattern, artifact, self.path, f"{self.field_name}.pattern").groups)
        for text in found:
            if text is None:
                continue
            parsed = _as_date(text, self.date_format)
            if parsed is None:
                unparseable.append(text)
            else:
                dates.setdefault(parsed, None)
        ignored = f"; ignored unparseable {_quoted_list(unparseable)}" if unparseable else ""
        if not dates:
            if self.pattern is _ISO_DATE:
                what, fix = "YYYY-MM-DD dates", "Add the date of the evidence (YYYY-MM-DD)"
            else:
                shown = f"/{_one_line(self.pattern.pattern, 60)}/"
                what, fix = f"dates matching {shown}", f"Add a date matching {shown}"
            return CheckResult(self.none_found, f"no {what} found{ignored}", (fix,) if self.none_found < 1.0 else ())

        best = max(score for _, score in self.windows)
        full_days = max(days for days, score in self.windows if score == best)
        scored = [(date, max(0, (as_of - date).days)) for date in dates]
        per_date = [(date, age, self._score_for(age)) for date, age in scored]
        scores = [s for _, _, s in per_date]
        total = min(scores) if self.aggregate == "min" else sum(scores) / len(scores)
        stale = [(date, age, s) for date, age, s in per_date if s < best]

        reason = f"{len(per_date) - len(stale)}/{len(per_date)} dates within {full_days} days of {as_of.isoformat()}"
        if len(self.windows) > 1:
            reason += f"; {self.aggregate} {total:.2f}"
        if stale:
            shown = ", ".join(
                f"{date.isoformat()} ({age} days" + (f", {s:.2f})" if len(self.windows) > 1 else ")")
                for date, age, s in stale[:_REASON_ITEM_LIMIT]
            )
            more = f" (+{len(stale) - _REASON_ITEM_LIMIT} more)" if len(stale) > _REASON_ITEM_LIMIT else ""
            reason += f"; stale: {shown}{more}"
        fixes = tuple(
            f"Replace stale date {date.isoformat()} ({age} days old as of {as_of.isoformat()}) "
            f"with one within {full_days} days"
            for date, age, _ in stale
        )
        return CheckResult(total, reason + ignored, fixes)


def _parse_date_age(raw: Any, f: _Fields, path: Path) -> DateAgeCheck:
    example = "date_age: {windows: {14: 1.0, 30: 0.8, 60: 0.5}}"
    opts = f.mapping(
        raw, allowed=("max_days", "windows", "pattern", "format", "as_of", "aggregate", "none_found"),
        example=example, required_any=("max_days", "windows"),
    )
    if "max_days" in opts and "windows" in opts:
        raise f.error(None, "has both max_days and windows",
                      "keep one: max_days: N is short for windows: {N: 1.0}")
    if "max_days" in opts:
        windows: list[tuple[int, float]] = [(f.integer(opts["max_days"], "max_days", minimum=0), 1.0)]
    else:
        table = opts["windows"]
        if not isinstance(table, Mapping) or not table:
            raise f.error("windows", f"expected a mapping of days to scores, got {_one_line(repr(table), 60)}",
                          f"write {example}")
        windows = []
        for key, value in table.items():
            days = int(key) if isinstance(key, str) and key.strip().isdigit() else key
            days = f.integer(days, f"windows.{key}", minimum=0)
            windows.append((days, f.unit_score(value, f"windows.{key}")))
        windows.sort()
        for (short, short_score), (long, long_score) in zip(windows, windows[1:]):
            if long_score > short_score:
                raise f.error(f"windows.{long}", f"a date up to {long} days old scores {long_score}, more than "
                              f"the {short_score} of the {short}-day window", "make scores fall as the window grows")
    pattern = _ISO_DATE
    if "pattern" in opts:
        pattern = f.regex(opts["pattern"], "pattern")
        if pattern.groups != 1:
            raise f.error("pattern",
                          f"pattern {pattern.pattern!r} has {pattern.groups} capture groups, needs exactly 1",
                          "wrap the date part in one group, e.g. 'Trigger date: (\\d{4}-\\d{2}-\\d{2})', and make "
                          "other groups non-capturing with (?:...)")
    date_format = None
    if "format" in opts:
        date_format = f.string(opts["format"], "format", what="a strptime format such as '%b %d, %Y'")
        try:
            dt.date(2026, 1, 31).strftime(date_format)
            if "%" not in date_format:
                raise ValueError("no % directive")
        except ValueError as exc:
            raise f.error("format", f"bad date format {date_format!r}: {exc}",
                          "use strptime directives such as '%Y-%m-%d' or '%b %d, %Y'") from None
    as_of: dt.date | None = None
    as_of_input: str | None = None
    if "as_of" in opts:
        value = opts["as_of"]
        if isinstance(value, Mapping):
            inner = _Fields(f.path, f"{f.field}.as_of").mapping(
                value, allowed=("input",), example="as_of: {input: run_date}", required_any=("input",))
            as_of_input = _Fields(f.path, f"{f.field}.as_of").string(inner["input"], "input")
        else:
            as_of = _as_date(value)
            if as_of is None:
                raise f.error("as_of",
                              f"expected a date (YYYY-MM-DD) or {{input: name}}, got {_one_line(repr(value), 60)}",
                              "write as_of: 2026-01-31 or as_of: {input: run_date}")
    aggregate = "mean"
    if "aggregate" in opts:
        aggregate = f.string(opts["aggregate"], "aggregate")
        if aggregate not in _AGGREGATES:
            raise f.error("aggregate", f"unknown aggregate {aggregate!r}", f"use one of {', '.join(_AGGREGATES)}")
    none_found = f.unit_score(opts["none_found"], "none_found") if "none_found" in opts else 0.0
    return DateAgeCheck(tuple(windows), pattern, date_format, as_of, as_of_input, aggregate, none_found,
                        path=str(path), field_name=f.field)


# --------------------------------------------------------------------------------------------- python

_SYS_PATH_LOCK = threading.RLock()


@contextlib.contextmanager
def _on_sys_path(root: Path) -> Iterator[None]:
    """Put ``root`` first on sys.path for the duration, unless it is already there."""
    entry = str(root)
    with _SYS_PATH_LOCK:
        added = entry not in sys.path and str(root.resolve()) not in sys.path
        if added:
            sys.path.insert(0, entry)
        importlib.invalidate_caches()
        try:
            yield
        finally:
            if added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)


def _is_under(file: str | None, root: Path) -> bool:
    if not file:
        return False
    try:
        Path(file).resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _import_callable(spec: str, f: _Fields, key: str | None, import_root: Path) -> Callable[..., Any]:
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not all(p.isidentifier() for p in module_name.split(".")) or not all(
        p.isidentifier() for p in attr_path.split(".")
    ):
        raise f.error(key, f"{spec!r} is not 'module:function'",
                      "write e.g. 'my_checks:score_sources' (module importable from the rubric's project root)")
    top = module_name.split(".")[0]
    with _on_sys_path(import_root):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
                raise f.error(key, f"module {module_name!r} cannot be imported: not found under {import_root} "
                              "or on sys.path",
                              f"create {import_root / module_name.replace('.', '/')}.py or fix the name") from None
            raise f.error(key, f"module {module_name!r} cannot be imported: it needs {exc.name!r}, which is missing",
                          f"install {exc.name!r} or remove the import") from None
        except Exception as exc:  # a broken user module: SyntaxError, NameError, anything at import time
            problem = f"module {module_name!r} cannot be imported: {type(exc).__name__}: {_one_line(str(exc))}"
            raise f.error(key, problem,
                          "fix the module so `python -c 'import " + module_name + "'` works") from None
    candidates = (import_root / f"{top}.py", import_root / top / "__init__.py")
    if any(c.exists() for c in candidates) and not _is_under(getattr(module, "__file__", None), import_root):
        raise f.error(key, f"module name {module_name!r} is already taken by {getattr(module, '__file__', None)}, "
                      f"so {import_root / top} is not the one imported",
                      "rename the check module to a unique name")
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
            close = difflib.get_close_matches(part, names, n=1)
            hint = (f"did you mean {close[0]!r}?" if close
                    else f"define it (callables there: {', '.join(names[:8]) or 'none'})")
            raise f.error(key, f"module {module_name!r} has no function {attr_path!r}", hint)
        target = getattr(target, part)
    if not callable(target):
        raise f.error(key, f"{spec} is a {type(target).__name__}, not a function",
                      "point at a function taking (artifact, context, **options)")
    return target


def import_callable(spec: str, *, path: Path | str, field: str, import_root: Path) -> Callable[..., Any]:
    """Import ``module:function`` from ``import_root``; every problem names ``path`` and ``field``."""
    return _import_callable(spec, _Fields(Path(path), field), None, import_root)


def _to_result(spec: str, value: Any) -> CheckResult:
    """Turn what a check function returned into a CheckResult, or raise AgentRunError."""

    def score_of(raw: Any) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise AgentRunError(f"check {spec} returned score {_one_line(repr(raw), 60)} "
                                f"({type(raw).__name__}); return a number from 0.0 to 1.0")
        if math.isnan(raw) or not 0.0 <= raw <= 1.0:
            raise AgentRunError(f"check {spec} returned score {raw!r}, outside 0.0..1.0")
        return float(raw)

    def reason_of(raw: Any, score: float) -> str:
        if raw is None:
            return f"{spec} scored {score:.2f}"
        if not isinstance(raw, str):
            raise AgentRunError(f"check {spec} returned reason {_one_line(repr(raw), 60)} "
                                f"({type(raw).__name__}); return a string")
        return _one_line(raw, 300) or f"{spec} scored {score:.2f}"

    def fixes_of(raw: Any) -> tuple[str, ...]:
        if raw is None:
            return ()
        if isinstance(raw, str) or not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
            raise AgentRunError(f"check {spec} returned fixes {_one_line(repr(raw), 60)}; return a list of strings")
        return tuple(raw)

    if isinstance(value, CheckResult):
        score = score_of(value.score)
        return CheckResult(score, reason_of(value.reason, score), fixes_of(value.fixes))
    if isinstance(value, tuple):
        if len(value) != 2:
            raise AgentRunError(f"check {spec} returned a tuple of {len(value)}; return (score, reason)")
        score = score_of(value[0])
        return CheckResult(score, reason_of(value[1], score))
    if isinstance(value, Mapping):
        extra = sorted(set(map(str, value)) - {"score", "reason", "fixes"})
        if extra or "score" not in value:
            problem = f"unknown keys {', '.join(extra)}" if extra else "no 'score'"
            raise AgentRunError(f"check {spec} returned a dict with {problem}; return {{score, reason, fixes}}")
        score = score_of(value["score"])
        return CheckResult(score, reason_of(value.get("reason"), score), fixes_of(value.get("fixes")))
    score = score_of(value)
    return CheckResult(score, reason_of(None, score))


@dataclass(frozen=True)
class PythonCheck:
    """Call ``function(artifact, context, **options)``; it returns a float, ``(score, reason)``,
    ``{score, reason, fixes}`` or a CheckResult. An exception or a malformed return is an AgentRunError."""

    spec: str
    function: Callable[..., Any] = field(compare=False, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    kind = "python"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        try:
            value = self.function(artifact, context, **dict(self.options))
        except Exception as exc:
            raise AgentRunError(f"check {self.spec} raised {type(exc).__name__}: {_one_line(str(exc), 300)}") from exc
        return _to_result(self.spec, value)


def _parse_python(raw: Any, f: _Fields, import_root: Path) -> PythonCheck:
    example = "python: {function: 'my_checks:score_sources', options: {min_sources: 2}}"
    if isinstance(raw, str):
        spec, key, options = raw, None, {}
    else:
        opts = f.mapping(raw, allowed=("function", "options"), example=example, required_any=("function",))
        spec, key = f.string(opts["function"], "function"), "function"
        options = opts.get("options", {})
        if options is None:
            options = {}
        if not isinstance(options, Mapping) or not all(isinstance(k, str) and k.isidentifier() for k in options):
            raise f.error("options", f"expected a mapping of keyword arguments, got {_one_line(repr(options), 60)}",
                          "write options: {name: value} with identifier names")
    function = _import_callable(f.string(spec, key), f, key, import_root)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have no signature; the call will tell
        signature = None
    if signature is not None:
        try:
            signature.bind("artifact", None, **options)
        except TypeError as exc:
            names = ", ".join(options) or "no options"
            raise f.error(key, f"{spec} cannot be called as {spec.partition(':')[2]}(artifact, context, **options) "
                          f"with {names}: {exc}",
                          "accept (artifact, context) plus each option as a keyword argument") from None
    return PythonCheck(spec, function, dict(options))


# --------------------------------------------------------------------------------------------- entry point


def parse_check(raw: Any, *, path: Path, field: str, base_dir: Path, import_root: Path) -> Check:
    """Parse the YAML value under a dimension's ``check:`` into a runnable check.

    ``path`` and ``field`` (e.g. ``dimensions.bu_fit.check``) name the rubric file and field in errors;
    ``base_dir`` resolves relative schema paths; ``import_root`` is put on ``sys.path`` while importing
    ``module:function`` callables (temporarily, under a lock, only if not already there; a callable that
    imports more modules lazily at call time must find them on the normal sys.path).

    Raises HarnessConfigError for every mistake.
    """
    kinds = ", ".join(KNOWN_KINDS)
    if not isinstance(raw, Mapping) or len(raw) != 1:
        if isinstance(raw, Mapping) and len(raw) > 1:
            problem = f"has {len(raw)} keys ({', '.join(map(str, raw))}); a check has exactly one kind"
            fix = "keep one kind per dimension (split the others into their own dimensions)"
        else:
            problem = f"expected a mapping with one key, the check kind; got {_one_line(repr(raw), 60)}"
            fix = f"write e.g. check: {{regex: 'BU: \\w+'}}; kinds: {kinds}"
        raise HarnessConfigError(path, field, problem, fix)
    (kind, options), = raw.items()
    if kind not in KNOWN_KINDS:
        close = difflib.get_close_matches(str(kind), KNOWN_KINDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise HarnessConfigError(path, f"{field}.{kind}", f"unknown check kind {kind!r}",
                                 f"{hint}known kinds: {kinds}")
    f = _Fields(path, f"{field}.{kind}")
    if kind == "regex":
        return _parse_regex(options, f)
    if kind == "contains":
        return _parse_contains(options, f)
    if kind == "json_schema":
        return _parse_json_schema(options, f, base_dir)
    if kind == "length":
        return _parse_length(options, f)
    if kind == "banned_phrases":
        return _parse_banned(options, f)
    if kind == "date_age":
        return _parse_date_age(options, f, path)
    return _parse_python(options, f, import_root)
