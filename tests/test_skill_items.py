"""Skills as items: each case of a ``*.skill.yaml`` runs its skill (a generation, a review, or the skill's own
handler) from the shared steps, recorded like every item; the generation flow and the review as the skill document
writes them, offline on scripted mock models that log every request they get."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import Project, needs_sandbox
from harness.base.jsonschemas import contract_errors
from harness.base.models import ModelSettings
from harness.evaluation.items.skill import review_problems
from harness.llm import CallPolicy, ModelRequest
from harness.llm.providers.anthropic import wire_params
from harness.llm.providers.openai import OpenAIProvider
from harness.loading import load_rubric
from harness.testing import FakeAnthropic
from harness.testing.fake_anthropic import Reply
from harness.testing.fake_openai import FakeOpenAI
from harness.testing.fake_openai import Reply as OpenAIReply

# Scripted models that log what they are asked (calls.jsonl, in the project), so a test sees every model call.
MODELS = '''
import itertools
import json

from harness.llm.providers.mock import forget_mock_model, mock_model

VOTES = itertools.cycle(["pass", "pass", "fail"])


def pytest_unconfigure(config):
    for name in ("t-writer", "t-reviewer"):  # an in-process run leaves the test process as it found it
        forget_mock_model(name)


def log(request):
    with open("calls.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"model": request.model, "temperature": request.temperature,
                                 "max_tokens": request.max_tokens, "prompt": request.messages[0].text,
                                 "shown": [r.content for m in request.messages for r in m.tool_results]}) + "\\n")


@mock_model("t-writer")
def writer(request):
    log(request)
    prompt = request.messages[0].text
    name = prompt.split("NAME=", 1)[1].split()[0]
    answer = {"greeting": f"Hello {name}", "letters": len(name)}
    if "forgetful" in prompt and not any(m.tool_results for m in request.messages):
        del answer["letters"]  # a field dropped, as models sometimes do: the retry shows the error
    return answer


@mock_model("t-reviewer")
def reviewer(request):
    log(request)
    asset = request.messages[-1].text.split("## Asset\\n", 1)[1]
    unsure = "maybe" in asset
    wanted = request.tools[0].schema["properties"]["criteria"]["required"]
    criteria = {}
    for criterion in wanted:
        verdict = next(VOTES) if unsure else ("pass" if "please" in asset else "fail")
        criteria[criterion] = {"verdict": verdict, "reasoning": f"{criterion}: {verdict}", "confidence": 0.7,
                               "evidence": ["please"] if "please" in asset else []}
    return {"criteria": criteria, "suggested_fixes": ["Say please"] if "please" not in asset else []}
'''

PROMPT = """\
prompt_id: greet
version: 1.0.0
vars_schema:
  type: object
  required: [name, mood]
  properties: {name: {type: string}, mood: {enum: [calm, cheerful]}}
template: "Greet NAME={{name}} in a {{mood}} mood."
"""

GREET = """\
skill_id: greet
version: 1.0.0
title: Greet
description: A greeting as JSON
input_schema:
  type: object
  required: [name]
  properties: {name: {type: string, minLength: 2}, mood: {type: string}}
output_schema:
  type: object
  required: [greeting, letters]
  properties: {greeting: {type: string}, letters: {type: integer}}
  additionalProperties: false
template_type: LLM_JSON_GENERATION
template_config: {prompt_id: greet, model: mock/t-writer, temperature: 0.3, max_tokens: 321}
inputs: {mood: calm}
cases:
  - id: ada
    inputs: {name: Ada}
    checks: [{id: letters, check: {json_path: {path: letters, equals: 3}}}]
  - id: forgetful
    inputs: {name: forgetful-bob}
  - id: bad-input
    inputs: {name: 7}
"""

REVIEW_RUBRIC = """\
rubric_id: polite-review
version: 2.0.0
scoring_mode: binary
criteria:
  - {id: polite, name: Polite, description: Asks nicely, pass_condition: says please, fail_condition: demands}
  - {id: brief, name: Brief, description: Short, pass_condition: short, fail_condition: long,
     check: {length: {max_words: 8}}}
