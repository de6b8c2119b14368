"""The skills demo of the repository (skills/, its prompts in prompts/, its review rubric in rubrics/), copied into a
fresh folder and run as README says: `pytest skills/`, offline, on the mock provider."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import Project
from harness.base.jsonschemas import contract_errors
from harness.evaluation.items.skill import review_problems
from harness.loading import load_rubric

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(project: Project) -> Project:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "WORK")
    for folder in ("rubrics", "prompts", "skills"):
        shutil.copytree(REPO / folder, project.root / folder, ignore=ignore)
    shutil.copy(REPO / "conftest.py", project.root / "conftest.py")
    return project


def results(demo: Project, kind: str) -> dict[str, dict]:
    """Every GenerationResult or ReviewResult written, by case; each must keep the shipped contract."""
    found = {}
    rubric = load_rubric(demo.root / "rubrics" / "summary-review.yaml", import_root=demo.root)
    for path in sorted(demo.work.glob(f"runs/*/*/*/attempt-*.{kind}.json")):
        result = json.loads(path.read_text())
        assert contract_errors(f"{kind}_result", result) == [], path
        if kind == "review":
            assert review_problems(result, rubric) == [], path
        found[path.parent.name] = result
    return found


def test_pytest_skills_runs_a_skill_of_each_template_type_offline(demo: Project) -> None:
    result = demo.run("skills/", "-v", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        "skills/review-summary.skill.yaml::bridge PASSED*",
        "skills/review-summary.skill.yaml::budget PASSED*",
        "skills/summarize.skill.yaml::short-news PASSED*",
        "skills/summarize.skill.yaml::long-report PASSED*",
        "skills/word-stats.skill.yaml::two-sentences PASSED*",
        "skills/word-stats.skill.yaml::one-word PASSED*",
        "*= harness summary =*",
    ])
    summary = result.stdout.str().split("harness summary")[1]
    for line in ("skill:summarize-article      2       2  100% of 2", "skill:word-stats             2       2  100% of 2",
                 "summary-review               2       2  100% of 2"):
        assert line in summary, summary

    generations = results(demo, "generation")
    assert (generations["short-news"]["attempts"], generations["long-report"]["attempts"]) == (1, 2)
    assert generations["long-report"]["firstAttemptErrors"][0]["instancePath"] == "/key_points"
    assert generations["long-report"]["prompt"]["version"] == "1.1.0"  # the latest, since the skill pins none
    assert "busy engineers" in generations["long-report"]["prompt"]["text"]  # observability.record_prompt
    reviews = results(demo, "review")
    assert sorted(reviews) == ["bridge", "budget"] and all(r["pass"] for r in reviews.values())
    faithful = reviews["bridge"]["criteria_results"][0]
    assert faithful["criterion_id"] == "faithful" and faithful["evidence"] and faithful["confidence_basis"] == "judge"


def test_the_demo_shows_the_retry_off_and_a_bad_input(demo: Project) -> None:
    summarize = demo.root / "skills" / "summarize.skill.yaml"
    summarize.write_text(summarize.read_text().replace("retry_on_validation_failure: true",
                                                       "retry_on_validation_failure: false"))
    stats = demo.root / "skills" / "word-stats.skill.yaml"
    stats.write_text(stats.read_text() + "  - id: no-text\n    inputs: {words: 3}\n")
    result = demo.run("skills/", subprocess=True)
    assert result.ret == 1
    result.assert_outcomes(passed=5, failed=2)
    rows = {row["case_id"]: row for row in demo.runs()}
    long_report, no_text = rows["long-report"], rows["no-text"]
    assert (long_report["attempt"], long_report["outcome"], long_report["exit_code"]) == (1, "validation_failed", 84)
    assert (no_text["outcome"], no_text["exit_code"]) == ("validation_failed", 65)
    assert "text: missing" in no_text["feedback"]
    generation = results(demo, "generation")["long-report"]
    assert (generation["success"], generation["attempts"]) == (False, 1)
    # the gates say where each failed: a bad input at the precondition, an invalid answer at the output
    executions = {e["nodeid"].rsplit("::", 1)[1]: e for e in demo.execution_results()}
    for execution in executions.values():
        assert contract_errors("execution_result", execution) == []
    gates = {case: [(g["gate"], g["passed"]) for g in e["diagnostics"]["gates_passed"]]
             for case, e in executions.items()}
    assert gates["no-text"] == [(1, False)] and executions["no-text"]["triage"] == "fix_inputs"
    assert gates["long-report"] == [(1, True), (2, True), (3, False)]
    assert executions["long-report"]["status"] == "failure" and executions["long-report"]["exit_code"] == 84

    # a bad input to a generation makes no model call: nothing billed, no GenerationResult
    summarize.write_text(summarize.read_text() + "  - id: untitled\n    inputs: {text: a text without a title}\n")
    shutil.rmtree(demo.work)
    demo.run("skills/", "-k", "untitled", subprocess=True).assert_outcomes(failed=1, deselected=7)
    (row,) = demo.runs()
    assert (row["outcome"], row["exit_code"], row["model"], row["input_tokens"]) == ("validation_failed", 65, None, 0)
    assert not list(demo.work.glob("runs/*/*/*/*.generation.json"))
