"""Check kinds by name: the built-ins' registry, and kinds that plugins add with pytest_harness_check_kinds."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project, error_sections
from harness.base.errors import HarnessConfigError
from harness.checks import (
    KNOWN_KINDS,
    CheckContext,
    CheckResult,
    Fields,
    builtin_kinds,
    check_kind,
    parse_check,
    with_plugin_kinds,
)

FIELD = "dimensions.d.check"
CTX = CheckContext(inputs={}, today=dt.date(2026, 1, 31))


@dataclass(frozen=True)
class MaxWords:
    limit: int
    kind = "max_words"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        words = len(artifact.split())
        if words <= self.limit:
            return CheckResult(1.0, f"{words} words (max {self.limit})")
        return CheckResult(0.0, f"{words} words (max {self.limit})", (f"Cut to {self.limit} words",))


def parse_max_words(options: Any, fields: Fields) -> MaxWords:
    return MaxWords(fields.integer(options, None, minimum=1))


def parse(raw: Any, tmp_path: Path, kinds=None):
    return parse_check(raw, path=tmp_path / "rubrics" / "r.yaml", field=FIELD, base_dir=tmp_path,
                       import_root=tmp_path, kinds=kinds)


def refusal(contributions: list[tuple[str, Any]]) -> str:
    with pytest.raises(HarnessConfigError) as info:
        with_plugin_kinds(contributions)
    text = str(info.value)
    assert "\n" not in text and "(fix: " in text, text
    return text


# ------------------------------------------------------------------ the built-in registry


def test_every_built_in_kind_is_registered_once() -> None:
    assert set(KNOWN_KINDS) == set(builtin_kinds()) == {
        "regex", "contains", "json_schema", "length", "banned_phrases", "date_age", "python", "equals", "similar", "selected",
        "json_path", "f1", "match", "choice"}
    with pytest.raises(ValueError, match="check kind 'regex' is registered twice"):
        check_kind("regex")(parse_max_words)
    assert builtin_kinds()["regex"] is not parse_max_words


def test_without_kinds_only_the_built_ins_parse(tmp_path: Path) -> None:
    with pytest.raises(HarnessConfigError, match="unknown check kind 'max_words'"):
        parse({"max_words": 3}, tmp_path)
    assert parse({"length": {"max_words": 3}}, tmp_path).kind == "length"


# ------------------------------------------------------------------ plugin kinds, merged


def test_a_plugin_kind_parses_and_scores(tmp_path: Path) -> None:
    kinds = with_plugin_kinds([("myplugin.py", {"max_words": parse_max_words})])
    assert list(kinds)[:len(KNOWN_KINDS)] == list(KNOWN_KINDS) and "max_words" in kinds
    check = parse({"max_words": 3}, tmp_path, kinds)
    assert check.run("one two three", CTX) == CheckResult(1.0, "3 words (max 3)")
    assert check.run("one two three four", CTX).fixes == ("Cut to 3 words",)
    assert parse({"regex": "a"}, tmp_path, kinds).kind == "regex"  # the built-ins stay


def test_a_plugin_parser_reports_mistakes_like_the_built_ins(tmp_path: Path) -> None:
    kinds = with_plugin_kinds([("myplugin.py", {"max_words": parse_max_words})])
    with pytest.raises(HarnessConfigError) as info:
        parse({"max_words": "many"}, tmp_path, kinds)
    assert str(info.value) == (f"{tmp_path}/rubrics/r.yaml: {FIELD}.max_words: expected a whole number >= 1, "
                               "got 'many' (fix: write a whole number >= 1)")


def test_an_unknown_kind_suggests_plugin_kinds_too(tmp_path: Path) -> None:
    kinds = with_plugin_kinds([("myplugin.py", {"max_words": parse_max_words})])
    with pytest.raises(HarnessConfigError) as info:
        parse({"max_word": 3}, tmp_path, kinds)
    assert info.value.problem == "unknown check kind 'max_word' (did you mean 'max_words'?)"
    assert info.value.fix.startswith("use one of: regex, ")
    assert info.value.fix.endswith(", json_path, f1, match, choice, max_words")


def test_a_parser_that_returns_no_check_is_refused(tmp_path: Path) -> None:
    kinds = with_plugin_kinds([("myplugin.py", {"nothing": lambda options, fields: options})])
    with pytest.raises(HarnessConfigError, match=r"check\.nothing: the plugin parser of check kind 'nothing' "
                                                 r"returned int, which has no run\(artifact, context\)"):
        parse({"nothing": 3}, tmp_path, kinds)


def test_a_plugin_kind_that_shadows_a_built_in_is_refused() -> None:
    assert refusal([("conftest.py", {"regex": parse_max_words})]) == (
        "conftest.py: pytest_harness_check_kinds: check kind 'regex' shadows the built-in kind 'regex' "
        "(fix: give the plugin's kind its own name, such as 'my_regex')")


def test_two_plugins_adding_one_kind_are_refused() -> None:
    text = refusal([("a/conftest.py", {"max_words": parse_max_words}), ("b.py", {"max_words": parse_max_words})])
    assert text.startswith("b.py: pytest_harness_check_kinds: check kind 'max_words' is also added by a/conftest.py")


@pytest.mark.parametrize(("offered", "problem"), [
    (["max_words"], "returned list ['max_words'], not a mapping of kind names to parsers"),
    ({"max words": parse_max_words}, "check kind 'max words' is not a name"),
    ({"max_words": "parse_max_words"}, "the parser of check kind 'max_words' is a str, not a function"),
])
def test_a_malformed_contribution_is_refused(offered: Any, problem: str) -> None:
    assert refusal([("conftest.py", offered)]).startswith(f"conftest.py: pytest_harness_check_kinds: {problem}")


def test_a_plugin_that_adds_nothing_changes_nothing() -> None:
    assert dict(with_plugin_kinds([("conftest.py", None), ("other.py", {})])) == dict(builtin_kinds())


# ------------------------------------------------------------------ through pytest: a conftest adds a kind

MAX_WORDS_CONFTEST = """\
from dataclasses import dataclass

