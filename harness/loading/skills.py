"""Skill files (``*.skill.yaml``): a SkillDescriptor (the skill document) and the skill's cases, its items.

The descriptor's fields are the document's: ``skill_id``, ``version``, ``title``, ``description``, ``tags``,
``input_schema``, ``output_schema``, ``implementation`` (``type``: ``python_function``, ``cli_command`` or
``http_call``; ``handler``), ``template_type`` (``LLM_JSON_GENERATION``, ``LLM_REVIEW`` or null),
``template_config``, ``produces_artifacts``, ``policy`` and ``observability``; the file is checked against the
shipped contract (``harness/base/contracts/skill_descriptor.json``) and the document's validation rules:
``template_config`` with a ``template_type``, a ``prompt_id`` the prompt registry has, an ``output_schema`` for
a generation, a ``rubric_id`` the rubrics folder has for a review. The harness adds the items: ``cases:`` (each an
``id``, its ``inputs``, ``expected``, ``checks``) or ``dataset:`` (a case a row, as in a case file), and ``inputs:``
every case shares. The descriptor is the project's configuration (its handler may name any code); its cases are
data (their checks name code only from ini harness_data_modules). docs/skills.md says what each field does.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from harness.base import jsonschemas
from harness.base.errors import HarnessConfigWarning
from harness.base.fields import Fields, Section
from harness.base.models import Case, Frozen, ModelSettings
from harness.base.yamlfile import load_yaml
from harness.checks import CheckParser, import_callable
from harness.checks.paths import path_option
from harness.loading.cases import additions, owned_cases
from harness.loading.prompt_registry import (
    RegisteredPrompt,
    find_prompt,
    known_prompts,
    load_registered_prompt,
)
from harness.loading.rubrics import find_rubric, rubric_files, rubric_identity
from harness.loading.suites import model_name

SKILL_SUFFIXES = (".skill.yaml", ".skill.yml")
TEMPLATE_TYPES = ("LLM_JSON_GENERATION", "LLM_REVIEW")
IMPLEMENTATION_TYPES = ("python_function", "cli_command", "http_call")
SKILL_KEYS = ("skill_id", "version", "title", "description", "tags", "input_schema", "output_schema",
              "implementation", "template_type", "template_config", "produces_artifacts", "policy", "observability",
              "inputs", "cases", "dataset")
GENERATION_KEYS = ("prompt_id", "prompt_version", "model", "temperature", "max_tokens", "retry_on_validation_failure")
REVIEW_KEYS = ("rubric_id", "rubric_version", "evaluation_model", "include_criteria_details")
POLICY_KEYS = ("timeout_s", "network", "env", "threshold")
OBSERVABILITY_KEYS = ("record_prompt", "record_raw_response")
CASE_KEYS = ("id", "inputs", "expected", "checks", "criteria", "description", "today")  # criteria: refused in words
DOCS = "docs/skills.md"

TemplateType = Literal["LLM_JSON_GENERATION", "LLM_REVIEW"]


class Implementation(Frozen):
    """The skill's own handler: a Python callable (imported when the file loads), a command, or a URL."""

    type: Literal["python_function", "cli_command", "http_call"]
    handler: str
    function: Callable[..., Any] | None = None  # the python_function, imported


class GenerationConfig(Frozen):
    """``LLM_JSON_GENERATION``'s template_config, resolved: the prompt (its version chosen) and the model."""

    prompt: RegisteredPrompt
    pinned: bool  # prompt_version was given
    model: ModelSettings
    retry_on_validation_failure: bool = True


class ReviewConfig(Frozen):
    """``LLM_REVIEW``'s template_config, resolved: the review rubric's file (its version chosen) and the model."""

    rubric_id: str
    rubric_path: Path
    rubric_version: str | None  # as pinned; None: the latest
    evaluation_model: ModelSettings
    include_criteria_details: bool = False


class ArtifactSpec(Frozen):
    """An artifact the skill declares it produces: a part of its output (``path``), which must be there."""

    name: str
    path: tuple[str, ...]
    description: str | None = None
    media_type: str | None = None


class SkillPolicy(Frozen):
    timeout_s: float | None = None  # the handler's and each model call's deadline
    network: bool = False  # a cli_command handler may reach the network
    env: tuple[str, ...] = ()  # environment variables a cli_command handler gets
    threshold: float = 1.0  # the pass mark of a case's checks (a review passes by its rubric)


class Observability(Frozen):
    record_prompt: bool = False  # keep the rendered prompt in each GenerationResult
    record_raw_response: bool = True  # keep the model's raw answer (rawResponse)


