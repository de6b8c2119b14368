"""Variants: an agent's matrix of settings, each case run once per variant, and the grid that compares them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import QUALITY_RUBRIC, Project
from test_report import console_lines, needs_chromium, run_in_chromium
from harness.base.errors import HarnessConfigError
from harness.evaluation.comparison import GridEntry, variant_grids
from harness.loading.suites import BUILTIN_RUNNER_KINDS
from harness.loading import load_suite

REPO = Path(__file__).resolve().parent.parent

# A python producer with an option: "plain" says the text, "long" pads it past the rubric's 12 words.
STYLED_PRODUCER = '''\
def produce(request, style="plain"):
    text = request["inputs"]["text"]
    return text if style == "plain" else text + " and then a great many more words than anyone asked for"
'''

VARIANT_AGENTS = """\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    max_attempts: 1
    escalate_on_fail: false
    variants:
      options: {plain: {style: plain}, long: {style: long}}
"""

CASES = """\
agent: writer
cases:
  - id: a
    inputs: {text: hello there}
  - id: b
    inputs: {text: hello again}
  - id: c
    inputs: {text: goodbye}
"""


def variant_project(project: Project, agents: str = VARIANT_AGENTS) -> Project:
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("agentlib.py", STYLED_PRODUCER)
    project.agents(agents)
    project.cases("writer", CASES)
    return project


def load(tmp_path: Path, agents: str, files: dict[str, str] | None = None):
    (tmp_path / "rubrics").mkdir(exist_ok=True)
    (tmp_path / "rubrics" / "quality.yaml").write_text(QUALITY_RUBRIC)
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = tmp_path / "agents.yaml"
    path.write_text(agents)
    return load_suite(path, rubrics_dir=tmp_path / "rubrics", runner_kinds=BUILTIN_RUNNER_KINDS)


# --- the matrix ------------------------------------------------------------------------------------


PROMPT = "# Writer\n## Role\nWrite.\n## Inputs\ntext\n## Outputs\ntext\n## Instructions\nGo.\n## Examples\nNone.\n" \
         "## Constraints\nShort.\n"


def test_a_matrix_makes_every_combination_named_by_its_values(tmp_path: Path) -> None:
    suite = load(tmp_path, """\
agents:
  writer:
    rubric: quality
    producer: prompts/terse.md
    model: {model: claude-haiku-4-5, temperature: 0}
    variants:
      model: [claude-haiku-4-5, openai/gpt-4.1-mini]
      producer: {terse: prompts/terse.md, warm: prompts/warm.md}
      temperature: [0, 0.7]
""", {"prompts/terse.md": PROMPT, "prompts/warm.md": PROMPT.replace("Write.", "Write warmly.")})
    variants = suite.agents["writer"].variants
    assert [v.variant for v in variants] == [
        "claude-haiku-4-5+terse+t0", "claude-haiku-4-5+terse+t0.7", "claude-haiku-4-5+warm+t0",
        "claude-haiku-4-5+warm+t0.7", "gpt-4.1-mini+terse+t0", "gpt-4.1-mini+terse+t0.7",
        "gpt-4.1-mini+warm+t0", "gpt-4.1-mini+warm+t0.7"]
    mini_warm = variants[7]
    assert mini_warm.variant_settings == {"model": "gpt-4.1-mini", "producer": "warm", "temperature": "t0.7"}
    assert mini_warm.models["producer"].model == "openai/gpt-4.1-mini"
    assert mini_warm.models["producer"].temperature == 0.7
    assert "warmly" in mini_warm.prompts["producer"].text
    assert all(v.name == "writer" and not v.variants for v in variants)  # each is the agent, one level deep


@pytest.mark.parametrize(("variants", "files", "message"), [
    ("{colour: [red]}", {}, "agents.writer.variants.colour: unknown key"),
    ("{options: []}", {}, "agents.writer.variants.options: has no value"),
    ("{model: claude-haiku-4-5}", {}, "agents.writer.variants.model: expected a list of values or a mapping"),
    ("{options: {a+b: {style: x}}}", {}, "'a+b' is not a variant name"),
    ("{producer: [a/x.md, b/x.md]}", {}, "agents.writer.variants.producer[1]: names a variant 'x', as [0] does"),
    ("{model: [claude-haiku-4-5]}", {}, "agents.writer.variants.model: sets the producer's model, but variant "
                                        "claude-haiku-4-5's producer is a python runner"),
    ("{producer: {warm: prompts/missing.md}}", {},
     "agents.yaml: agents.writer.variants (producer: warm): producer: prompt file"),
    ("{model: {bad: nope/model}}", {},
     "agents.yaml: agents.writer.variants (model: bad): model.model: unknown model provider 'nope'"),
])
def test_a_matrix_written_wrong_is_one_error_naming_the_field(tmp_path: Path, variants: str, files: dict[str, str],
                                                              message: str) -> None:
    with pytest.raises(HarnessConfigError) as error:
        load(tmp_path, f"""\
