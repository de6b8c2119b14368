"""The LLM judge: its logic (scores, verdicts, indeterminate dimensions, calibration, when it is asked) with a
scripted in-process mock judge; the SDK path (request shape, prompt caching, retries, 429, 500, timeouts, the
response cache) through the real anthropic SDK against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import JUDGED_CASES, Project
from harness.testing import FakeAnthropic, Reply, judge_responder

TWO_CASES = JUDGED_CASES + """\
  - id: second
    inputs: {text: "hello again, lunch on Friday?"}
"""


def answer(tone: float = 1.0, clarity: float = 1.0, *, overall: float = 0.5, passed: bool = False,
           **extra: Any) -> dict[str, Any]:
    """An EvaluatorOutput for the judged dimensions; overallScore and passed are deliberately arbitrary."""
    return {
        "overallScore": overall,
        "passed": passed,
        "dimensionScores": {
            "tone": {"score": tone, "weight": 0.5, "reason": "TONE-REASON from the judge"},
            "clarity": {"score": clarity, "weight": 0.3, "reason": "CLARITY-REASON from the judge"},
        },
        "feedback": "JUDGE-FEEDBACK",
        "suggestedFixes": ["JUDGE-FIX: name the day"],
        **extra,
    }


def evaluation(project: Project, attempt: int = 1, case: str | None = None) -> dict[str, Any]:
    folder = project.cycle_dir() / "judged_writer"
    if case:
        folder = folder / case
    return json.loads((folder / f"attempt-{attempt}.eval.json").read_text())


# The project's conftest.py: the judge ``mock/NAME`` answers ANSWERS in turn (the last one again and again), or,
# when BY_TEXT is given, the answer of the first marker found in the request's messages. Each call it answers is
# a line of judge-calls.jsonl (the text of the messages it was sent); each answer the harness got, live or
# replayed from the response cache, is a line of model-calls.jsonl (from the event stream, with its usage).
MOCK_JUDGE_BODY = '''
CALLS = Path(__file__).with_name("judge-calls.jsonl")
LOCK = threading.Lock()


@mock_model(NAME)
def judge(request):
    text = "\\n".join(message.text for message in request.messages)
    with LOCK:
        calls = CALLS.read_text(encoding="utf-8").splitlines() if CALLS.exists() else []
        with CALLS.open("a", encoding="utf-8") as log:
            log.write(json.dumps(text) + "\\n")
    if BY_TEXT:
        return next(answer for marker, answer in BY_TEXT if marker in text)
    return ANSWERS[min(len(calls), len(ANSWERS) - 1)]


def pytest_harness_event_sinks(config):
    path = config.rootpath / "model-calls.jsonl"

    def write(event):
        if type(event).__name__ == "ModelCalled":
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"model": event.model, "cached": event.cached,
                                      "input_tokens": event.usage.input_tokens,
                                      "output_tokens": event.usage.output_tokens}) + "\\n")

    return [write]
'''

MockJudge = Callable[..., str]


@pytest.fixture
def mock_judge(project: Project) -> Iterator[MockJudge]:
    """``mock_judge(name, *answers, by_text=None)``: script ``mock/NAME`` in the project's conftest.py and make it
    the judge in agents.yaml (call ``project.judged()`` first); returns the qualified model name."""
    names: list[str] = []

    def script(name: str, *answers: dict[str, Any],
               by_text: list[tuple[str, dict[str, Any]]] | None = None) -> str:
        assert answers or by_text, "script at least one answer"
        names.append(name)
        header = "\n".join([
            "import json", "import threading", "from pathlib import Path", "",
            "from harness.llm.providers.mock import mock_model", "",
            f"NAME = {name!r}",
            f"ANSWERS = json.loads({json.dumps(list(answers))!r})",
            f"BY_TEXT = json.loads({json.dumps(by_text or [])!r})",
        ])
        project.write("conftest.py", header + "\n" + MOCK_JUDGE_BODY)
        agents = project.root / "suites" / "agents.yaml"
        text = agents.read_text()
        assert "model: claude-haiku-4-5" in text
        agents.write_text(text.replace("model: claude-haiku-4-5", f"model: mock/{name}", 1))
        return f"mock/{name}"

    yield script
    # A registration outlives the run when the mock module was imported before it (another test module did).
    mock = sys.modules.get("harness.llm.providers.mock")
    for name in names if mock is not None else ():
        mock.forget_mock_model(name)


def judge_calls(project: Project) -> list[str]:
    """The messages' text of each call the scripted judge answered, in order."""
    log = project.root / "judge-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def model_calls(project: Project) -> list[dict[str, Any]]:
    """Each model answer the harness got (the ModelCalled events): model, cached, input and output tokens."""
    log = project.root / "model-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def price(project: Project, model: str, *, input_usd: float, output_usd: float) -> None:
    """Give ``model`` a price (USD per million tokens) through the project's price table."""
    project.write("prices.yaml", f"{model}: {{input: {input_usd}, output: {output_usd}}}\n")
    project.ini("harness_prices = prices.yaml\n")


