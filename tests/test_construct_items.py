"""Constructs as items: phases run in order in the item's workspace, each handoff checked and written as a
PhaseHandoff, ``on_failure`` honoured, the phases' exit codes read through their contracts, timeouts, retries, a
phase run by a skill, and the same under xdist."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Project, error_sections, needs_sandbox
from harness.base.jsonschemas import contract_errors

# The phases of the test constructs: each logs its call (calls.log, in the project) and answers Markdown.
PHASES = '''
import sys
import time
from pathlib import Path


def log(request, said=""):
    with open("calls.log", "a", encoding="utf-8") as handle:
        handle.write(f"{request['inputs']['phase']} {request['attempt']} {said}".strip() + "\\n")


PLAN = "# Plan\\n\\n## Goals\\n\\nShip it.\\n\\n## Steps\\n\\n1. Build.\\n2. Ship.\\n"


def plan(request):
    log(request)
    return PLAN


def thin_plan(request):
    log(request)
    return "# Plan\\n\\n## Goals\\n\\nShip it.\\n\\n## Steps\\n\\n"


def build(request):
    log(request, ",".join(sorted(request["inputs"]["received"])))
    notes = Path(request["inputs"]["workspace"]) / "notes.md"
    notes.write_text("built on the plan\\n", encoding="utf-8")
    return "# Build\\n\\n## Result\\n\\nBuilt.\\n"


def ship(request):
    log(request, ",".join(sorted(request["inputs"]["received"])))
    return "# Shipped\\n\\n## Result\\n\\nShipped.\\n"


def flaky(request):
    log(request)
    if request["attempt"] == 1:
        sys.exit(1)
    return PLAN


def exits(request, code):
    log(request)
    sys.exit(code)


def slow(request):
    log(request)
    time.sleep(3)
    return "late"
'''

SCHEMA = "required_sections: [goals, steps]\n"

BASE = {
    "apiVersion": "loa/v1", "kind": "Construct", "metadata": {"name": "ship-it", "version": "1.2.0"},
    "execution": {"type": "sequential", "phases": ["plan", "build"]},
    "phases": {
        "plan": {"producer": {"python": "phaselib:plan"},
                 "produces": [{"path": "plan.md", "schema": "plan-v1"}]},
        "build": {"producer": {"python": "phaselib:build"},
                  "receives": [{"path": "plan.md", "schema": "plan-v1", "required_sections": ["steps"]}],
                  "produces": [{"path": "build.md"}]},
    },
}


def construct(project: Project, data: dict[str, Any], folder: str = "constructs/ship") -> Path:
    project.write("phaselib.py", PHASES)
    project.write("constructs/schemas/plan-v1.yaml", SCHEMA)
    return project.write(f"{folder}/construct.yaml", yaml.safe_dump(data, sort_keys=False))


def item_dir(project: Project, name: str = "ship-it") -> Path:
    (found,) = [p.parent for p in project.work.glob(f"runs/*/{name}/**/workspace")]
    return found


def records(project: Project, folder: Path) -> dict[str, dict[str, Any]]:
    """Every execution result (``execution-result.<phase>.json``: a line of the cycle's execution-results.jsonl)
    and handoff (``handoff-<from>-to-<to>.json`` in the item's folder) of the item kept in ``folder``, each checked
    against its shipped contract."""
    cycle, agent, *case = folder.relative_to(project.work / "runs").parts  # runs/{cycle}/{construct}[/{case}]
    nodeids = {row["nodeid"] for row in project.runs() if row["cycle_id"] == cycle and row["agent_name"] == agent
               and (not case or row["case_id"].rsplit(".", 1)[0] == case[0])}
    found = {}
    for result in project.execution_results(cycle):
        if result["nodeid"] in nodeids:
            assert contract_errors("execution_result", result) == [], result
            found[f"execution-result.{result['phase']}.json"] = result
    for path in sorted(folder.glob("handoff-*.json")):
        data = json.loads(path.read_text())
        assert contract_errors("phase_handoff", data) == [], path
        found[path.name] = data
    assert not list(folder.glob("execution-result*")), "execution results are lines of the cycle's file"
    return found


def calls(project: Project) -> list[str]:
    path = project.root / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def junit_properties(project: Project) -> dict[str, dict[str, str]]:
    tree = ET.parse(project.root / "junit.xml")
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in tree.iter("testcase")}


def with_phase(data: dict[str, Any], name: str, phase: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["execution"]["phases"].append(name)
    data["phases"][name] = phase
    return data


def test_phases_run_in_order_and_every_record_keeps_its_contract(project: Project) -> None:
    construct(project, BASE)
    result = project.run("constructs/", "-v", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["constructs/ship/construct.yaml::ship-it PASSED*"])
    assert calls(project) == ["plan 1", "build 1 plan.md"]
    folder = item_dir(project)
    assert (folder / "workspace" / "plan.md").read_text().startswith("# Plan")  # the answer, at produces[0]
    assert (folder / "workspace" / "build.md").read_text().startswith("# Build")
    found = records(project, folder)
    assert sorted(found) == ["execution-result.build.json", "execution-result.plan.json",
                             "handoff-plan-to-build.json"]
    plan, build, handoff = (found["execution-result.plan.json"], found["execution-result.build.json"],
                            found["handoff-plan-to-build.json"])
    assert (plan["status"], plan["exit_code"], plan["phase"], plan["skill_id"], plan["skill_version"]) == (
        "success", 0, "plan", "ship-it.plan", "1.2.0")
    assert [g["gate"] for g in plan["diagnostics"]["gates_passed"]] == [2, 3]  # nothing to check before it
    assert [g["gate"] for g in build["diagnostics"]["gates_passed"]] == [1, 2, 3]
    assert all(g["passed"] for g in plan["diagnostics"]["gates_passed"] + build["diagnostics"]["gates_passed"])
    # the handoff is gate 3 of the sender and gate 1 of the receiver
    named = "handoff plan_to_build: plan.md"
    assert named in [c["name"] for c in plan["diagnostics"]["gates_passed"][1]["details"]["checks_performed"]]
    assert named in [c["name"] for c in build["diagnostics"]["gates_passed"][0]["details"]["checks_performed"]]
    assert [a["path"] for a in build["outputs"]["artifacts"]] == ["build.md", "notes.md"]
    assert build["inputs"]["provided"]["plan.md"].startswith("sha256:")  # hashed by default, never raw
    assert (handoff["accepted"], handoff["decision"], handoff["declared"]) == (True, "proceed", False)
    assert handoff["artifacts"]["provided"][0]["path"] == "plan.md"
    assert handoff["validation"] == {"schema_valid": True, "completeness": 1.0, "blockers": [], "warnings": []}
    props = junit_properties(project)["ship-it"]
    assert (props["harness_kind"], props["harness_exit_code"], props["harness_outcome"]) == ("construct", "0", "passed")
    assert json.loads(props["harness_phases"]) == {"plan": "passed", "build": "passed"}
    rows = project.runs()
    assert [(r["case_id"], r["outcome"], r["exit_code"]) for r in rows] == [
        ("constructs-ship.plan", "passed", 0), ("constructs-ship.build", "passed", 0)]


@pytest.mark.parametrize(("capture", "provided", "primary"), [
    ({"include_inputs": "full", "include_outputs": "full"}, {"plan.md": "PLAN"}, "# Build\n\n## Result\n\nBuilt.\n"),
    ({"include_inputs": "none", "include_outputs": "summary"}, {}, {"type": "text", "chars": 27}),
    ({"enabled": False, "include_inputs": "full", "include_outputs": "full"}, {}, None),
])
def test_the_capture_settings_decide_what_an_execution_result_keeps(project: Project, capture: dict[str, Any],
                                                                     provided: dict[str, str], primary: Any) -> None:
    data = copy.deepcopy(BASE)
    data["assessment"] = {"capture": capture}
    construct(project, data)
    project.run("constructs/").assert_outcomes(passed=1)
    build = records(project, item_dir(project))["execution-result.build.json"]
    plan_text = (item_dir(project) / "workspace" / "plan.md").read_text()
    assert build["inputs"]["provided"] == {name: plan_text if value == "PLAN" else value
                                           for name, value in provided.items()}
    kept = build["outputs"]["primary"]
    if isinstance(primary, dict):  # a summary: its type and size, and a digest beside
        kept = {key: kept[key] for key in primary}
    assert kept == primary


def test_a_broken_handoff_blocks_the_later_phases_with_80(project: Project) -> None:
    data = with_phase(BASE, "ship", {"producer": {"python": "phaselib:ship"}, "receives": ["build.md"]})
    data["phases"]["plan"]["producer"] = {"python": "phaselib:thin_plan"}
    construct(project, data)
    result = project.run("constructs/", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    assert calls(project) == ["plan 1"]  # neither build nor ship ran
    result.stdout.fnmatch_lines([
        "construct ship-it blocked at handoff plan_to_build (exit 80, blocked): build, ship did not run",
        "  build did not accept what plan handed on:",
        "    - plan.md: section steps is missing or empty",
        "  remediation: make phase plan write text under steps in plan.md",
        "    plan: failed (exit 84): build rejected its output",
        "    build: blocked (exit 80)",
        "    ship: not_run",
    ])
    assert "Traceback" not in result.stdout.str()
    folder = item_dir(project)
    found = records(project, folder)
    assert sorted(found) == ["execution-result.build.json", "execution-result.plan.json",
                             "handoff-plan-to-build.json"]
    handoff = found["handoff-plan-to-build.json"]
    assert (handoff["accepted"], handoff["decision"], handoff["on_failure"]) == (False, "block", "block")
    assert handoff["validation"]["blockers"] == ["plan.md: section steps is missing or empty"]
    assert handoff["validation"]["completeness"] == 0.5 and handoff["validation"]["schema_valid"] is True
    assert handoff["rejection_reason"].startswith("build did not accept what plan handed on")
    build = found["execution-result.build.json"]
    assert (build["status"], build["exit_code"], build["triage"]) == ("blocked", 80, "escalate")
    assert [g["gate"] for g in build["diagnostics"]["gates_passed"]] == [1]  # it never ran
    assert found["execution-result.plan.json"]["exit_code"] == 84
    props = junit_properties(project)["ship-it"]
    assert (props["harness_exit_code"], props["harness_blocked_by"]) == ("80", "plan_to_build")
    assert json.loads(props["harness_phases"]) == {"plan": "failed", "build": "blocked", "ship": "not_run"}
    (row,) = project.runs()
    assert (row["case_id"], row["outcome"], row["exit_code"]) == ("constructs-ship.plan", "validation_failed", 84)


def test_a_missing_artifact_blocks_and_names_the_missing_file(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["produces"] = [{"path": "draft.md"}]
    construct(project, data)
    result = project.run("constructs/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*- plan.md: missing", "  missing: plan.md", "  remediation: make phase plan write plan.md"])
    handoff = records(project, item_dir(project))["handoff-plan-to-build.json"]
    assert handoff["artifacts"]["missing"] == ["plan.md"] and handoff["artifacts"]["extra"] == ["draft.md"]
    assert handoff["validation"]["completeness"] == 0.0


def test_warn_proceeds_and_keeps_the_problems_as_warnings(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["producer"] = {"python": "phaselib:thin_plan"}
    data["assessment"] = {"handoffs": {"plan_to_build": {"on_failure": "warn"}}}
    construct(project, data)
    project.run("constructs/").assert_outcomes(passed=1)
    assert calls(project) == ["plan 1", "build 1 plan.md"]
    found = records(project, item_dir(project))
    handoff = found["handoff-plan-to-build.json"]
    assert (handoff["accepted"], handoff["decision"], handoff["validation"]["blockers"]) == (
        True, "proceed_with_warnings", [])
    assert handoff["validation"]["warnings"] == ["plan.md: section steps is missing or empty"]
    assert handoff["rejection_reason"] is None and "steps" in handoff["remediation"]
    build = found["execution-result.build.json"]
    assert build["status"] == "success"
    assert build["diagnostics"]["warnings"] == [{"source": "handoff",
                                                 "message": "plan.md: section steps is missing or empty"}]
    gate1 = build["diagnostics"]["gates_passed"][0]
    assert (gate1["gate"], gate1["passed"]) == (1, False)  # the gate says what failed; warn let it run all the same


def test_skip_skips_the_receiver_and_the_next_phase_gets_its_own_handoff(project: Project) -> None:
    data = with_phase(BASE, "ship", {"producer": {"python": "phaselib:ship"}, "receives": ["plan.md"]})
    data["phases"]["plan"]["producer"] = {"python": "phaselib:thin_plan"}
    data["assessment"] = {"handoffs": {"plan_to_build": {"on_failure": "skip"}}}
    construct(project, data)
    project.run("constructs/", "--junitxml=junit.xml").assert_outcomes(passed=1)
    assert calls(project) == ["plan 1", "ship 1 plan.md"]
    found = records(project, item_dir(project))
    assert "execution-result.build.json" not in found  # a skipped phase never started
    skipped = found["handoff-plan-to-build.json"]
    assert (skipped["accepted"], skipped["decision"]) == (False, "skip")
    ship = found["execution-result.ship.json"]
    assert [g["gate"] for g in ship["diagnostics"]["gates_passed"]] == [1, 2]  # it declares no output: no gate 3
    onward = found["handoff-build-to-ship.json"]
    assert (onward["accepted"], onward["decision"], onward["artifacts"]["extra"]) == (True, "proceed", [])
    props = junit_properties(project)["ship-it"]
    assert json.loads(props["harness_phases"]) == {"plan": "passed", "build": "skipped", "ship": "passed"}
    assert json.loads(props["harness_handoffs"]) == {"plan_to_build": "skip", "build_to_ship": "proceed"}


def test_max_retries_runs_a_soft_failure_again_and_only_a_soft_one(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["producer"] = {"python": "phaselib:flaky"}
    data["assessment"] = {"gates": {"plan": {"execution": {"max_retries": 2}},
                                    "build": {"execution": {"max_retries": 2}}}}
    construct(project, data)
    project.run("constructs/").assert_outcomes(passed=1)
    assert calls(project) == ["plan 1", "plan 2", "build 1 plan.md"]
    plan = records(project, item_dir(project))["execution-result.plan.json"]
    assert (plan["attempts"], plan["exit_code"]) == (2, 0)
    assert [(r["attempt"], r["exit_code"], r["kind"]) for r in plan["diagnostics"]["retries"]] == [(1, 1, "retry")]
    assert [(r["attempt"], r["outcome"], r["exit_code"]) for r in project.runs()][:2] == [(1, "error", 1),
                                                                                        (2, "passed", 0)]

    # a data error (65) is the inputs' fault: no retry
    (project.root / "calls.log").unlink()
    data["phases"]["plan"]["producer"] = {"python": "phaselib:exits", "code": 65}
    construct(project, data)
    result = project.run("constructs/")
    result.assert_outcomes(failed=1)
    assert calls(project) == ["plan 1"]
    result.stdout.fnmatch_lines(["construct ship-it failed in phase plan (exit 65, data_error)"])


def test_a_python_phases_own_exit_code_is_read_through_its_contract(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["producer"] = {"python": "phaselib:exits", "code": 2}
    data["contracts"] = {"plan": {"exit_codes": {0: "success", 2: "blocked"}}}
    data["assessment"] = {"gates": {"plan": {"execution": {"max_retries": 2}}}}  # 2 is a soft failure; 80 is not
    construct(project, data)
    result = project.run("constructs/", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    assert calls(project) == ["plan 1"]
    result.stdout.fnmatch_lines(["construct ship-it failed in phase plan (exit 80, blocked)",
                                 "*sys.exit(2)*contracts.plan.exit_codes: 2 means blocked, exit code 80*"])
    plan = records(project, item_dir(project))["execution-result.plan.json"]
    assert (plan["exit_code"], plan["status"], plan["exit_meaning"], plan["triage"]) == (80, "blocked", "blocked",
                                                                                        "escalate")
    assert junit_properties(project)["ship-it"]["harness_exit_code"] == "80"


def test_a_python_phase_past_its_timeout_ends_with_81(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["producer"] = {"python": "phaselib:slow"}
    data["assessment"] = {"gates": {"plan": {"execution": {"timeout_ms": 300, "max_retries": 3}}}}
    construct(project, data)
    result = project.run("constructs/", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["construct ship-it failed in phase plan (exit 81, timeout)",
                                 "*phase plan ran past its 300 ms (timeout_ms)*"])
    plan = records(project, item_dir(project))["execution-result.plan.json"]
    assert (plan["status"], plan["exit_code"], plan["attempts"]) == ("timeout", 81, 1)  # 81 escalates: no retry
    gate2 = plan["diagnostics"]["gates_passed"][-1]
    assert gate2["gate"] == 2 and [(c["name"], c["passed"]) for c in gate2["details"]["checks_performed"]] == [
        ("ran without error", True), ("in time", False)]
    assert junit_properties(project)["ship-it"]["harness_exit_code"] == "81"


@needs_sandbox
def test_a_command_phases_exit_code_is_read_through_its_contract(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["build"]["producer"] = {"command": "python -c 'import sys; sys.exit(2)'"}
    data["assessment"] = {"gates": {"build": {"execution": {"max_retries": 2}}}}
    data["contracts"] = {"build": {"exit_codes": {0: "success", 2: "blocked"}}}
    construct(project, data)
    result = project.run("constructs/", "--junitxml=junit.xml", subprocess=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["construct ship-it failed in phase build (exit 80, blocked)",
                                 "*exited 2*contracts.build.exit_codes: 2 means blocked, exit code 80*"])
    build = records(project, item_dir(project))["execution-result.build.json"]
    assert (build["exit_code"], build["status"], build["attempts"]) == (80, "blocked", 1)  # 80 escalates
    assert junit_properties(project)["ship-it"]["harness_exit_code"] == "80"

    # the construct's own name for the code is what the records call it
    data["assessment"]["exit_codes"] = {80: "waiting_for_human"}
    construct(project, data)
    project.run("constructs/", subprocess=True).stdout.fnmatch_lines(
        ["construct ship-it failed in phase build (exit 80, waiting_for_human)"])


@needs_sandbox
def test_a_command_phase_answers_on_stdout_and_is_killed_at_its_timeout(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["phases"]["plan"]["producer"] = {
        "command": "python -c \"print('# Plan'); print('## Goals'); print('Go.'); print('## Steps'); print('Do.')\""}
    data["phases"]["build"]["producer"] = {"command": "sleep 5"}
    data["assessment"] = {"gates": {"build": {"execution": {"timeout_ms": 500}}}}
    construct(project, data)
    result = project.run("constructs/", subprocess=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["construct ship-it failed in phase build (exit 81, timeout)"])
    folder = item_dir(project)
    assert (folder / "workspace" / "plan.md").read_text().splitlines() == ["# Plan", "## Goals", "Go.", "## Steps", "Do."]
    found = records(project, folder)
    assert found["handoff-plan-to-build.json"]["accepted"] is True
    assert found["execution-result.build.json"]["exit_code"] == 81
    assert found["execution-result.build.json"]["duration_ms"] < 4000


SKILL = """\
skill_id: outline
version: 2.0.0
title: Outline
description: The headings of a Markdown text, as JSON
input_schema: {type: object, required: [text], properties: {text: {type: string}}}
output_schema: {type: object, required: [headings], properties: {headings: {type: array, items: {type: string}}}}
template_type: null
implementation: {type: python_function, handler: "skillib:outline"}
cases:
  - id: one
    inputs: {text: "# A"}
"""

SKILL_HANDLER = '''
def outline(data):
    return {"headings": [line.lstrip("# ") for line in data["text"].splitlines() if line.startswith("#")]}
'''


def test_a_phase_run_by_a_skill_writes_the_skills_output(project: Project) -> None:
    project.write("skills/outline.skill.yaml", SKILL)
    project.write("skillib.py", SKILL_HANDLER)
    project.write("constructs/schemas/outline-v1.json", json.dumps(
        {"type": "object", "required": ["headings"], "properties": {"headings": {"type": "array", "minItems": 3}}}))
    data = copy.deepcopy(BASE)
    data["skills"] = [{"name": "outline", "required": True, "phase": "build"}]
    data["phases"]["build"] = {"inputs": {"text": {"artifact": "plan.md"}},
                               "produces": [{"path": "outline.json", "schema": "outline-v1"}]}
    construct(project, data)
    project.run("constructs/").assert_outcomes(passed=1)
    folder = item_dir(project)
    assert json.loads((folder / "workspace" / "outline.json").read_text()) == {"headings": ["Plan", "Goals", "Steps"]}
    build = records(project, folder)["execution-result.build.json"]
    assert (build["skill_id"], build["skill_version"]) == ("outline", "2.0.0")
    assert [g["gate"] for g in build["diagnostics"]["gates_passed"]] == [1, 2, 3, 4]  # 4: the skill's own verdict
    assert json.loads((folder / "phases" / "build" / "attempt-1.md").read_text())["headings"][0] == "Plan"

    # the skill's output failing the artifact's schema is the phase's gate 3
    project.write("constructs/schemas/outline-v1.json", json.dumps(
        {"type": "object", "properties": {"headings": {"type": "array", "minItems": 4}}}))
    result = project.run("constructs/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["construct ship-it failed in phase build (exit 84, validation_failed)",
                                 "*outline.json: does not match outline-v1*"])


def test_constructs_run_the_same_under_xdist(project: Project) -> None:
    construct(project, BASE, "constructs/one")
    second = copy.deepcopy(BASE)
    second["phases"]["plan"]["producer"] = {"python": "phaselib:thin_plan"}
    construct(project, second, "constructs/two")
    result = project.run("constructs/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=1, failed=1)
    one = next(project.work.glob("runs/*/ship-it/constructs-one"))
    two = next(project.work.glob("runs/*/ship-it/constructs-two"))
    assert records(project, one)["execution-result.build.json"]["exit_code"] == 0
    assert records(project, two)["execution-result.build.json"]["exit_code"] == 80
    assert (one / "workspace" / "build.md").is_file() and not (two / "workspace" / "build.md").exists()


def test_a_mistake_is_one_collection_error_without_a_traceback(project: Project) -> None:
    data = copy.deepcopy(BASE)
    data["assessment"] = {"gates": {"plan": {"precondition": {"checks": ["operator_detected"]}}}}
    construct(project, data)
    result = project.run("constructs/", subprocess=True)
    assert result.ret == 2
    (section,) = error_sections(result)
    assert section[0].startswith("constructs/ship/construct.yaml: assessment.gates.plan.precondition.checks[0]: "
                                 "unknown precondition check 'operator_detected'")
    assert "(fix: use files_exist" in section[0]
    assert "Traceback" not in result.stdout.str()


MODELS = '''
from harness.llm.providers.mock import forget_mock_model, mock_model


@mock_model("t-builder")
def builder(request):
    asked = request.messages[-1].text
    return "# Build\\n\\n## Result\\n\\nBuilt from " + ("the plan" if "Ship it." in asked else "nothing") + ".\\n"


def pytest_unconfigure(config):
    forget_mock_model("t-builder")
'''

GOAL_RUBRIC = """\
metadata: {name: Build quality, version: "1.0.0"}
threshold: 0.8
dimensions:
  result: {weight: 0.5, description: "Says what was built", check: {contains: {all: ["## Result"]}}}
  clarity: {weight: 0.5, description: "Clear to a reader"}
"""


@pytest.mark.parametrize(("judge", "passed"), [("mock/score-0.9", True), ("mock/score-0.2", False)])
def test_a_prompt_phase_on_a_model_is_judged_by_its_goal_rubric(project: Project, judge: str, passed: bool) -> None:
    from conftest import prompt_text

    project.write("conftest.py", MODELS)
    project.rubric("build-quality", GOAL_RUBRIC)
    project.write("constructs/ship/build.md", prompt_text("Builder"))
    project.write("constructs/ship/judge.md", prompt_text("Judge"))
    data = copy.deepcopy(BASE)
    data["phases"]["build"].update(producer={"prompt": "build.md", "model": "mock/t-builder"}, rubric="build-quality",
                                   evaluator={"prompt": "judge.md", "model": judge})
    construct(project, data)
    result = project.run("constructs/", "--junitxml=junit.xml")
    result.assert_outcomes(passed=int(passed), failed=int(not passed))
    folder = item_dir(project)
    assert (folder / "workspace" / "build.md").read_text() == "# Build\n\n## Result\n\nBuilt from the plan.\n"
    build = records(project, folder)["execution-result.build.json"]
    gate4 = build["diagnostics"]["gates_passed"][-1]
    assert (gate4["gate"], gate4["passed"], build["exit_code"]) == (4, passed, 0 if passed else 1)
    assert build["assessment"]["score"] == (0.95 if passed else 0.6)
    assert {e["reference"] for e in build["assessment"]["evidence"]} == {"result", "clarity"}
    props = junit_properties(project)["ship-it"]
    assert int(props["harness_input_tokens"]) > 0  # the model's calls are the item's
    row = project.runs()[-1]
    assert (row["rubric_name"], row["overall_score"], row["exit_code"]) == ("build-quality", build["assessment"]["score"],
                                                                          build["exit_code"])
    if not passed:
        result.stdout.fnmatch_lines(["construct ship-it failed in phase build (exit 1, general_failure)"])


def test_an_optional_skill_the_project_lacks_skips_its_phase(project: Project) -> None:
    data = with_phase(BASE, "review", {"receives": ["build.md"]})
    data["skills"] = [{"name": "reviewer", "required": False, "phase": "review"}]
    construct(project, data)
    project.run("constructs/", "--junitxml=junit.xml").assert_outcomes(passed=1)
    props = junit_properties(project)["ship-it"]
    assert json.loads(props["harness_phases"]) == {"plan": "passed", "build": "passed", "review": "skipped"}
    assert "execution-result.review.json" not in records(project, item_dir(project))
