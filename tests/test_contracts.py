"""The contracts as the design documents write them: thresholds and their files, margin_required for a
selector, itemsEvaluated, review rubrics (JSON files, rubric_id and version, output_schema)."""

from __future__ import annotations

import json

import pytest
from test_plugin_loop import agents, one_case

import harness.apps.tracking.history  # noqa: F401 - pandas imported once, before any in-process pytester run
import harness.apps.tracking.report  # noqa: F401
from conftest import JUDGED_CASES, QUALITY_RUBRIC, Project
from harness.apps.cli import main

# A selector: its artifact ranks candidate theses, each with a score.
SELECTOR_MODULE = '''\
import json


def rank(request):
    scores = request["inputs"]["scores"]
    theses = [{"title": f"thesis {i + 1}", "score": s} for i, s in enumerate(scores)]
    return "```json\\n" + json.dumps({"theses": theses}) + "\\n```"
'''

RANKING_RUBRIC = """\
metadata: {name: Thesis ranking, version: "1.0.0"}
threshold: 0.8
items: {path: theses, score: score, label: title}
dimensions:
  ranked:
    weight: 1.0
    description: "A ranked list of theses"
    check:
      json_schema: {schema: {type: object, required: [theses]}}
"""


def selector_project(project: Project, scores_by_case: dict[str, list[float]], margin: float = 0.15) -> None:
    project.rubric("ranking", RANKING_RUBRIC)
    project.write("selector.py", SELECTOR_MODULE)
    project.agents(f"""\
agents:
  thesis_selector:
    rubric: ranking
    producer: {{python: "selector:rank"}}
    threshold: 0.8
    margin_required: {margin}
    max_attempts: 2
""")
    cases = "\n".join(f"  - id: {case}\n    inputs: {{scores: {json.dumps(scores)}}}"
                      for case, scores in scores_by_case.items())
    project.cases("selector", f"agent: thesis_selector\ncases:\n{cases}\n")


def test_margin_required_compares_the_top_two_candidates(project: Project) -> None:
    selector_project(project, {"clear": [0.9, 0.6, 0.5], "close": [0.82, 0.9, 0.3], "single": [0.7]})
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*thesis_selector[[]close] ESCALATED after 1 attempt: top candidate 'thesis 2' (0.9) beats #2 'thesis 1' "
        "(0.82) by 0.08, less than margin_required 0.15: a human should choose*"])
    outcomes = {r["case_id"]: (r["status"], r["outcome"]) for r in project.runs()}
    assert outcomes == {"clear": ("passed", "passed"), "close": ("escalated", "escalated"),
                        "single": ("passed", "passed")}


def test_margin_required_escalates_an_artifact_it_cannot_rank(project: Project) -> None:
    project.rubric("ranking", RANKING_RUBRIC.replace("      json_schema: {schema: {type: object, required: [theses]}}",
                                                     "      length: {min_words: 1}"))
    project.write("selector.py", "def rank(request):\n    return 'thesis 1 is best'\n")
    project.agents("agents:\n  sel:\n    rubric: ranking\n    producer: {python: \"selector:rank\"}\n"
                   "    margin_required: 0.1\n")
    project.cases("sel", "agent: sel\ncases:\n  - id: prose\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot rank the candidates for margin_required: the artifact holds no JSON or "
                                 "YAML: a human should choose*"])


def test_margin_required_needs_a_rubric_that_says_where_the_candidates_are(project: Project) -> None:
    project.standard(one_case("hello there"))
    project.agents(agents(margin_required=0.15))
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/agents.yaml: agents.writer.margin_required: compares the top two "
                                 "candidates of a ranked artifact, but rubric quality does not say where they are "
                                 "(fix: add `items: {path: candidates, score: score}` to quality.yaml*"])


def test_margin_required_is_per_agent_not_a_default(project: Project) -> None:
    project.standard(one_case("hello there"))
    project.agents(agents(defaults="defaults: {margin_required: 0.1}"))
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/agents.yaml: defaults.margin_required: is per agent*(fix: move it under "
                                 "`agents.NAME:` of the selector agent)"])


def test_items_evaluated_counts_the_items_of_the_artifact(project: Project) -> None:
    selector_project(project, {"three": [0.9, 0.5, 0.1]})
    project.run("suites/").assert_outcomes(passed=1)
    evaluation = json.loads((project.cycle_dir() / "thesis_selector" / "attempt-1.eval.json").read_text())
    assert evaluation["metadata"]["itemsEvaluated"] == 3


def test_items_evaluated_is_one_without_an_items_path(project: Project) -> None:
    project.standard(one_case("hello there"))
    project.run("suites/").assert_outcomes(passed=1)
    evaluation = json.loads((project.cycle_dir() / "writer" / "attempt-1.eval.json").read_text())
    assert evaluation["metadata"]["itemsEvaluated"] == 1


# --- thresholds ------------------------------------------------------------------------------------

SIX_WORDS = "hello " + "word " * 12  # scores 0.6: greeting yes, concise no


