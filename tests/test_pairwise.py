"""Pairwise judging: two outputs of a case shown to a judge, twice with the positions swapped, and the win rates and
ranking a person reads."""

from __future__ import annotations

import html
import json
import threading
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import QUALITY_RUBRIC, Project
from harness.apps.tracking import plots
from harness.apps.tracking.comparisons import report_grids, report_pairwise
from harness.apps.tracking.results import results_from_records
from harness.apps.view.server import make_server
from harness.base.stats import bradley_terry
from harness.evaluation.comparison import PairEntry, pairwise_tables
from harness.records import RecordReader

# A python producer with a style option; the three variants answer "hello <text>" differently.
PRODUCER = '''\
def produce(request, style="plain"):
    text = request["inputs"]["text"]
    return {"plain": f"hello {text}", "shout": f"HELLO {text.upper()}!", "long": f"hello {text}, " + "and more " * 8}[style]
'''

AGENTS = """\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    max_attempts: 1
    variants:
      options: {plain: {style: plain}, shout: {style: shout}, long: {style: long}}
"""

CASES = "agent: writer\ncases:\n" + "".join(f"  - id: c{i}\n    inputs: {{text: case {i}}}\n" for i in range(1, 7))

# A judge in MT-bench's format that prefers the shorter answer, or, between two of the same length, the first one
# it is shown (a position bias: the swap turns its verdict around, and the item is a tie).
JUDGE = '''\
import json
from pathlib import Path
from harness.llm.providers.mock import mock_model

LOG = Path(__file__).with_name("pair-calls.jsonl")


def _answer(prompt, letter):
    return prompt.split(f"[Assistant {letter}'s answer]\\n", 1)[1].split("\\n[End of", 1)[0]


@mock_model("pair-judge")
def judge(request):
    prompt = request.messages[-1].text
    first, second = _answer(prompt, "A"), _answer(prompt, "B")
    with LOG.open("a") as log:
        log.write(json.dumps({"system": request.system, "a": first, "b": second}) + "\\n")
    verdict = "A" if len(first) <= len(second) else "B"
    return f"Comparing the two. [[{verdict}]]"


@mock_model("alpaca-judge")
def alpaca(request):
    prompt = request.messages[-1].text
    first = prompt.split("Output (a):", 1)[1].split("Output (b):", 1)[0].strip()
    second = prompt.split("Output (b):", 1)[1].strip()
    return "m" if first.isupper() else "M" if second.isupper() else "m"
'''


def pairwise_project(project: Project, compare: str = "[plain, shout, long]", judge: str = "{model: mock/pair-judge}",
                     extra: str = "") -> Project:
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("agentlib.py", PRODUCER)
    project.write("conftest.py", JUDGE)
    project.agents(AGENTS)
    project.cases("writer", CASES)
    project.write("suites/styles.pairwise.yaml", f"pairwise: styles\ncases: writer.cases.yaml\ncompare: {compare}\n"
                                                  f"judge: {judge}\n{extra}")
    return project


def calls(project: Project) -> list[dict]:
    log = project.root / "pair-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_each_case_and_pair_is_an_item_judged_in_both_orders(project: Project) -> None:
    pairwise_project(project)
    result = project.run("suites/styles.pairwise.yaml", "-v")
    result.assert_outcomes(passed=18)  # 6 cases x 3 pairs; a comparison informs, it does not fail
    result.stdout.fnmatch_lines(["suites/styles.pairwise.yaml::c1[[]plain vs shout[]] PASSED*"])
    judged = calls(project)
    assert len(judged) == 36  # every item asked twice
    shown = [(c["a"], c["b"]) for c in judged]
    assert all((b, a) in shown for a, b in shown)  # each pair shown both ways round
    first = judged[0]
    assert first["system"].startswith("You are an impartial judge comparing")  # graders/mt-bench-pair, the default
    rows = project.rows("SELECT r.agent_name, d.variant, d.case_id, d.dimensions, r.artifact_path, r.overall_score "
                        "FROM agent_runs r JOIN attempt_details d ON d.run_id = r.id ORDER BY d.nodeid")
    assert {r["agent_name"] for r in rows} == {"styles"} and len(rows) == 18
    plain_long = next(r for r in rows if r["variant"] == "plain vs long" and r["case_id"] == "c1")
    dims = json.loads(plain_long["dimensions"])
    assert dims["preference"]["score"] == 1.0 and dims["agreement"]["score"] == 1.0  # shorter, in both orders
    # plain ("hello case 1") and shout ("HELLO CASE 1!") differ by one character: shout is longer, plain wins.
    # shout and long: shout is shorter. The same length never happens here, so no tie.
    artifact = (project.root / plain_long["artifact_path"]).read_text()
    assert "## plain" in artifact and "## long" in artifact and "## Judgment 2: A = long, B = plain" in artifact
    result.stdout.fnmatch_lines([
        "styles: pairwise over 6 cases, each judged in both orders",
        "  pair *first wins *second wins *ties (orders disagreed) *first's win rate [[]95% CI[]] *p",
        "  plain vs long * 6 * 0 * 0 (0) *100% [[]61%, 100%[]] of 6 *0.0312",
        "  plain vs shout * 6 * 0 * 0 (0) *100% [[]61%, 100%[]] of 6 *0.0312",
        "  shout vs long * 6 * 0 * 0 (0) *100% [[]61%, 100%[]] of 6 *0.0312",
        "  Bradley-Terry ranking (strengths: A beats B with chance A / (A + B)): 1. plain *, 2. shout *, 3. long *"])