def test_a_valid_answer_scores_the_judged_dimensions_and_the_harness_recomputes_the_overall(
        project: Project, mock_judge: MockJudge) -> None:
    project.judged()
    # The judge claims 0.10 and failed; the weights give 0.5*1.0 + 0.3*0.5 + 0.2*1.0 = 0.85 >= 0.80.
    model = mock_judge("recomputes-overall", answer(tone=1.0, clarity=0.5, overall=0.1, passed=False))
    price(project, model, input_usd=1.0, output_usd=5.0)
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1)
    assert len(judge_calls(project)) == 1
    assert "hello friend, shall we meet on Tuesday?" in judge_calls(project)[0]  # the judge saw the artifact
    data = evaluation(project)
    assert data["overallScore"] == 0.85 and data["passed"] is True
    assert data["dimensionScores"]["tone"] == {"score": 1.0, "weight": 0.5, "reason": "TONE-REASON from the judge"}
    assert data["dimensionScores"]["clarity"]["score"] == 0.5
    assert data["dimensionScores"]["greeting"]["score"] == 1.0  # the check, not the judge
    assert data["metadata"]["judgeReportedScore"] == 0.1
    assert "JUDGE-FIX: name the day" in data["suggestedFixes"]
    (row,) = project.runs()
    assert (row["status"], row["overall_score"], row["outcome"]) == ("passed", 0.85, "passed")
    # the judge's tokens and their price reach the record and the summary
    (call,) = model_calls(project)
    tokens_in, tokens_out = call["input_tokens"], call["output_tokens"]
    assert tokens_in > 0 and tokens_out > 0 and (row["input_tokens"], row["output_tokens"]) == (tokens_in, tokens_out)
    cost = (tokens_in * 1 + tokens_out * 5) / 1e6
    assert row["model"] == model and row["cost_usd"] == pytest.approx(cost)
    result.stdout.fnmatch_lines([f"judged * 1 * 1 * 100% * 0.850 * 1.0 * {tokens_in}/{tokens_out} * ${cost:.4f}"])


def test_a_judge_that_says_passed_cannot_pass_a_low_score(project: Project, mock_judge: MockJudge) -> None:
    project.judged()
    mock_judge("says-passed", answer(tone=0.2, clarity=0.2, overall=0.99, passed=True))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    # 0.5*0.2 + 0.3*0.2 + 0.2*1.0 = 0.36
    result.stdout.fnmatch_lines([
        "*tone*0.20*0.50*TONE-REASON from the judge",
        "*clarity*0.20*0.30*CLARITY-REASON from the judge",
        "*greeting*1.00*0.20*",
        "*overall*0.36*threshold 0.80*",
        "*- JUDGE-FIX: name the day",
    ])
    assert evaluation(project)["overallScore"] == 0.36


