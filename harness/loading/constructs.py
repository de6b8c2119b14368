"""Construct files (``construct.yaml``, ``*.construct.yaml``): phases run in order, each handing its artifacts on.

The fields are the assessment document's (``apiVersion``, ``kind: Construct``, ``metadata``, ``skills``,
``execution``, the ``phases:`` block with ``receives`` and ``produces``, ``assessment`` with ``capture``,
``gates``, ``exit_codes`` and ``handoffs``, and ``contracts``); the harness adds how each phase runs (a
``producer:`` exactly as agents.yaml writes one, or ``skill:``), its goal (``rubric:``), ``vars:`` (the slots of
paths such as ``grimoires/{project}/prd.md``) and ``workspace:`` (project files the first phase finds). Every
path of an artifact is relative to the item's workspace. The file is read field by field (each mistake one
``HarnessConfigError`` naming the file, the field and the fix), then checked against the shipped contract
(``harness/base/contracts/construct.json``). docs/constructs.md says what each field does.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness.base import jsonschemas, slots
from harness.base.capture import INPUT_CAPTURES, OUTPUT_CAPTURES, Capture
from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.fields import Fields, Section
from harness.base.models import AgentConfig, Frozen
from harness.base.yamlfile import load_yaml
from harness.checks import CheckParser
from harness.loading.artifact_schemas import ArtifactSchema
from harness.loading.construct_checks import Precondition, artifact_names, preconditions
from harness.loading.construct_contracts import (
    OPTIONAL_MARK,
    PhaseContract,
    phase_contract,
)
from harness.loading.construct_contracts import exit_names as construct_exit_names
from harness.loading.construct_parts import (
    ArtifactSpec,
    Fill,
    SchemaBook,
    artifact_list,
    find_skill,
    in_workspace,
    merge_specs,
    output_spec,
    rubric_file,
    validation_spec,
    workspace_path,
)
from harness.loading.skills import Skill, load_skill
from harness.loading.suites import runner_agent

CONSTRUCT_NAMES = ("construct.yaml", "construct.yml")
CONSTRUCT_SUFFIXES = (".construct.yaml", ".construct.yml")
KIND = "Construct"
API_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*/v\d+[A-Za-z0-9]*$")
TOP_KEYS = ("apiVersion", "kind", "metadata", "vars", "workspace", "skills", "execution", "phases", "assessment",
            "contracts")
PHASE_KEYS = ("description", "producer", "evaluator", "model", "judge", "skill", "inputs", "rubric", "receives",
              "produces")
ASSESSMENT_KEYS = ("capture", "gates", "exit_codes", "handoffs")
GATE_KEYS = ("precondition", "execution", "output")
HANDOFF_KEYS = ("required_artifacts", "optional_artifacts", "validation", "on_failure")
ON_FAILURE = ("block", "warn", "skip")
DOCS = "docs/constructs.md"

OnFailure = Literal["block", "warn", "skip"]


class Handoff(Frozen):
    """What one phase hands the next: the artifacts checked between them and what happens when they fail."""

    name: str  # ``<from>_to_<to>``
    from_phase: str
    to_phase: str
    artifacts: tuple[ArtifactSpec, ...]  # required_artifacts (validation applied), optional_artifacts, receives
    on_failure: OnFailure = "block"
    declared: bool = True  # False: no assessment.handoffs entry, made from the receiver's receives


class SkillRun(Frozen):
    """A phase run by a skill of the project (``skill:``, or ``skills[].phase``)."""

    skill_id: str
    skill: Skill | None  # None: an optional skill (``required: false``) the project does not have
    # the skill's input: text with vars filled, ``{artifact: path}`` read from the workspace at run time
    inputs: dict[str, Any] = Field(default_factory=dict)


class Phase(Frozen):
    name: str
    line: int
    description: str | None = None
    agent: AgentConfig | None = None  # its producer (and evaluator), read as agents.yaml reads an agent's
    skill: SkillRun | None = None
    rubric_path: Path | None = None  # gate 4: the rubric its primary artifact is scored by
    receives: tuple[ArtifactSpec, ...] = ()
    produces: tuple[ArtifactSpec, ...] = ()
    preconditions: tuple[Precondition, ...] = ()
    timeout_ms: int | None = None
    max_retries: int = 0
    output: ArtifactSpec | None = None  # assessment.gates.<phase>.output, on the phase's first produces path
    contract: PhaseContract = PhaseContract()

    @property
    def operator_type(self) -> str:
        if self.skill is not None:
            return f"skill:{self.skill.skill.kind}" if self.skill.skill else "skill"
        assert self.agent is not None
        return self.agent.producer.kind


class SkillUse(Frozen):
    name: str
    required: bool = True
    phase: str | None = None
    path: Path | None = None  # the skill file; None: not in the project


class Construct(Frozen):
    path: Path
    api_version: str
    name: str
    version: str
    description: str | None = None
    vars: dict[str, str] = Field(default_factory=dict)
    workspace: tuple[Path, ...] = ()  # project files and folders copied into the workspace before the first phase
    skills: tuple[SkillUse, ...] = ()
    phases: tuple[Phase, ...]
    handoffs: tuple[Handoff, ...] = ()  # one between each two consecutive phases
    capture: Capture = Capture()
    exit_names: dict[int, str] = Field(default_factory=dict)  # assessment.exit_codes: a code's name in the records
    schemas: dict[str, ArtifactSchema] = Field(default_factory=dict)

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    @property
    def kept(self) -> Capture:
        """What its executions keep of their inputs and outputs: nothing when ``capture.enabled`` is false."""
        if self.capture.enabled:
            return self.capture
        return dataclasses.replace(self.capture, include_inputs="none", include_outputs="none")


def load_construct(path: Path, *, import_root: Path, rubrics_dir: Path, prompts_dir: Path, runner_kinds: Iterable[str],
                   input_roots: Sequence[Path] | None = None, check_kinds: Mapping[str, CheckParser] | None = None,
                   data_modules: Sequence[str] = ()) -> Construct:
    """A construct file, every rule checked; each mistake one ``HarnessConfigError`` naming the file, field and fix."""
    roots = tuple(input_roots) if input_roots else (import_root,)
    raw = load_yaml(path)
    top = Fields.of(path, import_root=import_root, roots=roots).section(
        raw, known=TOP_KEYS, required=("apiVersion", "kind", "metadata", "execution"),
        example=f"a construct ({DOCS})")
    api_version = top.text("apiVersion") or ""
    if not API_VERSION.match(api_version):
        raise top.error("apiVersion", f"{api_version!r} is not a group and version", "write e.g. `apiVersion: loa/v1`")
    if top.raw["kind"] != KIND:
        raise top.error("kind", f"{top.raw['kind']!r} is not a construct", f"write `kind: {KIND}`")
    meta = top.section("metadata", known=("name", "version", "description"), required=("name", "version"))
    names = _phase_names(top)
    variables = _vars(top)
    assessment = top.section("assessment", known=ASSESSMENT_KEYS)
    exit_names = construct_exit_names(assessment)
    book = SchemaBook(path, import_root)
    fill = _filler(variables)
    skills = _skills(top, names, import_root)
    phases_raw = top.section("phases", known=None, example="`phases: {discovery: {producer: ..., produces: [...]}}`")
    _known_names(phases_raw, names, "phases")
    gates = assessment.section("gates", known=None)
    _known_names(gates, names, "assessment.gates")
    contracts = top.section("contracts", known=None)
    _known_names(contracts, names, "contracts")
    declared = _declared_artifacts(phases_raw, contracts, assessment, names, fill)
    context = _Context(import_root, rubrics_dir, prompts_dir, tuple(runner_kinds), roots, check_kinds, data_modules,
                       book, fill, declared, exit_names, meta.identifier("name", "construct name"))
    phases = tuple(_phase(name, phases_raw, gates, contracts, skills, context) for name in names)
    handoffs = _handoffs(assessment, phases, context)
    fields = {"version": meta.version("version"), "description": meta.text("description"),
              "workspace": _workspace(top), "capture": _capture(assessment)}
    jsonschemas.check_contract("construct", path, raw, f"write the field as {DOCS} describes it")
    return Construct(path=path, api_version=api_version, name=context.construct, vars=variables, skills=skills,
                     phases=phases, handoffs=handoffs, exit_names=exit_names, schemas=book.loaded, **fields)


@dataclass(frozen=True)
class _Context:
    """What reading one phase needs of the file and the session."""

    import_root: Path
    rubrics_dir: Path
    prompts_dir: Path
    runner_kinds: tuple[str, ...]
    roots: tuple[Path, ...]
    check_kinds: Mapping[str, CheckParser] | None
    data_modules: Sequence[str]
    book: SchemaBook
    fill: Fill
    declared: dict[str, list[tuple[str, str | None]]]  # the artifacts the file declares, by name
    exit_names: dict[int, str]
    construct: str


# --- the top -------------------------------------------------------------------------------------


def _phase_names(top: Section) -> tuple[str, ...]:
    execution = top.section("execution", known=("type", "phases"), required=("type", "phases"))
    execution.choice("type", ("sequential",), "execution type")
    names = execution.fields.string_list(execution.raw["phases"], "phases", example="`phases: [discovery, design]`")
    for index, name in enumerate(names):
        execution.fields.identifier(name, f"phases[{index}]", "phase name")
        if names.index(name) != index:
            raise execution.error(f"phases[{index}]", f"phase {name!r} is listed twice", "list each phase once")
    return names


def _known_names(section: Section, names: tuple[str, ...], where: str) -> None:
    for key in section.raw:
        if key not in names:
            raise section.error(str(key), f"is not a phase of execution.phases{did_you_mean(key, names)}",
                                f"use one of: {', '.join(names)}, or add it to execution.phases")


def _vars(top: Section) -> dict[str, str]:
    listed = top.section("vars", known=None, example="`vars: {project: demo}`")
    found = {}
    for name in listed.raw:
        if not isinstance(name, str) or not name.isidentifier():
            raise listed.error(str(name), f"{name!r} is not a slot name", "use letters, digits and '_'")
        found[name] = listed.text(name) or ""
    return found


def _filler(variables: dict[str, str]) -> Any:
    """Fill a path's ``{slots}`` from ``vars:``; a slot it does not give is an error naming the field."""

    def fill(text: str, place: Fields, key: str | None) -> str:
        def lookup(name: str) -> Any:
            if name not in variables:
                raise place.error(key, f"uses {{{name}}}, which vars: does not give",
                                  f"add `vars: {{{name}: ...}}` at the top of the file")
            return variables[name]

        return slots.render_text(text, lookup)

    return fill


