"""A construct item's workspace and the artifacts in it, checked against what a phase declares.

The workspace is a folder of the item's records (``runs/{cycle}/{construct}[/{case}]/workspace``): every path a
construct declares is relative to it, so what the handoffs check are the files the phases really wrote. An
:class:`ArtifactSpec` is checked by :func:`check_artifact`: its files found (a glob may match several), each read
against the schema the spec names (a JSON Schema, or a Markdown sections spec), its completeness measured
(:func:`harness.evaluation.assessment.completeness`) and its required sections looked for.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.base import jsonschemas
from harness.evaluation.assessment import (
    artifact_of,
    completeness,
    section_key,
    sections,
)
from harness.loading.artifact_schemas import ArtifactSchema
from harness.loading.construct_parts import ArtifactSpec

WORKSPACE_DIR = "workspace"
READ_LIMIT = 4 * 1024 * 1024  # what is read of one artifact to check it; a larger file is checked on its head
RECEIVED_LIMIT = 256 * 1024  # what a phase's request carries of each artifact it receives


class Workspace:
    """The item's working folder: the phases' files, and what each phase wrote (:meth:`snapshot`, :meth:`written`)."""

    def __init__(self, root: Path):
        self.root = root

    def reset(self, seed: tuple[Path, ...]) -> None:
        """An empty workspace, with the project files and folders ``seed`` names copied in, each under its own
        name (``../context`` is ``context/``)."""
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        for source in seed:
            target = self.root / source.name
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Every file's size and modification time, by path relative to the workspace."""
        found = {}
        for path in self.root.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[self.relative(path)] = (stat.st_size, stat.st_mtime_ns)
        return found

    def written(self, before: Mapping[str, tuple[int, int]]) -> list[str]:
        """The files created or changed since ``before``."""
        return sorted(path for path, seen in self.snapshot().items() if before.get(path) != seen)

    def matches(self, pattern: str) -> list[Path]:
        """The files a declared path (maybe a glob) names."""
        return sorted(p for p in self.root.glob(pattern) if p.is_file())

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def artifact(self, path: Path, **metadata: Any) -> dict[str, Any]:
        """The Artifact (the execution result contract's) of a file of the workspace."""
        return artifact_of(path, self.root, metadata)

    def received(self, specs: tuple[ArtifactSpec, ...]) -> dict[str, str]:
        """The text of each file the specs name, as a phase's request carries it (the head of a large one)."""
        found = {}
        for spec in specs:
            for path in self.matches(spec.path):
                found[self.relative(path)] = text_of(path, RECEIVED_LIMIT)
        return found


@dataclass(frozen=True)
class Checked:
    """One ArtifactSpec checked against the workspace."""

    spec: ArtifactSpec
    files: tuple[Path, ...]
    problems: tuple[str, ...]  # each a line naming the file and what is wrong with it
    fixes: tuple[str, ...]  # what would make each problem go away
    schema_valid: bool | None  # None: no schema, or no file
    completeness: float  # the least complete file's; 0 when there is none
    metadata: dict[Path, dict[str, Any]] = field(default_factory=dict)  # per file: what it was checked against

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def missing(self) -> bool:
        return not self.files


