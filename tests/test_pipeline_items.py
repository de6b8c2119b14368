"""Pipelines as items: a user's own pipeline added with files only, its stages run in order with typed outputs
checked at each handoff (a PhaseHandoff written, accepted or not), ``on_failure`` honoured, the failure report as a
table of stages, ``blocked_at`` cases, a stage on a model (the mock provider), the records, the trace, JUnit,
``--harness-exit-status item``, collection errors in one line, and the same under xdist."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
import yaml

from conftest import Project, error_sections, prompt_text
from harness.base.jsonschemas import contract_errors

# The user's stages: a Python function, a prompt on the mock provider, a Python function.
STAGES = '''
from pydantic import BaseModel


class Words(BaseModel):
    words: list[str]
    count: int


def split(request):
    text = request["inputs"]["request"]
    if text == "explode":
        raise RuntimeError("cannot split that")
    words = text.split()
    return Words(words=words, count=len(words) if text != "miscount" else -1)


def plain(request):
    return {"text": request["inputs"]["request"]}


def verdict(request):
    context = request["inputs"]["context"]
    return {"words": context["split"]["count"], "summary": context["summarize"]["summary"],
            "stages_seen": sorted(context)}
'''

PIPELINE = {
    "pipeline": "wordy",
    "version": "1.1.0",
    "stages": [
        {"name": "split", "producer": {"python": "stagelib:split"}, "output": {"model": "stagelib:Words"},
         "checks": [{"id": "counted", "check": {"json_path": {"path": "count", "matches": "^[0-9]+$"}}}]},
        {"name": "summarize", "producer": {"prompt": "prompts/summarize.md", "model": "mock/echo"},
         "output": {"schema": "schemas/summary.json"}},
        {"name": "verdict", "producer": {"python": "stagelib:verdict"},
         "output": {"schema": {"type": "object", "required": ["words", "summary"],
                               "properties": {"words": {"type": "integer", "minimum": 1}}}}},
    ],
    "cases": [{"id": "three", "inputs": {"request": "one two three"}},
              {"id": "two", "inputs": {"request": "one two"}}],
}

SUMMARY_SCHEMA = {"type": "object", "required": ["summary", "tone"],
                  "properties": {"summary": {"type": "string", "minLength": 1}, "tone": {"enum": ["plain", "warm"]}},
                  "additionalProperties": False}


def pipeline(project: Project, data: dict[str, Any] | None = None, name: str = "wordy") -> None:
    project.write("stagelib.py", STAGES)
    project.write("pipelines/prompts/summarize.md", prompt_text("Summarize"))
    project.write("pipelines/schemas/summary.json", json.dumps(SUMMARY_SCHEMA))
    project.write(f"pipelines/{name}.pipeline.yaml", yaml.safe_dump(data or PIPELINE, sort_keys=False))


def with_cases(*cases: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(PIPELINE))
    data["cases"] = list(cases)
    data.update(changes)
    return data


def junit(project: Project) -> dict[str, dict[str, str]]:
    tree = ET.parse(project.root / "junit.xml")
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in tree.iter("testcase")}


def item_folder(project: Project, case: str):
    (found,) = list(project.work.glob(f"runs/*/wordy/{case}"))
    return found


def test_a_users_pipeline_of_three_stages_runs_with_files_only(project: Project) -> None:
    pipeline(project)
    result = project.run("pipelines/", "-v", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pipelines/wordy.pipeline.yaml::three PASSED*",
                                 "pipelines/wordy.pipeline.yaml::two PASSED*"])
    folder = item_folder(project, "three")
    context = json.loads((folder / "pipeline-context.json").read_text())
    assert context["split"] == {"words": ["one", "two", "three"], "count": 3}
    assert context["summarize"]["tone"] == "plain" and context["summarize"]["summary"]  # the mock fills the schema
    assert context["verdict"] == {"words": 3, "summary": context["summarize"]["summary"],
                                  "stages_seen": ["split", "summarize"]}  # each stage sees every earlier output
    # every handoff between consecutive stages, accepted, each keeping the PhaseHandoff contract
    handoffs = {p.name: json.loads(p.read_text()) for p in folder.glob("handoff-*.json")}
    assert sorted(handoffs) == ["handoff-split-to-summarize.json", "handoff-summarize-to-verdict.json"]
    for record in handoffs.values():
        assert contract_errors("phase_handoff", record) == [] and record["accepted"] is True
    assert handoffs["handoff-split-to-summarize.json"]["artifacts"]["required"][0]["schema"] == "stagelib:Words"
    # one execution result per stage, naming it, each timed and valid; the stages' attempts recorded
    results = [r for r in project.execution_results() if r["nodeid"].endswith("::three")]
    assert [r["phase"] for r in results] == ["split", "summarize", "verdict"]
    assert all(contract_errors("execution_result", r) == [] and r["exit_code"] == 0 for r in results)
    assert [g["gate"] for g in results[0]["diagnostics"]["gates_passed"]] == [1, 2, 3]
    rows = [r for r in project.runs() if r["nodeid"].endswith("::three")]
    assert [(r["case_id"], r["outcome"]) for r in rows] == [
        ("three.split", "passed"), ("three.summarize", "passed"), ("three.verdict", "passed")]
    assert rows[1]["model"] == "mock/echo" and rows[1]["input_tokens"] > 0
    props = junit(project)["three"]
    assert (props["harness_kind"], props["harness_exit_code"], props["harness_outcome"]) == ("pipeline", "0", "passed")
    assert json.loads(props["harness_stages"]) == {"split": "passed", "summarize": "passed", "verdict": "passed"}
    # the trace keeps each stage as a phase of the item, and its model call tied to the item
    cycle = project.cycles()[0]
    lines = [json.loads(line) for line in (project.work / "traces" / f"{cycle}.jsonl").read_text().splitlines()]
    assert [line["data"]["phase"] for line in lines if line["event"] == "execution_complete"
            and line["data"]["nodeid"].endswith("::three")] == ["split", "summarize", "verdict"]
    assert any(line["event"] == "model_call" and line["data"]["nodeid"].endswith("::three") for line in lines)
    assert sum(line["event"] == "handoff_attempted" for line in lines) == 4


def test_an_output_of_the_wrong_type_blocks_the_next_stage_and_the_report_is_a_table(project: Project) -> None:
    pipeline(project, with_cases({"id": "bad", "inputs": {"request": "miscount"}}))
    result = project.run("pipelines/", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "pipeline wordy[[]bad[]] blocked at stage split (exit 80, *): summarize, verdict did not run",
        "  summarize did not accept what split handed on:",
        "    - counted: count*-1*",
        "  stage      status      exit       ms  score  handoff",
        "  split      failed        84 * rejected: blocks",
        "  summarize  blocked       80 *",
        "  verdict    not_run *",
        "  records: WORK/runs/*/wordy* (stages/<stage>/, pipeline-context.json, workspace/); each stage's execution "
        "result: WORK/runs/*/execution-results.jsonl",
    ])
    assert "Traceback" not in result.stdout.str()
    handoff = json.loads((project.cycle_dir() / "wordy" / "handoff-split-to-summarize.json").read_text())
    assert contract_errors("phase_handoff", handoff) == []
    assert (handoff["accepted"], handoff["decision"], handoff["validation"]["schema_valid"]) == (False, "block", True)
    assert handoff["rejection_reason"].startswith("summarize did not accept what split handed on: counted:")
    assert junit(project)["bad"]["harness_exit_code"] == "80"
    assert not (project.cycle_dir() / "wordy" / "stages" / "summarize").exists()  # it never ran
    context = json.loads((project.cycle_dir() / "wordy" / "pipeline-context.json").read_text())
    assert context == {}  # a rejected output is not handed on
    assert project.run("pipelines/", "--harness-exit-status", "item").ret == 80


@pytest.mark.parametrize(("output", "problem"), [
    ({"schema": {"type": "object", "required": ["summary"]}}, "    - output inline: summary: missing"),
    ({"model": "stagelib:Words"}, "    - output stagelib:Words: words: *"),  # pydantic's own words after the field
])
def test_an_output_that_is_not_its_declared_type_is_refused_naming_the_field(project: Project, output: dict[str, Any],
                                                                            problem: str) -> None:
    data = with_cases({"id": "one", "inputs": {"request": "one"}})
    data["stages"][0]["producer"] = {"python": "stagelib:plain"}
    data["stages"][0]["output"] = output
    data["stages"][0].pop("checks")
    pipeline(project, data)
    result = project.run("pipelines/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["pipeline wordy[[]one[]] * (exit *", problem])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("on_failure", "summarize", "outcome"), [("warn", "passed", "passed"),
                                                                   ("skip", "skipped", "passed")])
def test_on_failure_warn_goes_on_and_skip_skips_the_next_stage(project: Project, on_failure: str, summarize: str,
                                                               outcome: str) -> None:
    data = with_cases({"id": "odd", "inputs": {"request": "miscount"}})
    data["stages"][0]["on_failure"] = on_failure
    data["stages"][2]["producer"] = {"python": "stagelib:split"}
    data["stages"][2]["output"] = {"model": "stagelib:Words"}
    pipeline(project, data)
    result = project.run("pipelines/", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    stages = json.loads(junit(project)["odd"]["harness_stages"])
    assert stages == {"split": "passed", "summarize": summarize, "verdict": "passed"}
    handoff = json.loads((project.cycle_dir() / "wordy" / "handoff-split-to-summarize.json").read_text())
    decision = {"warn": "proceed_with_warnings", "skip": "skip"}[on_failure]
    assert (handoff["decision"], handoff["accepted"]) == (decision, on_failure == "warn")
    assert contract_errors("phase_handoff", handoff) == []


def test_a_stage_that_raises_stops_the_pipeline_with_its_error(project: Project) -> None:
    pipeline(project, with_cases({"id": "boom", "inputs": {"request": "explode"}}))
    result = project.run("pipelines/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["pipeline wordy[[]boom[]] failed at stage split (exit 1, general_failure)",
                                 "*stagelib:split raised RuntimeError: cannot split that*",
                                 "  split      failed         1 *", "  summarize  not_run *"])
    (split,) = [r for r in project.execution_results() if r["phase"] == "split"]
    assert split["exit_code"] == 1 and [g["gate"] for g in split["diagnostics"]["gates_passed"]] == [1, 2]


def test_blocked_at_passes_only_when_that_stage_blocks(project: Project) -> None:
    pipeline(project, with_cases({"id": "caught", "blocked_at": "split", "inputs": {"request": "miscount"}},
                                 {"id": "missed", "blocked_at": "split", "inputs": {"request": "one two"}}))
    result = project.run("pipelines/", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["pipeline wordy[[]missed[]] should be blocked at split, but it was not blocked",
                                 "  stage * handoff", "  split      passed *accepted"])
    assert junit(project)["caught"]["harness_exit_code"] == "0"
    assert junit(project)["caught"]["harness_blocked_at"] == "split"


def test_a_stage_on_a_model_without_its_key_is_not_scored(project: Project,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    data = with_cases({"id": "one", "inputs": {"request": "one"}})
    data["stages"][1]["producer"]["model"] = "claude-haiku-4-5"
    pipeline(project, data)
    result = project.run("pipelines/", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*not scored: stage summarize: no ANTHROPIC_API_KEY*"])


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"stages": [{"name": "a", "producer": {"python": "stagelib:split"}, "outptu": {}}]}, "stages[0].outptu",
     "unknown"),
    ({"stages": [{"name": "a", "producer": {"python": "stagelib:split"}, "output": {"model": "stagelib:split"}}]},
     "stages[0].output.model", "not a pydantic model"),
    ({"stages": [{"name": "a", "producer": {"python": "stagelib:split"}, "on_failure": "ignore"}]},
     "stages[0].on_failure", "ignore"),
    ({"stages": [{"name": "a"}]}, "stages[0]", "nothing runs this stage"),
    ({"cases": [{"id": "x", "inputs": {"text": "no request"}}]}, "cases[0].inputs", "has no 'request'"),
    ({"cases": [{"id": "x", "blocked_at": "nowhere", "inputs": {"request": "a"}}]}, "cases[0].blocked_at",
     "'nowhere' is not a stage"),
])
def test_a_mistake_is_one_collection_error_naming_the_field(project: Project, change: dict[str, Any], field: str,
                                                            problem: str) -> None:
    data = json.loads(json.dumps(PIPELINE))
    data.update(change)
    pipeline(project, data)
    result = project.run("pipelines/", subprocess=True)
    assert result.ret == 2 or result.ret == 1
    (section,) = error_sections(result)
    assert len(section) == 1, section
    assert f"pipelines/wordy.pipeline.yaml: {field}" in section[0] and problem in section[0], section
    assert "Traceback" not in result.stdout.str()


def test_pipelines_run_the_same_under_xdist(project: Project) -> None:
    pipeline(project, with_cases(*({"id": f"c{i}", "inputs": {"request": " ".join(["w"] * i)}} for i in range(1, 5)),
                                 {"id": "bad", "inputs": {"request": "miscount"}}))
    result = project.run("pipelines/", "-n", "2", "--junitxml=junit.xml", subprocess=True)
    result.assert_outcomes(passed=4, failed=1)
    props = junit(project)
    assert {name: p["harness_exit_code"] for name, p in props.items()} == {
        "c1": "0", "c2": "0", "c3": "0", "c4": "0", "bad": "80"}
    text = (project.cycle_dir() / "execution-results.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 4 * 3 + 2  # every stage that started, whole lines
