"""The assessment of every item: gates 0-4, the execution result, and exit codes kept end to end.

A command's own exit code is the item's (65 stays 65, SIGTERM is 143), a timeout is 81, an escalation 83, a
validation failure 84; each is in the records, the JUnit properties and the execution result, and with
``--harness-exit-status item`` it is the run's exit status.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conftest import PYTHON, Project
from harness.base import exit_codes
from harness.base.jsonschemas import contract_errors

CASE = """\
agent: writer
cases:
  - id: greet
    inputs: {text: "hello there"}
"""


def writer(producer: str, **policy: Any) -> str:
    extra = "".join(f"    {key}: {json.dumps(value)}\n" for key, value in policy.items())
    return f"agents:\n  writer:\n    rubric: quality\n    producer: {producer}\n{extra}"


def execution_results(project: Project) -> list[dict[str, Any]]:
    results = [result for cycle in project.cycles() for result in project.execution_results(cycle)]
    for result in results:
        assert contract_errors("execution_result", result) == [], result
    return results


def junit_codes(path: Path) -> dict[str, str]:
    return {case.get("name"): prop.get("value") for case in ET.parse(path).iter("testcase")
            for prop in case.iter("property") if prop.get("name") == "harness_exit_code"}


def gates(result: dict[str, Any]) -> dict[int, bool]:
    return {gate["gate"]: gate["passed"] for gate in result["diagnostics"]["gates_passed"]}


# Each producer, and the exit code, status and gates its item ends with.
EXITS = {
    "data_error": (f'{{command: "{PYTHON} -c \\"import sys; sys.exit(65)\\""}}', {}, 65, "failure", {1: False}),
    "sigterm": (f'{{command: "{PYTHON} -c \\"import os, signal; os.kill(os.getpid(), signal.SIGTERM)\\""}}', {},
                143, "failure", {1: True, 2: False}),
    "timeout": (f'{{command: "{PYTHON} -c \\"import time; time.sleep(30)\\"", timeout_s: 1}}', {}, 81, "timeout",
                {1: True, 2: False}),
    "escalation": ('{python: "agentlib:produce"}', {"max_attempts": 1}, 83, "failure",
                   {1: True, 2: True, 3: False, 4: False}),
    "blocked": (f'{{command: "{PYTHON} -c \\"import sys; sys.exit(80)\\""}}', {}, 80, "blocked", {1: True, 2: False}),
}


@pytest.mark.parametrize("mode", ["pytest", "item"])
@pytest.mark.parametrize("name", sorted(EXITS))
def test_an_items_exit_code_is_kept_in_its_records_junit_and_execution_result(project: Project, name: str,
                                                                              mode: str) -> None:
    producer, policy, code, status, expected_gates = EXITS[name]
    text = "a very long greeting without the word that the rubric wants to see at all" if name == "escalation" \
        else "hello there"
    project.standard(CASE.replace("hello there", text))
    project.agents(writer(producer, **policy))
    result = project.run("suites/", "--junitxml=junit.xml", "--harness-exit-status", mode)
    result.assert_outcomes(failed=1)
    assert result.ret == (code if mode == "item" else 1)
    if mode == "item":
        result.stdout.fnmatch_lines([f"*exit status {code} ({exit_codes.name(code)})*"])
    (row,) = project.runs()
    assert row["exit_code"] == code
    assert junit_codes(project.root / "junit.xml") == {"greet": str(code)}
    (execution,) = execution_results(project)
    assert (execution["exit_code"], execution["status"]) == (code, status)
    assert execution["triage"] == exit_codes.triage(code)
    assert gates(execution) == expected_gates
    assert execution["diagnostics"]["errors"] or name == "escalation"
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("mode", ["pytest", "item"])
def test_an_output_that_fails_validation_is_84_and_fails_gate_3(project: Project, mode: str) -> None:
    project.judged()
    project.write("garbled.py", "print('this is not the evaluator output')\n")
    project.agents(project.root.joinpath("suites/agents.yaml").read_text().replace(
        "evaluator: prompts/judge.md", f'evaluator: {{command: "{PYTHON} garbled.py"}}'))
    result = project.run("suites/", "--harness-exit-status", mode, "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    assert result.ret == (84 if mode == "item" else 1)
    assert junit_codes(project.root / "junit.xml") == {"warm-hello": "84"}
    (execution,) = execution_results(project)
    assert execution["exit_code"] == 84 and execution["triage"] == "review_output"


def test_the_most_severe_failed_item_decides_the_exit_status(project: Project) -> None:
    project.standard("agent: writer\ncases:\n  - id: bad-data\n    inputs: {text: hello}\n"
                     "  - id: below-bar\n    inputs: {text: goodbye}\n")
    project.write("router.py", "import json, sys\nrequest = json.load(sys.stdin)\n"
                  "if request['case'] == 'bad-data':\n    sys.exit(65)\nprint(request['inputs']['text'])\n")
    project.agents(writer(f'{{command: "{PYTHON} router.py"}}', max_attempts=1, escalate_on_fail=False))
    result = project.run("suites/", "-o", "harness_exit_status=item")
    result.assert_outcomes(failed=2)
    assert sorted(row["exit_code"] for row in project.runs()) == [1, 65]
    assert result.ret == 65  # a precondition failure is more severe than a score below the bar
    assert project.run("suites/").ret == 1  # pytest's own status by default


def test_severity_precedence() -> None:
    assert exit_codes.most_severe([1, 84, 83, 65]) == 65
    assert exit_codes.most_severe([1, 84, 80]) == 80
    assert exit_codes.most_severe([1, 84]) == 84
    assert exit_codes.most_severe([65, 143, 127]) == 143
    assert exit_codes.most_severe([0, 0]) == 0
    assert [exit_codes.triage(code) for code in (0, 2, 75, 66, 81, 84, 127, 99)] == [
        "success", "retry", "retry", "fix_inputs", "escalate", "review_output", "alert_maintainer", "investigate"]


FLAKY = """\
import json, pathlib, sys
request = json.load(sys.stdin)
tries = pathlib.Path("tries")
count = int(tries.read_text()) + 1 if tries.exists() else 1
tries.write_text(str(count))
if count == 1:
    sys.exit(CODE)
