"""The LLM judge through the real anthropic SDK against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import json
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


def test_a_valid_answer_scores_the_judged_dimensions_and_the_harness_recomputes_the_overall(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    # The judge claims 0.10 and failed; the weights give 0.5*1.0 + 0.3*0.5 + 0.2*1.0 = 0.85 >= 0.80.
    fake_anthropic.queue(Reply.tool(answer(tone=1.0, clarity=0.5, overall=0.1, passed=False),
                                    usage={"input_tokens": 1000, "output_tokens": 200}))
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1)
    assert fake_anthropic.calls == 1
    data = evaluation(project)
    assert data["overallScore"] == 0.85 and data["passed"] is True
    assert data["dimensionScores"]["tone"] == {"score": 1.0, "weight": 0.5, "reason": "TONE-REASON from the judge"}
    assert data["dimensionScores"]["clarity"]["score"] == 0.5
    assert data["dimensionScores"]["greeting"]["score"] == 1.0  # the check, not the judge
    assert data["metadata"]["judgeReportedScore"] == 0.1
    assert "JUDGE-FIX: name the day" in data["suggestedFixes"]
    (row,) = project.runs()
    assert (row["status"], row["overall_score"], row["outcome"]) == ("passed", 0.85, "passed")
    assert (row["input_tokens"], row["output_tokens"]) == (1000, 200)
    assert row["model"] == "claude-haiku-4-5" and row["cost_usd"] == pytest.approx((1000 * 1 + 200 * 5) / 1e6)
    result.stdout.fnmatch_lines(["judged * 1 * 1 * 100% * 0.850 * 1.0 * 1000/200 * $0.0020"])


def test_a_judge_that_says_passed_cannot_pass_a_low_score(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    fake_anthropic.queue(Reply.tool(answer(tone=0.2, clarity=0.2, overall=0.99, passed=True)))
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


def test_an_always_invalid_answer_fails_as_validation_failed(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    bad = answer()
    bad["overallScore"] = "high"
    bad["dimensionScores"].pop("tone")
    spent = {"input_tokens": 1000, "output_tokens": 200}
    fake_anthropic.queue(Reply.tool(bad, usage=spent), Reply.tool(bad, usage=spent), Reply.tool(answer()))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    assert fake_anthropic.calls == 2  # one retry, no more
    result.stdout.fnmatch_lines(["*VALIDATION FAILED on attempt 1: validation_failed*"])
    assert "Traceback" not in result.stdout.str()
    (row,) = project.runs()
    assert row["outcome"] == "validation_failed" and row["exit_code"] == 84
    assert row["status"] == "escalated" and row["overall_score"] is None
    assert "validation_failed" in project.run_log()[0]["feedback"]
    # both calls were billed: the record, the summary and the cost cap see them
    assert (row["input_tokens"], row["output_tokens"], row["model"]) == (2000, 400, "claude-haiku-4-5")
    assert row["cost_usd"] == pytest.approx((2000 * 1 + 400 * 5) / 1e6)
    result.stdout.fnmatch_lines(["judged * 1 * 0 * 0% * - * 1.0 * 2000/400 * $0.0040"])


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
    result.stdout.fnmatch_lines(["judged: 1 not scored (indeterminate) - set ANTHROPIC_API_KEY to judge them"])
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


def test_a_judge_that_marks_a_dimension_indeterminate(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    unsure = answer()
    unsure["dimensionScores"]["tone"]["indeterminate"] = True
    fake_anthropic.queue(Reply.tool(unsure))
    result = project.run("suites/", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*the judge could not score tone*"])


def test_calibration_of_a_judged_rubric(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()

    def scores(request: dict[str, Any]) -> dict[str, float]:
        good = "GOLD-EXAMPLE-MARKER" in json.dumps(request["messages"])
        return {"tone": 1.0 if good else 0.0, "clarity": 1.0 if good else 0.0}

    fake_anthropic.responder = judge_responder(scores)
    result = project.run("rubrics/", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*gold?warm? PASSED*", "*anti?cold? PASSED*"])
    assert fake_anthropic.calls == 2


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
    assert (live["input_tokens"], live["cached_answers"], live["cost_usd"] > 0) == (1000, 0, True)
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
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged("agent: judged_writer\ncases:\n  - id: cold\n    inputs: {text: 'good day'}\n")
    project.rubric("judged", DECIDED_BY_CHECKS)
    project.write("stubborn.py", "def revise(request):\n    return request['artifact']\n")
    agents_file = project.root / "suites" / "agents.yaml"
    agents_file.write_text(agents_file.read_text() + "    reviser: {python: \"stubborn:revise\"}\n"
                                                      "    max_attempts: 2\n")
    fake_anthropic.responder = judge_responder({"tone": 1.0})
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    # attempt 1: the judge's feedback goes to the reviser; attempt 2 is the last: the checks (0.5 at most,
    # below 0.8) decide, so the judge is not asked
    assert fake_anthropic.calls == 1
    second = evaluation(project, 2)
    assert second["dimensionScores"]["tone"]["score"] is None
    assert second["dimensionScores"]["tone"]["reason"] == ("not judged: the checks already decide the verdict "
                                                             "(fail) and no revision follows")
    assert second["metadata"]["notJudged"] == ["tone"] and second["metadata"]["indeterminate"] == []
    assert [(r["status"], r["outcome"]) for r in project.runs()] == [("failed", "failed"), ("escalated", "escalated")]
