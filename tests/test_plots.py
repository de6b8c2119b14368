"""Plots: the three kinds, as files a person can read (titles, labels, legends, no overlapping labels)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from PIL import Image
from test_tracking_support import record_item, two_cycles

from harness.apps.cli import main
from harness.apps.tracking import plots
from harness.apps.tracking.frames import attempts_frame, items_frame
from harness.apps.tracking.rawdata import append_raw_data, read_raw_data
from harness.base.errors import HarnessConfigError
from harness.loading.goal import Metric
from harness.records import RecordStore

DEMO_GOAL = Path(__file__).resolve().parent.parent / "goals" / "demo_primes"


def raw_entries(goal: str | None = "speed") -> list[dict]:
    def entry(iteration: int, plan: str, score: float | None, family: str, winner: bool = False) -> dict:
        e = {"iteration": iteration, "plan_id": plan, "benchmark_score": score, "is_winner": winner,
             "approach_family": family, "sub_scores": {}}
        return e | ({"goal": goal} if goal else {})

    return [
        entry(0, "baseline", 80.0, "baseline"),
        entry(1, "round_1_planner_a", 85.2, "training_config", winner=True),
        entry(1, "round_1_planner_b", 78.5, "architecture"),
        entry(2, "round_2_planner_a", 84.0, "data"),
        entry(2, "round_2_planner_b", None, "architecture"),
        entry(3, "round_3_planner_a", 88.1, "architecture", winner=True),
        entry(4, "round_4_planner_a", 86.0, "my_custom_family"),
    ]


def legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def assert_readable(fig: Figure) -> None:
    """Title and axis labels present; tick labels and legend do not overlap each other or the axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert fig.legends, "no legend"
    low, high = sorted(ax.get_xlim())
    labels = [t for t, x in zip(ax.get_xticklabels(), ax.get_xticks())
              if t.get_visible() and t.get_text() and low <= x <= high]
    boxes = [t.get_window_extent(renderer) for t in labels]
    for a, b in zip(boxes, boxes[1:]):
        assert not a.overlaps(b), f"tick labels overlap: {labels}"
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert not legend_box.overlaps(ax.get_window_extent(renderer)), "legend covers the plot"
    fig_box = fig.bbox
    for box in [*boxes, legend_box]:
        assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1, "text cut at the figure's edge"


def test_write_plots_writes_the_four_kinds_as_png_and_svg(tmp_path: Path) -> None:
    work_dir = tmp_path / "WORK"
    two_cycles(work_dir)
    append_raw_data(tmp_path / "tracking" / "raw_data.json", raw_entries())
    written = plots.write_plots(work_dir, tmp_path / "tracking")
    names = sorted(p.name for p in written)
    assert names == sorted(f"{stem}.{fmt}" for fmt in ("png", "svg") for stem in (
        "score-writer-summary-quality", "score-planner-plan-quality", "dimensions-summary-quality",
        "dimensions-plan-quality", "heatmap-summary-quality", "heatmap-plan-quality", "trajectories-speed"))
    assert all(p.parent == tmp_path / "tracking" / "plots" for p in written)
    for path in written:
        if path.suffix == ".png":
            with Image.open(path) as image:
                assert image.format == "PNG" and image.width >= 800 and image.height >= 500
        else:
            assert path.read_text().lstrip().startswith("<?xml")
    svg = (tmp_path / "tracking" / "plots" / "score-writer-summary-quality.svg").read_text()
    assert "writer · summary-quality: overall score by cycle" in svg  # text stays text in SVG
    assert not list((tmp_path / "tracking" / "plots").glob(".*.tmp"))


def test_score_plot_shows_threshold_spread_and_outcomes(tmp_path: Path) -> None:
    work_dir = tmp_path / "WORK"
    two_cycles(work_dir)
    items = items_frame(attempts_frame(work_dir))
    writer = items[items.agent_name == "writer"]
    fig = plots._score_figure(writer, "writer", "summary-quality")
    # revisions raised the scores: the first attempts' mean is drawn beside the final one
    assert legend_texts(fig) == ["spread (items, samples)", "mean score", "mean of first attempts", "threshold",
                                 "item passed", "item failed"]
    assert_readable(fig)
    planner = items[items.agent_name == "planner"]  # one item, no samples: no spread band, no "failed" entry
    assert legend_texts(plots._score_figure(planner, "planner", "plan-quality")) == [
        "mean score", "threshold", "item passed"]