def _workspace(top: Section) -> tuple[Path, ...]:
    listed = top.text_list("workspace")
    found = []
    for index, entry in enumerate(listed):
        target = top.fields.project_path(entry, f"workspace[{index}]", example="a project file or folder")
        if not target.exists():
            raise top.error(f"workspace[{index}]", f"{entry} does not exist",
                            "name a file or folder of the project, relative to this file")
        found.append(target)
    return tuple(found)


def _capture(assessment: Section) -> Capture:
    capture = assessment.section("capture", known=("enabled", "retention_days", "include_inputs", "include_outputs"))
    days = capture.raw.get("retention_days", 30)
    if days is not None:
        days = capture.integer("retention_days", 30, low=1)
    return Capture(enabled=capture.boolean("enabled", True), retention_days=days,
                   include_inputs=capture.choice("include_inputs", INPUT_CAPTURES, "input capture", "hashed"),
                   include_outputs=capture.choice("include_outputs", OUTPUT_CAPTURES, "output capture", "summary"))


def _skills(top: Section, names: tuple[str, ...], import_root: Path) -> tuple[SkillUse, ...]:
    raw = top.raw.get("skills") or []
    if not isinstance(raw, list):
        raise top.fields.expected("skills", "a list", raw, "write `- {name: my-skill, required: true, phase: design}`")
    found = []
    for index, item in enumerate(raw):
        entry = top.fields.nested(f"skills[{index}]").section(item, known=("name", "required", "phase"),
                                                               required=("name",))
        name = entry.identifier("name", "skill id")
        phase = entry.text("phase")
        if phase is not None and phase not in names:
            raise entry.error("phase", f"{phase!r} is not a phase of execution.phases{did_you_mean(phase, names)}",
                              f"use one of: {', '.join(names)}")
        if phase is not None and any(s.phase == phase for s in found):
            raise entry.error("phase", f"phase {phase} is already run by another skill", "give each phase one skill")
        required = entry.boolean("required", True)
        file = find_skill(name, import_root)
        if file is None and required:
            raise entry.error("name", f"no skill {name!r} in {import_root / 'skills'}",
                              "add its *.skill.yaml under skills/, correct the id, or set `required: false`")
        found.append(SkillUse(name=name, required=required, phase=phase, path=file))
    return tuple(found)


