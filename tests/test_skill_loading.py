"""Skill files and the prompt registry, loaded: the skill document's fields and validation rules, each mistake one
line naming the file, the field and the fix; prompts by id, the latest version unless one is pinned, their
variables checked before they are rendered."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from harness.base.errors import ExitCode, HarnessConfigError
from harness.base.jsonschemas import contract_errors
from harness.base.yamlfile import load_yaml
from harness.evaluation.items.skill.generation import schema_error
from harness.loading.prompt_registry import VarsRejected, find_prompt, load_registered_prompt
from harness.loading.skills import load_skill

REPO = Path(__file__).resolve().parents[1]

PROMPT = """\
prompt_id: greet
version: {version}
vars_schema:
  type: object
  required: [name]
  properties: {{name: {{type: string, minLength: 2}}, style: {{type: string}}}}
  additionalProperties: false
template: "Greet {{{{name}}}} ({version})"
"""

REVIEW_RUBRIC = """\
rubric_id: tone-review
version: 1.0.0
scoring_mode: binary
criteria:
  - {id: polite, name: Polite, description: d, pass_condition: polite, fail_condition: rude}
"""

DIMENSION_RUBRIC = """\
metadata: {name: Plain, version: 1.0.0}
threshold: 0.8
dimensions:
  short: {weight: 1.0, description: short, check: {length: {max_words: 5}}}
"""

GENERATION = """\
skill_id: greeter
version: 1.0.0
title: Greeter
description: Greets someone
tags: [demo]
input_schema: {type: object, required: [name], properties: {name: {type: string}}}
output_schema: {type: object, required: [greeting], properties: {greeting: {type: string}}}
template_type: LLM_JSON_GENERATION
template_config: {prompt_id: greet, model: mock/echo}
cases:
  - id: ada
    inputs: {name: Ada}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delitem(sys.modules, "handlers", raising=False)  # each project has its own handlers module
    (tmp_path / "prompts").mkdir()
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "skills").mkdir()
    for version in ("1.0.0", "1.2.0", "1.10.0"):
        (tmp_path / "prompts" / f"greet-{version}.yaml").write_text(PROMPT.format(version=version))
    (tmp_path / "rubrics" / "tone.yaml").write_text(REVIEW_RUBRIC)
    (tmp_path / "rubrics" / "plain.yaml").write_text(DIMENSION_RUBRIC)
    (tmp_path / "handlers.py").write_text("def shout(skill_input):\n    return {'greeting': skill_input['name']}\n")
    return tmp_path


def load(project: Path, text: str):  # noqa: ANN201 - a Skill
    path = project / "skills" / "x.skill.yaml"
    path.write_text(textwrap.dedent(text))
    return load_skill(path, prompts_dir=project / "prompts", rubrics_dir=project / "rubrics", import_root=project)


def test_a_prompt_is_the_latest_version_unless_one_is_pinned(project: Path) -> None:
    registry = project / "prompts"
    assert find_prompt("greet", None, registry).name == "greet-1.10.0.yaml"  # semantic order, not text order
    assert find_prompt("greet", "1.0.0", registry).name == "greet-1.0.0.yaml"
    assert find_prompt("greet", "9.9.9", registry) is None and find_prompt("nope", None, registry) is None

    skill = load(project, GENERATION)
    assert skill.generation.prompt.version == "1.10.0" and not skill.generation.pinned
    pinned = load(project, GENERATION.replace("prompt_id: greet,", "prompt_id: greet, prompt_version: 1.2.0,"))
    assert pinned.generation.prompt.version == "1.2.0" and pinned.generation.pinned


def test_a_prompts_vars_are_checked_before_it_is_rendered(project: Path) -> None:
    prompt = load_registered_prompt(project / "prompts" / "greet-1.0.0.yaml", import_root=project)
    assert prompt.render({"name": "Ada"}) == "Greet Ada (1.0.0)"
    with pytest.raises(VarsRejected, match="greet@1.0.0's vars_schema: name: 1 characters, fewer than the minimum 2") as refused:
        prompt.render({"name": "A"})
    assert refused.value.exit_code == ExitCode.DATA_ERROR  # the data is wrong: no model is asked


def test_a_template_slot_its_vars_schema_does_not_declare_is_a_load_error(project: Path) -> None:
    path = project / "prompts" / "greet-1.0.0.yaml"
    path.write_text(PROMPT.format(version="1.0.0").replace("{{name}}", "{{nmae}}"))
    with pytest.raises(HarnessConfigError) as error:
        load_registered_prompt(path, import_root=project)
    assert error.value.field == "template" and "{{nmae}}" in error.value.problem and "vars_schema" in error.value.fix


