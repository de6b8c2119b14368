"""The one validation vocabulary: a place in a user file, and the validators of the values found there.

Rubrics, suites, cases, check options (built-in and plugin kinds) and price tables all check their values
here, so each kind of value is checked and worded once, and every mistake is one
:class:`~harness.base.errors.HarnessConfigError`: ``file: field: problem (fix: ...)``.

- :class:`Fields` names a place (``rubrics/r.yaml``, ``dimensions.bu_fit.check.regex``) and validates one
  value at a time: ``fields.integer(raw, "min_count", minimum=1)`` checks the value of ``min_count`` there.
- :class:`Section` reads a mapping key by key: unknown keys are refused (with a did-you-mean), required
  keys must be present, and each getter (``text``, ``number``, ``integer``, ...) applies its default, then
  the validator of :class:`Fields`.

A place also knows what its file may reach: the folders the files it names must lie in (:func:`inside`, the
project and ini harness_input_dirs), and whether it is the project's own configuration (a rubric, agents.yaml,
which may name any code) or data (a case's additions, a dataset row, which may name code only from the modules
ini harness_data_modules lists).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base import jsonschemas
from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.safe_regex import backtracking_problem
from harness.base.semver import parse_version

TEXT_LIMIT = 120
SHOWN_LIMIT = 60
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def one_line(text: str, limit: int = TEXT_LIMIT) -> str:
    """Collapse whitespace so a message stays on one line, and cap its length."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A value as an error quotes it after "got": its short repr, or "nothing" for an empty YAML value."""
    return "nothing" if value is None else one_line(repr(value), SHOWN_LIMIT)


def inside(target: Path, roots: Sequence[Path]) -> bool:
    """``target`` (symbolic links resolved) lies under one of ``roots``."""
    resolved = target.resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in roots)


