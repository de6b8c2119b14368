"""Check options with case slots: filled from each case's inputs and expected answer when the check runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project, error_sections
from harness.base.errors import HarnessConfigError
from harness.checks import (
    CheckContext,
    CheckResult,
    ContainsCheck,
    Fields,
    RegexCheck,
    TemplatedCheck,
    check_slots,
    parse_check,
    with_plugin_kinds,
)

FIELD = "dimensions.d.check"


def ctx(expected: Any = None, **inputs: Any) -> CheckContext:
    return CheckContext(inputs=inputs, today=dt.date(2026, 1, 31), expected=expected)


def rubric(tmp_path: Path) -> Path:
    return tmp_path / "rubrics" / "qa.yaml"


def parse(raw: Any, tmp_path: Path, kinds=None):
    return parse_check(raw, path=rubric(tmp_path), field=FIELD, base_dir=tmp_path, import_root=tmp_path, kinds=kinds)


def load_error(raw: Any, tmp_path: Path) -> HarnessConfigError:
    with pytest.raises(HarnessConfigError) as info:
        parse(raw, tmp_path)
    return info.value


def run_error(check: Any, artifact: str, context: CheckContext) -> str:
    with pytest.raises(HarnessConfigError) as info:
        check.run(artifact, context)
    text = str(info.value)
    assert "\n" not in text and "(fix: " in text, text
    return text


# ------------------------------------------------------------------ filled from the case


def test_contains_all_of_the_expected_answer(tmp_path: Path) -> None:
    check = parse({"contains": {"all": ["{expected}"]}}, tmp_path)
    assert isinstance(check, TemplatedCheck) and check.kind == "contains"
    assert check_slots(check) == ("expected",)
    assert check.run("The capital is Paris.", ctx("Paris")) == CheckResult(1.0, "1/1 required phrases present")
    missed = check.run("The capital is Paris.", ctx("Lyon"))
    assert missed.score == 0.0 and missed.fixes == ("Add 'Lyon'",)


def test_a_whole_slot_keeps_a_list_expected_as_a_list(tmp_path: Path) -> None:
    check = parse({"contains": {"any": "{expected}"}}, tmp_path)
    assert check.run("It is Lutetia.", ctx(["Paris", "Lutetia"])).score == 1.0
    none = check.run("It is Lyon.", ctx(["Paris", "Lutetia"]))
    assert none.score == 0.0 and "none of 'Paris', 'Lutetia' present" in none.reason
    assert check.check_for(ctx(["Paris", "Lutetia"])) == ContainsCheck(any=("Paris", "Lutetia"))
    assert check.run("It is Paris.", ctx("Paris")).score == 1.0  # one expected answer is a list of one
    assert check.run("It is 42.", ctx(42)).score == 1.0  # a number is its text
    numbers = parse({"contains": {"all": ["{expected}", "{inputs.year}"]}}, tmp_path)
    assert numbers.run("42 in 2026", ctx(42, year=2026)).score == 1.0
    assert numbers.run("41 in 2026", ctx(42, year=2026)).fixes == ("Add '42'",)


def test_a_regex_pattern_from_the_inputs(tmp_path: Path) -> None:
    check = parse({"regex": {"pattern": "{inputs.p}", "flags": "i"}}, tmp_path)
    assert check_slots(check) == ("inputs.p",)
    assert check.run("Order ABC-123", ctx(p=r"abc-\d+")).score == 1.0
    assert check.run("Order ABC-123", ctx(p=r"xyz-\d+")).score == 0.0


def test_slots_inside_text_and_in_every_spelling(tmp_path: Path) -> None:
    check = parse({"contains": {"all": ["capital of {inputs.country}", "{{ inputs.city.name }}", "{lang}"]}}, tmp_path)
    assert check_slots(check) == ("inputs.country", "inputs.city.name", "lang")
    context = ctx(country="France", city={"name": "Paris"}, lang="French")
    assert check.run("Paris, capital of France, speaks French", context).score == 1.0
    assert check.check_for(context).all == ("capital of France", "Paris", "French")
    single = parse({"contains": {"all": ["{input}"]}}, tmp_path)
    assert single.run("about Paris", ctx(q="Paris")).score == 1.0


def test_braces_that_are_not_slots_stay_text(tmp_path: Path) -> None:
    check = parse({"regex": r"\d{2,3}"}, tmp_path)
    assert isinstance(check, RegexCheck) and check_slots(check) == ()
    assert check.run("room 42", ctx()).score == 1.0
    assert check.run("room 7", ctx()).score == 0.0
    literal = parse({"contains": {"all": ['{"score": 1}']}}, tmp_path)
    assert isinstance(literal, ContainsCheck) and literal.all == ('{"score": 1}',)


def test_a_number_from_the_case_fills_a_number_option(tmp_path: Path) -> None:
    check = parse({"length": {"max_words": "{inputs.limit}"}}, tmp_path)  # a placeholder text is no number
    assert check.run("one two three", ctx(limit=3)).score == 1.0
    assert check.run("one two three", ctx(limit=2)).score == 0.0
    similar = parse({"similar": {"threshold": "{inputs.t}"}}, tmp_path)
    assert check_slots(similar) == ("inputs.t", "expected")  # similar compares with {expected} by default
    assert similar.run("Pari", ctx("Paris", t=0.8)).score == 1.0


def test_the_kinds_that_default_to_the_expected_answer_need_it(tmp_path: Path) -> None:
    assert check_slots(parse({"equals": "{expected}"}, tmp_path)) == ("expected",)
    assert check_slots(parse({"equals": {"normalize": False}}, tmp_path)) == ("expected",)
    assert check_slots(parse({"equals": {"value": "{inputs.answer}"}}, tmp_path)) == ("inputs.answer",)
    assert check_slots(parse({"equals": "Paris"}, tmp_path)) == ()
    assert check_slots(parse({"regex": "Paris"}, tmp_path)) == ()
    assert check_slots(parse({"json_path": {"path": "{inputs.field}", "in": "{expected}"}}, tmp_path)) == (
        "inputs.field", "expected")


def test_equals_the_expected_answer_through_a_template(tmp_path: Path) -> None:
    check = parse({"equals": "{expected}"}, tmp_path)
    assert check.run(" PARIS ", ctx("Paris")).score == 1.0
    assert check.run("paris, france", ctx(["Paris", "Paris, France"])).score == 1.0  # a list: any of them
    assert check.run("42", ctx(42)).score == 1.0
    json_check = parse({"json_path": {"path": "answer", "in": "{expected}"}}, tmp_path)
    assert json_check.run('{"answer": "Lyon"}', ctx(["Paris", "Lyon"])).score == 1.0
    assert json_check.run('{"answer": "Lyon"}', ctx("Paris")).score == 0.0


def test_a_plugin_kind_is_templated_too(tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class MaxWords:
        limit: int
        kind = "max_words"

        def run(self, artifact: str, context: CheckContext) -> CheckResult:
            return CheckResult(float(len(artifact.split()) <= self.limit), f"max {self.limit}")

    def parse_max_words(options: Any, fields: Fields) -> MaxWords:
        return MaxWords(fields.integer(options, None, minimum=1))

    kinds = with_plugin_kinds([("myplugin.py", {"max_words": parse_max_words})])
    check = parse({"max_words": "{inputs.n}"}, tmp_path, kinds)
    assert check_slots(check) == ("inputs.n",)
    assert check.run("a b c", ctx(n=3)) == CheckResult(1.0, "max 3")
    assert check.run("a b c", ctx(n=2)).score == 0.0
    text = run_error(check, "a b c", ctx(n=0))
    assert f"{FIELD}.max_words: filled from the case ({{inputs.n}} = 0): expected a whole number >= 1" in text


def test_parsed_checks_are_cached_per_filled_options_and_the_check_is_frozen(tmp_path: Path) -> None:
    check = parse({"regex": {"pattern": "{inputs.p}"}}, tmp_path)
    first = check.check_for(ctx(p="a+b"))
    assert check.check_for(ctx(p="a+b", other="x")) is first
    assert check.check_for(ctx(p="c")) is not first
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.options = {}  # type: ignore[misc]


def test_one_templated_check_runs_on_many_threads_at_once(tmp_path: Path) -> None:
    check = parse({"contains": {"all": ["{expected}"]}}, tmp_path)
    words = [f"word{n}" for n in range(40)]

    def score(n: int) -> tuple[float, float]:
        own = check.run(f"this has {words[n]}", ctx(words[n])).score
        other = check.run(f"this has {words[n]}", ctx(words[(n + 1) % 40])).score
        return own, other

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(score, range(40))) == [(1.0, 0.0)] * 40


# ------------------------------------------------------------------ mistakes, when the rubric loads


@pytest.mark.parametrize(("raw", "field", "problem"), [
    ({"equals": {"valu": "{expected}"}}, f"{FIELD}.equals.valu", "unknown key (did you mean 'value'?)"),
    ({"contains": {"all": ["{expected}"], "case": True}}, f"{FIELD}.contains.case", "unknown key"),
    ({"regex": {"pattern": "({inputs.p}"}}, f"{FIELD}.regex.pattern", "invalid regular expression '({inputs.p}'"),
    ({"regex": {"pattern": "{inputs.p}", "flags": "q"}}, f"{FIELD}.regex.flags", "unknown regex flag"),
    ({"json_path": {"path": "a..{inputs.k}", "equals": "x"}}, f"{FIELD}.json_path.path", "bad JSON path"),
    ({"similar": {"value": "{expected}", "method": "cosine"}}, f"{FIELD}.similar.method", "unknown similarity method"),
])
def test_what_the_options_alone_get_wrong_is_a_load_error(tmp_path: Path, raw: Any, field: str,
                                                          problem: str) -> None:
    err = load_error(raw, tmp_path)
    text = str(err)
    assert text.startswith(f"{rubric(tmp_path)}: {field}: "), text
    assert problem in err.problem and err.fix and "\n" not in text


def test_an_option_only_the_case_can_tell_waits_for_the_case(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text('{"type": "object", "required": ["answer"]}')
    check = parse({"json_schema": {"schema": "{inputs.schema}"}}, tmp_path)  # a file name from the case
    assert check_slots(check) == ("inputs.schema",)
    assert check.run('{"answer": 1}', ctx(schema="answer.json")).score == 1.0
    assert check.run('{"other": 1}', ctx(schema="answer.json")).score == 0.0
    text = run_error(check, "{}", ctx(schema="nope.json"))
    assert text.startswith(f"{rubric(tmp_path)}: {FIELD}.json_schema.schema: filled from the case "
                           "({inputs.schema} = 'nope.json'): cannot read schema file 'nope.json'"), text


# ------------------------------------------------------------------ mistakes, when the case runs


def test_a_case_without_the_value_names_the_slot_and_the_fix(tmp_path: Path) -> None:
    check = parse({"contains": {"all": ["{expected}", "{inputs.city}"]}}, tmp_path)
    assert run_error(check, "Paris", ctx(city="Paris")) == (
        f"{rubric(tmp_path)}: {FIELD}.contains: the case has no expected answer to fill {{expected}} "
        "(fix: add `expected:` to the case, or take {expected} out of the check)")
    assert run_error(check, "Paris", ctx("Paris", town="Paris")) == (
        f"{rubric(tmp_path)}: {FIELD}.contains: the case has no input for {{inputs.city}} (its inputs: town) "
        "(fix: add it to the case's inputs, or take {inputs.city} out of the check)")


def test_a_filled_option_that_is_invalid_names_the_case_values(tmp_path: Path) -> None:
    check = parse({"regex": {"pattern": "^{inputs.prefix}"}}, tmp_path)
    text = run_error(check, "x", ctx(prefix="(unclosed"))
    assert text.startswith(f"{rubric(tmp_path)}: {FIELD}.regex.pattern: filled from the case "
                           "({inputs.prefix} = '(unclosed'): invalid regular expression '^(unclosed'"), text
    assert "(fix: correct the case's {inputs.prefix} so the filled option is valid, or fix the pattern" in text
    listed = parse({"contains": {"any": "{expected}"}}, tmp_path)
    text = run_error(listed, "x", ctx({"city": "Paris"}))
    assert (f"{FIELD}.contains.any: filled from the case ({{expected}} = {{'city': 'Paris'}}): expected text or a "
            "non-empty list of text, got {'city': 'Paris'}") in text


# ------------------------------------------------------------------ end to end

TEMPLATED_RUBRIC = """\
metadata:
  name: Templated
  version: "1.0.0"
  agent: writer