def check_artifact(spec: ArtifactSpec, workspace: Workspace, schemas: Mapping[str, ArtifactSchema], *,
                   producer: str | None = None) -> Checked:
    """``spec`` against the files the workspace has for it; ``producer`` names the phase that should have made
    them, for the fixes."""
    files = tuple(workspace.matches(spec.path))
    schema = schemas.get(spec.schema_id) if spec.schema_id else None
    maker = f"phase {producer}" if producer else "the phase that makes it"
    if not files:
        if not spec.required:
            return Checked(spec, (), (), (), None, 0.0)
        what = "no file matches" if any(c in spec.path for c in "*?[") else "missing"
        return Checked(spec, (), (f"{spec.path}: {what}",), (f"make {maker} write {spec.path}",), None, 0.0)
    problems: list[str] = []
    fixes: list[str] = []
    valid: list[bool] = []
    scores: list[float] = []
    metadata: dict[Path, dict[str, Any]] = {}
    for path in files:
        shown = workspace.relative(path)
        text = text_of(path, READ_LIMIT)
        found = _against_schema(text, path, shown, schema, spec, maker)
        problems += found.problems
        fixes += found.fixes
        if found.valid is not None:
            valid.append(found.valid)
        scores.append(found.completeness)
        metadata[path] = {"schema": spec.schema_id, "schema_valid": found.valid, "completeness": found.completeness,
                          "required": spec.required}
    least = min(scores)
    if spec.min_completeness is not None and least < spec.min_completeness - 1e-9:
        problems.append(f"{spec.path}: completeness {least:.2f} is below {spec.min_completeness:g}")
        fixes.append(f"complete {spec.path} in {maker} (at least {spec.min_completeness:g} of "
                     f"{_what_counts(schema, spec)})")
    return Checked(spec, files, tuple(problems), tuple(dict.fromkeys(fixes)), all(valid) if valid else None, least,
                   metadata)


@dataclass(frozen=True)
class _Found:
    problems: list[str]
    fixes: list[str]
    valid: bool | None
    completeness: float


def _against_schema(text: str, path: Path, shown: str, schema: ArtifactSchema | None, spec: ArtifactSpec,
                    maker: str) -> _Found:
    problems: list[str] = []
    fixes: list[str] = []
    valid: bool | None = None
    required = spec.required_sections
    if schema is not None and schema.json_schema is not None:
        data, unreadable = _data(text, path)
        if unreadable:
            problems.append(f"{shown}: {unreadable}, so it cannot match {schema.schema_id}")
            fixes.append(f"make {maker} write {shown} as JSON matching {schema.path.name}")
            return _Found(problems, fixes, False, 0.0)
        errors = jsonschemas.errors(data, schema.json_schema, formats=True)
        valid = not errors
        if errors:
            problems.append(f"{shown}: does not match {schema.schema_id}: {'; '.join(errors[:3])}")
            fixes.append(f"make {maker} write {shown} to match {schema.path.name}")
        score = completeness(data, schema=schema.json_schema)
    else:
        found = sections(text)
        if schema is not None:
            absent = [s for s in schema.required_sections if section_key(s) not in found]
            valid = not absent
            if absent:
                problems.append(f"{shown}: has no section {', '.join(absent)} ({schema.schema_id})")
                fixes.append(f"make {maker} write the heading(s) {', '.join(absent)} in {shown}")
        measured = schema.required_sections if schema is not None else required
        score = completeness(text, required_sections=measured)
        empty = [s for s in required if not found.get(section_key(s))]
        if empty:
            problems.append(f"{shown}: section {', '.join(empty)} is missing or empty")
            fixes.append(f"make {maker} write text under {', '.join(empty)} in {shown}")
    return _Found(problems, fixes, valid, score)


def _data(text: str, path: Path) -> tuple[Any, str | None]:
    """An artifact's data: YAML for a ``.yaml``/``.yml`` file, else JSON; the reason when it cannot be read."""
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            return yaml.safe_load(text), None
        return json.loads(text), None
    except (ValueError, yaml.YAMLError) as exc:
        kind = "YAML" if path.suffix.lower() in (".yaml", ".yml") else "JSON"
        return None, f"is not {kind} ({str(exc).splitlines()[0][:120]})"


def _what_counts(schema: ArtifactSchema | None, spec: ArtifactSpec) -> str:
    if schema is not None and schema.json_schema is not None:
        return f"the required fields of {schema.schema_id} filled"
    named = schema.required_sections if schema is not None else spec.required_sections
    return f"the sections {', '.join(named)} with text" if named else "it not empty"


def text_of(path: Path, limit: int) -> str:
    """A file's text (its head, past ``limit`` bytes), undecodable bytes replaced."""
    with open(path, "rb") as handle:
        return handle.read(limit).decode("utf-8", "replace")
