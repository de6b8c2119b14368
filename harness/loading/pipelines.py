"""Pipeline files (``*.pipeline.yaml``): ordered stages, each with a typed output checked where it is handed on.

A pipeline is a staged agent (the agent-pipeline document's Observer to Learner is one): each stage is run by a
runner exactly as agents.yaml writes a producer (``producer: {python: module:function}``, a prompt on any provider, a
command in the sandbox, a plugin's kind) or by a skill of the project (``skill: <skill_id>``), and is given the case's
input and every earlier stage's output (the PipelineContext). Its output is typed by ``output:``, a pydantic model
(``{model: module:Class}``) or a JSON Schema (``{schema: file.json}`` or inline), and checked at its handoff to the
next stage together with its ``checks:`` (the harness's check kinds, on the output's JSON) and, when it names one,
its ``rubric:`` (judged by its ``evaluator:``); ``on_failure`` says what a rejected handoff does (``block``: the
later stages do not run, exit code 80; ``warn``: they run; ``skip``: the next one does not). Each case (or dataset
row) is one item. The file is the project's configuration (its stages may name any code); its cases are data.
docs/pipelines.md says what each field does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.base import jsonschemas
from harness.base.fields import Fields, Section
from harness.base.models import AgentConfig, Case, Dimension, Frozen
from harness.base.yamlfile import load_yaml, read_text
from harness.checks import CheckParser
from harness.checks.python import callable_at
from harness.loading.cases import additions, owned_cases
from harness.loading.construct_parts import find_skill, rubric_file
from harness.loading.skills import Skill, load_skill
from harness.loading.suites import runner_agent

PIPELINE_SUFFIXES = (".pipeline.yaml", ".pipeline.yml")
TOP_KEYS = ("pipeline", "version", "description", "input", "memory", "stages", "inputs", "cases", "dataset")
STAGE_KEYS = ("name", "description", "producer", "model", "skill", "output", "checks", "rubric", "evaluator", "judge",
              "on_failure")
CASE_KEYS = ("id", "inputs", "expected", "description", "today", "blocked_at")
ON_FAILURE = ("block", "warn", "skip")
DEFAULT_INPUT = "request"
DOCS = "docs/pipelines.md"

OnFailure = Literal["block", "warn", "skip"]


class StageOutput(Frozen):
    """What a stage's output must be: a JSON Schema, and the pydantic model it was made from when one is named."""

    json_schema: dict[str, Any]
    model: Any = None  # a pydantic BaseModel subclass: its own validation decides (``model_validate``)
    named: str  # how the file names it: ``module:Class`` or the schema's file (or "inline")

    def errors(self, data: Any) -> list[str]:
        """Every way ``data`` is not this output, one readable line each (empty: it is)."""
        if self.model is None:
            return jsonschemas.errors(data, self.json_schema)
        from pydantic import ValidationError

        try:
            self.model.model_validate(data)
        except ValidationError as exc:
            return [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()]
        return []


class Stage(Frozen):
    name: str
    index: int
    line: int
    description: str | None = None
    agent: AgentConfig | None = None  # its producer (and evaluator), read as agents.yaml reads an agent's
    skill: Skill | None = None
    output: StageOutput | None = None
    checks: tuple[Dimension, ...] = ()  # checked on the output's JSON at its handoff
    rubric_path: Path | None = None  # scores the output (its judged dimensions by ``evaluator:``)
    on_failure: OnFailure = "block"

    @property
    def operator_type(self) -> str:
        if self.skill is not None:
            return f"skill:{self.skill.kind}"
        assert self.agent is not None
        return self.agent.producer.kind


class PipelineCase(Frozen):
    case: Case
    blocked_at: str | None = None  # the stage whose handoff must block this case (a guard's negative test)