def _declared_artifacts(phases: Section, contracts: Section, assessment: Section, names: tuple[str, ...],
                        fill: Any) -> dict[str, list[tuple[str, str | None]]]:
    """Every path the file declares (receives, produces, handoffs, contracts) with the schema it names, by artifact
    name: what the precondition checks ``<name>_exists`` and ``<name>_completeness`` may name. Read leniently: each
    field says its own mistakes when it is read."""
    declared: list[tuple[Any, Any]] = []
    for name in names:
        phase = _mapping(phases.raw.get(name))
        for key in ("receives", "produces"):
            for entry in _listed(phase.get(key)):
                entry = _mapping(entry) or {"path": entry}
                declared.append((entry.get("path"), entry.get("schema")))
        contract = _mapping(contracts.raw.get(name))
        for key in ("inputs", "outputs"):
            declared += [(OPTIONAL_MARK.sub("", e) if isinstance(e, str) else None, None)
                         for e in _listed(contract.get(key))]
    for handoff in _mapping(assessment.raw.get("handoffs")).values():
        handoff = _mapping(handoff)
        schema = _mapping(handoff.get("validation")).get("schema")
        declared += [(path, schema) for path in _listed(handoff.get("required_artifacts"))]
        declared += [(path, None) for path in _listed(handoff.get("optional_artifacts"))]
    place = Fields.of(phases.fields.path)
    filled = []
    for path, schema in declared:
        if not isinstance(path, str) or not path.strip():
            continue
        try:
            filled.append((fill(path, place, None), schema if isinstance(schema, str) else None))
        except HarnessConfigError:
            continue
    return artifact_names(filled)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- a phase -------------------------------------------------------------------------------------