def test_a_judge_that_prefers_the_first_position_gets_ties_not_wins(project: Project) -> None:
    pairwise_project(project, compare="[plain, shout]")
    project.write("agentlib.py", PRODUCER.replace('f"HELLO {text.upper()}!"', 'f"HELLO {text.upper()}"'))
    result = project.run("suites/styles.pairwise.yaml")
    result.assert_outcomes(passed=6)
    # same length: the judge picks whatever it is shown first, so the two orders disagree
    result.stdout.fnmatch_lines(["  plain vs shout * 0 * 0 * 6 (6) * 50% [[]*[]] of 6 *1"])
    row = project.rows("SELECT dimensions FROM attempt_details LIMIT 1")[0]
    dims = json.loads(row["dimensions"])
    assert dims["preference"]["score"] == 0.5 and dims["agreement"]["score"] == 0.0
    assert "the orders disagree" in dims["preference"]["reason"]


def test_a_published_template_with_its_own_verdicts(project: Project) -> None:
    # AlpacaEval's shape: the judge names the better output "m" (the first) or "M" (the second)
    pairwise_project(project, compare="[plain, shout]", judge="""
  model: mock/alpaca-judge
  template: judges/alpaca.txt
  verdict: '^\\s*([mM])\\s*$'
  verdicts: {m: a, M: b}""")
    project.write("suites/judges/alpaca.txt", "Which output follows the instruction better?\n\nInstruction: {input}\n\n"
                                              "Output (a): {output_a}\n\nOutput (b): {output_b}\n")
    result = project.run("suites/styles.pairwise.yaml")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["  plain vs shout * 0 * 6 * 0 (0) *"])  # the shouting one, in both orders


def test_a_side_read_from_an_earlier_cycle(project: Project) -> None:
    pairwise_project(project, compare="[plain, {variant: plain, cycle: latest, name: last-week}]")
    project.run("suites/writer.cases.yaml").assert_outcomes(passed=12, failed=6)  # the cycle to compare with
    project.write("agentlib.py", PRODUCER.replace('f"hello {text}"', 'f"hello there, {text}"'))
    result = project.run("suites/styles.pairwise.yaml")
    result.assert_outcomes(passed=6)
    # last week's plain answer was the shorter: it wins every case
    result.stdout.fnmatch_lines(["  plain vs last-week * 0 * 6 *"])
    assert any(c["a"] == "hello case 1" or c["b"] == "hello case 1" for c in calls(project))