from harness.checks import CheckResult


@dataclass(frozen=True)
class MaxWords:
    limit: int
    kind = "max_words"

    def run(self, artifact, context):
        words = len(artifact.split())
        return CheckResult(1.0 if words <= self.limit else 0.0, f"{words} words (max {self.limit})")


def parse_max_words(options, fields):
    return MaxWords(fields.integer(options, None, minimum=1))


def pytest_harness_check_kinds():
    return {"max_words": parse_max_words}
"""

TERSE_RUBRIC = """\
metadata:
  name: Terse
  version: "1.0.0"
  agent: writer
threshold: 0.8
dimensions:
  greeting:
    weight: 0.5
    description: "Says hello"
    check:
      contains: {all: [hello]}
  terse:
    weight: 0.5
    description: "At most 4 words"
    check:
      max_words: 4
"""

TERSE_AGENTS = """\
agents:
  writer:
    rubric: terse
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
    max_attempts: 1
"""

TERSE_CASES = """\
agent: writer
cases:
  - id: short
    inputs: {text: "hello there"}
  - id: long
    inputs: {text: "hello there my dear old friend"}
"""


def terse_project(project: Project, conftest: str) -> Project:
    project.rubric("terse", TERSE_RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(TERSE_AGENTS)
    project.cases("writer", TERSE_CASES)
    project.write("conftest.py", conftest)
    return project


def test_a_conftest_check_kind_scores_a_rubric_dimension(project: Project) -> None:
    terse_project(project, MAX_WORDS_CONFTEST)
    result = project.run("-v")
    result.assert_outcomes(passed=2, failed=1)  # the rubric's validity item, the short case; the long case fails
    result.stdout.fnmatch_lines(["rubrics/terse.yaml::valid PASSED*", "suites/writer.cases.yaml::short PASSED*",
                                 "suites/writer.cases.yaml::long FAILED*"])
    assert "6 words (max 4)" in result.stdout.str()
    scores = {row["case_id"]: row["overall_score"] for row in project.runs()}
    assert scores == {"short": 1.0, "long": 0.5}


def test_a_conftest_check_kind_works_under_xdist(project: Project) -> None:
    terse_project(project, MAX_WORDS_CONFTEST)
    result = project.run("suites/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=1, failed=1)
    assert {row["case_id"]: row["overall_score"] for row in project.runs()} == {"short": 1.0, "long": 0.5}


def test_a_conftest_kind_shadowing_a_built_in_is_one_line(project: Project) -> None:
    terse_project(project, MAX_WORDS_CONFTEST.replace('return {"max_words"', 'return {"contains"'))
    result = project.run("rubrics/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in result.stdout.str()
    ((line,),) = error_sections(result)
    assert line.endswith("conftest.py: pytest_harness_check_kinds: check kind 'contains' shadows the built-in kind "
                         "'contains' (fix: give the plugin's kind its own name, such as 'my_contains')"), line
    assert not project.work.exists()
