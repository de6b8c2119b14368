"""Datasets: a case file's ``dataset:``, a JSONL, CSV or JSON file read as one case per row.

    dataset: {file: data/qa.jsonl, id: "{id}", inputs: {question: "{question}"}, expected: "{answer}", limit: 500}

A template is text with ``{column}`` slots filled from the row; a template that is exactly one slot keeps the
column's value as it is (a number stays a number, a list a list). ``id`` defaults to ``row-N`` (N counts data
rows from 1), ``inputs`` to the whole row. ``limit`` keeps the first N rows (reading stops there), ``sample``
keeps N rows drawn with ``seed`` (default 0), in file order unless ``shuffle: true``. A bad row is one error
naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import json
import random
import string
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import HarnessConfigError
from harness.fields import Fields, Section
from harness.loading.inputs import input_path
from harness.yamlfile import read_text

DATASET_KEYS = ("file", "id", "inputs", "expected", "limit", "sample", "seed", "shuffle")
DATASET_SUFFIXES = (".jsonl", ".csv", ".json")
JSON_DATASET_LIMIT = 512 * 1024 * 1024  # a .json dataset is read whole; JSON Lines and CSV are streamed
_FORMATTER = string.Formatter()


def dataset_rows(raw: Any, fields: Fields, base: Path, roots: Sequence[Path]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows ``dataset:`` selects, as (row number, case fields: ``id``, ``inputs``, ``expected``)."""
    spec = fields.section(raw, known=DATASET_KEYS, required=("file",),
                          example="`dataset: {file: data/qa.jsonl, inputs: {question: \"{question}\"}}`")
    path = input_path(spec.raw["file"], base, fields.nested("file"), roots)
    if path.suffix not in DATASET_SUFFIXES:
        raise spec.error("file", f"{path.name} is not a dataset file", "use a .jsonl, .csv or .json file")
    limit = spec.integer("limit", 0, low=1) if "limit" in spec else None
    sample = spec.integer("sample", 0, low=1) if "sample" in spec else None
    if limit is not None and sample is not None:
        raise spec.error("sample", "limit and sample cannot both be given", "keep one of them")
    seed = spec.integer("seed", 0, low=0)
    shuffle = spec.boolean("shuffle", False)
    templates = _templates(spec)
    rows = _read_rows(path)
    if sample is not None or shuffle:
        chosen = list(rows)
        generator = random.Random(seed)
        if sample is not None and sample < len(chosen):
            chosen = sorted(generator.sample(chosen, sample), key=lambda numbered: numbered[0])
        if shuffle:
            generator.shuffle(chosen)
        rows = iter(chosen)
    for count, (number, row) in enumerate(rows, 1):
        if limit is not None and count > limit:
            return
        yield number, {key: _fill(template, row, path, number, key) for key, template in templates.items()}


def _templates(spec: Section) -> dict[str, Any]:
    templates: dict[str, Any] = {"id": spec.text("id", "row-{_row}"), "inputs": spec.raw.get("inputs")}
    if templates["inputs"] is not None:
        spec.fields.section(templates["inputs"], known=None)  # a mapping of input names to templates
    if "expected" in spec:
        templates["expected"] = spec.raw["expected"]
    for key, template in templates.items():
        for text in _texts(template):
            try:
                list(_FORMATTER.parse(text))
            except ValueError as exc:
                raise spec.error(key, f"cannot read the template {text!r}: {exc}",
                                 "write slots as {column}; double a brace to keep it: {{ or }}") from None
    return templates


def _texts(template: Any) -> Iterator[str]:
    if isinstance(template, str):
        yield template
    elif isinstance(template, Mapping):
        for value in template.values():
            yield from _texts(value)
    elif isinstance(template, list):
        for value in template:
            yield from _texts(value)


def _fill(template: Any, row: dict[str, Any], path: Path, number: int, key: str) -> Any:
    """``template`` with the row's columns in its slots; ``None`` (no ``inputs:``) is the whole row."""
    if template is None:
        return {k: v for k, v in row.items() if k != "_row"}
    if isinstance(template, Mapping):
        return {name: _fill(value, row, path, number, f"{key}.{name}") for name, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, row, path, number, f"{key}[{index}]") for index, value in enumerate(template)]
    if not isinstance(template, str):
        return template
    parts = list(_FORMATTER.parse(template))
    for _, column, _, _ in parts:
        if column is not None and column not in row:
            known = ", ".join(k for k in row if k != "_row")
            raise HarnessConfigError(path, f"row {number}", f"no column {column!r} for dataset.{key}",
                                     f"give every row a {column!r} column, or change the template (columns: {known})")
    if len(parts) == 1 and parts[0][0] == "" and parts[0][1] and not parts[0][2] and not parts[0][3]:
        return row[parts[0][1]]  # exactly one slot: the column's value, of its own type
    try:
        return template.format_map(row)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:  # e.g. "{answer:d}" on text
        raise HarnessConfigError(path, f"row {number}", f"dataset.{key}: cannot fill {template!r}: {exc}",
                                 "use plain {column} slots, or a format that fits every row's value") from None


def _read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows as mappings, numbered from 1; ``_row`` holds the number for the default id."""
    if path.suffix == ".csv":
        yield from _csv_rows(path)
        return
    if path.suffix == ".json":
        data = _json(read_text(path, limit=JSON_DATASET_LIMIT), path, None)
        if not isinstance(data, list):
            raise HarnessConfigError(path, None, f"a JSON dataset is a list of objects, not {type(data).__name__}",
                                     "write [{...}, {...}], or use JSON Lines (.jsonl), an object a line")
        for number, row in enumerate(data, 1):
            yield number, _row(row, path, number)
        return
    with path.open("rb") as lines:  # streamed: ``limit`` stops reading, however large the file
        number = 0
        for line_number, raw_line in enumerate(lines, 1):
            if not raw_line.strip():
                continue
            number += 1
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HarnessConfigError(path, f"line {line_number}", f"is not UTF-8 (byte {exc.start + 1})",
                                         "save the file as UTF-8") from None
            yield number, _row(_json(line, path, f"line {line_number}"), path, number)


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, strict=True)  # a stray quote is an error, not a merged row
        try:
            yield from _checked_csv_rows(reader, path)
        except UnicodeDecodeError as exc:
            raise HarnessConfigError(path, f"near line {reader.line_num + 1}", f"is not UTF-8 ({exc.reason})",
                                     "save the file as UTF-8") from None
        except csv.Error as exc:
            raise HarnessConfigError(path, f"line {reader.line_num}", f"cannot read the CSV ({exc})",
                                     "quote a cell that holds a comma, a quote or a line break") from None


def _checked_csv_rows(reader: csv.DictReader, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, row in enumerate(reader, 1):
        if None in row or any(value is None for value in row.values()):
            raise HarnessConfigError(path, f"row {number} (line {reader.line_num})",
                                     "has another number of cells than the header "
                                     f"({len(reader.fieldnames or [])})",
                                     "give every row one cell per column (quote a cell that holds a comma)")
        yield number, {**row, "_row": number}


def _json(text: str, path: Path, where: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessConfigError(path, where or f"line {exc.lineno}", f"invalid JSON ({exc.msg})",
                                 "fix the JSON; a .jsonl file holds one object a line") from None
    except RecursionError:
        raise HarnessConfigError(path, where, "JSON nested too deeply to read", "flatten the JSON") from None


def _row(value: Any, path: Path, number: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HarnessConfigError(path, f"row {number}", f"expected an object, got {type(value).__name__}",
                                 "make every row a JSON object of column names to values")
    return {**value, "_row": number}