print(request["inputs"]["text"])
"""


@pytest.mark.parametrize(("code", "retried"), [(75, True), (3, True), (65, False)])
def test_an_error_whose_triage_is_retry_runs_again_up_to_max_retries(project: Project, code: int,
                                                                    retried: bool) -> None:
    project.standard(CASE)
    project.write("flaky.py", FLAKY.replace("CODE", str(code)))
    project.agents(writer(f'{{command: "{PYTHON} flaky.py", write: ["."]}}', max_retries=1))
    result = project.run("suites/")
    result.assert_outcomes(**({"passed": 1} if retried else {"failed": 1}))
    (execution,) = execution_results(project)
    if retried:
        assert [r["attempt"] for r in project.runs()] == [1, 2]
        assert execution["diagnostics"]["retries"] == [
            {"attempt": 1, "exit_code": code, "reason": execution["diagnostics"]["retries"][0]["reason"],
             "kind": "retry", "duration_ms": execution["diagnostics"]["retries"][0]["duration_ms"]}]
        assert execution["status"] == "success" and gates(execution) == {1: True, 2: True, 3: True, 4: True}
    else:  # fix the inputs: running it again would not help
        assert len(project.runs()) == 1 and execution["exit_code"] == 65


def test_no_retry_unless_max_retries_allows(project: Project) -> None:
    project.standard(CASE)
    project.write("flaky.py", FLAKY.replace("CODE", "75"))
    project.agents(writer(f'{{command: "{PYTHON} flaky.py", write: ["."]}}'))
    project.run("suites/").assert_outcomes(failed=1)
    assert [r["exit_code"] for r in project.runs()] == [75]


def test_a_passing_item_has_every_gate_and_keeps_no_raw_input(project: Project,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-ant-api03-" + "s" * 30  # the artifact repeats it: its file, and so its checksum, has it redacted
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    project.standard(CASE.replace("hello there", f"hello SECRET-INPUT-MARKER {secret}"))
    project.run("suites/").assert_outcomes(passed=1)
    (execution,) = execution_results(project)
    assert execution["status"] == "success" and execution["exit_code"] == 0
    assert gates(execution) == {1: True, 2: True, 3: True, 4: True}
    assert execution["inputs"]["provided"]["text"].startswith("sha256:")
    assert "SECRET-INPUT-MARKER" not in json.dumps(execution["inputs"])
    (artifact,) = execution["outputs"]["artifacts"]
    assert artifact["content_type"] == "text/markdown" and len(artifact["checksum"]) == 64
    written = (project.cycle_dir() / "writer" / "attempt-1.md").read_bytes()
    assert b"[REDACTED:ANTHROPIC_API_KEY]" in written and secret.encode() not in written
    assert (artifact["size_bytes"], artifact["checksum"]) == (len(written), hashlib.sha256(written).hexdigest())
    assert {e["reference"] for e in execution["assessment"]["evidence"]} == {"greeting", "concise"}
    assert execution["assessment"]["score"] == 1.0 and execution["assessment"]["human_review_requested"] is False


ROUTER_CASES = """\
agent: writer
cases:
  - id: routed-right
    inputs: {text: "summarize"}
    selection: summarize
  - id: routed-wrong
    inputs: {text: "translate"}
    selection: [summarize, digest]
