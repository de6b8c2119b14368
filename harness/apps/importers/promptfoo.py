"""``harness import promptfoo promptfooconfig.yaml``: a promptfoo config as a rubric, agents and cases.

Each prompt becomes a ``template:`` file (promptfoo's ``{{ var }}`` is already a slot here; a chat prompt a chat
template, each message in its role). One prompt and one
provider make one agent; promptfoo's grid of prompts x providers makes one agent with ``variants:`` (a ``producer``
axis of the prompts, a ``model`` axis of the providers), so every test runs on every pair and the reports show the
grid. ``defaultTest``'s asserts become the agent's rubric and each test a case: its vars the inputs, its
deterministic asserts the case's ``checks:`` and its model-graded ones its ``criteria:``, each with ``min_score``
its threshold or 1, because promptfoo passes a test only when every assert passes. The model-graded asserts are
judged by a grader of the library where one judges them as promptfoo does (``graders/llm-rubric``, promptfoo's
llm-rubric judge; ``graders/g-eval``, ``graders/closedqa``), else by a template of the suite's own
(:mod:`harness.apps.importers.promptfoo_judge`), on ``defaultTest.options.provider`` when the config names one.

Whatever has no counterpart (JavaScript and Python asserts, cost and latency gates, Nunjucks filters, ...) is one
``not carried over:`` line saying why and what to do instead; a JavaScript assert's names the nearest check.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.apps.importers import (
    NO_REVISION,
    ImportInputError,
    Plan,
    dump_yaml,
    identifier,
    mapping_at,
    protect_literal_braces,
    unique,
    unsupported_template_parts,
)
from harness.apps.importers.chat import as_chat_template, flattened, template_text
from harness.apps.importers.promptfoo_asserts import Config, Dim, dimension, transform_of
from harness.apps.importers.promptfoo_judge import Judge, judge_of
from harness.apps.importers.promptfoo_tests import (
    RESERVED,
    asserts_of,
    case_of,
    default_test,
    expanded,
    qualified,
    tests_of,
)
from harness.base.errors import HarnessConfigError
from harness.base.yamlfile import parse_yaml, read_text

SOURCE = "promptfoo"
Prompt = str | list[dict[str, str]]  # a prompt as a template: text, or a chat template's messages

TOP_LEVEL = ("description", "prompts", "providers", "targets", "defaultTest", "tests", "env")


# --- the import --------------------------------------------------------------------------------


def plan_import(config_path: Path, out: Path, name: str | None = None) -> Plan:
    """The files ``harness import promptfoo`` writes for ``config_path``, and what does not carry over."""
    config = Config(config_path, out)
    try:
        raw = parse_yaml(read_text(config_path), config_path)
    except HarnessConfigError as exc:
        raise ImportInputError(exc.path, exc.field, exc.problem, exc.fix) from None
    top = mapping_at(raw, config_path, "", "a promptfoo config (a mapping with prompts, providers and tests)")
    plan = Plan(name=identifier(name or top.get("description") or config_path.resolve().parent.name or SOURCE,
                                SOURCE))
    for key in top:
        if key not in TOP_LEVEL:
            plan.not_carried(str(key), None, "no counterpart in the harness")
    if "env" in top:
        plan.not_carried("env", None, "keys in the config file are not read",
                         "set ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment")
    if "prompts" not in top:
        raise config.error("prompts", "missing", "add `prompts:` with at least one prompt")
    prompts = list(_prompts(config, top["prompts"], plan))
    if not prompts:
        raise config.error("prompts", "no prompt to import", "add at least one prompt")
    default = default_test(config, top.get("defaultTest"))
    models = _provider_models(config, top.get("providers", top.get("targets")), plan,
                              "providers" if "providers" in top else "targets")
    judge = _judge_model(config, default, plan)
    tests = list(tests_of(config, top.get("tests"), plan)) or [("tests", {})]  # none: each prompt runs once

    default_transform = transform_of(default.get("options") or {}, "defaultTest.options.transform", plan)
    rubric_dims = [d for d in (dimension(config, a, f"defaultTest.assert[{i}]", plan, [], None)
                               for i, a in enumerate(asserts_of(config, default, "defaultTest"))) if d]
    taken = [d.id for d in rubric_dims]
    cases = [case_of(config, test, where, number, plan, taken, default_transform)
             for number, (where, test) in enumerate(expanded(tests, config), 1)]
    judged = any(d.judge is not None for d in rubric_dims) or any(c["_judged"] for c in cases)
    names = {str(k) for k in (default.get("vars") or {})} | {str(k) for c in cases for k in c["vars"]}
    for dim in rubric_dims + [d for c in cases for d in c["dims"]]:
        dim.description, dim.check = qualified(dim.description, names), qualified(dim.check, names)
    if judged and judge is None:
        plan.notes.append("note: the judge is the harness's default model (promptfoo grades with an OpenAI model "
                          "unless defaultTest.options.provider says otherwise): set `judge: {model: ...}` in "
                          f"{plan.suite_dir}/agents.yaml to choose")

    templates = {name: (where, qualified(text, names)) for name, (where, text) in _agents(plan, prompts).items()}
    if names & RESERVED:
        plan.notes.append(f"note: vars named {', '.join(sorted(names & RESERVED))} are written {{{{ inputs.NAME }}}}: "
                          "the bare names are the harness's own slots")
    grading = judge_of(default, plan, rubric_dims, cases, _custom_prompt(config, default, plan)) if judged else None
    plan.add(plan.rubric_file, _rubric_text(plan, config, rubric_dims, default_transform))
    plan.add(f"{plan.suite_dir}/agents.yaml", _agents_text(plan, config, templates, models, judge, grading))
    for path, text in (grading.files if grading else {}).items():
        plan.add(f"{plan.suite_dir}/{path}", text)
    for name, (where, text) in templates.items():
        plan.add(f"{plan.suite_dir}/{_prompt_file(name, text)}",
                 template_text(text) if isinstance(text, list) else text)
    shared = _inputs(config, default.get("vars") or {}, "defaultTest.vars", plan, out / plan.suite_dir)
    agent = _agent_name(plan, templates, models)
    plan.add(f"{plan.suite_dir}/{agent}.cases.yaml", _cases_text(plan, config, agent, shared, cases, out,
                                                                 grading.expected if grading else {}))
    return plan


# --- prompts -----------------------------------------------------------------------------------


def _prompts(config: Config, raw: Any, plan: Plan) -> Iterator[tuple[str, Prompt, str | None]]:
    """(where, the prompt: its text or a chat template's messages, label) of each prompt."""
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, Mapping):  # the legacy {file://path: label} form
        raw = [{"id": key, "label": value} for key, value in raw.items()]
    if not isinstance(raw, list):
        raise config.error("prompts", f"expected a list of prompts, got {type(raw).__name__}")
    for index, item in enumerate(raw):
        where = f"prompts[{index}]"
        label = None
        if isinstance(item, Mapping):
            label = item.get("label")
            text = item.get("raw", item.get("id"))
            if not isinstance(text, str):
                raise config.error(where, "a prompt needs `raw:` text or an `id:` file", "write {raw: ..., label: ...}")
        elif isinstance(item, str):
            text = item
        else:
            raise config.error(where, f"expected a prompt text or a mapping, got {type(item).__name__}")
        if text.startswith("file://"):
            yield from _prompt_files(config, text, where, label, plan)
        elif text.lstrip().startswith("[") and _is_chat(text):  # promptfoo reads a JSON list of messages as a chat
            yield where, _chat_prompt(json.loads(text), where, plan, config), str(label) if label else None
        else:
            yield where, text, str(label) if label else None


