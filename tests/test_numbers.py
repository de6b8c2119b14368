"""Numbers that cannot mislead: every mean says what it divides by and why the others have no score; a cost is a
number or "unknown", never $0.0000 for a model with no price. The same run's summary (a subprocess, as a user runs
it), history, Markdown and HTML report agree."""

from __future__ import annotations

import json
import re

import pytest

from conftest import Project, prompt_text
from harness.apps.cli import main
from harness.base.usage import shown_cost

# A check that must hold (min_score 1.0: a miss fails the item before the judge is asked) and a judged dimension.
RUBRIC = """\
metadata: {name: Gated, version: "1.0.0", agent: writer}
threshold: 0.8
dimensions:
  greeting:
    weight: 0.5
    description: "Says hello"
    min_score: 1.0
    check: {contains: {all: [hello]}}
  warmth:
    weight: 0.5
    description: "Is it warm?"
    scoring: {1.0: "warm", 0.0: "cold"}
"""

AGENTS = """\
agents:
  writer:
    rubric: gated
    producer: {python: "agentlib:produce"}
    evaluator: {prompt: prompts/judge.md, model: mock/score-0.8}
    max_attempts: 1
    escalate_on_fail: false
"""


def gated_project(project: Project, failing: int = 2, items: int = 20) -> None:
    project.rubric("gated", RUBRIC)
    project.write("suites/prompts/judge.md", prompt_text())
    project.write("agentlib.py", "def produce(request):\n    return request['inputs']['text']\n")
    project.agents(AGENTS)
    lines = ["agent: writer", "cases:"]
    lines += [f"  - {{id: c{i:02d}, inputs: {{text: '{'goodbye' if i < failing else 'hello'} number {i}'}}}}"
              for i in range(items)]
    project.cases("writer", "\n".join(lines) + "\n")


@pytest.mark.parametrize(("known", "complete", "shown"), [
    (0.0123, True, "$0.0123"), (0.0, True, "$0.0000"), (0.0, False, "unknown"), (0.0123, False, "$0.0123 + unknown")])
def test_a_cost_reads_as_a_number_or_unknown(known: float, complete: bool, shown: str) -> None:
    assert shown_cost(known, complete) == shown


def test_two_failed_items_out_of_twenty_read_the_same_everywhere(project: Project,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    gated_project(project)
    result = project.run("suites/", "--junitxml=junit.xml", subprocess=True)
    result.assert_outcomes(passed=18, failed=2)
    # the summary: the mean over the 18 that have a score, why the 2 have none, and a cost that is unknown
    (row,) = [re.split(r"\s{2,}", line.strip()) for line in result.outlines if line.startswith("gated ")]
    assert row[:5] == ["gated", "20", "18", "90% of 20", "0.900 (18/20)"] and row[-1] == "unknown"
    result.stdout.fnmatch_lines(["gated: mean score over 18 of 20 items; the others have none "
                                 "(2 the checks decided it before judging)",
                                 "mock/score-0.8 has no price*"])
    assert "$0.0000" not in result.stdout.str()
    junit = (project.root / "junit.xml").read_text()
    assert 'name="harness_cost_usd" value="unknown"' in junit and 'value="0.0"' not in junit
    # history: the same mean, what it divides by, and the same cost
    capsys.readouterr()
    assert main(["history", "--work-dir", str(project.work)]) == 0
    table = capsys.readouterr().out
    assert "0.900 (18/20)" in table and "90% of 20" in table and "unknown" in table and "$0.0000" not in table
    assert main(["history", "--work-dir", str(project.work), "--format", "json"]) == 0
    (cycle,) = json.loads(capsys.readouterr().out)
    assert (cycle["items"], cycle["scored"], cycle["judged"], cycle["cost_known"]) == (20, 18, 20, False)
    # the Markdown and HTML reports: each failed item says why it has no score; the cost is unknown
    report = project.root / "report.md"
    assert main(["report", "--work-dir", str(project.work), "--markdown", "--output", str(report)]) == 0
    markdown = report.read_text()
    assert markdown.count("none: the checks decided it before judging") == 2
    assert "**2 failed**, 18 passed" in markdown and "cost unknown" in markdown
    # $0 only where nothing was called: the 2 the checks decided called no model
    assert [line for line in markdown.splitlines() if "$0.0000" in line] == [
        line for line in markdown.splitlines() if "failed |" in line]
    page = project.root / "report.html"
    assert main(["report", "--work-dir", str(project.work), "--output", str(page)]) == 0
    html = page.read_text()
    assert html.count("none: the checks decided it before judging") >= 2 and html.count("$0.0000") == 4
    # the plot of the same run: 18 points at 0.9, the mean line over them, the 2 on the floor and counted
    from test_plots import legend_texts

    from harness.apps.tracking import plots
    from harness.apps.tracking.frames import attempts_frame, items_frame

    fig = plots._score_figure(items_frame(attempts_frame(project.work)), "writer", "gated")
    (ax,) = fig.axes
    assert "2 no score" in [t.get_text() for t in ax.texts] and "no score (on the floor)" in legend_texts(fig)
    mean_line = next(line for line in ax.lines if line.get_linewidth() == 2)
    assert list(mean_line.get_ydata()) == [pytest.approx(0.9)]
