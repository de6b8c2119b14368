"""The pytest side of tracking, as a user runs it: compare gate, options, JUnit, Markdown, HTML, --plot, xdist.

Harness items are stood in for by a conftest whose items put the documented ``harness_*`` user_properties
on their reports (docs/design.md), exactly what the case items do; baselines are written with RecordStore.
"""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET

import pytest
from test_tracking_support import record_item

from harness.records import RecordStore

PLUGIN = ["-p", "no:rubric", "-p", "harness.apps.tracking.pytest_plugin", "-p", "no:cacheprovider"]

CONFTEST = '''
import json
import pytest


def pytest_collect_file(file_path, parent):
    if file_path.name.endswith(".scores.json"):
        return ScoreFile.from_parent(parent, path=file_path)


class ScoreFile(pytest.File):
    def collect(self):
        for name, spec in sorted(json.loads(self.path.read_text()).items()):
            yield ScoreItem.from_parent(self, name=name, spec=spec)


class ScoreItem(pytest.Item):
    def __init__(self, *, spec, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec

    def runtest(self):
        s = self.spec
        weights = {"accuracy": 0.5, "clarity": 0.3, "sources": 0.2}
        dims = {d: {"score": v, "weight": weights[d], "reason": f"{d} scored {v}"} for d, v in s["dims"].items()}
        outcome = "passed" if s["score"] >= 0.8 else "failed"
        self.user_properties += [
            ("harness_agent", "writer"), ("harness_case", self.name), ("harness_rubric", "summary-quality"),
            ("harness_outcome", outcome), ("harness_score", s["score"]), ("harness_threshold", 0.8),
            ("harness_attempts", s.get("attempts", 1)), ("harness_input_tokens", 100),
            ("harness_output_tokens", 50), ("harness_cache_write_tokens", 0), ("harness_cache_read_tokens", 0),
            ("harness_cost_usd", 0.0123), ("harness_cycle", s.get("cycle", "2026-02-01-001")),
            ("harness_artifact", "WORK/runs/x/attempt-1.md"), ("harness_dimensions", json.dumps(dims)),
        ]
        if outcome != "passed":
            raise AssertionError(f"score {s['score']} below threshold 0.8")

    def reportinfo(self):
        return self.path, 0, self.name
'''

BASE_A = {"accuracy": 0.9, "clarity": 0.9, "sources": 0.8}  # overall 0.88
BASE_B = {"accuracy": 0.95, "clarity": 0.9, "sources": 0.9}  # overall 0.925


def scores(case_a: float, dims_a: dict, case_b: float = 0.93, dims_b: dict | None = None, **extra) -> str:
    return json.dumps({"case-a": {"score": case_a, "dims": dims_a, **extra},
                       "case-b": {"score": case_b, "dims": dims_b or BASE_B, **extra}})


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs must not write into the step summary of the CI running this suite."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    return pytester


def baseline(project: pytest.Pytester, day: int = 30) -> str:
    store = RecordStore(project.path / "WORK")
    cycle = store.allocate_cycle(dt.date(2026, 1, day))
    record_item(store, cycle, "writer", "case-a", [BASE_A], nodeid="writer.scores.json::case-a")
    record_item(store, cycle, "writer", "case-b", [BASE_B], nodeid="writer.scores.json::case-b")
    store.close()
    return cycle


def test_compare_gate_fails_an_item_that_dropped_beyond_the_margin(project: pytest.Pytester) -> None:
    cycle = baseline(project)
    project.path.joinpath("writer.scores.json").write_text(
        scores(0.82, {"accuracy": 0.84, "clarity": 0.8, "sources": 0.8}))  # passes the threshold, dropped 0.06
    result = project.runpytest(*PLUGIN, "--harness-compare", "latest")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        f"*harness: score dropped beyond the margin against cycle {cycle} (overall > 0.05, dimension > 0.1):",
        f"*= harness compare against {cycle} (overall > 0.05, dimension > 0.1) =*",
        "FAILED writer.scores.json::case-a",
        "    overall 0.880 -> 0.820 (-0.060)",
        "1 of 2 compared items dropped beyond the margin",
    ])


def test_within_margin_passes(project: pytest.Pytester) -> None:
    baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.85, BASE_A))
    result = project.runpytest(*PLUGIN, "--harness-compare", "latest")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["2 items compared; none dropped beyond the margin"])