threshold: 1.0
dimensions:
  answer:
    weight: 0.5
    description: "Names the expected answer"
    check:
      contains: {any: "{expected}"}
  code:
    weight: 0.5
    description: "Quotes the order code"
    check:
      regex: {pattern: '{inputs.code}-\\d{2,3}'}
"""

TEMPLATED_AGENTS = """\
agents:
  writer:
    rubric: templated
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
    max_attempts: 1
"""

TEMPLATED_CASES = """\
agent: writer
cases:
  - id: both
    inputs: {text: "Paris, order AB-123", code: AB}
    expected: [Paris, Lutetia]
  - id: wrong-code
    inputs: {text: "Lutetia, order AB-123", code: CD}
    expected: [Paris, Lutetia]
"""


def templated_project(project: Project, cases: str = TEMPLATED_CASES) -> Project:
    project.rubric("templated", TEMPLATED_RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(TEMPLATED_AGENTS)
    project.cases("writer", cases)
    return project


def test_each_case_fills_the_rubric_checks_with_its_own_values(project: Project) -> None:
    result = templated_project(project).run("suites/", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*::both PASSED*", "*::wrong-code FAILED*"])
    assert r"0 matches of /CD-\d{2,3}/" in result.stdout.str()
    assert {row["case_id"]: row["overall_score"] for row in project.runs()} == {"both": 1.0, "wrong-code": 0.5}


def test_templated_checks_work_under_xdist(project: Project) -> None:
    result = templated_project(project).run("suites/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=1, failed=1)
    assert {row["case_id"]: row["overall_score"] for row in project.runs()} == {"both": 1.0, "wrong-code": 0.5}


def test_a_rubric_check_mistake_is_a_one_line_collection_error(project: Project) -> None:
    templated_project(project)
    project.rubric("templated", TEMPLATED_RUBRIC.replace("{any: ", "{anyy: "))
    result = project.run("rubrics/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in result.stdout.str()
    ((line,),) = error_sections(result)
    assert line.startswith("rubrics/templated.yaml: dimensions.answer.check.contains.anyy: unknown key "
                           "(did you mean 'any'?)"), line


def test_a_case_that_cannot_fill_a_slot_is_refused_at_collection(project: Project) -> None:
    templated_project(project, "agent: writer\ncases:\n  - id: no-code\n    inputs: {text: x}\n    expected: x\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    ((line,),) = error_sections(result)
    assert line.startswith("suites/writer.cases.yaml: case no-code: ") and "{inputs.code}" in line, line


def test_a_case_value_that_makes_an_option_invalid_ends_the_case_in_one_line(project: Project) -> None:
    templated_project(project, "agent: writer\ncases:\n  - id: bad-code\n    inputs: {text: x, code: '(AB'}\n"
                               "    expected: x\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out
    assert ("rubrics/templated.yaml: dimensions.code.check.regex.pattern: filled from the case ({inputs.code} = "
            "'(AB'): invalid regular expression") in out
