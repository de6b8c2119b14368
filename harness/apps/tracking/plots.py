"""Plots, headless: PNG and SVG into ``tracking/plots/``.

Three kinds (issue 4):

- :func:`plot_trajectories`: tournament score trajectories from ``tracking/raw_data.json``, one per goal;
- :func:`plot_scores`: per agent and rubric, the overall score over cycles with the threshold and spread;
- :func:`plot_dimensions`: per rubric, each dimension's mean score over cycles.

Figures are built with ``matplotlib.figure.Figure`` and never through ``pyplot``, so no global backend
state is touched and no display is needed; the canvas is Agg for PNG and the SVG backend for SVG.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from harness.apps.tracking.comparisons import report_grids, report_pairwise
from harness.apps.tracking.frames import attempts_frame, dimensions_frame, items_frame
from harness.apps.tracking.rawdata import RawDataEntry, read_raw_data
from harness.apps.tracking.results import ReportItem, results_from_records
from harness.evaluation.comparison import PAIRWISE_RUBRIC, PairwiseTable, VariantGrid
from harness.evaluation.items.result import why_no_score
from harness.loading.goal_file import goal_metrics

PLOTS_DIR = "plots"
FORMATS = ("png", "svg")
PNG_DPI = 120

# Seed 001 section 6's families keep one colour everywhere; other families take the rest in order.
FAMILY_ORDER = ("architecture", "training_config", "data", "infrastructure", "optimization", "testing",
                "documentation", "other")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22", "#d62728", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
PASS_COLOUR, FAIL_COLOUR, THRESHOLD_COLOUR = "#2ca02c", "#d62728", "#d62728"
MAX_CYCLE_LABELS = 8
MAX_HEATMAP_NUMBERS = 240  # cells beyond this are too small to hold a number
HEATMAP_COLOURS = "RdYlGn"  # red low, green high: the reading every score table already uses
LOG_SCALE_RATIO = 20  # positive scores spanning this factor get a log axis: the small ones would sit on it


class GoalMetric(Protocol):
    """What a trajectory's score axis says: a goal's metric (harness.loading.goal.Metric)."""

    @property
    def name(self) -> str: ...

    @property
    def direction(self) -> str: ...  # "maximize" or "minimize"


def slug(text: str) -> str:
    """A file-name-safe form of an agent, rubric or goal name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "unnamed"


def family_colours(families: Iterable[str]) -> dict[str, str]:
    """Fixed colours for the seed's families, then the rest of the palette in order of first use."""
    colours = {f: PALETTE[i] for i, f in enumerate(FAMILY_ORDER)}
    spare = iter(PALETTE[len(FAMILY_ORDER):])
    out = {}
    for family in families:
        if family not in colours:
            colours[family] = next(spare, "#000000")
        out[family] = colours[family]
    return out


def _figure(width: float = 9.0, height: float = 5.0) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        tmp = path.with_name(f".{path.name}.tmp")
        with rc_context({"svg.fonttype": "none"}):  # SVG text stays text: searchable, selectable, small
            fig.savefig(tmp, format=fmt, dpi=PNG_DPI, metadata={"Date": None} if fmt == "svg" else None)
        tmp.replace(path)  # a reader (the HTML report, a browser) never sees half a file
        paths.append(path)
    return paths


def _cycle_axis(ax, cycles: Sequence[str]) -> None:
    """Cycles as evenly spaced categories; long runs show every k-th label so they never overlap."""
    positions = list(range(len(cycles)))
    step = max(1, math.ceil(len(cycles) / MAX_CYCLE_LABELS))
    shown = positions[::step]
    if positions and shown[-1] != positions[-1]:  # always label the newest cycle, never crowding it
        if positions[-1] - shown[-1] < step:
            shown.pop()
        shown.append(positions[-1])
    ax.set_xticks(shown, [cycles[i] for i in shown], rotation=30, ha="right", rotation_mode="anchor")
    ax.set_xticks(positions, minor=True)  # every cycle keeps a tick, labelled or not
    ax.set_xlim(-0.5, max(len(cycles) - 0.5, 0.5))
    ax.set_xlabel("cycle")


# --- tournament trajectories ------------------------------------------------------------------


