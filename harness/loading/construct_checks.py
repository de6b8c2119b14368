"""The precondition checks a construct's phase names (``assessment.gates.<phase>.precondition.checks``).

Built in, each named as the assessment document writes them:

- ``files_exist``: every artifact the phase receives as required, and every input of its contract not marked
  ``(optional)``, is in the workspace;
- ``<artifact>_exists`` (and ``<artifact>_files_exist``): the artifact is there (for a glob, at least one file);
- ``{<artifact>_completeness: 0.8}``: the artifact is at least that complete against its schema.

An artifact's name is its file name without the extension (``grimoires/{project}/prd.md`` is ``prd``), or, for a
glob, its folder's (``context/*.md`` is ``context``). A check kind of the registry runs on an artifact's text:
``{name: has-goals, artifact: prd, check: {contains: {all: ["## Goals"]}}}``, passing at score 1. Any other name is
a collection error that names it.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from harness.base.errors import did_you_mean
from harness.base.fields import Fields, Section
from harness.base.models import Frozen
from harness.checks import CheckParser, parse_check

BUILTIN = ("files_exist", "<artifact>_exists", "<artifact>_files_exist", "<artifact>_completeness: <0..1>")


class Precondition(Frozen):
    """One check of gate 1, as the phase names it."""

    name: str
    kind: Literal["files_exist", "exists", "completeness", "check"]
    path: str | None = None  # the artifact it looks at (None: files_exist, every required input)
    schema_id: str | None = None  # what completeness is measured against
    minimum: float | None = None
    check: Any = None  # a registry check, run on the artifact's text


def artifact_name(path: str) -> str:
    """An artifact's name: ``prd`` for ``grimoires/x/prd.md``, ``context`` for ``context/*.md``."""
    parts = PurePosixPath(path).parts
    for part in reversed(parts):
        if not glob.has_magic(part):
            return part if part is not parts[-1] else part.split(".", 1)[0] or part
    return path


def artifact_names(declared: Iterable[tuple[str, str | None]]) -> dict[str, list[tuple[str, str | None]]]:
    """Every declared path (with its schema id, when the declaration names one), by artifact name."""
    found: dict[str, list[tuple[str, str | None]]] = {}
    for path, schema in declared:
        entries = found.setdefault(artifact_name(path), [])
        known = next((i for i, (p, _) in enumerate(entries) if p == path), None)
        if known is None:
            entries.append((path, schema))
        elif schema and not entries[known][1]:
            entries[known] = (path, schema)
    return found


def preconditions(section: Section, declared: Mapping[str, list[tuple[str, str | None]]], import_root: Path,
                  check_kinds: Mapping[str, CheckParser] | None) -> tuple[Precondition, ...]:
    """The checks of ``precondition.checks``; an unknown name is an error naming it."""
    raw = section.raw.get("checks") or []
    if not isinstance(raw, list):
        raise section.fields.expected("checks", "a list of check names", raw, "write `checks: [files_exist]`")
    found = []
    for index, entry in enumerate(raw):
        place = section.fields.nested(f"checks[{index}]")
        if isinstance(entry, str):
            found.append(_named(entry, place, declared))
        elif isinstance(entry, Mapping) and "check" in entry:
            found.append(_registry_check(place.section(entry, known=("name", "artifact", "check"),
                                                       required=("artifact", "check")),
                                         declared, import_root, check_kinds))
        elif isinstance(entry, Mapping) and len(entry) == 1:
            (key, minimum), = entry.items()
            name = str(key)
            if not name.endswith("_completeness"):
                raise place.error(name, f"unknown precondition check {name!r}", _fix(declared))
            path, schema = _artifact(name.removesuffix("_completeness"), place, name, declared)
            found.append(Precondition(name=name, kind="completeness", path=path, schema_id=schema,
                                      minimum=place.unit_score(minimum, name)))
        else:
            raise place.expected(None, "a check name or `{<artifact>_completeness: 0.8}`", entry, _fix(declared))
    return tuple(found)


def _named(name: str, place: Fields, declared: Mapping[str, list[tuple[str, str | None]]]) -> Precondition:
    if name == "files_exist":
        return Precondition(name=name, kind="files_exist")
    for suffix in ("_files_exist", "_exists"):
        if name.endswith(suffix) and name.removesuffix(suffix) in declared:
            path, _ = _artifact(name.removesuffix(suffix), place, None, declared)
            return Precondition(name=name, kind="exists", path=path)
    if name.endswith("_completeness"):
        raise place.error(None, f"{name} needs its minimum", f"write `- {name}: 0.8`")
    stem = name.removesuffix("_files_exist").removesuffix("_exists")
    hint = did_you_mean(stem, declared) if stem != name else did_you_mean(name, ["files_exist"])
    raise place.error(None, f"unknown precondition check {name!r}{hint}", _fix(declared))


def _registry_check(entry: Section, declared: Mapping[str, list[tuple[str, str | None]]], import_root: Path,
                    check_kinds: Mapping[str, CheckParser] | None) -> Precondition:
    artifact = entry.text("artifact") or ""
    path, _ = _artifact(artifact, entry.fields, "artifact", declared)
    check = parse_check(entry.raw["check"], path=entry.fields.path, field=entry.sub("check"),
                        base_dir=entry.fields.path.parent, import_root=import_root, kinds=check_kinds,
                        roots=entry.fields.roots)
    name = entry.text("name") or f"{artifact}_{next(iter(entry.raw['check']))}"
    return Precondition(name=name, kind="check", path=path, check=check)


def _artifact(name: str, place: Fields, key: str | None,
              declared: Mapping[str, list[tuple[str, str | None]]]) -> tuple[str, str | None]:
    entries = declared.get(name)
    if not entries:
        raise place.error(key, f"no artifact {name!r} is declared{did_you_mean(name, declared)}",
                          f"name one of: {', '.join(sorted(declared)) or 'none (declare receives/produces first)'}")
    if len(entries) > 1:
        raise place.error(key, f"{name!r} names several artifacts ({', '.join(p for p, _ in entries)})",
                          "check them with a registry check on one `artifact:` path, or rename a file")
    return entries[0]


def _fix(declared: Mapping[str, Any]) -> str:
    shown = ", ".join(sorted(declared)[:8]) or "none declared"
    return (f"use files_exist, <artifact>_exists or `{{<artifact>_completeness: 0.8}}` (artifacts: {shown}), "
            "or a registry check `{artifact: NAME, check: {contains: {...}}}`")