def test_the_judge_request_carries_rubric_prompt_and_examples_with_a_cached_prefix(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged(TWO_CASES)
    fake_anthropic.responder = judge_responder({"tone": 1.0, "clarity": 1.0})
    fake_anthropic.min_cache_tokens = 1  # this small prefix cached as a long one is (test_prompt_caching: minimums)
    project.run("suites/").assert_outcomes(passed=2)
    assert fake_anthropic.calls == 2
    # The cases run concurrently: tell the requests apart by their artifact.
    first, second = sorted(fake_anthropic.requests, key=lambda r: "Tuesday" not in json.dumps(r["messages"]))
    assert first["model"] == "claude-haiku-4-5" and first["max_tokens"] == 1024

    # The stable part (evaluator prompt, rubric, gold examples, anti-patterns) is one cached system block.
    system = first["system"]
    assert isinstance(system, list)
    cached = [block for block in system if block.get("cache_control")]
    assert len(cached) == 1 and cached[0]["cache_control"] == {"type": "ephemeral"}
    stable = cached[0]["text"]
    for marker in ("EVALUATOR-PROMPT-MARKER", "Judged Quality", "2.1.0", "TONE-DESCRIPTION", "CLARITY-DESCRIPTION",
                   "GOLD-EXAMPLE-MARKER", "ANTI-PATTERN-MARKER", "warm"):
        assert marker in stable, marker
    assert second["system"] == system  # identical prefix, so the second call reads the cache

    # The artifact and the inputs travel in the message; the tool schema asks only for the judged dimensions.
    message = json.dumps(first["messages"])
    assert "hello friend, shall we meet on Tuesday?" in message
    (tool,) = first["tools"]
    assert first["tool_choice"] == {"type": "tool", "name": tool["name"]}
    dims = tool["input_schema"]["properties"]["dimensionScores"]
    assert sorted(dims["required"]) == ["clarity", "tone"] and "greeting" not in dims["properties"]

    # The simulated cache: the first call writes the prefix, the second reads it; both are recorded.
    writes, reads = sorted(((r["cache_write_tokens"], r["cache_read_tokens"]) for r in project.runs()),
                           reverse=True)
    assert writes[0] > 0 and writes[1] == 0
    assert reads == (0, writes[0])


def test_invalid_then_valid_answer_passes_after_one_retry(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    bad = answer()
    bad["dimensionScores"]["tone"]["score"] = 7
    del bad["dimensionScores"]["clarity"]["reason"]
    fake_anthropic.queue(Reply.tool(bad), Reply.tool(answer()))
    project.run("suites/").assert_outcomes(passed=1)
    assert fake_anthropic.calls == 2
    retry = json.dumps(fake_anthropic.requests[1]["messages"])
    assert "7 is above the maximum 1" in retry and "reason: missing" in retry
    (row,) = project.runs()
    assert (row["status"], row["outcome"], row["overall_score"]) == ("passed", "passed", 1.0)


def test_an_always_invalid_answer_fails_as_validation_failed(project: Project, mock_judge: MockJudge) -> None:
    project.judged()
    bad = answer()
    bad["overallScore"] = "high"
    bad["dimensionScores"].pop("tone")
    model = mock_judge("always-invalid", bad, bad, answer())
    price(project, model, input_usd=1.0, output_usd=5.0)
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    assert len(judge_calls(project)) == 2  # one retry, no more
    result.stdout.fnmatch_lines(["*VALIDATION FAILED on attempt 1: the judge's answer did not match EvaluatorOutput after 2 attempts*"])
    assert "Traceback" not in result.stdout.str()
    (row,) = project.runs()
    assert row["outcome"] == "validation_failed" and row["exit_code"] == 84
    assert row["status"] == "escalated" and row["overall_score"] is None
    assert "did not match EvaluatorOutput" in project.run_log()[0]["feedback"]
    # both calls were billed: the record, the summary and the cost cap see them
    first, second = model_calls(project)
    tokens_in = first["input_tokens"] + second["input_tokens"]
    tokens_out = first["output_tokens"] + second["output_tokens"]
    assert first["input_tokens"] > 0 and second["input_tokens"] > 0
    assert (row["input_tokens"], row["output_tokens"], row["model"]) == (tokens_in, tokens_out, model)
    cost = (tokens_in * 1 + tokens_out * 5) / 1e6
    assert row["cost_usd"] == pytest.approx(cost)
    result.stdout.fnmatch_lines([f"judged * 1 * 0 * 0% * - * 1.0 * {tokens_in}/{tokens_out} * ${cost:.4f}"])


def test_rate_limited_then_valid_passes(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged(max_retries=2)
    fake_anthropic.queue(Reply.error(429, retry_after=0.01), Reply.tool(answer()))
    project.run("suites/").assert_outcomes(passed=1)
    assert fake_anthropic.calls == 2
    assert [r["status"] for r in project.rows()] == ["passed"]


def test_a_server_error_fails_that_item_only(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged(TWO_CASES, max_retries=1)
    fake_anthropic.queue(Reply.error(500, retry_after=0.01), Reply.error(500, retry_after=0.01))
    fake_anthropic.responder = judge_responder({"tone": 1.0, "clarity": 1.0})
    result = project.run("suites/", "-v", "--harness-concurrency", "1")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "suites/judged_writer.cases.yaml::warm-hello FAILED*",
        "suites/judged_writer.cases.yaml::second PASSED*",
    ])
    result.stdout.fnmatch_lines(["*ERROR on attempt 1: model API server error (500 api_error, after 1 retry)*"])
    assert "Traceback" not in result.stdout.str()
    failed, passed = project.runs()
    assert (failed["case_id"], failed["outcome"], failed["exit_code"]) == ("warm-hello", "error", 69)
    assert (passed["case_id"], passed["outcome"]) == ("second", "passed")


def test_a_slow_answer_past_the_timeout_is_an_error_that_says_so(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged(timeout_s=0.3, max_retries=0)
    fake_anthropic.queue(Reply.slow(3.0, Reply.tool(answer())))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.duration < 3.0
    result.stdout.fnmatch_lines(["*ERROR on attempt 1: model call to claude-haiku-4-5 timed out after 0.3s*"])
    (row,) = project.runs()
    assert (row["outcome"], row["exit_code"]) == ("error", 81)


def test_without_an_api_key_judged_dimensions_are_indeterminate(project: Project) -> None:
    project.judged()
    result = project.run("suites/", "-rs")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["judged: 1 not scored (indeterminate): no ANTHROPIC_API_KEY: set it in the environment*"])
    result.stdout.fnmatch_lines(["SKIPPED *judged_writer.cases.yaml:3: not scored (indeterminate): "
                                 "no ANTHROPIC_API_KEY*"])
    (row,) = project.runs()
    assert (row["status"], row["outcome"], row["overall_score"]) == ("escalated", "indeterminate", None)
    data = evaluation(project)
    assert data["overallScore"] is None and data["passed"] is False
    assert data["dimensionScores"]["tone"]["score"] is None
    assert data["dimensionScores"]["greeting"]["score"] == 1.0  # the check still ran
    assert sorted(data["metadata"]["indeterminate"]) == ["clarity", "tone"]


def test_without_an_api_key_indeterminate_can_fail_the_gate(project: Project) -> None:
    project.judged()
    result = project.run("suites/", "--harness-indeterminate", "fail")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT SCORED (indeterminate) after 1 attempt: not scored (indeterminate)*"])


def test_a_judge_that_marks_a_dimension_indeterminate(project: Project, mock_judge: MockJudge) -> None:
    project.judged()
    unsure = answer()
    unsure["dimensionScores"]["tone"]["indeterminate"] = True
    mock_judge("marks-indeterminate", unsure)
    result = project.run("suites/", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*the judge could not score tone*"])


def test_calibration_of_a_judged_rubric(project: Project, mock_judge: MockJudge) -> None:
    project.judged()
    # the judge scores the gold example high and the anti-pattern low, as calibration expects
    mock_judge("calibration", by_text=[("GOLD-EXAMPLE-MARKER", answer(tone=1.0, clarity=1.0)),
                                       ("ANTI-PATTERN-MARKER", answer(tone=0.0, clarity=0.0))])
    result = project.run("rubrics/", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*gold?warm? PASSED*", "*anti?cold? PASSED*"])
    calls = judge_calls(project)
    assert len(calls) == 2
    assert sorted("GOLD-EXAMPLE-MARKER" in text for text in calls) == [False, True]


def test_calibration_of_a_judged_rubric_without_a_key_is_skipped(project: Project) -> None:
    project.judged()
    result = project.run("rubrics/", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["SKIPPED *not scored (indeterminate)*calibration not decided*"])


def test_answers_replayed_from_the_cache_say_so(project: Project, fake_anthropic: FakeAnthropic,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    project.judged()
    fake_anthropic.queue(Reply.tool(answer(), usage={"input_tokens": 1000, "output_tokens": 200}))
    project.run("suites/").assert_outcomes(passed=1)
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # the second run has no key: only the cache can answer
    result = project.run("suites/", "--junitxml=report.xml", "--harness-markdown", "summary.md")
    result.assert_outcomes(passed=1)
    assert fake_anthropic.calls == 1
    assert "· 1 model answer from the response cache" in (project.root / "summary.md").read_text()
    result.stdout.fnmatch_lines(["judged * 1 * 1 * 100% * 1.000 * 1.0 * 0/0 * $0.0000",
                                 "judged: 1 model answer from the response cache (replayed, not called: no tokens, $0)"])
    live, replayed = project.runs()
    # the live call's usage on the wire, priced at the model's built-in price
    assert (live["input_tokens"], live["output_tokens"], live["cached_answers"]) == (1000, 200, 0)
    assert live["model"] == "claude-haiku-4-5"
    assert live["cost_usd"] == pytest.approx((1000 * 1 + 200 * 5) / 1e6)
    assert (replayed["input_tokens"], replayed["cached_answers"], replayed["cost_usd"]) == (0, 1, 0.0)
    assert 'name="harness_cached_answers" value="1"' in (project.root / "report.xml").read_text()


DECIDED_BY_CHECKS = """\
metadata: {name: Mostly checked, version: "1.0.0"}
threshold: 0.8
dimensions:
  tone:
    weight: 0.5
    description: "warm"
  greeting:
    weight: 0.5
    description: "Says hello"
    check:
      contains: {all: [hello]}
"""


def test_no_judge_call_when_the_checks_decide_and_no_revision_follows(
        project: Project, mock_judge: MockJudge) -> None:
    project.judged("agent: judged_writer\ncases:\n  - id: cold\n    inputs: {text: 'good day'}\n")
    project.rubric("judged", DECIDED_BY_CHECKS)
    project.write("stubborn.py", "def revise(request):\n    return request['artifact']\n")
    agents_file = project.root / "suites" / "agents.yaml"
    agents_file.write_text(agents_file.read_text() + "    reviser: {python: \"stubborn:revise\"}\n"
                                                      "    max_attempts: 2\n")
    mock_judge("checks-decide", {"overallScore": 1.0, "passed": True, "feedback": "JUDGE-FEEDBACK",
                                 "suggestedFixes": [],
                                 "dimensionScores": {"tone": {"score": 1.0, "weight": 0.5, "reason": "warm"}}})
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    # attempt 1: the judge's feedback goes to the reviser; attempt 2 is the last: the checks (0.5 at most,
    # below 0.8) decide, so the judge is not asked, live or from the response cache
    assert len(judge_calls(project)) == 1
    assert len(model_calls(project)) == 1
    second = evaluation(project, 2)
    assert second["dimensionScores"]["tone"]["score"] is None
    assert second["dimensionScores"]["tone"]["reason"] == ("not judged: the checks already decide the verdict "
                                                             "(fail) and no revision follows")
    assert second["metadata"]["notJudged"] == ["tone"] and second["metadata"]["indeterminate"] == []
    assert [(r["status"], r["outcome"]) for r in project.runs()] == [("failed", "failed"), ("escalated", "escalated")]


def test_always_judge_scores_an_item_its_checks_already_failed(project: Project, mock_judge: MockJudge) -> None:
    # a comparison's means need every item scored: `always_judge: true` asks the judge even when the checks decide
    project.judged("agent: judged_writer\ncases:\n  - id: cold\n    inputs: {text: 'good day'}\n")
    project.rubric("judged", DECIDED_BY_CHECKS)
    agents_file = project.root / "suites" / "agents.yaml"
    agents_file.write_text(agents_file.read_text() + "    always_judge: true\n    escalate_on_fail: false\n")
    mock_judge("always", {"overallScore": 1.0, "passed": True, "feedback": "warm enough", "suggestedFixes": [],
                          "dimensionScores": {"tone": {"score": 0.6, "weight": 0.5, "reason": "polite"}}})
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert len(judge_calls(project)) == 1
    (run,) = project.runs()
    assert run["overall_score"] == pytest.approx(0.3)  # 0.5 x 0.6 + 0.5 x 0: a score, where the default has none
    result.stdout.fnmatch_lines(["judged * 1 * 0 * 0% of 1 * 0.300 *"])
