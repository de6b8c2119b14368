"""The plugin is installed everywhere pytest runs, so it must be inert in projects that have not opted in."""

from __future__ import annotations

import re

import pytest

from conftest import QUALITY_RUBRIC, Project

# Files a project of its own may well have, in formats of its own that our loaders would reject.
FOREIGN = {
    "rubrics/essay.yaml": "criteria:\n  - thesis: 40\n  - evidence: 60\ngrader: ms-smith\n",
    "tests/add.cases.yaml": "- input: [1, 2]\n  output: 3\n- input: [2, 2]\n  output: 5\n",
    "goals/q3/goal.md": "# Q3 goals\n\n- ship the importer\n- hire two people\n",
    "config/agents.yaml": "researcher:\n  role: Senior researcher\n  goal: Find facts\n  backstory: Curious\n",
}

TESTS = {
    "tests/test_math.py": """
import pytest

@pytest.mark.parametrize("n", range(150))
def test_square_is_not_negative(n):
    assert n * n >= 0

@pytest.mark.parametrize("n", range(40))
def test_even(n):
    assert n % 2 == 0

def test_skipped():
    pytest.skip("not today")
""",
    "tests/test_text.py": """
import pytest

@pytest.mark.parametrize("word", [f"w{i}" for i in range(9)])
def test_word(word):
    assert word.startswith("w")
""",
}


def foreign_project(project: Project) -> Project:
    (project.root / "pytest.ini").unlink()  # the Project helper opts in; a foreign project has never heard of us
    for path, text in {**FOREIGN, **TESTS}.items():
        project.write(path, text)
    return project


def comparable(lines: list[str]) -> list[str]:
    """The output without what differs between any two runs: timings and the list of plugins."""
    out = []
    for line in lines:
        if line.startswith(("plugins:", "rootdir:", "cachedir:")):
            continue
        out.append(re.sub(r" in [0-9.]+s( \([0-9:]+\))?", " in Xs", line))
    return out


def test_a_foreign_project_runs_exactly_as_without_the_plugin(project: Project) -> None:
    foreign_project(project)
    ours = project.run("-rA", subprocess=True)
    without = project.run("-rA", "-p", "no:rubric", subprocess=True)
    ours.assert_outcomes(passed=179, failed=20, skipped=1)
    without.assert_outcomes(passed=179, failed=20, skipped=1)
    assert ours.ret == without.ret == 1
    assert comparable(ours.outlines) == comparable(without.outlines)
    assert ours.errlines == without.errlines == []
    assert not (project.root / "WORK").exists() and not (project.root / "tracking").exists()


def test_a_foreign_project_under_xdist_is_unaffected(project: Project) -> None:
    pytest.importorskip("xdist")
    foreign_project(project)
    ours = project.run("-n", "2", subprocess=True)
    without = project.run("-n", "2", "-p", "no:rubric", subprocess=True)
    ours.assert_outcomes(passed=179, failed=20, skipped=1)
    assert ours.ret == without.ret == 1
    assert "harness" not in ours.stdout.str().lower() and not (project.root / "WORK").exists()


@pytest.mark.parametrize("args", [("--rubric", "quality"), ("--harness-max-cost", "1"), ("--plot",),
                                  ("--harness-improve", "1")])
def test_our_options_without_the_opt_in_are_one_usage_error(project: Project, args: tuple[str, ...]) -> None:
    foreign_project(project)
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [f"ERROR: {args[0]}: pytest-rubric is not enabled in this project; add \"harness = true\" under "
                      "[tool.pytest.ini_options] in pyproject.toml (or [pytest] in pytest.ini)"]


def test_a_harness_project_that_forgot_to_opt_in_gets_a_one_line_hint(project: Project) -> None:
    project.standard("agent: writer\ncases:\n  - id: a\n    inputs: {text: hello there}\n")
    (project.root / "pytest.ini").unlink()
    result = project.run("suites")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    hints = [line for line in result.outlines if "pytest-rubric" in line]
    assert hints == ["pytest-rubric: 1 file(s) such as suites/writer.cases.yaml were not collected: this project has "
                     "not enabled the harness (add \"harness = true\" under [tool.pytest.ini_options] in "
                     "pyproject.toml (or [pytest] in pytest.ini); see README)"]
    assert not project.work.exists()


def test_another_tools_agents_yaml_gives_no_hint(project: Project) -> None:
    foreign_project(project)
    project.write("config/tasks.cases.yaml", "- input: x\n")  # beside CrewAI's agents.yaml, not ours
    result = project.run("config", "tests/add.cases.yaml")
    assert "pytest-rubric" not in result.stdout.str()


def test_the_opt_in_on_the_command_line(project: Project) -> None:
    project.rubric("quality", QUALITY_RUBRIC)
    (project.root / "pytest.ini").unlink()
    project.run("rubrics").assert_outcomes()  # off: nothing collected
    project.run("rubrics", "-o", "harness=true").assert_outcomes(passed=1)


def test_a_bad_opt_in_value_is_one_usage_error(project: Project) -> None:
    project.write("pytest.ini", "[pytest]\nharness = maybe\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini harness:" in result.stderr.str() and "Traceback" not in result.stderr.str()
