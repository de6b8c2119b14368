"""pytest side of tracking: ``--plot``, the compare gate, JUnit properties, Markdown and HTML reports.

Registered by the main plugin (``config.pluginmanager.import_plugin("harness.apps.tracking.pytest_plugin")``)
or alone with ``-p harness.apps.tracking.pytest_plugin``. Results are read from each call report's
``user_properties`` (docs/design.md), which pytest-xdist replays on the controller; only the
controller writes files. A session without harness items and without our options does nothing.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.apps.tracking.compare import (
    DEFAULT_MARGINS,
    Baseline,
    BaselineNotFound,
    Margins,
    Regression,
    compare_item,
    load_baseline,
    parse_baseline,
    parse_margins,
)
from harness.apps.tracking.results import ReportItem, from_user_properties
from harness.evaluation.items.result import ItemResult
from harness.face.activation import add_option, enabled
from harness.face.report_text import verdict_word

TRACKING_KEY = pytest.StashKey["TrackingState"]()


@dataclass
class TrackingState:
    work_dir: Path
    tracking_dir: Path
    plot: bool = False
    html: Path | None = None
    markdown: Path | None = None
    compare: str | None = None
    margins: Margins | None = None
    baseline: Baseline | None = None
    results: list[ReportItem] = field(default_factory=list)
    written: list[tuple[str, Path]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# --- options ---------------------------------------------------------------------------------


def _check_baseline(text: str) -> str:
    return parse_baseline(text)  # a str: option values stay serialisable for pytest-xdist


def _check_margins(text: str) -> str:
    parse_margins(text)
    return text.strip()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "pytest-rubric: evaluate agents against rubrics")
    add_option(group, "--plot", dest="harness_plot", action="store_true", default=None,
                    help="write score, dimension and trajectory plots (PNG, SVG) to tracking/plots at the end "
                         "(default: ini harness_plot, else off)")
    add_option(group, "--harness-compare", dest="harness_compare", metavar="CYCLE|latest", type=_check_baseline,
                    default=None,
                    help="compare each item's score with its final score in cycle CYCLE, or the latest earlier "
                         "cycle; items that dropped beyond --harness-compare-fail fail (default: ini "
                         "harness_compare, else no comparison)")
    add_option(group, "--harness-compare-fail", dest="harness_compare_fail", metavar="overall:M,dimension:M",
                    type=_check_margins, default=None,
                    help="largest allowed drop against the baseline, absolute (0.05) or relative (5%%); implies "
                         f"--harness-compare latest (default: ini harness_compare_fail, else {DEFAULT_MARGINS})")
    add_option(group, "--harness-compare-required", dest="harness_compare_required", action="store_true",
               default=None,
               help="when the compare gate finds no baseline (a fresh CI checkout without the previous run's "
                    "harness.db), stop with a usage error instead of passing with 'nothing was compared'; implies "
                    "--harness-compare latest (default: ini harness_compare_required, else off)")
    add_option(group, "--harness-html", dest="harness_html", metavar="PATH", default=None,
                    help="write a self-contained HTML report of the run to PATH (default: ini harness_html, "
                         "else none)")
    add_option(group, "--harness-markdown", dest="harness_markdown", metavar="PATH", default=None,
                    help="write a Markdown summary to PATH; it is also appended to $GITHUB_STEP_SUMMARY when "
                         "that is set (default: ini harness_markdown, else none)")
    parser.addini("harness_plot", "write plots at the end of the session (default: false)", type="bool",
                  default=False)
    parser.addini("harness_compare", "baseline cycle id or latest for the compare gate (default: none)",
                  default="")
    parser.addini("harness_compare_fail", f"compare margins (default: {DEFAULT_MARGINS})", default="")
    parser.addini("harness_compare_required", "fail when the compare gate finds no baseline (default: false)",
                  type="bool", default=False)
    parser.addini("harness_html", "HTML report path, relative to the rootdir (default: none)", default="")
    parser.addini("harness_markdown", "Markdown summary path, relative to the rootdir (default: none)", default="")
    parser.addini("harness_tracking_dir", "folder of raw_data.json and plots/ (default: tracking)",
                  default="tracking")


def _ini(config: pytest.Config, name: str, default: Any = None) -> Any:
    try:
        return config.getini(name)
    except ValueError:  # not registered: the main plugin is not loaded
        return default


def _ini_value(config: pytest.Config, name: str, check: Any) -> str | None:
    raw = str(_ini(config, name, "") or "").strip()
    if not raw:
        return None
    try:
        return check(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini {name} = {raw!r}: {exc}") from None


def work_dir(config: pytest.Config) -> Path:
    """The harness work folder: --harness-work-dir, ini harness_work_dir, else WORK under the rootdir."""
    value = getattr(config.option, "harness_work_dir", None) or _ini(config, "harness_work_dir") or "WORK"
    return (Path(config.rootpath) / value).resolve()


def _path_option(config: pytest.Config, dest: str, ini: str) -> Path | None:
    given = getattr(config.option, dest, None)
    if given:
        return Path(os.path.expanduser(given)).resolve()  # like --junitxml: relative to the invocation folder
    from_ini = str(_ini(config, ini, "") or "").strip()
    return (Path(config.rootpath) / from_ini).resolve() if from_ini else None


def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return  # the main plugin refuses our options there, in one line
    state = TrackingState(
        work_dir=work_dir(config),
        tracking_dir=(Path(config.rootpath) / (_ini(config, "harness_tracking_dir") or "tracking")).resolve(),
        plot=bool(config.getoption("harness_plot") or _ini(config, "harness_plot", False)),
        html=_path_option(config, "harness_html", "harness_html"),
        markdown=_path_option(config, "harness_markdown", "harness_markdown"),
    )
    compare = config.getoption("harness_compare") or _ini_value(config, "harness_compare", parse_baseline)
    margins = config.getoption("harness_compare_fail") or _ini_value(config, "harness_compare_fail", _check_margins)
    required, named = _compare_required(config)
    if (margins or required) and not compare:
        compare = "latest"
    if compare:
        state.compare = compare
        state.margins = parse_margins(margins or DEFAULT_MARGINS)
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            wire = workerinput.get("harness_baseline")
            state.baseline = Baseline.from_wire(wire) if wire else None
        else:
            try:
                state.baseline = load_baseline(state.work_dir, compare)
            except BaselineNotFound as exc:
                raise pytest.UsageError(f"--harness-compare {compare}: {exc}") from None
            if state.baseline is None and required:
                raise pytest.UsageError(
                    f"--harness-compare {compare}: no earlier cycle with records in {state.work_dir} to compare "
                    f"with, and {named} asks for a comparison (fix: restore the previous run's harness.db into "
                    f"{state.work_dir} before the run, docs/ci.md; or leave {named} out of the first run)")
    config.stash[TRACKING_KEY] = state
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ResultCollector(state), "harness-tracking-results")


def _compare_required(config: pytest.Config) -> tuple[bool, str]:
    """--harness-compare-required (ini harness_compare_required), and the name to say it by."""
    if config.getoption("harness_compare_required", None):
        return True, "--harness-compare-required"
    try:
        return bool(config.getini("harness_compare_required")), "ini harness_compare_required"
    except (ValueError, pytest.UsageError) as exc:
        raise pytest.UsageError(f"ini harness_compare_required: {exc} (fix: write true or false)") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: workers compare against the baseline the controller chose."""
    state = node.config.stash.get(TRACKING_KEY, None)
    if state is not None and state.baseline is not None:
        node.workerinput["harness_baseline"] = state.baseline.to_wire()


