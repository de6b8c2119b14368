"""goal.md and ideas/*.md: parsing, one-line errors, and goals as pytest items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.apps.tournament.ideas import list_ideas, parse_idea
from harness.apps.tournament.testing import commit_all, goal_repo, synth_goal_md, value_idea
from harness.base.errors import HarnessConfigError
from harness.loading.goal_file import load_goal

DEMO = Path(__file__).resolve().parent.parent / "goals" / "demo_primes"
PLUGIN = ("-o", "harness=true", "-p", "harness.apps.tournament.pytest_plugin", "-p", "no:cacheprovider")


def test_the_demo_goal_parses() -> None:
    goal = load_goal(DEMO / "goal.md")
    assert goal.slug == "demo_primes"
    assert (goal.metric.name, goal.metric.direction) == ("runtime_ms", "minimize")
    assert goal.benchmark.command == "{python} goals/demo_primes/bench/workload.py"
    assert goal.benchmark.check == "{python} -S goals/demo_primes/bench/check.py"
    assert goal.sealed_paths == ("goals/demo_primes/bench/**", "goals/demo_primes/goal.md")
    assert [p.phase for p in goal.phases] == ["phase_1", "phase_2"]
    assert goal.phase(None).phase == "phase_1"
    assert str(goal.phases[1].targets[0]) == "runtime_ms <= 50"
    assert goal.custom_families == ("micro_tuning",)
    assert "optimization" in goal.family_tags
    assert (goal.agents.planners, goal.agents.executors) == (2, 4)
    assert goal.acceptance.significance == "mann_whitney"
    # the safe form: the score is the run's CPU time, measured by the harness; the check says whether it counted right
    assert (goal.benchmark.result, goal.benchmark.score_from, goal.benchmark.held_back) == ("channel", "cpu_time", None)
    assert (goal.acceptance.plausible_best, goal.acceptance.plausible_factor) == (5.0, 10.0)
    assert goal.sandbox.env == () and goal.sandbox.executor_network is False
    ideas = list_ideas(DEMO)
    assert [i.fields["approach_family"] for i in ideas] == [
        "optimization", "micro_tuning", "testing", "architecture", "documentation"]
    assert all(i.diff for i in ideas)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("## Metric\n", "## Metrik\n", "goal.md:6: metrik: unknown section (did you mean 'metric'?) (fix: use one of:"),
    ("- direction: maximize", "- direction: up",
     "goal.md:8: metric.direction: unknown direction 'up' (fix: use one of: maximize, minimize)"),
    ("- direction: maximize\n", "", "goal.md: metric.direction: missing"),
    ("- timeout: 20", "- timeout: soon", "goal.md:12: benchmark.timeout: expected a number, got 'soon'"),
    ("- timeout: 20", "- timeout: -1", "benchmark.timeout: -1 is not above 0"),
    ("- timeout: 20", "- parse: regex", "benchmark.score_regex: missing (parse: regex needs it)"),
    ("- timeout: 20", "- score_regex: `(unclosed`", "benchmark.score_regex: invalid regular expression"),
    ("- timeout: 20", "- score_regex: `score=\\d+`", "needs one capturing group"),
    ("- planners: 0", "- planerz: 0", "agents.planerz: unknown field"),
    ("- executors: 3", "- executors: 0", "agents.executors: expected a whole number >= 1, got 0"),
    ("- noise_runs: 3", "- noise_runs: 1", "acceptance.noise_runs: expected a whole number >= 2, got 1"),
    ("- significance: mann_whitney", "- significance: t-test",
     "acceptance.significance: unknown significance 't_test' (fix: use one of: mann_whitney, bootstrap)"),
    ("| phase_2 | High | value >= 15 | pending |", "| phase_2 | High | value >= 15 | active |",
     "phases: 2 phases are active, expected exactly one"),
    ("| phase_1 | Works | ok >= 1 | active |", "| phase_1 | Works | ok is big | active |",
     "phases.phase_1.sub_score_targets: cannot read 'ok is big'"),
    ("| phase_1 | Works | ok >= 1 | active |", "| phase_1 | Works | ok >= 1 | done |", "phases.phase_1"),
    ("- goals/synth/bench.py", "- /etc/passwd", "sealed_paths: '/etc/passwd' is not a path inside the repository"),
    ("## Objective\nRaise VALUE in goals/synth/app/value.py.\n", "## Objective\n\n", "objective: is empty"),
    ("## Sealed paths\n- goals/synth/bench.py\n- goals/synth/check.py\n- goals/synth/goal.md\n", "",
     "sealed_paths: missing section"),
    ("- timeout: 20", "- result: stderr", "benchmark.result: unknown result 'stderr' (fix: use one of: channel, stdout)"),
    ("- timeout: 20", "- score_from: clock", "benchmark.score_from: unknown score_from 'clock'"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- env: MY-TOKEN",
     "sandbox.env: 'MY-TOKEN' is not an environment variable name (fix: list names separated by commas"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- network: on", "sandbox.network: unknown field "
     "(did you mean 'executor_network'?) (fix: known fields: disk_mb, env, executor_network, memory_mb, output_kb, "
     "processes, read, tmp_mb, write)"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- executor_network: maybe",
     "sandbox.executor_network: expected on or off, got 'maybe'"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- memory_mb: 0", "sandbox.memory_mb: expected a whole number >= 1, got 0"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- tmp_mb: lots", "sandbox.tmp_mb: expected a whole number >= 1, "
     "got 'lots'"),
    ("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- output_kb: -1",
     "sandbox.output_kb: expected a whole number >= 1"),
    # a score must never come from the process the candidate's code runs in
    ("- check: {python} goals/synth/check.py\n", "",
     "goal.md: benchmark.check: missing: without a check the score (score_from: output, the default) would come "
     "from the measured run, where the candidate's code runs (fix: add '- check: {python} goals/synth/bench/check.py'"),
    ("- check: {python} goals/synth/check.py\n", "- score_from: output\n",
     "goal.md:13: benchmark.score_from: output takes the score from what the benchmark reports, and without a check "
     "that is the measured run, where the candidate's code runs (fix: add '- check:"),
    ("- check: {python} goals/synth/check.py\n", "- score_from: cpu_time\n- result: channel\n",
     "goal.md:14: benchmark.result: describes the check's result, and the goal has no check"),
    ("- check: {python} goals/synth/check.py\n", "- score_from: wall_time\n- sub_score_regex.x: `x=(\\d+)`\n",
     "benchmark.sub_score_regex.x: describes the check's result, and the goal has no check"),
    # what the goal declares plausible
    ("- post_merge_runs: 1", "- plausible_factor: 1", "acceptance.plausible_factor: 1 is not above 1"),
    ("- post_merge_runs: 1", "- plausible_best: fast", "acceptance.plausible_best: expected a number, got 'fast'"),
])
def test_goal_mistakes_are_one_line_errors_naming_file_and_field(tmp_path: Path, old: str, new: str,
                                                                  message: str) -> None:
    text = synth_goal_md()
    assert old in text
    path = tmp_path / "goals" / "synth" / "goal.md"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace(old, new))
    with pytest.raises(HarnessConfigError) as info:
        load_goal(path)
    assert message in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_goal_that_scores_the_harness_measurement_needs_no_check_and_zero_is_never_plausible(tmp_path: Path) -> None:
    path = tmp_path / "goals" / "synth" / "goal.md"
    path.parent.mkdir(parents=True)
    measured = synth_goal_md().replace("- check: {python} goals/synth/check.py\n", "- score_from: wall_time\n")
    path.write_text(measured)
    goal = load_goal(path)
    assert goal.benchmark.check is None and goal.benchmark.measured
    path.write_text(measured.replace("- post_merge_runs: 1", "- post_merge_runs: 1\n- zero_plausible: on"))
    with pytest.raises(HarnessConfigError, match=r"goal.md:\d+: acceptance.zero_plausible: a measured time of 0 is "
                                                 r"never plausible \(score_from: wall_time\) \(fix: remove the line\)"):
        load_goal(path)


def test_custom_families_must_be_new_tags(tmp_path: Path) -> None:
    path = tmp_path / "goals" / "synth" / "goal.md"
    path.parent.mkdir(parents=True)
    path.write_text(synth_goal_md(extra="\n## Approach families\n| Tag | Description |\n|---|---|\n"
                                        "| data | again |\n"))
    with pytest.raises(HarnessConfigError, match=r"approach_families.data: already a family"):
        load_goal(path)


@pytest.mark.parametrize(("text", "message"), [
    ("# t\n- hypothesis: h\n", "approach_family: missing"),
    ("# t\n- approach_family: data\n- hypothesis: h\n- color: red\n", "color: unknown field"),
    ("# t\n- approach_family: data\n- hypothesis: h\n## Diff\n```diff\n--- a/x\n", "the ```diff block is not closed"),
    ("# t\n- approach_family: data\n- hypothesis: h\n## Diff\n```diff\nhello\n```\n", "not a unified diff"),
    ("# t\n- approach_family: data\n- hypothesis: h\n## Steps\nchange things\n", "steps: cannot read"),
    ("# t\n- approach_family: data\n- hypothesis: h\n## Plan\n", "plan: unknown section"),
    ("# t\n- approach_family: data\n- hypothesis: h\n", "steps: an idea without a diff needs steps"),
])
def test_idea_mistakes_name_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "idea.md"
    path.write_text(text)
    with pytest.raises(HarnessConfigError, match=message):
        parse_idea(path)


def test_an_idea_becomes_a_plan_document() -> None:
    idea = list_ideas(DEMO)[0]
    plan = idea.to_plan(3, "runtime_ms")
    assert plan["plan_id"] == "round_3_user_01_sieve" and plan["planner_id"] == "user_01_sieve"
    assert plan["target_files"] == ["goals/demo_primes/program/primes.py"]
    assert plan["steps"][0]["file"] == "goals/demo_primes/program/primes.py"
    assert plan["history_reference"] == {"builds_on": "none", "avoids": "none"}


# ---------------------------------------------------------------------------------------------- pytest items


def _project(pytester: pytest.Pytester, **kwargs) -> Path:  # noqa: ANN003
    return goal_repo(pytester.path, ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)}, **kwargs)


def test_a_goal_is_collected_as_items_that_pass(pytester: pytest.Pytester) -> None:
    _project(pytester)
    (pytester.path / "docs").mkdir()
    (pytester.path / "docs" / "goal.md").write_text("# not a goal: its parent's parent is not goals/\n")
    result = pytester.runpytest(*PLUGIN, "-v", "goals", "docs")
    result.stdout.fnmatch_lines(["*goals/synth/goal.md::valid PASSED*", "*goals/synth/goal.md::benchmark PASSED*"])
    result.assert_outcomes(passed=2)


def test_a_broken_goal_is_a_one_line_collection_error(pytester: pytest.Pytester) -> None:
    goal = _project(pytester)
    (goal / "goal.md").write_text(synth_goal_md().replace("direction: maximize", "direction: sideways"))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*goals/synth/goal.md:8: metric.direction: unknown direction 'sideways' "
                                 "(fix: use one of: maximize, minimize)"])
    assert "Traceback" not in result.stdout.str()


def test_unmet_phase_targets_and_a_broken_benchmark_fail(pytester: pytest.Pytester) -> None:
    goal = _project(pytester, value=10.0)
    settings = pytester.path / "WORK" / "improve" / "synth" / "agent-settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"goal_slug": "synth", "current_phase": "phase_2", "number_of_planners": 0,
                                    "number_of_executors": 3}))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*synth benchmark: phase phase_2 (High): value >= 15 not met (value = 10)*"])
    (goal / "app" / "value.py").write_text("VALUE = oops\n")
    result = pytester.runpytest(*PLUGIN, "goals")
    result.stdout.fnmatch_lines(["*the sealed benchmark failed (error): the benchmark exited 1: NameError*"])


def test_a_regression_below_the_recorded_baseline_fails(pytester: pytest.Pytester) -> None:
    _project(pytester)
    baseline = pytester.path / "WORK" / "improve" / "synth" / "baseline.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text(json.dumps({"goal_slug": "synth", "commit": "abc1234def", "score": 30.0, "spread": 0.0,
                                    "sub_scores": {}, "iteration": 2, "timestamp": "2025-01-01T00:00:00Z"}))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*value 10 regressed below the recorded baseline 30 (commit abc1234): "
                                 "worse by 20, tolerance 3*"])


def test_an_implausible_score_fails_the_gate(pytester: pytest.Pytester) -> None:
    goal = _project(pytester, goal_md=synth_goal_md().replace("- post_merge_runs: 1\n",
                                                              "- post_merge_runs: 1\n- plausible_best: 5\n"))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*synth benchmark: an implausible score: value 10 is better than the best the goal "
                                 "declares plausible (plausible_best 5); a score outside what the goal declares "
                                 "plausible is never accepted unseen*"])
    # a recorded baseline that holds one (an earlier run's fooled measurement) is named, never compared with
    (goal / "goal.md").write_text(synth_goal_md().replace("- post_merge_runs: 1\n",
                                                          "- post_merge_runs: 1\n- plausible_best: 100\n"))
    baseline = pytester.path / "WORK" / "improve" / "synth" / "baseline.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text(json.dumps({"goal_slug": "synth", "commit": "abc1234def", "score": 1e9, "spread": 0.0,
                                    "sub_scores": {}, "iteration": 2, "timestamp": "2025-01-01T00:00:00Z"}))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*the recorded baseline ({baseline}) holds an implausible score, value 1e+09 is "
                                 "better than the best the goal declares plausible (plausible_best 100): an earlier "
                                 "run may have recorded a fooled measurement; remove the file*"])
    assert "regressed below" not in result.stdout.str()


def test_the_gates_check_sees_the_sealed_files_only(pytester: pytest.Pytester) -> None:
    goal = _project(pytester)
    # a check that reads a file of the checkout no one sealed fails: it sees a copy of the sealed files, no more
    (pytester.path / "answers.txt").write_text("10\n")
    (goal / "check.py").write_text("import sys; open('answers.txt').read()\n")
    commit_all(pytester.path, "a check that reads the checkout")
    result = pytester.runpytest(*PLUGIN, "goals")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*the sealed benchmark failed (error): the check rejected the run's output: "
                                 "FileNotFoundError: *answers.txt*"])


def test_valid_item_checks_sealed_paths_and_ideas(pytester: pytest.Pytester) -> None:
    goal = _project(pytester)
    (goal / "goal.md").write_text(synth_goal_md().replace("- goals/synth/bench.py", "- goals/synth/missing/**"))
    (goal / "ideas" / "b.md").write_text("# no fields\n")
    result = pytester.runpytest(*PLUGIN, "goals")
    result.stdout.fnmatch_lines(["*b.md: approach_family: missing*", "*sealed_paths: 'goals/synth/missing/**' "
                                 "matches no file*"])
    # the check must come from the sealed files
    (goal / "ideas" / "b.md").unlink()
    (goal / "goal.md").write_text(synth_goal_md().replace("- goals/synth/check.py\n", ""))
    result = pytester.runpytest(*PLUGIN, "goals")
    result.stdout.fnmatch_lines(["*goal.md: benchmark.check: runs goals/synth/check.py, which is not sealed: a "
                                 "candidate could change what checks it (fix: list it under ## Sealed paths)*"])


def test_harness_improve_option_runs_the_tournament(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest(*PLUGIN, "goals", "--harness-improve", "1", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*goals/synth/goal.md::improve PASSED*"])
    report = json.loads((pytester.path / "WORK/improve/synth/merge_reports/iteration_1.json").read_text())
    assert report["status"] == "merged"
    bad = pytester.runpytest(*PLUGIN, "goals", "--harness-improve", "lots")
    bad.stderr.fnmatch_lines(["*--harness-improve: 'lots' is not a whole number*"])


def test_goals_run_under_xdist(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest(*PLUGIN, "goals", "-n", "2")
    result.assert_outcomes(passed=2)
