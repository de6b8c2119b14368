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
from pathlib import Path

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


@mock_model("geval-judge")
def geval_judge(request):
    """G-Eval: its evaluation steps when it is asked for them (a list), then a rating: 4 for an answer naming Paris,
    else 2."""
    if request.tools:
        return {"answer": ["Read the answer.", "Check that it answers the question.", "Rate it from 1 to 5."]}
    return "It answers the question.\\nScore: " + ("4" if "Paris" in _last(request) else "2")


SENT = Path(__file__).parent / "sent.jsonl"


@mock_model("recorder")
def recorder(request):
    """Keeps what it is sent in sent.jsonl (its system prompt, its messages); a judge gets full marks, a producer
    the French or the capital the question asks for."""
    with SENT.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"system": "\\n\\n".join(filter(None, [request.cached_system_prefix, request.system])),
                                 "messages": [[m.role, m.text] for m in request.messages]}) + "\\n")
    forced = next((t.schema for t in request.tools if t.name == request.tool_choice), None)
    if forced is not None:
        return evaluator_output(forced, {}, 1.0, 0.0)
    if '"Y" or "N"' in _last(request):
        return "Y"
    return "Paris" if "France" in _last(request) else "Bonjour le monde"


@mock_model("battle-judge")
def battle_judge(request):
    """Prefers the shorter response: Yes when the first is shorter, after its reasoning."""
    text = _last(request)
    first = re.search(r"\\[Response 1\\]\\n(.*)", text)[1]
    second = re.search(r"\\[Response 2\\]\\n(.*)", text)[1]
    return "The shorter joke lands better.\\n" + ("Yes\\nYes" if len(first) < len(second) else "No\\nNo")
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
                                                                                "command", "steps"),
                        input_roots=(root,))
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
        "wrote rubrics/getting_started.yaml", f"wrote {suite}/agents.yaml", f"wrote {suite}/prompts/prompt_1.txt", f"wrote {suite}/prompts/prompt_2.txt",
        f"wrote {suite}/getting_started.cases.yaml"]
    assert not [line for line in lines if line.startswith("not carried over: providers")]  # both providers run
    assert ("not carried over: tests[0].assert[1] (javascript): JavaScript does not run here; the nearest check: "
            "`length: {max_chars: 99}`") in lines
    assert lines[-1] == f"next: pytest {suite} --collect-only"
    assert "wrote pytest.ini" not in lines  # the project has its own
    assert ("note: vars named input are written {{ inputs.NAME }}: the bare names are the harness's own slots"
            ) in lines

    root = here.root
    # {{input}} is the var here, as in promptfoo: the bare name is the harness's slot of all inputs
    assert (root / suite / "prompts/prompt_1.txt").read_text() == (
        "Convert this English to {{language}}: {{inputs.input}}\n")
    # promptfoo's llm-rubric judge is the library's: no template of the suite's own
    assert not (root / suite / "judges").exists()
    agents_text = (root / suite / "agents.yaml").read_text()
    assert "    # graders/llm-rubric: promptfoo's llm-rubric judge, from the library" in agents_text
    agents = read_yaml(root / suite / "agents.yaml")
    assert "model" not in agents  # each provider is a variant's model
    assert agents["defaults"] == {"max_attempts": 1, "escalate_on_fail": False}
    agent = agents["agents"]["getting_started"]
    # promptfoo's grid: 2 prompts x 2 providers, each test run on every pair
    assert agent["variants"] == {
        "producer": {"prompt_1": {"template": "prompts/prompt_1.txt"}, "prompt_2": {"template": "prompts/prompt_2.txt"}},
        "model": {"gpt-4.1-mini": "openai/gpt-4.1-mini", "claude-sonnet-4-6": "claude-sonnet-4-6"}}
    assert agent["evaluator"] == "graders/llm-rubric"

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
    judge = variants[0].templates["evaluator"]  # the library's chat template, in its two roles
    assert judge.path.name == "llm-rubric.chat.yaml" and judge.slot_for("rubric") == "criteria"
    assert [m.role for m in judge.messages] == ["system", "user"]
    assert judge.messages[0].content.startswith("You grade one output against a rubric")
    assert judge.messages[1].content == "<Output>\n{{ output }}\n</Output>\n<Rubric>\n{{ rubric }}\n</Rubric>"
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
        "Reply as JSON like { answer } to { { question | trim } } for {{name}}\n")  # an unknown filter, spaced
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
    # three kinds of judged assert and one evaluator: the library's llm-rubric judge, copied into the suite so that
    # its {rubric} is the whole rubric text (choices and scales need their levels), not one line per criterion
    assert agents["agents"]["prompt_1"]["evaluator"] == {"template": "judges/llm-rubric.yaml",
                                                         "slots": {"output": "output"}}
    from harness.loading.library import JUDGES_DIR

    assert read_yaml(here.root / "suites/kinds/judges/llm-rubric.yaml") == read_yaml(JUDGES_DIR / "llm-rubric.chat.yaml")
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
    assert "rubrics/getting_started.yaml exists (and 4 more): nothing was written (fix: --force" in err
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
        f"wrote {suite}/prompts/input.yaml", f"wrote {suite}/data/coqa_fact.samples.jsonl",
        f"wrote {suite}/coqa_fact.cases.yaml"]
    assert ("not carried over: fact.yaml: fact.choice_scores: none given (openai/evals only counts the choices): "
            "scored as Braintrust's autoevals scores the fact spec (A 0.4, B 0.6, C 1, D 0, E 1); edit the choices "
            "in the rubric, or pass --choice-scores") in lines
    # the chat inputs stay messages: a system message is the producer's system prompt, the user message its message
    assert ("note: samples.jsonl: the chat inputs stay messages: each sample's system message is the system prompt "
            f"and its user message the message ({suite}/prompts/input.yaml)") in lines
    assert not [line for line in lines if "(chat input)" in line]
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
    assert read_yaml(root / suite / "prompts/input.yaml") == [
        {"role": "system", "content": "{inputs.input_system}"}, {"role": "user", "content": "{inputs.input}"}]
    rows = [json.loads(line) for line in (root / suite / "data/coqa_fact.samples.jsonl").read_text().splitlines()]
    assert rows[0] == {"input": "What is the capital of France?", "input_system": "Answer briefly.", "ideal": "Paris"}
    assert rows[1] == {"input": "Who wrote Hamlet?", "input_system": "",
                       "ideal": ["Shakespeare", "William Shakespeare"]}
    assert rows[2] == {"input": "What is 2 + 2?", "ideal": "4", "input_system": ""}
    assert read_yaml(root / suite / "coqa_fact.cases.yaml") == {
        "agent": "coqa_fact", "dataset": {"file": "data/coqa_fact.samples.jsonl",
                                          "inputs": {"input": "{input}", "input_system": "{input_system}"},
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


# --- chat: promptfoo's llm-rubric judge in its roles, chat prompts, chat samples ------------------------------


def sent(project: Any) -> list[dict[str, Any]]:
    """What the recording mock model was sent, call by call: its system prompt and its messages."""
    path = project.root / "sent.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


LLM_RUBRIC = """\
    description: Rubric
    prompts: ['Translate to French: {{text}}']
    providers: [openai:gpt-4.1-mini]
    defaultTest:
      options:
        provider: openai:gpt-4.1
    tests:
      - vars: {text: Hello world}
        assert:
          - type: llm-rubric
            value: Is a faithful French translation
"""


def library_grading_system() -> str:
    """The system message of the library's llm-rubric judge: promptfoo's grading instructions, in our words."""
    from harness.loading.library import JUDGES_DIR

    system, _ = read_yaml(JUDGES_DIR / "llm-rubric.chat.yaml")
    return system["content"]


def test_promptfoo_llm_rubric_is_the_library_judge_offline_and_through_the_fake_server(
        here: Any, fake_openai: FakeOpenAI) -> None:
    grading_system = library_grading_system()
    write(here.root, "promptfooconfig.yaml", LLM_RUBRIC)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == 0, err
    assert not [line for line in lines if "judges/" in line]  # no template of the suite's own
    agents_path = here.root / "suites/rubric/agents.yaml"
    assert read_yaml(agents_path)["agents"]["prompt_1"]["evaluator"] == "graders/llm-rubric"
    graded = ("<Output>\nBonjour le monde\n</Output>\n<Rubric>\nllm_rubric: Is a faithful French translation\n"
              "</Rubric>")

    # through the OpenAI SDK: the instructions are the system message, the output and the rubric the user's
    def respond(request: dict[str, Any]) -> Any:
        return openai_judge()(request) if request["model"] == "gpt-4.1" else OpenAIReply.text("Bonjour le monde")

    fake_openai.responder = respond
    here.run("suites/rubric").assert_outcomes(passed=1)
    (judged,) = [r for r in fake_openai.requests if r["model"] == "gpt-4.1"]
    assert judged["messages"] == [{"role": "system", "content": grading_system}, {"role": "user", "content": graded}]

    # offline, on mock models: the same two messages
    set_models(agents_path, "mock/translator", "mock/recorder")
    here.run("suites/rubric").assert_outcomes(passed=1)
    assert sent(here) == [{"system": grading_system, "messages": [["user", graded]]}]
    here.run("suites/rubric", "--harness-judge-model", "mock/score-0").assert_outcomes(failed=1)


G_EVAL = """\
    description: Geval
    prompts: ['Answer: {{q}}']
    providers: [openai:gpt-4.1-mini]
    tests:
      - vars: {q: Capital of France?}
        assert:
          - {type: g-eval, value: The answer is correct and complete, threshold: 0.7}
      - vars: {q: Who wrote Hamlet?}
        assert:
          - {type: g-eval, value: The answer names the author in full}
          - {type: contains, value: Shakespeare}
"""


def test_promptfoo_g_eval_is_the_library_g_eval_its_steps_generated(here: Any) -> None:
    """Every model-graded assert a g-eval, one a test: judged by graders/g-eval, steps written from each criterion,
    then a rating from 1 to 5 scored (rating - 1) / 4: 4 is 0.75 (passes 0.7), 2 is 0.25 (fails it)."""
    write(here.root, "promptfooconfig.yaml", G_EVAL)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml")
    assert code == 0, err
    assert not [line for line in lines if "(g-eval)" in line or "judges/" in line]  # carried over, by the library
    agents = read_yaml(here.root / "suites/geval/agents.yaml")
    assert agents["agents"]["prompt_1"]["evaluator"] == "graders/g-eval"
    france, hamlet = read_yaml(here.root / "suites/geval/prompt_1.cases.yaml")["cases"]
    assert france["criteria"] == [{"id": "g_eval", "description": "The answer is correct and complete",
                                   "scale": [1, 5], "weight": 1, "min_score": 0.7}]
    assert hamlet["criteria"][0]["min_score"] == 0.7  # promptfoo's default threshold
    _, config, _ = load_all(here.root, "geval")
    assert config.agents["prompt_1"].evaluator.kind == "steps"

    set_models(here.root / "suites/geval/agents.yaml", "mock/answers", "mock/geval-judge")
    result = here.run("suites/geval")
    result.assert_outcomes(passed=1, failed=1)  # Paris rated 4; "Shakespeare wrote it" rated 2
    assert "test-2" in "\n".join(line for line in result.outlines if "FAILED" in line)
    (record,) = here.work.glob("runs/*/prompt_1/test-1/attempt-1.eval.json")
    scored = json.loads(record.read_text(encoding="utf-8"))["dimensionScores"]["g_eval"]
    assert scored["rating"] == 4 and scored["score"] == 0.75

    # two g-eval asserts in one test: one rating cannot score both, so the fallback judges them, and says so
    write(here.root, "promptfooconfig.yaml", G_EVAL.replace("- {type: contains, value: Shakespeare}",
                                                            "- {type: g-eval, value: The answer is short}"))
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "twice")
    assert code == 0, err
    assert sum("(g-eval): G-Eval's generated evaluation steps" in line for line in lines) == 3
    assert read_yaml(here.root / "suites/twice/agents.yaml")["agents"]["prompt_1"]["evaluator"] == {
        "template": "judges/llm-rubric.yaml", "slots": {"output": "output"}}
    assert read_yaml(here.root / "suites/twice/prompt_1.cases.yaml")["cases"][0]["criteria"][0]["scale"] == [0, 10]


def test_promptfoo_closedqa_is_the_library_closedqa_and_a_scored_llm_rubric_is_judged(here: Any) -> None:
    """Every model-graded assert a closed-QA one, one in every test: judged by graders/closedqa, each test's
    criterion (its vars filled in) its case's expected:. An llm-rubric with a threshold is a criterion scored 0-1."""
    write(here.root, "promptfooconfig.yaml", """\
        prompts: ['Write a title for: {{text}}']
        providers: [openai:gpt-4.1-mini]
        tests:
          - vars: {text: cats sleep a lot}
            assert: [{type: model-graded-closedqa, value: 'Is the title for "{{text}}" concise?'}]
          - vars: {text: dogs love walks}
            assert: [{type: model-graded-closedqa, value: Does the title rhyme?}]
    """)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "titles")
    assert code == 0, err
    assert not [line for line in lines if "(model-graded-closedqa)" in line]
    assert read_yaml(here.root / "suites/titles/agents.yaml")["agents"]["prompt_1"]["evaluator"] == "graders/closedqa"
    cats, dogs = read_yaml(here.root / "suites/titles/prompt_1.cases.yaml")["cases"]
    assert cats["expected"] == 'Is the title for "cats sleep a lot" concise?'
    assert dogs["expected"] == "Does the title rhyme?"
    assert set(cats["criteria"][0]["choices"]) == {"Y", "N"}
    set_models(here.root / "suites/titles/agents.yaml", "mock/answers", "mock/closedqa-judge")
    here.run("suites/titles").assert_outcomes(passed=1, failed=1)  # Y for conciseness, N for the rhyme

    write(here.root, "promptfooconfig.yaml", LLM_RUBRIC.replace("value: Is a faithful French translation",
                                                                "value: Is a faithful French translation\n"
                                                                "            threshold: 0.8"))
    code, _, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "scored")
    assert code == 0, err
    agents_path = here.root / "suites/scored/agents.yaml"
    assert read_yaml(agents_path)["agents"]["prompt_1"]["evaluator"] == "graders/llm-rubric"
    (case,) = read_yaml(here.root / "suites/scored/prompt_1.cases.yaml")["cases"]
    assert case["criteria"] == [{"id": "llm_rubric", "description": "Is a faithful French translation", "weight": 1,
                                 "min_score": 0.8}]  # a score from 0 to 1 against the threshold, not pass or fail
    set_models(agents_path, "mock/translator", "mock/score-0.9")
    here.run("suites/scored").assert_outcomes(passed=1)
    here.run("suites/scored", "--harness-judge-model", "mock/score-0.7").assert_outcomes(failed=1)