class Pipeline(Frozen):
    path: Path
    name: str
    version: str
    description: str | None = None
    input: str = DEFAULT_INPUT  # the case input holding the raw request the first stage reads
    memory: str | None = None  # the store under WORK/memory/ the stages remember in, across cycles
    stages: tuple[Stage, ...]
    cases: tuple[PipelineCase, ...] = Field(default_factory=tuple)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def load_pipeline(path: Path, *, import_root: Path, rubrics_dir: Path, prompts_dir: Path, runner_kinds: Iterable[str],
                  input_roots: Sequence[Path] | None = None, check_kinds: Mapping[str, CheckParser] | None = None,
                  data_modules: Sequence[str] = ()) -> Pipeline:
    """A pipeline file, every rule checked; each mistake one ``HarnessConfigError`` naming the file, field and fix."""
    roots = tuple(input_roots) if input_roots else (import_root,)
    top = Fields.of(path, import_root=import_root, roots=roots).section(
        load_yaml(path), known=TOP_KEYS, required=("pipeline", "stages"), required_any=("cases", "dataset"),
        example=f"a pipeline ({DOCS})")
    if "cases" in top and "dataset" in top:
        raise top.error("cases", "given beside dataset:, but a pipeline takes its cases from one of them", "keep one")
    name = top.identifier("pipeline", "pipeline name")
    stages = _stages(top, name, import_root=import_root, rubrics_dir=rubrics_dir, prompts_dir=prompts_dir,
                     runner_kinds=tuple(runner_kinds), roots=roots, check_kinds=check_kinds,
                     data_modules=data_modules)
    names = [s.name for s in stages]
    memory = top.identifier("memory", "memory store name") if "memory" in top else None
    input_name = top.identifier("input", "input name") if "input" in top else DEFAULT_INPUT
    cases = tuple(_cases(top, name, names, input_name, roots, data_modules))
    return Pipeline(path=path, name=name, version=top.version("version") if "version" in top else "1.0.0",
                    description=top.text("description"), input=input_name, memory=memory, stages=stages,
                    cases=cases)


# --- stages --------------------------------------------------------------------------------------


def _stages(top: Section, pipeline: str, *, import_root: Path, rubrics_dir: Path, prompts_dir: Path,
            runner_kinds: tuple[str, ...], roots: tuple[Path, ...], check_kinds: Mapping[str, CheckParser] | None,
            data_modules: Sequence[str]) -> tuple[Stage, ...]:
    listed = top.raw["stages"]
    if not isinstance(listed, list) or not listed:
        raise top.fields.expected("stages", "a list with at least one stage", listed,
                                  "add `- {name: first, producer: {python: module:function}}`")
    found: list[Stage] = []
    for index, item in enumerate(listed):
        stage = top.fields.nested(f"stages[{index}]").section(item, known=STAGE_KEYS, required=("name",))
        name = stage.identifier("name", "stage name")
        if any(s.name == name for s in found):
            raise stage.error("name", f"stage {name!r} is listed twice", "give each stage its own name")
        agent, skill = _runner(stage, f"{pipeline}.{name}", import_root=import_root, rubrics_dir=rubrics_dir,
                               prompts_dir=prompts_dir, runner_kinds=runner_kinds, roots=roots,
                               check_kinds=check_kinds, data_modules=data_modules)
        if "evaluator" in stage and "rubric" not in stage:
            raise stage.error("evaluator", "judges the stage's output, but the stage names no rubric",
                              "add `rubric:` (the rubric its output is scored by), or remove evaluator")
        found.append(Stage(
            name=name, index=index, line=getattr(item, "line", 0), description=stage.text("description"),
            agent=agent, skill=skill, output=_output(stage, import_root),
            checks=additions(stage, import_root, check_kinds).get("checks", ()),
            rubric_path=rubric_file(stage, rubrics_dir) if "rubric" in stage else None,
            on_failure=stage.choice("on_failure", ON_FAILURE, "on_failure", "block")))  # type: ignore[arg-type]
    return tuple(found)


