"""``harness history``: per agent and rubric, score, pass rate, attempts, tokens and cost over cycles."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_tracking_support import two_cycles

from harness.apps.cli import main
from harness.apps.tracking.history import history_frame


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, str, str]:
    work_dir = tmp_path / "WORK"
    return (work_dir, *two_cycles(work_dir))


def test_one_row_per_agent_rubric_and_cycle(work: tuple[Path, str, str]) -> None:
    work_dir, first, second = work
    frame = history_frame(work_dir)
    assert list(frame[["agent", "rubric", "cycle"]].itertuples(index=False, name=None)) == [
        ("planner", "plan-quality", first), ("planner", "plan-quality", second),
        ("writer", "summary-quality", first), ("writer", "summary-quality", second),
    ]
    writer2 = frame[(frame.agent == "writer") & (frame.cycle == second)].iloc[0]
    assert writer2["items"] == 2
    assert writer2.pass_rate == pytest.approx(0.5)  # case-a passed, case-b failed after 3 attempts
    assert writer2.attempts == 4
    assert writer2.tokens == 4 * 1500
    assert writer2.cost_usd == pytest.approx(0.04)
    case_a = 0.5 * 0.9 + 0.3 * 0.95 + 0.2 * 0.8
    case_b = 0.5 * 0.6 + 0.3 * 0.85 + 0.2 * 0.7
    assert writer2.score == pytest.approx((case_a + case_b) / 2, abs=1e-4)


def test_filters(work: tuple[Path, str, str]) -> None:
    work_dir, first, second = work
    assert set(history_frame(work_dir, agent="planner").agent) == {"planner"}
    assert set(history_frame(work_dir, rubric="summary-quality").rubric) == {"summary-quality"}
    assert set(history_frame(work_dir, since="2026-01-31").cycle) == {second}
    assert set(history_frame(work_dir, since=second).cycle) == {second}
    assert history_frame(work_dir, agent="nobody").empty


def test_cli_formats(work: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    work_dir, first, second = work
    assert main(["history", "--work-dir", str(work_dir), "--agent", "writer", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["cycle"] for r in rows] == [first, second]
    assert rows[1]["pass_rate"] == 0.5 and rows[1]["attempts"] == 4

    assert main(["history", "--work-dir", str(work_dir), "--format", "csv"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0] == "agent,rubric,cycle,items,score,scored,pass_rate,judged,attempts,tokens,cost_usd,cost_known"
    assert len(csv) == 5

    assert main(["history", "--work-dir", str(work_dir), "--rubric", "summary-quality"]) == 0
    table = capsys.readouterr().out
    assert "50% of 2" in table and "$0.0400" in table and "planner" not in table


def test_empty_work_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--work-dir", str(tmp_path / "WORK")]) == 0
    assert capsys.readouterr().err == f"harness history: no records in {tmp_path / 'WORK'}\n"
    assert main(["history", "--work-dir", str(tmp_path / "WORK"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_bad_format_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["history", "--format", "xml"])
    assert info.value.code == 2
    assert "argument --format: 'xml' is not one of table, csv, json (fix: use one of" in capsys.readouterr().err


def test_module_runs_alone(work: tuple[Path, str, str]) -> None:
    work_dir, _, _ = work
    done = subprocess.run([sys.executable, "-m", "harness.apps.cli", "history", "--work-dir", str(work_dir),
                           "--format", "csv"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert len(io.StringIO(done.stdout).readlines()) == 5


def test_from_a_subfolder_the_nearest_work_folder_is_read(work: tuple[Path, str, str], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    work_dir, first, second = work
    subfolder = work_dir.parent / "suites" / "deep"
    subfolder.mkdir(parents=True)
    monkeypatch.chdir(subfolder)
    assert main(["history", "--format", "json"]) == 0
    assert [r["cycle"] for r in json.loads(capsys.readouterr().out)][-1] == second


def test_with_no_records_anywhere_it_says_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert main(["history"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"harness history: no records: no WORK/harness.db in this folder or above (looked in "
                          f"{tmp_path / 'a' / 'b' / 'WORK'}, {tmp_path / 'a' / 'WORK'}, {tmp_path / 'WORK'}")
    assert "give --work-dir" in err