"""

REVIEW = """\
skill_id: polite
version: 1.0.0
title: Polite
description: Reviews a request for politeness
input_schema: {type: object, required: [note], properties: {note: {type: string}}}
template_type: LLM_REVIEW
template_config: {rubric_id: polite-review, evaluation_model: mock/t-reviewer, include_criteria_details: true}
cases:
  - {id: nice, inputs: {note: "Could you please pass the salt"}}
  - {id: rude, inputs: {note: "Salt. Now."}}
"""


def skill_project(project: Project, **files: str) -> Project:
    project.write("conftest.py", MODELS)
    project.write("prompts/greet.yaml", PROMPT)
    project.write("rubrics/polite.yaml", REVIEW_RUBRIC)
    for name, text in files.items():
        project.write(f"skills/{name}.skill.yaml", text)
    return project


def calls(project: Project) -> list[dict[str, Any]]:
    log = project.root / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def records(project: Project) -> dict[str, dict[str, Any]]:
    return {row["case_id"]: row for row in project.runs()}


def written(project: Project, kind: str) -> dict[str, dict[str, Any]]:
    """Every GenerationResult (kind "generation") or ReviewResult ("review") written, by case, each checked against
    the shipped contract as it is read."""
    found = {}
    for path in sorted(project.work.glob(f"runs/*/*/*/attempt-*.{kind}.json")):
        result = json.loads(path.read_text())
        assert contract_errors(f"{kind}_result", result) == [], path
        found[path.parent.name] = result
    return found


def test_a_generation_retries_once_showing_the_errors_and_a_bad_input_calls_no_model(project: Project) -> None:
    skill_project(project, greet=GREET)
    result = project.run("skills/", "-v", "-p", "no:xdist", "--harness-concurrency=1")
    result.assert_outcomes(passed=2, failed=1)
    results = written(project, "generation")
    assert sorted(results) == ["ada", "forgetful"]  # the bad input was never generated for

    # the first answer lacked a field: the retry showed the model its error, the second answer passed
    forgetful = results["forgetful"]
    assert (forgetful["success"], forgetful["attempts"]) == (True, 2)
    assert forgetful["firstAttemptErrors"] == [{"instancePath": "/letters", "message": "missing", "path": "letters"}]
    assert forgetful["data"] == {"greeting": "Hello forgetful-bob", "letters": 13}
    asked = [c for c in calls(project) if "forgetful" in c["prompt"]]
    assert len(asked) == 2 and asked[0]["shown"] == [] and "letters: missing" in asked[1]["shown"][0]
    assert results["ada"]["attempts"] == 1 and "firstAttemptErrors" not in results["ada"]
    assert set(results["ada"]["timings_ms"]) == {"prompt_render", "llm_call", "validation", "total"}

    # model, temperature and max_tokens reached the provider, and the result says the temperature was sent
    assert {(c["model"], c["temperature"], c["max_tokens"]) for c in calls(project)} == {("t-writer", 0.3, 321)}
    assert results["ada"]["model"] == {"name": "mock/t-writer", "temperature": 0.3, "max_tokens": 321,
                                       "temperature_sent": True}
    assert results["ada"]["prompt"] == {"prompt_id": "greet", "version": "1.0.0"}  # record_prompt is off

    # a bad input: refused before any model call, recorded as the data's fault
    assert not [c for c in calls(project) if "NAME=7" in c["prompt"]]
    rows = records(project)
    bad = rows["bad-input"]
    assert (bad["outcome"], bad["exit_code"], bad["model"], bad["input_tokens"]) == ("validation_failed", 65, None, 0)
    assert "name: 7 is a number, not text; the skill did not run" in bad["feedback"]
    assert (rows["forgetful"]["outcome"], rows["forgetful"]["attempt"]) == ("passed", 1)
    result.stdout.fnmatch_lines(["*greet[[]bad-input] VALIDATION FAILED on attempt 1: the input does not match "
                                 "greet's input_schema: name: 7 is a number, not text*"])


def test_with_the_retry_off_an_invalid_answer_fails_attempt_1_with_exit_code_84(project: Project) -> None:
    skill_project(project, greet=GREET.replace("max_tokens: 321}", "max_tokens: 321, "
                                               "retry_on_validation_failure: false}"))
    result = project.run("skills/", "-k", "forgetful", "-p", "no:xdist")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*greet[[]forgetful] VALIDATION FAILED on attempt 1: the model's answer does not "
                                 "match greet's output_schema after 1 attempt (retry_on_validation_failure is off): "
                                 "letters: missing (its answer: WORK/runs/*/greet/forgetful/attempt-1.generation.json)*"])
    (row,) = project.runs()
    assert (row["attempt"], row["status"], row["outcome"], row["exit_code"]) == (1, "escalated", "validation_failed", 84)
    assert row["model"] == "mock/t-writer" and row["input_tokens"] > 0  # the call was made and billed
    generation = written(project, "generation")["forgetful"]
    assert (generation["success"], generation["attempts"], "data" in generation) == (False, 1, False)
    assert generation["validationErrors"] == [{"instancePath": "/letters", "message": "missing", "path": "letters"}]
    assert json.loads(generation["rawResponse"]) == {"greeting": "Hello forgetful-bob"}
    assert len(calls(project)) == 1


def test_a_prompts_vars_are_checked_before_it_is_rendered_or_sent(project: Project) -> None:
    skill_project(project, greet=GREET.replace("inputs: {mood: calm}", "inputs: {mood: furious}"))
    result = project.run("skills/", "-k", "ada", "-p", "no:xdist")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*the input does not match prompt greet@1.0.0's vars_schema: mood: 'furious' is not "
                                 "one of 'calm', 'cheerful'*"])
    assert calls(project) == []
    assert project.runs()[0]["exit_code"] == 65


def test_a_review_writes_its_result_with_evidence_and_the_judges_confidence(project: Project) -> None:
    skill_project(project, polite=REVIEW)
    result = project.run("skills/", "-v", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=1)
    reviews = written(project, "review")
    rubric = load_rubric(project.root / "rubrics" / "polite.yaml", import_root=project.root)
    for review in reviews.values():
        assert review_problems(review, rubric) == []
    nice, rude = reviews["nice"], reviews["rude"]
    assert nice["pass"] is True and nice["rubric"] == {"rubric_id": "polite-review", "version": "2.0.0"}
    polite, brief = nice["criteria_results"]
    assert (polite["verdict"], polite["confidence"], polite["confidence_basis"], polite["evidence"]) == (
        "pass", 0.7, "judge", ["please"])
    assert (brief["verdict"], brief["confidence"], brief["confidence_basis"]) == ("pass", 1.0, "check")
    assert rude["pass"] is False and rude["issues"] == ["Polite: polite: fail"]
    assert rude["suggested_fixes"] == ["Say please"] and rude["evaluation_model"] == "mock/t-reviewer"
    # the item's verdict is the review's, and the records file it under the review rubric
    rows = records(project)
    assert (rows["nice"]["outcome"], rows["rude"]["outcome"]) == ("passed", "failed")
    assert rows["rude"]["rubric_name"] == "polite" and rows["rude"]["rubric_version"] == "2.0.0"
    result.stdout.fnmatch_lines(["*polite*0.00*polite: fail*"])


def test_criteria_results_only_with_include_criteria_details(project: Project) -> None:
    skill_project(project, polite=REVIEW.replace(", include_criteria_details: true", ""))
    project.run("skills/", "-p", "no:xdist").assert_outcomes(passed=1, failed=1)
    assert all("criteria_results" not in review for review in written(project, "review").values())


def test_with_several_judge_samples_confidence_is_their_agreement(project: Project) -> None:
    skill_project(project, polite=REVIEW.replace("Could you please pass the salt", "maybe"))
    project.run("skills/", "-k", "nice", "--harness-judge-samples", "3", "-p", "no:xdist").assert_outcomes(
        failed=1, deselected=1)
    polite = written(project, "review")["nice"]["criteria_results"][0]
    # two samples said pass, one fail: the criterion fails (every sample must pass), one sample in three agrees
    assert (polite["verdict"], polite["confidence_basis"]) == ("fail", "samples")
    assert polite["confidence"] == pytest.approx(1 / 3, abs=1e-6)


def test_a_review_skill_reviews_its_handlers_output(project: Project) -> None:
    project.write("notes.py", "def politer(skill_input):\n    return 'please ' + skill_input['note']\n")
    skill_project(project, polite=REVIEW.replace("template_type:", "implementation: {type: python_function, "
                                                 "handler: 'notes:politer'}\ntemplate_type:"))
    project.run("skills/", "-p", "no:xdist").assert_outcomes(passed=2)  # the handler made both polite
    assert (project.cycle_dir() / "polite" / "rude" / "attempt-1.md").read_text() == "please Salt. Now."


HANDLED = """\
skill_id: shout
version: 1.0.0
title: Shout
description: A name, shouted
input_schema: {type: object, required: [name], properties: {name: {type: string}}}
output_schema: {type: object, required: [loud], properties: {loud: {type: string, pattern: "^[A-Z !]+$"}}}
implementation: {type: python_function, handler: "shouting:shout"}
produces_artifacts: [loud]
cases:
  - {id: ada, inputs: {name: ada}, checks: [{json_path: {path: loud, equals: "ADA!"}}]}
  - {id: quiet, inputs: {name: quiet}}
  - {id: broken, inputs: {name: broken}}
