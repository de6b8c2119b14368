"""Collection: rubric files and case files become items; --rubric; an inert plugin elsewhere."""

from __future__ import annotations

import pytest

from conftest import QUALITY_RUBRIC, Project

OTHER_RUBRIC = """\
metadata: {name: Other, version: "0.1.0"}
threshold: 0.5
dimensions:
  shouty:
    weight: 1.0
    description: "Uses capitals"
    check: {regex: '[A-Z]'}
"""

TWO_CASES = """\
agent: writer
cases:
  - id: short-hello
    inputs: {text: "hello there"}
  - id: long.goodbye_2
    inputs: {text: "goodbye"}
"""


def with_examples(project: Project) -> None:
    project.write("rubrics/examples/quality/gold/good-one.md", "hello, short and sweet\n")
    project.write("rubrics/examples/quality/anti/no-greeting.md", "goodbye\n")
    project.write("rubrics/examples/quality/anti/rambling.md", "hello " + "word " * 30 + "\n")
    project.rubric("quality", QUALITY_RUBRIC + """\
examples:
  gold: ["examples/quality/gold/*.md"]
  anti_patterns: ["examples/quality/anti/*.md"]
""")


def test_rubric_file_collects_valid_and_calibration_items(project: Project) -> None:
    project.standard()
    with_examples(project)
    result = project.run("rubrics/", "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "rubrics/quality.yaml::valid",
        "rubrics/quality.yaml::gold[good-one]",
        "rubrics/quality.yaml::anti[no-greeting]",
        "rubrics/quality.yaml::anti[rambling]",
        "4 tests collected*",
    ])


def test_rubric_calibration_passes_and_fails(project: Project) -> None:
    project.standard()
    with_examples(project)
    result = project.run("rubrics/", "-v")
    result.assert_outcomes(passed=4)
    assert result.ret == 0

    # A gold example that scores below the threshold fails its calibration item, with the scores.
    project.write("rubrics/examples/quality/gold/not-so-good.md", "goodbye\n")
    result = project.run("rubrics/", "-v")
    result.assert_outcomes(passed=4, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*not-so-good.md scores 0.40, expected at or above the threshold 0.80*greeting 0.00*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_case_file_gives_one_item_per_case_with_readable_ids(project: Project) -> None:
    project.standard(TWO_CASES)
    result = project.run("suites/", "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "suites/writer.cases.yaml::short-hello",
        "suites/writer.cases.yaml::long.goodbye_2",
        "2 tests collected*",
    ])
    # -k selects by case id; a node id runs exactly that case.
    result = project.run("suites/", "-k", "short", "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["suites/writer.cases.yaml::short-hello PASSED*"])
    result = project.run("suites/writer.cases.yaml::short-hello", "-v")
    result.assert_outcomes(passed=1)


def test_collect_only_runs_nothing_and_writes_nothing(project: Project) -> None:
    project.standard(TWO_CASES)
    project.write("agentlib.py", "def produce(request):\n    raise SystemExit('the producer must not run')\n\n\n"
                                 "revise = produce\n")
    result = project.run("suites/", "rubrics/", "--collect-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*3 tests collected*"])
    assert "harness summary" not in result.stdout.str()
    assert not project.work.exists()


def test_session_without_our_files_is_silent_and_writes_nothing(project: Project) -> None:
    project.standard(TWO_CASES)  # our files exist in the project, but this session does not collect them
    project.pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = project.run("test_plain.py", "-v", subprocess=True)  # a fresh process: the plugin loads as in CI
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    plugins = [line for line in result.outlines if line.startswith("plugins:")]
    assert plugins and "rubric" in plugins[0]  # the plugin is active in this session...
    others = [line for line in result.outlines + result.errlines if not line.startswith(("plugins:", "rootdir:"))]
    assert not [line for line in others if "harness" in line.lower() or "rubric" in line.lower()]  # ...and silent
    assert "warning" not in result.stdout.str().lower()
    assert not project.work.exists()


def test_yaml_outside_the_rubrics_folder_is_not_collected(project: Project) -> None:
    project.standard(TWO_CASES)
    project.write("config/settings.yaml", "not: a rubric\n")
    result = project.run("config/", "--collect-only", "-q")
    assert result.ret == 5  # nothing collected
    assert not project.work.exists()


def test_rubric_option_keeps_only_that_rubrics_items(project: Project) -> None:
    project.standard(TWO_CASES)
    project.rubric("other", OTHER_RUBRIC)
    project.agents("""\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
  shouter:
    rubric: other
    producer: {python: "agentlib:produce"}
""")
    project.cases("shouter", """\
agent: shouter
cases:
  - id: loud
    inputs: {text: "HELLO"}
""")
    result = project.run("rubrics/", "suites/", "--rubric", "other", "-v")
    result.assert_outcomes(passed=2, deselected=3)
    result.stdout.fnmatch_lines([
        "rubrics/other.yaml::valid PASSED*",
        "suites/shouter.cases.yaml::loud PASSED*",
    ])
    assert "writer.cases.yaml" not in result.stdout.str()
    assert [r["agent_name"] for r in project.rows()] == ["shouter"]


def test_unknown_rubric_name_is_a_usage_error_listing_the_known_ones(project: Project) -> None:
    project.standard(TWO_CASES)
    project.rubric("other", OTHER_RUBRIC)
    result = project.run("suites/", "--rubric", "qualty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines(["*--rubric qualty: no such rubric (known: other, quality)*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not project.work.exists()


def test_a_failing_case_is_named_by_its_node_id_and_line(project: Project) -> None:
    project.standard(TWO_CASES)
    project.agents("""\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
""")
    result = project.run("suites/", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ writer[[]long.goodbye_2] scored by quality _*",
        "writer[[]long.goodbye_2] ESCALATED after 3 attempts*",
    ])
    result.stdout.fnmatch_lines(["FAILED suites/writer.cases.yaml::long.goodbye_2*"])
    # pytest's own location of the item is the case's line in the case file (reportinfo).
    items = project.pytester.getitems(project.root / "suites" / "writer.cases.yaml")
    assert [item.location for item in items] == [
        ("suites/writer.cases.yaml", 2, "writer[short-hello] scored by quality"),
        ("suites/writer.cases.yaml", 4, "writer[long.goodbye_2] scored by quality"),
    ]


def test_two_in_process_sessions_in_a_row(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest.main() twice in one process (pytester's default) must work like two fresh processes.

    Only ``harness`` and ``harness.face.plugin`` are imported before the first session, as in a user's own
    pytester tests. Each in-process session drops the modules it imported; the next one must not pick up
    the dropped ``harness.evaluation.runners`` through a stale attribute of the ``harness`` package.
    """
    import sys

    for name in [n for n in sys.modules if n.startswith("harness.") and n != "harness.face.plugin"]:
        monkeypatch.delitem(sys.modules, name)
        parent, _, attr = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], attr):
            monkeypatch.delattr(sys.modules[parent], attr)
    project.standard(TWO_CASES)
    first = project.run("suites/", forget_stale_modules=False)
    first.assert_outcomes(passed=2)
    second = project.run("suites/", forget_stale_modules=False)
    assert "Traceback" not in second.stdout.str() and "TypeError" not in second.stdout.str()
    second.assert_outcomes(passed=2)
