"""``harness import openai-evals SPEC.yaml SAMPLES.jsonl``: an openai/evals eval as a rubric, an agent and a dataset.

SPEC is a model-graded spec (``evals/registry/modelgraded/*.yaml``: ``prompt``, ``choice_strings``,
``choice_scores``, ``eval_type``, ``input_outputs``) or an eval registry entry (``evals/registry/evals/*.yaml``:
``class`` and ``args``). A model-graded eval becomes a rubric of one dimension whose ``choices`` are the spec's,
and an evaluator whose ``template:`` is the spec's prompt as written (openai/evals formats it with Python's
``str.format``, so ``{{``/``}}`` are written as single braces) with a ``verdict:`` pattern that reads the choice
where the eval type puts it. ``Match``, ``Includes`` and ``FuzzyMatch`` become an ``equals``, ``contains`` or
``similar`` check. The samples are copied as a dataset, one case a row, with ``expected: "{ideal}"``; a chat input
stays messages, its system message the producer's system prompt (:mod:`harness.apps.importers.openai_samples`).
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
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
)
from harness.apps.importers.chat import as_chat_template, template_text
from harness.apps.importers.openai_battle import plan_battle
from harness.apps.importers.openai_samples import Samples, every_row_has, producer_template, read_samples
from harness.base.errors import HarnessConfigError
from harness.base.fields import inside
from harness.base.models import ModelSettings
from harness.base.yamlfile import parse_yaml, read_text

# openai/evals' answer prompts, appended to a spec's prompt when the registry entry names an eval_type
# (github.com/openai/evals, evals/elsuite/modelgraded/classify_utils.py, ANSWER_PROMPTS; MIT licence). Prompt text.
ANSWER_PROMPTS = {
    "classify": "Answer the question by printing only a single choice from {choices} (without quotes or "
                "punctuation) corresponding to the correct answer with no other text.",
    "classify_cot": "First, answer by printing a single choice from {choices} (without quotes or punctuation) "
                    "corresponding to the correct answer. Then, from the next line, explain your reasonings step "
                    "by step.",
    "cot_classify": "First, write out in a step by step manner your reasoning to be sure that your conclusion is "
                    "correct. Avoid simply stating the correct answer at the outset. Then print only a single choice "
                    "from {choices} (without quotes or punctuation) on its own line corresponding to the correct "
                    "answer. At the end, repeat just the answer by itself on a new line.\n\nReasoning:",
}
EVAL_TYPES = tuple(ANSWER_PROMPTS)
CLASSES = ("Match", "Includes", "FuzzyMatch", "ModelBasedClassify")
# openai/evals' fact spec has no choice_scores (it counts the choices); these are Braintrust autoevals' scores for it
FACT_SCORES = {"A": 0.4, "B": 0.6, "C": 1.0, "D": 0.0, "E": 1.0}
THRESHOLD = 0.5


@dataclass
class Spec:
    """A model-graded spec, as openai/evals reads it."""

    key: str
    prompt: str
    choices: list[str]
    scores: dict[str, float] | None
    input_outputs: dict[str, str]
    eval_type: str | None = None
    path: Path = field(default_factory=Path)
    roles: list[str] = field(default_factory=list)  # a chat prompt's roles, a message a role; empty: text
    parts: list[str] = field(default_factory=list)  # ... and each message's text


def plan_import(spec_path: Path, samples_path: Path, out: Path, *, name: str | None = None,
                eval_name: str | None = None, eval_type: str | None = None,
                choice_scores: str | None = None) -> Plan:
    """The files ``harness import openai-evals`` writes, and what does not carry over."""
    raw = mapping_at(_load(spec_path), spec_path, "", "a spec or registry file (a mapping of names)")
    entries = {str(k): v for k, v in raw.items() if isinstance(v, Mapping)}
    if any("class" in v for v in entries.values()):
        key, entry = _choose(spec_path, {k: v for k, v in entries.items() if "class" in v}, raw, eval_name, "eval")
        return _from_registry(spec_path, key, entry, samples_path, out, name, eval_type, choice_scores)
    specs = {k: v for k, v in entries.items() if "prompt" in v}
    if not specs:
        raise ImportInputError(spec_path, None, "neither a model-graded spec (`prompt:`) nor a registry entry "
                               "(`class:`)", "give a file from evals/registry/modelgraded/ or evals/registry/evals/")
    key, entry = _choose(spec_path, specs, raw, eval_name, "spec")
    plan = Plan(name=identifier(name or key, "eval"))
    spec = _spec(spec_path, key, entry, choice_scores, plan)
    return _model_graded(plan, spec, samples_path, out, eval_type, {}, None)


def _load(path: Path) -> Any:
    try:
        return parse_yaml(read_text(path), path)
    except HarnessConfigError as exc:
        raise ImportInputError(exc.path, exc.field, exc.problem, exc.fix) from None


def _choose(path: Path, found: dict[str, Mapping[str, Any]], raw: Mapping[str, Any], wanted: str | None,
            what: str) -> tuple[str, Mapping[str, Any]]:
    if wanted is not None:
        alias = raw.get(wanted)
        if isinstance(alias, Mapping) and isinstance(alias.get("id"), str) and alias["id"] in found:
            wanted = alias["id"]  # coqa-fact -> coqa-fact.dev.v0
        if wanted not in found:
            raise ImportInputError(path, wanted, f"no {what} of that name", f"use one of: {', '.join(found)}")
        return wanted, found[wanted]
    if len(found) > 1:
        raise ImportInputError(path, None, f"holds {len(found)} {what}s ({', '.join(found)})",
                               "choose one with --eval NAME")
    return next(iter(found.items()))


# --- model-graded specs -------------------------------------------------------------------------


def _spec(path: Path, key: str, raw: Mapping[str, Any], choice_scores: str | None, plan: Plan) -> Spec:
    prompt = raw.get("prompt")
    chat: list[dict[str, str]] = []
    if isinstance(prompt, list):  # a chat prompt: the judge's chat template, when it fits one's rules
        if not all(isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in prompt):
            raise ImportInputError(path, f"{key}.prompt", "a chat prompt is a list of {role, content} messages")
        chat = (as_chat_template(list(prompt), path, f"{path.name}: {key}.prompt", plan) or []) if len(prompt) > 1 \
            else []
        prompt = "\n\n".join(m["content"] for m in prompt)
    if not isinstance(prompt, str) or not prompt.strip():
        raise ImportInputError(path, f"{key}.prompt", "missing or empty", "write the judge's prompt")
    raw_choices = raw.get("choice_strings")
    if isinstance(raw_choices, str) and raw_choices.startswith("from_n"):
        raise ImportInputError(path, f"{key}.choice_strings", f"{raw_choices!r} numbers several completions of one "
                               "sample; one agent produces one artifact", "write the choices out")
    choices = list(raw_choices) if isinstance(raw_choices, str) else raw_choices
    if (not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, (str, int)) for c in choices)):
        raise ImportInputError(path, f"{key}.choice_strings", "expected at least two choices",
                               "write e.g. `choice_strings: YN` or a list")
    choices = [str(c) for c in choices]
    input_outputs = raw.get("input_outputs") or {"input": "completion"}
    if not isinstance(input_outputs, Mapping) or len(input_outputs) not in (1, 2):
        raise ImportInputError(path, f"{key}.input_outputs", "one agent produces one completion per sample (two, "
                               "compared pairwise), not "
                               f"{len(input_outputs) if isinstance(input_outputs, Mapping) else 0}",
                               "import each input/completion pair as its own eval")
    eval_type = raw.get("eval_type")
    if eval_type is not None and eval_type not in EVAL_TYPES:
        raise ImportInputError(path, f"{key}.eval_type", f"unknown eval type {eval_type!r}",
                               f"use one of: {', '.join(EVAL_TYPES)}")
    for extra in ("output_template", "format_type"):
        if extra in raw:
            plan.not_carried(f"{path.name}: {key}.{extra}", None, "no counterpart")
    return Spec(key=key, prompt=prompt, choices=choices, input_outputs={str(k): str(v) for k, v in
                                                                          input_outputs.items()},
                roles=[m["role"] for m in chat], parts=[m["content"] for m in chat],
                scores=_scores(path, key, raw.get("choice_scores"), choices, choice_scores, prompt, plan),
                eval_type=eval_type, path=path)


def _scores(path: Path, key: str, raw: Any, choices: list[str], given: str | None, prompt: str,
            plan: Plan) -> dict[str, float]:
    """Each choice's score from 0 to 1 (openai/evals' scores scaled into that range when they leave it)."""
    where = f"{key}.choice_scores"
    if given is not None:
        scores = {}
        for part in given.split(","):
            label, sep, value = part.partition("=")
            try:
                scores[label.strip()] = float(value)
            except ValueError:
                raise ImportInputError("--choice-scores", None, f"{part!r} is not LABEL=SCORE",
                                       "write e.g. Y=1,N=0") from None
        raw = scores
    elif raw is None:
        if choices == list("ABCDE") and "[Expert]" in prompt:
            plan.not_carried(f"{path.name}: {where}", None, "none given (openai/evals only counts the choices): "
                             "scored as Braintrust's autoevals scores the fact spec (A 0.4, B 0.6, C 1, D 0, E 1)",
                             "edit the choices in the rubric, or pass --choice-scores")
            return dict(FACT_SCORES)
        raise ImportInputError(path, where, "missing: openai/evals only counts the choices, and a rubric scores "
                               "each one", "pass --choice-scores " + ",".join(f"{c}=?" for c in choices))
    if raw == "from_strings":
        try:
            raw = {c: float(c) for c in choices}
        except ValueError:
            raise ImportInputError(path, where, "from_strings needs numeric choices") from None
    if not isinstance(raw, Mapping):
        raise ImportInputError(path, where, f"expected a mapping of choice to score, got {type(raw).__name__}")
    missing = [c for c in choices if c not in raw]
    if missing:
        raise ImportInputError(path, where, f"no score for choice {missing[0]!r}", "give every choice a score")
    values = {c: float(raw[c]) for c in choices}
    low, high = min(values.values()), max(values.values())
    if low < 0 or high > 1:
        plan.notes.append(f"note: {path.name}: {where}: scores from {low:g} to {high:g} are scaled to 0..1")
        span = (high - low) or 1.0
        values = {c: round((v - low) / span, 6) for c, v in values.items()}
    return values


def _model_graded(plan: Plan, spec: Spec, samples_path: Path, out: Path, registry_type: str | None,
                  spec_args: Mapping[str, Any], registry: str | None) -> Plan:
    eval_type = spec.eval_type or registry_type
    if eval_type is None:
        raise ImportInputError(spec.path, f"{spec.key}.eval_type", "missing: openai/evals takes it from the "
                               "registry entry", "pass --eval-type cot_classify (or classify, classify_cot), or "
                               "import the registry entry")
    answer = ""
    if registry_type is not None:  # openai/evals appends its answer prompt when the registry names an eval_type
        answer = "\n\n" + ANSWER_PROMPTS[registry_type].replace(
            "{choices}", " or ".join(f'"{c}"' for c in spec.choices))
    prompt = spec.prompt + answer
    source = f"{spec.path.name} ({registry})" if registry else spec.path.name
    if len(spec.input_outputs) == 2:  # two completions compared: openai/evals' battle
        template, _ = _template(spec, prompt, spec_args, plan)
        return plan_battle(plan, source, spec.path, spec.key, template, spec.input_outputs, spec.scores or {},
                           verdict_pattern(eval_type, spec.choices), samples_path)
    (input_key, output_name), = spec.input_outputs.items()
    samples = read_samples(samples_path, plan, (input_key,))
    rows = samples.rows
    judge_file, template, names = _judge_template(spec, answer, spec_args, plan)
    slot_map: dict[str, str] = {}
    for name in names:
        if name == output_name:
            slot_map[name] = "output"
        elif name == "ideal":
            every_row_has(samples_path, rows, "ideal", "the prompt uses {ideal}")
            slot_map[name] = "expected"
        else:
            every_row_has(samples_path, rows, name, f"the prompt of {spec.key} uses {{{name}}}")
            slot_map[name] = f"inputs.{name}"
    every_row_has(samples_path, rows, input_key, "it is the input of the model under test")
    plan.add(f"{plan.suite_dir}/{judge_file}", template)
    evaluator = {"template": judge_file, "slots": slot_map, "verdict": verdict_pattern(
        eval_type, spec.choices)}
    dim = {"weight": 1, "description": _description(spec),
           "choices": {c: {"score": spec.scores[c], **({"description": d} if (d := _choice_text(spec, c)) else {})}
                       for c in spec.choices}}
    _rubric(plan, source, {identifier(spec.key, "verdict"): dim})
    extra = [k for k in names if k not in (output_name, "ideal", input_key)]
    _write_common(plan, source, samples, samples_path, input_key, extra, evaluator, "ideal" in names)
    plan.notes.append(f"note: the judge reads the choice {_where_read(eval_type)} ({eval_type}); openai/evals "
                      "names the grading model on its command line: set `judge: {model: ...}`")
    return plan


def _judge_template(spec: Spec, answer: str, spec_args: Mapping[str, Any], plan: Plan) -> tuple[str, str, list[str]]:
    """The judge's template file (``judges/NAME.txt``, or ``.yaml`` for a chat prompt, each message in its role,
    the answer prompt after the last), its text and the slot names it uses."""
    if not spec.roles:
        text, names = _template(spec, spec.prompt + answer, spec_args, plan)
        return f"judges/{plan.name}.txt", text, names
    last = len(spec.parts) - 1
    parts = [_template(spec, part + (answer if number == last else ""), spec_args, plan)
             for number, part in enumerate(spec.parts)]
    messages = [{"role": role, "content": text} for role, (text, _) in zip(spec.roles, parts)]
    return (f"judges/{plan.name}.yaml", template_text(messages),
            list(dict.fromkeys(name for _, names in parts for name in names)))


def _template(spec: Spec, prompt: str, spec_args: Mapping[str, Any], plan: Plan) -> tuple[str, list[str]]:
    """The prompt as a template (``{name}`` slots, literal braces single) and the slot names it uses."""
    pieces: list[str] = []
    names: list[str] = []
    try:
        parsed = list(string.Formatter().parse(prompt))
    except ValueError as exc:
        raise ImportInputError(spec.path, f"{spec.key}.prompt", f"not a Python format string ({exc})") from None
    fields: list[str] = []  # what each \x00N\x00 marker in the literal text stands for
    for literal, name, format_spec, conversion in parsed:
        pieces.append(literal.replace("\x00", ""))
        if name is None:
            continue
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ImportInputError(spec.path, f"{spec.key}.prompt", f"{{{name}}} is not a plain field name",
                                   "use {name} fields only")
        if format_spec or conversion:
            plan.not_carried(f"{spec.path.name}: {spec.key}.prompt", "format", f"{{{name}}}'s format spec or "
                             "conversion: the value is written as it is")
        if name in spec_args:  # a constant of the registry entry: written into the template
            fields.append(protect_literal_braces(str(spec_args[name]))[0])
        else:
            fields.append("{" + name + "}")
            names.append(name)
        pieces.append(f"\x00{len(fields) - 1}\x00")
    text, protected = protect_literal_braces("".join(pieces))  # the literal text only: fields are markers yet
    for slot in protected:
        plan.not_carried(f"{spec.path.name}: {spec.key}.prompt", "braces", f"`{{{{{slot}}}}}` is the text "
                         f"`{{{slot}}}` in openai/evals but would be a slot here; it is written `{{ {slot} }}`")
    return re.sub(r"\x00(\d+)\x00", lambda m: fields[int(m[1])], text), list(dict.fromkeys(names))


def verdict_pattern(eval_type: str, choices: list[str]) -> str:
    """Where the eval type puts the choice: cot_classify on the last line (the last match), classify first
    (the first token), classify_cot on the first line; punctuation around it is allowed, as openai/evals
    strips it."""
    options = "|".join(re.escape(c) for c in sorted(choices, key=len, reverse=True))
    if eval_type.startswith("cot_classify"):
        return rf"(?m)^[^\w\n]*({options})[^\w\n]*$"
    if eval_type == "classify_cot":
        return rf"\A\s*[^\w\n]*({options})[^\w\n]*(?:\n|\Z)"
    return rf"\A\s*[^\w\s]*({options})(?!\w)"


def _where_read(eval_type: str) -> str:
    return {"classify": "from the first token", "classify_cot": "from the first line"}.get(
        eval_type, "from the last line that is only a choice (the reasoning above it is kept)")


def _description(spec: Spec) -> str:
    first = next((line.strip() for line in spec.prompt.splitlines() if line.strip()), spec.key)
    first = re.split(r"(?<=[.?!])\s", first)[0]
    first = protect_literal_braces(re.sub(r"\{(\w+)\}", r"\1", first))[0]
    return f"{first} (openai/evals {spec.key})"


def _choice_text(spec: Spec, choice: str) -> str | None:
    """A choice's meaning where the prompt lists it: ``(A) The submitted answer is ...``."""
    match = re.search(rf"(?m)^\s*\(?{re.escape(choice)}\)\s+(.+)$", spec.prompt)
    return protect_literal_braces(match[1].strip())[0] if match else None


