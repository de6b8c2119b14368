"""Checks against a reference answer: equals, similar and json_path, as a rubric author writes them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project, error_sections
from harness.base.errors import HarnessConfigError
from harness.checks import CheckContext, CheckResult, check_slots, parse_check
from harness.checks.compare import normalize_text

FIELD = "dimensions.d.check"


def ctx(expected: Any = None, **inputs: Any) -> CheckContext:
    return CheckContext(inputs=inputs, today=dt.date(2026, 1, 31), expected=expected)


def rubric(tmp_path: Path) -> Path:
    return tmp_path / "rubrics" / "qa.yaml"


def parse(raw: Any, tmp_path: Path):
    return parse_check(raw, path=rubric(tmp_path), field=FIELD, base_dir=tmp_path, import_root=tmp_path)


def run(raw: Any, tmp_path: Path, artifact: str, context: CheckContext | None = None) -> CheckResult:
    return parse(raw, tmp_path).run(artifact, context or ctx())


def config_error(raw: Any, tmp_path: Path) -> HarnessConfigError:
    with pytest.raises(HarnessConfigError) as info:
        parse(raw, tmp_path)
    text = str(info.value)
    assert text.startswith(f"{rubric(tmp_path)}: {FIELD}"), text
    assert "(fix: " in text and "\n" not in text, text
    return info.value


# ------------------------------------------------------------------ normalisation


@pytest.mark.parametrize(("steps", "text", "normalised"), [
    (("case", "whitespace"), "  The  Eiffel\nTower ", "the eiffel tower"),
    ((), "  The Eiffel Tower ", "  The Eiffel Tower "),
    (("case", "whitespace", "punctuation", "articles"), "The Eiffel Tower!", "eiffel tower"),
    (("punctuation",), "U.S.A., «yes»", "USA yes"),
    (("articles", "whitespace"), "An apple a day, the end", "apple day, end"),
    (("case", "articles", "whitespace"), "THEORY of THE anthem", "theory of anthem"),  # whole words only
])
def test_normalisations_follow_squad(steps: tuple[str, ...], text: str, normalised: str) -> None:
    assert normalize_text(text, steps) == normalised


# ------------------------------------------------------------------ equals


def test_equals_the_expected_answer_ignoring_case_and_whitespace_by_default(tmp_path: Path) -> None:
    check = parse({"equals": {}}, tmp_path)
    assert check.kind == "equals" and check_slots(check) == ("expected",)
    ok = check.run("  paris\n", ctx("Paris"))
    assert ok.score == 1.0 and ok.fixes == ()
    assert ok.reason == "equals 'Paris' (ignoring case, whitespace)"
    bad = check.run("Paris, France", ctx("Paris"))
    assert bad.score == 0.0
    assert bad.reason == "expected 'Paris', found 'Paris, France' (ignoring case, whitespace)"
    assert bad.fixes == ("Answer with exactly 'Paris' and nothing else",)


def test_equals_shorthand_with_its_own_value_needs_no_expected(tmp_path: Path) -> None:
    check = parse({"equals": "Paris"}, tmp_path)
    assert check_slots(check) == ()
    assert check.run("PARIS", ctx()).score == 1.0
    assert check.run("Paris", ctx("Lyon")).score == 1.0  # its own value wins over the case's


def test_equals_a_list_means_any_of_them(tmp_path: Path) -> None:
    check = parse({"equals": {"value": ["Paris", "Paris, France", "City of Light", "Lutetia"]}}, tmp_path)
    assert check.run("paris, france", ctx()).score == 1.0
    assert check.run("lutetia", ctx()).score == 1.0
    bad = check.run("Lyon", ctx())
    assert bad.score == 0.0
    assert "expected one of 'Paris', 'Paris, France', 'City of Light' (+1 more), found 'Lyon'" in bad.reason
    expected_list = parse({"equals": {}}, tmp_path)
    assert expected_list.run("Lutèce", ctx(["Lutetia", "Lutèce"])).score == 1.0


def test_equals_numbers_compare_as_their_text(tmp_path: Path) -> None:
    assert run({"equals": {}}, tmp_path, "42\n", ctx(42)).score == 1.0
    assert run({"equals": {"value": 3.5}}, tmp_path, "3.5").score == 1.0
    assert run({"equals": {}}, tmp_path, "The answer is 42", ctx(42)).score == 0.0


def test_equals_normalize_false_is_exact_and_a_list_picks(tmp_path: Path) -> None:
    exact = {"equals": {"value": "Paris", "normalize": False}}
    assert run(exact, tmp_path, "Paris").score == 1.0
    bad = run(exact, tmp_path, "paris")
    assert bad.score == 0.0 and bad.reason.endswith("(exactly)")
    squad = {"equals": {"value": "Eiffel Tower", "normalize": ["case", "whitespace", "punctuation", "articles"]}}
    assert run(squad, tmp_path, "The Eiffel-Tower.").score == 0.0  # the hyphen joins the words
    assert run(squad, tmp_path, "the eiffel tower!").score == 1.0


def test_equals_shows_long_answers_truncated_on_one_line(tmp_path: Path) -> None:
    result = run({"equals": "short"}, tmp_path, "word " * 100 + "\nmore")
    assert result.score == 0.0
    assert "\n" not in result.reason and len(result.reason) < 160
    assert "found 'word word" in result.reason and "...'" in result.reason


def test_equals_without_an_expected_answer_names_the_check(tmp_path: Path) -> None:
    check = parse({"equals": {"normalize": False}}, tmp_path)
    with pytest.raises(HarnessConfigError) as info:
        check.run("Paris", ctx())
    assert str(info.value) == (f"{rubric(tmp_path)}: {FIELD}.equals: the case has no expected answer to compare "
                               "with (fix: add `expected:` to the case, or give the check its own `value:`)")
    with pytest.raises(HarnessConfigError, match=r"the case's expected answer \{'city': 'Paris'\} is not text"):
        check.run("Paris", ctx({"city": "Paris"}))


# ------------------------------------------------------------------ similar


def test_similar_scores_the_similarity_without_a_threshold(tmp_path: Path) -> None:
    check = parse({"similar": {}}, tmp_path)
    assert check.kind == "similar" and check_slots(check) == ("expected",)
    same = check.run("The capital is  PARIS", ctx("the capital is paris"))
    assert same.score == 1.0 and same.fixes == ()
    close = check.run("The capital is Pari", ctx("The capital is Paris"))
    assert 0.9 < close.score < 1.0
    assert close.reason == f"similarity {close.score:.2f} to 'The capital is Paris' (ratio)"
    assert close.fixes == (f"Bring the answer closer to 'The capital is Paris' (similarity {close.score:.2f})",)
    assert check.run("zzzz", ctx("Paris")).score < 0.2


def test_similar_with_a_threshold_passes_or_fails(tmp_path: Path) -> None:
    raw = {"similar": {"value": "the quick brown fox", "threshold": 0.8}}
    ok = run(raw, tmp_path, "the quick brown foxes")
    assert ok.score == 1.0
    assert ok.reason.startswith("similarity 0.9") and ok.reason.endswith("(ratio, threshold 0.80)")
    bad = run(raw, tmp_path, "a slow red dog")
    assert bad.score == 0.0
    assert "threshold 0.80" in bad.reason and bad.fixes[0].endswith("need 0.80)")
    assert run({"similar": {"value": "abc", "threshold": 1}}, tmp_path, "ABC").score == 1.0  # at the threshold


def test_similar_tokens_is_word_set_overlap_and_a_list_takes_the_closest(tmp_path: Path) -> None:
    raw = {"similar": {"value": ["nothing alike here", "Paris is the capital of France"], "method": "tokens"}}
    result = run(raw, tmp_path, "France's capital is Paris")
    # words {france, s, capital, is, paris} against {paris, is, the, capital, of, france}: 2*4/(5+6)
    assert result.score == pytest.approx(8 / 11)
    assert "to 'Paris is the capital of France' (tokens)" in result.reason
    assert run(raw, tmp_path, "capital of France Paris is the").score == 1.0  # order does not count


# ------------------------------------------------------------------ json_path

ANSWER = '```json\n{"answer": {"items": [{"name": "Paris", "pop": 2100000}], "ok": true, "note": null}}\n```'


@pytest.mark.parametrize("path", ["answer.items.0.name", "$.answer.items[0].name", "$['answer']['items'][0].name"])
def test_json_path_equals_in_any_spelling_of_the_path(tmp_path: Path, path: str) -> None:
    result = run({"json_path": {"path": path, "equals": "paris"}}, tmp_path, ANSWER)
    assert result == CheckResult(1.0, "answer.items.0.name = 'Paris' (ignoring case, whitespace)")


def test_json_path_equals_fails_with_the_value_found(tmp_path: Path) -> None:
    result = run({"json_path": {"path": "answer.items.0.name", "equals": "Lyon", "normalize": False}}, tmp_path,
                 ANSWER)
    assert result.score == 0.0
    assert result.reason == "answer.items.0.name = 'Paris', expected 'Lyon' (exactly)"
    assert result.fixes == ("Make answer.items.0.name 'Lyon' (now 'Paris')",)


def test_json_path_compares_data_and_text(tmp_path: Path) -> None:
    assert run({"json_path": {"path": "answer.items.0.pop", "equals": 2100000}}, tmp_path, ANSWER).score == 1.0
    assert run({"json_path": {"path": "answer.items.0.pop", "equals": "2100000"}}, tmp_path, ANSWER).score == 1.0
    assert run({"json_path": {"path": "answer.ok", "equals": True}}, tmp_path, ANSWER).score == 1.0
    assert run({"json_path": {"path": "answer.ok", "equals": 1}}, tmp_path, ANSWER).score == 0.0  # true is not 1
    assert run({"json_path": {"path": "answer.note", "equals": None}}, tmp_path, ANSWER).score == 1.0
    items = {"json_path": {"path": "answer.items", "equals": [{"name": "Paris", "pop": 2100000}]}}
    assert run(items, tmp_path, ANSWER).score == 1.0


def test_json_path_in_is_any_of(tmp_path: Path) -> None:
    raw = {"json_path": {"path": "answer.items.0.name", "in": ["Lyon", "PARIS"]}}
    assert run(raw, tmp_path, ANSWER).score == 1.0
    bad = run({"json_path": {"path": "answer.items.0.name", "in": ["Lyon", "Nice"]}}, tmp_path, ANSWER)
    assert bad.score == 0.0 and "expected one of 'Lyon', 'Nice'" in bad.reason


def test_json_path_matches_a_regex(tmp_path: Path) -> None:
    raw = {"json_path": {"path": "answer.items.0.pop", "matches": r"^\d{6,7}$"}}
    ok = run(raw, tmp_path, ANSWER)
    assert ok.score == 1.0 and ok.reason == r"answer.items.0.pop = '2100000' matches /^\d{6,7}$/"
    bad = run({"json_path": {"path": "answer.items.0.name", "matches": "^L"}}, tmp_path, ANSWER)
    assert bad.score == 0.0 and bad.fixes == ("Make answer.items.0.name match /^L/ (now 'Paris')",)


def test_json_path_exists(tmp_path: Path) -> None:
    assert run({"json_path": {"path": "answer.items.0", "exists": True}}, tmp_path, ANSWER).score == 1.0
    assert run({"json_path": {"path": "answer.note", "exists": True}}, tmp_path, ANSWER).score == 1.0  # null is there
    gone = run({"json_path": {"path": "answer.items.3", "exists": True}}, tmp_path, ANSWER)
    assert gone == CheckResult(0.0, "answer.items.3 is missing in the JSON (must be)",
                               ("Add answer.items.3 to the JSON",))
    banned = run({"json_path": {"path": "answer.ok", "exists": False}}, tmp_path, ANSWER)
    assert banned.score == 0.0 and banned.fixes == ("Remove answer.ok from the JSON",)


def test_json_path_on_an_artifact_without_json_or_without_the_value(tmp_path: Path) -> None:
    raw = {"json_path": {"path": "answer.city", "equals": "Paris"}}
    prose = run(raw, tmp_path, "The answer is Paris.")
    assert prose.score == 0.0 and prose.reason.startswith("artifact is not valid JSON")
    broken = run(raw, tmp_path, '```json\n{"answer": \n```')
    assert broken.score == 0.0 and broken.reason.startswith("```json block is not valid JSON")
    missing = run(raw, tmp_path, '{"answer": {}}')
    assert missing == CheckResult(0.0, "no value at answer.city in the JSON", ("Add answer.city to the JSON",))
    assert run({"json_path": {"path": "$", "equals": "Paris"}}, tmp_path, '"Paris"').score == 1.0  # the root


# ------------------------------------------------------------------ configuration errors


@pytest.mark.parametrize(("raw", "field", "problem"), [
    ({"equals": None}, f"{FIELD}.equals", "expected text, a number or a non-empty list of them, got nothing"),
    ({"equals": []}, f"{FIELD}.equals", "non-empty list"),
    ({"equals": ["a", {"b": 1}]}, f"{FIELD}.equals[1]", "expected text, a number"),
    ({"equals": {"value": "a", "normalise": True}}, f"{FIELD}.equals.normalise", "did you mean 'normalize'"),
    ({"equals": {"normalize": "yes"}}, f"{FIELD}.equals.normalize", "true, false or a list from case"),
    ({"equals": {"normalize": ["case", "accents"]}}, f"{FIELD}.equals.normalize[1]", "unknown normalisation"),
    ({"similar": {"threshold": 1.5}}, f"{FIELD}.similar.threshold", "1.5 is outside 0..1"),
    ({"similar": {"method": "cosine"}}, f"{FIELD}.similar.method", "unknown similarity method 'cosine'"),
    ({"json_path": {"equals": "a"}}, f"{FIELD}.json_path", "needs at least one of path"),
    ({"json_path": {"path": "a"}}, f"{FIELD}.json_path", "has no test; a json_path check has exactly one of"),
    ({"json_path": {"path": "a", "equals": 1, "in": [1]}}, f"{FIELD}.json_path", "has equals and in"),
    ({"json_path": {"path": "a..b", "exists": True}}, f"{FIELD}.json_path.path", "bad JSON path 'a..b'"),
    ({"json_path": {"path": "a[x]", "exists": True}}, f"{FIELD}.json_path.path", "bad JSON path"),
    ({"json_path": {"path": "a", "in": []}}, f"{FIELD}.json_path.in", "non-empty list"),
    ({"json_path": {"path": "a", "matches": "(x"}}, f"{FIELD}.json_path.matches", "invalid regular expression"),
    ({"json_path": {"path": "a", "matches": "(a+)+"}}, f"{FIELD}.json_path.matches", "backtrack without bound"),
    ({"json_path": {"path": "a", "exists": "yes"}}, f"{FIELD}.json_path.exists", "true or false"),
    ({"json_path": {"path": "a", "exists": True, "normalize": False}}, f"{FIELD}.json_path.normalize",
     "no meaning with exists"),
])
def test_bad_compare_config(tmp_path: Path, raw: Any, field: str, problem: str) -> None:
    err = config_error(raw, tmp_path)
    assert err.field == field
    assert problem in err.problem


# ------------------------------------------------------------------ end to end

QA_RUBRIC = """\
metadata:
  name: QA
  version: "1.0.0"
  agent: writer
