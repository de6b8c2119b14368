"""``harness diff CYCLE_A CYCLE_B``: two cycles' records compared item by item, as a user reads them."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from test_tracking_support import record_item, two_cycles

from harness.apps.cli import main
from harness.apps.tracking.compare import CycleNotFound, compare_item, parse_margins
from harness.apps.tracking.compare import BaselineItem as Base
from harness.apps.tracking.diff import diff_cycles, render_json, render_text
from harness.base.models import RunRecord
from harness.base.stats import mean_interval
from harness.records import AttemptDetails, RecordStore

TWO = {"accuracy": 0.5, "clarity": 0.5}
NO_JUDGE = "not scored (indeterminate): no ANTHROPIC_API_KEY for the judge"


def record_unpriced(store: RecordStore, cycle: str, agent: str, case: str, scores: Mapping[str, float]) -> str:
    """One passing attempt whose model has no price, written as the engine writes it (cost unknown, not $0)."""
    nodeid = f"suites/{agent}.yaml::{case}"
    where = store.location(cycle, agent, case)
    details = AttemptDetails(nodeid=nodeid, case_id=case, rubric_name="summary-quality", threshold=0.8)
    run_id = store.start_attempt(where, 1, "1.0.0", details)
    artifact = store.write_artifact(where, 1, f"# {case}\n")
    overall = round(sum(s * TWO[d] for d, s in scores.items()), 4)
    usage = {"ollama/llama3": {"calls": 1, "input_tokens": 800, "output_tokens": 200, "cache_write_tokens": 0,
                               "cache_read_tokens": 0, "cost_usd": None}}
    record = RunRecord(cycle_id=cycle, agent_name=agent, attempt=1, status="passed", overall_score=overall,
                       dimension_scores=dict(scores), feedback="", suggested_fixes=[], artifact_path=str(artifact),
                       created_at="2026-02-02T10:00:00Z", duration_ms=900, rubric_version="1.0.0")
    done = AttemptDetails(
        nodeid=nodeid, case_id=case, rubric_name="summary-quality", threshold=0.8, outcome="passed", exit_code=0,
        model="ollama/llama3", input_tokens=800, output_tokens=200, cost_usd=0.0, cost_known=False,
        model_usage=usage, dimensions={d: {"score": s, "weight": TWO[d], "reason": ""} for d, s in scores.items()})
    store.finish_attempt(run_id, record, done, store.run_log_path(cycle))
    return nodeid


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, str, str]:
    """Two cycles: one item flips down, one up, one improves a little, one is removed, one loses its score
    (nobody could judge it), one is added on a model with no price."""
    store = RecordStore(tmp_path / "WORK")
    a = store.allocate_cycle(dt.date(2026, 2, 1))
    for case, scores in (("down", {"accuracy": 0.9, "clarity": 0.9}), ("up", {"accuracy": 0.6, "clarity": 0.6}),
                         ("steady", {"accuracy": 0.9, "clarity": 0.9}), ("gone", {"accuracy": 0.8, "clarity": 0.8}),
                         ("judged", {"accuracy": 0.9, "clarity": 0.9})):
        record_item(store, a, "writer", case, [scores], weights=TWO)
    b = store.allocate_cycle(dt.date(2026, 2, 2))
    record_item(store, b, "writer", "down", [{"accuracy": 0.4, "clarity": 0.6}], weights=TWO)
    record_item(store, b, "writer", "up", [{"accuracy": 0.9, "clarity": 0.8}], weights=TWO)
    record_item(store, b, "writer", "steady", [{"accuracy": 1.0, "clarity": 0.9}], weights=TWO)
    judged = record_item(store, b, "writer", "judged", [{"accuracy": None, "clarity": None}], weights=TWO)
    store.write_loop_result(store.location(b, "writer", "judged"), judged, "judged",
                            {"success": False, "escalated": True, "escalationReason": NO_JUDGE})
    record_unpriced(store, b, "writer", "new", {"accuracy": 0.9, "clarity": 0.9})
    store.close()
    return tmp_path / "WORK", a, b


def test_items_are_compared_by_node_id_and_none_is_dropped(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    diff = diff_cycles(work_dir, a, b)
    assert (diff.a.cycle, diff.b.cycle) == (a, b)
    assert [i.nodeid.split("::")[1] for i in diff.items] == ["down", "gone", "judged", "new", "steady", "up"]
    flipped = {i.nodeid.split("::")[1]: (i.a.verdict, i.b.verdict) for i in diff.flipped}
    assert flipped == {"down": ("passed", "failed"), "up": ("failed", "passed")}
    assert [i.nodeid for i in diff.added] == ["suites/writer.yaml::new"]
    assert [i.nodeid for i in diff.removed] == ["suites/writer.yaml::gone"]
    [lost] = diff.scored_in_one
    assert lost.nodeid.endswith("::judged") and lost.b.verdict == "skipped"
    assert lost.b.no_score == "no ANTHROPIC_API_KEY for the judge"  # the recorded reason, as the summary says it
    assert [(i.nodeid.split("::")[1], round(i.score_change, 3)) for i in diff.score_changes] == [
        ("down", -0.4), ("up", 0.25), ("steady", 0.05)]  # largest change first


def test_each_item_is_said_as_the_gate_says_it(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    items = {i.nodeid.split("::")[1]: i for i in diff_cycles(work_dir, a, b).items}
    assert items["down"].describe() == ["passed -> failed", "overall 0.900 -> 0.500 (-0.400)",
                                        "dimension accuracy 0.900 -> 0.400 (-0.500)",
                                        "dimension clarity 0.900 -> 0.600 (-0.300)"]
    assert items["judged"].describe() == ["passed -> skipped",
                                          "overall 0.900 -> none (no ANTHROPIC_API_KEY for the judge)"]
    assert items["gone"].describe() == ["removed: passed, score 0.800"]
    assert items["new"].describe() == ["added: passed, score 0.900"]


def test_dimension_means_over_the_items_scored_in_both(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    dims = {d.dimension: d for d in diff_cycles(work_dir, a, b).dimensions}
    assert set(dims) == {"accuracy", "clarity"}
    accuracy = dims["accuracy"]  # down, up, steady: "judged" has none in B, "gone" and "new" are in one cycle
    assert accuracy.items == 3
    assert accuracy.a == pytest.approx((0.9 + 0.6 + 0.9) / 3)
    assert accuracy.b == pytest.approx((0.4 + 0.9 + 1.0) / 3)
    assert accuracy.change == pytest.approx(accuracy.b - accuracy.a)


def test_totals_say_what_the_means_divide_by_and_an_unknown_cost_is_unknown(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    diff = diff_cycles(work_dir, a, b)
    assert diff.a.mean_text == "0.820 over 5 of 5 items"
    assert diff.b.mean_text == f"{(0.5 + 0.85 + 0.95 + 0.9) / 4:.3f} over 4 of 5 items"
    assert diff.a.cost == "$0.0500"
    assert diff.b.cost == "$0.0400 + unknown"  # four priced items and one on a model with no price
    assert diff.cost_change == "unknown"
    assert diff.a.verdict_text == "1 failed, 4 passed" and diff.b.verdict_text == "1 failed, 3 passed, 1 skipped"
    assert diff.b.tokens - diff.a.tokens == -500  # the new item's 800 + 200 against the removed item's 1500
    assert diff.a.duration_ms == 5 * 1200 and diff.b.median_duration_ms == 1200
    data = json.loads(render_json(diff))
    assert data["b"]["cost"] == "$0.0400 + unknown" and data["b"]["cost_usd"] is None
    assert data["changes"]["cost"] == "unknown" and data["changes"]["cost_usd"] is None


def test_a_cycle_whose_only_model_has_no_price_costs_unknown_never_zero(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    a = store.allocate_cycle(dt.date(2026, 2, 1))
    record_unpriced(store, a, "writer", "one", {"accuracy": 0.9, "clarity": 0.9})
    b = store.allocate_cycle(dt.date(2026, 2, 2))
    record_unpriced(store, b, "writer", "one", {"accuracy": 0.8, "clarity": 0.9})
    store.close()
    text = render_text(diff_cycles(tmp_path / "WORK", a, b))
    cost = next(line for line in text.splitlines() if line.startswith("cost"))
    assert cost.split() == ["cost", "unknown", "unknown", "unknown"]
    assert "$0.0000" not in text


def test_the_paired_test_for_a_constructed_case(tmp_path: Path) -> None:
    """Four items, each better in B by 0.1, 0.2, 0.05 and 0.15: the exact sign-flip test finds 2 of the 16 sign
    patterns at least as far from zero (all +, all -), p = 0.125."""
    store = RecordStore(tmp_path / "WORK")
    a = store.allocate_cycle(dt.date(2026, 2, 1))
    b = store.allocate_cycle(dt.date(2026, 2, 2))
    before, gains = [0.5, 0.6, 0.7, 0.4], [0.1, 0.2, 0.05, 0.15]
    for n, (score, gain) in enumerate(zip(before, gains)):
        record_item(store, a, "writer", f"c{n}", [{"accuracy": score}], weights={"accuracy": 1.0})
        record_item(store, b, "writer", f"c{n}", [{"accuracy": round(score + gain, 2)}], weights={"accuracy": 1.0})
    store.close()
    diff = diff_cycles(tmp_path / "WORK", a, b)
    test = diff.paired
    assert (test.pairs, test.b_better, test.a_better, test.exact) == (4, 4, 0, True)
    assert test.p_value == pytest.approx(0.125)
    assert test.difference.estimate == pytest.approx(0.125)
    expected = mean_interval([round(s + g, 2) - s for s, g in zip(before, gains)])
    assert (test.difference.low, test.difference.high) == pytest.approx((expected.low, expected.high))
    assert 0.05 <= test.difference.low < 0.125 < test.difference.high <= 0.2
    assert diff.shared_a.estimate == pytest.approx(0.55) and diff.shared_a.n == 4
    assert diff.paired_lines() == ["over the 4 items scored in both",
                                   f"mean A {diff.shared_a.text()}, B {diff.shared_b.text()}",
                                   f"{test.text('A', 'B')} (exact sign-flip test)"]
    assert f"+0.125 [{test.difference.low:+.3f}, {test.difference.high:+.3f}]" in diff.paired_text
    assert "(4 up, 0 down), p=0.125: no significant difference" in diff.paired_text
    data = json.loads(render_json(diff))["paired_test"]
    assert (data["pairs"], data["b_better"], data["a_better"], data["enough"]) == (4, 4, 0, True)
    assert data["p_value"] == pytest.approx(0.125)
    assert data["difference"]["low"] == pytest.approx(test.difference.low)


def test_fewer_than_two_shared_items_is_said_plainly(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    a = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, a, "writer", "one", [{"accuracy": 0.9}], weights={"accuracy": 1.0})
    record_item(store, a, "writer", "two", [{"accuracy": 0.9}], weights={"accuracy": 1.0})
    b = store.allocate_cycle(dt.date(2026, 2, 2))
    record_item(store, b, "writer", "one", [{"accuracy": 0.7}], weights={"accuracy": 1.0})
    store.close()
    diff = diff_cycles(tmp_path / "WORK", a, b)
    assert diff.paired_text == "no paired test: only 1 item is scored in both cycles (it needs 2 or more)"
    assert "Paired test: no paired test: only 1 item" in render_text(diff)
    assert json.loads(render_json(diff))["paired_test"]["enough"] is False


def test_text_output_is_readable(work: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    work_dir, a, b = work
    assert main(["diff", a, b, "--work-dir", str(work_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"harness diff: A {a} -> B {b}"
    assert lines[2].split() == ["A", a, "B", b, "change"]
    assert next(line for line in lines if line.startswith("mean score")).split("  ")[0] == "mean score"
    assert "0.820 over 5 of 5 items" in out and "0.800 over 4 of 5 items" in out
    flipped = lines.index("Flipped (2):")
    assert lines[flipped + 1:flipped + 4] == ["  suites/writer.yaml::down", "      passed -> failed",
                                              "      overall 0.900 -> 0.500 (-0.400)"]
    assert "Scored in one cycle only (1):" in lines
    assert "      overall 0.900 -> none (no ANTHROPIC_API_KEY for the judge)" in lines
    assert lines[lines.index("Added in B (1):") + 1] == "  suites/writer.yaml::new"
    assert lines[lines.index("Removed in B (1):") + 1] == "  suites/writer.yaml::gone"
    assert "  -0.400  suites/writer.yaml::down    0.900 -> 0.500" in lines


def test_json_output_has_the_fields(work: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    work_dir, a, b = work
    assert main(["diff", a, b, "--work-dir", str(work_dir), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["cycle"] == a and data["b"]["mean"] == "0.800 over 4 of 5 items"
    assert [i["nodeid"] for i in data["flipped"]] == ["suites/writer.yaml::down", "suites/writer.yaml::up"]
    assert data["flipped"][0]["a"]["verdict"] == "passed" and data["flipped"][0]["b"]["verdict"] == "failed"
    assert [i["nodeid"] for i in data["added"]] == ["suites/writer.yaml::new"]
    assert data["scored_in_one"][0]["b"]["no_score"] == "no ANTHROPIC_API_KEY for the judge"
    assert {d["dimension"] for d in data["dimensions"]} == {"accuracy", "clarity"}
    assert set(data["paired_test"]) >= {"p_value", "difference", "pairs", "b_better", "a_better", "text"}
    assert len(data["items"]) == 6


def test_html_output_is_one_self_contained_page(work: tuple[Path, str, str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    work_dir, a, b = work
    page = tmp_path / "diff.html"
    assert main(["diff", a, b, "--work-dir", str(work_dir), "--format", "html", "-o", str(page)]) == 0
    assert capsys.readouterr().out.strip() == str(page)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text.lower()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "http://" not in text and "https://" not in text  # nothing to load
    assert 'data-nodeid="suites/writer.yaml::down"' in text and "passed → failed" in text
    assert "overall 0.900 -&gt; none (no ANTHROPIC_API_KEY for the judge)" in text
    assert main(["diff", a, b, "--work-dir", str(work_dir), "--format", "html"]) == 0  # no file: stdout
    assert capsys.readouterr().out == text


def test_latest_and_previous_name_the_newest_cycles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work_dir = tmp_path / "WORK"
    first, second = two_cycles(work_dir)
    store = RecordStore(work_dir)
    third = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, third, "writer", "case-a", [{"accuracy": 0.5, "clarity": 0.5, "sources": 0.5}])
    store.close()
    diff = diff_cycles(work_dir, "previous", "latest")
    assert (diff.a.cycle, diff.b.cycle) == (second, third)
    assert main(["diff", "--work-dir", str(work_dir), "--format", "json"]) == 0  # the defaults: previous latest
    data = json.loads(capsys.readouterr().out)
    assert (data["a"]["cycle"], data["b"]["cycle"]) == (second, third)
    assert main(["diff", first, "latest", "--work-dir", str(work_dir), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["a"]["cycle"], data["b"]["cycle"]) == (first, third)
    assert {i["nodeid"] for i in data["removed"]} == {"suites/writer.yaml::case-b", "suites/planner.yaml::plan-1"}
    md = tmp_path / "previous.md"  # `harness report` names cycles the same way
    assert main(["report", "previous", "--work-dir", str(work_dir), "--markdown", "-o", str(md)]) == 0
    assert md.read_text().startswith(f"## pytest-rubric · cycle {second}")


def test_an_unknown_cycle_is_one_line_naming_it(work: tuple[Path, str, str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    work_dir, a, b = work
    assert main(["diff", "2020-01-01-001", b, "--work-dir", str(work_dir)]) == 66
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"harness: cycle 2020-01-01-001 has no records in {work_dir} "
                            f"(cycles with records: {a}, {b})\n")
    with pytest.raises(SystemExit) as bad:
        main(["diff", "yesterday", "--work-dir", str(work_dir)])
    assert bad.value.code == 2
    assert "'yesterday' is not latest, previous or a cycle id such as 2026-01-31-001" in capsys.readouterr().err


def test_previous_with_one_cycle_says_so(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    only = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, only, "writer", "one", [{"accuracy": 0.9}], weights={"accuracy": 1.0})
    store.close()
    with pytest.raises(CycleNotFound, match=f"cycle previous: only one cycle has records in .* \\({only}\\)"):
        diff_cycles(tmp_path / "WORK")


def test_as_a_user_runs_it(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    harness = Path(sys.executable).with_name("harness")
    done = subprocess.run([str(harness), "diff", "2099-12-31-001", "latest", "--work-dir", str(work_dir)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 66
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"harness: cycle 2099-12-31-001 has no records in {work_dir} "
                                        f"(cycles with records: {a}, {b})"]
    done = subprocess.run([str(harness), "diff", "--work-dir", str(work_dir)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith(f"harness diff: A {a} -> B {b}\n")


def test_no_records_says_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--work-dir", str(tmp_path / "WORK")]) == 66
    assert capsys.readouterr().err.startswith("harness diff: no records in ")


def test_the_gate_explains_a_regressed_item_in_the_diffs_words(work: tuple[Path, str, str]) -> None:
    work_dir, a, b = work
    down = next(i for i in diff_cycles(work_dir, a, b).items if i.nodeid.endswith("::down"))
    regression = compare_item(down.nodeid, Base(down.a.score, down.a.dimensions), down.b.score, down.b.dimensions,
                              parse_margins("overall:0.05,dimension:0.1"))
    assert regression is not None
    assert regression.describe() == down.describe()[1:]  # the same lines; the gate itself decides the verdict
    held = compare_item("n", Base(0.9, {"a": 0.9}), 0.89, {"a": 0.7}, parse_margins("overall:0.05,dimension:0.1"))
    assert held.describe() == ["overall 0.900 -> 0.890 (-0.010) (within margin)",
                               "dimension a 0.900 -> 0.700 (-0.200)"]
    unknown = compare_item("n", Base(0.9, {"a": 0.9}), None, {"a": 0.5}, parse_margins("dimension:0.1"))
    assert unknown.describe() == ["overall 0.900 -> none", "dimension a 0.900 -> 0.500 (-0.400)"]


def test_a_rubric_scored_with_another_version_is_named_as_not_like_for_like(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    a = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, a, "writer", "one", [{"accuracy": 0.9, "clarity": 0.9}], weights=TWO)
    record_item(store, a, "checker", "one", [{"accuracy": 0.9, "clarity": 0.9}], weights=TWO, rubric="facts")
    b = store.allocate_cycle(dt.date(2026, 2, 2))
    record_item(store, b, "writer", "one", [{"accuracy": 0.6, "clarity": 0.9}], weights=TWO, rubric_version="1.1.0")
    record_item(store, b, "checker", "one", [{"accuracy": 0.9, "clarity": 0.9}], weights=TWO, rubric="facts")
    store.close()
    diff = diff_cycles(tmp_path / "WORK", a, b)
    assert diff.rubric_changes == [("summary-quality", "1.0.0", "1.1.0")]  # facts kept its version: not named
    [row] = [line for line in render_text(diff).splitlines() if line.startswith("rubric ")]
    assert row.split() == ["rubric", "summary-quality", "1.0.0", "summary-quality", "1.1.0", "another", "version:",
                           "scores", "not", "like", "for", "like"]
    shown = json.loads(render_json(diff))
    assert shown["changes"]["rubric_versions"] == ["summary-quality 1.0.0 -> 1.1.0"]
    assert shown["b"]["rubric_versions"] == {"facts": "1.0.0", "summary-quality": "1.1.0"}
    same = diff_cycles(tmp_path / "WORK", a, a)
    assert same.rubric_changes == [] and "another version" not in render_text(same)
