"""Case inputs: values written in place, and the YAML, JSON or text files they name, read only from inside the
project (the input roots), so a case or a rubric's examples cannot send ``/etc/passwd`` to a model.

The rule itself (``inside``, :meth:`~harness.base.fields.Fields.project_path`) is the one every file a project names
goes through: templates, prompts, schema files, rubrics, examples, datasets."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, inside
from harness.base.yamlfile import load_yaml, read_text

__all__ = ["input_path", "inside", "load_inputs"]


def load_inputs(raw: Any, path: Path, field: str, base: Path, roots: Sequence[Path]) -> dict[str, Any]:
    """Inputs: a mapping of names to values, where a value ``{file: path}`` is loaded as YAML, JSON or text;
    or ``{file: path}`` in place of the whole mapping: a YAML or JSON file that holds the mapping.

    Paths are relative to ``base``; an input file must lie inside one of ``roots`` (the project and the
    folders of ini ``harness_input_dirs``), symbolic links resolved: a case cannot send ``/etc/passwd``."""
    place = Fields.of(path, field)
    if isinstance(raw, Mapping) and set(raw) == {"file"}:
        data = _read_input_file(raw["file"], base, place.nested("file"), roots)
        if not isinstance(data, Mapping):
            raise place.expected("file", f"a mapping of input names in {raw['file']}", data,
                                 "write `name: value` lines in it (YAML or JSON), or name the input: "
                                 "`inputs: {NAME: {file: ...}}`")
        return dict(data)
    if not isinstance(raw, Mapping):
        raise place.expected(None, "a mapping of input names", raw, "write `name: value` lines")
    inputs: dict[str, Any] = {}
    for name, value in raw.items():
        if isinstance(value, Mapping) and set(value) == {"file"}:
            inputs[name] = _read_input_file(value["file"], base, place.nested(f"{name}.file"), roots)
        else:
            inputs[name] = value
    return inputs


def input_path(ref: Any, base: Path, place: Fields, roots: Sequence[Path]) -> Path:
    """The file ``ref`` names, relative to ``base``: an existing file inside one of ``roots``."""
    target = dataclasses.replace(place, base_dir=base, roots=tuple(roots)).project_path(
        ref, None, example="`{file: relative/path.yaml}`")
    if not target.is_file():
        raise place.error(None, f"cannot read {base / str(ref)}",
                          "fix the path; it is relative to the file that names it")
    return target


def _read_input_file(ref: Any, base: Path, place: Fields, roots: Sequence[Path]) -> Any:
    target = input_path(ref, base, place, roots)
    if target.suffix in (".yaml", ".yml"):
        return load_yaml(target)
    text = read_text(target)
    if target.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise HarnessConfigError(target, f"line {exc.lineno}", f"invalid JSON ({exc.msg})",
                                     "fix the JSON") from None
        except RecursionError:
            raise HarnessConfigError(target, None, "JSON nested too deeply to read", "flatten the JSON") from None
    return text