"""

SHOUTING = '''
def shout(skill_input):
    name = skill_input["name"]
    if name == "broken":
        raise ValueError("cannot shout that")
    return {"loud": name.upper() + "!"} if name != "quiet" else {"loud": "shh"}
'''


def test_a_skills_own_handler_runs_and_its_output_is_validated(project: Project) -> None:
    project.write("shouting.py", SHOUTING)
    skill_project(project, shout=HANDLED)
    result = project.run("skills/", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=2)
    rows = records(project)
    assert (rows["ada"]["outcome"], rows["ada"]["model"]) == ("passed", None)
    assert (rows["quiet"]["outcome"], rows["quiet"]["exit_code"]) == ("validation_failed", 84)
    assert "loud: 'shh' does not match the pattern" in rows["quiet"]["feedback"]
    assert (rows["broken"]["outcome"], rows["broken"]["exit_code"]) == ("error", 1)
    result.stdout.fnmatch_lines(["*shout[[]broken] ERROR on attempt 1: handler shouting:shout raised ValueError: "
                                 "cannot shout that*", "*shouting.py:5 in shout*"])
    assert json.loads((project.cycle_dir() / "shout" / "ada" / "attempt-1.md").read_text()) == {"loud": "ADA!"}


def test_a_declared_artifact_the_output_lacks_fails_validation(project: Project) -> None:
    project.write("shouting.py", SHOUTING)
    skill_project(project, shout=HANDLED.replace("produces_artifacts: [loud]", "produces_artifacts: [loud, "
                                                 "{name: echo, path: echo.text}]"))
    result = project.run("skills/", "-k", "ada", "-p", "no:xdist")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*VALIDATION FAILED on attempt 1: produces_artifacts.echo: the output has nothing "
                                 "at echo.text*"])


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["name"] == "down":
            self.send_response(503)
            self.end_headers()
            return
        answer = json.dumps({"loud": body["name"].upper() + "!"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def shout_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/shout"
    server.shutdown()


def test_an_http_handler_gets_the_input_and_answers_the_output(project: Project, shout_server: str) -> None:
    skill_project(project, shout=HANDLED.replace('type: python_function, handler: "shouting:shout"',
                                                 f"type: http_call, handler: '{shout_server}'")
                  .replace("{id: quiet, inputs: {name: quiet}}", "{id: down, inputs: {name: down}}"))
    result = project.run("skills/", "-k", "not broken", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    rows = records(project)
    assert (rows["down"]["outcome"], rows["down"]["exit_code"]) == ("error", 75)
    assert f"handler {shout_server} answered HTTP 503" in rows["down"]["feedback"]


@needs_sandbox
def test_a_command_handler_runs_in_the_sandbox(project: Project) -> None:
    project.write("shout.py", "import json, sys\nname = json.load(sys.stdin)['name']\n"
                              "print(json.dumps({'loud': name.upper() + '!'}))\n")
    skill_project(project, shout=HANDLED.replace('type: python_function, handler: "shouting:shout"',
                                                 "type: cli_command, handler: python shout.py"))
    project.run("skills/", "-k", "ada", "-p", "no:xdist").assert_outcomes(passed=1, deselected=2)
    (row,) = project.rows("SELECT commands FROM attempt_details")
    (command,) = json.loads(row["commands"])
    assert (command["role"], command["confined"], command["network"], command["exit_code"]) == (
        "handler", True, False, 0)


def test_skills_run_the_same_under_xdist(project: Project) -> None:
    skill_project(project, greet=GREET, polite=REVIEW)
    result = project.run("skills/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=3, failed=2)
    assert len({row["cycle_id"] for row in project.runs()}) == 1
    assert sorted(written(project, "generation")) == ["ada", "forgetful"]
    assert sorted(written(project, "review")) == ["nice", "rude"]


# --- temperature reaches every provider that accepts it -----------------------------------------------


def test_anthropic_gets_the_model_and_max_tokens_but_never_a_temperature(project: Project,
                                                                          fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda body: Reply.tool({"greeting": "Hello Ada", "letters": 3})
    skill_project(project, greet=GREET.replace("mock/t-writer", "claude-haiku-4-5"))
    project.run("skills/", "-k", "ada", "-p", "no:xdist").assert_outcomes(passed=1, deselected=2)
    (body,) = fake_anthropic.requests
    assert (body["model"], body["max_tokens"], "temperature" in body) == ("claude-haiku-4-5", 321, False)
    assert written(project, "generation")["ada"]["model"]["temperature_sent"] is False


def test_openai_gets_the_temperature_where_the_model_accepts_it(project: Project, fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: OpenAIReply.tool({"greeting": "Hello Ada", "letters": 3})
    skill_project(project, greet=GREET.replace("mock/t-writer", "openai/gpt-4.1-mini"))
    project.run("skills/", "-k", "ada", "-p", "no:xdist").assert_outcomes(passed=1, deselected=2)
    (body,) = fake_openai.requests
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("gpt-4.1-mini", 0.3, 321)


@pytest.mark.parametrize(("model", "base_url", "sent"), [
    ("gpt-4.1-mini", None, True), ("o3", None, False), ("gpt-5.4-mini", None, False),
    ("o3", "http://127.0.0.1:8000/v1", True),  # a server of one's own decides for itself
])
def test_openai_reasoning_models_get_no_temperature_they_would_refuse(model: str, base_url: str | None,
                                                                      sent: bool) -> None:
    provider = OpenAIProvider(ModelSettings(model=f"openai/{model}", temperature=0.3, base_url=base_url),
                              CallPolicy(), api_key="sk-test-dummy")
    params = provider.wire_params(ModelRequest(model=model, temperature=0.3))
    assert ("temperature" in params, provider.sends_temperature(model)) == (sent, sent)
    assert "temperature" not in wire_params(ModelRequest(model="claude-haiku-4-5", temperature=0.3))


def test_a_case_scored_by_a_review_rubric_writes_a_review_result_that_keeps_the_contract(project: Project) -> None:
    project.write("rubrics/brief.yaml", REVIEW_RUBRIC.replace("rubric_id: polite-review", "rubric_id: brief-review")
                  .replace("  - {id: polite, name: Polite, description: Asks nicely, pass_condition: says please, "
                           "fail_condition: demands}\n", ""))
    project.write("agentlib.py", "def produce(request):\n    return request['inputs']['text']\n")
    project.agents("agents:\n  writer:\n    rubric: brief-review\n    producer: {python: \"agentlib:produce\"}\n")
    project.cases("writer", "agent: writer\ncases:\n  - {id: short, inputs: {text: hi there}}\n"
                            "  - {id: long, inputs: {text: one two three four five six seven eight nine}}\n")
    project.run("suites/", "-p", "no:xdist").assert_outcomes(passed=1, failed=1)
    rubric = load_rubric(project.root / "rubrics" / "brief.yaml", import_root=project.root)
    reviews = written(project, "review")
    assert sorted(reviews) == ["long", "short"] and reviews["long"]["issues"]
    assert all(review_problems(review, rubric) == [] for review in reviews.values())