# --- registry entries ---------------------------------------------------------------------------


def _from_registry(path: Path, key: str, entry: Mapping[str, Any], samples_path: Path, out: Path,
                   name: str | None, eval_type: str | None, choice_scores: str | None) -> Plan:
    class_name = str(entry["class"]).rpartition(":")[2].rpartition(".")[2]
    if class_name not in CLASSES:
        raise ImportInputError(path, f"{key}.class", f"{entry['class']} has no counterpart here",
                               f"import one of: {', '.join(CLASSES)}")
    args = mapping_at(entry.get("args") or {}, path, f"{key}.args")
    plan = Plan(name=identifier(name or key.split(".")[0], "eval"))
    for arg in ("multicomp_n", "metaeval", "num_few_shot", "few_shot_jsonl", "sample_kwargs", "eval_kwargs"):
        if arg in args:
            plan.not_carried(f"{path.name}: {key}.args.{arg}", None, "no counterpart")
    if "match_fn" in args and args["match_fn"] != "starts_or_endswith":
        plan.not_carried(f"{path.name}: {key}.args.match_fn", None, f"{args['match_fn']}: the verdict pattern "
                         "reads a line that is the choice alone")
    if class_name == "ModelBasedClassify":
        spec_name = args.get("modelgraded_spec")
        if not isinstance(spec_name, str):
            raise ImportInputError(path, f"{key}.args.modelgraded_spec", "missing", "name the model-graded spec")
        spec_path, raw = _find_spec(path, key, spec_name)
        spec = _spec(spec_path, spec_name, raw, choice_scores, plan)
        spec_args = args.get("modelgraded_spec_args") or {}
        registry_type = eval_type or args.get("eval_type")
        if registry_type is not None and registry_type not in EVAL_TYPES:
            raise ImportInputError(path, f"{key}.args.eval_type", f"unknown eval type {registry_type!r}",
                                   f"use one of: {', '.join(EVAL_TYPES)}")
        return _model_graded(plan, spec, samples_path, out, registry_type,
                             mapping_at(spec_args, path, f"{key}.args.modelgraded_spec_args"), key)
    return _basic(plan, path, key, class_name, args, samples_path)


