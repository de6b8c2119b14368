"""The contract every check kind keeps, and the text helpers their reasons share.

A check is a frozen object with a ``kind`` and a pure, thread-safe ``run(artifact, context)`` that
returns a :class:`CheckResult`; one check may run on many threads at once.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from harness.base import safe_regex
from harness.base.errors import HarnessConfigError
from harness.base.fields import one_line


@dataclass(frozen=True)
class CheckContext:
    """What a check may look at besides the artifact."""

    inputs: Mapping[str, Any]
    """The case's inputs, already loaded (fixture files are parsed YAML/JSON or text)."""
    today: dt.date
    """"Now" for date windows: UTC today unless the case pins it."""
    expected: Any = None
    """The case's reference answer (any YAML value; a list means any of these), or None when it has none."""
    input_text: str | None = None
    """What ``{input}`` holds when the case says so (a conversation: its user turns, or the turn a reply answers);
    None: the case's inputs as text."""


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


def check_slots(check: Any) -> tuple[str, ...]:
    """The case slots a parsed check fills when it runs (``("expected",)`` for ``equals: "{expected}"``), which
    every case it runs on must be able to fill (:func:`harness.base.slots.missing_case_slots`); () for most checks.

    A check that needs any declares them as ``case_slots``."""
    found = getattr(check, "case_slots", ())
    return tuple(found) if isinstance(found, (tuple, list)) else ()


# --------------------------------------------------------------------------------------------- reasons

REASON_ITEM_LIMIT = 3


def quoted_list(values: Iterable[str], limit: int = REASON_ITEM_LIMIT) -> str:
    items = [repr(v) for v in values]
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{count} {word}s"


# --------------------------------------------------------------------------------------------- matching


@functools.lru_cache(maxsize=1024)
def phrase_regex(phrase: str, *, case_sensitive: bool) -> re.Pattern[str]:
    """Match ``phrase`` as a whole phrase: any run of whitespace matches any other, and a phrase that
    starts or ends with a word character does not match inside a longer word ('AI' is not in 'said')."""
    body = r"\s+".join(re.escape(part) for part in phrase.split())
    if re.match(r"\w", phrase.strip()):
        body = r"(?<!\w)" + body
    if re.search(r"\w$", phrase.strip()):
        body += r"(?!\w)"
    return re.compile(body, 0 if case_sensitive else re.IGNORECASE)


def count_matches(pattern: re.Pattern[str], text: str) -> int:
    return sum(1 for _ in pattern.finditer(text))


def run_user_pattern(pattern: re.Pattern[str], text: str, path: str, field_name: str, *,
                     pick: int | str | None = None) -> safe_regex.Matches:
    """A rubric's own pattern, run where it can be stopped (harness/base/safe_regex.py); ``pick`` as there."""
    try:
        return safe_regex.finditer(pattern, text, pick=pick)
    except safe_regex.RegexTimeout as exc:
        raise HarnessConfigError(path, field_name, f"pattern {one_line(pattern.pattern, 60)!r} {exc} and was "
                                 "stopped (catastrophic backtracking)",
                                 "simplify the pattern: no nested or overlapping quantifiers such as (a+)+ or "
                                 "\\d+\\d+") from None