"""


def test_the_selection_gate_checks_a_routers_choice_by_rule(project: Project) -> None:
    project.standard(ROUTER_CASES)
    project.write("rubrics/quality.yaml", "metadata: {name: Quality, version: '1.0.0'}\nthreshold: 0.5\n"
                  "dimensions:\n  answered:\n    weight: 1\n    description: says something\n"
                  "    check: {length: {min_words: 1}}\n")
    project.agents(writer('{python: "agentlib:produce"}', max_attempts=1))
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1, failed=1)
    by_case = {Path(r["nodeid"]).name: r for r in execution_results(project)}
    right = next(r for key, r in by_case.items() if key.endswith("routed-right"))
    wrong = next(r for key, r in by_case.items() if key.endswith("routed-wrong"))
    assert gates(right)[0] is True and gates(wrong)[0] is False
    failure = wrong["diagnostics"]["gates_passed"][0]["details"]["failures"][0]
    assert "translate" in failure["message"] and "summarize" in failure["message"]
    assert 3 in gates(wrong) and gates(wrong)[3] is True  # the choice is gate 0's, not the output's


def test_a_bad_selection_is_one_error_naming_the_field(project: Project) -> None:
    project.standard("agent: writer\ncases:\n  - id: c\n    inputs: {text: hi}\n    selection: {by: judge}\n")
    result = project.run("suites/")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*writer.cases.yaml: cases[[]0[]].selection.expected*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("judge", "right"), [("mock/score-0.9", True), ("mock/score-0.2", False)])
def test_the_selection_gate_checks_a_routers_choice_by_judge(project: Project, judge: str, right: bool) -> None:
    project.judged("agent: judged_writer\ncases:\n  - id: routed\n    inputs: {text: \"hello, summarize\"}\n"
                   "    selection: {expected: summarize, by: judge}\n")
    result = project.run("suites/", "--harness-judge-model", judge, "--harness-cache", "off")
    assert result.ret == (0 if right else 1)
    (execution,) = execution_results(project)
    selection = execution["diagnostics"]["gates_passed"][0]
    assert (selection["gate"], selection["passed"]) == (0, right)
    assert selection["details"]["checks_performed"][0]["name"] == "chosen by judge"