def _find_spec(path: Path, key: str, spec_name: str) -> tuple[Path, Mapping[str, Any]]:
    """The spec a registry entry names, looked for as openai/evals' registry keeps them: registry/modelgraded/.
    A symbolic link that leads out of the folder it is in is not read."""
    folders = [path.parent.parent / "modelgraded", path.parent / "modelgraded", path.parent]
    for folder in folders:
        for candidate in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            if candidate.resolve() == path.resolve() or not inside(candidate, (folder,)):
                continue
            raw = _load(candidate)
            if isinstance(raw, Mapping) and isinstance(raw.get(spec_name), Mapping):
                return candidate, raw[spec_name]
    raise ImportInputError(path, f"{key}.args.modelgraded_spec", f"no spec {spec_name!r} in ../modelgraded/ or "
                           "beside the file", f"give the spec file itself: harness import openai-evals "
                           f"{spec_name}.yaml SAMPLES")


def _basic(plan: Plan, path: Path, key: str, class_name: str, args: Mapping[str, Any], samples_path: Path) -> Plan:
    samples = read_samples(samples_path, plan)
    rows = samples.rows
    every_row_has(samples_path, rows, "ideal", f"{class_name} compares the answer with it")
    every_row_has(samples_path, rows, "input", "it is the input of the model under test")
    if class_name == "Match":
        check = {"equals": {"value": "{expected}", "normalize": False}}
        plan.not_carried(f"{path.name}: {key}", class_name, "Match accepts an answer that starts with the ideal "
                         "answer; equals compares the whole answer", "use a `regex` check if answers run on")
        description = "The answer is the ideal answer (openai/evals Match)"
    elif class_name == "Includes":
        sensitive = not bool(args.get("ignore_case", False))
        check = {"contains": {"any": "{expected}", "case_sensitive": sensitive}}
        for row in rows:  # the check's `any` takes a list: every ideal is written as one
            row["ideal"] = row["ideal"] if isinstance(row["ideal"], list) else [row["ideal"]]
        plan.not_carried(f"{path.name}: {key}", class_name, "Includes finds the ideal answer anywhere in the text; "
                         "contains matches it as whole words", None)
        description = "The answer includes an ideal answer (openai/evals Includes)"
    else:
        check = {"similar": {"value": "{expected}", "threshold": 0.8,
                             "normalize": ["case", "whitespace", "punctuation", "articles"]}}
        plan.not_carried(f"{path.name}: {key}", class_name, "FuzzyMatch accepts either text inside the other "
                         "(normalised); similar needs a similarity of 0.8", "tune the threshold on a few answers")
        description = "The answer matches an ideal answer, normalised (openai/evals FuzzyMatch)"
    _rubric(plan, f"{path.name} ({key})", {identifier(class_name, "match"): {"weight": 1, "description": description,
                                                                             "check": check}})
    _write_common(plan, f"{path.name} ({key})", samples, samples_path, "input", [], None, True)
    return plan