def is_number(value: Any) -> bool:
    """A finite int or float; YAML's true and false are ints to Python, never numbers to a user."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Fields:
    """A place in a user file, and the validators of the values written there.

    Every validator takes the raw value and its ``key`` relative to this place (``None`` for the place
    itself) and returns the value it validated, or raises a one-line :class:`HarnessConfigError`.
    """

    path: Path
    """The user file."""
    field: str
    """The dotted field, e.g. ``dimensions.bu_fit.check.regex``; empty for the top of the file."""
    base_dir: Path
    """Where relative file paths resolve from (the file's folder)."""
    import_root: Path
    """Where ``module:function`` callables are imported from (the project root)."""
    roots: tuple[Path, ...] = ()
    """The folders a file named here must lie in, symbolic links resolved: the project and the folders of ini
    harness_input_dirs. None given: the import root."""
    data_modules: tuple[str, ...] | None = None
    """``None`` in the project's own configuration (a rubric, agents.yaml), which may name any code. In data (a
    case's ``checks:``, a dataset row) the modules of ini harness_data_modules, the only ones (with their
    submodules) whose code it may name: data fills slots, it never chooses code."""

    @classmethod
    def of(cls, path: Path | str, field: str = "", *, import_root: Path | None = None, roots: Sequence[Path] = (),
           data_modules: Sequence[str] | None = None) -> Fields:
        """The place ``field`` in the file ``path``; relative paths resolve from the file's folder."""
        path = Path(path)
        return cls(path, field, path.parent, import_root or path.parent, tuple(roots),
                   None if data_modules is None else tuple(data_modules))

    # ------------------------------------------------------------------------------------ places and errors

    def where(self, key: str | None) -> str:
        """The dotted field of ``key`` here (``[2]`` indexes a list without a dot)."""
        if not key:
            return self.field
        if not self.field:
            return key
        return f"{self.field}{key}" if key.startswith("[") else f"{self.field}.{key}"

    def nested(self, key: str) -> Fields:
        """The same place, one key deeper (``...check.date_age.as_of``)."""
        return dataclasses.replace(self, field=self.where(key))

    def error(self, key: str | None, problem: str, fix: str | None = None) -> HarnessConfigError:
        return HarnessConfigError(self.path, self.where(key) or None, problem, fix)

    def expected(self, key: str | None, what: str, raw: Any, fix: str | None = None) -> HarnessConfigError:
        """``expected WHAT, got VALUE``: the one wording of a value of the wrong kind."""
        return self.error(key, f"expected {what}, got {shown(raw)}", fix or f"give {what}")

    # ------------------------------------------------------------------------------------ mappings

    def section(self, raw: Any, *, known: Iterable[str] | None, required: Iterable[str] = (),
                required_any: Sequence[str] = (), example: str | None = None) -> Section:
        """``raw`` read as a mapping at this place: keys outside ``known`` (``None``: any key) are refused,
        each of ``required`` must be present, and at least one of ``required_any``."""
        fix = f"write {example}" if example else "write it as `key: value` lines"
        if not isinstance(raw, Mapping):
            raise self.expected(None, "a mapping", raw, fix)
        if known is not None:
            known = tuple(known)
            for key in raw:
                if key not in known:
                    raise self.error(str(key), f"unknown key{did_you_mean(key, known)}",
                                     f"remove it or use one of: {', '.join(known)}")
        for key in required:
            if key not in raw:
                raise self.error(key, "missing", f"add `{key}:`")
        if required_any and not any(key in raw for key in required_any):
            raise self.error(None, f"needs at least one of {' or '.join(required_any)}", fix)
        return Section(raw, self)

    def mapping(
        self, raw: Any, *, allowed: Sequence[str], example: str, required_any: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        """A check's options: a mapping with only ``allowed`` keys and at least one of ``required_any``."""
        return self.section(raw, known=allowed, required_any=required_any, example=example).raw

    # ------------------------------------------------------------------------------------ values

    def string(self, raw: Any, key: str | None, *, what: str = "non-empty text", blank: bool = False,
               fix: str | None = None) -> str:
        """Text; blank text only with ``blank``."""
        if not isinstance(raw, str) or (not blank and not raw.strip()):
            raise self.expected(key, what, raw, fix)
        return raw

    def boolean(self, raw: Any, key: str | None) -> bool:
        if not isinstance(raw, bool):
            raise self.expected(key, "true or false", raw, "write true or false")
        return raw

    def integer(self, raw: Any, key: str | None, *, minimum: int) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
            raise self.expected(key, f"a whole number >= {minimum}", raw, f"write a whole number >= {minimum}")
        return raw

    def number(self, raw: Any, key: str | None, *, low: float | None = None, high: float | None = None,
               above: float | None = None, below: float | None = None) -> float:
        """A finite number, inside ``low``..``high`` where given, and strictly ``above``/``below`` where given."""
        if not is_number(raw):
            raise self.expected(key, "a number", raw, "write a number such as 0.85")
        value = float(raw)
        if low is not None and high is not None and not low <= value <= high:
            raise self.error(key, f"{value:g} is outside {low:g}..{high:g}",
                             f"use a value between {low:g} and {high:g}")
        if low is not None and value < low:
            raise self.error(key, f"{value:g} is below {low:g}", f"use a value of {low:g} or more")
        if high is not None and value > high:
            raise self.error(key, f"{value:g} is above {high:g}", f"use a value of {high:g} or less")
        if above is not None and value <= above:
            raise self.error(key, f"{value:g} is not above {above:g}", f"use a value above {above:g}")
        if below is not None and value >= below:
            raise self.error(key, f"{value:g} is not below {below:g}", f"use a value below {below:g}")
        return value

    def unit_score(self, raw: Any, key: str | None) -> float:
        """A score from 0.0 to 1.0."""
        return self.number(raw, key, low=0.0, high=1.0)

    def string_list(self, raw: Any, key: str | None, *, example: str, empty: bool = False) -> tuple[str, ...]:
        """A list of non-empty texts; an empty list only with ``empty``."""
        what = "a list of text" if empty else "a non-empty list of text"
        if isinstance(raw, str) or not isinstance(raw, Sequence) or not (raw or empty):
            raise self.expected(key, what, raw, f"write {example}")
        return tuple(self.string(item, f"{key or ''}[{index}]") for index, item in enumerate(raw))

    def identifier(self, raw: Any, key: str | None, what: str) -> str:
        """An id (a dimension, criterion, case, agent or rubric id): a name that is safe in paths and fields."""
        if not isinstance(raw, str) or not ID_PATTERN.match(raw):
            raise self.error(key, f"{what} {raw!r} is not a valid id",
                             "use letters, digits, '_', '-' or '.', starting with a letter or digit")
        return raw

    def choice(self, raw: Any, key: str | None, choices: Sequence[str], what: str, fix: str | None = None) -> str:
        """One of ``choices``, e.g. a scoring mode."""
        if not isinstance(raw, str) or raw not in choices:
            raise self.error(key, f"unknown {what} {raw!r}{did_you_mean(raw, choices)}",
                             fix or f"use one of: {', '.join(choices)}")
        return raw

    def version(self, raw: Any, key: str | None) -> str:
        """A semantic version, ``MAJOR.MINOR.PATCH``."""
        if not isinstance(raw, str) or parse_version(raw) is None:
            raise self.error(key, f"{raw!r} is not a semantic version", "write MAJOR.MINOR.PATCH, such as 1.0.0")
        return raw

    def project_path(self, raw: Any, key: str | None, *, example: str = "a path relative to this file") -> Path:
        """The path ``raw`` names, relative to ``base_dir``, symbolic links resolved: refused unless it lies inside
        the project (``roots``), so no file can send ``/etc/passwd`` to a model or into the records. Whether
        the file exists is the caller's to say, in its own words."""
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)) or not str(raw).strip() \
                or "\0" in str(raw):
            raise self.expected(key, "a file path", raw, f"write {example}")
        roots = self.roots or (self.import_root,)
        try:
            target = (self.base_dir / str(raw)).resolve()
            within = inside(target, roots)
        except (OSError, RuntimeError) as exc:  # a loop of symbolic links
            raise self.error(key, f"cannot resolve {raw}: {exc}", "point it at a file, not a loop of links") from None
        if not within:
            allowed = " or ".join(str(root) for root in roots)
            raise self.error(key, f"{raw} is outside the project: a file named here must be under {allowed}",
                             "move the file into the project, or list its folder in ini harness_input_dirs")
        return target

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