# --- per item --------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    state = item.config.stash.get(TRACKING_KEY, None)
    if report.when != "call" or state is None or state.baseline is None:
        return report  # no baseline to compare with: the item's result is not even read
    result = ItemResult.read(item.user_properties)
    if result is None:
        return report
    found = state.baseline.find(report.nodeid, result.agent, result.case)
    regression = _regression(state, report.nodeid, result)
    added = result.gate_properties(None if regression is None else regression.to_json(),
                                   None if found is None else found.score)
    if regression is not None and report.passed:
        report.outcome = "failed"
        report.longrepr = _regression_text(regression, state)
    item.user_properties.extend(added)
    report.user_properties.extend(added)
    return report


def _regression(state: TrackingState, nodeid: str, result: ItemResult) -> Regression | None:
    if state.baseline is None or state.margins is None:
        return None
    base = state.baseline.find(nodeid, result.agent, result.case)
    if base is None:
        return None
    dimensions = {name: (dim.get("score") if isinstance(dim, dict) else dim) for name, dim in result.dimensions.items()}
    return compare_item(nodeid, base, result.score, dimensions, state.margins)


def _regression_text(regression: Regression, state: TrackingState) -> str:
    lines = [f"harness: score dropped beyond the margin against cycle {state.baseline.cycle_id} "
             f"({state.margins}):"]
    return "\n".join(lines + [f"  {line}" for line in regression.describe()])


