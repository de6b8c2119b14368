"""Judge ensembles (``judge: {models: [...], aggregate: ...}``): several judges asked the same question, each one's
answer kept, their scores combined per dimension, their agreement measured (Cohen's and Fleiss' kappa).

The logic runs on scripted mock judges; the mixed-provider run puts one judge on each of the fake Anthropic and
OpenAI servers (the SDK paths) and one on the mock. The kappa values are checked against hand computations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, JUDGED_CASES, Project, error_sections, prompt_text
from harness.base.models import Dimension
from harness.base.stats import cohen_kappa, fleiss_kappa, kappa, observed_agreement
from harness.evaluation.ensemble import agreement_lines, combine
from harness.loading.suites import load_suite
from harness.testing import FakeAnthropic, judge_responder
from harness.testing.fake_openai import FakeOpenAI
from harness.testing.fake_openai import judge_responder as openai_judge

# --- kappa, by hand -------------------------------------------------------------------------------------------


def test_cohens_kappa_of_two_judges_matches_the_hand_computation() -> None:
    # 10 dimensions, two judges: both pass 4, A pass B fail 1, A fail B pass 2, both fail 3.
    # p_o = (4 + 3) / 10 = 0.7; A passes 5/10, B passes 6/10: p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    pairs = [("pass", "pass")] * 4 + [("pass", "fail")] + [("fail", "pass")] * 2 + [("fail", "fail")] * 3
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert kappa([list(pair) for pair in pairs]) == ("Cohen's kappa", pytest.approx(0.4))
    assert observed_agreement([list(pair) for pair in pairs]) == pytest.approx(0.7)
    # perfect agreement on two categories is 1; chance agreement of 1 (one category only) leaves kappa undefined
    assert cohen_kappa([("good", "good"), ("poor", "poor")]) == pytest.approx(1.0)
    assert cohen_kappa([("pass", "pass"), ("pass", "pass")]) is None and cohen_kappa([]) is None


def test_fleiss_kappa_of_three_judges_matches_the_hand_computation() -> None:
    # 4 dimensions, 3 judges each. Per subject, the share of agreeing pairs P_i = sum n_ij (n_ij - 1) / (3 * 2):
    #   [p, p, p] -> 6/6 = 1;  [p, p, f] -> 2/6 = 1/3;  [f, f, f] -> 1;  [p, f, f] -> 1/3;  P = (8/3) / 4 = 2/3
    # p_pass = 6/12 = 0.5, p_fail = 0.5: P_e = 0.25 + 0.25 = 0.5;  kappa = (2/3 - 0.5) / (1 - 0.5) = 1/3
    subjects = [["p", "p", "p"], ["p", "p", "f"], ["f", "f", "f"], ["p", "f", "f"]]
    assert fleiss_kappa(subjects) == pytest.approx(1 / 3)
    assert kappa(subjects) == ("Fleiss' kappa", pytest.approx(1 / 3))
    assert observed_agreement(subjects) == pytest.approx(2 / 3)
    # all three differ on a label, two of three fail a score: P = (0 + 1/3) / 2 = 1/6; categories good, fair, poor,
    # pass 1/6 each and fail 2/6: P_e = 4 * (1/6)^2 + (2/6)^2 = 8/36; kappa = (1/6 - 8/36) / (28/36) = -1/14
    assert fleiss_kappa([["good", "fair", "poor"], ["pass", "fail", "fail"]]) == pytest.approx(-1 / 14)
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa([["p", "p", "p"], ["p", "p"]])


def test_the_session_line_pools_every_dimension_all_judges_rated() -> None:
    item = {"judges": ["a", "b", "c"], "ratings": {
        "x": {"a": "p", "b": "p", "c": "p"}, "y": {"a": "p", "b": "p", "c": "f"}}}
    other = {"judges": ["a", "b", "c"], "ratings": {
        "x": {"a": "f", "b": "f", "c": "f"}, "y": {"a": "p", "b": "f", "c": "f"}, "z": {"a": "p", "b": None, "c": "p"}}}
    # the four complete subjects are those of the Fleiss example above: kappa 1/3, observed 2/3; z is left out
    assert agreement_lines([item, None, other]) == [
        "judges agree: Fleiss' kappa 0.33 over 4 dimension ratings (3 judges: a, b, c); observed agreement 67%; "
        "1 left out (a judge gave no vote)"]
    same = {"judges": ["a", "b"], "ratings": {"x": {"a": "p", "b": "p"}}}
    assert agreement_lines([same]) == [
        "judges agree: Cohen's kappa undefined over 1 dimension rating (2 judges: a, b): every vote was p, nothing "
        "to tell from chance; observed agreement 100%"]


# --- combining ------------------------------------------------------------------------------------------------


def _answers(dim: str, given: dict[str, dict[str, Any] | str], aggregate: str) -> list[dict[str, Any]]:
    """One sample of an ensemble's answer: each judge's answer to ``dim`` (a dict), or its error (a str)."""
    judges = {name: ({"error": answer} if isinstance(answer, str) else
                     {"dimensionScores": {dim: {"reason": f"{name} reason", **answer}}})
              for name, answer in given.items()}
    return [{"metadata": {"ensemble": {"aggregate": aggregate, "judges": judges}}}]


LABELS = Dimension(id="verdict", weight=1.0, description="d", choices={"good": 1.0, "fair": 0.5, "poor": 0.0})
SCORE = Dimension(id="detail", weight=1.0, description="d")
RATING = Dimension(id="stars", weight=1.0, description="d", scale=(1, 5))
CRITERION = Dimension(id="cites", weight=1.0, description="d", pass_condition="cites a source")


@pytest.mark.parametrize(("aggregate", "score", "answer"), [
    ("mean", 0.5, {"label": "fair"}), ("min", 0.0, {"label": "poor"}), ("median", 0.5, {"label": "fair"}),
    ("majority", 0.0, {"label": "poor"}),  # a three-way tie: the lowest-scoring label
])
def test_each_aggregate_on_labels(aggregate: str, score: float, answer: dict[str, Any]) -> None:
    combined = combine(LABELS, _answers("verdict", {"a": {"label": "good"}, "b": {"label": "fair"},
                                                    "c": {"label": "poor"}}, aggregate), threshold=0.8)
    assert combined.score == pytest.approx(score) and combined.answer == answer
    assert combined.judges["a"] == {"score": 1.0, "reason": "a reason", "vote": "good", "label": "good"}
    assert (("a tie between poor and fair and good: the lower, poor, taken" in combined.reason)
            == (aggregate == "majority"))


def test_majority_takes_the_most_common_answer_and_the_lower_on_a_tie() -> None:
    two_good = _answers("verdict", {"a": {"label": "good"}, "b": {"label": "poor"}, "c": {"label": "good"}},
                        "majority")
    assert combine(LABELS, two_good, 0.8).score == 1.0
    stars = _answers("stars", {"a": {"rating": 4}, "b": {"rating": 2}, "c": {"rating": 4}, "d": {"rating": 5}},
                     "majority")
    combined = combine(RATING, stars, 0.8)
    assert combined.score == 0.75 and combined.answer == {"rating": 4}  # (4 - 1) / (5 - 1)
    split = _answers("cites", {"a": {"score": 1, "weight": 1}, "b": {"score": 0, "weight": 1}}, "majority")
    combined = combine(CRITERION, split, 0.8)
    assert combined.score == 0.0 and "a tie between fail and pass: the lower, fail, taken" in combined.reason


def test_majority_on_a_continuous_score_is_the_low_median() -> None:
    # pass/fail at the threshold 0.8: 0.9 and 0.85 pass, 0.3 and 0.5 fail; a 2-2 tie takes the lower middle score
    four = _answers("detail", {n: {"score": s, "weight": 1} for n, s in zip("abcd", (0.9, 0.3, 0.85, 0.5))},
                    "majority")
    combined = combine(SCORE, four, threshold=0.8)
    assert combined.score == 0.5 and "a tie between pass and fail at 0.8: the lower score taken" in combined.reason
    three = _answers("detail", {n: {"score": s, "weight": 1} for n, s in zip("abc", (0.9, 0.3, 0.85))}, "majority")
    assert combine(SCORE, three, threshold=0.8).score == 0.85  # two of three pass: a passing judge's score
    assert combine(SCORE, three, threshold=0.8).judges["b"]["vote"] == "fail"


def test_a_failed_judge_is_recorded_and_the_others_are_combined_saying_how_many() -> None:
    given = _answers("detail", {"a": {"score": 0.9, "weight": 1}, "b": "model API server error (500 ...)",
                                "c": {"score": 0.5, "weight": 1, "indeterminate": True}}, "mean")
    combined = combine(SCORE, given, threshold=0.8)
    assert combined.score == 0.9 and combined.scores == (0.9,)
    assert "[mean of 1 of 3 judges: a 0.90, b failed, c indeterminate]" in combined.reason
    assert combined.judges["b"] == {"score": None, "error": "model API server error (500 ...)"}
    nobody = combine(SCORE, _answers("detail", {"a": "down", "b": "down"}, "mean"), threshold=0.8)
    assert nobody.score is None and nobody.reason.startswith("no judge of the ensemble scored it")


# --- agents.yaml ----------------------------------------------------------------------------------------------

RUBRIC = """\
metadata: {name: Ensemble, version: "1.0.0"}
threshold: 0.5
dimensions:
  verdict:
    weight: 0.5
    description: "the verdict"
    choices: {good: 1.0, fair: 0.5, poor: 0.0}
  detail:
    weight: 0.5
    description: "the detail"