def _is_chat(text: str) -> bool:
    """Whether a raw prompt is a JSON list of chat messages (``[{"role": ..., "content": ...}]``)."""
    try:
        messages = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(messages, list) and bool(messages) and all(
        isinstance(m, Mapping) and "role" in m and "content" in m for m in messages)


def _prompt_files(config: Config, ref: str, where: str, label: Any,
                  plan: Plan) -> Iterator[tuple[str, Prompt, str | None]]:
    if re.search(r"\.(js|cjs|mjs|ts|py)(:\w+)?$", ref):
        plan.not_carried(where, "prompt function", f"{ref} builds the prompt in code",
                         "write the prompt as a template file, or use a `python: module:function` producer")
        return
    for path in config.files(ref, where):
        stem = identifier(path.stem, "prompt")
        if path.suffix in (".json", ".yaml", ".yml"):
            messages = config.load(path, where)
            yield where, _chat_prompt(messages, where, plan, config), str(label) if label else stem
            continue
        if path.suffix == ".jsonl":
            for number, line in enumerate(read_text(path).splitlines(), 1):
                if line.strip():
                    place = f"{where} ({path.name} line {number})"
                    yield place, _chat_prompt(config.json(line, where), place, plan, config), f"{stem}_{number}"
            continue
        parts = _split_prompts(read_text(path))
        for number, text in enumerate(parts, 1):
            part_label = str(label) if label and len(parts) == 1 else (stem if len(parts) == 1 else f"{stem}_{number}")
            yield (f"{where} ({path.name}" + (f" part {number})" if len(parts) > 1 else ")")), text, part_label