def test_defaults_pass_threshold_does_not_override_the_rubric(project: Project) -> None:
    project.standard(one_case(SIX_WORDS.strip()))
    project.rubric("quality", QUALITY_RUBRIC.replace("threshold: 0.8", "threshold: 0.5"))
    project.agents(agents(defaults="defaults: {pass_threshold: 0.85}"))
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    assert [r["overall_score"] for r in project.rows()] == [0.6]


def test_the_agents_threshold_beats_the_rubrics(project: Project) -> None:
    project.standard(one_case(SIX_WORDS.strip()))
    project.rubric("quality", QUALITY_RUBRIC.replace("threshold: 0.8", "threshold: 0.5"))
    project.agents(agents(reviser=None, threshold=0.7, defaults="defaults: {pass_threshold: 0.3}"))
    project.run("suites/").assert_outcomes(failed=1)


REVIEW_WEIGHTED = {
    "rubric_id": "code-review", "version": "1.0.0", "scoring_mode": "weighted",
    "criteria": [
        {"id": "greets", "name": "Greets", "description": "says hello", "pass_condition": "hello",
         "fail_condition": "no hello", "weight": 3, "check": {"contains": {"all": ["hello"]}}},
        {"id": "short", "name": "Short", "description": "at most 12 words", "pass_condition": "short",
         "fail_condition": "long", "weight": 2, "check": {"length": {"max_words": 12}}},
    ],
}


def review_project(project: Project, rubric: dict, *, agent_extra: str = "", file: str = "review.json") -> None:
    project.write(f"rubrics/{file}", json.dumps(rubric, indent=2))
    project.write("agentlib.py", "def produce(request):\n    return request['inputs']['text']\n")
    project.agents(f"agents:\n  writer:\n    rubric: code-review\n    producer: {{python: \"agentlib:produce\"}}\n"
                   f"{agent_extra}")


def test_a_weighted_review_rubric_without_pass_threshold_uses_the_default_with_a_warning(project: Project) -> None:
    review_project(project, REVIEW_WEIGHTED)
    project.agents("defaults: {pass_threshold: 0.5}\nagents:\n  writer:\n    rubric: code-review\n"
                   "    producer: {python: \"agentlib:produce\"}\n")
    project.cases("writer", one_case(SIX_WORDS.strip()))
    result = project.run("suites/", "rubrics/")
    result.assert_outcomes(passed=2)  # the JSON rubric's validity item and the case at 0.6 >= 0.5
    result.stdout.fnmatch_lines(["*rubrics/review.json: pass_threshold: missing for weighted scoring; the agent's "
                                 "threshold, else defaults.pass_threshold, else 0.85 applies*"])


def test_a_review_rubric_is_found_by_rubric_id_and_version(project: Project) -> None:
    old = {**REVIEW_WEIGHTED, "pass_threshold": 0.5}
    new = {**REVIEW_WEIGHTED, "version": "2.0.0", "pass_threshold": 0.9}
    review_project(project, old, file="review-v1.json", agent_extra="    rubric_version: 1.0.0\n")
    project.write("rubrics/review-v2.json", json.dumps(new))
    project.cases("writer", one_case(SIX_WORDS.strip()))
    project.run("suites/").assert_outcomes(passed=1)  # 0.6 against version 1.0.0's 0.5
    assert [r["rubric_version"] for r in project.rows()] == ["1.0.0"]
    project.agents("agents:\n  writer:\n    rubric: code-review\n    producer: {python: \"agentlib:produce\"}\n")
    project.run("suites/").assert_outcomes(failed=1)  # the latest, 2.0.0, at 0.9


def test_an_unknown_rubric_version_names_the_versions_there_are(project: Project) -> None:
    review_project(project, {**REVIEW_WEIGHTED, "pass_threshold": 0.5}, agent_extra="    rubric_version: 3.0.0\n")
    project.cases("writer", one_case("hello"))
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*agents.writer.rubric_version: no version 3.0.0 of rubric 'code-review'*"
                                 "(fix: use one of: 1.0.0)"])


