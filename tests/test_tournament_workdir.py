"""`harness improve --work-dir DIR`: the tournament's records go to DIR/improve/<slug>/ instead of WORK/."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.apps.cli import main
from harness.apps.tournament.loop import improve
from harness.apps.tournament.testing import git, goal_repo, load, synth_goal_md, value_idea

IDEAS = {"a_big.md": value_idea("Big", "optimization", 10.0, 20.0)}


def test_records_go_to_the_work_dir_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = tmp_path / "repo"
    goal_repo(root, ideas=IDEAS, goal_md=synth_goal_md(executors=1))
    monkeypatch.chdir(root)
    assert main(["improve", "goals/synth", "--iterations", "1", "--no-plots", "--work-dir", "../records"]) == 0

    base = tmp_path / "records" / "improve" / "synth"
    assert load(base / "merge_reports" / "iteration_1.json")["status"] == "merged"
    state = load(base / "state" / "iteration_state.json")
    assert state["status"] == "completed"
    assert Path(state["recording"]["history_path"]) == base / "history" / "iteration_1.json"
    assert (tmp_path / "records" / "improve" / ".gitignore").exists()
    assert not (root / "WORK").exists()
    assert git(root, "status", "--porcelain") == ""

    # the next run reads its history there: iteration 2, not 1 again
    summary = improve(root / "goals" / "synth", 1, echo=lambda line: None, plots=False, work_dir=tmp_path / "records")
    assert summary.iterations == [2]
    assert not (root / "WORK").exists()


def test_a_work_dir_that_is_a_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    goal_repo(root, ideas=IDEAS)
    (tmp_path / "taken").write_text("not a folder\n")
    monkeypatch.chdir(root)
    assert main(["improve", "goals/synth", "--work-dir", str(tmp_path / "taken")]) == 78
    assert "--work-dir: " in capsys.readouterr().err
    assert not (root / "WORK").exists()
