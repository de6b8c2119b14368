"""The ``date_age`` check: score the dates in the artifact by how old they are."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, one_line
from harness.checks.base import REASON_ITEM_LIMIT, CheckContext, CheckResult, quoted_list, run_user_pattern
from harness.checks.registry import check_kind

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
                f"input {self.as_of_input!r} is {one_line(repr(context.inputs[self.as_of_input]), 60)}, not a date",
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
            found = list(run_user_pattern(self.pattern, artifact, self.path, f"{self.field_name}.pattern").groups)
        for text in found:
            if text is None:
                continue
            parsed = _as_date(text, self.date_format)
            if parsed is None:
                unparseable.append(text)
            else:
                dates.setdefault(parsed, None)
        ignored = f"; ignored unparseable {quoted_list(unparseable)}" if unparseable else ""
        if not dates:
            if self.pattern is _ISO_DATE:
                what, fix = "YYYY-MM-DD dates", "Add the date of the evidence (YYYY-MM-DD)"
            else:
                shown = f"/{one_line(self.pattern.pattern, 60)}/"
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
                for date, age, s in stale[:REASON_ITEM_LIMIT]
            )
            more = f" (+{len(stale) - REASON_ITEM_LIMIT} more)" if len(stale) > REASON_ITEM_LIMIT else ""
            reason += f"; stale: {shown}{more}"
        fixes = tuple(
            f"Replace stale date {date.isoformat()} ({age} days old as of {as_of.isoformat()}) "
            f"with one within {full_days} days"
            for date, age, _ in stale
        )
        return CheckResult(total, reason + ignored, fixes)


@check_kind("date_age")
def parse_date_age(raw: Any, f: Fields) -> DateAgeCheck:
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
            raise f.expected("windows", "a mapping of days to scores", table, f"write {example}")
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
            inner = f.nested("as_of").mapping(
                value, allowed=("input",), example="as_of: {input: run_date}", required_any=("input",))
            as_of_input = f.nested("as_of").string(inner["input"], "input")
        else:
            as_of = _as_date(value)
            if as_of is None:
                raise f.expected("as_of", "a date (YYYY-MM-DD) or {input: name}", value,
                                 "write as_of: 2026-01-31 or as_of: {input: run_date}")
    aggregate = f.choice(opts["aggregate"], "aggregate", _AGGREGATES, "aggregate") if "aggregate" in opts else "mean"
    none_found = f.unit_score(opts["none_found"], "none_found") if "none_found" in opts else 0.0
    return DateAgeCheck(tuple(windows), pattern, date_format, as_of, as_of_input, aggregate, none_found,
                        path=str(f.path), field_name=f.field)
