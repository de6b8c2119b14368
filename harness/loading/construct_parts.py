"""The parts of a construct file its phases and handoffs share: the artifacts they declare (``receives``,
``produces``, a handoff's ``required_artifacts`` with its ``validation``, a phase's ``output`` gate), the schemas
those name, a phase's goal rubric and the skills of the project."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.fields import Fields, Section
from harness.base.models import Frozen
from harness.base.yamlfile import load_yaml
from harness.loading.artifact_schemas import (
    ArtifactSchema,
    known_schemas,
    load_artifact_schema,
    schema_file,
)
from harness.loading.rubrics import (
    RUBRIC_SUFFIXES,
    find_rubric,
    rubric_files,
    rubric_identity,
)
from harness.loading.skills import SKILL_SUFFIXES

ARTIFACT_KEYS = ("path", "schema", "required", "min_completeness", "required_sections")
VALIDATION_KEYS = ("schema", "min_completeness", "required_sections")
SKILLS_DIR = "skills"

Fill = Callable[[str, Fields, "str | None"], str]


class ArtifactSpec(Frozen):
    """An artifact a phase receives or produces (the document's ArtifactSpec): a path in the workspace, maybe a
    glob, and what it must be."""

    path: str  # relative to the item's workspace, its slots filled
    schema_id: str | None = None
    required: bool = True
    min_completeness: float | None = None
    required_sections: tuple[str, ...] = ()  # sections that must be there with text under them
    source: str = ""  # the field that declared it, for messages

    def wire(self) -> dict[str, Any]:
        """The ArtifactSpec as a PhaseHandoff lists it."""
        return {"path": self.path, "schema": self.schema_id, "required": self.required,
                "min_completeness": self.min_completeness, "required_sections": list(self.required_sections)}


class SchemaBook:
    """The schemas a construct names, each loaded once; an unknown id is an error naming the field."""

    def __init__(self, construct: Path, root: Path):
        self.start, self.root = construct.parent, root
        self.loaded: dict[str, ArtifactSchema] = {}

    def get(self, schema_id: str, place: Fields, key: str) -> ArtifactSchema:
        if schema_id not in self.loaded:
            file = schema_file(schema_id, self.start, self.root)
            if file is None:
                known = known_schemas(self.start, self.root)
                raise place.error(key, f"no schema {schema_id!r}{did_you_mean(schema_id, known)} (known: "
                                  f"{', '.join(known) or 'none'})", f"add schemas/{schema_id}.json (a JSON Schema) or "
                                  f"schemas/{schema_id}.yaml (`required_sections: [...]`) next to the construct")
            self.loaded[schema_id] = load_artifact_schema(schema_id, file)
        return self.loaded[schema_id]


def workspace_path(section: Section, key: str, fill: Fill) -> str:
    """The path at ``key`` of ``section``: see :func:`in_workspace`."""
    return in_workspace(section.raw.get(key), section.fields, key, fill)


def in_workspace(raw: Any, place: Fields, key: str | None, fill: Fill) -> str:
    """A path in the item's workspace, its slots filled: relative, never out of it."""
    text = fill(place.string(raw, key, what="a path in the workspace"), place, key)
    pure = PurePosixPath(text)
    if pure.is_absolute() or ".." in pure.parts:
        raise place.error(key, f"{text} leaves the workspace", "write a path relative to the workspace, without '..'")
    return str(pure)


def constraints(section: Section, book: SchemaBook, *, schema_id: str | None = None) -> dict[str, Any]:
    """``schema``, ``min_completeness`` and ``required_sections`` (a list, or ``true``: every section the schema
    names) as an ArtifactSpec holds them."""
    if "schema" in section:
        schema_id = section.fields.identifier(section.raw["schema"], "schema", "schema id")
    schema = book.get(schema_id, section.fields, "schema") if schema_id else None
    minimum = section.number("min_completeness", None, low=0.0, high=1.0)
    raw = section.raw.get("required_sections")
    if raw is True:
        if schema is None or schema.kind != "markdown_sections":
            raise section.error("required_sections", "true means every section of the schema, and "
                                + ("there is no schema" if schema is None else f"{schema.schema_id} is a JSON Schema"),
                                "name a Markdown sections schema (`schema: <id>`), or list the sections")
        return {"schema_id": schema_id, "min_completeness": minimum, "required_sections": schema.sections}
    named = section.text_list("required_sections", single=False) if raw not in (None, False) else ()
    if named and schema is not None and schema.kind != "markdown_sections":
        raise section.error("required_sections", f"are Markdown headings, but {schema.schema_id} is a JSON Schema",
                            "remove required_sections, or use a Markdown sections schema")
    if schema is not None:
        for index, name in enumerate(named):
            if name not in schema.sections:
                raise section.error(f"required_sections[{index}]", f"{name!r} is not a section of {schema.schema_id}"
                                    f"{did_you_mean(name, schema.sections)}",
                                    f"use one of: {', '.join(schema.sections)}")
    return {"schema_id": schema_id, "min_completeness": minimum, "required_sections": named}


def artifact_list(phase: Section, key: str, book: SchemaBook, fill: Fill) -> tuple[ArtifactSpec, ...]:
    """A phase's ``receives`` or ``produces``: each entry a path, or ``{path, schema, required, min_completeness,
    required_sections}``."""
    raw = phase.raw.get(key) or []
    if not isinstance(raw, list):
        raise phase.fields.expected(key, "a list", raw, f"write `{key}: [{{path: out/file.md, schema: my-schema}}]`")
    found = []
    for index, item in enumerate(raw):
        where = f"{key}[{index}]"
        entry = phase.fields.nested(where).section({"path": item} if isinstance(item, str) else item,
                                                   known=ARTIFACT_KEYS, required=("path",))
        found.append(ArtifactSpec(path=workspace_path(entry, "path", fill), required=entry.boolean("required", True),
                                  source=phase.sub(where), **constraints(entry, book)))
    return merge_specs(found, phase.fields.nested(key))


def merge_specs(specs: Iterable[ArtifactSpec], place: Fields) -> tuple[ArtifactSpec, ...]:
    """Declarations of one path made one: required if any requires it, the highest ``min_completeness``, every
    required section; two schemas for one path are an error."""
    merged: dict[str, ArtifactSpec] = {}
    for spec in specs:
        known = merged.get(spec.path)
        if known is None:
            merged[spec.path] = spec
            continue
        if known.schema_id and spec.schema_id and known.schema_id != spec.schema_id:
            raise HarnessConfigError(place.path, spec.source or place.field, f"{spec.path} is checked against "
                                     f"{spec.schema_id} here and {known.schema_id} in {known.source}",
                                     "give one artifact one schema")
        lows = [v for v in (known.min_completeness, spec.min_completeness) if v is not None]
        merged[spec.path] = known.model_copy(update={
            "schema_id": known.schema_id or spec.schema_id, "required": known.required or spec.required,
            "min_completeness": max(lows) if lows else None,
            "required_sections": tuple(dict.fromkeys(known.required_sections + spec.required_sections))})
    return tuple(merged.values())


def output_spec(gate: Section, produces: tuple[ArtifactSpec, ...], book: SchemaBook, phase: str) -> ArtifactSpec | None:
    """``assessment.gates.<phase>.output``: what the phase's primary artifact (its first ``produces`` path) must be."""
    if "output" not in gate:
        return None
    output = gate.section("output", known=VALIDATION_KEYS)
    if not produces:
        raise output.error(None, f"checks the phase's output, but phase {phase} produces nothing",
                           f"add `phases.{phase}.produces: [{{path: ...}}]` (its first path is the output)")
    primary = produces[0]
    found = constraints(output, book, schema_id=primary.schema_id)
    if primary.schema_id and found["schema_id"] != primary.schema_id:
        raise output.error("schema", f"is {found['schema_id']}, but {primary.path} is produced as {primary.schema_id}",
                           "give one artifact one schema")
    return ArtifactSpec(path=primary.path, required=True, source=output.sub("") or "output", **found)


def validation_spec(handoff: Section, book: SchemaBook) -> dict[str, Any]:
    """A handoff's ``validation``: applied to each of its ``required_artifacts``."""
    return constraints(handoff.section("validation", known=VALIDATION_KEYS), book)


def rubric_file(phase: Section, rubrics_dir: Path) -> Path:
    """``rubric:`` as agents.yaml writes it: a rubric file (relative to the construct), a file name in the rubrics
    folder, or a review rubric's id."""
    ref = phase.text("rubric") or ""
    if ref.endswith(RUBRIC_SUFFIXES):
        target = phase.fields.project_path(ref, "rubric", example="a rubric file inside the project")
        if target.is_file():
            return target
        raise phase.error("rubric", f"no rubric file {target}", "fix the path; it is relative to the construct")
    found = find_rubric(ref, None, rubrics_dir)
    if found is None:
        known = sorted({p.stem for p in rubric_files(rubrics_dir)} | {
            rid for p in rubric_files(rubrics_dir) for rid, _ in [rubric_identity(p)] if rid})
        raise phase.error("rubric", f"no rubric {ref!r} in {rubrics_dir}{did_you_mean(ref, known)}",
                          f"use one of: {', '.join(known)}" if known else f"create {rubrics_dir / ref}.yaml")
    return found.resolve()


def find_skill(skill_id: str, import_root: Path) -> Path | None:
    """The skill file of ``skill_id`` under the project's ``skills/`` folder."""
    folder = import_root / SKILLS_DIR
    if not folder.is_dir():
        return None
    for path in sorted(p for suffix in SKILL_SUFFIXES for p in folder.rglob(f"*{suffix}")):
        try:
            raw = load_yaml(path)
        except HarnessConfigError:
            continue  # a broken skill file is reported where it is collected
        if isinstance(raw, dict) and raw.get("skill_id") == skill_id:
            return path
    return None