class Skill(Frozen):
    """A skill file, loaded: the descriptor and its cases."""

    path: Path
    skill_id: str
    version: str
    title: str
    description: str
    tags: tuple[str, ...]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    implementation: Implementation | None
    template_type: TemplateType | None
    generation: GenerationConfig | None = None
    review: ReviewConfig | None = None
    produces_artifacts: tuple[ArtifactSpec, ...] = ()
    policy: SkillPolicy = SkillPolicy()
    observability: Observability = Observability()
    cases: tuple[Case, ...] = ()

    @property
    def kind(self) -> str:
        """What runs it, as reports name it: the template type, else the handler's type."""
        return self.template_type or (self.implementation.type if self.implementation else "skill")


def load_skill(path: Path, *, prompts_dir: Path, rubrics_dir: Path, import_root: Path,
               input_roots: Sequence[Path] | None = None, check_kinds: Mapping[str, CheckParser] | None = None,
               data_modules: Sequence[str] = ()) -> Skill:
    """A skill file, every rule checked; each mistake one ``HarnessConfigError`` naming the file, field and fix."""
    roots = tuple(input_roots) if input_roots else (import_root,)
    raw = load_yaml(path)
    top = Fields.of(path, import_root=import_root, roots=roots).section(
        raw, known=SKILL_KEYS, required=("skill_id", "version", "title", "description", "input_schema"),
        example=f"the skill descriptor's fields ({DOCS})")
    template_type = _template_type(top)
    _document_rules(top, template_type)
    skill_id = top.identifier("skill_id", "skill id")
    policy = _policy(top, template_type)
    fields = dict(
        path=path, skill_id=skill_id, version=top.version("version"), title=top.text("title") or "",
        description=top.text("description") or "", tags=top.text_list("tags", single=False),
        input_schema=top.json_schema("input_schema", required=True), output_schema=top.json_schema("output_schema"),
        implementation=_implementation(top, import_root), template_type=template_type,
        produces_artifacts=_artifacts(top), policy=policy, observability=_observability(top),
    )
    if template_type == "LLM_JSON_GENERATION":
        fields["generation"] = _generation(top, fields["output_schema"], prompts_dir, import_root, policy)
    elif template_type == "LLM_REVIEW":
        fields["review"] = _review(top, fields["output_schema"], rubrics_dir, policy)
    fields["cases"] = tuple(_cases(top, skill_id, template_type, roots, import_root, check_kinds, data_modules))
    jsonschemas.check_contract("skill_descriptor", path, raw,
                                f"write the field as the skill descriptor has it ({DOCS})")
    return Skill(**fields)


# --- the descriptor ------------------------------------------------------------------------------


def _template_type(top: Section) -> TemplateType | None:
    """The template type, and the document's first rule: a template_config with a type, none without one."""
    raw = top.raw.get("template_type")
    if raw is None:
        if "template_config" in top:
            raise top.error("template_config", "has no meaning without template_type",
                            "add `template_type: LLM_JSON_GENERATION` or `LLM_REVIEW`, or remove template_config")
        return None
    kind = top.fields.choice(raw, "template_type", TEMPLATE_TYPES, "template type",
                             fix="use LLM_JSON_GENERATION, LLM_REVIEW, or null for a skill with its own handler")
    if "template_config" not in top:
        needed = "prompt_id" if kind == "LLM_JSON_GENERATION" else "rubric_id"
        raise top.error("template_config", f"missing: a skill of template_type {kind} needs its template_config",
                        f"add `template_config: {{{needed}: ...}}`")
    return kind  # type: ignore[return-value]


def _document_rules(top: Section, template_type: str | None) -> None:
    """The document's rules on which fields a skill has, in words: a generation validates against its
    ``output_schema`` and is run by its template; a skill without a template runs its own handler and validates its
    output; its items come from ``cases:`` or ``dataset:``."""
    if template_type == "LLM_JSON_GENERATION" and "output_schema" not in top:
        raise top.error("output_schema", "missing: an LLM_JSON_GENERATION skill's answers are validated against it",
                        "add `output_schema:` (the JSON Schema of the answer)")
    if template_type == "LLM_JSON_GENERATION" and "implementation" in top:
        raise top.error("implementation", "a generation skill is run by its prompt template, not a handler",
                        "remove implementation (or use template_type: null to run the handler)")
    if template_type is None and "implementation" not in top:
        raise top.error("implementation", "missing: a skill without a template_type runs its own handler",
                        "add `implementation: {type: python_function, handler: module:function}`, or set "
                        "template_type")
    if template_type is None and "output_schema" not in top:
        raise top.error("output_schema", "missing: a skill's handler output is validated against it",
                        "add `output_schema:` (the JSON Schema of the skill's output)")
    if "cases" not in top and "dataset" not in top:
        raise top.error("cases", "missing: a skill's cases (or a dataset's rows) are its items, and it has none",
                        "add `cases:` with `- id: first` and its `inputs:`, or `dataset: {file: rows.jsonl}`")
    if "cases" in top and "dataset" in top:
        raise top.error("cases", "given beside dataset:, but a skill takes its cases from one of them", "keep one")