class ResultCollector:
    """Registered per session: gathers each harness item's result from its call report."""

    def __init__(self, state: TrackingState):
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        result = from_user_properties(report.nodeid, report.user_properties, test_outcome=verdict_word(report))
        if result is not None:
            self.state.results.append(result)


# --- end of session --------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write what was asked for. A failure to write is reported in the summary, never as a traceback."""
    config = session.config
    state = config.stash.get(TRACKING_KEY, None)
    if state is None or hasattr(config, "workerinput"):
        return
    results = sorted(state.results, key=ReportItem.sort_key)
    baseline = state.baseline.cycle_id if state.baseline else None
    outputs = []
    if state.markdown or (results and os.environ.get("GITHUB_STEP_SUMMARY")):
        outputs.append(("Markdown summary", lambda: _write_markdown(state, results, baseline)))
    if state.html:
        outputs.append(("HTML report", lambda: _write_html(state, results, baseline)))
    if state.plot:
        outputs.append(("plots", lambda: _write_plots(state)))
    for what, write in outputs:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - a report must never turn the run into an internal error
            state.problems.append(f"{what} not written: {type(exc).__name__}: {exc}")


def _write_markdown(state: TrackingState, results: list[ReportItem], baseline: str | None) -> None:
    from harness.apps.tracking.markdown import append_step_summary, render_markdown, write_markdown

    text = render_markdown(results, baseline=baseline)
    if state.markdown:
        state.written.append(("Markdown summary", write_markdown(state.markdown, text)))
    if results:
        target = append_step_summary(text)
        if target is not None:
            state.written.append(("GitHub step summary", target))


def _write_html(state: TrackingState, results: list[ReportItem], baseline: str | None) -> None:
    from harness.apps.tracking.report import render_html, write_html
    from harness.apps.tracking.results import merge, results_from_records

    cycles = sorted({r.cycle for r in results if r.cycle})
    merged = merge(results_from_records(state.work_dir, cycles), results) if cycles else results
    page = render_html(state.work_dir, cycles, merged, baseline=baseline, tracking_dir=state.tracking_dir)
    state.written.append(("HTML report", write_html(state.html, page)))


def _write_plots(state: TrackingState) -> None:
    from harness.apps.tracking.plots import write_plots

    plots = write_plots(state.work_dir, state.tracking_dir)
    if plots:
        state.written.append((f"{len(plots)} plots", plots[0].parent))
    else:
        state.problems.append(f"--plot: nothing to plot yet (no records in {state.work_dir})")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    state = config.stash.get(TRACKING_KEY, None)
    if state is None:
        return
    if state.compare and state.results:
        _compare_summary(terminalreporter, state)
    for what, path in state.written:
        terminalreporter.write_line(f"harness: {what}: {path}")
    for problem in state.problems:
        terminalreporter.write_line(f"harness: {problem}", yellow=True, bold=True)


def _compare_summary(tr: Any, state: TrackingState) -> None:
    if state.baseline is None:
        tr.write_sep("=", "harness compare")
        tr.write_line(f"no earlier cycle in {state.work_dir} to compare with; nothing was compared")
        return
    regressed = [r for r in state.results if r.regression is not None]
    compared = sum(state.baseline.find(r.nodeid, r.agent, r.case) is not None for r in state.results)
    tr.write_sep("=", f"harness compare against {state.baseline.cycle_id} ({state.margins})")
    if not regressed:
        tr.write_line(f"{compared} item{'s' if compared != 1 else ''} compared; none dropped beyond the margin")
        return
    for result in sorted(regressed, key=lambda r: r.nodeid):
        failed = result.test_outcome == "failed"
        tr.write_line(f"{'FAILED' if failed else 'DROPPED'} {result.nodeid}", red=failed, yellow=not failed,
                      bold=True)
        for line in result.regression.describe():
            tr.write_line(f"    {line}")
    tr.write_line(f"{len(regressed)} of {compared} compared item{'s' if compared != 1 else ''} dropped beyond "
                  "the margin")
