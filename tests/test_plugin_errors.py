"""Every bad input is ONE line naming the file, the field and the fix; exit 2 (collection) or 4 (usage); no traceback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from conftest import QUALITY_RUBRIC, Project, error_sections, prompt_text

REVIEW_RUBRIC = """\
rubric_id: review
version: "1.0.0"
scoring_mode: weighted
pass_threshold: 0.8
criteria:
  - id: greets
    name: Greets
    description: "Says hello"
    pass_condition: "hello appears"
    fail_condition: "no hello"
    check: {contains: {all: [hello]}}
  - id: short
    name: Short
    description: "Short"
    pass_condition: "at most 12 words"
    fail_condition: "longer"
    check: {length: {max_words: 12}}
"""

CASES = """\
agent: writer
cases:
  - id: greet
    inputs: {text: "hello"}
"""


def edit(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} not in the text"
    return text.replace(old, new, 1)


@dataclass
class Bad:
    """One broken input: how to break the standard project, what to run, and what the line must say."""

    break_it: Callable[[Project], object]
    args: tuple[str, ...]
    file: str
    parts: tuple[str, ...]


def rubric(old: str, new: str, source: str = QUALITY_RUBRIC) -> Callable[[Project], object]:
    return lambda p: p.rubric("quality", edit(source, old, new))


def review(old: str, new: str) -> Callable[[Project], object]:
    return lambda p: p.rubric("review", edit(REVIEW_RUBRIC, old, new))


def agents_yaml(text: str) -> Callable[[Project], object]:
    return lambda p: p.agents(text)


def cases(text: str) -> Callable[[Project], object]:
    return lambda p: p.cases("writer", text)


def with_prompt(text: str) -> Callable[[Project], object]:
    def apply(p: Project) -> None:
        p.write("suites/prompts/judge.md", text)
        p.agents(WRITER_WITH_EVALUATOR)
    return apply


WRITER_WITH_EVALUATOR = """\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    evaluator: prompts/judge.md
"""

BAD_INPUTS = {
    "weights-not-summing-to-one": Bad(
        rubric("weight: 0.4", "weight: 0.3"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.*.weight: weights sum to 0.9 (0.6 + 0.3), not 1.0",
         "(fix: adjust the weights so they add up to exactly 1.0)")),
    "weights-checked-when-running-the-suite": Bad(
        rubric("weight: 0.4", "weight: 0.5"), ("suites/",), "rubrics/quality.yaml",
        ("dimensions.*.weight: weights sum to 1.1",)),
    "score-level-outside-0-1": Bad(
        rubric('1.0: "hello is there"', '1.5: "hello is there"'), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.greeting.scoring.1.5: 1.5 is outside 0..1", "(fix: use a value between 0 and 1)")),
    "threshold-outside-0-1": Bad(
        rubric("threshold: 0.8", "threshold: 1.5"), ("rubrics/",), "rubrics/quality.yaml",
        ("threshold: 1.5 is outside 0..1", "(fix: use a value between 0 and 1)")),
    "review-threshold-outside-0-1": Bad(
        review("pass_threshold: 0.8", "pass_threshold: -0.2"), ("rubrics/",), "rubrics/review.yaml",
        ("pass_threshold: -0.2 is outside 0..1",)),
    "duplicate-dimension-key": Bad(
        rubric("  concise:\n", "  greeting:\n"), ("rubrics/",), "rubrics/quality.yaml",
        ("line 15: duplicate key 'greeting'", "(fix: rename or remove the duplicate)")),
    "duplicate-criterion-id": Bad(
        review("- id: short", "- id: greets"), ("rubrics/",), "rubrics/review.yaml",
        ("criteria[1].id: duplicate criterion id 'greets'", "(fix: give every criterion its own id)")),
    "missing-criterion-id": Bad(
        review("  - id: short\n    name: Short", "  - name: Short"), ("rubrics/",), "rubrics/review.yaml",
        ("criteria[1].id: missing", "(fix: add `id:`)")),
    "review-version-not-semver": Bad(
        review('version: "1.0.0"', "version: v1"), ("rubrics/",), "rubrics/review.yaml",
        ("version: 'v1' is not a semantic version", "(fix: write MAJOR.MINOR.PATCH, such as 1.0.0)")),
    "version-not-semver": Bad(
        rubric('version: "1.2.0"', 'version: "1.2"'), ("rubrics/",), "rubrics/quality.yaml",
        ("metadata.version: '1.2' is not a semantic version", "(fix: write MAJOR.MINOR.PATCH")),
    "missing-version": Bad(
        rubric('  version: "1.2.0"\n', ""), ("rubrics/",), "rubrics/quality.yaml",
        ("metadata.version: missing", "(fix: add `version:`)")),
    "unknown-rubric-key": Bad(
        rubric("threshold: 0.8", "threshold: 0.8\nthresold: 0.9"), ("rubrics/",), "rubrics/quality.yaml",
        ("thresold: unknown key", "(fix: remove it or use one of: metadata, threshold, dimensions, examples, items, transform)")),
    "unknown-dimension-key": Bad(
        rubric("    weight: 0.4", "    wieght: 0.4"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.concise.wieght: unknown key",)),
    "unknown-check-kind": Bad(
        rubric("contains: {all: [hello]}", "contain: {all: [hello]}"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.greeting.check.contain: unknown check kind 'contain'", "did you mean 'contains'?")),
    "bad-check-option": Bad(
        rubric("length: {max_words: 12}", "length: {max_word: 12}"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.concise.check.length.max_word: unknown key (did you mean 'max_words'?)",)),
    "python-check-cannot-be-imported": Bad(
        rubric("contains: {all: [hello]}", "python: 'no_such_checks:score'"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.greeting.check.python: module 'no_such_checks' cannot be imported", "(fix: create")),
    "python-check-function-missing": Bad(
        rubric("contains: {all: [hello]}", "python: 'agentlib:scor'"), ("rubrics/",), "rubrics/quality.yaml",
        ("dimensions.greeting.check.python: module 'agentlib' has no function 'scor'",)),
    "invalid-rubric-yaml": Bad(
        rubric("threshold: 0.8", "threshold: [0.8"), ("rubrics/",), "rubrics/quality.yaml",
        ("(fix: fix the YAML syntax)",)),
    "prompt-missing-a-section": Bad(
        with_prompt(prompt_text(without="Constraints")), ("suites/",), "suites/prompts/judge.md",
        ("## Constraints: missing or empty section: Constraints", "(fix: add `## Constraints`")),
    "prompt-with-an-empty-section": Bad(
        with_prompt(prompt_text().replace("Some examples.", "")), ("suites/",), "suites/prompts/judge.md",
        ("missing or empty section: Examples",)),
    "prompt-file-missing": Bad(
        agents_yaml(WRITER_WITH_EVALUATOR), ("suites/",), "suites/agents.yaml",
        ("agents.writer.evaluator", "prompts/judge.md cannot be read", "(fix: fix the path")),
    "unknown-rubric-in-agents": Bad(
        agents_yaml('agents:\n  writer:\n    rubric: qualty\n    producer: {python: "agentlib:produce"}\n'),
        ("suites/",), "suites/agents.yaml",
        ("agents.writer.rubric: no rubric 'qualty'", "(fix: use one of: quality)")),
    "unknown-key-in-agents": Bad(
        agents_yaml('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                    "    max_attempt: 2\n"),
        ("suites/",), "suites/agents.yaml", ("agents.writer.max_attempt: unknown key",)),
    "bad-policy-value": Bad(
        agents_yaml('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                    "    threshold: 1.2\n"),
        ("suites/",), "suites/agents.yaml", ("agents.writer.threshold: 1.2 is outside 0..1",)),
    "unknown-runner-kind": Bad(
        agents_yaml("agents:\n  writer:\n    rubric: quality\n    producer: {kind: http, target: 'http://x'}\n"),
        ("suites/",), "suites/agents.yaml",
        ("agents.writer.producer.kind: unknown runner kind 'http'", "(fix: use one of: prompt, template, python, command")),
    "runner-of-no-known-kind": Bad(
        agents_yaml("agents:\n  writer:\n    rubric: quality\n    producer: {pyhton: 'agentlib:produce'}\n"),
        ("suites/",), "suites/agents.yaml",
        ("agents.writer.producer: cannot tell the kind of runner", "(fix: use exactly one of: prompt, template, python, command")),
    "producer-cannot-be-imported": Bad(
        agents_yaml("agents:\n  writer:\n    rubric: quality\n    producer: {python: 'no_such_agent:produce'}\n"),
        ("suites/",), "suites/agents.yaml",
        ("agents.writer.producer", "module 'no_such_agent' cannot be imported")),
    "invalid-agents-yaml": Bad(
        agents_yaml("agents:\n  writer: {rubric: quality\n"), ("suites/",), "suites/agents.yaml",
        ("(fix: fix the YAML syntax)",)),
    "unknown-agent-in-case-file": Bad(
        cases(CASES.replace("agent: writer", "agent: ghost")), ("suites/",), "suites/writer.cases.yaml",
        ("agent: unknown agent 'ghost'", "(fix: use one of: writer (defined in agents.yaml))")),
    "unknown-agent-in-a-case": Bad(
        cases(CASES + "  - id: other\n    agent: ghost\n"), ("suites/",), "suites/writer.cases.yaml",
        ("cases[1].agent: unknown agent 'ghost'", "(fix: use one of: writer")),
    "duplicate-case-id": Bad(
        cases(CASES + "  - id: greet\n    inputs: {text: hi}\n"), ("suites/",), "suites/writer.cases.yaml",
        ("cases[1].id: duplicate case id 'greet'", "(fix: give every case its own id)")),
    "missing-case-id": Bad(
        cases(CASES + "  - inputs: {text: hi}\n"), ("suites/",), "suites/writer.cases.yaml",
        ("cases[1].id: missing", "(fix: add `id:`)")),
    "bad-case-id": Bad(
        cases(CASES.replace("id: greet", "id: 'two words'")), ("suites/",), "suites/writer.cases.yaml",
        ("cases[0].id: case id 'two words' is not a valid id",)),
    "unknown-case-key": Bad(
        cases(CASES.replace("inputs:", "input:")), ("suites/",), "suites/writer.cases.yaml",
        ("cases[0].input: unknown key", "(fix: remove it or use one of: id, inputs")),
    "missing-input-file": Bad(
        cases(CASES.replace('{text: "hello"}', "{text: {file: nowhere.txt}}")), ("suites/",),
        "suites/writer.cases.yaml", ("cases[0].inputs.text.file: cannot read", "(fix: fix the path")),
    "no-agents-yaml": Bad(
        lambda p: (p.root / "suites" / "agents.yaml").unlink(), ("suites/",), "suites/writer.cases.yaml",
        ("no agents.yaml in this folder or above it", "(fix: create agents.yaml")),
    "examples-glob-matching-nothing": Bad(
        rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n  gold: ['examples/nope/*.md']"), ("rubrics/",),
        "rubrics/quality.yaml", ("examples.gold: 'examples/nope/*.md' matches no file",)),
    "empty-rubric-file": Bad(
        lambda p: p.rubric("quality", ""), ("rubrics/",), "rubrics/quality.yaml",
        ("expected a mapping, got nothing",)),
    "invalid-case-yaml": Bad(
        cases(CASES.replace("  - id: greet", "  - id: greet\n   bad indent: [")), ("suites/",),
        "suites/writer.cases.yaml", ("(fix: fix the YAML syntax)",)),
}


@pytest.mark.parametrize("bad", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_bad_input_is_one_line_naming_file_field_and_fix(project: Project, bad: Bad) -> None:
    project.standard(CASES)
    bad.break_it(project)
    result = project.run(*bad.args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED == 2, output
    assert "Traceback" not in output
    assert not [line for line in result.outlines if line.startswith("E   ")], output  # no exception dump
    sections = error_sections(result)
    assert sections, output
    assert all(len(section) == 1 for section in sections), sections  # ONE line per broken file
    lines = [section[0] for section in sections]
    naming = [line for line in lines if f"{bad.file}: " in line]
    assert naming, f"no error line names {bad.file}: {lines}"
    line = naming[0]
    for part in bad.parts:
        assert part in line, f"{part!r} not in {line!r}"
    assert "(fix: " in line, line
    assert not project.work.exists()


def test_a_judged_rubric_needs_an_evaluator(project: Project) -> None:
    project.judged()
    project.agents('agents:\n  judged_writer:\n    rubric: judged\n    producer: {python: "agentlib:produce"}\n')
    result = project.run("suites/")
    assert result.ret == 2
    (section,) = error_sections(result)
    (line,) = section
    assert "suites/agents.yaml: agents.judged_writer.evaluator: rubric judged has dimensions without a check " \
           "(tone, clarity) but the agent has no evaluator (fix: add `evaluator:`" in line
    assert "Traceback" not in result.stdout.str()


def test_invalid_yaml_names_the_line(project: Project) -> None:
    project.standard(CASES)
    project.rubric("quality", QUALITY_RUBRIC.replace("threshold: 0.8", "threshold: [0.8"))
    result = project.run("rubrics/")
    ((line,),) = error_sections(result)
    assert "rubrics/quality.yaml: line " in line


def test_the_other_files_still_collect_when_one_is_broken(project: Project) -> None:
    project.standard(CASES)
    project.rubric("broken", QUALITY_RUBRIC.replace("threshold: 0.8", "threshold: 8"))
    result = project.run("rubrics/", "--collect-only", "-q")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["rubrics/quality.yaml::valid", "*1 error*"])
    ((line,),) = error_sections(result)
    assert "rubrics/broken.yaml: threshold: 8 is outside 0..1" in line


def test_a_collection_error_stops_the_run_before_any_item_starts_work(project: Project) -> None:
    """pytest stops at a collection error; the items that did collect must not run (and spend) behind it."""
    project.standard(CASES + "  - id: second\n    inputs: {text: hello again}\n")
    project.write("agentlib_spy.py", "import pathlib\n\ndef produce(request):\n"
                                     "    pathlib.Path('produced.txt').write_text('ran')\n    return 'hello'\n")
    project.agents(project.root.joinpath("suites/agents.yaml").read_text().replace("agentlib:produce",
                                                                                   "agentlib_spy:produce"))
    project.cases("broken", "agent: writer\ncases:\n  - id: [not, an, id]\n")
    result = project.run("suites/", "--harness-concurrency", "4")
    assert result.ret == 2 and "Interrupted: 1 error during collection" in result.stdout.str()
    assert not (project.root / "produced.txt").exists()
    assert not (project.work / "harness.db").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--harness-indeterminate", "bogus"), "argument --harness-indeterminate: 'bogus' is not one of skip, fail"),
    (("--rubric", "nope"), "--rubric nope: no such rubric (known: quality)"),
])
def test_bad_option_is_a_usage_error(project: Project, args: tuple[str, ...], message: str) -> None:
    project.standard(CASES)
    result = project.run("suites/", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    errors = [line for line in result.errlines if line.strip()]
    assert any(message in line for line in errors), errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not project.work.exists()


def test_bad_ini_value_is_a_usage_error(project: Project) -> None:
    project.standard(CASES)
    project.ini("harness_indeterminate = maybe\n")
    result = project.run("suites/")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*harness_indeterminate*maybe*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