def test_the_review_result_is_written_and_checked_against_output_schema(project: Project) -> None:
    schema = {"type": "object", "required": ["pass", "issues", "criteria_results"],
              "properties": {"issues": {"type": "array", "maxItems": 0}}}  # a review with issues is invalid
    review_project(project, {**REVIEW_WEIGHTED, "pass_threshold": 0.5, "output_schema": schema})
    project.cases("writer", "agent: writer\ncases:\n  - id: good\n    inputs: {text: hello}\n"
                            f"  - id: long\n    inputs: {{text: \"{SIX_WORDS.strip()}\"}}\n")
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1, failed=1)
    review = json.loads((project.cycle_dir() / "writer" / "good" / "attempt-1.review.json").read_text())
    assert review["pass"] is True and review["issues"] == []
    assert [(c["criterion_id"], c["verdict"], c["confidence"]) for c in review["criteria_results"]] == [
        ("greets", "pass", 1.0), ("short", "pass", 1.0)]
    assert set(review["timings_ms"]) == {"evaluation", "total"}
    result.stdout.fnmatch_lines(["*VALIDATION FAILED on attempt 1: the review does not match review's output_schema: "
                                 "issues: 1 item, expected none*"])
    assert {r["case_id"]: r["outcome"] for r in project.runs()} == {"good": "passed", "long": "validation_failed"}


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "nonsense"}, "output_schema.type: not a valid JSON Schema"),
    ({"type": "object", "properties": {"pass": {"type": "bool"}}},
     "output_schema.properties.pass.type: not a valid JSON Schema: 'bool' is not a JSON Schema type"),
    ({"type": "object", "required": ["verdict"]}, "output_schema: rejects a well-formed review result "
                                                  "(verdict: missing)"),
    ("a string", "output_schema: expected a JSON Schema (a mapping), got 'a string'"),
])
def test_a_bad_output_schema_is_one_line(project: Project, schema: object, message: str) -> None:
    review_project(project, {**REVIEW_WEIGHTED, "pass_threshold": 0.5, "output_schema": schema})
    project.cases("writer", one_case("hello"))
    result = project.run("suites/", "rubrics/")
    result.stdout.fnmatch_lines([f"*rubrics/review.json: {message}*(fix: *"])
    assert "Traceback" not in result.stdout.str()


# --- thresholds.yaml (the seed's config layout) -------------------------------------------------------


def test_thresholds_yaml_beside_agents_yaml_is_read(project: Project) -> None:
    project.standard(one_case(SIX_WORDS.strip()))
    project.agents(agents(reviser=None))
    project.write("suites/thresholds.yaml", "defaults:\n  max_attempts: 1\nagents:\n  writer:\n    threshold: 0.5\n")
    project.run("suites/").assert_outcomes(passed=1)


def test_thresholds_yaml_and_agents_yaml_must_agree(project: Project) -> None:
    project.standard(one_case("hello"))
    project.agents(agents(threshold=0.9))
    project.write("suites/thresholds.yaml", "agents:\n  writer:\n    threshold: 0.5\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/thresholds.yaml: agents.writer.threshold: is 0.5 here but 0.9 in "
                                 "agents.yaml (fix: set agents.writer.threshold in one file only)"])


def test_thresholds_yaml_names_only_known_agents(project: Project) -> None:
    project.standard(one_case("hello"))
    project.write("suites/thresholds.yaml", "agents:\n  writr:\n    threshold: 0.5\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/thresholds.yaml: agents.writr: unknown key*writer*"])


# --- one way of counting -----------------------------------------------------------------------------


def test_pytest_the_markdown_summary_and_harness_report_count_alike(project: Project, capsys) -> None:
    """A passed item and an unscored (skipped) one: every headline says 1 passed, 1 skipped."""
    project.judged(JUDGED_CASES)  # judged by a model; there is no key: not scored, skipped
    project.rubric("quality")
    project.cases("writer", one_case("hello there"))
    agents_file = project.root / "suites" / "agents.yaml"
    agents_file.write_text(agents_file.read_text() + "  writer:\n    rubric: quality\n"
                                                      "    producer: {python: \"agentlib:produce\"}\n")
    result = project.run("suites/", "--harness-markdown", "summary.md", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, skipped=1)
    assert "1 passed, 1 skipped ·" in (project.root / "summary.md").read_text()
    result.stdout.fnmatch_lines(["judged * 1 * 0 * - *", "quality * 1 * 1 * 100% of 1 *"])
    assert 'value="None"' not in (project.root / "junit.xml").read_text()

    capsys.readouterr()
    assert main(["report", "--work-dir", str(project.work), "--markdown", "-o", "-"]) == 0
    assert "1 passed, 1 skipped ·" in capsys.readouterr().out
    assert main(["history", "--work-dir", str(project.work), "--format", "json"]) == 0
    rows = {r["rubric"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["judged"]["pass_rate"], rows["judged"]["judged"]) == (None, 0)
    assert (rows["quality"]["pass_rate"], rows["quality"]["judged"]) == (1.0, 1)


def test_an_item_the_compare_gate_failed_is_failed_in_history_too(project: Project, capsys) -> None:
    project.standard(one_case("hello there"))
    project.run("suites/").assert_outcomes(passed=1)  # the baseline: 1.0
    project.rubric("quality", QUALITY_RUBRIC.replace("threshold: 0.8", "threshold: 0.5"))
    project.cases("writer", one_case(SIX_WORDS.strip()))  # 0.6: passes 0.5, but dropped 0.4
    result = project.run("suites/", "--harness-compare", "latest")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["quality * 1 * 0 * 0% of 1 *"])

    capsys.readouterr()
    assert main(["history", "--work-dir", str(project.work), "--format", "json"]) == 0
    assert [r["pass_rate"] for r in json.loads(capsys.readouterr().out)] == [1.0, 0.0]
    assert main(["report", "--work-dir", str(project.work), "--markdown", "-o", "-"]) == 0
    assert "**1 failed** ·" in capsys.readouterr().out