agents:
  writer:
    rubric: quality
    producer: {{python: "agentlib:produce"}}
    variants: {variants}
""", files)
    assert message in error.value.message(), error.value.message()


def test_a_matrix_too_large_to_be_meant_is_refused(tmp_path: Path) -> None:
    options = ", ".join(f"o{i}: {{style: s{i}}}" for i in range(17))
    with pytest.raises(HarnessConfigError, match="makes 289 variants, more than 256"):
        load(tmp_path, f"""\
agents:
  writer:
    rubric: quality
    producer: {{python: "agentlib:produce"}}
    variants: {{options: {{{options}}}, temperature: [{', '.join(str(i / 10) for i in range(17))}]}}
""")


# --- a run -----------------------------------------------------------------------------------------


def test_each_case_runs_once_per_variant_and_the_records_keep_the_variant(project: Project) -> None:
    variant_project(project)
    result = project.run("suites/", "-v", "--tb=no")
    result.assert_outcomes(passed=2, failed=4)  # "long" pads every text past 12 words; "goodbye" never says hello
    result.stdout.fnmatch_lines(["suites/writer.cases.yaml::a[[]plain[]] PASSED*",
                                 "suites/writer.cases.yaml::a[[]long[]] FAILED*"])
    rows = project.rows("SELECT d.nodeid, d.case_id, d.variant, r.agent_name, r.artifact_path FROM attempt_details d "
                        "JOIN agent_runs r ON r.id = d.run_id ORDER BY d.nodeid")
    assert [(r["case_id"], r["variant"], r["agent_name"]) for r in rows] == [
        ("a", "long", "writer"), ("a", "plain", "writer"), ("b", "long", "writer"), ("b", "plain", "writer"),
        ("c", "long", "writer"), ("c", "plain", "writer")]
    # all a variant wrote, side by side
    assert rows[0]["artifact_path"].endswith("writer/long/a/attempt-1.md")
    assert (project.cycle_dir() / "writer" / "plain" / "a" / "final.md").is_file()
    # the grid: ranked by pass rate, with intervals, and the other variant against the best, case by case
    result.stdout.fnmatch_lines([
        "writer: 2 variants x 3 cases, scored by quality",
        "  variant *items *passed *pass rate [[]95% CI[]] *mean score [[]95% CI[]] *cost",
        "  plain  *3 *2 * 67% [[]21%, 94%[]] of 3 *0.800 [[]*, *[]] *$0.0000",
        "  long  *3 *0 *  0% [[]0%, 56%[]] of 3 *0.533 [[]0.400, 0.600[]] *$0.0000",
        "  each against the best (plain), case by case*",
        "    long vs plain: scores -0.267 [[]-0.400, +0.000[]] over 3 cases (0 up, 2 down), p=0.5; verdicts 0 better, "
        "2 worse of 3, p=0.5: no significant difference"])


def test_a_variant_is_selected_like_any_item(project: Project) -> None:
    variant_project(project)
    result = project.run("suites/", "-k", "plain", "-q", "--tb=no")
    result.assert_outcomes(passed=2, failed=1)
    assert {r["variant"] for r in project.rows("SELECT variant FROM attempt_details")} == {"plain"}


def test_the_grid_is_the_same_under_xdist(project: Project) -> None:
    variant_project(project)
    result = project.run("suites/", "-n", "2", "--tb=no", subprocess=True)
    result.assert_outcomes(passed=2, failed=4)
    result.stdout.fnmatch_lines(["writer: 2 variants x 3 cases, scored by quality",
                                 "  plain  *3 *2 * 67% [[]21%, 94%[]] of 3 *0.800*"])


def test_the_markdown_and_html_reports_show_the_grid(project: Project) -> None:
    variant_project(project)
    project.run("suites/", "--tb=no", "--harness-markdown", "summary.md", "--harness-html", "report.html")
    markdown = (project.root / "summary.md").read_text()
    assert "### writer: 2 variants x 3 cases" in markdown
    assert "| `plain` (best) | 3 | 2 | 67% [21%, 94%] of 3 |" in markdown
    assert "| case | `plain` | `long` |" in markdown  # case x variant, the columns ranked
    assert "| `a` | ✅ 1.00 | ❌ 0.60 |" in markdown and "| `c` | ❌ 0.40 | ❌ 0.40 |" in markdown
    html = (project.root / "report.html").read_text()
    assert "<h2>Variants</h2>" in html and "<code>plain</code> (best)" in html
    assert "long vs plain: scores -0.267" in html
    assert "<script" not in html


# --- the grid's arithmetic -----------------------------------------------------------------------------


def entry(variant: str, case: str, score: float | None, passed: bool | None) -> GridEntry:
    return GridEntry(agent="qa", rubric="r", variant=variant, case=case, score=score, passed=passed)


def test_the_leaderboard_ranks_by_pass_rate_before_a_mean_that_left_failures_out() -> None:
    # "checks" failed two items before judging: no score, so its mean (1.0 over 1) flatters it
    entries = [entry("checks", "c1", 1.0, True), entry("checks", "c2", None, False), entry("checks", "c3", None, False),
               entry("steady", "c1", 0.9, True), entry("steady", "c2", 0.85, True), entry("steady", "c3", 0.7, False)]
    (grid,) = variant_grids(entries)
    assert list(grid.variants) == ["steady", "checks"] and grid.best == "steady"
    (comparison,) = grid.comparisons()
    # one case scored by both; three decided by both, of which one flipped to checks' loss
    assert comparison.test.pairs == 1 and (comparison.wins, comparison.losses, comparison.decided) == (0, 1, 3)
    assert comparison.text().startswith("checks vs steady: scores +0.100")
    assert "verdicts 0 better, 1 worse of 3, p=1" in comparison.text()


def test_many_flips_one_way_are_significant_and_the_p_values_are_adjusted_for_several_comparisons() -> None:
    cases = [f"c{i}" for i in range(12)]
    entries = [entry("best", c, 1.0, True) for c in cases]
    entries += [entry("worse", c, 0.2, False) for c in cases]
    entries += [entry("same", c, 1.0, True) for c in cases]
    (grid,) = variant_grids(entries)
    assert list(grid.variants) == ["best", "same", "worse"]  # equal pass rate and mean: by name
    same, worse = grid.comparisons()
    assert same.text().endswith("the same verdict on all 12: no significant difference")
    assert worse.losses == 12 and worse.verdict_p == pytest.approx(2 / 2 ** 12)
    assert worse.adjusted_verdict_p == pytest.approx(2 * 2 / 2 ** 12)  # Holm: the smallest of two, times two
    assert worse.significant and worse.conclusion() == "best is better"


# --- the demo ---------------------------------------------------------------------------------------


def test_the_comparison_demo_shows_two_models_by_two_prompts_over_fifty_rows(tmp_path: Path) -> None:
    """As a user runs it: 200 items on the mock provider, the grid with intervals and the paired tests."""
    run = subprocess.run([sys.executable, "-m", "pytest", "comparisons/", "-p", "no:cacheprovider", "-q", "--tb=no",
                          "-rN", "--harness-work-dir", str(tmp_path / "WORK"), "--harness-markdown",
                          str(tmp_path / "summary.md")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 1, out  # the weaker variants fail items, as they should
    assert "55 failed, 300 passed" in out  # 200 variant items, 150 pairwise (50 cases x 3 pairs), 5 conversations
    lines = out[out.index("capitals: 4 variants x 50 cases"):].splitlines()
    ranked = [line.split()[0] for line in lines[2:6]]
    assert ranked == ["careful+terse", "hasty+terse", "careful+explained", "hasty+explained"]  # by pass rate
    assert "98% [90%, 100%] of 50" in lines[2] and "0.984 [0.952, 1.000]" in lines[2]
    assert any("hasty+explained vs careful+terse: scores -0.248" in line and "careful+terse is better" in line
               for line in lines)
    # the judged dimension is rated by three judges; their agreement is the summary's
    assert "judges agree: Fleiss' kappa -0.42 over 200 dimension ratings (3 judges: mock/judge-brief, " \
           "mock/judge-thorough, mock/judge-fair); observed agreement 29%" in out
    # the pairwise file: a judge shown two answers, twice with the positions swapped; its position bias is caught
    pairwise = out[out.index("terse-or-explained: pairwise over 50 cases"):].splitlines()
    assert "careful+terse vs hasty+terse" in pairwise[4] and "39 (39)" in pairwise[4]
    assert pairwise[5].startswith("  Bradley-Terry ranking") and "1. careful+terse" in pairwise[5]
    summary = (tmp_path / "summary.md").read_text()
    assert "| `careful+terse` (best) | 50 | 49 |" in summary
    assert "| case | `careful+terse` | `hasty+terse` | `careful+explained` | `hasty+explained` |" in summary
    assert "| `australia` | ✅ 1.00 | ❌ 0.20 | ✅ 1.00 | ❌ 0.20 |" in summary  # hasty says Sydney


@needs_chromium
def test_the_html_report_shows_the_grid_and_the_failed_items_in_chromium(project: Project, tmp_path: Path) -> None:
    variant_project(project)
    project.run("suites/", "--tb=no", "--harness-html", "report.html")
    probe, log = run_in_chromium(project.root / "report.html", tmp_path)
    assert probe["problems"] == [] and console_lines(log) == []
    # the case x variant grid: 3 cases x 2 variants, each cell a score a person can see
    assert probe["grid"] == ["1.00", "0.60", "1.00", "0.60", "0.40", "0.40"]
    assert {entry.split("=")[0] for entry in probe["visible"]} == {"greeting", "concise"}  # failed items' dimensions