def test_one_dimension_dropping_fails_the_item(project: pytest.Pytester) -> None:
    baseline(project)
    project.path.joinpath("writer.scores.json").write_text(
        scores(0.87, {"accuracy": 0.95, "clarity": 0.9, "sources": 0.65}))  # overall held, sources -0.15
    result = project.runpytest(*PLUGIN, "--harness-compare", "latest")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["    overall 0.880 -> 0.870 (-0.010) (within margin)",
                                 "    dimension sources 0.800 -> 0.650 (-0.150)"])


def test_compare_fail_margins_imply_latest(project: pytest.Pytester) -> None:
    cycle = baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.86, BASE_A))
    result = project.runpytest(*PLUGIN, "--harness-compare-fail", "overall:0.01")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*harness compare against {cycle} (overall > 0.01)*"])


def test_named_baseline_and_ini_twins(project: pytest.Pytester) -> None:
    first = baseline(project, day=29)
    store = RecordStore(project.path / "WORK")
    later = store.allocate_cycle(dt.date(2026, 1, 30))
    record_item(store, later, "writer", "case-a", [{"accuracy": 0.5, "clarity": 0.5, "sources": 0.5}],
                nodeid="writer.scores.json::case-a")
    store.close()
    project.path.joinpath("writer.scores.json").write_text(scores(0.82, BASE_A))
    project.makeini(f"[pytest]\nharness_compare = {first}\nharness_compare_fail = overall:5%\n")
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)  # against the named cycle, not the latest
    result.stdout.fnmatch_lines([f"*harness compare against {first} (overall > 5%)*"])


def test_no_earlier_cycle_compares_nothing(project: pytest.Pytester) -> None:
    project.path.joinpath("writer.scores.json").write_text(scores(0.82, BASE_A))
    result = project.runpytest(*PLUGIN, "--harness-compare", "latest")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["no earlier cycle in * to compare with; nothing was compared"])