def plot_trajectories(raw_data_path: Path, out_dir: Path, *,
                      metrics: Mapping[str, GoalMetric] | None = None) -> list[Path]:
    """Plot ``raw_data.json``: one figure per goal (PNG and SVG) in ``out_dir``; returns the files.

    ``metrics`` maps a goal slug to its metric (``name``, ``direction``), which labels the score axis, e.g.
    "runtime_ms (lower is better)". Without it, the goals are read from ``goals/`` beside the folder that
    holds ``raw_data.json`` (the project's layout: ``tracking/raw_data.json``, ``goals/<slug>/goal.md``); a
    goal not found there gets the axis "benchmark score".

    Every candidate by iteration, one colour per approach family; winners ringed with a star; the
    best-so-far line (the score of the last winner, which is what the code base holds); the baseline
    (iteration 0 or ``plan_id: baseline`` entries) as a dashed line. No file is written when
    ``raw_data.json`` is missing or empty.
    """
    entries = read_raw_data(Path(raw_data_path))
    if metrics is None and entries:
        metrics = goal_metrics(Path(raw_data_path).resolve().parent.parent / "goals")
    goals: dict[str | None, list[RawDataEntry]] = {}
    for entry in entries:
        goals.setdefault(entry.goal, []).append(entry)
    written: list[Path] = []
    for goal, group in sorted(goals.items(), key=lambda kv: kv[0] or ""):
        stem = f"trajectories-{slug(goal)}" if goal else "trajectories"
        written += _save(_trajectory_figure(group, goal, (metrics or {}).get(goal or "")), Path(out_dir), stem)
    return written