"""

JUDGE = """\
judge:
  models: {models}
  aggregate: {aggregate}
"""
AGENTS = """\
agents:
  writer:
    rubric: ensemble
    producer: {python: "agentlib:produce"}
    evaluator: prompts/judge.md
    max_attempts: 1
"""

# Scripted judges: judge-a says good and 0.9, judge-b fair and 0.4, judge-c poor and 0.3; broken answers 500.
# Each call is a line of judge-calls.jsonl.
CONFTEST = '''
import json
import threading
from pathlib import Path

from harness.llm.providers.mock import MockAnswer, mock_model

ANSWERS = {"judge-a": ("good", 0.9), "judge-b": ("fair", 0.4), "judge-c": ("poor", 0.3)}
CALLS = Path(__file__).with_name("judge-calls.jsonl")
LOCK = threading.Lock()


def scripted(name):
    label, detail = ANSWERS[name]

    @mock_model(name)
    def answer(request):
        with LOCK, CALLS.open("a", encoding="utf-8") as log:
            log.write(json.dumps(name) + "\\n")
        return {"overallScore": 0.5, "passed": False, "dimensionScores": {
                    "verdict": {"label": label, "reason": f"{name} says {label}"},
                    "detail": {"score": detail, "weight": 0.5, "reason": f"{name} scores {detail}"}},
                "feedback": f"{name} feedback", "suggestedFixes": [f"{name} fix"]}


for name in ANSWERS:
    scripted(name)


@mock_model("broken")
def broken(request):
    return MockAnswer(error_status=500)
'''

CASES = """\
agent: writer
cases:
  - id: first
    inputs: {text: "hello friend"}