def _split_prompts(text: str) -> list[str]:
    """A prompt file's prompts: promptfoo splits a text file at lines holding only ``---``."""
    parts, buffer = [], []
    for line in text.splitlines():
        if line.strip() == "---":
            parts.append("\n".join(buffer).strip())
            buffer = []
        else:
            buffer.append(line)
    parts.append("\n".join(buffer).strip())
    return [part for part in parts if part]


def _chat_prompt(messages: Any, where: str, plan: Plan, config: Config) -> Prompt:
    """A chat prompt's messages as a chat template's, each in its role; as one text when they do not fit one."""
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) and "content" in m for m in messages):
        raise config.error(where, "a chat prompt is a list of {role, content} messages")
    return as_chat_template(messages, config.path, where, plan) or flattened(messages)


def _agents(plan: Plan, prompts: list[tuple[str, Prompt, str | None]]) -> dict[str, tuple[str, Prompt]]:
    """Agent name -> (where, template: a text, or a chat template's messages), with a line for each piece of
    Nunjucks that does not carry over."""
    agents: dict[str, tuple[str, Prompt]] = {}
    for number, (where, prompt, label) in enumerate(prompts, 1):
        name = unique(identifier(label, "prompt") if label else f"prompt_{number}", agents)
        if isinstance(prompt, list):
            agents[name] = (where, [{**m, "content": _template(m["content"], where, plan)} for m in prompt])
        else:
            agents[name] = (where, _template(prompt, where, plan))
    return agents


def _template(text: str, where: str, plan: Plan) -> str:
    """A prompt's text as a template here: its Nunjucks left as written, its literal braces protected."""
    for part in unsupported_template_parts(text):
        plan.not_carried(where, "nunjucks", f"`{part}`: template tags, filters and expressions do not run "
                         "here; the text stays as written", "compute the value into a var of each test")
    text, protected = protect_literal_braces(text)
    for slot in protected:
        plan.not_carried(where, "braces", f"`{{{slot}}}` is text in promptfoo but a slot here; it is written "
                         f"`{{ {slot} }}`", None)
    return text


def _prompt_file(name: str, prompt: Prompt) -> str:
    """Where a prompt's template goes: ``prompts/NAME.yaml`` for a chat template, ``prompts/NAME.txt`` for text."""
    return f"prompts/{name}.{'yaml' if isinstance(prompt, list) else 'txt'}"


# --- providers ---------------------------------------------------------------------------------


def _provider_models(config: Config, raw: Any, plan: Plan, key: str) -> dict[str, dict[str, Any]]:
    """Each provider that has a counterpart here as ``model:`` settings, by its variant name (its ``label``, else
    its model's name); one that has none is a line of what does not carry over."""
    models: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(raw if isinstance(raw, list) else [] if raw is None else [raw]):
        where = f"{key}[{index}]"
        provider_id, options = _provider_id(config, item, where)
        settings = _model_settings(provider_id, options, where, plan)
        if settings is None:
            continue
        label = item.get("label") if isinstance(item, Mapping) else None
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(label or settings["model"].rsplit("/", 1)[-1])).strip("_.-")
        models[unique(name or f"provider_{index + 1}", models)] = settings
    return models


def _provider_id(config: Config, item: Any, where: str) -> tuple[str, Mapping[str, Any]]:
    if isinstance(item, str):
        return item, {}
    if isinstance(item, Mapping):
        if "id" in item:
            return str(item["id"]), item.get("config") or {}
        if len(item) == 1:  # {openai:gpt-4: {config: ...}}
            provider_id, options = next(iter(item.items()))
            return str(provider_id), (options or {}).get("config") or {} if isinstance(options, Mapping) else {}
    raise config.error(where, "a provider is an id such as openai:gpt-4.1-mini or {id: ..., config: ...}")


