"""The regression gate's parts: margins, baselines and the per-item comparison."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from test_tracking_support import two_cycles

from harness.apps.tracking.compare import (
    Baseline,
    BaselineItem,
    BaselineNotFound,
    Margin,
    compare_item,
    load_baseline,
    parse_baseline,
    parse_margins,
)


def test_margins_parse_absolute_and_relative() -> None:
    margins = parse_margins("overall:0.05,dimension:10%")
    assert margins.overall == Margin(0.05) and margins.dimension == Margin(0.1, relative=True)
    assert parse_margins("dimension:0.2").overall is None
    assert str(parse_margins("overall:0.05, dimension:0.1")) == "overall > 0.05, dimension > 0.1"


@pytest.mark.parametrize(("text", "message"), [
    ("overall", "not KEY:MARGIN"),
    ("total:0.1", "not KEY:MARGIN"),
    ("overall:abc", "'abc' in 'overall:abc' is not a number"),
    ("overall:1.5", "outside 0..1"),
    ("overall:0.1,overall:0.2", "overall is given twice"),
])
def test_bad_margins_are_argparse_type_errors(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_margins(text)


def test_baseline_names() -> None:
    assert parse_baseline("latest") == "latest"
    assert parse_baseline("2026-01-31-001") == "2026-01-31-001"
    with pytest.raises(argparse.ArgumentTypeError, match="not 'latest' or a cycle id"):
        parse_baseline("yesterday")


def test_drop_beyond_margin_is_a_regression() -> None:
    margins = parse_margins("overall:0.05,dimension:0.1")
    base = BaselineItem(0.90, {"accuracy": 0.9, "clarity": 0.8})
    assert compare_item("n", base, 0.86, {"accuracy": 0.85, "clarity": 0.8}, margins) is None  # within margins
    assert compare_item("n", base, 0.95, {"accuracy": 0.95}, margins) is None  # improved
    reg = compare_item("n", base, 0.80, {"accuracy": 0.6, "clarity": 0.75}, margins)
    assert reg is not None and reg.overall_dropped
    assert [(d.dimension, d.before, d.after) for d in reg.dimensions] == [("accuracy", 0.9, 0.6)]
    assert reg.describe() == ["overall 0.900 -> 0.800 (-0.100)", "dimension accuracy 0.900 -> 0.600 (-0.300)"]


def test_one_dimension_can_fail_an_item_whose_overall_held() -> None:
    reg = compare_item("n", BaselineItem(0.9, {"a": 0.9, "b": 0.5}), 0.89, {"a": 0.7, "b": 0.7},
                       parse_margins("overall:0.05,dimension:0.1"))
    assert reg is not None and not reg.overall_dropped
    assert reg.describe()[0].endswith("(within margin)")


def test_relative_margin_scales_with_the_baseline() -> None:
    margins = parse_margins("overall:10%")
    assert compare_item("n", BaselineItem(0.5, {}), 0.46, {}, margins) is None  # 0.04 < 10% of 0.5
    assert compare_item("n", BaselineItem(0.5, {}), 0.44, {}, margins) is not None


def test_unknown_scores_are_never_regressions() -> None:
    margins = parse_margins("overall:0.05,dimension:0.1")
    assert compare_item("n", BaselineItem(None, {"a": None}), 0.1, {"a": 0.1}, margins) is None
    assert compare_item("n", BaselineItem(0.9, {"a": 0.9}), None, {"a": None}, margins) is None


def test_load_baseline_latest_and_named(tmp_path: Path) -> None:
    work_dir = tmp_path / "WORK"
    first, second = two_cycles(work_dir)
    latest = load_baseline(work_dir, "latest")
    assert latest is not None and latest.cycle_id == second
    item = latest.find("suites/writer.yaml::case-b")
    assert item is not None and item.dimensions["accuracy"] == pytest.approx(0.6)  # the final attempt
    assert latest.find("moved/file.yaml::case-b", "writer", "case-b") is item  # by agent and case
    assert load_baseline(work_dir, "latest", exclude=(second,)).cycle_id == first
    assert load_baseline(work_dir, first).find("suites/writer.yaml::case-b").score == pytest.approx(0.925)
    wire = Baseline.from_wire(latest.to_wire())
    assert wire == latest


def test_missing_baseline(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "WORK", "latest") is None
    two_cycles(tmp_path / "WORK")
    with pytest.raises(BaselineNotFound, match="cycle 2025-01-01-001 has no records"):
        load_baseline(tmp_path / "WORK", "2025-01-01-001")