"""

SCRIPTED = "[mock/judge-a, mock/judge-b, mock/judge-c]"


def ensemble_project(project: Project, models: str = SCRIPTED, aggregate: str = "mean",
                     cases: str = CASES) -> Project:
    project.rubric("ensemble", RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.write("conftest.py", CONFTEST)
    project.write("suites/prompts/judge.md", prompt_text())
    project.agents(JUDGE.format(models=models, aggregate=aggregate) + AGENTS)
    project.cases("writer", cases)
    return project


def details(project: Project) -> list[dict[str, Any]]:
    rows = project.rows("SELECT d.*, r.overall_score, r.status FROM attempt_details d "
                        "JOIN agent_runs r ON d.run_id = r.id ORDER BY r.id")
    for row in rows:
        row["dimensions"] = json.loads(row["dimensions"])
        row["model_usage"] = json.loads(row["model_usage"]) if row["model_usage"] else None
    return rows


def item_result(report: Path) -> dict[str, Any]:
    """The harness_ properties JUnit XML wrote for the one test case."""
    import xml.etree.ElementTree as ET

    case = ET.parse(report).getroot().find(".//testcase")
    assert case is not None
    return {p.get("name"): p.get("value") for p in case.iter("property")}


@pytest.mark.parametrize(("aggregate", "overall", "verdict", "detail", "outcome"), [
    # verdict: good 1.0, fair 0.5, poor 0.0; detail: 0.9, 0.4, 0.3; overall = 0.5 verdict + 0.5 detail vs 0.5
    ("mean", 0.516667, 0.5, 0.533333, "passed"),
    ("min", 0.15, 0.0, 0.3, "failed"),
    ("median", 0.45, 0.5, 0.4, "failed"),
    ("majority", 0.2, 0.0, 0.4, "failed"),  # verdict: a three-way tie goes to poor; detail: the low median
])
def test_each_aggregate_in_a_run(project: Project, aggregate: str, overall: float, verdict: float, detail: float,
                                 outcome: str) -> None:
    ensemble_project(project, aggregate=aggregate)
    result = project.run("suites/", "--junitxml=report.xml")
    result.assert_outcomes(**{outcome: 1})
    (row,) = details(project)
    assert row["overall_score"] == pytest.approx(overall, abs=2e-6)
    dims = row["dimensions"]
    assert dims["verdict"]["score"] == pytest.approx(verdict) and dims["detail"]["score"] == pytest.approx(detail)
    # every judge's own answer is kept, in the order listed
    assert list(dims["verdict"]["judges"]) == ["mock/judge-a", "mock/judge-b", "mock/judge-c"]
    assert dims["verdict"]["judges"]["mock/judge-b"] == {"score": 0.5, "reason": "judge-b says fair",
                                                          "vote": "fair", "label": "fair"}
    assert dims["detail"]["judges"]["mock/judge-c"] == {"score": 0.3, "reason": "judge-c scores 0.3",
                                                         "vote": "fail"}
    assert f"[{aggregate} of 3 judges: mock/judge-a good (1.00), mock/judge-b fair (0.50)" in dims["verdict"]["reason"]
    # each judge's calls are counted, per model; a mock has no price: the cost is unknown
    assert set(row["model_usage"]) == {"mock/judge-a", "mock/judge-b", "mock/judge-c"}
    assert all(used["calls"] == 1 for used in row["model_usage"].values()) and row["cost_known"] == 0
    # the item's result: the judges' votes and their agreement, Fleiss' kappa -1/14 (computed by hand above)
    agreement = json.loads(item_result(project.root / "report.xml")["harness_judge_agreement"])
    assert agreement["statistic"] == "Fleiss' kappa" and agreement["kappa"] == pytest.approx(-1 / 14, abs=1e-4)
    assert agreement["ratings"] == {"verdict": {"mock/judge-a": "good", "mock/judge-b": "fair", "mock/judge-c": "poor"},
                                    "detail": {"mock/judge-a": "pass", "mock/judge-b": "fail", "mock/judge-c": "fail"}}
    result.stdout.fnmatch_lines(["judges agree: Fleiss' kappa -0.07 over 2 dimension ratings (3 judges: mock/judge-a, "
                                 "mock/judge-b, mock/judge-c); observed agreement 17%"])
    evaluation = json.loads(next(project.cycle_dir().rglob("attempt-1.eval.json")).read_text())
    assert evaluation["metadata"]["judges"]["answers"]["detail"]["mock/judge-a"]["score"] == 0.9


MIXED_AGENTS = """\
judge:
  models: [claude-haiku-4-5, openai/gpt-4.1-mini, mock/score-0.6]
  aggregate: majority
  max_tokens: 1024
  timeout_s: 5
  max_retries: 0
