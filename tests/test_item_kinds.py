"""The item-kind seam: a kind a project adds in a conftest is collected, run, recorded and reported like a case.

The conftest below is what a user writes: answers kept in ``*.smoke.yaml`` files, each answer an item scored by
the project's rubric. Its items wait for one another at a barrier, so they pass only when they run at the same
time (in the session's pool, beside the cases).
"""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET

import pytest

import harness.apps.tracking.history  # noqa: F401 - pandas imported once, before any in-process pytester run
from conftest import Project
from harness.apps.cli import main

SMOKE_CONFTEST = '''
import threading

import yaml

from harness.evaluation.items import ItemKind, ItemSpec

TOGETHER = threading.Barrier(3, timeout=20)  # the three answers below: they must run at the same time


class Smoke(ItemKind):
    name = "smoke"

    def claims(self, path, *, rubrics_dir):
        return path.name.endswith(".smoke.yaml")

    def collect(self, path, context):
        rubric = context.rubric(context.rubrics_dir / "quality.yaml")
        for number, (name, answer) in enumerate(yaml.safe_load(path.read_text())["answers"].items()):
            yield ItemSpec(name=name, label=f"smoke[{name}]", payload=answer, line=number + 1,
                           rubrics=(rubric.name,), agent="smoke", case=name, threshold=rubric.threshold)

    def run(self, spec, nodeid, context):
        run = context.item_run(nodeid, spec, context.rubric(context.rubrics_dir / "quality.yaml"))
        run.start(1)
        with run.attempt() as attempt:
            TOGETHER.wait()
            attempt.keep(spec.payload)
            attempt.evaluate()
            attempt.decide()
        return run.finish()


def pytest_harness_item_kinds():
    return [Smoke()]
'''

SMOKE_FILE = """\
answers:
  warm: "hello there, see you soon"
  curt: "bye"
  chatty: "hello and welcome, friend, to this rather long message with far more words than needed here"
"""

CASES = "agent: writer\ncases:\n  - id: greet\n    inputs: {text: hello friend}\n"


def smoke_project(project: Project, *, barrier: int = 3) -> Project:
    project.standard(CASES)
    project.write("conftest.py", SMOKE_CONFTEST.replace("Barrier(3", f"Barrier({barrier}"))
    project.write("suites/answers.smoke.yaml", SMOKE_FILE)
    return project


def test_a_kind_from_a_conftest_runs_beside_the_cases_and_is_reported_and_recorded(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    smoke_project(project)
    result = project.run("suites/", "--junitxml=junit.xml", "-p", "no:xdist", "--harness-concurrency=4",
                         subprocess=True)
    result.assert_outcomes(passed=2, failed=2)  # writer[greet] and smoke[warm]; curt lacks hello, chatty is long
    out = result.stdout.str()
    assert "smoke[curt]" in out and "FAILED after 1 attempt" in out
    summary = out.split("harness summary")[1]
    assert "quality      4       2   50% of 4" in summary  # the rubric's line counts both kinds

    # JUnit: each item's result, by the one codec
    cases = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in ET.parse(project.root / "junit.xml").iter("testcase")}
    assert cases["warm"]["harness_kind"] == "smoke" and cases["warm"]["harness_outcome"] == "passed"
    assert cases["curt"]["harness_outcome"] == "failed" and cases["greet"]["harness_kind"] == "case"

    # the records: every attempt, filed under the kind's agent, with its artifact
    rows = project.rows("SELECT r.agent_name, r.status, d.case_id, r.artifact_path FROM agent_runs r "
                        "JOIN attempt_details d ON d.run_id = r.id WHERE r.agent_name = 'smoke' ORDER BY d.case_id")
    assert [(r["case_id"], r["status"]) for r in rows] == [("chatty", "failed"), ("curt", "failed"),
                                                           ("warm", "passed")]
    assert (project.root / rows[2]["artifact_path"]).read_text() == "hello there, see you soon"

    # and history reads them like any agent's
    capsys.readouterr()
    assert main(["history", "--work-dir", str(project.work), "--agent", "smoke", "--format", "json"]) == 0
    (cycle,) = json.loads(capsys.readouterr().out)
    assert cycle["agent"] == "smoke" and cycle["items"] == 3


def test_a_kind_runs_the_same_under_xdist(project: Project) -> None:
    # two workers: each runs its share, so the barrier waits for one item only
    smoke_project(project, barrier=1)
    result = project.run("suites/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=2, failed=2)
    assert "quality      4       2   50% of 4" in result.stdout.str()
    conn = sqlite3.connect(project.work / "harness.db")
    try:
        cycles = {row[0] for row in conn.execute("SELECT cycle_id FROM agent_runs")}
        agents = sorted(row[0] for row in conn.execute("SELECT agent_name FROM agent_runs"))
    finally:
        conn.close()
    assert len(cycles) == 1 and agents == ["smoke", "smoke", "smoke", "writer"]


def test_rubric_selects_a_kinds_items_too(project: Project) -> None:
    smoke_project(project, barrier=1)
    project.rubric("other", (project.root / "rubrics" / "quality.yaml").read_text().replace("Quality", "Other"))
    result = project.run("suites/", "--rubric", "quality", "-p", "no:xdist", "--harness-concurrency=1")
    result.assert_outcomes(passed=2, failed=2)


def test_a_kind_that_takes_a_taken_name_is_one_usage_error(project: Project) -> None:
    smoke_project(project)
    project.write("conftest.py", SMOKE_CONFTEST.replace('name = "smoke"', 'name = "case"'))
    result = project.run("suites/", subprocess=True)
    assert result.ret == 4
    assert "pytest_harness_item_kinds: item kind 'case' is taken by the harness" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_a_broken_kind_in_a_conftest_down_the_tree_is_one_collection_error(project: Project) -> None:
    project.standard(CASES)
    project.write("suites/deep/conftest.py", SMOKE_CONFTEST.replace('name = "smoke"', 'name = ""'))
    project.write("suites/deep/a.smoke.yaml", SMOKE_FILE)
    project.write("suites/deep/b.smoke.yaml", SMOKE_FILE)
    result = project.run("suites/", "-p", "no:xdist", subprocess=True)
    out = result.stdout.str()
    assert len([line for line in result.stdout.lines if line.startswith("ERROR ")]) == 1, out
    assert "suites/deep/conftest.py: pytest_harness_item_kinds: item kind '' has no name (fix: " in out
    assert "Traceback" not in out