def _trajectory_figure(entries: list[RawDataEntry], goal: str | None, metric: GoalMetric | None = None) -> Figure:
    fig = _figure()
    ax = fig.add_subplot()
    baseline_entries = [e for e in entries if e.is_baseline and e.benchmark_score is not None]
    candidates = [e for e in entries if not e.is_baseline]
    scored = [e for e in candidates if e.benchmark_score is not None]
    families = sorted({e.approach_family for e in scored})
    colours = family_colours(families)
    spread = 0.08 if len(families) > 1 else 0.0
    handles: list[Line2D] = []
    offsets = {f: (i - (len(families) - 1) / 2) * spread for i, f in enumerate(families)}
    for family in families:
        offset = offsets[family]  # candidates of one iteration side by side
        points = [e for e in scored if e.approach_family == family]
        ax.scatter([e.iteration + offset for e in points], [e.benchmark_score for e in points],
                   s=36, color=colours[family], alpha=0.85, zorder=3, edgecolors="white", linewidths=0.5)
        handles.append(Line2D([], [], marker="o", linestyle="", color=colours[family], label=family))
        winners = [e for e in points if e.is_winner]
        if winners:
            ax.scatter([e.iteration + offset for e in winners], [e.benchmark_score for e in winners], s=190,
                       marker="*", color=colours[family], edgecolors="black", linewidths=0.9, zorder=4)
    if any(e.is_winner for e in scored):
        handles.append(Line2D([], [], marker="*", linestyle="", markersize=13, markerfacecolor="white",
                              markeredgecolor="black", label="winner"))
    baseline = baseline_entries[-1].benchmark_score if baseline_entries else None
    best = _best_so_far(scored, baseline, offsets)
    if best:
        xs, ys = zip(*best)
        ax.step(xs, ys, where="post", color="black", linewidth=1.6, zorder=2)
        handles.append(Line2D([], [], color="black", linewidth=1.6, label="best so far"))
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", linewidth=1.2, zorder=1)
        handles.append(Line2D([], [], color="grey", linestyle="--", label=f"baseline ({baseline:g})"))
    unscored = len(candidates) - len(scored)
    title = f"Score trajectory: {goal}" if goal else "Score trajectory"
    if unscored:
        title += f"\n({unscored} candidate{'s' if unscored > 1 else ''} without a score not shown)"
    ax.set_title(title)
    ax.set_xlabel("iteration")
    if metric is None:
        ax.set_ylabel("benchmark score")
    else:
        better = {"maximize": "higher", "minimize": "lower"}[metric.direction]
        ax.set_ylabel(f"{metric.name} ({better} is better)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    values = [e.benchmark_score for e in scored] + ([baseline] if baseline is not None else [])
    if values and min(values) > 0 and max(values) / min(values) >= LOG_SCALE_RATIO:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if not scored and baseline is None:
        ax.text(0.5, 0.5, "no scored candidates yet", ha="center", va="center", transform=ax.transAxes)
    if handles:
        fig.legend(handles=handles, loc="outside right upper", title="approach family", frameon=False)
    return fig


def _best_so_far(scored: list[RawDataEntry], baseline: float | None,
                 offsets: Mapping[str, float] | None = None) -> list[tuple[float, float]]:
    """Steps through the winners' scores, from the baseline at iteration 0 to the last iteration;
    each step rises where its winner's marker is drawn (``offsets`` by family)."""
    points: list[tuple[float, float]] = []
    if baseline is not None:
        points.append((0, baseline))
    for entry in sorted((e for e in scored if e.is_winner), key=lambda e: e.iteration):
        points.append((entry.iteration + (offsets or {}).get(entry.approach_family, 0.0), entry.benchmark_score))
    if points and scored:
        last = max(e.iteration for e in scored)
        if last > points[-1][0]:
            points.append((last, points[-1][1]))
    return points


# --- scores over cycles ----------------------------------------------------------------------


def plot_scores(items: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Per agent and rubric: the mean final score per cycle, each item's score, the threshold, and the
    spread (lowest to highest item score or judge sample) when a cycle has several values."""
    written: list[Path] = []
    if items.empty:
        return written
    for (agent, rubric), group in items.groupby(["agent_name", "rubric_name"], sort=True):
        written += _save(_score_figure(group, agent, rubric), Path(out_dir), f"score-{slug(agent)}-{slug(rubric)}")
    return written


def _score_figure(group: pd.DataFrame, agent: str, rubric: str) -> Figure:
    """The mean final score per cycle, each item's (spread sideways, so equal scores do not hide each other), the
    mean of first attempts where revisions changed it, the threshold; an item with no score sits on the floor,
    marked and counted, and a figure with no score at all says why."""
    cycles = sorted(group["cycle_id"].unique())
    fig = _figure(max(7.0, min(14.0, 4 + 0.6 * len(cycles))), 4.8)
    ax = fig.add_subplot()
    means, firsts, lows, highs, thresholds = [], [], [], [], []
    several = revised = False
    outcomes: set[bool] = set()
    unscored: Counter[str] = Counter()
    for x, cycle in enumerate(cycles):
        rows = group[group["cycle_id"] == cycle]
        known = rows[rows["overall_score"].notna()]  # NaN: the verdict is not known, or the checks decided it
        scores = [float(s) for s in known["overall_score"]]
        values = list(scores)
        for samples in rows["samples"]:
            values += [float(s) for s in samples or [] if s is not None]
        several |= len(values) > 1
        means.append(sum(scores) / len(scores) if scores else math.nan)
        first = [float(f) for f in known.get("first_score", known["overall_score"]) if f == f]
        firsts.append(sum(first) / len(first) if first else math.nan)
        revised |= bool(first) and abs(firsts[-1] - means[-1]) > 1e-9
        lows.append(min(values) if values else math.nan)
        highs.append(max(values) if values else math.nan)
        thresholds.append(float(rows["threshold"].mean()))
        passed = known["passed"].tolist()
        outcomes.update(passed)
        ax.scatter(_spread(x, len(scores)), scores, s=30, zorder=5, alpha=0.75, edgecolors="white", linewidths=0.5,
                   color=[PASS_COLOUR if p else FAIL_COLOUR for p in passed])
        missing = rows[rows["overall_score"].isna()]
        if len(missing):
            failed = [p == 0.0 for p in missing["passed"]]
            ax.scatter(_spread(x, len(missing)), [0.0] * len(missing), s=36, marker="x", zorder=5, clip_on=False,
                       color=[FAIL_COLOUR if f else "#7f7f7f" for f in failed])
            ax.annotate(f"{len(missing)} no score", (x, 0.0), xytext=(0, 7), textcoords="offset points",
                        ha="center", fontsize=8, color="#555555")
            unscored.update(why_no_score(o) for o in missing["outcome"])
    xs = list(range(len(cycles)))
    handles: list = []
    if several:
        ax.fill_between(xs, lows, highs, color="#1f77b4", alpha=0.15, linewidth=0, zorder=1)
        handles.append(Patch(color="#1f77b4", alpha=0.15, label="spread (items, samples)"))
    ax.plot(xs, means, color="#1f77b4", marker="o", markersize=4, linewidth=2, zorder=4)
    if any(m == m for m in means):
        handles.append(Line2D([], [], color="#1f77b4", marker="o", markersize=4, linewidth=2, label="mean score"))
    if revised:
        ax.plot(xs, firsts, color="#7f7f7f", marker="o", markersize=3, linewidth=1.2, linestyle=":", zorder=3)
        handles.append(Line2D([], [], color="#7f7f7f", marker="o", markersize=3, linestyle=":",
                              label="mean of first attempts"))
    edges = [x - 0.5 for x in xs] + [xs[-1] + 0.5]
    ax.stairs(thresholds, edges, baseline=None, color=THRESHOLD_COLOUR, linestyle="--", linewidth=1.3, zorder=2)
    handles.append(Line2D([], [], color=THRESHOLD_COLOUR, linestyle="--", label="threshold"))
    for outcome, colour, label in ((True, PASS_COLOUR, "item passed"), (False, FAIL_COLOUR, "item failed")):
        if outcome in outcomes:
            handles.append(Line2D([], [], marker="o", linestyle="", color=colour, alpha=0.75, label=label))
    if unscored:
        handles.append(Line2D([], [], marker="x", linestyle="", color="#555555", label="no score (on the floor)"))
    if not any(m == m for m in means):  # nothing to draw a line through: say why, not an empty frame
        why = "; ".join(f"{n} {reason}" for reason, n in unscored.most_common()) or "no item"
        ax.text(0.5, 0.55, f"no item was scored\n{why}", transform=ax.transAxes, ha="center", va="center",
                fontsize=10, color="#555555", wrap=True)
    _cycle_axis(ax, cycles)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("overall score")
    ax.set_title(f"{agent} · {rubric}: overall score by cycle")
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig


def _spread(x: int, count: int, width: float = 0.3) -> list[float]:
    """``count`` positions around ``x``, evenly across ``width``: points of one cycle side by side."""
    if count <= 1:
        return [float(x)] * count
    return [x - width / 2 + width * i / (count - 1) for i in range(count)]


# --- dimensions over cycles ------------------------------------------------------------------


def plot_dimensions(items: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Per rubric: each dimension's mean score per cycle; the legend lists the lowest dimension first."""
    written: list[Path] = []
    dims = dimensions_frame(items)
    if dims.empty:
        return written
    for rubric, group in dims.groupby("rubric_name", sort=True):
        written += _save(_dimension_figure(group, rubric), Path(out_dir), f"dimensions-{slug(rubric)}")
        written += _save(_heatmap_figure(group, rubric), Path(out_dir), f"heatmap-{slug(rubric)}")
    return written


def _dimension_order(means: pd.DataFrame) -> list[str]:
    """The dimensions, lowest latest mean first (a dimension with no latest score last): where to look first."""
    latest = means.ffill().iloc[-1] if len(means) else pd.Series(dtype=float)
    return sorted(means.columns, key=lambda d: (latest[d] if d in latest and latest[d] == latest[d] else math.inf,
                                                d))


def _heatmap_figure(group: pd.DataFrame, rubric: str) -> Figure:
    """Dimension x cycle, each cell the mean score written in it: which dimension moved when, at a glance. The
    lowest dimension is the top row; a cell with no score is left blank and says so."""
    cycles = sorted(group["cycle_id"].unique())
    means = group.pivot_table(index="cycle_id", columns="dimension", values="score", aggfunc="mean").reindex(cycles)
    order = _dimension_order(means)
    grid = means[order].T.to_numpy(dtype=float) if order else np.full((1, len(cycles)), np.nan)
    fig = _figure(max(7.0, min(16.0, 3.5 + 0.75 * len(cycles))), max(4.2, 1.6 + 0.45 * len(order)))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=HEATMAP_COLOURS, vmin=0.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
    if len(cycles) * len(order) <= MAX_HEATMAP_NUMBERS:  # numbers in the cells while they stay legible
        for (row, column), value in np.ndenumerate(grid):
            ax.text(column, row, "none" if value != value else f"{value:.2f}", ha="center", va="center",
                    fontsize=8, color="#555555" if value != value else ("white" if value < 0.3 else "black"))
    _cycle_axis(ax, cycles)
    ax.set_yticks(range(len(order)), order)
    ax.set_ylabel("dimension (lowest latest first)")
    ax.set_title(f"{rubric}: mean dimension score by cycle")
    fig.colorbar(image, ax=ax, label="mean score", fraction=0.05, pad=0.02)
    if np.isnan(grid).any():
        fig.legend(handles=[Patch(facecolor="white", edgecolor="#999999", label="blank: no score")],
                   loc="outside right lower", frameon=False, fontsize=8)
    return fig


def _dimension_figure(group: pd.DataFrame, rubric: str) -> Figure:
    cycles = sorted(group["cycle_id"].unique())
    means = group.pivot_table(index="cycle_id", columns="dimension", values="score", aggfunc="mean").reindex(cycles)
    weights = group.groupby("dimension")["weight"].last()
    latest = means.ffill().iloc[-1] if len(means) else pd.Series(dtype=float)
    order = _dimension_order(means)
    fig = _figure(max(7.5, min(14.0, 4.5 + 0.6 * len(cycles))), 4.8)
    ax = fig.add_subplot()
    colours = {dim: PALETTE[i % len(PALETTE)] for i, dim in enumerate(order)}
    xs = list(range(len(cycles)))
    markers = "osD^vP*Xh<>"
    for index, dim in enumerate(order):
        weight = weights.get(dim)
        last = latest.get(dim)
        label = dim
        if weight == weight and weight is not None:
            label += f" (weight {weight:.2f})"
        if last == last and last is not None:
            label += f": {last:.2f}"
        ax.plot(xs, means[dim].tolist(), marker=markers[index % len(markers)], linewidth=1.8, markersize=6,
                color=colours[dim], label=label)
    _cycle_axis(ax, cycles)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean dimension score")
    ax.set_title(f"{rubric}: mean dimension score by cycle")
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(loc="outside right upper", title="dimension (latest), lowest first", frameon=False)
    return fig


# --- comparisons: variants and pairwise, the newest cycle's ------------------------------------


MEAN_COLOUR = "#1f77b4"


def plot_comparisons(results: Sequence[ReportItem], out_dir: Path, cycle: str) -> list[Path]:
    """``variants-{agent}`` (its variants' pass rates and mean scores with their 95% intervals, ranked as the
    reports rank them) and ``pairwise-{comparison}`` (each pair's win rate with its interval) of one cycle's
    items; nothing when it has neither."""
    written: list[Path] = []
    for grid in report_grids(results):
        written += _save(_variants_figure(grid, cycle), Path(out_dir), f"variants-{slug(grid.agent)}")
    for table in report_pairwise(results):
        written += _save(_pairwise_figure(table, cycle), Path(out_dir), f"pairwise-{slug(table.comparison)}")
    return written


def _variants_figure(grid: VariantGrid, cycle: str) -> Figure:
    """One row per variant, the best on top: its mean score and its pass rate, each with its interval."""
    names = list(grid.variants)
    fig = _figure(9.0, max(3.2, 1.4 + 0.55 * len(names)))
    ax = fig.add_subplot()
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        column = grid.variants[name]
        rate, mean = column.pass_rate, column.mean
        if rate is not None:
            ax.errorbar(rate.estimate, y + 0.12, xerr=[[rate.estimate - rate.low], [rate.high - rate.estimate]],
                        fmt="s", color=PASS_COLOUR if rate.estimate >= 0.5 else FAIL_COLOUR, capsize=3)
        if mean is not None:
            ax.errorbar(mean.estimate, y - 0.12, xerr=[[mean.estimate - mean.low], [mean.high - mean.estimate]],
                        fmt="o", color=MEAN_COLOUR, capsize=3)
            ax.annotate(f"{mean.estimate:.3f}", (mean.high, y - 0.12), xytext=(6, -3), textcoords="offset points",
                        fontsize=8, color=MEAN_COLOUR)
        else:
            ax.annotate("no score", (0.0, y - 0.12), xytext=(4, -3), textcoords="offset points", fontsize=8,
                        color="#555555")
    ax.set_yticks(range(len(names)), list(reversed(names)))
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("pass rate and mean score, with 95% intervals")
    ax.set_title(f"{grid.agent}: {len(names)} variants x {len(grid.cases)} cases ({cycle})")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(handles=[Line2D([], [], marker="s", linestyle="", color=PASS_COLOUR, label="pass rate"),
                        Line2D([], [], marker="o", linestyle="", color=MEAN_COLOUR, label="mean score")],
               loc="outside right upper", frameon=False)
    return fig


def _pairwise_figure(table: PairwiseTable, cycle: str) -> Figure:
    """One row per pair: the first side's win rate (a tie half a win) with its interval, against even odds."""
    pairs = list(table.pairs.items())
    fig = _figure(9.0, max(3.0, 1.4 + 0.5 * len(pairs)))
    ax = fig.add_subplot()
    for row, (pair, tally) in enumerate(pairs):
        y = len(pairs) - 1 - row
        rate = tally.win_rate
        if rate is None:
            ax.annotate("not judged", (0.5, y), ha="center", fontsize=8, color="#555555")
            continue
        colour = PASS_COLOUR if rate.low > 0.5 else FAIL_COLOUR if rate.high < 0.5 else "#7f7f7f"
        ax.errorbar(rate.estimate, y, xerr=[[rate.estimate - rate.low], [rate.high - rate.estimate]], fmt="o",
                    color=colour, capsize=3)
        ax.annotate(f"{tally.a_wins}-{tally.b_wins}, {tally.ties} ties", (rate.high, y), xytext=(6, -3),
                    textcoords="offset points", fontsize=8, color="#555555")
    ax.axvline(0.5, color=THRESHOLD_COLOUR, linestyle="--", linewidth=1.2)
    ax.set_yticks(range(len(pairs)), [pair for pair, _ in reversed(pairs)])
    ax.set_ylim(-0.7, len(pairs) - 0.3)
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("the first side's win rate, with its 95% interval (a tie is half a win)")
    ax.set_title(f"{table.comparison}: pairwise over {len(table.cases)} cases ({cycle})")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(handles=[Line2D([], [], color=THRESHOLD_COLOUR, linestyle="--", label="even odds"),
                        Line2D([], [], marker="o", linestyle="", color=PASS_COLOUR, label="first side better"),
                        Line2D([], [], marker="o", linestyle="", color=FAIL_COLOUR, label="second side better"),
                        Line2D([], [], marker="o", linestyle="", color="#7f7f7f", label="no clear winner")],
               loc="outside lower center", ncols=4, frameon=False)
    return fig


# --- all of them -----------------------------------------------------------------------------


def write_plots(work_dir: Path, tracking_dir: Path, *, raw_data: Path | None = None,
                cycles: list[str] | None = None) -> list[Path]:
    """Every plot the records and ``raw_data.json`` allow, into ``tracking_dir/plots``; returns the files."""
    out_dir = Path(tracking_dir) / PLOTS_DIR
    items = items_frame(attempts_frame(Path(work_dir), cycles=cycles))
    # a pairwise comparison's "score" is a preference, not a quality: its own picture draws it
    scored = items[items["rubric_name"] != PAIRWISE_RUBRIC]
    written = plot_scores(scored, out_dir) + plot_dimensions(scored, out_dir)
    newest = sorted(items["cycle_id"].unique())[-1:] if len(items) else []
    for cycle in newest:  # what the newest cycle compared: the reports' tables, drawn
        written += plot_comparisons(results_from_records(work_dir, [cycle]), out_dir, cycle)
    raw = Path(raw_data) if raw_data is not None else Path(tracking_dir) / "raw_data.json"
    if raw.exists():
        written += plot_trajectories(raw, out_dir)
    return written