def test_many_cycles_keep_tick_labels_apart(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    start = dt.date(2026, 1, 1)
    for day in range(40):
        cycle = store.allocate_cycle(start + dt.timedelta(days=day))
        record_item(store, cycle, "writer", "case-a", [{"accuracy": 0.5 + day / 100, "clarity": 0.8, "sources": 0.7}])
    items = items_frame(attempts_frame(tmp_path / "WORK"))
    score = plots._score_figure(items, "writer", "summary-quality")
    assert_readable(score)
    shown = [t.get_text() for t in score.axes[0].get_xticklabels()]
    assert shown[0] == "2026-01-01-001" and shown[-1] == "2026-02-09-001" and len(shown) <= 14
    dims = plots.dimensions_frame(items)
    assert_readable(plots._dimension_figure(dims, "summary-quality"))


def test_dimension_plot_lists_the_lowest_dimension_first(tmp_path: Path) -> None:
    work_dir = tmp_path / "WORK"
    two_cycles(work_dir)
    dims = plots.dimensions_frame(items_frame(attempts_frame(work_dir)))
    fig = plots._dimension_figure(dims[dims.rubric_name == "summary-quality"], "summary-quality")
    labels = legend_texts(fig)
    # latest cycle: accuracy (0.9 + 0.6) / 2 = 0.75, sources 0.75, clarity 0.9; ties by name
    assert labels == ["accuracy (weight 0.50): 0.75", "sources (weight 0.20): 0.75", "clarity (weight 0.30): 0.90"]
    assert_readable(fig)


def test_trajectories_one_figure_per_goal(tmp_path: Path) -> None:
    raw = tmp_path / "raw_data.json"
    append_raw_data(raw, raw_entries("speed")[:3] + raw_entries(None)[:3])
    written = plots.plot_trajectories(raw, tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(
        f"{stem}.{fmt}" for fmt in ("png", "svg") for stem in ("trajectories", "trajectories-speed"))


def test_trajectory_figure_marks_families_winners_best_so_far_and_baseline(tmp_path: Path) -> None:
    raw = tmp_path / "raw_data.json"
    append_raw_data(raw, raw_entries())
    entries = read_raw_data(raw)
    fig = plots._trajectory_figure(entries, "speed")
    assert legend_texts(fig) == ["architecture", "data", "my_custom_family", "training_config", "winner",
                                 "best so far", "baseline (80)"]
    assert "1 candidate without a score not shown" in fig.axes[0].get_title()
    assert fig.axes[0].get_ylabel() == "benchmark score"
    assert_readable(fig)
    lower = plots._trajectory_figure(entries, "speed", Metric(name="runtime_ms", direction="minimize"))
    assert lower.axes[0].get_ylabel() == "runtime_ms (lower is better)"
    scored = [e for e in entries if not e.is_baseline and e.benchmark_score is not None]
    assert plots._best_so_far(scored, 80.0) == [(0, 80.0), (1, 85.2), (3, 88.1), (4, 88.1)]


def test_the_trajectory_axis_names_the_goals_metric_from_goals_beside_tracking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    goal = tmp_path / "goals" / "speed"
    goal.mkdir(parents=True)
    (goal / "goal.md").write_text((DEMO_GOAL / "goal.md").read_text())  # runtime_ms, minimize
    broken = tmp_path / "goals" / "broken"
    broken.mkdir()
    (broken / "goal.md").write_text("# no sections\n")
    raw = tmp_path / "tracking" / "raw_data.json"
    append_raw_data(raw, raw_entries("speed")[:3] + raw_entries("broken")[:3])
    seen: dict[str, str] = {}
    original = plots._trajectory_figure

    def spy(entries, goal, metric=None):  # noqa: ANN001, ANN202
        fig = original(entries, goal, metric)
        seen[goal] = fig.axes[0].get_ylabel()
        return fig

    monkeypatch.setattr(plots, "_trajectory_figure", spy)
    plots.plot_trajectories(raw, tmp_path / "out")
    assert seen == {"speed": "runtime_ms (lower is better)", "broken": "benchmark score"}


def test_a_trajectory_spanning_two_orders_of_magnitude_gets_a_log_axis(tmp_path: Path) -> None:
    raw = tmp_path / "raw_data.json"
    append_raw_data(raw, [
        {"iteration": 0, "plan_id": "baseline", "benchmark_score": 7.5, "is_winner": False,
         "approach_family": "other", "sub_scores": {}},
        {"iteration": 1, "plan_id": "round_1_sieve", "benchmark_score": 0.09, "is_winner": True,
         "approach_family": "optimization", "sub_scores": {}},
        {"iteration": 2, "plan_id": "round_2_docstring", "benchmark_score": 0.095, "is_winner": False,
         "approach_family": "documentation", "sub_scores": {}},
    ])
    fig = plots._trajectory_figure(read_raw_data(raw), None, Metric(name="runtime_ms", direction="minimize"))
    assert fig.axes[0].get_yscale() == "log"
    assert_readable(fig)
    append_raw_data(tmp_path / "close.json", raw_entries())  # scores 80 to 90
    assert plots._trajectory_figure(read_raw_data(tmp_path / "close.json"), None).axes[0].get_yscale() == "linear"


def test_family_colours_are_stable_across_plots() -> None:
    first = plots.family_colours(["data", "custom"])
    second = plots.family_colours(["custom", "architecture", "data"])
    assert first["data"] == second["data"] and first["custom"] == second["custom"]
    assert len(set(second.values())) == 3


def test_empty_or_missing_raw_data_writes_nothing(tmp_path: Path) -> None:
    assert plots.plot_trajectories(tmp_path / "missing.json", tmp_path / "out") == []
    (tmp_path / "empty.json").write_text("[]\n")
    assert plots.plot_trajectories(tmp_path / "empty.json", tmp_path / "out") == []
    assert not (tmp_path / "out").exists()


def test_malformed_entry_names_the_file_and_field(tmp_path: Path) -> None:
    raw = tmp_path / "raw_data.json"
    raw.write_text(json.dumps([{"iteration": 1, "plan_id": "p", "benchmark_score": "high"}]))
    with pytest.raises(HarnessConfigError, match=r"raw_data\.json: \[0\]\.benchmark_score: "):
        plots.plot_trajectories(raw, tmp_path / "out")


def test_cli_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work_dir = tmp_path / "WORK"
    two_cycles(work_dir)
    append_raw_data(tmp_path / "tracking" / "raw_data.json", raw_entries(None))
    assert main(["plot", "--work-dir", str(work_dir), "--tracking-dir", str(tmp_path / "tracking")]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 14 and all(Path(p).exists() for p in printed)

    assert main(["plot", "--work-dir", str(tmp_path / "nothing"), "--tracking-dir", str(tmp_path / "none")]) == 66
    assert "nothing to plot" in capsys.readouterr().err


def test_items_with_no_score_sit_on_the_floor_counted_and_a_cycle_with_none_says_why(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    first = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, first, "writer", "case-a", [{"accuracy": 0.9, "clarity": 0.9, "sources": 0.9}])
    record_item(store, first, "writer", "case-b", [{"accuracy": 0.9, "clarity": 0.9, "sources": 0.9}])
    record_item(store, first, "writer", "case-c", [{"accuracy": None, "clarity": 0.9, "sources": 0.9}])
    items = items_frame(attempts_frame(tmp_path / "WORK"))
    fig = plots._score_figure(items, "writer", "summary-quality")
    assert_readable(fig)
    assert "no score (on the floor)" in legend_texts(fig)
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    assert "1 no score" in texts
    # the mean line is the two scored items' mean, not pulled down by the unscored one
    mean_line = next(line for line in ax.lines if line.get_linewidth() == 2)
    assert list(mean_line.get_ydata()) == [pytest.approx(0.9)]
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    floor = [c for c in points if all(y == 0.0 for _, y in c.get_offsets())]
    assert len(floor) == 1 and len(floor[0].get_offsets()) == 1
    # two scored items of one cycle stand side by side, not on top of each other
    scored = [c for c in points if len(c.get_offsets()) == 2]
    xs = [x for x, _ in scored[0].get_offsets()]
    assert xs[0] != xs[1]

    nothing = store.allocate_cycle(dt.date(2026, 2, 2))
    record_item(store, nothing, "planner", "plan-1", [{"accuracy": None, "clarity": 0.9, "sources": 0.9}],
                rubric="plan-quality")
    planner = items_frame(attempts_frame(tmp_path / "WORK"))
    fig = plots._score_figure(planner[planner.agent_name == "planner"], "planner", "plan-quality")
    (ax,) = fig.axes
    message = next(t.get_text() for t in ax.texts if t.get_text().startswith("no item was scored"))
    assert "1 " in message.splitlines()[1]
    assert "mean score" not in legend_texts(fig)


def test_heatmap_puts_the_lowest_dimension_on_top_and_writes_each_cell(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    for day in range(3):
        cycle = store.allocate_cycle(dt.date(2026, 3, 1 + day))
        record_item(store, cycle, "writer", "case-a", [{"accuracy": 0.9, "clarity": 0.5 + day / 10,
                                                        "sources": None if day == 1 else 0.3}])
    dims = plots.dimensions_frame(items_frame(attempts_frame(tmp_path / "WORK")))
    fig = plots._heatmap_figure(dims, "summary-quality")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["sources", "clarity", "accuracy"]
    cells = [t.get_text() for t in ax.texts]
    assert cells[:3] == ["0.30", "none", "0.30"] and cells[3:6] == ["0.50", "0.60", "0.70"]
    assert legend_texts(fig) == ["blank: no score"]
    fig.canvas.draw()
    assert ax.get_title() and ax.get_xlabel() == "cycle"