def test_two_files_of_one_prompt_version_are_an_error_naming_both(project: Path) -> None:
    shutil.copy(project / "prompts" / "greet-1.2.0.yaml", project / "prompts" / "greet-copy.yaml")
    with pytest.raises(HarnessConfigError, match=r"prompt greet version 1.2.0 is also greet-1.2.0.yaml"):
        find_prompt("greet", "1.2.0", project / "prompts")


# Each rule of the skill document, and the loader's own: (what is changed, the field named, words of the problem).
BROKEN = [
    ("template_config: {prompt_id: greet, model: mock/echo}\n", "", "template_config", "needs its template_config"),
    ("template_type: LLM_JSON_GENERATION\n", "", "template_config", "has no meaning without template_type"),
    ("prompt_id: greet,", "prompt_id: greeting,", "template_config.prompt_id",
     "no prompt greeting in the prompt registry (known: greet@1.0.0, greet@1.10.0, greet@1.2.0)"),
    ("prompt_id: greet,", "prompt_id: greet, prompt_version: 2.0.0,", "template_config.prompt_id",
     "no prompt greet@2.0.0"),
    ("output_schema: {type: object, required: [greeting], properties: {greeting: {type: string}}}\n", "",
     "output_schema", "answers are validated against it"),
    ("template_config: {prompt_id: greet, model: mock/echo}",
     "template_config: {prompt_id: greet, model: mock/echo, temprature: 0.2}", "template_config.temprature",
     "unknown key (did you mean 'temperature'?)"),
    ("model: mock/echo", "model: opnai/gpt-4.1", "template_config.model", "unknown model provider 'opnai'"),
    ("tags: [demo]", "tags: demo", "tags", "expected a list of text"),
    ("tags: [demo]", "tags: [demo, demo]", "tags", "items repeat"),  # what only the shipped contract says
    ("version: 1.0.0\ntitle", "version: one\ntitle", "version", "'one' is not a semantic version"),
    ("cases:\n  - id: ada\n    inputs: {name: Ada}\n", "", "cases", "a skill's cases (or a dataset's rows) are its items"),
    ("    inputs: {name: Ada}\n", "    inputs: {name: Ada}\n    criteria: [\"kind: is it kind?\"]\n",
     "cases[0].criteria", "judged criteria belong to a review rubric"),
    ("input_schema: {type: object, required: [name], properties: {name: {type: string}}}",
     "input_schema: {type: objekt}", "input_schema.type", "not a valid JSON Schema"),
    ("template_type: LLM_JSON_GENERATION\n", "template_type: LLM_JSON_GENERATION\nimplementation: {type: "
     "python_function, handler: 'handlers:shout'}\n", "implementation", "run by its prompt template"),
]


@pytest.mark.parametrize(("old", "new", "field", "problem"), BROKEN, ids=[case[2] + "|" + case[3][:20] for case in BROKEN])
def test_each_rule_is_one_error_naming_the_file_the_field_and_the_fix(project: Path, old: str, new: str, field: str,
                                                                      problem: str) -> None:
    assert old in GENERATION
    with pytest.raises(HarnessConfigError) as error:
        load(project, GENERATION.replace(old, new))
    assert error.value.path.endswith("x.skill.yaml")
    assert (error.value.field, problem in error.value.problem) == (field, True), error.value.message()
    assert "\n" not in error.value.message()


HANDLER = """\
skill_id: shouter
version: 1.0.0
title: Shouter
description: Shouts a name
input_schema: {type: object}
output_schema: {type: object}
implementation: {type: python_function, handler: "handlers:shout"}
cases: [{id: one, inputs: {name: Ada}}]
"""

REVIEW = """\
skill_id: tone
version: 1.0.0
title: Tone
description: Reviews the tone of a note
input_schema: {type: object}
template_type: LLM_REVIEW
template_config: {rubric_id: tone-review, evaluation_model: mock/echo}
cases: [{id: one, inputs: {note: hi}}]
"""