def _implementation(top: Section, import_root: Path) -> Implementation | None:
    if "implementation" not in top:
        return None
    section = top.section("implementation", known=("type", "handler"), required=("type", "handler"))
    if section.raw.get("type") == "ts_function":
        raise section.error("type", "ts_function names a TypeScript function, which the harness cannot run",
                            "write the handler in Python (`type: python_function`, `handler: module:function`), or "
                            "run it as `type: cli_command`")
    kind = section.choice("type", IMPLEMENTATION_TYPES, "implementation type")
    handler = section.fields.string(section.raw["handler"], "handler")
    function = None
    if kind == "python_function":
        function = import_callable(handler, path=top.fields.path, field=section.sub("handler"),
                                   import_root=import_root)
    elif kind == "http_call" and not handler.startswith(("http://", "https://")):
        raise section.error("handler", f"{handler!r} is not an http:// or https:// URL",
                            "write the URL the input is POSTed to, e.g. http://127.0.0.1:8080/summarize")
    return Implementation(type=kind, handler=handler, function=function)  # type: ignore[arg-type]


def _policy(top: Section, template_type: str | None) -> SkillPolicy:
    section = top.section("policy", known=POLICY_KEYS)
    if "threshold" in section and template_type == "LLM_REVIEW":
        raise section.error("threshold", "a review skill passes by its rubric (scoring_mode, pass_threshold)",
                            "remove policy.threshold, or set pass_threshold in the review rubric")
    timeout = section.number("timeout_s", None, low=0.001, high=3600.0)
    env = section.text_list("env", single=False)
    for index, name in enumerate(env):
        if not name.isidentifier():
            raise section.error(f"env[{index}]", f"{name!r} is not an environment variable's name",
                                "list the NAMES of the variables a command handler gets, e.g. `env: [MY_TOKEN]`")
    return SkillPolicy(timeout_s=timeout, network=section.boolean("network", False), env=env,
                       threshold=section.number("threshold", 1.0, low=0.0, high=1.0))


def _observability(top: Section) -> Observability:
    section = top.section("observability", known=OBSERVABILITY_KEYS)
    return Observability(record_prompt=section.boolean("record_prompt", False),
                         record_raw_response=section.boolean("record_raw_response", True))


def _artifacts(top: Section) -> tuple[ArtifactSpec, ...]:
    raw = top.raw.get("produces_artifacts") or []
    if not isinstance(raw, list):
        raise top.fields.expected("produces_artifacts", "a list", raw, "write `- summary` or `- {name: summary, "
                                  "path: result.summary}` lines")
    found = []
    for index, item in enumerate(raw):
        place = top.fields.nested(f"produces_artifacts[{index}]")
        entry = place.section({"name": item} if isinstance(item, str) else item,
                              known=("name", "path", "description", "media_type"), required=("name",))
        name = entry.identifier("name", "artifact name")
        path = path_option(entry.raw.get("path", name), entry.fields, "path")
        found.append(ArtifactSpec(name=name, path=path, description=entry.text("description"),
                                  media_type=entry.text("media_type")))
    return tuple(found)


def _settings(config: Section, key: str, policy: SkillPolicy, **values: Any) -> ModelSettings:
    """The model a template calls: its name checked (a known provider, a scripted mock model), the skill's
    ``policy.timeout_s`` as each call's deadline."""
    base = ModelSettings()
    model = model_name(config, key, base.model) if key in config else base.model
    return dataclasses.replace(base, model=model, timeout_s=policy.timeout_s or base.timeout_s, **values)


def _generation(top: Section, output_schema: dict[str, Any] | None, prompts_dir: Path, import_root: Path,
                policy: SkillPolicy) -> GenerationConfig:
    config = top.section("template_config", known=GENERATION_KEYS, required=("prompt_id",))
    prompt_id = config.identifier("prompt_id", "prompt id")
    version = config.version("prompt_version") if "prompt_version" in config else None
    found = find_prompt(prompt_id, version, prompts_dir)
    if found is None:
        known = ", ".join(known_prompts(prompts_dir)) or f"none: {prompts_dir} has no prompt files"
        wanted = f"{prompt_id}@{version}" if version else prompt_id
        raise config.error("prompt_id", f"no prompt {wanted} in the prompt registry (known: {known})",
                           f"add {prompts_dir.name}/{prompt_id}.yaml with `prompt_id: {prompt_id}`, correct the id, or "
                           "point ini harness_prompts_dir at the registry")
    prompt = load_registered_prompt(found, import_root=import_root)
    if prompt.output_schema is not None and prompt.output_schema != output_schema:
        raise top.error("output_schema", f"differs from the output_schema of prompt {prompt.prompt_id}@{prompt.version}"
                        f" ({found.name}), so the model would be asked for one shape and checked against another",
                        "make the two schemas the same, or remove the prompt's")
    settings = _settings(config, "model", policy,
                         temperature=config.number("temperature", ModelSettings().temperature, low=0.0, high=2.0),
                         max_tokens=config.integer("max_tokens", ModelSettings().max_tokens))
    return GenerationConfig(prompt=prompt, pinned=version is not None, model=settings,
                            retry_on_validation_failure=config.boolean("retry_on_validation_failure", True))