@pytest.mark.parametrize(("args", "message"), [
    (["--harness-compare", "yesterday"],
     "*argument --harness-compare: 'yesterday' is not 'latest' or a cycle id such as 2026-01-31-001"),
    (["--harness-compare-fail", "overall:abc"],
     "*argument --harness-compare-fail: 'abc' in 'overall:abc' is not a number*"),
    (["--harness-compare", "2025-01-01-001"], "*--harness-compare 2025-01-01-001: cycle 2025-01-01-001 has no records*"),
])
def test_bad_values_are_usage_errors(project: pytest.Pytester, args: list[str], message: str) -> None:
    baseline(project)
    result = project.runpytest(*PLUGIN, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_ini_value_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nharness_compare_fail = overall=0.1\n")
    result = project.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini harness_compare_fail = 'overall=0.1': *not KEY:MARGIN*"])


def test_junit_xml_carries_each_property_once(project: pytest.Pytester) -> None:
    baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.75, BASE_A))
    project.runpytest(*PLUGIN, "--junitxml=junit.xml", "--harness-compare", "latest")
    cases = {c.get("name"): c for c in ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    names = [p.get("name") for p in cases["case-a"].iter("property")]
    assert len(names) == len(set(names)) and all(name.startswith("harness_") for name in names)
    props = {p.get("name"): p.get("value") for p in cases["case-a"].iter("property")}
    assert props["harness_threshold"] == "0.8" and props["harness_attempts"] == "1"
    assert props["harness_cost_usd"] == "0.0123"
    assert props["harness_score"] == "0.75" and props["harness_baseline_score"] == "0.88"
    assert json.loads(props["harness_regression"])["before"] == 0.88
    assert cases["case-a"].find("failure") is not None


def test_markdown_summary_and_github_step_summary(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    step = project.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    project.path.joinpath("writer.scores.json").write_text(
        scores(0.95, BASE_A, 0.6, {"accuracy": 0.4, "clarity": 0.9, "sources": 0.7}))
    result = project.runpytest(*PLUGIN, "--harness-markdown", "out/summary.md")
    result.assert_outcomes(passed=1, failed=1)
    text = (project.path / "out" / "summary.md").read_text()
    assert step.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert rows[0].startswith("| ❌ failed | `writer::case-b` | 0.60 | 0.80 | 1 | $0.0123 | **accuracy** 0.40")
    assert rows[1].startswith("| ✅ passed | `writer::case-a`")
    result.stdout.fnmatch_lines(["harness: Markdown summary: */out/summary.md", "harness: GitHub step summary: *"])


def test_html_report_of_the_session(project: pytest.Pytester) -> None:
    store = RecordStore(project.path / "WORK")  # the engine's records of this run's cycle
    cycle = store.allocate_cycle(dt.date(2026, 2, 1))
    record_item(store, cycle, "writer", "case-b", [{"accuracy": 0.3, "clarity": 0.9, "sources": 0.7},
                                                   {"accuracy": 0.4, "clarity": 0.9, "sources": 0.7}],
                nodeid="writer.scores.json::case-b")
    store.close()
    project.path.joinpath("writer.scores.json").write_text(
        scores(0.95, BASE_A, 0.6, {"accuracy": 0.4, "clarity": 0.9, "sources": 0.7}, cycle=cycle))
    result = project.runpytest(*PLUGIN, "--harness-html", "report.html")
    result.assert_outcomes(passed=1, failed=1)
    page = (project.path / "report.html").read_text()
    failing = page[page.index('data-nodeid="writer.scores.json::case-b"'):]
    failing = failing[: failing.index("</section>")]
    assert failing.count('class="attempt"') == 2  # from the records
    assert "accuracy reason: scored 0.4 on attempt 2" in failing
    assert 'data-nodeid="writer.scores.json::case-a"' in page  # no records: what its report carried
    assert "accuracy scored 0.9" in page
    result.stdout.fnmatch_lines(["harness: HTML report: */report.html"])


def test_a_broken_raw_data_file_is_reported_not_raised(project: pytest.Pytester) -> None:
    baseline(project)
    (project.path / "tracking").mkdir()
    (project.path / "tracking" / "raw_data.json").write_text('[{"iteration": 1,\n')
    project.path.joinpath("writer.scores.json").write_text(scores(0.9, BASE_A))
    result = project.runpytest(*PLUGIN, "--plot", "--harness-markdown", "summary.md")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["harness: Markdown summary: */summary.md",
                                 "harness: plots not written: HarnessConfigError: */raw_data.json:2: malformed JSON*"])
    assert (project.path / "tracking" / "raw_data.json").read_text() == '[{"iteration": 1,\n'


def test_plot_option_writes_plots(project: pytest.Pytester) -> None:
    baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.9, BASE_A))
    result = project.runpytest(*PLUGIN, "--plot")
    result.assert_outcomes(passed=2)
    names = sorted(p.name for p in (project.path / "tracking" / "plots").iterdir())
    assert names == ["dimensions-summary-quality.png", "dimensions-summary-quality.svg",
                     "heatmap-summary-quality.png", "heatmap-summary-quality.svg",
                     "score-writer-summary-quality.png", "score-writer-summary-quality.svg"]
    result.stdout.fnmatch_lines(["harness: 6 plots: */tracking/plots"])


def test_inert_without_our_items(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step.md"))
    pytester.makepyfile("def test_plain(record_property):\n    record_property('x', 1)\n")
    before = sorted(p.name for p in pytester.path.iterdir())
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    assert [line for line in result.outlines if "harness" in line and "rootdir" not in line
            and "test_inert" not in line] == []
    assert sorted(p.name for p in pytester.path.iterdir()) == before


def test_registered_from_another_plugins_addoption(project: pytest.Pytester) -> None:
    """How the main plugin loads this one: import_plugin inside its pytest_addoption."""
    project.makeconftest(CONFTEST + '''

def pytest_addoption(parser, pluginmanager):
    pluginmanager.import_plugin("harness.apps.tracking.pytest_plugin")
''')
    baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.7, BASE_A))
    result = project.runpytest("-p", "no:rubric", "-p", "no:cacheprovider", "--harness-compare", "latest")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED writer.scores.json::case-a"])


def test_compare_gate_under_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    cycle = baseline(project)
    project.path.joinpath("writer.scores.json").write_text(scores(0.82, BASE_A))
    result = project.runpytest(*PLUGIN, "-n", "2", "--harness-compare", "latest", "--junitxml=junit.xml",
                               "--harness-markdown", "summary.md")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*= harness compare against {cycle} *", "FAILED writer.scores.json::case-a",
                                 "    overall 0.880 -> 0.820 (-0.060)"])
    props = {p.get("name"): p.get("value") for p in ET.parse(project.path / "junit.xml").getroot().iter("property")}
    assert "harness_score" in props and "harness_baseline_score" in props
    assert "| ❌ regressed | `writer::case-a` | 0.82 |" in (project.path / "summary.md").read_text()
