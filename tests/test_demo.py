"""The demo of the repository, copied into a fresh folder and run the way README's Quick start runs it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Project
from harness.testing import FakeAnthropic, judge_responder

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(project: Project) -> Project:
    """rubrics/, suites/ and conftest.py of the repository in the pytester dir (no WORK, no caches)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "WORK")
    for folder in ("rubrics", "suites"):
        shutil.copytree(REPO / folder, project.root / folder, ignore=ignore)
    shutil.copy(REPO / "conftest.py", project.root / "conftest.py")
    return project


def target_builder_rows(project: Project) -> list[dict[str, Any]]:
    return [r for r in project.rows() if r["agent_name"] == "target_builder"]


def test_readme_command_1_runs_the_target_builder_demo_offline(demo: Project) -> None:
    result = demo.run("suites/", "--rubric", "target-quality", "-v", subprocess=True)  # a fresh process, as in CI
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines([
        "suites/target_builder.cases.yaml::latam-fintech-2026-01 PASSED*",
        "*= harness summary =*",
        "*",
        "*",
        "target-quality * 1 * 1 * 100% * * 2.0 *",
    ])
    assert "brief" not in result.stdout.str().split("harness summary")[1]

    (cycle,) = demo.cycles()
    run_dir = demo.work / "runs" / cycle
    folder = run_dir / "target_builder"
    assert sorted(p.name for p in folder.iterdir()) == [
        "attempt-1.eval.json", "attempt-1.md", "attempt-2.eval.json", "attempt-2.md", "final.md"]
    assert (folder / "final.md").read_text() == (folder / "attempt-2.md").read_text()
    assert not (run_dir / "brief_writer").exists()

    # Attempt 1 fails on stale triggers and duplicates; the reviser applies the fixes; attempt 2 passes.
    first = json.loads((folder / "attempt-1.eval.json").read_text())
    second = json.loads((folder / "attempt-2.eval.json").read_text())
    assert first["passed"] is False and first["overallScore"] < 0.85
    assert first["dimensionScores"]["trigger_recency"]["score"] < 1.0
    assert first["dimensionScores"]["dedup_check"]["score"] < 1.0
    assert any("stale" in fix.lower() for fix in first["suggestedFixes"]), first["suggestedFixes"]
    assert second["passed"] is True and second["overallScore"] >= 0.85

    log = json.loads((run_dir / "run-log.json").read_text())
    assert [(e["agent_name"], e["attempt"], e["status"]) for e in log] == [
        ("target_builder", 1, "failed"), ("target_builder", 2, "passed")]
    rows = target_builder_rows(demo)
    assert [(r["cycle_id"], r["attempt"], r["status"]) for r in rows] == [(cycle, 1, "failed"), (cycle, 2, "passed")]
    assert [r["overall_score"] for r in rows] == [e["overall_score"] for e in log]
    assert rows[0]["overall_score"] == first["overallScore"] and rows[1]["overall_score"] == second["overallScore"]
    assert all(r["rubric_version"] == "1.0.0" for r in rows)
    conn = sqlite3.connect(demo.work / "harness.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def test_the_rubrics_pass_their_calibration(demo: Project) -> None:
    result = demo.run("rubrics/", "-v", "-rs")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "rubrics/target-quality.yaml::valid PASSED*",
        "rubrics/target-quality.yaml::gold?2026-01-latam-fintech? PASSED*",
        "rubrics/target-quality.yaml::anti?no-trigger-target? PASSED*",
        "rubrics/target-quality.yaml::anti?stale-signal? PASSED*",
    ])
    result.stdout.fnmatch_lines(["rubrics/brief-quality.yaml::valid PASSED*"])
    # The judged rubric cannot be calibrated offline: skipped as not scored, never passed.
    result.stdout.fnmatch_lines(["rubrics/brief-quality.yaml::gold?acme-series-b? SKIPPED*"])
    result.stdout.fnmatch_lines(["SKIPPED *not scored (indeterminate)*"])
    assert not demo.work.exists()