def _model_settings(provider_id: str, options: Mapping[str, Any], where: str, plan: Plan) -> dict[str, Any] | None:
    name = _model_name(provider_id)
    if name is None:
        plan.not_carried(where, provider_id, "no provider of that kind here (anthropic, openai and "
                         "OpenAI-compatible servers are)", "set `model:` in suites/<name>/agents.yaml")
        return None
    settings: dict[str, Any] = {"model": name}
    if provider_id.startswith("ollama:"):
        settings["base_url"] = "http://localhost:11434/v1"
    if isinstance(options, Mapping):
        for theirs, ours in (("temperature", "temperature"), ("max_tokens", "max_tokens"),
                             ("apiBaseUrl", "base_url"), ("apiHost", "base_url")):
            if theirs in options and options[theirs] is not None:
                value = options[theirs]
                settings[ours] = f"https://{value}/v1" if theirs == "apiHost" else value
        left = sorted(str(k) for k in options if k not in ("temperature", "max_tokens", "apiBaseUrl", "apiHost"))
        if left:
            plan.not_carried(f"{where}.config", None, f"{', '.join(left)}: no counterpart in `model:`")
    return settings


def _model_name(provider_id: str) -> str | None:
    """promptfoo's provider id as a model name here: openai:chat:gpt-4.1 -> openai/gpt-4.1, anthropic:messages:x
    -> x (Anthropic is the default provider), ollama:chat:llama3 -> openai/llama3 (its OpenAI-compatible API)."""
    parts = provider_id.split(":")
    kind, rest = parts[0], parts[1:]
    if rest and rest[0] in ("chat", "completion", "messages", "responses") and len(rest) > 1:
        rest = rest[1:]
    model = ":".join(rest)
    if kind == "echo":
        return "mock/echo"
    if not model:
        return None
    if kind == "anthropic":
        return model
    if kind in ("openai", "ollama"):
        return f"openai/{model}"
    return None


def _judge_model(config: Config, default: Mapping[str, Any], plan: Plan) -> dict[str, Any] | None:
    options = default.get("options") or {}
    provider = options.get("provider") if isinstance(options, Mapping) else None
    if provider is None:
        return None
    if isinstance(provider, Mapping) and "text" in provider:
        provider = provider["text"]
    provider_id, settings = _provider_id(config, provider, "defaultTest.options.provider")
    return _model_settings(provider_id, settings, "defaultTest.options.provider", plan)


# --- the files ---------------------------------------------------------------------------------


def _header(config: Config, what: str) -> str:
    return f"{what}, imported from {config.path.name} by `harness import promptfoo`."


def _rubric_text(plan: Plan, config: Config, dims: list[Dim], transform: dict[str, Any] | None) -> str:
    total = sum(d.weight for d in dims)
    weights = [round(d.weight / total, 6) if total else round(1 / len(dims), 6) for d in dims]
    if weights:
        weights[-1] = round(1 - sum(weights[:-1]), 6)
    data: dict[str, Any] = {
        "metadata": {"name": f"{plan.name} (promptfoo)", "version": "1.0.0",
                     "description": f"defaultTest's asserts of {config.path.name}; each case adds its own."},
        "threshold": 0,
        "dimensions": {d.id: d.as_rubric_dimension(w) for d, w in zip(dims, weights)},
    }
    if transform is not None:
        data["transform"] = transform
    return dump_yaml(data, comment=_header(config, "The rubric every agent shares") + "\npromptfoo passes a test "
                     "when every assert passes: each dimension's min_score is its bar, and the threshold sets none.")


def _agent_name(plan: Plan, templates: dict[str, tuple[str, Prompt]], models: dict[str, dict[str, Any]]) -> str:
    """The agent: named for its one prompt, or for the config when its prompts and providers are variants."""
    return next(iter(templates)) if len(templates) == 1 and len(models) <= 1 else plan.name