class Section:
    """A mapping from a user file whose keys were checked (:meth:`Fields.section`), read key by key.

    Each getter takes the key, applies its default when the key is absent, and validates the value with
    the matching :class:`Fields` validator, so an error names ``file: section.key``.
    """

    def __init__(self, raw: Mapping[Any, Any], fields: Fields):
        self.raw = raw
        self.fields = fields

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def sub(self, key: str) -> str:
        """The dotted field of ``key`` in this section."""
        return self.fields.where(key)

    def error(self, key: str | None, problem: str, fix: str | None = None) -> HarnessConfigError:
        return self.fields.error(key, problem, fix)

    def section(self, key: str, *, known: Iterable[str] | None, required: Iterable[str] = (),
                example: str | None = None, shorthand: str | None = None) -> Section:
        """The mapping under ``key`` (absent or empty: an empty one). With ``shorthand``, a text there stands for
        that one key (``judge: claude-sonnet-4-6`` is ``judge: {model: claude-sonnet-4-6}``)."""
        raw = self.raw.get(key) or {}
        if shorthand is not None and isinstance(raw, str):
            raw = {shorthand: raw}
        return self.fields.nested(key).section(raw, known=known, required=required, example=example)

    def text(self, key: str, default: str | None = None) -> str | None:
        """Text, possibly blank; an unquoted number or date is read as the text it was written as."""
        value = self.raw.get(key, default)
        if isinstance(value, (int, float, dt.date)) and not isinstance(value, bool):
            return str(value)
        return None if value is None else self.fields.string(value, key, what="text", blank=True)

    def number(self, key: str, default: float | None = None, *, low: float | None = None,
               high: float | None = None) -> float | None:
        value = self.raw.get(key, default)
        return None if value is None else self.fields.number(value, key, low=low, high=high)

    def integer(self, key: str, default: int, *, low: int = 1) -> int:
        return self.fields.integer(self.raw.get(key, default), key, minimum=low)

    def boolean(self, key: str, default: bool) -> bool:
        return self.fields.boolean(self.raw.get(key, default), key)

    def json_schema(self, key: str, *, required: bool = False) -> dict[str, Any] | None:
        """A JSON Schema written at ``key`` (a mapping), checked to be one; None when absent and not required."""
        if key not in self.raw:
            if required:
                raise self.error(key, "missing", f"add `{key}:` (a JSON Schema, e.g. `{{type: object}}`)")
            return None
        raw = self.raw[key]
        if not isinstance(raw, Mapping):
            raise self.fields.expected(key, "a JSON Schema (a mapping)", raw, "write e.g. `{type: object}`")
        schema = json.loads(json.dumps(raw, default=str))  # plain dicts; YAML dates become strings
        try:
            jsonschemas.check_schema(schema)
        except jsonschemas.SchemaInvalid as err:
            raise self.error(key + (f".{err.where}" if err.where else ""), f"not a valid JSON Schema: {err.problem}",
                             err.fix) from None
        return schema

    def text_list(self, key: str, *, single: bool = True) -> tuple[str, ...]:
        """A list of text, empty when absent; with ``single``, one text stands for a list of one."""
        value = self.raw.get(key) or []
        if isinstance(value, str) and single:
            value = [value]
        return self.fields.string_list(value, key, example=f"`{key}: [first, second]` or `- item` lines", empty=True)

    def identifier(self, key: str, what: str) -> str:
        return self.fields.identifier(self.raw.get(key), key, what)

    def choice(self, key: str, choices: Sequence[str], what: str, default: str | None = None) -> str:
        return self.fields.choice(self.raw.get(key, default), key, choices, what)

    def version(self, key: str) -> str:
        """A required semantic version."""
        version = self.text(key)
        if version is None:
            raise self.error(key, "missing", "add a semantic version such as 1.0.0")
        return self.fields.version(version, key)