threshold: 1.0
dimensions:
  exact:
    weight: 0.5
    description: "The answer, and only the answer"
    check:
      equals: "{expected}"
  close:
    weight: 0.5
    description: "Close to the reference"
    check:
      similar: {threshold: 0.5}
"""

QA_AGENTS = """\
agents:
  writer:
    rubric: qa
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
    max_attempts: 1
"""

QA_CASES = """\
agent: writer
cases:
  - id: right
    inputs: {text: " paris "}
    expected: Paris
  - id: any-of
    inputs: {text: "Paris, France"}
    expected: [Paris, "Paris, France"]
  - id: wrong
    inputs: {text: "Lyon"}
    expected: Paris
"""


def test_equals_and_similar_score_cases_by_their_expected_answers(project: Project) -> None:
    project.rubric("qa", QA_RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(QA_AGENTS)
    project.cases("writer", QA_CASES)
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*::right PASSED*", "*::any-of PASSED*", "*::wrong FAILED*"])
    assert "expected 'Paris', found 'Lyon'" in result.stdout.str()
    assert {row["case_id"]: row["overall_score"] for row in project.runs()}["right"] == 1.0


def test_a_case_without_an_expected_answer_is_refused_at_collection(project: Project) -> None:
    project.rubric("qa", QA_RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(QA_AGENTS)
    project.cases("writer", "agent: writer\ncases:\n  - id: bare\n    inputs: {text: Paris}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in result.stdout.str()
    ((line,),) = error_sections(result)
    assert line.startswith("suites/writer.cases.yaml: case bare: the check of dimension ")
    assert "uses {expected}, which this case cannot fill" in line and "(fix: give the case `expected:`" in line
