"""Data shaping, declared in a case file's ``dataset:`` (harness/loading/datasets.py reads the files).

    filter: {category: writing}                       # equals (compared as text: 3 matches "3")
    filter: {category: [math, reasoning]}             # or {category: {in: [math, reasoning]}}
    filter: {question: {matches: "^What"}, level: 2}  # a regular expression found in the text; all must hold
    join: {file: refs.jsonl, key: question_id, as: ref}       # ref.* holds the joined file's columns
    extract: {final: {from: answer, regex: "#### (-?[0-9.,]+)"}}
    fewshot: {file: train.jsonl, n: 3, template: "Q: {question}\\nA: {answer}"}   # the column {fewshot}

A row goes through them in this order: each ``join`` (a list joins several files, in turn), then ``filter`` (so
a condition may name a joined column), then ``limit``/``sample``/``shuffle`` choose among the rows kept; on each
chosen row ``extract`` adds its columns, then ``fewshot`` adds its block. Rows keep their numbers in the file
(``row-N``, and every error).

- ``filter``: a column's value equals a value, is one of a list, or ``matches`` a pattern (``re.search``, run
  in the safe_regex helper; the pattern is refused when it can backtrack without bound). A row without the
  column does not pass. No row passing is an error that names a column no row had.
- ``join``: the joined file's row whose ``file_key`` column (default: the ``key`` column) equals the row's
  ``key`` column, compared as text (``on:`` would be YAML's true). Its columns are merged into the row, or kept
  under ``as:``; a column both have is an error (use ``as:``). A row with no match is kept without the joined
  columns (``missing: keep``, a left join: a template that needs them names the row), or left out
  (``missing: drop``), or an error (``missing: error``). A key twice in the joined file is an error naming both
  rows.
- ``extract``: a column made from another by a regular expression (``match: first|last``, ``group``, as the
  ``regex`` transform); a row whose column does not match is an error naming the row.
- ``fewshot``: ``n`` examples from another file (``file:``) or split (``split:``, of the same Hugging Face
  dataset), each rendered by ``template`` and joined by ``separator`` (a blank line) into the column ``as``
  (``fewshot``). Drawn per row with ``seed`` and the row's number (the same examples every run, whatever
  ``limit`` or ``sample`` choose), or the first ``n`` (``pick: first``); never the row itself (the same row of
  the same file, or an example whose every column the row has with the same value).

The joined file and the few-shot file are read whole, once.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, Section, shown
from harness.checks.base import run_user_pattern
from harness.checks.transforms import REGEX_KEYS, RegexPick, parse_regex_pick

SHAPING_KEYS = ("filter", "join", "extract", "fewshot")
OPERATORS = ("equals", "in", "matches")
JOIN_KEYS = ("file", "key", "file_key", "as", "missing")
MISSING_CHOICES = ("keep", "drop", "error")
FEWSHOT_KEYS = ("file", "split", "n", "template", "seed", "pick", "separator", "as", "filter")

Row = dict[str, Any]
Rows = Iterator[tuple[int, Row]]


class Source(NamedTuple):
    """Where rows come from, as a bad row's error names it: ``path: {prefix}row N: ...``."""

    path: Path
    prefix: str = ""

    def row(self, number: int) -> str:
        return f"{self.prefix}row {number}"

    def error(self, number: int, problem: str, fix: str) -> HarnessConfigError:
        return HarnessConfigError(self.path, self.row(number), problem, fix)


class Opened(NamedTuple):
    """Another file's (or split's) rows, as :class:`Reader` opens them; ``same``: they are the dataset's own."""

    source: Source
    rows: Rows
    same: bool = False


Reader = Callable[[Section], Opened]
"""Opens the rows a ``join:`` or ``fewshot:`` section names (its ``file:``, or a few-shot ``split:``)."""


def _column_name(raw: Any, place: Fields, key: str) -> str:
    """A column this shaping adds: a name a slot can reach (``{ref.answer}``, ``{fewshot}``)."""
    if not isinstance(raw, str) or not re.fullmatch(r"[A-Za-z_]\w*", raw):
        raise place.error(key, f"{shown(raw)} cannot be a slot's name", "use letters, digits and '_', starting "
                          "with a letter or '_'")
    return raw


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def columns(row: Mapping[str, Any]) -> str:
    return ", ".join(str(k) for k in row if k != "_row") or "none"


