"""Where a check is declared, and the validation of its options with errors that name file and field.

Every parser, built-in or from a plugin, gets one :class:`Fields`: ``fields.path`` is the rubric file,
``fields.field`` the dotted field of the kind (``dimensions.bu_fit.check.regex``), and each helper
returns the value it validated or raises a one-line :class:`~harness.errors.HarnessConfigError`
("file: field.key: problem (fix: ...)").
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks.base import one_line
from harness.errors import HarnessConfigError
from harness.safe_regex import backtracking_problem


@dataclass(frozen=True)
class Fields:
    """A check's place in a rubric, and the validators of its options."""

    path: Path
    """The rubric file."""
    field: str
    """The dotted field of the check kind, e.g. ``dimensions.bu_fit.check.regex``."""
    base_dir: Path
    """Where relative file paths in the options resolve from (the rubric's folder)."""
    import_root: Path
    """Where ``module:function`` callables are imported from (the project root)."""

    def nested(self, key: str) -> Fields:
        """The same place, one key deeper (``...check.date_age.as_of``)."""
        return dataclasses.replace(self, field=f"{self.field}.{key}")

    def error(self, key: str | None, problem: str, fix: str | None = None) -> HarnessConfigError:
        where = f"{self.field}.{key}" if key else self.field
        return HarnessConfigError(self.path, where, problem, fix)

    def mapping(
        self, raw: Any, *, allowed: Sequence[str], example: str, required_any: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        if not isinstance(raw, Mapping):
            raise self.error(
                None, f"expected a mapping, got {type(raw).__name__} {one_line(repr(raw), 60)}", f"write {example}"
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
            raise self.error(key, f"expected {what}, got {one_line(repr(raw), 60)}", f"give {what}")
        return raw

    def boolean(self, raw: Any, key: str | None) -> bool:
        if not isinstance(raw, bool):
            raise self.error(key, f"expected true or false, got {one_line(repr(raw), 60)}", "write true or false")
        return raw

    def integer(self, raw: Any, key: str | None, *, minimum: int) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
            raise self.error(
                key, f"expected a whole number >= {minimum}, got {one_line(repr(raw), 60)}",
                f"write a whole number >= {minimum}",
            )
        return raw

    def unit_score(self, raw: Any, key: str | None) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0.0 <= float(raw) <= 1.0:
            raise self.error(
                key, f"expected a score between 0.0 and 1.0, got {one_line(repr(raw), 60)}",
                "write a number from 0.0 to 1.0",
            )
        return float(raw)

    def string_list(self, raw: Any, key: str | None, *, example: str) -> tuple[str, ...]:
        if isinstance(raw, str) or not isinstance(raw, Sequence) or not raw:
            raise self.error(key, f"expected a non-empty list of strings, got {one_line(repr(raw), 60)}",
                             f"write {example}")
        out = []
        for index, item in enumerate(raw):
            where = f"{key}[{index}]" if key else f"[{index}]"
            out.append(self.string(item, where))
        return tuple(out)

    def regex(self, raw: Any, key: str | None, flags: int = 0) -> re.Pattern[str]:
        """A user's regular expression, compiled, refused when it can backtrack without bound."""
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
                key, f"pattern {one_line(text, 80)!r} can backtrack without bound: {problem}",
                "let each part of the text match one way only, e.g. (\\w+\\s)* instead of (\\w+\\s?)*, "
                "or make the inner quantifier possessive (\\w++) or the group atomic (?>...)",
            )
        return compiled