def _agents_text(plan: Plan, config: Config, templates: dict[str, tuple[str, Prompt]],
                 models: dict[str, dict[str, Any]], judge: dict[str, Any] | None, grading: Judge | None) -> str:
    data: dict[str, Any] = {"defaults": dict(NO_REVISION)}
    if len(models) == 1:
        data["model"] = next(iter(models.values()))
    if judge is not None:
        data["judge"] = judge
    first = next(iter(templates))
    agent: dict[str, Any] = {"description": f"promptfoo {', '.join(where for where, _ in templates.values())}",
                             "rubric": f"../../{plan.rubric_file}",
                             "producer": {"template": _prompt_file(first, templates[first][1])}}
    if grading is not None:
        agent["evaluator"] = grading.evaluator
    variants: dict[str, Any] = {}
    if len(templates) > 1:
        variants["producer"] = {name: {"template": _prompt_file(name, prompt)}
                                for name, (_, prompt) in templates.items()}
    if len(models) > 1:
        variants["model"] = {name: settings["model"] if len(settings) == 1 else settings
                             for name, settings in models.items()}
    if variants:
        agent["variants"] = variants
    data["agents"] = {_agent_name(plan, templates, models): agent}
    text = dump_yaml(data, comment=_header(config, "The agent" + (": its prompts x providers are variants, every "
                                                                  "test runs on each" if variants else "")))
    if grading is None:
        return text
    credit = "".join(f"    # {line}\n" for line in textwrap.wrap(grading.credit, 112))
    return re.sub(r"(?m)^    evaluator:", lambda m: credit + m[0], text, count=1)


def _custom_prompt(config: Config, default: Mapping[str, Any], plan: Plan) -> tuple[str, str] | None:
    """``defaultTest.options.rubricPrompt`` as the suite's judge template (its path in the suite, its text): a chat
    template when it is a list of messages; None when the config has none (the judge is then promptfoo's, from the
    library)."""
    options = default.get("options") if isinstance(default.get("options"), Mapping) else {}
    custom = options.get("rubricPrompt")
    if custom is None:
        return None
    if isinstance(custom, str) and custom.startswith("file://"):
        path = config.file_path(custom, "defaultTest.options.rubricPrompt")
        structured = path.suffix in (".json", ".yaml", ".yml")
        custom = config.load(path, "defaultTest.options.rubricPrompt") if structured else read_text(path)
    if isinstance(custom, str) and custom.lstrip().startswith("["):
        custom = config.json(custom, "defaultTest.options.rubricPrompt")
    prompt = _chat_prompt(custom, "defaultTest.options.rubricPrompt", plan, config)
    if isinstance(prompt, list):
        return "judges/llm-rubric.yaml", template_text(prompt)
    return "judges/llm-rubric.txt", prompt


def _inputs(config: Config, variables: Any, where: str, plan: Plan, case_dir: Path) -> dict[str, Any]:
    """A test's vars as a case's inputs: ``file://`` values become ``{file: path}`` relative to the case file."""
    variables = mapping_at(variables, config.path, where)
    inputs: dict[str, Any] = {}
    folder = case_dir.resolve()
    for key, value in variables.items():
        name = str(key)
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            plan.not_carried(f"{where}.{name}", None, "a var whose name is not an identifier cannot be a slot",
                             "rename it (letters, digits and _)")
        if isinstance(value, str) and value.startswith("file://"):
            if re.search(r"\.(js|cjs|mjs|ts|py)(:\w+)?$", value):
                plan.not_carried(f"{where}.{name}", None, f"{value} computes the var in code",
                                 "compute it once and write the value")
                continue
            path = config.file_path(value, f"{where}.{name}")
            inputs[name] = {"file": os.path.relpath(path, folder)}
        else:
            inputs[name] = value
    return inputs


def _cases_text(plan: Plan, config: Config, agent: str, shared: dict[str, Any], cases: list[dict[str, Any]],
                out: Path, expected: dict[str, str]) -> str:
    case_dir = out / plan.suite_dir
    items = []
    for case in cases:
        item: dict[str, Any] = {"id": case["id"]}
        if case["description"]:
            item["description"] = str(case["description"])
        inputs = _inputs(config, case["vars"], f"{case['where']}.vars", plan, case_dir)
        if inputs:
            item["inputs"] = inputs
        if case["id"] in expected:  # closed QA's criterion, as graders/closedqa reads it
            item["expected"] = expected[case["id"]]
        checks = [d.as_case_item() for d in case["dims"] if d.check is not None]
        criteria = [d.as_case_item() for d in case["dims"] if d.judge is not None]
        if checks:
            item["checks"] = checks
        if criteria:
            item["criteria"] = criteria
        items.append(item)
    data: dict[str, Any] = {"agent": agent}
    if shared:
        data["inputs"] = shared
    data["cases"] = items
    return dump_yaml(data, comment=_header(config, f"The tests, as cases of {agent}"))