agents:
  judged_writer:
    rubric: judged
    producer: {python: "agentlib:produce"}
    evaluator: prompts/judge.md
    max_attempts: 1
"""


def test_three_judges_on_three_providers_each_answer_recorded_and_every_cost_counted(
        project: Project, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI) -> None:
    project.judged(JUDGED_CASES)
    project.agents(MIXED_AGENTS)
    project.write("prices.yaml", "mock/score-0.6: {input: 1, output: 2}\n")
    project.ini("harness_prices = prices.yaml\n")
    fake_anthropic.responder = judge_responder({"tone": 0.9, "clarity": 0.8})
    fake_openai.responder = openai_judge({"tone": 0.7, "clarity": 0.95})
    result = project.run("suites/", "--harness-rpm", "600")
    # tone: 0.9, 0.7, 0.6 -> two of three fail at 0.8 -> the low median 0.7; clarity: 0.8, 0.95, 0.6 -> 0.8
    # overall: 0.5 * 0.7 + 0.3 * 0.8 + 0.2 (the greeting check) = 0.79 < 0.8
    result.assert_outcomes(failed=1)
    (anthropic_request,) = fake_anthropic.requests
    (openai_request,) = fake_openai.requests
    assert "EVALUATOR-PROMPT-MARKER" in json.dumps(anthropic_request) and "EVALUATOR-PROMPT-MARKER" in json.dumps(
        openai_request)  # each judge is asked as a single judge is
    assert openai_request["model"] == "gpt-4.1-mini"
    (row,) = details(project)
    assert row["overall_score"] == pytest.approx(0.79)
    tone = row["dimensions"]["tone"]
    assert {name: judge["score"] for name, judge in tone["judges"].items()} == {
        "claude-haiku-4-5": 0.9, "openai/gpt-4.1-mini": 0.7, "mock/score-0.6": 0.6}
    assert tone["judges"]["openai/gpt-4.1-mini"]["reason"] == "fake judge: tone scored 0.7"
    # every judge's tokens and cost, per model, in the attempt's cost: all three priced, so the cost is known
    usage = row["model_usage"]
    assert set(usage) == {"claude-haiku-4-5", "openai/gpt-4.1-mini", "mock/score-0.6"}
    assert all(spent["calls"] == 1 and spent["cost_usd"] > 0 for spent in usage.values())
    assert row["cost_known"] == 1
    assert row["cost_usd"] == pytest.approx(sum(spent["cost_usd"] for spent in usage.values()))
    # votes at 0.8: tone pass, fail, fail; clarity pass, pass, fail. P = (1/3 + 1/3) / 2 = 1/3; p_pass = 3/6:
    # P_e = 0.5; Fleiss' kappa = (1/3 - 0.5) / 0.5 = -1/3
    result.stdout.fnmatch_lines(["judges agree: Fleiss' kappa -0.33 over 2 dimension ratings (3 judges: "
                                 "claude-haiku-4-5, openai/gpt-4.1-mini, mock/score-0.6); observed agreement 33%"])

    again = project.run("suites/")  # the response cache answers every judge: no request reaches a server
    again.assert_outcomes(failed=1)
    assert fake_anthropic.calls == 1 and fake_openai.calls == 1
    assert details(project)[-1]["cached_answers"] == 3


def test_a_judge_that_fails_is_recorded_and_the_others_decide(project: Project) -> None:
    # claude-haiku-4-5 has no key here (not scored), mock/broken answers 500 (an error)
    ensemble_project(project, models="[claude-haiku-4-5, mock/broken, mock/judge-a, mock/judge-c]")
    result = project.run("suites/", "--junitxml=report.xml")
    result.assert_outcomes(passed=1)  # verdict (good + poor) / 2 = 0.5, detail 0.6: 0.55 >= 0.5
    (row,) = details(project)
    assert row["overall_score"] == pytest.approx(0.55)
    judges = row["dimensions"]["detail"]["judges"]
    assert judges["claude-haiku-4-5"]["score"] is None and judges["claude-haiku-4-5"]["unscored"] is True
    assert "ANTHROPIC_API_KEY" in judges["claude-haiku-4-5"]["error"]
    assert judges["mock/broken"]["score"] is None and "500" in judges["mock/broken"]["error"]
    assert ("[mean of 2 of 4 judges: claude-haiku-4-5 not scored, mock/broken failed, mock/judge-a 0.90, "
            "mock/judge-c 0.30]") in row["dimensions"]["detail"]["reason"]
    # two judges answered: Cohen's kappa over their votes, (good, poor) and (pass, fail): they agree on none,
    # p_o = 0; judge-a's answers (good, pass) and judge-c's (poor, fail) share no category, p_e = 0: kappa 0
    agreement = json.loads(item_result(project.root / "report.xml")["harness_judge_agreement"])
    assert agreement["answered"] == ["mock/judge-a", "mock/judge-c"] and set(agreement["failed"]) == {
        "claude-haiku-4-5", "mock/broken"}
    assert agreement["statistic"] == "Cohen's kappa" and agreement["kappa"] == 0
    result.stdout.fnmatch_lines(["judges agree: Cohen's kappa 0.00 over 2 dimension ratings (2 of 4 judges answered: "
                                 "mock/judge-a, mock/judge-c); observed agreement 0%"])


def test_when_no_judge_answers_the_item_is_not_scored(project: Project) -> None:
    ensemble_project(project, models="[claude-haiku-4-5, mock/broken]")
    result = project.run("suites/", "-rs")
    result.assert_outcomes(skipped=1)
    (row,) = details(project)
    assert row["status"] == "escalated" and row["overall_score"] is None
    assert row["outcome"] == "indeterminate" and row["exit_code"] == 69
    result.stdout.fnmatch_lines(["*not scored (indeterminate): no judge of the ensemble answered (2 asked): "
                                 "claude-haiku-4-5: no ANTHROPIC_API_KEY*; mock/broken: *500*"])


def test_samples_per_judge_and_the_judge_model_option(project: Project) -> None:
    ensemble_project(project)
    result = project.run("suites/", "--harness-judge-samples", "2")
    result.assert_outcomes(passed=1)
    calls = [json.loads(line) for line in (project.root / "judge-calls.jsonl").read_text().splitlines()]
    assert sorted(calls) == ["judge-a"] * 2 + ["judge-b"] * 2 + ["judge-c"] * 2  # two samples per judge
    (row,) = details(project)
    assert row["dimensions"]["detail"]["judges"]["mock/judge-a"]["samples"] == [0.9, 0.9]
    # each sample's overall, its judges combined
    assert json.loads(row["samples"]) == pytest.approx([0.516667] * 2, abs=2e-6)

    # --harness-judge-model replaces the whole ensemble with its one model
    (project.root / "judge-calls.jsonl").unlink()
    single = project.run("suites/", "--harness-judge-model", "mock/score-0.9")
    single.assert_outcomes(passed=1)
    last = details(project)[-1]
    assert set(last["model_usage"]) == {"mock/score-0.9"} and not (project.root / "judge-calls.jsonl").exists()
    assert "judges" not in last["dimensions"]["detail"]
    assert "judges agree" not in single.stdout.str()


def test_under_xdist_the_controller_pools_the_workers_items(project: Project) -> None:
    ensemble_project(project, cases=CASES + """\
  - id: second
    inputs: {text: "hello again"}