def render_row(template: str, row: Mapping[str, Any], source: Source, number: int, key: str) -> Any:
    """``template`` filled from the row's columns; a missing column or a filter's refusal names the row."""
    try:
        return slots.render(template, lambda name: slots.value_at_name(row, name))
    except KeyError as exc:
        raise source.error(number, f"no column {exc.args[0]!r} for dataset.{key}",
                           f"give every row a {exc.args[0]!r} column, or change the template (columns: "
                           f"{columns(row)})") from None
    except slots.SlotFilterError as exc:
        raise source.error(number, f"dataset.{key}: {exc}", "fix the row's value, or the slot's filter") from None


def template_problems(value: Any, place: Fields, key: str) -> None:
    """Refuses a slot with a filter we do not have anywhere in a template (a string, or a mapping's or a list's)."""
    if isinstance(value, str):
        problem = slots.filter_problem(value)
        if problem:
            raise place.error(key, problem, "use one of the filters, or remove the '|'")
    elif isinstance(value, Mapping):
        for name, item in value.items():
            template_problems(item, place, f"{key}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            template_problems(item, place, f"{key}[{index}]")


# --- filter ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """One column's condition: its value is one of ``values`` (as text) and/or ``pattern`` is found in it."""

    column: str
    values: frozenset[str] | None
    pattern: re.Pattern[str] | None
    place: Fields = field(compare=False, repr=False)

    def holds(self, row: Mapping[str, Any]) -> bool:
        value = slots.value_at(row, self.column.split("."))
        if value is slots.MISSING:
            return False
        text = slots.as_text(value)
        if self.values is not None and text not in self.values:
            return False
        return self.pattern is None or run_user_pattern(self.pattern, text, str(self.place.path),
                                                        self.place.where("matches")).count > 0


class RowFilter:
    """``filter:``: the conditions a row must all meet; counts what it saw, to explain a filter nothing passes."""

    def __init__(self, conditions: tuple[Condition, ...], place: Fields):
        self.conditions = conditions
        self.place = place
        self.read = 0
        self.seen: set[str] = set()

    def apply(self, rows: Rows) -> Rows:
        self.read, self.seen = 0, set()  # a second pass (sample, shuffle) counts afresh
        for number, row in rows:
            self.read += 1
            self.seen.update(c.column for c in self.conditions if slots.value_at(row, c.column.split("."))
                             is not slots.MISSING)
            if all(condition.holds(row) for condition in self.conditions):
                yield number, row

    def nothing_passed(self) -> str:
        absent = [c.column for c in self.conditions if c.column not in self.seen]
        why = f" (no row has a column {absent[0]!r})" if absent else ""
        return f"none of the {_count(self.read, 'row')} read passes the filter{why}"


def parse_filter(raw: Any, place: Fields) -> RowFilter:
    """``filter: {COLUMN: VALUE | [VALUES] | {equals: V, in: [..], matches: PATTERN}}``: all must hold."""
    spec = place.section(raw, known=None, example="`filter: {category: writing}` (or `{category: {in: [a, b]}}`, "
                                                  "`{question: {matches: '^What'}}`)")
    if not spec.raw:
        raise place.error(None, "has no condition", "name a column and its value, e.g. `filter: {category: writing}`")
    return RowFilter(tuple(_condition(str(column), value, place.nested(str(column)))
                           for column, value in spec.raw.items()), place)


def _condition(column: str, raw: Any, place: Fields) -> Condition:
    if isinstance(raw, list):
        raw = {"in": raw}
    elif not isinstance(raw, Mapping):
        raw = {"equals": raw}
    ops = place.section(raw, known=OPERATORS, required_any=OPERATORS,
                        example=f"`{column}: VALUE`, `{column}: {{in: [a, b]}}` or `{column}: {{matches: PATTERN}}`")
    values: set[str] | None = None
    if "equals" in ops:
        values = {_text(ops.raw["equals"], place, "equals")}
    if "in" in ops:
        listed = ops.raw["in"]
        if not isinstance(listed, list) or not listed:
            raise place.expected("in", "a non-empty list of values", listed, f"write `{column}: {{in: [a, b]}}`")
        allowed = {_text(value, place, f"in[{index}]") for index, value in enumerate(listed)}
        values = allowed if values is None else values & allowed
    pattern = place.regex(ops.raw["matches"], "matches") if "matches" in ops else None
    return Condition(column, None if values is None else frozenset(values), pattern, place)


def _text(value: Any, place: Fields, key: str) -> str:
    if isinstance(value, (Mapping, list)) or value is None:
        raise place.expected(key, "a value (text, a number, true or false)", value,
                             "compare with one value; a list of them goes under `in:`")
    return slots.as_text(value)


# --- join ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    """``join:``: the joined file's rows by key, and how a row takes them in."""

    key: str
    file_key: str
    name: str | None
    missing: str
    file: str
    place: Fields = field(repr=False)
    index: dict[str, Row] = field(repr=False)

    def apply(self, rows: Rows, source: Source) -> Rows:
        for number, row in rows:
            value = slots.value_at(row, self.key.split("."))
            if value is slots.MISSING:
                raise source.error(number, f"no column {self.key!r} to join {self.file} by ({self.place.field}.key)",
                                   f"give every row a {self.key!r} column, or join by another (columns: "
                                   f"{columns(row)})")
            match = self.index.get(slots.as_text(value))
            if match is None:
                if self.missing == "error":
                    raise source.error(number, f"{self.file} has no row with {self.file_key} {shown(value)} "
                                       f"({self.place.field})", f"add one to {self.file}, or set `missing: drop` "
                                       "(leave such rows out) or `missing: keep` (keep them without its columns)")
                if self.missing == "keep":
                    yield number, row
                continue
            if self.name is not None:
                if self.name in row:
                    raise source.error(number, f"already has a column {self.name!r}, where {self.place.field} "
                                       f"puts {self.file}'s columns", "choose another name with `as:`")
                yield number, {**row, self.name: match}
                continue
            both = [c for c in match if c in row and not (c == self.key == self.file_key)]
            if both:
                raise source.error(number, f"the row and {self.file} both have a column {both[0]!r} "
                                   f"({self.place.field})", f"keep {self.file}'s columns under a name: "
                                   "`as: ref` makes them {ref.COLUMN}")
            yield number, {**row, **match}


def parse_join(raw: Any, place: Fields, read: Reader) -> Join:
    """``join: {file: PATH, key: COLUMN, file_key: COLUMN, as: NAME, missing: keep|drop|error}``, its file read
    whole."""
    if isinstance(raw, Mapping) and True in raw:  # YAML reads a bare `on` as true
        raise place.error("on", "YAML reads `on:` as true, so the join names its column with `key:`",
                          "write `key: COLUMN` (and `file_key:` when the joined file calls it otherwise)")
    spec = place.section(raw, known=JOIN_KEYS, required=("file", "key"),
                         example="`join: {file: data/refs.jsonl, key: question_id}`")
    key = spec.text("key") or ""
    file_key = spec.text("file_key") or key
    for name, value in (("key", key), ("file_key", file_key)):
        if not value.strip():
            raise spec.error(name, "expected a column name", "name the column the two files share")
    name = _column_name(spec.raw["as"], place, "as") if "as" in spec else None
    missing = spec.choice("missing", MISSING_CHOICES, "missing", "keep")
    opened = read(spec)
    file = opened.source.path.name
    index: dict[str, Row] = {}
    first: dict[str, int] = {}
    for number, row in opened.rows:
        value = slots.value_at(row, file_key.split("."))
        if value is slots.MISSING:
            raise opened.source.error(number, f"no column {file_key!r} to join by ({place.field}.file_key)",
                                      f"give every row of {file} a {file_key!r} column (columns: {columns(row)})")
        text = slots.as_text(value)
        if text in index:
            raise opened.source.error(number, f"{file_key} {shown(value)} again (row {first[text]} has it too): "
                                      f"{place.field} needs one row per key",
                                      f"keep one row per {file_key} in {file}")
        index[text], first[text] = {k: v for k, v in row.items() if k != "_row"}, number
    return Join(key, file_key, name, missing, file, place, index)


# --- extract ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extract:
    """``extract: {NAME: {from: COLUMN, regex: PATTERN, match, group}}``: a column made by a pattern."""

    name: str
    column: str
    picker: RegexPick
    place: Fields = field(repr=False)

    def apply(self, row: Row, number: int, source: Source) -> Row:
        value = slots.value_at(row, self.column.split("."))
        if value is slots.MISSING:
            raise source.error(number, f"no column {self.column!r} for {self.place.field}.from",
                               f"give every row a {self.column!r} column (columns: {columns(row)})")
        picked = self.picker.pick(slots.as_text(value), self.place)
        if picked is None:
            raise source.error(number, f"{self.place.field}: the {self.picker.spec} does not match its {self.column} "
                               f"({shown(value)})", "fix the row, or the pattern")
        return {**row, self.name: picked}


def parse_extract(raw: Any, place: Fields) -> tuple[Extract, ...]:
    spec = place.section(raw, known=None, example="`extract: {final: {from: answer, regex: '#### (.*)'}}`")
    made = []
    for name, value in spec.raw.items():
        here = place.nested(str(name))
        _column_name(name, place, str(name))
        if not isinstance(value, Mapping) or "from" not in value:
            raise here.expected(None, "a mapping with `from:` and `regex:`", value,
                                f"write `{name}: {{from: COLUMN, regex: PATTERN}}`")
        column = here.string(value["from"], "from", what="a column name")
        made.append(Extract(str(name), column, parse_regex_pick(value, here, known=("from", *REGEX_KEYS)), here))
    return tuple(made)


# --- fewshot ---------------------------------------------------------------------------------------------


@dataclass
class Fewshot:
    """``fewshot:``: ``n`` examples rendered by their template into the column ``name``."""

    n: int
    seed: int
    pick_first: bool
    template: str
    separator: str
    name: str
    source: Source
    pool: list[tuple[int, Row]]
    same: bool
    place: Fields = field(repr=False)
    rendered: dict[int, str] = field(default_factory=dict, repr=False)

    def apply(self, row: Row, number: int, source: Source) -> Row:
        if self.name in row:
            raise source.error(number, f"already has a column {self.name!r}, where {self.place.field} puts its "
                               "examples", f"name the block with `as:` (e.g. `as: examples`), and use that slot")
        return {**row, self.name: self.block(row, number)}

    def block(self, row: Row, number: int) -> str:
        if self.n == 0:
            return ""
        everyone = range(len(self.pool))
        if self.pick_first:
            chosen = self._others(everyone, row, number)
        else:
            draw = random.Random(f"{self.seed}/{number}")  # the row's own draw: the same whatever else is chosen
            chosen = self._others(draw.sample(everyone, min(len(self.pool), self.n + 1)), row, number)
            if len(chosen) < self.n:  # the draw held the row itself more than once: draw them all
                chosen = self._others(draw.sample(everyone, len(self.pool)), row, number)
        if len(chosen) < self.n:
            raise self.place.error("n", f"{self.source.path.name} has {_count(len(chosen), 'example')} other than "
                                   f"row {number} itself, fewer than n ({self.n})", "add examples, or lower n")
        return self.separator.join(self._render(index) for index in chosen)

    def _others(self, order: Iterable[int], row: Row, number: int) -> list[int]:
        """The first ``n`` of ``order`` that are not the row itself."""
        return [index for index in order if not self._is_row(index, row, number)][:self.n]

    def _is_row(self, index: int, row: Row, number: int) -> bool:
        example_number, example = self.pool[index]
        if self.same and example_number == number:
            return True
        return all(key == "_row" or (key in row and row[key] == value) for key, value in example.items())

    def _render(self, index: int) -> str:
        if index not in self.rendered:
            number, example = self.pool[index]
            self.rendered[index] = slots.as_text(render_row(self.template, example, self.source, number,
                                                            "fewshot.template"))
        return self.rendered[index]


def parse_fewshot(raw: Any, place: Fields, read: Reader, dataset_seed: int) -> Fewshot:
    """``fewshot: {file|split, n, template, seed, pick: random|first, separator, as, filter}``, its pool read."""
    spec = place.section(raw, known=FEWSHOT_KEYS, required=("n", "template"),
                         example="`fewshot: {file: data/train.jsonl, n: 3, template: \"Q: {question}\\nA: {answer}\"}`")
    if ("file" in spec) == ("split" in spec):
        raise spec.error(None, "needs one of file or split", "give `file:` (a .jsonl, .csv or .json file) or "
                         "`split:` (another split of the dataset's Hugging Face dataset)")
    n = spec.integer("n", 0, low=0)
    template = place.string(spec.raw["template"], "template", what="a template")
    template_problems(template, place, "template")
    row_filter = parse_filter(spec.raw["filter"], place.nested("filter")) if "filter" in spec else None
    opened = read(spec)
    rows = row_filter.apply(opened.rows) if row_filter is not None else opened.rows
    pool = list(rows)
    if len(pool) < n:
        kept = f" ({row_filter.nothing_passed()})" if row_filter is not None and not pool else ""
        raise spec.error("n", f"{opened.source.path.name} has {_count(len(pool), 'example')}{kept}, fewer than n "
                         f"({n})", "add examples, or lower n")
    return Fewshot(n=n, seed=spec.integer("seed", dataset_seed, low=0),
                   pick_first=spec.choice("pick", ("random", "first"), "pick", "random") == "first",
                   template=template, separator=spec.text("separator", "\n\n") or "",
                   name=_column_name(spec.raw["as"], place, "as") if "as" in spec else "fewshot",
                   source=opened.source, pool=pool, same=opened.same, place=place)


# --- all of them -----------------------------------------------------------------------------------------


class Shaping:
    """A dataset's shaping keys, parsed (and the files they name read) once."""

    def __init__(self, spec: Section, read: Reader, seed: int):
        joins = spec.raw.get("join")
        where = spec.fields.nested("join")
        if isinstance(joins, list):  # several files, joined in turn
            self.joins = tuple(parse_join(raw, where.nested(f"[{i}]"), read) for i, raw in enumerate(joins))
        else:
            self.joins = (parse_join(joins, where, read),) if "join" in spec else ()
        self.filter = parse_filter(spec.raw["filter"], spec.fields.nested("filter")) if "filter" in spec else None
        self.extracts = parse_extract(spec.raw["extract"], spec.fields.nested("extract")) if "extract" in spec else ()
        self.fewshot = parse_fewshot(spec.raw["fewshot"], spec.fields.nested("fewshot"), read, seed) \
            if "fewshot" in spec else None
        self.read = 0

    @property
    def selects(self) -> bool:
        """Whether the rows kept are known only by reading them (a filter, or a join that may drop rows)."""
        return self.filter is not None or any(join.missing == "drop" for join in self.joins)

    def rows(self, rows: Rows, source: Source) -> Rows:
        """The rows joined, then those the filter keeps."""
        rows = self._counted(rows)
        for join in self.joins:
            rows = join.apply(rows, source)
        return self.filter.apply(rows) if self.filter is not None else rows

    def _counted(self, rows: Rows) -> Rows:
        self.read = 0
        for item in rows:
            self.read += 1
            yield item

    def finish(self, row: Row, number: int, source: Source) -> Row:
        """A chosen row with its extracted columns, then its few-shot block."""
        for extract in self.extracts:
            row = extract.apply(row, number, source)
        return self.fewshot.apply(row, number, source) if self.fewshot is not None else row

    def nothing_kept(self) -> tuple[str, str] | None:
        """The key that left no row, and why, when the shaping left none (and there were rows to read)."""
        if not self.read:
            return None
        if self.filter is not None and self.filter.read:
            return "filter", self.filter.nothing_passed()
        dropping = next((join for join in self.joins if join.missing == "drop"), None)
        if dropping is not None:
            return "join", f"no row has a match in {dropping.file} (missing: drop leaves such rows out)"
        return None