# --- samples and the files -----------------------------------------------------------------------


def _rubric(plan: Plan, source: str, dimensions: dict[str, Any]) -> None:
    data = {"metadata": {"name": f"{plan.name} (openai/evals)", "version": "1.0.0",
                         "description": f"imported from {source}"},
            "threshold": THRESHOLD, "dimensions": dimensions}
    plan.add(plan.rubric_file, dump_yaml(data, comment=f"Imported from {source} by `harness import openai-evals`.\n"
                                         "openai/evals reports the mean score and sets no pass mark: "
                                         f"{THRESHOLD} is this rubric's; choose yours."))


def _write_common(plan: Plan, source: str, samples: Samples, samples_path: Path, input_key: str,
                  extra: list[str], evaluator: dict[str, Any] | None, has_ideal: bool) -> None:
    data_file = f"data/{plan.name}.samples.jsonl"
    plan.add(f"{plan.suite_dir}/{data_file}",
             "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in samples.rows))
    template, text = producer_template(samples, input_key, "input")
    plan.add(f"{plan.suite_dir}/{template}", text)
    if input_key in samples.with_system:
        plan.notes.append(f"note: {samples_path.name}: the chat inputs stay messages: each sample's system message is "
                          f"the system prompt and its user message the message ({plan.suite_dir}/{template})")
    agent: dict[str, Any] = {"description": f"openai/evals {source}", "rubric": f"../../{plan.rubric_file}",
                             "producer": {"template": template}}
    if evaluator is not None:
        agent["evaluator"] = evaluator
    suite = {"defaults": dict(NO_REVISION), "model": {"model": ModelSettings().model}, "agents": {plan.name: agent}}
    text = dump_yaml(suite, comment=f"Imported from {source} by `harness import openai-evals`.")
    text = re.sub(r"(?m)^model:\n", "# the model under test: openai/evals names it on its command line "
                  "(completion_fns), so set it here\nmodel:\n", text, count=1)
    if evaluator is not None:
        text = text.replace("    evaluator:\n", "    # the judge's prompt: the spec's, as written (openai/evals, MIT "
                            "licence)\n    evaluator:\n", 1)
    plan.add(f"{plan.suite_dir}/agents.yaml", text)
    dataset: dict[str, Any] = {"file": data_file,
                               "inputs": {key: "{" + key + "}" for key in (*samples.columns(input_key), *extra)}}
    if has_ideal:
        dataset["expected"] = "{ideal}"
    cases = {"agent": plan.name, "dataset": dataset}
    plan.add(f"{plan.suite_dir}/{plan.name}.cases.yaml",
             dump_yaml(cases, comment=f"The samples of {samples_path.name}, one case a row, imported by `harness "
                       "import openai-evals`."))
    plan.notes.append(f"note: the model under test is not in the spec (openai/evals takes it as completion_fns): "
                      f"set `model:` in {plan.suite_dir}/agents.yaml")