def test_the_judged_demo_agent_is_skipped_as_not_scored_offline(demo: Project) -> None:
    result = demo.run("suites/", "-v", "-rs")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["suites/brief_writer.cases.yaml::acme-series-b SKIPPED*"])
    result.stdout.fnmatch_lines(["brief-quality: 1 not scored (indeterminate): no ANTHROPIC_API_KEY: set it in the "
                                 "environment*"])
    result.stdout.fnmatch_lines(["SKIPPED *brief_writer.cases.yaml*not scored (indeterminate): no ANTHROPIC_API_KEY*"])
    (row,) = [r for r in demo.rows() if r["agent_name"] == "brief_writer"]
    assert (row["status"], row["overall_score"]) == ("escalated", None)
    brief = demo.cycle_dir() / "brief_writer" / "attempt-1.md"
    assert "Maria Lopez" in brief.read_text()  # the command producer ran; only the judge was missing


def test_the_judged_demo_agent_is_scored_with_a_model(demo: Project, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = judge_responder({"grounded": 1.0, "buyer_named": 1.0, "actionable": 1.0})
    result = demo.run("suites/", "-v")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["suites/brief_writer.cases.yaml::acme-series-b PASSED*"])
    (row,) = [r for r in demo.runs() if r["agent_name"] == "brief_writer"]
    assert (row["status"], row["outcome"], row["overall_score"]) == ("passed", "passed", 1.0)
    assert row["input_tokens"] > 0 and row["model"] == "claude-sonnet-4-6"
    # Only the judged criteria went to the model, with the rubric and its examples.
    (request,) = fake_anthropic.requests
    schema = request["tools"][0]["input_schema"]["properties"]["dimensionScores"]
    assert sorted(schema["required"]) == ["actionable", "buyer_named", "grounded"]
    stable = request["system"][0]["text"]
    assert "Brief Writer Evaluator Prompt" in stable and "brief-quality" in stable
    assert "acme-series-b.md" in stable and "generic-outreach.md" in stable


def test_the_judged_demo_agent_fails_the_gate_when_the_judge_says_so(
        demo: Project, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = judge_responder({"grounded": 0.0, "buyer_named": 1.0, "actionable": 0.0})
    result = demo.run("suites/", "-k", "acme")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*grounded*0.00*0.30*fake judge: grounded scored 0*"])
    rows = [r for r in demo.rows() if r["agent_name"] == "brief_writer"]
    assert rows and rows[-1]["status"] == "failed"  # escalate_on_fail: false for this agent


def test_the_command_producer_works_where_only_python3_is_installed(demo: Project, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """README: "Needs Python 3.11+ and nothing else". Debian and Ubuntu have `python3` but no `python`."""
    bin_dir = tmp_path / "only-python3"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert shutil.which("python", path=os.environ["PATH"]) is None
    result = demo.run("suites/", "-k", "acme", "-rs", subprocess=True)
    result.assert_outcomes(skipped=1, deselected=2)  # not scored offline, and not an error
    assert "exited 127" not in result.stdout.str()


def test_the_demo_selector_passes_a_clear_ranking_and_escalates_a_close_one(demo: Project) -> None:
    demo.run("suites/thesis_selector.cases.yaml").assert_outcomes(passed=1)
    evaluation = json.loads((demo.cycle_dir() / "thesis_selector" / "attempt-1.eval.json").read_text())
    assert evaluation["metadata"]["itemsEvaluated"] == 3
    cases = demo.root / "suites" / "thesis_selector.cases.yaml"
    cases.write_text(cases.read_text().replace("signals: [hiring, expansion]}", "signals: [funding, hiring, press]}"))
    result = demo.run("suites/thesis_selector.cases.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ESCALATED after 1 attempt: top candidate * beats #2 * by 0.1, less than "
                                 "margin_required 0.15: a human should choose"])


def test_the_demo_runs_without_pytest_xdist(demo: Project) -> None:
    """README's demo command installs the project without the test extras: no pytest-xdist, whose hooks
    the plugin implements only optionally."""
    result = demo.run("suites/", "--rubric", "target-quality", "-p", "no:xdist", subprocess=True)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, deselected=2)