def _runner(stage: Section, agent_name: str, *, import_root: Path, rubrics_dir: Path, prompts_dir: Path,
            runner_kinds: tuple[str, ...], roots: tuple[Path, ...], check_kinds: Mapping[str, CheckParser] | None,
            data_modules: Sequence[str]) -> tuple[AgentConfig | None, Skill | None]:
    """Who runs the stage: its ``producer:`` (as agents.yaml reads one, with its ``model:``) or its ``skill:``."""
    if "producer" in stage and "skill" in stage:
        raise stage.error("producer", "the stage is run by a skill and by a producer", "keep one of them")
    if "producer" in stage:
        return runner_agent(agent_name, stage, rubric_path=stage.fields.path, runner_kinds=runner_kinds,
                            input_roots=roots), None
    if "skill" not in stage:
        raise stage.error(None, "nothing runs this stage",
                          "add `producer: {python: module:function}` (or a prompt, a command) or `skill: <skill_id>`")
    if "evaluator" in stage or "model" in stage:
        key = "evaluator" if "evaluator" in stage else "model"
        raise stage.error(key, "a skill's stage is run and scored by the skill", f"remove {key}")
    skill_id = stage.identifier("skill", "skill id")
    file = find_skill(skill_id, import_root)
    if file is None:
        raise stage.error("skill", f"no skill {skill_id!r} in {import_root / 'skills'}",
                          "add its *.skill.yaml under skills/, or correct the id")
    return None, load_skill(file, prompts_dir=prompts_dir, rubrics_dir=rubrics_dir, import_root=import_root,
                            input_roots=roots, check_kinds=check_kinds, data_modules=data_modules)


def _output(stage: Section, import_root: Path) -> StageOutput | None:
    """``output: {model: module:Class}`` (a pydantic model), ``{schema: file.json}`` or ``{schema: {...}}``."""
    if "output" not in stage:
        return None
    example = "`output: {model: mypkg.models:Answer}` or `output: {schema: schemas/answer.json}`"
    output = stage.section("output", known=("model", "schema"), example=example)
    if ("model" in output) == ("schema" in output):
        raise stage.error("output", "names neither a model nor a schema, or both", f"write {example}")
    if "model" in output:
        spec = output.text("model") or ""
        target = callable_at(spec, output.fields, "model", what="output model")
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            raise output.error("model", f"{spec} is not a pydantic model", "name a class deriving from "
                               "pydantic.BaseModel, or give a JSON Schema as `schema:`")
        return StageOutput(json_schema=target.model_json_schema(), model=target, named=spec)
    raw = output.raw["schema"]
    if isinstance(raw, str):
        file = output.fields.project_path(raw, "schema", example="a JSON Schema file inside the project")
        if not file.is_file():
            raise output.error("schema", f"no file {file}", "fix the path; it is relative to the pipeline file")
        try:
            loaded = json.loads(read_text(file))
        except ValueError as exc:
            raise output.error("schema", f"{file} is not JSON ({exc})", "write the schema as JSON") from None
        holder = Section({"schema": loaded}, output.fields)
        return StageOutput(json_schema=holder.json_schema("schema", required=True) or {}, named=raw)
    return StageOutput(json_schema=output.json_schema("schema", required=True) or {}, named="inline")


# --- cases ---------------------------------------------------------------------------------------


def _cases(top: Section, pipeline: str, stages: list[str], input_name: str, roots: tuple[Path, ...],
           data_modules: Sequence[str]) -> Iterable[PipelineCase]:
    """Each case's ``inputs`` must hold the pipeline's ``input`` (the request its first stage reads); ``blocked_at``
    names the stage whose handoff must block it."""
    seen: set[str] = set()

    def make(place: Section, case_id: str, inputs: dict[str, Any], line: int, **more: Any) -> PipelineCase:
        if case_id in seen:
            raise place.error("id", f"duplicate case id {case_id!r}", "give every case its own id")
        seen.add(case_id)
        if input_name not in inputs:
            raise place.error("inputs", f"has no {input_name!r}, the request the pipeline's first stage reads",
                              f"add `inputs: {{{input_name}: ...}}` (or name another input with `input:` at the top)")
        blocked_at = place.text("blocked_at")
        if blocked_at is not None and blocked_at not in stages:
            raise place.error("blocked_at", f"{blocked_at!r} is not a stage of the pipeline",
                              f"use one of: {', '.join(stages)}")
        case = Case(id=case_id, agent=pipeline, path=place.fields.path, line=line, inputs=inputs,
                    expected=place.raw.get("expected"), **more)
        return PipelineCase(case=case, blocked_at=blocked_at)

    return owned_cases(top, "the pipeline's input", CASE_KEYS, roots, data_modules, make)
