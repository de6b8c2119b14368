"""The prompt registry: versioned prompts that skills name by ``prompt_id`` (and ``prompt_version``).

The registry is one folder of the project (ini ``harness_prompts_dir``, default ``prompts``), as the rubrics folder
is the rubrics': each ``.yaml``, ``.yml`` or ``.json`` file in it is one version of one prompt::

    prompt_id: summarize-article
    version: 1.2.0
    description: Summarise an article as JSON          # optional
    vars_schema: {type: object, required: [title, text], properties: {title: {type: string}, ...}}
    output_schema: {...}                               # optional: the answer's schema (the skill's must be the same)
    template: |
      Summarise the article "{{title}}" ...

A name asks for the latest version (the highest semantic version) unless a version is pinned. The template's slots
are ``{{var}}`` (or ``{var}``), in the project's one template language (:mod:`harness.base.slots`); a prompt's
variables are checked against its ``vars_schema`` before it is rendered, so a template never meets a value its
schema refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.base import jsonschemas, slots
from harness.base.errors import ExitCode, HarnessConfigError, ValidationFailed
from harness.base.fields import Fields
from harness.base.models import Frozen
from harness.base.semver import parse_version
from harness.base.yamlfile import load_yaml
from harness.loading.registry import file_identity, registry_files

PROMPT_KEYS = ("prompt_id", "version", "description", "vars_schema", "output_schema", "template")


class VarsRejected(ValidationFailed):
    """A prompt's variables do not match its ``vars_schema`` (or lack a value a slot needs): nothing is rendered,
    no model is called. The data is wrong (exit code 65), not a model's answer."""

    exit_code = ExitCode.DATA_ERROR


class RegisteredPrompt(Frozen):
    """One version of one prompt of the registry."""

    prompt_id: str
    version: str
    path: Path
    template: str
    description: str | None = None
    vars_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None

    @property
    def slots(self) -> list[str]:
        return slots.slots_in(self.template)

    def render(self, variables: Mapping[str, Any]) -> str:
        """The template with its slots filled from ``variables``, after checking them against ``vars_schema``.
        Raises :class:`VarsRejected` naming what is wrong, before anything is rendered."""
        label = f"prompt {self.prompt_id}@{self.version}"
        if self.vars_schema is not None:
            errors = jsonschemas.errors(dict(variables), self.vars_schema, formats=True)
            if errors:
                raise VarsRejected(f"the input does not match {label}'s vars_schema: {'; '.join(errors[:3])}",
                                   errors)
        missing = [name for name in self.slots if slots.value_at(variables, name.split(".")) is slots.MISSING]
        if missing:
            problem = f"{label}'s template uses {{{{{missing[0]}}}}}, which the input has no value for"
            raise VarsRejected(problem, [problem])
        return slots.render_text(self.template, lambda name: slots.value_at_name(variables, name))


def known_prompts(folder: Path) -> list[str]:
    """The ``prompt_id@version`` of every prompt in the registry."""
    identities = (file_identity(path, "prompt_id") for path in registry_files(folder))
    return sorted(f"{pid}@{version}" for pid, version in identities if pid)


def find_prompt(prompt_id: str, version: str | None, folder: Path) -> Path | None:
    """The file of ``prompt_id`` at ``version``, else at its latest version; None when the registry has none.
    Two files of one id and version are an error naming both."""
    matches = [(v, path) for path in registry_files(folder) for pid, v in [file_identity(path, "prompt_id")]
               if pid == prompt_id]
    seen: dict[str | None, Path] = {}
    for v, path in matches:
        if v in seen:
            raise HarnessConfigError(path, "version", f"prompt {prompt_id} version {v} is also {seen[v].name}",
                                     "give each version of a prompt its own version number")
        seen[v] = path
    if version is not None:
        return seen.get(version)
    versioned = [(parse_version(v), path) for v, path in matches if v and parse_version(v) is not None]
    return max(versioned, key=lambda pair: pair[0])[1] if versioned else None


def load_registered_prompt(path: Path, *, import_root: Path) -> RegisteredPrompt:
    """One prompt file, checked: its id and version, its schemas valid JSON Schema, and every slot of its template
    declared by its ``vars_schema`` (when that lists properties and allows no others)."""
    top = Fields.of(path, import_root=import_root).section(
        load_yaml(path), known=PROMPT_KEYS, required=("prompt_id", "version", "template"),
        example="`prompt_id:`, `version:`, `vars_schema:`, `output_schema:` and `template:` lines")
    template = top.fields.string(top.raw["template"], "template", what="the prompt's text",
                                 fix="write the prompt under `template: |`")
    vars_schema = top.json_schema("vars_schema")
    declared = (vars_schema or {}).get("properties")
    if isinstance(declared, Mapping) and (vars_schema or {}).get("additionalProperties") is False:
        for name in slots.slots_in(template):
            if name.split(".")[0] not in declared:
                raise top.error("template", f"uses {{{{{name}}}}}, which vars_schema does not declare",
                                f"add {name.split('.')[0]!r} to vars_schema.properties, or correct the slot")
    return RegisteredPrompt(prompt_id=top.identifier("prompt_id", "prompt id"), version=top.version("version"),
                            path=path, template=template, description=top.text("description"),
                            vars_schema=vars_schema, output_schema=top.json_schema("output_schema"))
