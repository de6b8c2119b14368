"""``harness import promptfoo`` and ``harness import openai-evals``: the files they write load with the harness's
own loaders, the lines they print say what does not carry over, and the imported project runs under pytest
(offline: the producer and the judge are scripted mock models)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.apps.cli import main
from harness.apps.importers.openai_evals import verdict_pattern
from harness.base.errors import ExitCode
from harness.testing.fake_anthropic import FakeAnthropic
from harness.testing.fake_anthropic import Reply as AnthropicReply
from harness.testing.fake_openai import FakeOpenAI
from harness.testing.fake_openai import Reply as OpenAIReply
from harness.testing.fake_openai import judge_responder as openai_judge
from harness.loading import load_cases, load_rubric, load_suite

# --- helpers -------------------------------------------------------------------------------------

# Scripted models for the imported projects (a conftest.py of the project registers them with @mock_model).
MOCKS = '''\
import json
import re

from harness.llm.providers.mock import mock_model
from harness.llm.schema_fill import evaluator_output


def _last(request):
    return next(m.text for m in reversed(request.messages) if m.role == "user")


@mock_model("translator")
def translator(request):
    text = _last(request)
    return "Bonjour le monde" if "French" in text else "Claro: ¿Dónde está la biblioteca?"


@mock_model("fruit-json")
def fruit_json(request):
    text = _last(request)
    if "Banana" in text:
        return json.dumps({"color": "yellow", "countries": ["Ecuador"]})
    return json.dumps({"color": "purple", "countries": ["Brazil", "India"]})


@mock_model("answers")
def answers(request):
    text = _last(request)
    if "France" in text:
        return "Paris"
    if "Hamlet" in text:
        return "Shakespeare wrote it"
    return "A short title"


@mock_model("fact-judge")
def fact_judge(request):
    """Reasons, then puts the choice on the last lines: C when the submission names the expert answer."""
    text = _last(request)
    expert = re.search(r"\\[Expert\\]: (.*)", text)[1]
    submission = re.search(r"\\[Submission\\]: (.*)", text)[1]
    same = any(word.strip('"[],') in submission for word in expert.split())
    return "The submission is compared with the expert answer.\\n" + ("C\\nC" if same else "D\\nD")


@mock_model("closedqa-judge")
def closedqa_judge(request):
    """Y for the conciseness criterion, N for any other."""
    text = _last(request)
    return "Reasoning: the title is short.\\n" + ("Y\\nY" if "concise" in text else "N\\nN")
'''


def run_import(*argv: str) -> tuple[int, list[str], str]:
    """``harness import ...``: the exit code, the printed lines and the error output."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["import", *argv])
    return code, out.getvalue().splitlines(), err.getvalue()


