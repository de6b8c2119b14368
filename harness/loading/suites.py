"""Suite files (``agents.yaml`` and the ``thresholds.yaml`` beside it): the loop policy's defaults, the model
settings of the judge and the producers, and each agent with its rubric and its runners."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.fields import Fields, Section, is_number
from harness.base.models import (
    JUDGE_AGGREGATES,
    STRUCTURED_OUTPUT,
    AgentConfig,
    JudgeEnsemble,
    JudgeStyle,
    LoopPolicy,
    ModelSettings,
    PromptTemplate,
    RunnerSpec,
    SuiteConfig,
)
from harness.base.slots import TEMPLATE_SLOTS, filter_problem, slots_in
from harness.base.yamlfile import load_yaml
from harness.llm.providers import model_problem
from harness.loading.cascade import CASCADE_KEY, with_cascade
from harness.loading.chat_templates import place_of, read_template
from harness.loading.library import evaluator_entry, file_roots, implied_evaluator, is_library_name
from harness.loading.prompts import load_prompt
from harness.loading.rubrics import (GRADERS, RUBRIC_SUFFIXES, find_rubric, library_graders, rubric_files,
                                     rubric_identity)
from harness.loading.variants import MODEL_AXES, agent_variants, variant_error

BUILTIN_RUNNER_KINDS = ("prompt", "template", "python", "command", "steps")  # steps: a judge program
MODEL_RUNNER_KINDS = ("prompt", "template")  # the kinds the harness runs on a model itself
THRESHOLDS_FILE = "thresholds.yaml"
_POLICY_KEYS = ("threshold", "max_attempts", "max_retries", "escalate_on_fail", "margin_required", "borderline_margin",
                "escalate_conditions", "always_judge")
_DEFAULT_KEYS = ("pass_threshold", "max_attempts", "max_retries", "escalate_on_fail", "borderline_margin", "escalate_conditions",
                 "escalation_fails_gate", "always_judge")
_ONE_MODEL_KEYS = ("model", "temperature", "top_p", "stop", "seed", "max_tokens", "timeout_s", "max_retries",
                   "base_url", "api_key_env", "structured_output")
_ENSEMBLE_KEYS = ("models", "aggregate")  # a judge ensemble (docs/model-calls.md, "Judge ensembles"): judge: only
_MODEL_KEYS = _ONE_MODEL_KEYS + _ENSEMBLE_KEYS + (CASCADE_KEY,)  # a cascade: judge: only (harness.loading.cascade)
_MODELS_EXAMPLE = "`models: [claude-sonnet-4-6, openai/gpt-4.1, mock/score-0.8]`"
_COMMAND_OPTIONS = ("timeout_s", "env", "network", "read", "write", "memory_mb")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_suite(path: Path, *, rubrics_dir: Path, runner_kinds: Iterable[str],
               input_roots: Sequence[Path] | None = None) -> SuiteConfig:
    """Load agents.yaml: defaults (seed 000 section 7), a judge section, and the agents (section 6).

    A ``thresholds.yaml`` beside it (the seed's ``config/thresholds.yaml``) is read too: its ``defaults``
    and per-agent values fill what agents.yaml leaves unset; a value both files set must agree.

    The files it names (prompts, templates, a rubric by path) must lie under ``input_roots``, symbolic links
    resolved (the plugin passes the rootdir and ini harness_input_dirs; default: agents.yaml's folder).
    """
    top = Fields.of(path).section(load_yaml(path), known=("defaults", "judge", "model", "agents"),
                                  required=("agents",))
    agents_raw = top.raw["agents"]
    if not isinstance(agents_raw, Mapping) or not agents_raw:
        raise top.fields.expected("agents", "a mapping of agent names", agents_raw, "add at least one agent")
    thresholds = _thresholds_file(path.parent / THRESHOLDS_FILE, agents_raw)
    defaults_raw = _merged(top.raw.get("defaults") or {}, thresholds.get("defaults") or {}, path,
                           path.parent / THRESHOLDS_FILE, "defaults")
    for source, raw_defaults in ((path, top.raw.get("defaults")), (path.parent / THRESHOLDS_FILE,
                                                                    thresholds.get("defaults"))):
        if isinstance(raw_defaults, Mapping) and "margin_required" in raw_defaults:
            raise HarnessConfigError(source, "defaults.margin_required", "is per agent: it compares the top two "
                                     "candidates of a selector's ranked artifact",
                                     "move it under `agents.NAME:` of the selector agent")
    defaults = Fields.of(path, "defaults").section(defaults_raw, known=_DEFAULT_KEYS)
    base_policy = LoopPolicy(
        default_threshold=defaults.number("pass_threshold", None, low=0.0, high=1.0),
        max_attempts=defaults.integer("max_attempts", 3),
        max_retries=defaults.integer("max_retries", 0, low=0),
        escalate_on_fail=defaults.boolean("escalate_on_fail", True),
        borderline_margin=defaults.number("borderline_margin", 0.0, low=0.0, high=1.0),
        escalate_conditions=defaults.text_list("escalate_conditions", single=False),
        escalation_fails_gate=defaults.boolean("escalation_fails_gate", True),
        always_judge=defaults.boolean("always_judge", False),
    )
    judge = _model_settings(top.section("judge", known=_MODEL_KEYS, shorthand="model"), ModelSettings())
    production = _model_settings(top.section("model", known=_MODEL_KEYS, shorthand="model"), ModelSettings())
    kinds = tuple(runner_kinds)
    agents = {}
    for name, agent_raw in agents_raw.items():
        top.fields.identifier(name, f"agents.{name}", "agent name")
        overrides = (thresholds.get("agents") or {}).get(name) or {}
        if overrides and isinstance(agent_raw, Mapping):
            agent_raw = _merged(agent_raw, overrides, path, path.parent / THRESHOLDS_FILE, f"agents.{name}")
        agents[name] = _load_agent(name, agent_raw, path, base_policy, judge, production, rubrics_dir, kinds,
                                   tuple(input_roots or (path.parent,)))
    return SuiteConfig(path=path, agents=agents)


def _thresholds_file(path: Path, agents: Mapping[str, Any]) -> dict[str, Any]:
    """The seed's thresholds.yaml: ``defaults`` and ``agents.NAME`` with the loop policy keys only."""
    if not path.is_file():
        return {}
    top = Fields.of(path).section(load_yaml(path), known=("defaults", "agents"))
    # margin_required is known here so that load_suite can say where it belongs
    _check_policy(top.section("defaults", known=_DEFAULT_KEYS + ("margin_required",)))
    listed = top.section("agents", known=tuple(agents))
    for name in listed.raw:
        _check_policy(listed.section(str(name), known=_POLICY_KEYS))
    return dict(top.raw)


def _check_policy(section: Section) -> None:
    """Read each loop-policy value where it is written, so a bad one names its own file."""
    for key in ("pass_threshold", "threshold", "borderline_margin", "margin_required"):
        section.number(key, None, low=0.0, high=1.0)
    section.integer("max_attempts", 3)
    section.integer("max_retries", 0, low=0)
    section.boolean("escalate_on_fail", True)
    section.boolean("escalation_fails_gate", True)
    section.boolean("always_judge", False)
    section.text_list("escalate_conditions", single=False)


def _merged(own: Mapping[str, Any], extra: Mapping[str, Any], own_path: Path, extra_path: Path,
            field: str) -> dict[str, Any]:
    """agents.yaml's values plus thresholds.yaml's; a key both set to different values is an error."""
    if not isinstance(own, Mapping) or not isinstance(extra, Mapping):
        return own  # type: ignore[return-value]  # the Section that reads it names the mistake
    merged = dict(own)
    for key, value in extra.items():
        if key in own and own[key] != value:
            raise HarnessConfigError(extra_path, f"{field}.{key}",
                                     f"is {value!r} here but {own[key]!r} in {own_path.name}",
                                     f"set {field}.{key} in one file only")
        merged[key] = value
    return merged


def _model_settings(section: Section, base: ModelSettings) -> ModelSettings:
    """A ``judge:`` or ``model:`` section over ``base`` (the level above it, else the defaults).

    A ``judge:`` section may name an ensemble: ``models:`` (each a model name, or a mapping of the model keys for
    that judge alone) and ``aggregate:``; its other keys are every judge's. Over an ensemble, a section that names
    no ``model:`` keeps the ensemble, its keys applied to every judge; one that names ``model:`` is that one judge.
    """
    if section.fields.field.rpartition(".")[2] != "judge":
        for key in (*_ENSEMBLE_KEYS, CASCADE_KEY):
            if key in section:
                raise section.error(key, f"is for judges (`judge: {{{key}: ...}}`); producers and revisers run on one "
                                    "model", "write `model:` here, or move it under `judge:`")
    elif CASCADE_KEY in section or base.cascade is not None:  # a cheap judge first (harness.loading.cascade)
        return with_cascade(section, base, _model_settings, _one_model, _ONE_MODEL_KEYS)
    if "model" in section and "models" in section:
        raise section.error("models", "a judge is one `model:` or an ensemble of `models:`, not both",
                            "keep `models:` for an ensemble, or `model:` for one judge")
    inherited = base.ensemble
    common = _one_model(section, inherited.common if inherited is not None else base)
    if "models" in section:
        judges = _ensemble_judges(section, common)
    elif inherited is not None and "model" not in section:
        judges = tuple(_one_model(section, judge) for judge in inherited.judges)
    elif "aggregate" in section:
        raise section.error("aggregate", "combines the judges of an ensemble, and this judge is one model",
                            f"list the judges, e.g. {_MODELS_EXAMPLE}, or remove aggregate")
    else:
        return common
    default = inherited.aggregate if inherited is not None else "mean"
    aggregate = section.fields.choice(section.raw.get("aggregate", default), "aggregate", JUDGE_AGGREGATES,
                                      "aggregate", fix=f"use one of: {', '.join(JUDGE_AGGREGATES)}")
    return JudgeEnsemble(judges, aggregate, common).settings()


def _ensemble_judges(section: Section, common: ModelSettings) -> tuple[ModelSettings, ...]:
    """The judges ``models:`` lists, each over ``common``: a model name, or a mapping of that judge's own keys."""
    raw = section.raw["models"]
    if not isinstance(raw, list) or not raw:
        raise section.fields.expected("models", "a non-empty list of judge models", raw,
                                      f"write e.g. {_MODELS_EXAMPLE}, or `model:` for one judge")
    place = section.fields.nested("models")
    judges: list[ModelSettings] = []
    for index, entry in enumerate(raw):
        key = f"[{index}]"
        if isinstance(entry, Mapping):
            own = place.nested(key).section(entry, known=_ONE_MODEL_KEYS, required=("model",))
            _judge_name(own, "model")
            judge = _one_model(own, common)
        else:
            judge = replace(common, model=_judge_name(Section({key: entry}, place), key))
        if any(other.qualified == judge.qualified for other in judges):
            raise place.error(key, f"{judge.qualified} is listed twice",
                              "list each judge once; --harness-judge-samples asks each judge several times")
        judges.append(judge)
    return tuple(judges)


def _judge_name(section: Section, key: str) -> str:
    """One judge's model name, known to a provider."""
    model = section.raw.get(key)
    if not isinstance(model, str) or not model.strip() or model != model.strip():
        raise section.error(key, f"{model!r} is not a model name",
                            "write provider/model, e.g. openai/gpt-4.1, or a bare name for Anthropic's")
    problem = model_problem(ModelSettings(model=model))
    if problem:  # its own words say the fix (the known providers, the mock models)
        raise section.error(key, problem)
    return model


def _one_model(section: Section, base: ModelSettings) -> ModelSettings:
    """The settings of one model: ``section``'s model keys over ``base``."""
    values = dict(
        model=model_name(section, "model", base.model),
        temperature=section.number("temperature", base.temperature, low=0.0, high=2.0),
        top_p=section.number("top_p", base.top_p, low=0.0, high=1.0),
        stop=_stop_sequences(section) if "stop" in section else base.stop,
        seed=section.integer("seed", base.seed, low=0) if "seed" in section else base.seed,
        max_tokens=section.integer("max_tokens", base.max_tokens),
        timeout_s=section.number("timeout_s", base.timeout_s, low=0.001, high=3600.0),
        max_retries=section.integer("max_retries", base.max_retries, low=0),
        base_url=section.text("base_url", base.base_url),
        api_key_env=section.text("api_key_env", base.api_key_env),
        structured_output=section.choice("structured_output", STRUCTURED_OUTPUT, "structured output mode",
                                         base.structured_output),
    )
    key_env = values["api_key_env"]
    if key_env is not None and not _ENV_NAME.match(key_env):
        raise section.error("api_key_env", "is the NAME of the variable that holds the key, not a key",
                            "write e.g. `api_key_env: VLLM_API_KEY` and set that variable; never write a key in "
                            "a file")
    return ModelSettings(**values)


def _stop_sequences(section: Section) -> tuple[str, ...]:
    """``stop:``: a list of the texts that end an answer (``stop: ["\\n\\n"]``); each may be whitespace, none empty."""
    raw = section.raw["stop"]
    if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
        raise section.fields.expected("stop", "a list of non-empty text (the sequences that end an answer)", raw,
                                      'write e.g. `stop: ["\\n\\n"]`: a list, even of one, in double quotes for '
                                      "escapes such as \\n")
    return tuple(raw)


def model_name(section: Section, key: str, default: str) -> str:
    """A model name (``provider/name``) whose provider is known; the field is named when it is not."""
    model = section.text(key, default)
    if not model or not model.strip() or model != model.strip():
        raise section.error(key, f"{model!r} is not a model name",
                            f"write a model such as {default}, or remove the line for the default")
    problem = model_problem(ModelSettings(model=model))
    if problem:
        raise section.error(key, problem)
    return model


def _load_agent(name: str, raw: Any, path: Path, base_policy: LoopPolicy, judge: ModelSettings,
                production: ModelSettings, rubrics_dir: Path, kinds: tuple[str, ...],
                roots: tuple[Path, ...]) -> AgentConfig:
    agent = Fields.of(path, f"agents.{name}", roots=roots).section(
        raw, known=("rubric", "rubric_version", "producer", "evaluator", "reviser", "judge", "model", "description",
                    "variants") + _POLICY_KEYS, required=("rubric", "producer"))
    if "evaluator" not in agent and (implied := implied_evaluator(agent.raw["rubric"])):
        agent = Section({**agent.raw, "evaluator": implied}, agent.fields)  # the grader's own judge (docs/graders.md)
    policy = base_policy.model_copy(update=dict(
        threshold=agent.number("threshold", None, low=0.0, high=1.0),
        max_attempts=agent.integer("max_attempts", base_policy.max_attempts),
        max_retries=agent.integer("max_retries", base_policy.max_retries, low=0),
        escalate_on_fail=agent.boolean("escalate_on_fail", base_policy.escalate_on_fail),
        margin_required=agent.number("margin_required", 0.0, low=0.0, high=1.0),
        borderline_margin=agent.number("borderline_margin", base_policy.borderline_margin, low=0.0, high=1.0),
        escalate_conditions=agent.text_list("escalate_conditions", single=False) or base_policy.escalate_conditions,
        always_judge=agent.boolean("always_judge", base_policy.always_judge),
    ))
    roles = _roles(agent, ("producer", "evaluator", "reviser"), kinds, roots,
                   judge=_model_settings(agent.section("judge", known=_MODEL_KEYS, shorthand="model"), judge),
                   production=_model_settings(agent.section("model", known=_MODEL_KEYS, shorthand="model"), production))
    config = AgentConfig(name=name, rubric_path=_rubric_path(agent, path, rubrics_dir), policy=policy, **roles)
    variants = []
    for variant in agent_variants(agent):  # each read as the agent's own entry with the variant's values in it
        try:
            config_of = _load_agent(name, variant.agent_entry(agent.raw), path, base_policy, judge, production,
                                    rubrics_dir, kinds, roots)
        except HarnessConfigError as error:
            raise variant_error(error, name, variant) from None
        axis = next((a for a in variant.settings if a in MODEL_AXES), None)
        if axis and config_of.producer.kind not in MODEL_RUNNER_KINDS:
            raise agent.error(f"variants.{axis}", f"sets the producer's {axis}, but variant {variant.name}'s "
                              f"producer is a {config_of.producer.kind} runner, which calls no model of the harness's",
                              "vary `producer:` (prompts, functions, commands) or `options:` instead")
        variants.append(config_of.model_copy(update={"variant": variant.name, "variant_settings": variant.settings}))
    return config.model_copy(update={"variants": tuple(variants)}) if variants else config


def runner_agent(name: str, section: Section, *, rubric_path: Path, runner_kinds: Iterable[str],
                 input_roots: Sequence[Path]) -> AgentConfig:
    """An agent of the roles ``section`` declares (``producer:``, and ``evaluator:`` when it has one, with their
    ``model:`` and ``judge:``), each read exactly as agents.yaml reads an agent's: a construct's phase runs like an
    agent's producer and is judged like its evaluator. ``producer:`` must be there."""
    roles = _roles(section, ("producer", "evaluator"), tuple(runner_kinds), tuple(input_roots),
                   judge=_model_settings(section.section("judge", known=_MODEL_KEYS, shorthand="model"), ModelSettings()),
                   production=_model_settings(section.section("model", known=_MODEL_KEYS, shorthand="model"), ModelSettings()))
    return AgentConfig(name=name, rubric_path=rubric_path, policy=LoopPolicy(), **roles)


def _roles(agent: Section, names: tuple[str, ...], kinds: tuple[str, ...], roots: tuple[Path, ...], *,
           judge: ModelSettings, production: ModelSettings) -> dict[str, Any]:
    """The runners of the roles of ``names`` that ``agent`` declares, and what its model roles need: each prompt
    file, each template, each role's model (``judge`` the evaluator's, ``production`` the others'), the judge's
    style."""
    path = agent.fields.path
    specs = {role: _runner_spec(agent, role, kinds) for role in names if role in agent}
    prompts = {}
    models = {}
    templates = {}
    style = JudgeStyle()
    for role, spec in specs.items():
        if spec.kind not in MODEL_RUNNER_KINDS:
            continue
        own = Fields.of(spec.file, spec.field, roots=file_roots(spec.file, roots)).section(
            spec.options, known=_model_runner_options(spec.kind, role))
        _inside_project(own.fields, agent.raw[role], spec)
        if spec.kind == "prompt":
            prompts[role] = load_prompt(spec.base_dir / spec.target, source=f"{path}: {agent.sub(role)}")
        else:
            templates[role] = _template(own, spec, role)
        if role == "evaluator":
            style = _judge_style(own)
        base = judge if role == "evaluator" else production
        # `producer: {prompt: x.md, model: openai/gpt-4.1-mini}`
        models[role] = replace(base, model=model_name(own, "model", base.model)) if "model" in own else base
    return dict(producer=specs["producer"], evaluator=specs.get("evaluator"), reviser=specs.get("reviser"),
                judge=models.get("evaluator", judge), models=models, prompts=prompts, templates=templates,
                judge_style=style)


def _inside_project(place: Fields, raw: Any, spec: RunnerSpec) -> None:
    """A prompt or template file lies inside the project, symbolic links resolved: agents.yaml cannot send
    ``/etc/passwd`` to a model and into the records."""
    key = None if isinstance(raw, str) else spec.kind if spec.kind in raw else "target"
    place.project_path(spec.target, key,
                       example=f"a {spec.kind} file inside the project, relative to {place.path.name}")


def _model_runner_options(kind: str, role: str) -> tuple[str, ...]:
    """The options a prompt or template runner takes besides its file: the model, a template's slot names,
    and for an evaluator how it commits to a verdict."""
    return ("model",) + (("slots",) if kind == "template" else ()) + (
        ("reasoning", "verdict", "score") if role == "evaluator" else ())


def _template(own: Section, spec: RunnerSpec, role: str) -> PromptTemplate:
    """A template prompt: its file read whole (no required sections: it is used as written), or a chat template's
    messages (a ``.json`` or ``.yaml`` file), and ``slots:``, the names it uses mapped to the slots that fill them."""
    file = spec.base_dir / spec.target
    if not file.is_file():
        raise own.error("template", f"no template file {file}",
                        f"fix the path; it is relative to {own.fields.path.name}")
    names = own.section("slots", known=None, example="`slots: {completion: output, ideal: expected}`")
    allowed = TEMPLATE_SLOTS[role]
    mapped = {}
    for name, ours in names.raw.items():
        target = names.fields.string(ours, str(name), what="a slot name")
        if target not in allowed and not target.startswith("inputs."):
            hint = (" (a producer or reviser never sees the expected answer)" if target == "expected" else "")
            raise names.error(str(name), f"{target!r} is not a slot a {role} template can use{hint}",
                              f"map it to one of: {', '.join(allowed)}, or inputs.NAME")
        mapped[str(name)] = target
    template = read_template(file, mapped)
    problem = filter_problem(template.text)
    if problem:
        raise own.error("template", f"{file.name}: {problem}", "use one of the filters, or remove the '|'")
    if role != "evaluator":  # every message of a chat template
        leaking = [name for name in slots_in(template.text) if template.slot_for(name) == "expected"]
        if leaking:
            raise own.error("template", f"{file.name}{place_of(template, 'expected')} uses {{{leaking[0]}}}, the "
                            f"expected answer, in a {role}'s prompt",
                            "a producer or reviser must not see the expected answer: remove the slot")
    return template


def _judge_style(own: Section) -> JudgeStyle:
    """``reasoning: first`` (free text, then the structured verdict) or ``verdict: PATTERN`` (the verdict read
    from the free text: one unnamed group for the one judged dimension, or a named group per dimension)."""
    reasoning = own.choice("reasoning", ("first", "none"), "reasoning mode", "none")
    verdict = own.fields.regex(own.raw["verdict"], "verdict") if "verdict" in own else None
    if verdict is not None and verdict.groups == 0:
        raise own.error("verdict", f"the pattern {verdict.pattern!r} has no group to read the verdict from",
                        "put the verdict in a group, e.g. 'GRADE: ([A-E])' or '\\[\\[(\\d+)\\]\\]'")
    if verdict is not None and reasoning == "first":
        raise own.error("reasoning", "a verdict read from free text already comes after the reasoning",
                        "keep `verdict:` alone, or `reasoning: first` alone for a structured verdict")
    # `score: weighted`: a rating weighted by its token's probabilities (G-Eval; docs/material.md)
    weighted = own.choice("score", ("plain", "weighted"), "way to score a rating", "plain") == "weighted"
    if weighted and verdict is None:
        raise own.error("score", "weighs the rating by the probabilities of its token in a free-text answer, and "
                        "this evaluator answers in a structured verdict", "add `verdict: PATTERN`, e.g. "
                        "`verdict: 'Rating: (\\d)'`, to read the rating from the judge's text, or remove "
                        "`score: weighted`")
    return JudgeStyle(reasoning_first=reasoning == "first", verdict=verdict, weighted=weighted)


def _rubric_path(agent: Section, path: Path, rubrics_dir: Path) -> Path:
    """``rubric:`` is a path (``.yaml``, ``.yml``, ``.json``), a file name in rubrics/, or a review rubric's
    ``rubric_id``; ``rubric_version:`` picks one version of it (default: the latest)."""
    ref = agent.text("rubric")
    version = agent.text("rubric_version")
    if version is not None:
        agent.fields.version(version, "rubric_version")
    if ref.endswith(RUBRIC_SUFFIXES):
        agent.fields.project_path(ref, "rubric", example="a rubric file inside the project, relative to agents.yaml")
        candidate = path.parent / ref
        if candidate.is_file():
            return candidate.resolve()
        raise agent.error("rubric", f"no rubric file {candidate}", "fix the path; it is relative to agents.yaml")
    found = find_rubric(ref, version, rubrics_dir)
    if found is not None:
        return found.resolve()
    if version is not None:
        versions = sorted(v for p in rubric_files(rubrics_dir) for rid, v in [rubric_identity(p)]
                          if v and (rid == ref or p.stem == ref))
        raise agent.error("rubric_version", f"no version {version} of rubric {ref!r} in {rubrics_dir}",
                          f"use one of: {', '.join(versions)}" if versions else "remove rubric_version")
    if ref.startswith(GRADERS):
        raise agent.error("rubric", f"no grader {ref!r} in the library{did_you_mean(ref, library_graders())}",
                          f"use one of: {', '.join(library_graders())} (docs/graders.md)")
    known = sorted({p.stem for p in rubric_files(rubrics_dir)} | {
        rid for p in rubric_files(rubrics_dir) for rid, _ in [rubric_identity(p)] if rid})
    raise agent.error("rubric", f"no rubric {ref!r} in {rubrics_dir}",
                      f"use one of: {', '.join(known)}" if known else f"create {rubrics_dir / ref}.yaml")


def _runner_spec(agent: Section, role: str, kinds: tuple[str, ...]) -> RunnerSpec:
    place = agent.fields.nested(role)
    path, field, raw = place.path, place.field, agent.raw[role]
    if is_library_name(raw):  # `evaluator: graders/NAME`: the library's evaluator, read as if written here
        entry, spec = evaluator_entry(raw, place, role)
        return _runner_spec(Section({role: spec}, Fields.of(entry, roots=file_roots(entry, ()))), role, kinds)
    if isinstance(raw, str):
        if not raw.endswith(".md"):
            raise place.error(None, f"{raw!r} is not a prompt file",
                              "give a .md prompt path, or a mapping such as `{python: module:function}` "
                              "or `{command: ...}`")
        return RunnerSpec(kind="prompt", target=raw, base_dir=path.parent, file=path, field=field)
    if not isinstance(raw, Mapping):
        raise place.expected(None, "a prompt path or a mapping", raw,
                             "write `{python: module:function}`, `{command: ...}` or a .md path")
    options = dict(raw)
    if "kind" in options:
        kind = options.pop("kind")
        target = options.pop("target", "")
    else:
        named = [k for k in options if k in kinds]
        if len(named) != 1:
            hint = next((did_you_mean(k, kinds) for k in options if did_you_mean(k, kinds)), "") if not named else ""
            raise place.error(None, f"cannot tell the kind of runner{hint}",
                              f"use exactly one of: {', '.join(kinds)}, or `kind: <plugin kind>`")
        kind = named[0]
        target = options.pop(kind)
    place.choice(kind, "kind", kinds, "runner kind",
                 fix=f"use one of: {', '.join(kinds)} (plugins add kinds via pytest_harness_runner_kinds)")
    if isinstance(target, list) and kind == "command":
        target = " ".join(shlex.quote(str(t)) for t in target)
    place.string(target, kind, what="the prompt path, module:function or command")
    if kind == "python" and not re.match(r"^[\w.]+:[\w.]+$", target):
        raise place.error("python", f"{target!r} is not module:function", "write it as package.module:function")
    if kind == "command":
        _check_command_options(place, options)
    return RunnerSpec(kind=kind, target=target, options=options, base_dir=path.parent, file=path, field=field)


def _check_command_options(place: Fields, options: dict[str, Any]) -> None:
    """A command runner runs in the sandbox. It takes ``timeout_s`` (seconds), ``env`` (the variable names it
    may see besides the allowlist: commands never get the whole environment), ``network`` (off unless true),
    ``read`` and ``write`` (folders it may read besides the project, and folders it may write; relative to the
    project root, where the command runs) and
    ``memory_mb`` (the whole run's memory)."""
    place.section(options, known=_COMMAND_OPTIONS)
    timeout = options.get("timeout_s", 300.0)
    if not is_number(timeout) or timeout <= 0:
        raise place.expected("timeout_s", "a positive number of seconds", timeout, "write e.g. timeout_s: 60")
    env = options.get("env", [])
    if not isinstance(env, list) or not all(isinstance(name, str) and _ENV_NAME.match(name) for name in env):
        raise place.expected("env", "a list of environment variable names", env, "write e.g. env: [MY_SERVICE_TOKEN]")
    if "network" in options:
        place.boolean(options["network"], "network")
    for key in ("read", "write"):
        if key in options:
            place.string_list(options[key], key, example=f"{key}: [data/]", empty=True)
    if "memory_mb" in options:
        place.integer(options["memory_mb"], "memory_mb", minimum=64)
