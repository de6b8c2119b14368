"""Construct files as the loader reads them: the assessment document's construct.yaml field by field, and every
mistake one error that names the file, the field and the fix."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.base.errors import HarnessConfigError
from harness.base.jsonschemas import contract_errors
from harness.loading.constructs import load_construct

REPO = Path(__file__).resolve().parents[1]
KINDS = ("prompt", "template", "python", "command")

# The document's section 7 example as written, with the phases block of its section 5.4: discovery is run by the skill
# `skills:` gives it (optional, and not in this project), design by a producer. Its `operator_detected` check is the
# one element a harness cannot have: see test_the_documents_own_check.
DOCUMENT = {
    "apiVersion": "loa/v1", "kind": "Construct",
    "metadata": {"name": "autonomous-agent", "version": "1.0.0"},
    "vars": {"project": "demo"},
    "skills": [{"name": "riding-codebase", "required": False, "phase": "discovery"}],
    "execution": {"type": "sequential", "phases": ["discovery", "design"]},
    "phases": {
        "discovery": {"receives": [], "produces": [
            {"path": "grimoires/{project}/prd.md", "schema": "prd-v1", "required": True},
            {"path": "grimoires/{project}/research/*.md", "schema": "research-note", "required": False}]},
        "design": {"producer": {"python": "lib:design"},
                   "receives": [{"path": "grimoires/{project}/prd.md", "schema": "prd-v1", "required": True,
                                 "min_completeness": 0.8}],
                   "produces": [{"path": "grimoires/{project}/sdd.md", "schema": "sdd-v1", "required": True}]},
    },
    "assessment": {
        "capture": {"enabled": True, "retention_days": 30, "include_inputs": "hashed", "include_outputs": "summary"},
        "gates": {
            "discovery": {"precondition": {"checks": ["context_files_exist"]},
                          "execution": {"timeout_ms": 300000, "max_retries": 2},
                          "output": {"schema": "prd-v1", "min_completeness": 0.7}},
            "design": {"precondition": {"checks": ["prd_exists", {"prd_completeness": 0.8}]},
                       "execution": {"timeout_ms": 600000, "max_retries": 1},
                       "output": {"schema": "sdd-v1", "required_sections": ["architecture", "data_model",
                                                                            "api_contracts"]}},
        },
        "exit_codes": {80: "waiting_for_human"},
        "handoffs": {"discovery_to_design": {
            "required_artifacts": ["grimoires/{project}/prd.md"],
            "optional_artifacts": ["grimoires/{project}/research/*.md"],
            "validation": {"schema": "prd-v1", "min_completeness": 0.8}, "on_failure": "block"}},
    },
    "contracts": {
        "discovery": {"inputs": ["context/*.md", "AGENTS.md (optional)"], "outputs": ["grimoires/{project}/prd.md"],
                      "exit_codes": {0: "success", 1: "incomplete", 2: "blocked", 83: "escalation_required"}},
        "design": {"inputs": ["grimoires/{project}/prd.md"], "outputs": ["grimoires/{project}/sdd.md"],
                   "exit_codes": {0: "success", 1: "incomplete", 84: "validation_failed"}},
    },
}

SCHEMAS = {
    "prd-v1.yaml": "required_sections: [problem, goals, requirements]\noptional_sections: [research]\n",
    "sdd-v1.yaml": "required_sections: [architecture, data_model, api_contracts]\n",
    "research-note.yaml": "required_sections: [findings]\n",
    "plan-v1.json": json.dumps({"type": "object", "required": ["steps"],
                                "properties": {"steps": {"type": "array"}}}),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in SCHEMAS.items():
        (tmp_path / "constructs" / "schemas").mkdir(parents=True, exist_ok=True)
        (tmp_path / "constructs" / "schemas" / name).write_text(text)
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "context").mkdir()
    return tmp_path


def write(project: Path, data: dict[str, Any], name: str = "construct.yaml") -> Path:
    path = project / "constructs" / "agent" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load(project: Path, data: dict[str, Any]) -> Any:
    return load_construct(write(project, data), import_root=project, rubrics_dir=project / "rubrics",
                          prompts_dir=project / "prompts", runner_kinds=KINDS)


def test_the_documents_construct_is_read_field_by_field(project: Path) -> None:
    construct = load(project, DOCUMENT)
    assert (construct.api_version, construct.name, construct.version) == ("loa/v1", "autonomous-agent", "1.0.0")
    assert [p.name for p in construct.phases] == ["discovery", "design"]
    assert construct.capture.include_inputs == "hashed" and construct.capture.retention_days == 30
    assert construct.exit_names == {80: "waiting_for_human"}
    discovery, design = construct.phases
    assert [s.path for s in discovery.produces] == ["grimoires/demo/prd.md", "grimoires/demo/research/*.md"]
    assert (discovery.timeout_ms, discovery.max_retries, design.max_retries) == (300000, 2, 1)
    assert discovery.output.schema_id == "prd-v1" and discovery.output.min_completeness == 0.7
    assert design.output.required_sections == ("architecture", "data_model", "api_contracts")
    assert [(c.name, c.kind) for c in design.preconditions] == [("prd_exists", "exists"),
                                                                 ("prd_completeness", "completeness")]
    assert design.preconditions[1].minimum == 0.8 and design.preconditions[1].schema_id == "prd-v1"
    assert discovery.preconditions[0].path == "context/*.md"
    # a phase's own exit codes, as the list's: incomplete is 3, blocked 80, escalation_required 83
    assert discovery.contract.standard == {0: 0, 1: 3, 2: 80, 83: 83}
    assert [(c.path, c.optional) for c in discovery.contract.inputs] == [("context/*.md", False),
                                                                        ("AGENTS.md", True)]
    (handoff,) = construct.handoffs
    assert (handoff.name, handoff.on_failure, handoff.declared) == ("discovery_to_design", "block", True)
    prd, research = handoff.artifacts
    # the handoff's validation and the receiver's receives, merged: one spec per path
    assert (prd.path, prd.schema_id, prd.required, prd.min_completeness) == ("grimoires/demo/prd.md", "prd-v1",
                                                                            True, 0.8)
    assert (research.required, research.schema_id) == (False, None)
    assert sorted(construct.schemas) == ["prd-v1", "research-note", "sdd-v1"]
    assert construct.skills[0].path is None and not construct.skills[0].required  # optional, not in skills/
    assert (discovery.skill.skill_id, discovery.skill.skill, discovery.agent) == ("riding-codebase", None, None)
    assert design.agent.producer.kind == "python" and design.agent.name == "autonomous-agent.design"


def test_the_files_it_reads_and_the_demo_keep_the_shipped_contract(project: Path) -> None:
    assert contract_errors("construct", json.loads(json.dumps(DOCUMENT, default=str))) == []
    for path in sorted((REPO / "constructs").glob("*/construct.yaml")):
        raw = yaml.safe_load(path.read_text())
        assert contract_errors("construct", json.loads(json.dumps(raw))) == [], path
    bad = copy.deepcopy(DOCUMENT)
    bad["assessment"]["handoffs"]["discovery_to_design"]["on_failure"] = "abort"
    assert contract_errors("construct", json.loads(json.dumps(bad, default=str)))


def test_without_a_declared_handoff_the_receivers_receives_block(project: Path) -> None:
    data = copy.deepcopy(DOCUMENT)
    del data["assessment"]["handoffs"]
    (handoff,) = load(project, data).handoffs
    assert (handoff.declared, handoff.on_failure) == (False, "block")
    assert [(s.path, s.min_completeness) for s in handoff.artifacts] == [("grimoires/demo/prd.md", 0.8)]


def test_required_sections_true_means_every_section_of_the_schema(project: Path) -> None:
    data = copy.deepcopy(DOCUMENT)
    data["assessment"]["handoffs"]["discovery_to_design"]["validation"]["required_sections"] = True
    prd = load(project, data).handoffs[0].artifacts[0]
    assert prd.required_sections == ("problem", "goals", "requirements", "research")


def test_the_documents_own_check_is_named_with_the_fix(project: Path) -> None:
    data = copy.deepcopy(DOCUMENT)
    data["assessment"]["gates"]["discovery"]["precondition"]["checks"].append("operator_detected")
    with pytest.raises(HarnessConfigError) as caught:
        load(project, data)
    error = caught.value
    assert error.field == "assessment.gates.discovery.precondition.checks[1]"
    assert "unknown precondition check 'operator_detected'" in error.problem
    assert "files_exist" in error.fix and "prd" in error.fix and "check:" in error.fix


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


_DELETE = object()

MISTAKES = [
    ("apiVersion", _set("apiVersion", "v1"), "apiVersion", "not a group and version"),
    ("kind", _set("kind", "Pipeline"), "kind", "not a construct"),
    ("version", _set("metadata/version", _DELETE), "metadata.version", "missing"),
    ("top key", _set("contract", {}), "contract", "did you mean 'contracts'"),
    ("execution type", _set("execution/type", "parallel"), "execution.type", "unknown execution type"),
    ("phase twice", _set("execution/phases", ["discovery", "design", "design"]), "execution.phases[2]", "twice"),
    ("phase unknown", _set("phases/desing", {"producer": {"python": "lib:x"}}), "phases.desing",
     "did you mean 'design'"),
    ("no runner", _set("phases/design/producer", _DELETE), "phases.design", "nothing runs this phase"),
    ("runner kind", _set("phases/design/producer", {"pyhton": "lib:x"}), "phases.design.producer",
     "did you mean 'python'"),
    ("two runners", _set("phases/design/skill", "riding-codebase"), "phases.design.producer",
     "run by `skill:` and by a producer"),
    ("skill and producer", _set("phases/discovery/producer", {"python": "lib:x"}), "phases.discovery.producer",
     "run by skill riding-codebase (skills[].phase) and by a producer"),
    ("schema id", _set("phases/design/produces/0/schema", "sdd-v2"), "phases.design.produces[0].schema",
     "no schema 'sdd-v2'"),
    ("leaves workspace", _set("phases/design/produces/0/path", "../../etc/passwd"), "phases.design.produces[0].path",
     "leaves the workspace"),
    ("slot", _set("phases/design/produces/0/path", "{team}/sdd.md"), "phases.design.produces[0].path",
     "uses {team}, which vars: does not give"),
    ("completeness", _set("phases/design/receives/0/min_completeness", 1.5),
     "phases.design.receives[0].min_completeness", "outside 0..1"),
    ("section of schema", _set("assessment/gates/design/output/required_sections", ["architcture"]),
     "assessment.gates.design.output.required_sections[0]", "did you mean 'architecture'"),
    ("sections of JSON", _set("phases/design/produces/0", {"path": "plan.json", "schema": "plan-v1",
                                                           "required_sections": ["steps"]}),
     "phases.design.produces[0].required_sections", "is a JSON Schema"),
    ("artifact unknown", _set("assessment/gates/design/precondition/checks", ["spec_exists"]),
     "assessment.gates.design.precondition.checks[0]", "unknown precondition check 'spec_exists'"),
    ("artifact of completeness", _set("assessment/gates/design/precondition/checks", [{"spec_completeness": 0.5}]),
     "assessment.gates.design.precondition.checks[0].spec_completeness", "no artifact 'spec' is declared"),
    ("completeness minimum", _set("assessment/gates/design/precondition/checks", [{"prd_completeness": 2}]),
     "assessment.gates.design.precondition.checks[0].prd_completeness", "outside 0..1"),
    ("completeness bare", _set("assessment/gates/design/precondition/checks", ["prd_completeness"]),
     "assessment.gates.design.precondition.checks[0]", "needs its minimum"),
    ("registry check", _set("assessment/gates/design/precondition/checks",
                            [{"artifact": "prd", "check": {"containz": {"all": ["x"]}}}]),
     "assessment.gates.design.precondition.checks[0].check.containz", "unknown check kind 'containz'"),
    ("gates phase", _set("assessment/gates/review", {}), "assessment.gates.review", "not a phase"),
    ("timeout", _set("assessment/gates/design/execution/timeout_ms", 0), "assessment.gates.design.execution.timeout_ms",
     ">= 1"),
    ("retries", _set("assessment/gates/design/execution/max_retries", -1),
     "assessment.gates.design.execution.max_retries", ">= 0"),
    ("output without produces", _set("phases/design/produces", []), "assessment.gates.design.output",
     "produces nothing"),
    ("two schemas", _set("assessment/handoffs/discovery_to_design/validation/schema", "sdd-v1"),
     "phases.design.receives[0]", "checked against prd-v1 here and sdd-v1"),
    ("handoff backwards", _set("assessment/handoffs/design_to_discovery", {}), "assessment.handoffs.design_to_discovery",
     "does not hand off to discovery"),
    ("handoff phase", _set("assessment/handoffs/discovery_to_desing", {}), "assessment.handoffs.discovery_to_desing",
     "did you mean 'design'"),
    ("on_failure", _set("assessment/handoffs/discovery_to_design/on_failure", "abort"),
     "assessment.handoffs.discovery_to_design.on_failure", "unknown on_failure 'abort'"),
    ("required_sections true", _set("assessment/handoffs/discovery_to_design/validation",
                                    {"required_sections": True}),
     "assessment.handoffs.discovery_to_design.validation.required_sections", "there is no schema"),
    ("exit meaning", _set("contracts/discovery/exit_codes", {2: "blokced"}), "contracts.discovery.exit_codes.2",
     "did you mean 'blocked'"),
    ("exit code", _set("contracts/discovery/exit_codes", {300: "blocked"}), "contracts.discovery.exit_codes.300",
     "not an exit code"),
    ("exit name", _set("assessment/exit_codes", {80: "waiting for human"}), "assessment.exit_codes.80",
     "not a valid id"),
    ("capture", _set("assessment/capture/include_inputs", "raw"), "assessment.capture.include_inputs",
     "unknown input capture 'raw'"),
    ("contracts phase", _set("contracts/deploy", {}), "contracts.deploy", "not a phase"),
    ("skill missing", _set("skills/0/required", True), "skills[0].name", "no skill 'riding-codebase'"),
    ("skill phase", _set("skills/0/phase", "review"), "skills[0].phase", "not a phase"),
    ("skill inputs", _set("phases/design/inputs", {"text": "x"}), "phases.design.inputs", "no skill runs this phase"),
    ("workspace", _set("workspace", ["../context-missing"]), "workspace[0]", "does not exist"),
    ("evaluator without rubric", _set("phases/design/evaluator", "judge.md"), "phases.design.evaluator",
     "names no rubric"),
    ("rubric", _set("phases/design/rubric", "sdd-quality"), "phases.design.rubric", "no rubric 'sdd-quality'"),
    ("command timeouts", _set("phases/design/producer", {"command": "make sdd", "timeout_s": 5}),
     "phases.design.producer.timeout_s", "two time limits"),
]


@pytest.mark.parametrize(("mutate", "field", "words"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_names_the_file_the_field_and_the_fix(project: Path, mutate: Callable[[dict[str, Any]], None],
                                                            field: str, words: str) -> None:
    data = copy.deepcopy(DOCUMENT)
    mutate(data)
    with pytest.raises(HarnessConfigError) as caught:
        load(project, data)
    error = caught.value
    assert error.path.endswith("constructs/agent/construct.yaml")
    assert error.field == field, error.message()
    assert words in error.problem, error.message()
    assert error.fix, error.message()
    assert "\n" not in error.message()


def test_a_broken_schema_file_is_named_itself(project: Path) -> None:
    schemas = project / "constructs" / "schemas"
    (schemas / "sdd-v1.yaml").write_text("type: object\nrequired: [architecture]\n")
    with pytest.raises(HarnessConfigError) as caught:
        load(project, DOCUMENT)
    assert caught.value.path == str(schemas / "sdd-v1.yaml") and "looks like a JSON Schema" in caught.value.problem
    assert caught.value.fix == "save the JSON Schema as sdd-v1.json"
    (schemas / "sdd-v1.yaml").unlink()
    (schemas / "sdd-v1.json").write_text('{"type": "object", "required": "architecture"}')
    with pytest.raises(HarnessConfigError) as caught:
        load(project, DOCUMENT)
    assert caught.value.path == str(schemas / "sdd-v1.json") and "not a valid JSON Schema" in caught.value.problem


def test_a_schema_next_to_the_construct_wins_over_one_further_up(project: Path) -> None:
    near = project / "constructs" / "agent" / "schemas"
    near.mkdir(parents=True)
    (near / "prd-v1.yaml").write_text("required_sections: [summary]\n")
    data = copy.deepcopy(DOCUMENT)
    data["assessment"]["handoffs"]["discovery_to_design"]["validation"]["required_sections"] = True
    construct = load(project, data)
    assert construct.schemas["prd-v1"].path == near / "prd-v1.yaml"
    assert construct.handoffs[0].artifacts[0].required_sections == ("summary",)


def test_a_construct_named_file_is_read_like_construct_yaml(project: Path) -> None:
    path = write(project, DOCUMENT, name="agent.construct.yaml")
    construct = load_construct(path, import_root=project, rubrics_dir=project / "rubrics",
                               prompts_dir=project / "prompts", runner_kinds=KINDS)
    assert construct.name == "autonomous-agent"