def test_promptfoo_chat_prompts_and_a_chat_rubric_prompt_become_chat_templates(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", """\
        prompts:
          - file://chat.json
          - label: inline
            raw: '[{"role": "system", "content": "Reply in French."}, {"role": "user", "content": "{{text}}"}]'
          - file://odd.jsonl
        providers: [openai:gpt-4.1-mini]
        defaultTest:
          options:
            rubricPrompt: file://grader.json
        tests:
          - vars: {text: Hello world}
            assert: [{type: llm-rubric, value: Is French}]
    """)
    write(here.root, "chat.json", json.dumps([
        {"role": "system", "content": "You translate into French."}, {"role": "user", "content": "Good night"},
        {"role": "assistant", "content": "Bonne nuit", "name": "example"}, {"role": "user", "content": "{{text}}"}]))
    write(here.root, "odd.jsonl", json.dumps([{"role": "user", "content": "{{text}}"},
                                              {"role": "assistant", "content": "Sure:"}]) + "\n")
    write(here.root, "grader.json", json.dumps([{"role": "system", "content": "Grade strictly."},
                                                {"role": "user", "content": "Output: {{output}}\nRubric: {{rubric}}"}]))
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "chats")
    assert code == 0, err
    suite = here.root / "suites/chats"
    assert read_yaml(suite / "prompts/chat.yaml") == [
        {"role": "system", "content": "You translate into French."}, {"role": "user", "content": "Good night"},
        {"role": "assistant", "content": "Bonne nuit"}, {"role": "user", "content": "{{text}}"}]
    assert ("not carried over: prompts[0] (chat prompt): the messages' name: a chat template's message has a role "
            "and a content only") in lines
    assert read_yaml(suite / "prompts/inline.yaml") == [{"role": "system", "content": "Reply in French."},
                                                        {"role": "user", "content": "{{text}}"}]
    # a chat that ends on the assistant's message is no chat template: written as text, and said so
    assert (suite / "prompts/odd_1.txt").read_text() == "user: {{text}}\n\nassistant: Sure:\n"
    assert any(line.startswith("not carried over: prompts[2] (odd.jsonl line 1) (chat prompt): the roles of its "
                               "messages: [1].role: the last message is an assistant message") for line in lines)
    assert read_yaml(suite / "judges/llm-rubric.yaml") == [
        {"role": "system", "content": "Grade strictly."}, {"role": "user", "content": "Output: {{output}}\n"
                                                                                      "Rubric: {{rubric}}"}]
    agents = read_yaml(suite / "agents.yaml")["agents"]["chats"]
    assert agents["variants"]["producer"] == {"chat": {"template": "prompts/chat.yaml"},
                                              "inline": {"template": "prompts/inline.yaml"},
                                              "odd_1": {"template": "prompts/odd_1.txt"}}
    assert agents["evaluator"]["template"] == "judges/llm-rubric.yaml"
    load_all(here.root, "chats")

    set_models(suite / "agents.yaml", "mock/recorder", "mock/recorder")
    here.run("suites/chats/chats.cases.yaml::test-1[chat]").assert_outcomes(passed=1)
    produced, judged = sent(here)
    assert produced == {"system": "You translate into French.", "messages": [
        ["user", "Good night"], ["assistant", "Bonne nuit"], ["user", "Hello world"]]}
    assert judged == {"system": "Grade strictly.", "messages": [
        ["user", "Output: Bonjour le monde\nRubric: llm_rubric: Is French"]]}


def test_promptfoo_javascript_asserts_name_the_nearest_check(here: Any) -> None:
    write(here.root, "promptfooconfig.yaml", """\
        prompts: ['Answer: {{q}}']
        providers: [openai:gpt-4.1-mini]
        tests:
          - vars: {q: 'Capital of France?'}
            assert:
              - {type: javascript, value: "output.includes('Paris')"}
              - {type: javascript, value: "!output.toLowerCase().includes('london')"}
              - {type: javascript, value: "/^[A-Z]/.test(output)"}
              - {type: javascript, value: "output.split(' ').length <= 20"}
              - {type: javascript, value: "JSON.parse(output).city === 'Paris'"}
              - {type: javascript, value: "output.length > 3 && output.length < 50"}
    """)
    code, lines, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "js")
    assert code == 0, err
    notes = [line for line in lines if line.startswith("not carried over: tests[0].assert")]
    assert notes[:4] == [
        "not carried over: tests[0].assert[0] (javascript): JavaScript does not run here; the nearest check: "
        '`contains: {all: ["Paris"]}`',
        "not carried over: tests[0].assert[1] (javascript): JavaScript does not run here; the nearest check: "
        '`banned_phrases: {phrases: ["london"], case_sensitive: false}`',
        "not carried over: tests[0].assert[2] (javascript): JavaScript does not run here; the nearest check: "
        '`regex: {pattern: "^[A-Z]"}`',
        "not carried over: tests[0].assert[3] (javascript): JavaScript does not run here; the nearest check: "
        "`length: {max_words: 20}`"]
    assert "`json_path: {path: ..., equals: ...}`" in notes[4]
    assert "write it as a `python: module:function` check" in notes[5]
    assert len(notes) == 6 and all("\n" not in note for note in notes)


CHAT_SAMPLES = [
    {"input": [{"role": "system", "content": "Answer in one word."},
               {"role": "user", "content": "What is the capital of France?"}], "ideal": "Paris"},
    {"input": [{"role": "system", "content": "Answer in one word."},
               {"role": "system", "name": "example_user", "content": "Capital of Peru?"},
               {"role": "system", "name": "example_assistant", "content": "Lima"},
               {"role": "user", "content": "Capital of France?"}], "ideal": "Paris"},
]


def test_openai_evals_chat_samples_stay_messages(here: Any) -> None:
    write(here.root, "registry/evals/qa.yaml", "qa:\n  id: qa.dev.v0\nqa.dev.v0:\n"
          "  class: evals.elsuite.basic.includes:Includes\n  args: {samples_jsonl: qa/samples.jsonl}\n")
    write(here.root, "qa.jsonl", "".join(json.dumps(row) + "\n" for row in CHAT_SAMPLES))
    code, lines, err = run_import("openai-evals", "registry/evals/qa.yaml", "qa.jsonl", "--eval", "qa")
    assert code == 0, err
    assert ("not carried over: qa.jsonl: input (chat input): the roles of the earlier turns of 1 samples' chats "
            "(few-shot examples, replies): each is written as text before its last user message, `User:` and "
            "`Assistant:` lines") in lines
    suite = here.root / "suites/qa"
    rows = [json.loads(line) for line in (suite / "data/qa.samples.jsonl").read_text().splitlines()]
    assert [(r["input_system"], r["input"]) for r in rows] == [
        ("Answer in one word.", "What is the capital of France?"),
        ("Answer in one word.", "User: Capital of Peru?\nAssistant: Lima\nUser: Capital of France?")]
    load_all(here.root, "qa")
    set_models(suite / "agents.yaml", "mock/recorder")
    here.run("suites/qa").assert_outcomes(passed=2)
    assert [call["system"] for call in sent(here)] == ["Answer in one word."] * 2
    assert sorted(call["messages"][0][1] for call in sent(here)) == sorted(row["input"] for row in rows)
    assert all(len(call["messages"]) == 1 and call["messages"][0][0] == "user" for call in sent(here))


BATTLE_SPEC = """\
    battle:
      prompt: |-
        You are comparing two responses to the following two instructions.

        [Instruction 1]
        {input1}
        [Response 1]
        {completion1}

        [Instruction 2]
        {input2}
        [Response 2]
        {completion2}


        Is the first response better than the second? You must provide one answer based on your subjective view.
      choice_strings:
        - "Yes"
        - "No"
      choice_scores:
        "Yes": 1.0
        "No": 0.0
      input_outputs:
        input1: completion1
        input2: completion2
"""

BATTLE_REGISTRY = """\
    joke-animals-vs-fruits:
      id: joke-animals-vs-fruits.dev.v0
      metrics: [accuracy]
    joke-animals-vs-fruits.dev.v0:
      class: evals.elsuite.modelgraded.classify:ModelBasedClassify
      args:
        samples_jsonl: test_multiio/battles/joke_animals_vs_fruits.jsonl
        eval_type: cot_classify
        modelgraded_spec: battle
"""


def test_openai_evals_battle_imports_as_a_pairwise_comparison(here: Any) -> None:
    write(here.root, "evals/registry/modelgraded/battle.yaml", BATTLE_SPEC)
    write(here.root, "evals/registry/evals/battles.yaml", BATTLE_REGISTRY)
    comedian = {"role": "system", "content": "You are a comedian."}
    write(here.root, "battles.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"input1": [comedian, {"role": "user", "content": "A joke about ducks"}],
         "input2": [comedian, {"role": "user", "content": "A joke about bananas, in one line"}]},
        {"input1": [comedian, {"role": "user", "content": "A joke about cats that are very lazy"}],
         "input2": [comedian, {"role": "user", "content": "A joke about apples"}]}]))
    code, lines, err = run_import("openai-evals", "evals/registry/evals/battles.yaml", "battles.jsonl")
    assert code == 0, err
    suite = "suites/joke_animals_vs_fruits"
    assert sorted(line for line in lines if line.startswith("wrote ")) == sorted([
        "wrote rubrics/joke_animals_vs_fruits.yaml", f"wrote {suite}/agents.yaml",
        f"wrote {suite}/judges/joke_animals_vs_fruits.txt", f"wrote {suite}/prompts/input1.yaml",
        f"wrote {suite}/prompts/input2.yaml", f"wrote {suite}/data/joke_animals_vs_fruits.samples.jsonl",
        f"wrote {suite}/joke_animals_vs_fruits.pairs.yaml", f"wrote {suite}/joke_animals_vs_fruits.pairwise.yaml"])
    assert any(line.startswith("note: battle.yaml: battle compares two completions: imported as") for line in lines)
    root = here.root
    comparison = read_yaml(root / suite / "joke_animals_vs_fruits.pairwise.yaml")
    assert comparison["compare"] == [{"agent": "completion1"}, {"agent": "completion2"}]
    assert comparison["judge"]["verdicts"] == {"Yes": "a", "No": "b"} and comparison["judge"]["swap"] is False
    assert comparison["judge"]["verdict"] == verdict_pattern("cot_classify", ["Yes", "No"])
    template = (root / suite / "judges/joke_animals_vs_fruits.txt").read_text()
    assert "[Instruction 1]\n{input1}\n[Response 1]\n{output_a}\n\n[Instruction 2]\n{input2}\n[Response 2]\n" \
           "{output_b}" in template
    agents = read_yaml(root / suite / "agents.yaml")["agents"]
    assert agents["completion2"]["producer"] == {"template": "prompts/input2.yaml"}

    set_models(root / suite / "agents.yaml", "mock/echo")
    comparison["judge"]["model"] = "mock/battle-judge"
    (root / suite / "joke_animals_vs_fruits.pairwise.yaml").write_text(yaml.safe_dump(comparison), encoding="utf-8")
    result = here.run(suite)
    result.assert_outcomes(passed=2)  # the samples are the comparison's cases only: no other item runs
    result.stdout.fnmatch_lines(["joke_animals_vs_fruits: pairwise over 2 cases*",
                                 "  completion1 vs completion2 * 1 * 1 * 0 (0) *"])


def test_openai_evals_chat_prompt_of_a_spec_is_the_judges_chat_template(here: Any) -> None:
    write(here.root, "strict.yaml", """\
        strict:
          prompt:
            - {role: system, content: "You are a strict grader of {{short}} answers."}
            - {role: user, content: "Question: {input}\\nAnswer: {completion}\\nIs it correct?"}
          choice_strings: YN
          choice_scores: {"Y": 1.0, "N": 0.0}
          input_outputs: {input: completion}
    """)
    write(here.root, "s.jsonl", json.dumps({"input": "What is the capital of France?"}) + "\n")
    code, lines, err = run_import("openai-evals", "strict.yaml", "s.jsonl", "--eval-type", "classify")
    assert code == 0, err
    suite = here.root / "suites/strict"
    answer = ('\n\nAnswer the question by printing only a single choice from "Y" or "N" (without quotes or '
              "punctuation) corresponding to the correct answer with no other text.")
    # each message in its role; openai/evals' answer prompt after the last
    assert read_yaml(suite / "judges/strict.yaml") == [
        {"role": "system", "content": "You are a strict grader of { short } answers."},
        {"role": "user", "content": "Question: {input}\nAnswer: {completion}\nIs it correct?" + answer}]
    assert read_yaml(suite / "agents.yaml")["agents"]["strict"]["evaluator"]["template"] == "judges/strict.yaml"
    set_models(suite / "agents.yaml", "mock/recorder", "mock/recorder")
    here.run("suites/strict").assert_outcomes(passed=1)
    produced, judged = sent(here)
    assert judged == {"system": "You are a strict grader of { short } answers.", "messages": [
        ["user", "Question: What is the capital of France?\nAnswer: Paris\nIs it correct?" + answer]]}