@pytest.mark.parametrize(("text", "old", "new", "field", "problem"), [
    (HANDLER, 'implementation: {type: python_function, handler: "handlers:shout"}\n', "", "implementation",
     "a skill without a template_type runs its own handler"),
    (HANDLER, "type: python_function", "type: ts_function", "implementation.type", "TypeScript"),
    (HANDLER, '"handlers:shout"', '"handlers:shuot"', "implementation.handler", "has no function 'shuot'"),
    (HANDLER, 'type: python_function, handler: "handlers:shout"', "type: http_call, handler: localhost:80",
     "implementation.handler", "is not an http:// or https:// URL"),
    (HANDLER, "output_schema: {type: object}\n", "", "output_schema", "handler output is validated against it"),
    (REVIEW, "rubric_id: tone-review", "rubric_id: tone-reveiw", "template_config.rubric_id",
     "no review rubric tone-reveiw"),
    (REVIEW, "rubric_id: tone-review", "rubric_id: tone-review, rubric_version: 2.0.0", "template_config.rubric_id",
     "no review rubric tone-review@2.0.0"),
    (REVIEW, "rubric_id: tone-review", "rubric_id: plain", "template_config.rubric_id",
     "plain.yaml is a rubric of dimensions, not a review rubric"),
    (REVIEW, "input_schema: {type: object}\n", "input_schema: {type: object}\npolicy: {threshold: 0.5}\n",
     "policy.threshold", "passes by its rubric"),
    (REVIEW, "cases: [{id: one, inputs: {note: hi}}]",
     "cases: [{id: one, inputs: {note: hi}, checks: [{contains: {all: [hi]}}]}]", "cases[0].checks",
     "a review skill's verdict is its rubric's"),
])
def test_handler_and_review_rules(project: Path, text: str, old: str, new: str, field: str, problem: str) -> None:
    assert old in text
    with pytest.raises(HarnessConfigError) as error:
        load(project, text.replace(old, new))
    assert (error.value.field, problem in error.value.problem) == (field, True), error.value.message()


def test_a_skill_loads_field_for_field(project: Path) -> None:
    review = load(project, REVIEW.replace("evaluation_model: mock/echo}", "evaluation_model: mock/echo, "
                                          "include_criteria_details: true}\npolicy: {timeout_s: 30}"))
    assert (review.template_type, review.review.rubric_id, review.review.evaluation_model.model,
            review.review.include_criteria_details, review.review.evaluation_model.timeout_s) == (
        "LLM_REVIEW", "tone-review", "mock/echo", True, 30.0)
    assert review.output_schema is None and review.implementation is None  # a review's output is the ReviewResult
    handler = load(project, HANDLER + "produces_artifacts: [greeting, {name: all, path: $}]\n"
                                      "observability: {record_raw_response: false}\n")
    assert handler.implementation.function({"name": "Ada"}) == {"greeting": "Ada"}
    assert [(a.name, a.path) for a in handler.produces_artifacts] == [("greeting", ("greeting",)), ("all", ())]
    assert handler.observability.record_raw_response is False and handler.policy.threshold == 1.0
    generation = load(project, GENERATION.replace("model: mock/echo}", "model: mock/echo, temperature: 0.3, "
                                                  "max_tokens: 99, retry_on_validation_failure: false}"))
    settings = generation.generation.model
    assert (settings.model, settings.temperature, settings.max_tokens) == ("mock/echo", 0.3, 99)
    assert generation.generation.retry_on_validation_failure is False
    assert [c.id for c in generation.cases] == ["ada"] and generation.cases[0].agent == "greeter"


def test_a_dataset_gives_a_skill_its_items(project: Path) -> None:
    (project / "skills" / "names.jsonl").write_text('{"who": "Ada"}\n{"who": "Grace"}\n')
    skill = load(project, GENERATION.split("cases:")[0]
                 + 'dataset: {file: names.jsonl, id: "{who}", inputs: {name: "{who}"}}\n')
    assert [(c.id, c.inputs) for c in skill.cases] == [("Ada", {"name": "Ada"}), ("Grace", {"name": "Grace"})]


def test_the_demo_descriptors_keep_the_shipped_contract() -> None:
    found = sorted((REPO / "skills").glob("*.skill.yaml"))
    assert len(found) == 3
    for path in found:
        assert contract_errors("skill_descriptor", load_yaml(path)) == [], path.name
    broken = load_yaml(found[0])
    broken["template_type"] = "LLM_SUMMARY"
    assert contract_errors("skill_descriptor", broken)


def test_validation_errors_read_as_json_pointers() -> None:
    assert schema_error("key_points[2].text: missing") == {"instancePath": "/key_points/2/text", "message": "missing",
                                                           "path": "key_points[2].text"}
    assert schema_error("(root): no JSON object in the answer") == {
        "instancePath": "", "message": "no JSON object in the answer", "path": ""}