def _review(top: Section, output_schema: dict[str, Any] | None, rubrics_dir: Path,
            policy: SkillPolicy) -> ReviewConfig:
    config = top.section("template_config", known=REVIEW_KEYS, required=("rubric_id",))
    rubric_id = config.identifier("rubric_id", "rubric id")
    version = config.version("rubric_version") if "rubric_version" in config else None
    found = find_rubric(rubric_id, version, rubrics_dir)
    if found is None or rubric_identity(found)[0] is None:
        known = sorted({rid for p in rubric_files(rubrics_dir) for rid, _ in [rubric_identity(p)] if rid})
        wanted = f"{rubric_id}@{version}" if version else rubric_id
        what = (f"{found.name} is a rubric of dimensions, not a review rubric" if found is not None else
                f"no review rubric {wanted} in {rubrics_dir}")
        raise config.error("rubric_id", f"{what} (review rubrics: {', '.join(known) or 'none'})",
                           f"add a review rubric (`rubric_id: {rubric_id}`, criteria with pass and fail conditions) "
                           "to the rubrics folder, or correct the id")
    if output_schema is not None:
        _review_schema_should_fit(top, output_schema)
    return ReviewConfig(rubric_id=rubric_id, rubric_path=found, rubric_version=version,
                        evaluation_model=_settings(config, "evaluation_model", policy),
                        include_criteria_details=config.boolean("include_criteria_details", False))


def _review_schema_should_fit(top: Section, schema: dict[str, Any]) -> None:
    """The document's SHOULD: a review skill's output_schema matches the ReviewResult; one that rejects a
    well-formed ReviewResult is said at collection (and a review it rejects fails its item)."""
    passing = {"pass": True, "issues": [], "suggested_fixes": [], "indeterminate": [],
               "timings_ms": {"evaluation": 0, "total": 0}}
    rejected = jsonschemas.errors(passing, schema)
    if rejected:
        warnings.warn(HarnessConfigWarning(top.fields.path, "output_schema",
                                           f"rejects a well-formed ReviewResult ({rejected[0]})",
                                           "describe the ReviewResult's fields (pass, issues, suggested_fixes, "
                                           "indeterminate, criteria_results, timings_ms), or remove output_schema"),
                      stacklevel=2)


# --- the cases -----------------------------------------------------------------------------------


def _cases(top: Section, skill_id: str, template_type: str | None, roots: tuple[Path, ...], import_root: Path,
           check_kinds: Mapping[str, CheckParser] | None, data_modules: Sequence[str]) -> Iterator[Case]:
    """The skill's items: ``cases:`` or a ``dataset:``'s rows, each a :class:`Case` of the skill (data: its checks
    name code only from ``data_modules``)."""
    seen: set[str] = set()

    def make(place: Section, case_id: str, inputs: dict[str, Any], line: int, **more: Any) -> Case:
        return _case(place, skill_id, template_type, case_id, inputs, seen, line, import_root, check_kinds, **more)

    return owned_cases(top, "the skill's input object", CASE_KEYS, roots, data_modules, make)


def _case(place: Section, skill_id: str, template_type: str | None, case_id: str, inputs: dict[str, Any],
          seen: set[str], line: int, import_root: Path, check_kinds: Mapping[str, CheckParser] | None,
          **more: Any) -> Case:
    if case_id in seen:
        raise place.error("id", f"duplicate case id {case_id!r}", "give every case its own id")
    seen.add(case_id)
    if "criteria" in place.raw:
        raise place.error("criteria", "a skill's case is scored by checks; judged criteria belong to a review rubric",
                          "make them `checks:`, or review the output with an LLM_REVIEW skill")
    if "checks" in place.raw and template_type == "LLM_REVIEW":
        raise place.error("checks", "a review skill's verdict is its rubric's",
                          "give the rubric's criteria a `check:` instead")
    added = additions(place, import_root, check_kinds)
    return Case(id=case_id, agent=skill_id, path=place.fields.path, line=line, inputs=inputs,
                expected=place.raw.get("expected"), checks=added.get("checks", ()), **more)
