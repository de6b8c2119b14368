"""Artifact schemas named by id (``schema: prd-v1``): a JSON Schema, or a Markdown sections spec, in a ``schemas/``
folder.

A construct names the schema of each artifact its phases hand on by id. ``schemas/<id>.json`` is a JSON Schema:
the artifact (JSON, or YAML for a ``.yaml``/``.yml`` file) is validated against it. ``schemas/<id>.yaml`` (or
``.yml``) is a Markdown sections spec: the headings a Markdown artifact must have::

    title: Product requirements                       # optional
    required_sections: [problem, users, goals, requirements]
    optional_sections: [research]                     # optional

The nearest ``schemas/`` folder that holds the id wins, from the construct's own folder up to the project root, so
constructs in one folder share their schemas. docs/constructs.md says how each is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.base import jsonschemas
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.base.models import Frozen
from harness.base.yamlfile import load_yaml, read_text

SCHEMA_DIR = "schemas"
JSON_SCHEMA_SUFFIX = ".json"
SECTIONS_SUFFIXES = (".yaml", ".yml")
SECTIONS_KEYS = ("title", "description", "required_sections", "optional_sections")


class ArtifactSchema(Frozen):
    """One schema an artifact is checked against: a JSON Schema, or the sections a Markdown artifact has."""

    schema_id: str
    path: Path
    json_schema: dict[str, Any] | None = None  # None: a Markdown sections spec
    required_sections: tuple[str, ...] = ()
    optional_sections: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "json_schema" if self.json_schema is not None else "markdown_sections"

    @property
    def sections(self) -> tuple[str, ...]:
        """Every section the spec names, required first."""
        return self.required_sections + self.optional_sections


def schema_folders(start: Path, root: Path) -> list[Path]:
    """The ``schemas/`` folders a construct in ``start`` may take schemas from, nearest first, up to ``root``."""
    found = []
    for folder in (start, *start.parents):
        if (folder / SCHEMA_DIR).is_dir():
            found.append(folder / SCHEMA_DIR)
        if folder == root or root not in folder.parents:
            break
    return found


def schema_file(schema_id: str, start: Path, root: Path) -> Path | None:
    """The file of ``schema_id``: the nearest ``schemas/<id>.json``, ``.yaml`` or ``.yml``."""
    for folder in schema_folders(start, root):
        for suffix in (JSON_SCHEMA_SUFFIX, *SECTIONS_SUFFIXES):
            candidate = folder / f"{schema_id}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def known_schemas(start: Path, root: Path) -> list[str]:
    """The schema ids a construct in ``start`` can name."""
    suffixes = (JSON_SCHEMA_SUFFIX, *SECTIONS_SUFFIXES)
    return sorted({p.name.rsplit(".", 1)[0] for folder in schema_folders(start, root) for p in folder.iterdir()
                   if p.is_file() and p.name.endswith(suffixes)})


def load_artifact_schema(schema_id: str, path: Path) -> ArtifactSchema:
    """The schema in ``path``; a mistake in it is one ``HarnessConfigError`` naming that file."""
    if path.suffix == JSON_SCHEMA_SUFFIX:
        try:
            schema = json.loads(read_text(path))
        except ValueError as exc:
            raise HarnessConfigError(path, None, f"is not JSON: {exc}", "write the JSON Schema as JSON") from None
        if not isinstance(schema, dict):
            raise HarnessConfigError(path, None, "is not a JSON Schema (an object)",
                                     'write e.g. {"type": "object", "required": ["title"]}')
        try:
            jsonschemas.check_schema(schema)
        except jsonschemas.SchemaInvalid as err:
            raise HarnessConfigError(path, err.where or None, f"not a valid JSON Schema: {err.problem}",
                                     err.fix) from None
        return ArtifactSchema(schema_id=schema_id, path=path, json_schema=schema)
    raw = load_yaml(path)
    if isinstance(raw, dict) and ("$schema" in raw or "type" in raw or "properties" in raw):
        raise HarnessConfigError(path, None, "looks like a JSON Schema, but a .yaml schema is a Markdown sections spec",
                                 f"save the JSON Schema as {path.with_suffix(JSON_SCHEMA_SUFFIX).name}")
    spec = Fields.of(path).section(raw, known=SECTIONS_KEYS, required=("required_sections",),
                                   example="`required_sections: [problem, goals]` (a Markdown sections spec)")
    required = spec.fields.string_list(spec.raw["required_sections"], "required_sections",
                                       example="`required_sections: [problem, goals]`")
    optional = spec.text_list("optional_sections", single=False)
    twice = sorted(set(required) & set(optional))
    if twice:
        raise spec.error("optional_sections", f"{twice[0]!r} is also a required section", "name it in one list")
    return ArtifactSchema(schema_id=schema_id, path=path, required_sections=required, optional_sections=optional)
