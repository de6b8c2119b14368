"""Datasets: a case file's ``dataset:``, one case per row of a JSONL, CSV or JSON file or a Hugging Face dataset.

    dataset: {file: data/qa.jsonl, id: "{id}", inputs: {question: "{question}"}, expected: "{answer}", limit: 500}
    dataset: {hf: openai/gsm8k, config: main, split: test, inputs: {question: "{question}"}, expected: "{answer}"}
    dataset: {file: data/chats.jsonl, messages: "{messages}"}       # each row a conversation

Exactly one source: ``file`` (a .jsonl, .csv or .json file inside the project, relative to the case file) or
``hf`` (a Hugging Face dataset read through the ``datasets`` package, ``pip install 'pytest-rubric[datasets]'``:
a name on the hub, or a folder relative to the case file, inside the project, holding data files or written by
``save_to_disk``; a folder of that name wins over the hub). ``split`` is required with ``hf``; ``config`` (the
dataset's configuration) and ``revision`` (a branch, tag or commit on the hub) are optional. A hub dataset is
downloaded and converted to Arrow once, into the ``datasets`` cache; offline (``HF_HUB_OFFLINE=1``) it must be
there already. Its rows are read from the memory-mapped Arrow table a batch at a time, never all at once.

A template is text with ``{column}`` slots filled from the row (harness/base/slots.py: the one template language);
a template that is exactly one slot keeps the column's value as it is (a number stays a number, a list a list).
``id`` defaults to ``row-N`` (N counts data rows from 1, ``{_row}``), ``inputs`` to the whole row, ``expected``
to none. ``criteria`` and ``checks`` are a case's added dimensions (the formats of a case's ``criteria:`` and
``checks:``), filled per row like ``expected``; in them, a case's own slot (``{input}``, ``{expected}``,
``{inputs.NAME}``) that the row has no column for stays as written, for the case to fill. ``messages`` (usually
``"{messages}"``) is a chat message list kept as messages: each row a conversation (docs/conversations.md), whose
``inputs`` then default to none. Each template given is in the row :func:`dataset_rows` returns (``id``,
``inputs``, and ``expected``, ``messages``, ``criteria``, ``checks`` when given).

``limit`` keeps the first N rows (reading stops there: the row after the last one kept is never read),
``sample`` keeps N rows drawn with ``seed`` (default 0), in file order unless ``shuffle: true``. For ``sample``
and ``shuffle`` a ``file`` is read twice, once to count its rows and once to keep the chosen ones (only those
are held); a Hugging Face dataset knows its length and reads only the rows chosen. A bad row is one error
naming the file (or the hf dataset), the row and the column; so is a row of a JSONL or CSV file over
:data:`MAX_ROW_SIZE`, found before it is read whole, a NUL character in a CSV file, and a dataset with no rows.

``filter``, ``join``, ``extract`` and ``fewshot`` shape the rows (harness/loading/dataset_shaping.py): rows kept
by conditions, columns joined from another file by a key, columns extracted by a pattern, a few-shot block.
``sample`` and ``limit`` choose among the rows the filter keeps.
"""

from __future__ import annotations

import csv
import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, Section, one_line
from harness.base.yamlfile import read_text
from harness.loading.dataset_shaping import SHAPING_KEYS, Opened, Reader, Shaping, Source, template_problems
from harness.loading.inputs import input_path, inside