""")
    result = project.run("suites/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["judges agree: Fleiss' kappa -0.07 over 4 dimension ratings (3 judges: *)*"])


@pytest.mark.parametrize(("judge", "line"), [
    ("{models: [mock/judge-a, mock/judge-b], aggregate: avg}",
     "suites/agents.yaml: judge.aggregate: unknown aggregate 'avg' (fix: use one of: majority, mean, min, median)"),
    ("{models: [], aggregate: mean}",
     "suites/agents.yaml: judge.models: expected a non-empty list of judge models, got [] (fix: write e.g. `models: "
     "[claude-sonnet-4-6, openai/gpt-4.1, mock/score-0.8]`, or `model:` for one judge)"),
    ("{models: [mock/judge-a, opnai/gpt-4.1]}",
     "suites/agents.yaml: judge.models[1]: unknown model provider 'opnai' (did you mean 'openai'?); known: "
     "anthropic, mock, openai (write provider/model, e.g. openai/gpt-4.1-mini; a plugin adds providers through "
     "pytest_harness_providers)"),
    ("{model: mock/judge-a, aggregate: min}",
     "suites/agents.yaml: judge.aggregate: combines the judges of an ensemble, and this judge is one model (fix: "
     "list the judges, e.g. `models: [claude-sonnet-4-6, openai/gpt-4.1, mock/score-0.8]`, or remove aggregate)"),
])
def test_a_bad_ensemble_is_one_collection_error_naming_file_field_and_fix(project: Project, judge: str,
                                                                         line: str) -> None:
    ensemble_project(project)
    project.agents(f"judge: {judge}\n" + AGENTS)
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert error_sections(result) == [[line]]  # one line: the file, the field, the problem and the fix


def test_an_agents_own_judge_section_over_an_ensemble(tmp_path: Path) -> None:
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "ensemble.yaml").write_text(RUBRIC)
    suite = tmp_path / "agents.yaml"
    suite.write_text("""\