def write(root: Path, relpath: str, text: str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_all(root: Path, suite: str) -> tuple[Any, Any, dict[str, list[Any]]]:
    """The imported suite read with the harness's own loaders: (rubric, suite, cases by case file name)."""
    suite_path = root / "suites" / suite / "agents.yaml"
    config = load_suite(suite_path, rubrics_dir=root / "rubrics", runner_kinds=("prompt", "template", "python",
                                                                                "command"), input_roots=(root,))
    rubric_paths = {agent.rubric_path for agent in config.agents.values()}
    assert len(rubric_paths) == 1
    rubric = load_rubric(rubric_paths.pop(), import_root=root)
    cases = {p.name: load_cases(p, agents=config.agents, input_roots=(root,))
             for p in sorted(suite_path.parent.glob("*.cases.yaml"))}
    return rubric, config, cases


def set_models(path: Path, model: str, judge: str | None = None) -> None:
    """Point an imported agents.yaml at scripted mock models (every variant's, when the providers are variants)."""
    data = read_yaml(path)
    data["model"] = {"model": model}
    for agent in data["agents"].values():
        if "model" in agent.get("variants", {}):
            agent["variants"]["model"] = {name: model for name in agent["variants"]["model"]}
    if judge is not None:
        data["judge"] = {"model": judge}
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


@pytest.fixture
def here(project: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The project, as the current folder (the import prints paths relative to it)."""
    monkeypatch.chdir(project.root)
    project.write("conftest.py", MOCKS)
    return project


# --- promptfoo: getting started ------------------------------------------------------------------

GETTING_STARTED = """\
    description: 'Getting started'
    prompts:
      - 'Convert this English to {{language}}: {{input}}'
      - 'Translate to {{language}}: {{input}}'
    providers:
      - openai:gpt-4.1-mini
      - anthropic:messages:claude-sonnet-4-6
    tests:
      - vars:
          language: French
          input: Hello world
        assert:
          - type: contains
            value: 'Bonjour le monde'
          - type: javascript
            value: output.length < 100
      - description: Spanish, judged
        vars:
          language: Spanish
          input: Where is the library?
        assert:
          - type: icontains
            value: 'Dónde está la biblioteca'
          - type: llm-rubric
            value: Is a faithful Spanish translation of "{{input}}"
            weight: 2
"""


def test_promptfoo_getting_started_writes_a_suite_that_loads(here: Any) -> None:
    write(here.root, "promptfoo/promptfooconfig.yaml", GETTING_STARTED)
    code, lines, err = run_import("promptfoo", "promptfoo/promptfooconfig.yaml", "--out", ".")
    assert code == 0, err
    assert err == ""
    suite = "suites/getting_started"
    assert [line for line in lines if line.startswith("wrote ")] == [
        "wrote rubrics/getting_started.yaml", f"wrote {suite}/agents.yaml", f"wrote {suite}/judges/llm-rubric.txt",
        f"wrote {suite}/prompts/prompt_1.txt", f"wrote {suite}/prompts/prompt_2.txt",
        f"wrote {suite}/getting_started.cases.yaml"]
    assert not [line for line in lines if line.startswith("not carried over: providers")]  # both providers run
    assert ("not carried over: tests[0].assert[1] (javascript): JavaScript does not run here; write it as a "
            "`python: module:function` check in the rubric (or in a case, once ini harness_data_modules lists its "
            "module): it gets the artifact and returns a score, (score, reason) or {score, reason, fixes}") in lines
    assert lines[-1] == f"next: pytest {suite} --collect-only"
    assert "wrote pytest.ini" not in lines  # the project has its own
    assert ("note: vars named input are written {{ inputs.NAME }}: the bare names are the harness's own slots"
            ) in lines

    root = here.root
    # {{input}} is the var here, as in promptfoo: the bare name is the harness's slot of all inputs
    assert (root / suite / "prompts/prompt_1.txt").read_text() == (
        "Convert this English to {{language}}: {{inputs.input}}\n")
    judge = (root / suite / "judges/llm-rubric.txt").read_text()
    assert judge.startswith("You are grading output according to a user-specified rubric.")
    assert "<Output>\n{{ output }}\n</Output>\n<Rubric>\n{{ rubric }}\n</Rubric>" in judge
    agents_text = (root / suite / "agents.yaml").read_text()
    assert "# judges/llm-rubric.txt: promptfoo's llm-rubric grading prompt" in agents_text
    agents = read_yaml(root / suite / "agents.yaml")
    assert "model" not in agents  # each provider is a variant's model
    assert agents["defaults"] == {"max_attempts": 1, "escalate_on_fail": False}
    agent = agents["agents"]["getting_started"]
    # promptfoo's grid: 2 prompts x 2 providers, each test run on every pair
    assert agent["variants"] == {
        "producer": {"prompt_1": {"template": "prompts/prompt_1.txt"}, "prompt_2": {"template": "prompts/prompt_2.txt"}},
        "model": {"gpt-4.1-mini": "openai/gpt-4.1-mini", "claude-sonnet-4-6": "claude-sonnet-4-6"}}
    assert agent["evaluator"] == {
        "template": "judges/llm-rubric.txt", "slots": {"output": "output", "rubric": "criteria"}}

    cases = read_yaml(root / suite / "getting_started.cases.yaml")
    assert cases["agent"] == "getting_started"
    first, second = cases["cases"]
    assert first["inputs"] == {"language": "French", "input": "Hello world"}
    assert first["checks"] == [{"id": "contains", "check": {"contains": {"all": ["Bonjour le monde"],
                                                                         "case_sensitive": True}},
                                "weight": 1, "min_score": 1}]
    assert "criteria" not in first
    assert second["description"] == "Spanish, judged"
    levels = {1: "the statement in the rubric is true of the output (pass)",
              0: "the statement in the rubric is not true of the output (fail)"}
    assert second["criteria"] == [{"id": "llm_rubric", "description": 'Is a faithful Spanish translation of '
                                   '"{{inputs.input}}"', "scoring": levels, "exhaustive": True, "weight": 2,
                                   "min_score": 1}]

    rubric, config, loaded = load_all(root, "getting_started")
    assert rubric.threshold == 0 and rubric.dimensions == ()
    assert sorted(config.agents) == ["getting_started"]
    variants = config.agents["getting_started"].variants
    assert [v.variant for v in variants] == ["prompt_1+gpt-4.1-mini", "prompt_1+claude-sonnet-4-6",
                                             "prompt_2+gpt-4.1-mini", "prompt_2+claude-sonnet-4-6"]
    assert variants[1].models["producer"].model == "claude-sonnet-4-6"
    assert variants[2].templates["producer"].path.name == "prompt_2.txt"
    assert variants[0].templates["evaluator"].slot_for("rubric") == "criteria"
    spanish = loaded["getting_started.cases.yaml"][1]
    assert [d.id for d in spanish.checks] == ["icontains"] and [d.id for d in spanish.criteria] == ["llm_rubric"]
    assert spanish.criteria[0].min_score == 1 and spanish.criteria[0].exhaustive

    result = here.run("--collect-only", "-q", suite)
    assert result.ret == 0, result.stdout.str()
    assert f"{suite}/getting_started.cases.yaml::test-2[prompt_2+claude-sonnet-4-6]" in result.stdout.str()
    assert "8 tests collected" in result.stdout.str()


def test_promptfoo_getting_started_runs_offline(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", GETTING_STARTED)
    code, _, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == 0, err
    set_models(here.root / "suites/getting_started/agents.yaml", "mock/translator", "mock/score-1")
    result = here.run("suites/getting_started")
    result.assert_outcomes(passed=8)  # 2 tests x 2 prompts x 2 providers
    result.stdout.fnmatch_lines(["getting_started: 4 variants x 2 cases*",
                                 "  prompt_1+claude-sonnet-4-6 * 2 * 2 *100% [[]34%, 100%[]] of 2*"])

    # the judge says fail: the judged tests fail on their criterion's min_score, the others still pass
    result = here.run("suites/getting_started", "--harness-judge-model", "mock/score-0")
    result.assert_outcomes(passed=4, failed=4)
    assert "llm_rubric" in result.stdout.str()


def test_promptfoo_two_providers_and_a_grader_on_a_third_run_as_a_grid_through_the_sdks(
        here: Any, fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic) -> None:
    # promptfoo's grid: each prompt on each provider, llm-rubric graded by defaultTest.options.provider; here the
    # two providers and the grader are three models on the fake OpenAI and Anthropic servers, reached by the SDKs
    config = GETTING_STARTED.replace("    tests:\n", "    defaultTest:\n      options:\n        provider: "
                                                  "openai:chat:gpt-4.1\n    tests:\n", 1)
    config = config.replace("anthropic:messages:claude-sonnet-4-6", "anthropic:messages:claude-haiku-4-5")
    write(here.root, "promptfooconfig.yaml", config)
    code, _, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == 0, err
    agents = read_yaml(here.root / "suites/getting_started/agents.yaml")
    assert agents["judge"] == {"model": "openai/gpt-4.1"}
    assert agents["agents"]["getting_started"]["variants"]["model"] == {
        "gpt-4.1-mini": "openai/gpt-4.1-mini", "claude-haiku-4-5": "claude-haiku-4-5"}

    grade = openai_judge()
    def translate(text: str) -> str:  # the haiku model gets Spanish wrong, the mini model gets it right
        return "Bonjour le monde" if "French" in text else "¿Dónde está la biblioteca?"

    fake_openai.responder = lambda request: (
        grade(request) if request["model"] == "gpt-4.1" else
        OpenAIReply.text(translate(json.dumps(request["messages"]))))
    fake_anthropic.responder = lambda request: AnthropicReply.text(
        "Bonjour le monde" if "French" in json.dumps(request["messages"]) else "Hola")
    result = here.run("suites/getting_started")
    result.assert_outcomes(passed=6, failed=2)  # the haiku model's Spanish fails the icontains check, both prompts
    graded = [r for r in fake_openai.requests if r["model"] == "gpt-4.1"]
    produced = {r["model"] for r in fake_openai.requests} - {"gpt-4.1"}
    # the judged test, graded on the 2 variants whose answer passed its check (the others failed before judging)
    assert produced == {"gpt-4.1-mini"} and len(graded) == 2
    assert {r["model"] for r in fake_anthropic.requests} == {"claude-haiku-4-5"}
    # ranked by pass rate: the failed items have no score, and must not make the haiku variants look best
    result.stdout.fnmatch_lines(["getting_started: 4 variants x 2 cases*",
                                 "  prompt_1+gpt-4.1-mini *2 *2 *100%*",
                                 "  prompt_2+gpt-4.1-mini *2 *2 *100%*",
                                 "  prompt_1+claude-haiku-4-5 *2 *1 *50%*",
                                 "  prompt_2+claude-haiku-4-5 *2 *1 *50%*",
                                 "  each against the best (prompt_1+gpt-4.1-mini)*",
                                 "    prompt_2+gpt-4.1-mini vs prompt_1+gpt-4.1-mini: *the same verdict on all 2*",
                                 "    prompt_1+claude-haiku-4-5 vs prompt_1+gpt-4.1-mini: *verdicts 0 better, 1 worse*"])


# --- promptfoo: JSON output with transforms -------------------------------------------------------

JSON_OUTPUT = """\
    description: 'JSON object evals'
    prompts:
      - 'Output a JSON object that contains the keys `color` and `countries`, describing the following object: {{item}}'
    providers:
      - openai:chat:gpt-4.1-mini
    tests:
      - vars:
          item: Banana
        assert:
          - type: is-json
          - type: javascript
            value: JSON.parse(output).color === 'yellow' && JSON.parse(output).countries.includes('Ecuador')
      - vars:
          item: Passion fruit
        options:
          transform: JSON.parse(output)
        assert:
          - type: is-json
            value:
              required: ['color', 'countries']
              type: object
              properties:
                color: {type: string}
                countries: {type: array, items: {type: string}}
          - type: javascript
            value: output.color === 'purple' && output.countries.includes('Brazil')
          - type: contains-any
            transform: output.countries
            value: [Guatemala, Costa Rica, India, Indonesia]
"""


def test_promptfoo_json_output_keeps_json_checks_and_json_path_transforms(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", JSON_OUTPUT)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == 0, err
    carried = [line for line in lines if line.startswith("not carried over:")]
    assert [line.split(":")[1].strip() for line in carried] == ["tests[0].assert[1] (javascript)",
                                                                "tests[1].assert[1] (javascript)"]
    suite = here.root / "suites/json_object_evals"
    assert not (suite / "judges").exists()  # nothing is judged: no evaluator
    agents = read_yaml(suite / "agents.yaml")
    assert agents["model"] == {"model": "openai/gpt-4.1-mini"}
    assert "evaluator" not in agents["agents"]["prompt_1"]
    banana, passion = read_yaml(suite / "prompt_1.cases.yaml")["cases"]
    assert banana["checks"] == [{"id": "is_json", "check": {"json_schema": {"schema": {}, "source": "text"}},
                                 "weight": 1, "min_score": 1}]
    is_json, contains_any = passion["checks"]
    assert is_json["check"]["json_schema"]["schema"]["required"] == ["color", "countries"]
    assert "transform" not in is_json  # JSON.parse(output) needs none: the JSON checks parse the artifact
    assert contains_any == {"id": "contains_any", "check": {"contains": {"any": ["Guatemala", "Costa Rica", "India",
                                                                                 "Indonesia"],
                                                                         "case_sensitive": True}},
                            "weight": 1, "min_score": 1, "transform": {"json_path": "countries"}}

    _, _, loaded = load_all(here.root, "json_object_evals")
    assert loaded["prompt_1.cases.yaml"][1].checks[1].transform is not None

    set_models(suite / "agents.yaml", "mock/fruit-json")
    result = here.run("suites/json_object_evals")
    result.assert_outcomes(passed=2)


def test_promptfoo_default_transform_becomes_the_rubrics_and_javascript_transforms_do_not_carry(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", """\
        prompts: ['Answer {{q}} as JSON']
        providers: [openai:gpt-4.1-mini]
        defaultTest:
          options:
            transform: JSON.parse(output).answer
          assert:
            - type: equals
              value: '{{expected}}'
        tests:
          - vars: {q: 'two plus two', expected: '4'}
            options:
              transform: output.trim()
          - vars: {q: 'three', expected: '3'}
            assert:
              - type: contains
                transform: output.toUpperCase()
                value: '3'
    """)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "math")
    assert code == 0, err
    rubric = read_yaml(here.root / "rubrics/math.yaml")
    assert rubric["transform"] == {"json_path": "answer"}
    assert rubric["dimensions"] == {"equals": {"weight": 1, "description": "promptfoo equals: {{inputs.expected}}",
                                               "check": {"equals": {"value": "{{inputs.expected}}",
                                                                    "normalize": False}},
                                               "min_score": 1}}
    assert ("not carried over: tests[0].options.transform (JavaScript): `output.trim()` does not run here; write a "
            "`transform: module:function` in Python in the rubric (or on a case's check, once ini "
            "harness_data_modules lists its module)") in lines
    assert ("not carried over: tests[1].assert[0].transform (JavaScript): `output.toUpperCase()` does not run here; "
            "write a `transform: module:function` in Python in the rubric (or on a case's check, once ini "
            "harness_data_modules lists its module)") in lines
    cases = read_yaml(here.root / "suites/math/prompt_1.cases.yaml")["cases"]
    assert "checks" not in cases[1]  # its one assert needed the transform that did not carry over
    load_all(here.root, "math")


# --- promptfoo: self-grading ----------------------------------------------------------------------

SELF_GRADING = """\
    prompts:
      - file://prompts.txt
    providers:
      - openai:chat:gpt-4.1
    defaultTest:
      assert:
        - type: llm-rubric
          value: Do not mention that you are an AI or chat assistant
        - type: javascript
          # Shorter is better
          value: Math.max(0, Math.min(1, 1 - (output.length - 100) / 900));
    tests:
      - vars:
          name: Bob
          question: Can you help me find a specific product on your website?
      - vars:
          name: Jane
          question: Do you have any promotions or discounts currently available?
"""

SELF_GRADING_PROMPTS = """\
    You're an ecommerce chat assistant for a shoe company.
    Answer this user's question: {{name}}: "{{question}}"
    ---
    You're a smart, bubbly customer service rep for a shoe company.
    Answer this user's question: {{name}}: "{{question}}"
"""


def test_promptfoo_self_grading_puts_default_asserts_in_the_shared_rubric(here: Any) -> None:
    write(here.root, "grading/promptfooconfig.yaml", SELF_GRADING)
    write(here.root, "grading/prompts.txt", SELF_GRADING_PROMPTS)
    code, lines, err = run_import("promptfoo", "grading/promptfooconfig.yaml", "--name", "shoes")
    assert code == 0, err
    assert ("not carried over: defaultTest.assert[1] (javascript): JavaScript does not run here; write it as a "
            "`python: module:function` check in the rubric (or in a case, once ini harness_data_modules lists its "
            "module): it gets the artifact and returns a score, (score, reason) or {score, reason, fixes}") in lines
    assert any(line.startswith("note: the judge is the harness's default model") for line in lines)
    suite = here.root / "suites/shoes"
    assert sorted(p.name for p in (suite / "prompts").iterdir()) == ["prompts_1.txt", "prompts_2.txt"]
    assert (suite / "prompts/prompts_2.txt").read_text().startswith("You're a smart, bubbly customer service rep")
    rubric = read_yaml(here.root / "rubrics/shoes.yaml")
    assert rubric["threshold"] == 0
    assert rubric["dimensions"] == {"llm_rubric": {
        "weight": 1, "description": "Do not mention that you are an AI or chat assistant",
        "scoring": {1: "the statement in the rubric is true of the output (pass)",
                    0: "the statement in the rubric is not true of the output (fail)"},
        "exhaustive": True, "min_score": 1}}
    cases = read_yaml(suite / "shoes.cases.yaml")["cases"]
    assert [c["inputs"]["name"] for c in cases] == ["Bob", "Jane"]
    assert all("checks" not in c and "criteria" not in c for c in cases)

    loaded_rubric, config, _ = load_all(here.root, "shoes")
    assert [d.id for d in loaded_rubric.judged_dimensions] == ["llm_rubric"]
    assert [v.variant for v in config.agents["shoes"].variants] == ["prompts_1", "prompts_2"]  # one provider
    assert config.agents["shoes"].evaluator is not None

    set_models(suite / "agents.yaml", "mock/echo", "mock/score-1")
    here.run("suites/shoes").assert_outcomes(passed=4)
    here.run("suites/shoes", "--harness-judge-model", "mock/score-0").assert_outcomes(failed=4)


def test_promptfoo_csv_tests_nunjucks_and_literal_braces(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", """\
        prompts:
          - raw: 'Reply as JSON like {answer} to {{ question | trim }} for {{name}}'
            label: Support reply
        providers:
          - id: openai:gpt-4.1-mini
            config: {temperature: 0.2, max_tokens: 300, seed: 7}
          - vertex:gemini-2.5-pro
        tests: file://tests.csv
    """)
    write(here.root, "tests.csv", """\
        name,question,__expected1,__expected2,__description
        Ann,Where is my order?,contains: order,similar(0.7): Your order is on its way,order status
        Bo,Refund?,grade: Offers a refund politely,Refund accepted,refund
    """)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "support")
    assert code == 0, err
    assert ("not carried over: prompts[0] (nunjucks): `{{ question | trim }}`: template tags, filters and "
            "expressions do not run here; the text stays as written; compute the value into a var of each test"
            ) in lines
    assert ("not carried over: prompts[0] (braces): `{answer}` is text in promptfoo but a slot here; it is written "
            "`{ answer }`") in lines
    assert "not carried over: providers[0].config: seed: no counterpart in `model:`" in lines
    assert any(line.startswith("not carried over: providers[1] (vertex:gemini-2.5-pro)") for line in lines)
    suite = here.root / "suites/support"
    assert (suite / "prompts/support_reply.txt").read_text() == (
        "Reply as JSON like { answer } to {{ question | trim }} for {{name}}\n")
    assert read_yaml(suite / "agents.yaml")["model"] == {"model": "openai/gpt-4.1-mini", "temperature": 0.2,
                                                         "max_tokens": 300}
    ann, bo = read_yaml(suite / "support_reply.cases.yaml")["cases"]
    assert ann["description"] == "order status" and ann["inputs"] == {"name": "Ann", "question": "Where is my order?"}
    assert [c["check"] for c in ann["checks"]] == [
        {"contains": {"all": ["order"], "case_sensitive": True}},
        {"similar": {"value": "Your order is on its way", "threshold": 0.7}}]
    assert bo["checks"][0]["check"] == {"equals": {"value": "Refund accepted", "normalize": False}}
    assert bo["criteria"][0]["description"] == "Offers a refund politely"
    load_all(here.root, "support")


def test_promptfoo_judged_kinds_and_not_carried_asserts(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", """\
        prompts: ['Answer: {{q}}']
        providers: [anthropic:messages:claude-haiku-4-5]
        defaultTest:
          options:
            provider: openai:gpt-4.1
        tests:
          - vars: {q: 'Capital of France?'}
            assert:
              - type: factuality
                value: Paris is the capital of France
              - type: model-graded-closedqa
                value: names a city
              - type: g-eval
                value: Coherence of the answer
                threshold: 0.8
              - type: not-contains
                value: London
              - type: starts-with
                value: 'Paris ('
              - type: regex
                value: '^\\w+'
              - type: levenshtein
                value: Paris
                threshold: 2
              - type: cost
                threshold: 0.01
              - type: latency
                threshold: 500
              - type: python
                value: file://check.py
              - type: rouge-n
                value: Paris
    """)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "kinds")
    assert code == 0, err
    carried = {m[1]: m[2] for line in lines if (m := re.match(r"not carried over: tests\[0\]\.assert\[(\d+)\] "
                                                              r"\(([\w-]+)\)", line))}
    assert carried == {"0": "factuality", "1": "model-graded-closedqa", "2": "g-eval", "6": "levenshtein",
                       "7": "cost", "8": "latency", "9": "python", "10": "rouge-n"}
    assert ("not carried over: tests[0].assert[7] (cost): the run record keeps every model call's cost, but there "
            "is no cost gate per test; cap a run's spend with --harness-max-cost USD") in lines
    agents = read_yaml(here.root / "suites/kinds/agents.yaml")
    assert agents["model"] == {"model": "claude-haiku-4-5"}
    assert agents["judge"] == {"model": "openai/gpt-4.1"}
    # choices and scales need the whole rubric text, not one line per criterion
    assert agents["agents"]["prompt_1"]["evaluator"]["slots"] == {"output": "output"}
    case = read_yaml(here.root / "suites/kinds/prompt_1.cases.yaml")["cases"][0]
    criteria = {c["id"]: c for c in case["criteria"]}
    assert criteria["factuality"]["choices"]["D"]["score"] == 0
    assert criteria["factuality"]["choices"]["A"]["score"] == 1
    assert set(criteria["model_graded_closedqa"]["choices"]) == {"Y", "N"}
    assert criteria["g_eval"]["scale"] == [0, 10] and criteria["g_eval"]["min_score"] == 0.8
    checks = {c["id"]: c["check"] for c in case["checks"]}
    assert checks["not_contains"] == {"banned_phrases": {"phrases": ["London"], "case_sensitive": True}}
    assert checks["starts_with"] == {"regex": {"pattern": r"\AParis\ \("}}
    assert checks["levenshtein"] == {"similar": {"value": "Paris", "threshold": 0.6}}
    load_all(here.root, "kinds")


# --- promptfoo: what the command refuses --------------------------------------------------------


def test_promptfoo_bad_input_is_one_line_naming_the_file_and_field(here: Any) -> None:
    code, lines, err = run_import("promptfoo", "missing.yaml")
    assert code == ExitCode.USAGE_ERROR
    assert err.count("\n") == 1 and err.startswith("harness: missing.yaml: cannot read file")

    write(here.root, "promptfooconfig.yaml", "prompts: ['hi {{x}}']\ntests:\n  - vars: {x: 1}\n    assert:\n"
          "      - value: no type\n")
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == ExitCode.USAGE_ERROR
    assert err == ("harness: promptfooconfig.yaml: tests[0].assert[0].type: missing (fix: add `type: contains` (or "
                   "another type))\n")
    assert lines == [] and not (here.root / "suites").exists()

    write(here.root, "promptfooconfig.yaml", "providers: [openai:gpt-4.1]\n")
    code, _, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == ExitCode.USAGE_ERROR and "promptfooconfig.yaml: prompts: missing" in err

    write(here.root, "promptfooconfig.yaml", "prompts: [a: [b\n")
    code, _, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == ExitCode.USAGE_ERROR and re.match(r"harness: promptfooconfig.yaml: line \d+: .*\(fix: fix the "
                                                     r"YAML syntax\)\n\Z", err)
    assert "Traceback" not in err


def test_promptfoo_never_overwrites_without_force(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", GETTING_STARTED)
    assert run_import("promptfoo", "promptfooconfig.yaml")[0] == 0
    cases = here.root / "suites/getting_started/getting_started.cases.yaml"
    cases.write_text("# edited by hand\n", encoding="utf-8")
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == ExitCode.CANT_CREATE
    assert "rubrics/getting_started.yaml exists (and 5 more): nothing was written (fix: --force" in err
    assert cases.read_text() == "# edited by hand\n"
    code, lines, _ = run_import("promptfoo", "promptfooconfig.yaml", "--force")
    assert code == 0 and "wrote suites/getting_started/getting_started.cases.yaml" in lines
    assert cases.read_text().startswith("# The tests, as cases of getting_started")


def test_promptfoo_into_a_folder_without_pytest_config_writes_the_opt_in(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "promptfooconfig.yaml", GETTING_STARTED)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--out", "new")
    assert code == 0, err
    assert "wrote new/pytest.ini" in lines
    assert (tmp_path / "new/pytest.ini").read_text() == "[pytest]\nharness = true\n"


# --- openai/evals: fact, through its registry entry -----------------------------------------------

# The long lines of the published prompts (kept whole in the YAML below).
COMPARE = ("Compare the factual content of the submitted answer with the expert answer. Ignore any differences in "
           "style, grammar, or punctuation.")
CASES = ("The submitted answer may either be a subset or superset of the expert answer, or it may conflict with it. "
         "Determine which case applies. Answer the question by selecting one of the following options:")
COT = ("Does the submission meet the criterion? First, write out in a step by step manner your reasoning about the "
       "criterion to be sure that your conclusion is correct. Avoid simply stating the correct answers at the outset. "
       'Then print only the single character "Y" or "N" (without quotes or punctuation) on its own line corresponding '
       "to the correct answer. At the end, repeat just the letter again by itself on a new line.")

FACT_SPEC = """\
    fact:
      prompt: |-
        You are comparing a submitted answer to an expert answer on a given question. Here is the data:
        [BEGIN DATA]
        ************
        [Question]: {input}
        ************
        [Expert]: {ideal}
        ************
        [Submission]: {completion}
        ************
        [END DATA]

        @COMPARE@
        @CASES@
        (A) The submitted answer is a subset of the expert answer and is fully consistent with it.
        (B) The submitted answer is a superset of the expert answer and is fully consistent with it.
        (C) The submitted answer contains all the same details as the expert answer.
        (D) There is a disagreement between the submitted answer and the expert answer.
        (E) The answers differ, but these differences don't matter from the perspective of factuality.
      choice_strings: ABCDE
      input_outputs:
        input: completion
""".replace("@COMPARE@", COMPARE).replace("@CASES@", CASES)

FACT_REGISTRY = """\
    coqa-fact:
      id: coqa-fact.dev.v0
      metrics: [accuracy]
    coqa-fact.dev.v0:
      class: evals.elsuite.modelgraded.classify:ModelBasedClassify
      args:
        samples_jsonl: coqa/samples.jsonl
        eval_type: cot_classify
        modelgraded_spec: fact
"""

FACT_SAMPLES = [
    {"input": [{"role": "system", "content": "Answer briefly."},
               {"role": "user", "content": "What is the capital of France?"}], "ideal": "Paris"},
    {"input": [{"role": "user", "content": "Who wrote Hamlet?"}], "ideal": ["Shakespeare", "William Shakespeare"]},
    {"input": "What is 2 + 2?", "ideal": "4"},
]


def test_openai_evals_fact_registry_entry(here: Any) -> None:
    write(here.root, "evals/registry/modelgraded/fact.yaml", FACT_SPEC)
    write(here.root, "evals/registry/evals/coqa-ex.yaml", FACT_REGISTRY)
    write(here.root, "samples.jsonl", "".join(json.dumps(row) + "\n" for row in FACT_SAMPLES))
    code, lines, err = run_import("openai-evals", "evals/registry/evals/coqa-ex.yaml", "samples.jsonl")
    assert code == 0, err
    suite = "suites/coqa_fact"
    assert [line for line in lines if line.startswith("wrote ")] == [
        "wrote rubrics/coqa_fact.yaml", f"wrote {suite}/agents.yaml", f"wrote {suite}/judges/coqa_fact.txt",
        f"wrote {suite}/prompts/input.txt", f"wrote {suite}/data/coqa_fact.samples.jsonl",
        f"wrote {suite}/coqa_fact.cases.yaml"]
    assert ("not carried over: fact.yaml: fact.choice_scores: none given (openai/evals only counts the choices): "
            "scored as Braintrust's autoevals scores the fact spec (A 0.4, B 0.6, C 1, D 0, E 1); edit the choices "
            "in the rubric, or pass --choice-scores") in lines
    assert ("not carried over: samples.jsonl (chat input): the roles of 1 samples' messages: each input is written "
            "as one text (a system message first, then `User:` and `Assistant:` lines)") in lines
    assert ("note: the model under test is not in the spec (openai/evals takes it as completion_fns): set `model:` in "
            f"{suite}/agents.yaml") in lines

    root = here.root
    rubric = read_yaml(root / "rubrics/coqa_fact.yaml")
    choices = rubric["dimensions"]["fact"]["choices"]
    assert {label: c["score"] for label, c in choices.items()} == {"A": 0.4, "B": 0.6, "C": 1, "D": 0, "E": 1}
    assert choices["D"]["description"] == "There is a disagreement between the submitted answer and the expert answer."
    template = (root / suite / "judges/coqa_fact.txt").read_text()
    assert template.startswith("You are comparing a submitted answer to an expert answer on a given question.")
    assert "[Question]: {input}\n************\n[Expert]: {ideal}\n************\n[Submission]: {completion}" in template
    # the registry's eval_type appends openai/evals' answer prompt, its choices filled in
    assert template.endswith('Then print only a single choice from "A" or "B" or "C" or "D" or "E" (without quotes '
                             "or punctuation) on its own line corresponding to the correct answer. At the end, repeat "
                             "just the answer by itself on a new line.\n\nReasoning:\n")
    agents = read_yaml(root / suite / "agents.yaml")
    evaluator = agents["agents"]["coqa_fact"]["evaluator"]
    assert evaluator["slots"] == {"input": "inputs.input", "ideal": "expected", "completion": "output"}
    assert evaluator["verdict"] == verdict_pattern("cot_classify", list("ABCDE"))
    assert "# the model under test: openai/evals names it on its command line" in (root / suite / "agents.yaml"
                                                                                  ).read_text()
    assert (root / suite / "prompts/input.txt").read_text() == "{inputs.input}\n"
    rows = [json.loads(line) for line in (root / suite / "data/coqa_fact.samples.jsonl").read_text().splitlines()]
    assert rows[0] == {"input": "Answer briefly.\nUser: What is the capital of France?", "ideal": "Paris"}
    assert rows[1] == {"input": "Who wrote Hamlet?", "ideal": ["Shakespeare", "William Shakespeare"]}
    assert read_yaml(root / suite / "coqa_fact.cases.yaml") == {
        "agent": "coqa_fact", "dataset": {"file": "data/coqa_fact.samples.jsonl", "inputs": {"input": "{input}"},
                                          "expected": "{ideal}"}}

    loaded_rubric, config, cases = load_all(root, "coqa_fact")
    assert loaded_rubric.dimensions[0].choices == {"A": 0.4, "B": 0.6, "C": 1.0, "D": 0.0, "E": 1.0}
    assert config.agents["coqa_fact"].judge_style.verdict is not None
    assert [c.expected for c in cases["coqa_fact.cases.yaml"]] == ["Paris", ["Shakespeare", "William Shakespeare"],
                                                                   "4"]

    result = here.run("--collect-only", "-q", suite)
    assert "3 tests collected" in result.stdout.str()

    set_models(root / suite / "agents.yaml", "mock/answers", "mock/fact-judge")
    result = here.run(suite)
    result.assert_outcomes(passed=2, failed=1)  # 2 + 2 is answered "A short title": the judge says D
    assert "coqa_fact.cases.yaml::row-3" in "\n".join(line for line in result.outlines if "FAILED" in line)
    evals = sorted(here.work.glob("runs/*/coqa_fact/row-1/attempt-1.eval.json"))
    data = json.loads(evals[0].read_text())
    assert data["dimensionScores"]["fact"]["label"] == "C"
    assert "compared with the expert answer" in data["metadata"]["reasoning"]


def test_openai_evals_spec_without_eval_type_or_scores_is_refused(here: Any) -> None:
    write(here.root, "fact.yaml", FACT_SPEC)
    write(here.root, "samples.jsonl", json.dumps(FACT_SAMPLES[2]) + "\n")
    code, _, err = run_import("openai-evals", "fact.yaml", "samples.jsonl")
    assert code == ExitCode.USAGE_ERROR
    assert err == ("harness: fact.yaml: fact.eval_type: missing: openai/evals takes it from the registry entry (fix: "
                   "pass --eval-type cot_classify (or classify, classify_cot), or import the registry entry)\n")
    code, lines, err = run_import("openai-evals", "fact.yaml", "samples.jsonl", "--eval-type", "classify",
                                  "--choice-scores", "A=1,B=1,C=1,D=0,E=0.5")
    assert code == 0, err
    rubric = read_yaml(here.root / "rubrics/fact.yaml")
    assert {k: v["score"] for k, v in rubric["dimensions"]["fact"]["choices"].items()} == {
        "A": 1, "B": 1, "C": 1, "D": 0, "E": 0.5}
    agents = read_yaml(here.root / "suites/fact/agents.yaml")
    assert agents["agents"]["fact"]["evaluator"]["verdict"] == verdict_pattern("classify", list("ABCDE"))

    write(here.root, "humor.yaml", "humor:\n  prompt: 'Is this funny? {completion}'\n  choice_strings: [Yes, No]\n"
          "  eval_type: classify\n  input_outputs: {input: completion}\n")
    code, _, err = run_import("openai-evals", "humor.yaml", "samples.jsonl")
    assert code == ExitCode.USAGE_ERROR
    assert err.startswith("harness: humor.yaml: humor.choice_scores: missing: openai/evals only counts the choices")

    write(here.root, "bad.jsonl", '{"input": "a", "ideal": "b"}\nnot json\n')
    code, _, err = run_import("openai-evals", "fact.yaml", "bad.jsonl", "--eval-type", "classify", "--force")
    assert code == ExitCode.USAGE_ERROR
    assert err.startswith("harness: bad.jsonl: line 2: invalid JSON")


# --- openai/evals: closedqa, criteria per sample ---------------------------------------------------

CLOSEDQA_SPEC = """\
    closedqa:
      prompt: |-
        You are assessing a submitted answer on a given task based on a criterion. Here is the data:
        [BEGIN DATA]
        ***
        [Task]: {input}
        ***
        [Submission]: {completion}
        ***
        [Criterion]: {criteria}
        ***
        [END DATA]
        @COT@

        Reasoning:
      eval_type: cot_classify
      choice_scores:
        "Y": 1.0
        "N": 0.0
      choice_strings: 'YN'
      input_outputs:
        input: "completion"
""".replace("@COT@", COT)


def test_openai_evals_closedqa_with_criteria_per_sample(here: Any) -> None:
    write(here.root, "closedqa.yaml", CLOSEDQA_SPEC)
    write(here.root, "titles.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"input": "Write a title for: cats sleep a lot.", "criteria": "conciseness: Is the title concise?"},
        {"input": "Write a title for: dogs bark.", "criteria": "relevance: Does it name {the} dogs?"},
    ]))
    code, lines, err = run_import("openai-evals", "closedqa.yaml", "titles.jsonl")
    assert code == 0, err
    assert not [line for line in lines if line.startswith("not carried over")]
    root = here.root
    template = (root / "suites/closedqa/judges/closedqa.txt").read_text()
    assert template == yaml.safe_load(textwrap.dedent(CLOSEDQA_SPEC))["closedqa"]["prompt"] + "\n"
    evaluator = read_yaml(root / "suites/closedqa/agents.yaml")["agents"]["closedqa"]["evaluator"]
    assert evaluator["slots"] == {"input": "inputs.input", "completion": "output", "criteria": "inputs.criteria"}
    assert evaluator["verdict"] == r"(?m)^[^\w\n]*(Y|N)[^\w\n]*$"
    rubric = read_yaml(root / "rubrics/closedqa.yaml")
    assert rubric["dimensions"]["closedqa"]["choices"] == {"Y": {"score": 1}, "N": {"score": 0}}
    cases = read_yaml(root / "suites/closedqa/closedqa.cases.yaml")
    assert cases["dataset"] == {"file": "data/closedqa.samples.jsonl",
                                "inputs": {"input": "{input}", "criteria": "{criteria}"}}

    _, _, loaded = load_all(root, "closedqa")
    assert [c.inputs["criteria"] for c in loaded["closedqa.cases.yaml"]] == [
        "conciseness: Is the title concise?", "relevance: Does it name {the} dogs?"]

    set_models(root / "suites/closedqa/agents.yaml", "mock/answers", "mock/closedqa-judge")
    result = here.run("suites/closedqa")
    result.assert_outcomes(passed=1, failed=1)
    assert "closedqa.cases.yaml::row-2" in "\n".join(line for line in result.outlines if "FAILED" in line)


def test_openai_evals_literal_braces_and_spec_args(here: Any) -> None:
    write(here.root, "registry/modelgraded/json.yaml", """\
        scored:
          prompt: |-
            Grade {completion} by {criteria}. Answer as {{"grade": "Y"}} and never write {{answer}}.
          choice_strings: YN
          choice_scores: {"Y": 1, "N": 0}
          input_outputs: {input: completion}
    """)
    write(here.root, "registry/evals/scored.yaml", """\
        scored.dev.v0:
          class: evals.elsuite.modelgraded.classify:ModelBasedClassify
          args:
            eval_type: classify
            modelgraded_spec: scored
            modelgraded_spec_args: {criteria: "conciseness: Is it short?"}
            multicomp_n: 2
    """)
    write(here.root, "s.jsonl", '{"input": "Say hi"}\n')
    code, lines, err = run_import("openai-evals", "registry/evals/scored.yaml", "s.jsonl")
    assert code == 0, err
    template = (here.root / "suites/scored/judges/scored.txt").read_text()
    assert template.startswith('Grade {completion} by conciseness: Is it short?. Answer as {"grade": "Y"} and never '
                               "write { answer }.\n\nAnswer the question by printing only a single choice from")
    assert ("not carried over: json.yaml: scored.prompt (braces): `{{answer}}` is the text `{answer}` in openai/evals "
            "but would be a slot here; it is written `{ answer }`") in lines
    assert "not carried over: scored.yaml: scored.dev.v0.args.multicomp_n: no counterpart" in lines
    cases = read_yaml(here.root / "suites/scored/scored.cases.yaml")
    assert "expected" not in cases["dataset"]  # no {ideal} in the prompt, none in the samples
    load_all(here.root, "scored")


@pytest.mark.parametrize(("eval_type", "text", "choice"), [
    ("cot_classify", "Step one: A looks wrong.\nSo the answer is\nB\nB", "B"),
    ("cot_classify", "Reasoning...\n(C).\n", "C"),
    ("classify", "D. because it disagrees", "D"),
    ("classify_cot", "E\nBecause the differences do not matter.\nA is not it.", "E"),
])
def test_verdict_patterns_read_the_choice_where_the_eval_type_puts_it(eval_type: str, text: str,
                                                                      choice: str) -> None:
    matches = list(re.finditer(verdict_pattern(eval_type, list("ABCDE")), text))
    assert matches and matches[-1].group(1) == choice


# --- openai/evals: the basic classes ---------------------------------------------------------------


@pytest.mark.parametrize(("class_name", "check", "passed"), [
    ("evals.elsuite.basic.match:Match", {"equals": {"value": "{expected}", "normalize": False}}, 1),
    ("evals.elsuite.basic.includes:Includes", {"contains": {"any": "{expected}", "case_sensitive": True}}, 2),
    ("evals.elsuite.basic.fuzzy_match:FuzzyMatch",
     {"similar": {"value": "{expected}", "threshold": 0.8,
                  "normalize": ["case", "whitespace", "punctuation", "articles"]}}, 1),
])
def test_openai_evals_basic_classes_become_checks(here: Any, class_name: str, check: dict[str, Any],
                                                  passed: int) -> None:
    write(here.root, "registry/evals/qa.yaml", f"qa:\n  id: qa.dev.v0\nqa.dev.v0:\n  class: {class_name}\n"
          "  args: {samples_jsonl: qa/samples.jsonl}\n")
    write(here.root, "qa.jsonl", "".join(json.dumps(row) + "\n" for row in FACT_SAMPLES[:2]))
    code, lines, err = run_import("openai-evals", "registry/evals/qa.yaml", "qa.jsonl", "--eval", "qa")
    assert code == 0, err
    rubric = read_yaml(here.root / "rubrics/qa.yaml")
    (dimension,) = rubric["dimensions"].values()
    assert dimension["check"] == check
    suite = here.root / "suites/qa"
    assert not (suite / "judges").exists() and "evaluator" not in read_yaml(suite / "agents.yaml")["agents"]["qa"]
    if "Includes" in class_name:  # the check's `any` takes a list: every ideal is written as one
        assert json.loads((suite / "data/qa.samples.jsonl").read_text().splitlines()[0])["ideal"] == ["Paris"]
    load_all(here.root, "qa")
    set_models(suite / "agents.yaml", "mock/answers")
    result = here.run("suites/qa")
    result.assert_outcomes(passed=passed, failed=2 - passed)


def test_promptfoo_test_files_and_file_vars(here: Any) -> None:
    write(here.root, "eval/promptfooconfig.yaml", """\
        prompts: ['Summarise: {{doc}} in {{style}}']
        providers: [openai:gpt-4.1-mini]
        defaultTest:
          vars: {style: one line}
        tests:
          - file://tests.jsonl
          - file://more/*.yaml
    """)
    write(here.root, "eval/tests.jsonl", '{"vars": {"doc": "file://docs/a.txt"}, "assert": [{"type": "icontains-all", '
          '"value": ["cats", "sleep"]}]}\n')
    write(here.root, "eval/docs/a.txt", "Cats sleep a lot.\n")
    write(here.root, "eval/more/b.yaml", "- vars: {doc: Dogs bark., style: [one line, two lines]}\n"
          "  assert: [{type: not-icontains, value: cats}]\n")
    code, lines, err = run_import("promptfoo", "eval/promptfooconfig.yaml", "--name", "summaries")
    assert code == 0, err
    cases = read_yaml(here.root / "suites/summaries/prompt_1.cases.yaml")
    assert cases["inputs"] == {"style": "one line"}
    first, *dogs = cases["cases"]
    assert first["inputs"] == {"doc": {"file": "../../eval/docs/a.txt"}}
    assert first["checks"][0]["check"] == {"contains": {"all": ["cats", "sleep"], "case_sensitive": False}}
    assert [c["inputs"]["style"] for c in dogs] == ["one line", "two lines"]  # a list var: a case per value
    assert dogs[0]["checks"][0]["check"] == {"banned_phrases": {"phrases": ["cats"], "case_sensitive": False}}
    _, _, loaded = load_all(here.root, "summaries")
    assert loaded["prompt_1.cases.yaml"][0].inputs["doc"] == "Cats sleep a lot.\n"
    set_models(here.root / "suites/summaries/agents.yaml", "mock/echo")
    here.run("suites/summaries").assert_outcomes(passed=3)  # the echoed prompt holds the file's text