SOURCES = ("file", "hf")
HF_KEYS = ("split", "config", "revision")
TEMPLATE_KEYS = ("id", "inputs", "expected", "messages", "criteria", "checks")
DATASET_KEYS = (*SOURCES, *HF_KEYS, *TEMPLATE_KEYS, "limit", "sample", "seed", "shuffle", *SHAPING_KEYS)
CASE_FILLED = ("criteria", "checks")  # templates whose case slots a row lacks stay for the case to fill
DATASET_SUFFIXES = (".jsonl", ".csv", ".json")
# JSON Lines and CSV are streamed a row at a time, and no row is read past this size (bytes; characters in a
# CSV): a longer row is an error found before it is in memory whole, so a dataset's memory is bounded by its
# rows, not by its file.
MAX_ROW_SIZE = 16 * 1024 * 1024
# A .json dataset is read whole, and parsing takes several times its size in memory: bigger data is JSON Lines.
JSON_DATASET_LIMIT = 64 * 1024 * 1024
HF_BATCH = 1000  # rows of a Hugging Face dataset converted from Arrow at a time
HF_INSTALL = "pip install 'pytest-rubric[datasets]'"


def dataset_rows(raw: Any, fields: Fields, base: Path, roots: Sequence[Path]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows ``dataset:`` selects, as (row number, case fields: ``id``, ``inputs``, ``expected``, ``messages``,
    ``criteria``, ``checks``, the last four when given)."""
    spec = fields.section(raw, known=DATASET_KEYS, required_any=SOURCES,
                          example="`dataset: {file: data/qa.jsonl, inputs: {question: \"{question}\"}}` or "
                                  "`dataset: {hf: NAME, split: test}`")
    if all(key in spec for key in SOURCES):
        raise spec.error("hf", "file and hf cannot both be given",
                         "keep one: file for a .jsonl, .csv or .json file, hf for a Hugging Face dataset")
    limit = spec.integer("limit", 0, low=1) if "limit" in spec else None
    sample = spec.integer("sample", 0, low=1) if "sample" in spec else None
    if limit is not None and sample is not None:
        raise spec.error("sample", "limit and sample cannot both be given", "keep one of them")
    seed = spec.integer("seed", 0, low=0)
    shuffle = spec.boolean("shuffle", False)
    templates = _templates(spec)
    if "hf" not in spec:
        for key in HF_KEYS:
            if key in spec:
                raise spec.error(key, "is only for a Hugging Face dataset (hf:)", f"remove {key}")
    shaping = Shaping(spec, _reader(spec, base, roots), seed)
    if "hf" in spec:
        source, rows = _hf_rows(spec, base, roots, limit, sample, seed, shuffle, shaping)
    else:
        path = _data_file(spec, base, roots)
        source = Source(path)
        rows = shaping.rows(_read_rows(path), source)
        if sample is not None or shuffle:  # a first pass counts the rows; the second keeps the chosen ones only
            rows = _chosen(shaping.rows(_read_rows(path), source), _order(sum(1 for _ in rows), sample, seed, shuffle))
    count = 0
    for number, row in itertools.islice(rows, limit):  # limit: no row after the last one kept is read
        count += 1
        row = shaping.finish(row, number, source)
        yield number, {key: _fill(template, row, source, number, key, keep_case_slots=key in CASE_FILLED)
                       for key, template in templates.items()}
    if count == 0:
        where = source.prefix.rstrip(", ") or None
        why = shaping.nothing_kept()
        if why is not None:
            raise spec.error(why[0], f"{why[1]}, so the dataset gives no cases",
                             "check the column names and values against the data")
        raise HarnessConfigError(source.path, where, "the dataset has no rows, so it gives no cases",
                                 "add rows to the dataset, or point dataset: at the file that has them")


def _data_file(spec: Section, base: Path, roots: Sequence[Path]) -> Path:
    """The data file ``file:`` names in ``spec``: a .jsonl, .csv or .json file inside the project."""
    path = input_path(spec.raw["file"], base, spec.fields.nested("file"), roots)
    if path.suffix not in DATASET_SUFFIXES:
        raise spec.error("file", f"{path.name} is not a dataset file", "use a .jsonl, .csv or .json file")
    return path


def _reader(dataset: Section, base: Path, roots: Sequence[Path]) -> Reader:
    """Opens what a ``join:`` or ``fewshot:`` names: its ``file:``, or (few-shot) ``split:``, another split of
    the dataset's own Hugging Face dataset."""

    def read(spec: Section) -> Opened:
        if "file" in spec:
            path = _data_file(spec, base, roots)
            same = "file" in dataset and path == _data_file(dataset, base, roots)
            return Opened(Source(path), _read_rows(path), same)
        if "hf" not in dataset:
            raise spec.error("split", "is a split of a Hugging Face dataset, and this dataset is a file",
                             "give the examples' file with `file:`")
        split = spec.text("split")
        name, local, table = _hf_table(dataset, base, roots, split, spec)
        where = f"{spec.fields.field}.split {split} of {name}, "
        source = Source(local) if local is not None else Source(dataset.fields.path, where)
        return Opened(source, _arrow_rows(table, range(len(table))), split == dataset.text("split"))

    return read


def _chosen(rows: Iterator[tuple[int, dict[str, Any]]],
            order: Sequence[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows at ``order``'s indexes, in that order; only those rows are kept in memory."""
    wanted = set(order)
    kept = {index: row for index, row in enumerate(rows) if index in wanted}
    return iter([kept[index] for index in order])


def _order(length: int, sample: int | None, seed: int, shuffle: bool) -> list[int]:
    """The indexes of the rows ``sample`` and ``shuffle`` choose, in the order they are read."""
    generator = random.Random(seed)
    chosen = list(range(length))
    if sample is not None and sample < length:
        chosen = sorted(generator.sample(chosen, sample))
    if shuffle:
        generator.shuffle(chosen)
    return chosen


def _templates(spec: Section) -> dict[str, Any]:
    templates: dict[str, Any] = {"id": spec.text("id", "row-{_row}"), "inputs": spec.raw.get("inputs")}
    if templates["inputs"] is not None:
        spec.fields.section(templates["inputs"], known=None)  # a mapping of input names to templates
    elif "messages" in spec:
        templates["inputs"] = {}  # a conversation's row is its messages: no inputs unless named
    for key in ("expected", "messages", *CASE_FILLED):
        if key in spec:
            templates[key] = spec.raw[key]
    for key, template in templates.items():
        template_problems(template, spec.fields, key)  # a filter we do not have: refused before any row is read
    return templates


def _fill(template: Any, row: dict[str, Any], source: Source, number: int, key: str, *,
          keep_case_slots: bool = False) -> Any:
    """``template`` with the row's columns in its slots; ``None`` (no ``inputs:``) is the whole row. With
    ``keep_case_slots``, a case's own slot that the row has no column for stays as written."""
    if template is None:
        return {k: v for k, v in row.items() if k != "_row"}
    if isinstance(template, Mapping):
        return {name: _fill(value, row, source, number, f"{key}.{name}", keep_case_slots=keep_case_slots)
                for name, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, row, source, number, f"{key}[{index}]", keep_case_slots=keep_case_slots)
                for index, value in enumerate(template)]
    if not isinstance(template, str):
        return template

    def column(name: str) -> Any:
        try:
            return slots.value_at_name(row, name)
        except KeyError:
            if keep_case_slots and (name in slots.CASE_SLOTS or name.startswith("inputs.")):
                return slots.KEEP  # the slot as written, filters and all, for the case to fill
            raise

    try:
        return slots.render(template, column)
    except KeyError as exc:
        known = ", ".join(k for k in row if k != "_row")
        raise HarnessConfigError(source.path, source.row(number), f"no column {exc.args[0]!r} for dataset.{key}",
                                 f"give every row a {exc.args[0]!r} column, or change the template (columns: {known})"
                                 ) from None
    except slots.SlotFilterError as exc:
        raise source.error(number, f"dataset.{key}: {exc}", "fix the row's value, or the slot's filter") from None


# --- Hugging Face datasets ---------------------------------------------------------------------------


def _hf_rows(spec: Section, base: Path, roots: Sequence[Path], limit: int | None, sample: int | None, seed: int,
             shuffle: bool, shaping: Shaping) -> tuple[Source, Iterator[tuple[int, dict[str, Any]]]]:
    """The split ``hf:`` names, and its chosen rows read lazily, a batch at a time."""
    if "split" not in spec:
        raise spec.error("split", "missing: a Hugging Face dataset is read one split at a time",
                         "add `split: test` (or validation, train: the split to evaluate on)")
    split = spec.text("split")
    name, local, table = _hf_table(spec, base, roots, split, spec)
    source = Source(local, "") if local is not None else Source(spec.fields.path, f"dataset.hf {name} ({split}), ")
    order: Sequence[int] = range(len(table))
    if shaping.selects:  # the rows kept are known by reading them: a first pass finds them
        if sample is None and not shuffle:
            return source, shaping.rows(_arrow_rows(table, order), source)
        order = [number - 1 for number, _ in shaping.rows(_arrow_rows(table, order), source)]
    if sample is not None or shuffle:
        order = [order[index] for index in _order(len(order), sample, seed, shuffle)]
    if limit is not None:
        order = order[:limit]
    return source, shaping.rows(_arrow_rows(table, order), source)


def _hf_table(spec: Section, base: Path, roots: Sequence[Path], split: str | None,
              place: Section) -> tuple[str, Path | None, Any]:
    """The name, local folder (None: the hub) and ``datasets.Dataset`` of one split of ``spec``'s ``hf:``;
    ``place`` is the section that named the split, for errors about it."""
    name = spec.fields.string(spec.raw["hf"], "hf")
    try:
        import datasets
    except ImportError:
        raise spec.error("hf", "reading a Hugging Face dataset needs the datasets package, which is not installed",
                         HF_INSTALL) from None
    local = _local_folder(name, base, spec.fields.nested("hf"), roots)
    return name, local, _load_split(datasets, spec, name, local, split, place)


def _local_folder(name: str, base: Path, place: Fields, roots: Sequence[Path]) -> Path | None:
    """The project folder ``hf:`` names, relative to the case file; ``None`` for a name on the hub."""
    target = base / name
    if not target.exists():
        return None
    if not inside(target, roots):
        allowed = " or ".join(str(root) for root in roots)
        raise place.error(None, f"{name} is outside the project: datasets must be under {allowed}",
                          "move the dataset into the project, or list its folder in ini harness_input_dirs")
    if not target.is_dir():
        raise place.error(None, f"{name} is a file, not a dataset folder",
                          "point hf at the dataset's folder, or read a .jsonl, .csv or .json file with `file:`")
    return target.resolve()


def _load_split(datasets: Any, spec: Section, name: str, local: Path | None, split: str | None,
                place: Section) -> Any:
    """The ``datasets.Dataset`` of one split (``place`` named it): memory-mapped Arrow, its rows not read yet."""
    config, revision = spec.text("config"), spec.text("revision")
    saved = local is not None and any((local / marker).is_file() for marker in ("state.json", "dataset_dict.json"))
    try:
        if not saved:
            return datasets.load_dataset(str(local or name), name=config, split=split, revision=revision)
        for key in ("config", "revision"):
            if key in spec:
                raise spec.error(key, f"{name} was written by save_to_disk, which keeps no {key}", f"remove {key}")
        loaded = datasets.load_from_disk(str(local))
        if not isinstance(loaded, datasets.DatasetDict):
            return loaded  # one split saved alone
        if split not in loaded:
            raise place.error("split", f"{name} has no split {split!r}", f"use one of: {', '.join(loaded)}")
        return loaded[split]
    except HarnessConfigError:
        raise
    except Exception as exc:  # the library's own errors: not found, offline, unknown split or config, bad files
        raise spec.error("hf", f"cannot load {name} (split {split}): {one_line(f'{type(exc).__name__}: {exc}')}",
                         "check the name, split, config and revision; offline (HF_HUB_OFFLINE=1) a hub dataset "
                         "must be in the datasets cache already") from None


def _arrow_rows(table: Any, order: Sequence[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows at ``order``'s indexes, numbered from 1 by their place in the split."""
    if not order:
        return
    chosen = table if isinstance(order, range) and len(order) == len(table) else table.select(order)
    numbers = iter(order)
    for batch in chosen.iter(batch_size=HF_BATCH):  # Arrow to Python a batch at a time: 25x faster than per row
        columns = list(batch)
        for values in zip(*batch.values()):
            number = next(numbers) + 1
            yield number, {**dict(zip(columns, values)), "_row": number}


# --- files ---------------------------------------------------------------------------------------------


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
        number = line_number = 0
        while raw_line := lines.readline(MAX_ROW_SIZE + 1):
            line_number += 1
            if len(raw_line) > MAX_ROW_SIZE:
                raise _row_too_long(path, f"row {number + 1} (line {line_number})")
            if not raw_line.strip():
                continue
            number += 1
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HarnessConfigError(path, f"line {line_number}", f"is not UTF-8 (byte {exc.start + 1})",
                                         "save the file as UTF-8") from None
            yield number, _row(_json(line, path, f"line {line_number}"), path, number)


def _row_too_long(path: Path, where: str) -> HarnessConfigError:
    return HarnessConfigError(path, where, f"is over the {MAX_ROW_SIZE // (1024 * 1024)} MB limit for a dataset "
                              "row (reading stopped there)", "keep every row under that size: move bulky text out "
                              "of the dataset")


class _CsvLines:
    """A CSV file's lines for the csv reader, none read past what is left of the row's :data:`MAX_ROW_SIZE`
    (a quoted cell may span lines), and none with a NUL character (a UTF-16 file, or binary data)."""

    def __init__(self, handle: Any, path: Path) -> None:
        self.handle, self.path = handle, path
        self.line_number = 0
        self.rows_done = 0
        self._row_size = 0

    def __iter__(self) -> _CsvLines:
        return self

    def __next__(self) -> str:
        line = self.handle.readline(MAX_ROW_SIZE + 1 - self._row_size)
        if not line:
            raise StopIteration
        self.line_number += 1
        self._row_size += len(line)
        where = (f"row {self.rows_done + 1} (line {self.line_number})" if self.line_number > 1
                 else "line 1 (the header)")
        if self._row_size > MAX_ROW_SIZE:
            raise _row_too_long(self.path, where)
        if "\x00" in line:
            raise HarnessConfigError(self.path, where, "holds a NUL character: a CSV file is text (is it UTF-16, or "
                                     "binary?)", "save the file as UTF-8 CSV, without NUL characters")
        return line

    def start_row(self, rows_done: int) -> None:
        """The next lines are a new row's, after ``rows_done`` rows (the header is none)."""
        self.rows_done = rows_done
        self._row_size = 0


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    # The harness bounds a row itself (MAX_ROW_SIZE): the csv module's own cap on a cell (128 KB) is raised to
    # it, never lowered.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_ROW_SIZE))
    with path.open(encoding="utf-8", newline="") as handle:
        lines = _CsvLines(handle, path)
        reader = csv.DictReader(lines, strict=True)  # a stray quote is an error, not a merged row
        try:
            yield from _checked_csv_rows(reader, lines, path)
        except UnicodeDecodeError as exc:
            raise HarnessConfigError(path, f"near line {reader.line_num + 1}", f"is not UTF-8 ({exc.reason})",
                                     "save the file as UTF-8") from None
        except csv.Error as exc:
            raise HarnessConfigError(path, f"line {reader.line_num}", f"cannot read the CSV ({exc})",
                                     "quote a cell that holds a comma, a quote or a line break") from None


def _checked_csv_rows(reader: csv.DictReader, lines: _CsvLines,
                      path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if reader.fieldnames is not None:  # reads the header
        lines.start_row(0)
    for number, row in enumerate(reader, 1):
        lines.start_row(number)
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