judge:
  models: [mock/echo, {model: openai/gpt-4.1, base_url: "http://127.0.0.1:9"}, mock/score-0.8]
  aggregate: majority
  temperature: 0.5
agents:
  same: {rubric: ensemble, producer: {python: "m:f"}}
  colder: {rubric: ensemble, producer: {python: "m:f"}, judge: {temperature: 0, aggregate: min}}
  single: {rubric: ensemble, producer: {python: "m:f"}, judge: {model: mock/score-0.1}}
  own: {rubric: ensemble, producer: {python: "m:f"}, evaluator: {prompt: judge.md, model: mock/score-0.2}}
""")
    (tmp_path / "judge.md").write_text(prompt_text())
    agents = load_suite(suite, rubrics_dir=tmp_path / "rubrics", runner_kinds=["python", "prompt"]).agents
    same = agents["same"].judge.ensemble
    assert same is not None and same.aggregate == "majority"
    assert same.names == ("mock/echo", "openai/gpt-4.1", "mock/score-0.8")
    assert [j.temperature for j in same.judges] == [0.5] * 3 and same.judges[1].base_url == "http://127.0.0.1:9"
    colder = agents["colder"].judge.ensemble
    assert colder is not None and colder.aggregate == "min" and [j.temperature for j in colder.judges] == [0.0] * 3
    assert colder.judges[1].base_url == "http://127.0.0.1:9"  # a judge's own setting stays its own
    assert agents["single"].judge.ensemble is None and agents["single"].judge.model == "mock/score-0.1"
    own = agents["own"].models["evaluator"]  # an evaluator's own model: one judge
    assert own.ensemble is None and own.model == "mock/score-0.2"


def test_the_cost_cap_checks_every_judge_of_an_ensemble_has_a_price(project: Project) -> None:
    project.judged()
    project.agents(project.root.joinpath("suites/agents.yaml").read_text().replace(
        "  model: claude-haiku-4-5\n", "  models: [mock/score-0.9, mock/score-0.8]\n", 1))
    project.write("prices.yaml", "mock/score-0.9: {input: 1, output: 1}\nmock/echo: {input: 0, output: 0}\n")
    project.ini("harness_prices = prices.yaml\n")
    result = project.run("suites/", "--harness-max-cost", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--harness-max-cost cannot hold*mock/score-0.8*has no price*"])
