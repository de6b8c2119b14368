"""Transforms: the artifact rewritten before the checks and the judge see it.

A rubric (or one dimension) may declare::

    transform: mymodule:extract_answer     # called with the artifact's text; a non-text result is written as JSON
    transform: {json_path: answer.text}    # the artifact's JSON (or its ```json block), the value there as text
    transform: {regex: '#### (-?[0-9.,]+)', match: last, group: 1}   # a match's group (lm-eval's regex filter)

:func:`parse_transform` reads the option once, when the rubric loads (an import that fails, a function that
cannot take one argument, a malformed path: a HarnessConfigError naming the file and field). A transform that
data writes (on a check a case or a dataset row adds) may name a function only from the modules of ini
harness_data_modules.
:meth:`Transform.apply` rewrites one artifact; when it cannot (the function raised, the artifact holds no
JSON, nothing is at the path) it raises :class:`TransformError`, one line naming the file, the field and what
went wrong. A transform is frozen and may run on many threads at once.

A ``regex`` transform (:class:`RegexPick`) takes the ``first`` (default) or ``last`` match of its pattern and
from it ``group`` (a number or a name; by default the first group that took part in the match, or the whole
match of a pattern without groups), as lm-eval's ``regex`` and ``take_first`` filters do. The pattern runs in
the safe_regex helper. When nothing matches, the artifact is wrong, not the material: the transform gives
empty text (:class:`NoMatch`) and the dimension's reason begins by saying the pattern did not match, so the
check fails like any wrong answer (GSM8K's ``[invalid]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re

from harness.base.errors import ExitCode, HarnessConfigError
from harness.base.fields import Fields, one_line
from harness.base.slots import as_text
from harness.checks import MISSING, value_at
from harness.checks.base import run_user_pattern
from harness.checks.json_schema import NotJson, artifact_json
from harness.checks.paths import dotted, path_option
from harness.checks.python import call_problem, callable_at

EXAMPLE = ("transform: mymodule:extract_answer, transform: {json_path: answer.text} or "
           "transform: {regex: '#### (-?[0-9.,]+)'}")
REGEX_KEYS = ("regex", "match", "group")


class TransformError(HarnessConfigError):
    """A transform could not rewrite an artifact: ``file: field: problem (fix: ...)``, on one line.

    The exit code is DATA_ERROR when the artifact does not fit the transform (no JSON, nothing at the
    path) and GENERAL_FAILURE when the user's function failed (it raised, or returned nothing)."""

    def __init__(self, path: Path | str, field: str | None, problem: str, fix: str | None = None,
                 exit_code: ExitCode = ExitCode.DATA_ERROR):
        super().__init__(path, field, problem, fix)
        self.exit_code = exit_code


class NoMatch(str):
    """The empty text a ``regex`` transform gives when its pattern finds nothing; ``why`` says so."""

    why: str

    def __new__(cls, why: str) -> NoMatch:
        made = super().__new__(cls, "")
        made.why = why
        return made


def noted(seen: str, reason: str) -> str:
    """A check's ``reason``, after what the transform that made ``seen`` has to say (its pattern did not match)."""
    return f"{seen.why}; {reason}" if isinstance(seen, NoMatch) else reason


@dataclass(frozen=True)
class RegexPick:
    """``regex`` with ``match`` (first or last) and ``group``: the text one match's group holds."""

    pattern: re.Pattern[str]
    last: bool = False
    group: int | str = ""
    """A group's number or name; ``""``: the first group that took part (the whole match without groups)."""

    @property
    def spec(self) -> str:
        return f"regex {one_line(self.pattern.pattern, 60)!r}"

    def pick(self, text: str, place: Fields) -> str | None:
        """The picked text, or None when the pattern does not match (or the group took no part in the match)."""
        found = run_user_pattern(self.pattern, text, str(place.path), place.where("regex"), pick=self.group)
        return found.last if self.last else found.first


def parse_regex_pick(raw: Any, fields: Fields, *, known: tuple[str, ...] = REGEX_KEYS,
                     example: str = "{regex: '#### (-?[0-9.,]+)', match: last, group: 1}") -> RegexPick:
    """``{regex: PATTERN, match: first|last, group: N|NAME}`` at ``fields``, checked (a pattern that can backtrack
    without bound, a group it does not have); ``known`` are the keys allowed around it."""
    spec = fields.section(raw, known=known, required=("regex",), example=example)
    pattern = fields.regex(spec.raw["regex"], "regex")
    last = spec.choice("match", ("first", "last"), "match", "first") == "last"
    group: int | str = spec.raw.get("group", "")
    if "group" in spec:
        if isinstance(group, str) and group not in pattern.groupindex:
            names = ", ".join(pattern.groupindex) or "none"
            raise spec.error("group", f"the pattern has no group named {group!r} (its named groups: {names})",
                             "name one of its groups, or give the group's number")
        if not isinstance(group, str):
            group = fields.integer(group, "group", minimum=0)
            if group > pattern.groups:
                raise spec.error("group", f"the pattern has {pattern.groups} group(s), not {group}",
                                 f"use a number from 0 (the whole match) to {pattern.groups}")
    return RegexPick(pattern, last, group)


