"""Checks on the artifact's text: ``regex``, ``contains``, ``banned_phrases`` and ``length``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.fields import Fields, is_number, one_line
from harness.checks.base import (
    REASON_ITEM_LIMIT,
    CheckContext,
    CheckResult,
    count_matches,
    phrase_regex,
    plural,
    quoted_list,
    run_user_pattern,
)
from harness.checks.registry import check_kind

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
        matches = run_user_pattern(self.pattern, artifact, self.path, self.field_name)
        found = matches.count
        shown = f"/{one_line(self.pattern.pattern, 60)}/"
        if self.must_match:
            reason = f"{plural(found, 'match')} of {shown} (need at least {self.min_count})"
            if found >= self.min_count:
                return CheckResult(1.0, reason)
            return CheckResult(0.0, reason, (f"Add text matching {shown} ({found} found, {self.min_count} needed)",))
        reason = f"{plural(found, 'match')} of {shown} (need none)"
        if found == 0:
            return CheckResult(1.0, reason)
        samples = quoted_list(matches.distinct)
        return CheckResult(0.0, f"{reason}: {samples}", (f"Remove text matching {shown}: {samples}",))


@check_kind("regex")
def parse_regex(raw: Any, f: Fields) -> RegexCheck:
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
            return phrase_regex(phrase, case_sensitive=self.case_sensitive).search(artifact) is not None

        parts: list[str] = []
        fixes: list[str] = []
        score = 1.0
        if self.all:
            missing = [p for p in self.all if not present(p)]
            score = (len(self.all) - len(missing)) / len(self.all)
            part = f"{len(self.all) - len(missing)}/{len(self.all)} required phrases present"
            if missing:
                part += f"; missing: {quoted_list(missing)}"
            parts.append(part)
            fixes.extend(f"Add {p!r}" for p in missing)
        if self.any:
            hits = [p for p in self.any if present(p)]
            if hits:
                parts.append(f"found {quoted_list(hits, 1)} of any-of list")
            else:
                score = 0.0
                parts.append(f"none of {quoted_list(self.any)} present")
                fixes.append(f"Add at least one of {quoted_list(self.any, len(self.any))}")
        return CheckResult(score, "; ".join(parts), tuple(fixes))


def _phrases(raw: Any, f: Fields, key: str, example: str) -> tuple[str, ...]:
    """A list of phrases; one text (or number) is a list of one, so ``any: "{expected}"`` takes a case's one
    expected answer as well as its list of them."""
    if isinstance(raw, str) or is_number(raw):
        raw = [raw]
    elif not isinstance(raw, list):
        raise f.expected(key, "text or a non-empty list of text", raw, f"write {example}")
    return f.string_list([str(item) if is_number(item) else item for item in raw], key, example=example)


@check_kind("contains")
def parse_contains(raw: Any, f: Fields) -> ContainsCheck:
    example = "contains: {all: [LinkedIn], any: [Bitwage, TeamPay, Mining]}"
    opts = f.mapping(raw, allowed=("all", "any", "case_sensitive"), example=example, required_any=("all", "any"))
    return ContainsCheck(
        all=_phrases(opts["all"], f, "all", example) if "all" in opts else (),
        any=_phrases(opts["any"], f, "any", example) if "any" in opts else (),
        case_sensitive=f.boolean(opts["case_sensitive"], "case_sensitive") if "case_sensitive" in opts else False,
    )


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


@check_kind("length")
def parse_length(raw: Any, f: Fields) -> LengthCheck:
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
            if (n := count_matches(phrase_regex(phrase, case_sensitive=self.case_sensitive), artifact))
        ]
        if not found:
            return CheckResult(1.0, f"none of {plural(len(self.phrases), 'banned phrase')} found")
        shown = ", ".join(f"{phrase!r} x{n}" for phrase, n in found[:REASON_ITEM_LIMIT])
        if len(found) > REASON_ITEM_LIMIT:
            shown += f" (+{len(found) - REASON_ITEM_LIMIT} more)"
        return CheckResult(0.0, f"banned phrases found: {shown}",
                           tuple(f"Remove banned phrase {phrase!r}" for phrase, _ in found))


@check_kind("banned_phrases")
def parse_banned_phrases(raw: Any, f: Fields) -> BannedPhrasesCheck:
    example = "banned_phrases: [synergy, 'as an AI']"
    if not isinstance(raw, Mapping):
        return BannedPhrasesCheck(f.string_list(raw, None, example=example))
    opts = f.mapping(raw, allowed=("phrases", "case_sensitive"), example=example, required_any=("phrases",))
    return BannedPhrasesCheck(
        f.string_list(opts["phrases"], "phrases", example=example),
        f.boolean(opts["case_sensitive"], "case_sensitive") if "case_sensitive" in opts else False,
    )