def _phase(name: str, phases: Section, gates: Section, contracts: Section, skills: tuple[SkillUse, ...],
           context: _Context) -> Phase:
    raw = phases.raw.get(name) or {}
    phase = phases.fields.nested(name).section(raw, known=PHASE_KEYS)
    line = getattr(raw, "line", 0)
    receives = artifact_list(phase, "receives", context.book, context.fill)
    produces = artifact_list(phase, "produces", context.book, context.fill)
    gate = gates.fields.nested(name).section(gates.raw.get(name) or {}, known=GATE_KEYS)
    execution = gate.section("execution", known=("timeout_ms", "max_retries"))
    timeout_ms = execution.integer("timeout_ms", 1, low=1) if "timeout_ms" in execution else None
    output = output_spec(gate, produces, context.book, name)
    if "evaluator" in phase and "rubric" not in phase:
        raise phase.error("evaluator", "judges the phase's goal, but the phase names no rubric",
                          "add `rubric:` (the goal's rubric), or remove evaluator")
    rubric = rubric_file(phase, context.rubrics_dir) if "rubric" in phase else None
    agent, skill = _runner(name, phase, skills, context, timeout_ms)
    checks = preconditions(gate.section("precondition", known=("checks",)), context.declared, context.import_root,
                           context.check_kinds)
    return Phase(name=name, line=line, description=phase.text("description"), agent=agent, skill=skill,
                 rubric_path=rubric, receives=receives, produces=produces, preconditions=checks,
                 timeout_ms=timeout_ms, max_retries=execution.integer("max_retries", 0, low=0), output=output,
                 contract=phase_contract(name, contracts, context.fill, context.exit_names))


def _runner(name: str, phase: Section, skills: tuple[SkillUse, ...], context: _Context,
            timeout_ms: int | None) -> tuple[AgentConfig | None, SkillRun | None]:
    """Who runs the phase: its ``producer:`` (as agents.yaml reads one), its ``skill:``, or the skill ``skills:``
    gives it."""
    listed = next((s for s in skills if s.phase == name), None)
    named = phase.text("skill")
    if "producer" in phase and (named or listed):
        what = "`skill:`" if named else f"skill {listed.name} (skills[].phase)"  # type: ignore[union-attr]
        raise phase.error("producer", f"the phase is run by {what} and by a producer", "keep one of them")
    if named and listed and listed.name != named:
        raise phase.error("skill", f"is {named}, but skills: gives phase {name} to {listed.name}", "make them one")
    if "inputs" in phase and not (named or listed):
        raise phase.error("inputs", "are a skill's input, and no skill runs this phase",
                          f"a producer is given the phase's request ({DOCS}): remove inputs")
    if not (named or listed or "producer" in phase):
        raise phase.error(None, "nothing runs this phase", "add `producer: {python: module:function}` or "
                          f"`skill: <skill_id>`, or give a skill `phase: {name}` under skills:")
    if "producer" in phase:
        agent = runner_agent(f"{context.construct}.{name}", phase, rubric_path=phase.fields.path,
                             runner_kinds=context.runner_kinds, input_roots=context.roots)
        return _with_timeout(phase, agent, timeout_ms), None
    if "evaluator" in phase:
        raise phase.error("evaluator", "a skill's phase is scored by the skill (its checks or its review)",
                          "remove evaluator (and rubric)")
    skill_id = named or listed.name  # type: ignore[union-attr]
    use = listed if listed is not None and listed.name == skill_id else SkillUse(
        name=phase.fields.identifier(skill_id, "skill", "skill id"), path=find_skill(skill_id, context.import_root))
    if use.path is None and use.required:
        raise phase.error("skill", f"no skill {skill_id!r} in {context.import_root / 'skills'}",
                          "add its *.skill.yaml under skills/, or correct the id")
    skill = None if use.path is None else load_skill(
        use.path, prompts_dir=context.prompts_dir, rubrics_dir=context.rubrics_dir, import_root=context.import_root,
        input_roots=context.roots, check_kinds=context.check_kinds, data_modules=context.data_modules)
    return None, SkillRun(skill_id=skill_id, skill=skill, inputs=_skill_inputs(phase, context))