@dataclass(frozen=True)
class Transform:
    """A parsed ``transform:``; :meth:`apply` turns an artifact into the text the checks and judge see."""

    spec: str
    """As a reason shows it: ``mymodule:extract_answer`` or ``json_path answer.text``."""
    place: Fields = field(compare=False, repr=False)
    """The file and field of the ``transform:`` option."""
    function: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)
    path: tuple[str, ...] | None = None
    """The JSON path's parts, for a ``json_path`` transform."""
    regex: RegexPick | None = None
    """The pattern, match and group of a ``regex`` transform."""

    def apply(self, artifact: str) -> str:
        """The transformed artifact; a :class:`TransformError` when this artifact cannot be transformed, and
        for a ``regex`` that does not match, empty text saying so (:class:`NoMatch`)."""
        if self.function is not None:
            return self._call(artifact)
        if self.regex is not None:
            picked = self.regex.pick(artifact, self.place)
            if picked is None:
                return NoMatch(f"the transform's {self.spec} did not match the artifact")
            return picked
        assert self.path is not None
        where = self.place.where("json_path")
        shown_path = dotted(self.path)
        try:
            document = artifact_json(artifact)
        except NotJson as exc:
            raise TransformError(self.place.path, where, f"cannot read {shown_path}: the {exc.problem}",
                                 "make the producer answer JSON (or a ```json block), or drop the transform") from None
        value = value_at(document, self.path)
        if value is MISSING:
            keys = f" (its keys: {one_line(', '.join(map(str, document)), 80)})" if isinstance(document, Mapping) \
                else f" (it is a {type(document).__name__})"
            raise TransformError(self.place.path, where, f"the artifact's JSON has no value at {shown_path}{keys}",
                                 f"make the producer answer JSON with {shown_path}, or fix the path")
        return value if isinstance(value, str) else as_text(value)

    def _call(self, artifact: str) -> str:
        assert self.function is not None
        try:
            value = self.function(artifact)
        except Exception as exc:
            raise TransformError(self.place.path, self.place.field or None,
                                 f"{self.spec} raised {type(exc).__name__}: {one_line(str(exc), 200)}",
                                 "fix the function, or make it return the artifact unchanged when it cannot "
                                 "transform it", ExitCode.GENERAL_FAILURE) from None
        if isinstance(value, str):
            return value
        if value is None:
            raise TransformError(self.place.path, self.place.field or None, f"{self.spec} returned None",
                                 "return the transformed artifact (text, or data to write as JSON)",
                                 ExitCode.GENERAL_FAILURE)
        try:
            return as_text(value)
        except (ValueError, TypeError, RecursionError) as exc:
            raise TransformError(self.place.path, self.place.field or None,
                                 f"{self.spec} returned a {type(value).__name__} that cannot be written as JSON: "
                                 f"{one_line(str(exc), 100)}", "return text, or plain data (dicts, lists, numbers)",
                                 ExitCode.GENERAL_FAILURE) from None


def parse_transform(raw: Any, fields: Fields) -> Transform:
    """The ``transform:`` option at ``fields`` (its file and field): ``module:function``, ``{json_path: PATH}``
    or ``{regex: PATTERN, match: first|last, group: N}``. Raises HarnessConfigError for every mistake."""
    if isinstance(raw, str):
        function = callable_at(raw, fields, what="transform")  # in data, only from ini harness_data_modules
        problem = call_problem(function, "artifact")
        if problem:
            raise fields.error(None, f"{raw} cannot be called with the artifact alone: {problem}",
                               "make it take one argument, the artifact's text")
        return Transform(raw, fields, function=function)
    opts = fields.mapping(raw, allowed=("json_path", *REGEX_KEYS), example=EXAMPLE,
                          required_any=("json_path", "regex"))
    if "json_path" in opts:
        extra = next((key for key in REGEX_KEYS if key in opts), None)
        if extra is not None:
            raise fields.error(extra, "belongs to a regex transform, and this one is a json_path",
                               "keep one: {json_path: PATH} or {regex: PATTERN, match: first, group: 1}")
        parts = path_option(opts["json_path"], fields, "json_path")
        return Transform(f"json_path {dotted(parts)}", fields, path=parts)
    picker = parse_regex_pick(opts, fields)
    return Transform(picker.spec, fields, regex=picker)
