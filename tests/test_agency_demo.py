"""The AgencyCore reference pipeline (pipelines/agencycore.pipeline.yaml), as a user runs it: offline, every stage's
output with exactly the agent-pipeline document's fields, hostile plans blocked by the SafetyGuard before anything
runs (with its record), the ToolRunner's mock mode running nothing, its live mode only in the sandbox, and two
cycles: the second retrieves what the first approved, and history shows the Gatekeeper's score per cycle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, needs_sandbox
from harness.apps.agency.memory import Memory
from harness.apps.agency.models import OUTPUTS
from harness.apps.agency.stages import tool_runner
from harness.apps.cli import main as harness_main

REPO = Path(__file__).resolve().parent.parent
PIPELINE = "pipelines/agencycore.pipeline.yaml"
HOSTILE = {"rm-rf": "rm -rf /", "api-key": "ANTHROPIC_API_KEY", "process-env": "process.env", "dotenv": ".env"}


@pytest.fixture
def demo(project: Project) -> Project:
    shutil.copytree(REPO / "pipelines", project.root / "pipelines")
    (project.root / "rubrics").mkdir(exist_ok=True)
    shutil.copy(REPO / "rubrics" / "agency-scorecard.yaml", project.root / "rubrics")
    return project


def contexts(project: Project, cycle: str | None = None) -> dict[str, dict[str, Any]]:
    folder = project.cycle_dir(cycle) / "agencycore"
    return {p.parent.name: json.loads(p.read_text()) for p in folder.glob("*/pipeline-context.json")}


def test_the_demo_passes_offline_and_every_stage_keeps_the_documents_fields(demo: Project) -> None:
    result = demo.run(PIPELINE, "-v")
    result.assert_outcomes(passed=9)
    runs = contexts(demo)
    assert len(runs) == 9
    for case, context in runs.items():
        stages = list(OUTPUTS) if case not in HOSTILE else list(OUTPUTS)[:6]  # a blocked run hands nothing on
        assert list(context) == stages, case
        for stage, output in context.items():
            model = OUTPUTS[stage]
            model.model_validate(output)
            assert set(output) == set(model.model_fields), (case, stage)  # exactly the document's fields
            assert output["agent"] == model.model_fields["agent"].annotation.__args__[0]
    hello = runs["hello-world"]
    assert hello["observer"]["domain"] == "Dev" and "hello" in hello["observer"]["keywords"]
    assert hello["implementor"]["filesCreated"] == ["hello.py"]
    assert (demo.cycle_dir() / "agencycore" / "hello-world" / "workspace" / "hello.py").is_file()
    assert hello["gatekeeper"]["totalScore"] == sum(hello["gatekeeper"]["scorecard"].values()) >= 15


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_plan_is_blocked_before_anything_runs_with_the_safetyguards_record(demo: Project,
                                                                                      case: str) -> None:
    result = demo.run(PIPELINE, "-k", case, "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)  # the case expects the block (blocked_at: safety_guard)
    (folder,) = [p.parent for p in demo.cycle_dir().rglob("pipeline-context.json")]
    record = json.loads((folder / "stages" / "safety_guard" / "attempt-1.md").read_text())
    assert (record["agent"], record["safe"]) == ("SafetyGuard", False)
    assert any(HOSTILE[case] in risk for risk in record["risks"]), record["risks"]
    assert record["blockedActions"] and record["requiresApproval"] is True
    handoff = json.loads((folder / "handoff-safety_guard-to-implementor.json").read_text())
    assert (handoff["accepted"], handoff["decision"]) == (False, "block")
    assert "SafetyGuard blocks the plan" in handoff["validation"]["blockers"][0]
    assert not (folder / "stages" / "implementor").exists() and not (folder / "stages" / "tool_runner").exists()
    assert list((folder / "workspace").iterdir()) == []  # nothing of the plan ran
    junit = (demo.root / "junit.xml").read_text()
    assert 'name="harness_blocked_at" value="safety_guard"' in junit


def test_two_cycles_the_second_retrieves_what_the_first_approved(demo: Project) -> None:
    demo.run(PIPELINE).assert_outcomes(passed=9)
    memory = Memory(demo.work / "memory" / "agencycore")
    approved = {lesson["title"] for lesson in memory.lessons()}
    assert approved and all(lesson["reviewedBy"]["cycle"] == demo.cycles()[0] for lesson in memory.lessons())
    first = contexts(demo, demo.cycles()[0])
    assert first["hello-world"]["retriever"]["lessons"] == []  # the first run of all had nothing to recall
    demo.run(PIPELINE).assert_outcomes(passed=9)
    second = contexts(demo, demo.cycles()[1])
    recalled = second["hello-world"]["retriever"]["lessons"]
    assert recalled and all(any(line.startswith(f"{title}: ") for title in approved) for line in recalled)
    assert second["hello-world"]["retriever"]["examples"]  # the first cycle's good runs, as examples
    improvements = first["ci-config"]["gatekeeper"]["improvements"]
    assert set(improvements) <= set(second["hello-world"]["guide"]["bestPractices"]) or not improvements
    # the Learner's level grew with the Gatekeeper's promotions, and persisted across cycles
    assert first["hello-world"]["learner"]["currentLevel"] < second["hello-world"]["learner"]["currentLevel"]


def test_history_and_plots_show_the_gatekeepers_score_per_cycle(demo: Project, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        demo.run(PIPELINE).assert_outcomes(passed=9)
    capsys.readouterr()
    assert harness_main(["history", "--work-dir", str(demo.work), "--rubric", "agency-scorecard", "--format",
                         "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["cycle"] for row in rows] == demo.cycles() and all(row["items"] == 5 for row in rows)
    totals = [sum(c["gatekeeper"]["totalScore"] for c in contexts(demo, cycle).values() if "gatekeeper" in c) / 5
              for cycle in demo.cycles()]
    assert [round(row["score"] * 25, 6) for row in rows] == [round(t, 6) for t in totals]
    # and the plot of it: the Gatekeeper's score over the cycles
    assert harness_main(["plot", "--work-dir", str(demo.work), "--tracking-dir", str(demo.root / "tracking")]) == 0
    plot = demo.root / "tracking" / "plots" / "score-agencycore-agency-scorecard.png"
    assert plot.is_file() and plot.stat().st_size > 5000


def request_for(workspace: Path, commands: list[str], level: int = 3) -> dict[str, Any]:
    memory = workspace.parent / "memory"
    Memory(memory).set_level(level, {"cycle": "test"})
    return {"inputs": {"context": {"implementor": {"commandsRun": commands}},
                       "pipeline": {"workspace": str(workspace), "memory": str(memory)}}}


def test_mock_mode_records_every_command_and_runs_none(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    output = tool_runner(request_for(workspace, ["touch made-by-the-command", "python -m pytest -q"]))
    assert [c["command"] for c in output["executedCommands"]] == ["touch made-by-the-command", "python -m pytest -q"]
    assert all(c["mockMode"] and c["success"] for c in output["executedCommands"])
    assert not (workspace / "made-by-the-command").exists()
    OUTPUTS["tool_runner"].model_validate(output)


@needs_sandbox
def test_live_mode_runs_only_what_the_guard_passes_and_only_in_the_sandbox(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    marker = tmp_path.name + "-host-marker"
    (Path("/tmp") / marker).write_text("on the host")
    commands = ["touch made-by-the-command && ls /tmp", f"touch {outside}", "cat .env"]
    output = tool_runner(request_for(workspace, commands), mode="live")
    (ran,) = output["executedCommands"]
    assert (ran["command"], ran["success"], ran["mockMode"]) == (commands[0], True, False)
    assert (workspace / "made-by-the-command").is_file()
    assert marker not in ran["output"]  # a /tmp of its own: the sandbox, not this machine's
    (Path("/tmp") / marker).unlink()
    assert not outside.exists()
    assert [s.split(" (")[0] for s in output["skippedCommands"]] == commands[1:]
    assert all("SafetyGuard" in s for s in output["skippedCommands"])
    lower = tool_runner(request_for(workspace, ["touch second"], level=2), mode="live")
    assert lower["executedCommands"] == [] and "need level 3" in lower["skippedCommands"][0]