def _with_timeout(phase: Section, agent: AgentConfig, timeout_ms: int | None) -> AgentConfig:
    """A command phase is killed at ``timeout_ms`` (the command runner's own ``timeout_s``)."""
    if timeout_ms is None or agent.producer.kind != "command":
        return agent
    options = dict(agent.producer.options)
    if "timeout_s" in options and abs(float(options["timeout_s"]) * 1000 - timeout_ms) > 0.5:
        raise phase.error("producer.timeout_s", f"is {options['timeout_s']} s, but assessment.gates gives the phase "
                          f"{timeout_ms} ms: two time limits",
                          "keep one: assessment.gates.<phase>.execution.timeout_ms")
    options["timeout_s"] = timeout_ms / 1000
    return agent.model_copy(update={"producer": agent.producer.model_copy(update={"options": options})})


def _skill_inputs(phase: Section, context: _Context) -> dict[str, Any]:
    """A skill phase's ``inputs:``: text (vars filled), or ``{artifact: path}``, that file's text at run time."""
    listed = phase.section("inputs", known=None, example="`inputs: {title: \"{project}\", text: {artifact: a.md}}`")
    found: dict[str, Any] = {}
    for key, value in listed.raw.items():
        if isinstance(value, Mapping):
            entry = listed.fields.nested(str(key)).section(value, known=("artifact",), required=("artifact",))
            found[str(key)] = {"artifact": workspace_path(entry, "artifact", context.fill)}
        elif isinstance(value, str):
            found[str(key)] = context.fill(value, listed.fields, str(key))
        else:
            found[str(key)] = json.loads(json.dumps(value, default=str))
    return found


# --- handoffs ------------------------------------------------------------------------------------


def _handoffs(assessment: Section, phases: tuple[Phase, ...], context: _Context) -> tuple[Handoff, ...]:
    """One handoff between each two consecutive phases: the declared one (``assessment.handoffs``), else one made
    of the receiver's ``receives`` that blocks when they fail."""
    listed = assessment.section("handoffs", known=None, example="`handoffs: {discovery_to_design: {...}}`")
    pairs = {f"{a.name}_to_{b.name}": (a, b) for a, b in itertools.pairwise(phases)}
    names = [p.name for p in phases]
    for key in listed.raw:
        if key not in pairs:
            raise listed.error(str(key), _why_not_a_handoff(str(key), names),
                               f"name a handoff <from>_to_<to> of two consecutive phases: {', '.join(pairs) or 'none'}")
    found = []
    for key, (sender, receiver) in pairs.items():
        if key not in listed.raw:
            found.append(Handoff(name=key, from_phase=sender.name, to_phase=receiver.name,
                                 artifacts=merge_specs(receiver.receives, listed.fields), declared=False))
            continue
        handoff = listed.fields.nested(key).section(listed.raw[key], known=HANDOFF_KEYS)
        validation = validation_spec(handoff, context.book)
        specs = [ArtifactSpec(path=in_workspace(path, handoff.fields, f"required_artifacts[{i}]", context.fill),
                              required=True, source=handoff.sub(f"required_artifacts[{i}]"), **validation)
                 for i, path in enumerate(handoff.text_list("required_artifacts"))]
        specs += [ArtifactSpec(path=in_workspace(path, handoff.fields, f"optional_artifacts[{i}]", context.fill),
                               required=False, source=handoff.sub(f"optional_artifacts[{i}]"))
                  for i, path in enumerate(handoff.text_list("optional_artifacts"))]
        on_failure = handoff.choice("on_failure", ON_FAILURE, "on_failure", "block")
        found.append(Handoff(name=key, from_phase=sender.name, to_phase=receiver.name,
                             artifacts=merge_specs((*specs, *receiver.receives), handoff.fields),
                             on_failure=on_failure))  # type: ignore[arg-type]
    return tuple(found)


def _why_not_a_handoff(key: str, names: list[str]) -> str:
    sender, _, receiver = key.partition("_to_")
    if sender in names and receiver in names:
        return (f"{sender} does not hand off to {receiver}: execution is sequential, so each phase hands off to the "
                "next one only")
    unknown = receiver if sender in names else sender
    return f"{unknown!r} is not a phase of execution.phases{did_you_mean(unknown, names)}"


