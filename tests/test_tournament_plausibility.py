"""What a goal declares plausible: a score outside it is measured and recorded, but never merged, confirmed or
recorded as the baseline without the user's approval (--approve)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.apps.tournament import plausibility
from harness.apps.tournament.loop import improve
from harness.apps.tournament.testing import SYNTH_CHECK, commit_all, git, goal_repo, load, synth_goal_md, value_idea
from harness.base.errors import HarnessError
from harness.loading.goal_file import load_goal


def _goal(tmp_path: Path, md: str):  # noqa: ANN202
    path = tmp_path / "goals" / "synth" / "goal.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(md)
    return load_goal(path)


def _acceptance(lines: str, md: str | None = None) -> str:
    return (md or synth_goal_md()).replace("- post_merge_runs: 1\n", f"- post_merge_runs: 1\n{lines}")


@pytest.mark.parametrize(("direction", "lines", "score", "baseline", "why"), [
    # a measured time of 0: no run takes no time at all
    ("minimize", "", 0.0, None, "value 0: no run takes no time at all"),
    # past the best the goal declares plausible, either way
    ("maximize", "- plausible_best: 100\n", 101.0, None, "value 101 is better than the best the goal declares "
                                                         "plausible (plausible_best 100)"),
    ("minimize", "- plausible_best: 5\n", 4.0, None, "plausible_best 5"),
    ("maximize", "- plausible_best: 100\n", 100.0, None, None),
    # more than plausible_factor times the baseline, either way; a baseline of 0 or less has no factor
    ("maximize", "- plausible_factor: 20\n", 201.0, 10.0, "value 201 is more than 20 times better than the baseline "
                                                          "10 (plausible_factor 20)"),
    ("minimize", "- plausible_factor: 20\n", 4.0, 100.0, "more than 20 times better than the baseline 100"),
    ("minimize", "- plausible_factor: 20\n", 6.0, 100.0, None),
    ("maximize", "- plausible_factor: 20\n", 1000.0, 0.0, None),
])
def test_what_is_implausible(tmp_path: Path, direction: str, lines: str, score: float, baseline: float | None,
                             why: str | None) -> None:
    md = _acceptance(lines).replace("- direction: maximize", f"- direction: {direction}")
    if "no run takes" in (why or ""):
        md = md.replace("- check: {python} goals/synth/check.py\n", "- score_from: cpu_time\n")
    found = plausibility.implausible(_goal(tmp_path, md), score, baseline)
    assert (found is None) if why is None else (why in str(found)), found


def test_an_output_score_of_zero_is_implausible_when_lower_is_better_unless_the_goal_allows_it(tmp_path: Path) -> None:
    minimize = synth_goal_md().replace("- direction: maximize", "- direction: minimize")
    assert plausibility.implausible(_goal(tmp_path, minimize), 0.0) == (
        "value 0: a score of exactly 0 (the goal does not declare it plausible: zero_plausible)")
    assert plausibility.implausible(_goal(tmp_path, _acceptance("- zero_plausible: on\n", minimize)), 0.0) is None
    assert plausibility.implausible(_goal(tmp_path, synth_goal_md()), 0.0) is None  # the worst a maximum can be
    assert plausibility.flags(_goal(tmp_path, minimize), [3.0, 0.0, 0.0]) == [
        "an implausible score: value 0: a score of exactly 0 (the goal does not declare it plausible: zero_plausible)"]


def test_an_implausible_candidate_is_recorded_but_merged_only_with_approval(tmp_path: Path) -> None:
    root = tmp_path / "r"
    goal = goal_repo(root, ideas={"a.md": value_idea("Huge", "optimization", 10.0, 1000.0)},
                     goal_md=_acceptance("- plausible_best: 100\n"))
    lines: list[str] = []
    assert improve(goal, 1, echo=lines.append, plots=False).statuses == ["no_winner"], lines
    base = root / "WORK/improve/synth"
    result = load(base / "results/round_1/executor_1.json")
    # measured and recorded, with the reason, and lost like a candidate that reaches into the measurement
    assert result["status"] == "error" and result["benchmark_score"] == 1000.0 and result["samples"] == [1000.0]
    assert result["measurement"] == {"approved": False, "flags": [
        "an implausible score: value 1000 is better than the best the goal declares plausible (plausible_best 100)"]}
    analysis = result["failure_analysis"]
    assert analysis["category"] == "sealed_file_violation"
    assert analysis["what"].startswith("its score is outside what the goal declares plausible (value 1000 is better "
                                       "than the best the goal declares plausible (plausible_best 100)); measured "
                                       "value 1000, not merged without your approval: review branch "
                                       "archive/round_1_executor_1")
    assert "plausible" in analysis["why"] and "--approve" in analysis["lesson"]
    assert load(base / "baseline.json")["score"] == 10.0
    assert git(root, "log", "--merges", "--format=%H") == ""

    # approved, the same change is merged, and the baseline records it
    root = tmp_path / "approved"
    goal = goal_repo(root, ideas={"a.md": value_idea("Huge", "optimization", 10.0, 1000.0)},
                     goal_md=_acceptance("- plausible_best: 100\n"))
    assert improve(goal, 1, echo=lines.append, plots=False, approve=("a",)).statuses == ["merged"], lines
    approved = load(root / "WORK/improve/synth/results/round_1/executor_1.json")
    assert approved["status"] == "success" and approved["measurement"]["approved"] is True
    assert load(root / "WORK/improve/synth/baseline.json")["score"] == 1000.0


def test_a_gain_of_many_times_the_baseline_is_implausible(tmp_path: Path) -> None:
    root = tmp_path / "r"
    goal = goal_repo(root, ideas={"a.md": value_idea("Fifty times", "optimization", 10.0, 500.0),
                                  "b.md": value_idea("Twice", "data", 10.0, 20.0)},
                     goal_md=_acceptance("- plausible_factor: 20\n"))
    lines: list[str] = []
    assert improve(goal, 1, echo=lines.append, plots=False).statuses == ["merged"], lines
    report = load(root / "WORK/improve/synth/merge_reports/iteration_1.json")
    assert report["winner"]["plan_id"] == "round_1_user_b"  # the plausible gain wins; the implausible one lost
    flags = load(root / "WORK/improve/synth/results/round_1/executor_1.json")["measurement"]["flags"]
    assert flags == ["an implausible score: value 500 is more than 20 times better than the baseline 10 "
                     "(plausible_factor 20)"]


def test_an_implausible_baseline_stops_the_run_unless_approved(tmp_path: Path) -> None:
    root = tmp_path / "r"
    goal = goal_repo(root, ideas={"a.md": value_idea("Up", "optimization", 1000.0, 1001.0)}, value=1000.0,
                     goal_md=_acceptance("- plausible_best: 100\n"))
    with pytest.raises(HarnessError, match=r"the sealed benchmark measures the baseline commit [0-9a-f]{7} at a score "
                                           r"the goal does not declare plausible \(an implausible score: value 1000 is "
                                           r"better than .*\): .* or accept the score with --approve baseline"):
        improve(goal, 1, echo=[].append, plots=False)
    assert not (root / "WORK/improve/synth/baseline.json").exists()
    proc = subprocess.run([sys.executable, "-m", "harness.apps.cli", "improve", "goals/synth", "--no-plots"], cwd=root,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "--approve baseline" in proc.stderr and "Traceback" not in proc.stderr
    # approved, the run goes on, and the baseline it measured is recorded
    lines: list[str] = []
    summary = improve(goal, 1, echo=lines.append, plots=False, approve=("baseline",))
    assert summary.statuses == ["no_winner"], lines  # the candidate, implausible too and not approved, lost
    assert load(root / "WORK/improve/synth/baseline.json")["score"] == 1000.0


# A check that multiplies the printed value by 100 where the run was told to: in the winner's confirmation runs
# (held-back inputs shown), or at a merge commit. The candidate's first runs look plausible; later ones do not.
LATE_JUMP_CHECK = SYNTH_CHECK.replace(
    'if "merge commit: yes" in printed:\n    score -= 100.0\n',
    'if os.environ.get("HARNESS_HELD_BACK") and os.environ.get("JUMP_WHEN") == "confirm":\n    score *= 100\n'
    'if "merge commit: yes" in printed and os.environ.get("JUMP_WHEN") == "merge":\n    score *= 100\n')


@pytest.mark.parametrize("when", ["confirm", "merge"])
def test_an_implausible_score_in_the_confirmation_or_after_the_merge_is_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    monkeypatch.setenv("JUMP_WHEN", when)
    root = tmp_path / "r"
    md = _acceptance("- plausible_best: 500\n").replace("- timeout: 20\n", "- timeout: 20\n- held_back: held\n")
    md = md.replace("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP", "- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP, "
                                                                      "JUMP_WHEN")
    goal = goal_repo(root, ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)}, goal_md=md,
                     regress_on_merge=True)
    (goal / "check.py").write_text(LATE_JUMP_CHECK.format(noise=0.0))
    (root / ".gitignore").write_text((root / ".gitignore").read_text() + "held/\n")
    (root / "held").mkdir()
    commit_all(root, "a check that jumps late")
    lines: list[str] = []
    assert improve(goal, 1, echo=lines.append, plots=False).statuses == ["no_improvement"], lines
    report = load(root / "WORK/improve/synth/merge_reports/iteration_1.json")
    assert "an implausible score: value 2000 is better than the best the goal declares plausible" in report["reason"]
    if when == "confirm":
        assert report["acceptance"]["decided_by"] == "plausibility" and report["merge_commit"] is None
        history = load(root / "WORK/improve/synth/history/iteration_1.json")
        assert history["losers"][0]["failure_analysis"]["category"] == "sealed_file_violation"
    else:
        assert report["regressions_detected"] is True and "the merge was reverted" in report["reason"]
        assert (goal / "app" / "value.py").read_text() == "VALUE = 10.0\n"
    assert load(root / "WORK/improve/synth/baseline.json")["score"] == 10.0