def test_no_recorded_output_or_no_judge_key_is_not_scored(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    pairwise_project(project, compare="[plain, {variant: plain, cycle: 2020-01-01-001, name: old}]")
    result = project.run("suites/styles.pairwise.yaml", "-rs")
    result.assert_outcomes(skipped=6)
    result.stdout.fnmatch_lines(["*no recorded output of old for case c1 in cycle 2020-01-01-001*"])
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    pairwise_project(project, compare="[plain, shout]", judge="{model: claude-haiku-4-5}")
    result = project.run("suites/styles.pairwise.yaml", "-rs")
    result.assert_outcomes(skipped=6)
    result.stdout.fnmatch_lines(["*ANTHROPIC_API_KEY*"])


@pytest.mark.parametrize(("compare", "judge", "message"), [
    ("[plain]", "{model: mock/pair-judge}", "compare: expected a list of two or more sides"),
    ("[plain, loud]", "{model: mock/pair-judge}", "compare[1].variant: writer has no variant 'loud' (fix: use one "
                                                  "of: plain, shout, long)"),
    ("[plain, plain]", "{model: mock/pair-judge}", "compare[1].name: a second side named 'plain'"),
    ("[plain, shout]", "{model: mock/pair-judge, verdict: 'x(y)'}", "judge.verdict: reads the verdict of a template "
                                                                    "of your own, but there is no `template:`"),
    ("[plain, shout]", "{model: opnai/gpt-4.1}", "judge.model: unknown model provider 'opnai'"),
    ("[plain, shout]", "{model: mock/pair-judge, template: judges/one.txt}", "judge.template: never shows "
                                                                             "{output_b}"),
])
def test_a_pairwise_file_written_wrong_is_one_collection_error(project: Project, compare: str, judge: str,
                                                               message: str) -> None:
    pairwise_project(project, compare=compare, judge=judge)
    project.write("suites/judges/one.txt", "Is {output_a} good?\n")
    result = project.run("suites/styles.pairwise.yaml")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert f"suites/styles.pairwise.yaml: {message}" in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_the_reports_show_the_win_rates(project: Project) -> None:
    pairwise_project(project)
    project.run("suites/styles.pairwise.yaml", "--harness-markdown", "summary.md", "--harness-html", "report.html")
    markdown = (project.root / "summary.md").read_text()
    assert "### styles: pairwise over 6 cases" in markdown
    assert "| `plain vs shout` | 6 | 0 | 0 (0) | 100% [61%, 100%] of 6 | 0.0312 |" in markdown
    assert "Bradley-Terry ranking (A beats B with chance A / (A + B)): 1. plain" in markdown
    html = (project.root / "report.html").read_text()
    assert "<h2>Pairwise</h2>" in html and "<code>plain vs shout</code>" in html
    assert "<h2>Variants</h2>" not in html  # a comparison's pairs are not variants


def test_win_rates_ties_and_the_ranking_arithmetic() -> None:
    entries = [PairEntry("cmp", "a vs b", f"c{i}", 1.0, True) for i in range(6)]
    entries += [PairEntry("cmp", "a vs b", "c6", 0.5, False), PairEntry("cmp", "a vs b", "c7", 0.0, True),
                PairEntry("cmp", "a vs b", "c8", None)]
    (table,) = pairwise_tables(entries)
    tally = table.pairs["a vs b"]
    assert (tally.a_wins, tally.b_wins, tally.ties, tally.inconsistent, tally.unjudged) == (6, 1, 1, 1, 1)
    assert tally.win_rate.estimate == pytest.approx(6.5 / 8)  # a tie is half a win
    assert tally.p_value == pytest.approx(2 * (1 + 7) / 2 ** 7)  # the sign test over the 7 decided
    assert table.ranking() == []  # two sides: the win rate says it all
    strengths = bradley_terry({("a", "b"): 8, ("b", "a"): 2})
    assert strengths == pytest.approx({"a": 0.8, "b": 0.2})
    three = bradley_terry({("a", "b"): 7, ("b", "a"): 3, ("b", "c"): 7, ("c", "b"): 3, ("a", "c"): 9, ("c", "a"): 1})
    assert sorted(three, key=three.get, reverse=True) == ["a", "b", "c"] and sum(three.values()) == pytest.approx(1)


def test_the_viewer_shows_the_win_rates_and_each_judgment(project: Project) -> None:
    pairwise_project(project, compare="[plain, shout]")
    project.run("suites/styles.pairwise.yaml")
    server = make_server(project.work, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        (cycle,) = RecordReader(project.work).cycles()
        with urllib.request.urlopen(f"{server.url.rstrip('/')}/cycle/{cycle}", timeout=30) as answer:
            page = answer.read().decode()
        assert "<h2>Pairwise</h2>" in page and "<code>plain vs shout</code>" in page
        nodeid = quote("suites/styles.pairwise.yaml::c1[plain vs shout]", safe="")
        with urllib.request.urlopen(f"{server.url.rstrip('/')}/cycle/{cycle}/item/{nodeid}", timeout=30) as answer:
            item = html.unescape(answer.read().decode())
        assert "## Judgment 1: A = plain, B = shout" in item and "## Judgment 2: A = shout, B = plain" in item
        assert "plain is better (first order: plain is better, swapped order: plain is better)" in item
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_the_plots_draw_the_variants_and_the_win_rates(project: Project) -> None:
    pairwise_project(project)
    project.run("suites/")  # the variants' items and the comparison, one cycle
    written = plots.write_plots(project.work, project.root / "tracking")
    names = sorted(p.name for p in written if p.suffix == ".png")
    assert "variants-writer.png" in names and "pairwise-styles.png" in names
    assert not [n for n in names if "pairwise" in n and n != "pairwise-styles.png"]  # a preference is no score
    results = results_from_records(project.work, RecordReader(project.work).cycles())
    (grid,) = report_grids(results)
    fig = plots._variants_figure(grid, "c")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(reversed(grid.variants))  # best on top
    (table,) = report_pairwise(results)
    fig = plots._pairwise_figure(table, "c")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == list(reversed(table.pairs)) and len(labels) == 3  # the first pair on top
    assert [t.get_text() for legend in fig.legends for t in legend.get_texts()] == [
        "even odds", "first side better", "second side better", "no clear winner"]
