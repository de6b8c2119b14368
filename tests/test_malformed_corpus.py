"""The malformed-input corpus (issue 10, "Bad input"): every broken rubric, agents.yaml, thresholds.yaml,
case file, input file, prompt, goal, idea, price table, judge answer, option, ini value and work folder
becomes ONE line naming the file (or the option), the field and the fix. Never a traceback, never accepted.

The bulk calls the loaders directly (a broken file in a fresh project each, milliseconds apiece); a modest
number of pytester runs cover what only a pytest run shows: options, ini values, the work folder, collection.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import QUALITY_RUBRIC, Project, error_sections, prompt_text
from harness.apps.tournament.ideas import parse_idea
from harness.apps.tournament.testing import synth_goal_md, value_idea
from harness.base import safe_regex
from harness.base.argtypes import choice, dollars, seconds, whole_number
from harness.base.errors import HarnessConfigError, ValidationFailed
from harness.base.requests import Subject
from harness.base.yamlfile import MAX_FILE_BYTES
from harness.checks import CheckContext, parse_check
from harness.evaluation.evaluate import evaluate
from harness.evaluation.llm_judge import LlmJudge
from harness.evaluation.runners import RunnerOutput
from harness.llm import ModelClient, ModelSettings, load_price_table
from harness.loading import BUILTIN_RUNNER_KINDS, load_cases, load_prompt, load_rubric, load_suite
from harness.loading.goal_file import load_goal
from harness.testing import FakeAnthropic, Reply

# --- the files of a sound project, which each bad input breaks in one place ---------------------------

REVIEW = """\
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
"""

AGENTS = """\
defaults:
  max_attempts: 3
  escalate_conditions: [exec_level_partner]
judge:
  model: claude-haiku-4-5
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    evaluator: prompts/judge.md
    reviser: {command: "python tools/revise.py", timeout_s: 60, env: [MY_TOKEN]}
"""

CASES = """\
agent: writer
cases:
  - id: greet
    inputs: {text: "hello", notes: {file: data/notes.txt}}
"""

THRESHOLDS = """\
defaults:
  pass_threshold: 0.8
agents:
  writer:
    max_attempts: 2
"""

GOAL = synth_goal_md()
IDEA = value_idea("Raise it", "optimization", 1.0, 2.0)
PRICES = "claude-haiku-4-5: {input: 1, output: 5}\n"

TARGETS = {
    "rubric": "rubrics/quality.yaml", "review": "rubrics/review.yaml", "agents": "suites/agents.yaml",
    "thresholds": "suites/thresholds.yaml", "cases": "suites/writer.cases.yaml", "input": "suites/data/notes.txt",
    "prompt": "suites/prompts/judge.md", "goal": "goals/synth/goal.md", "idea": "goals/synth/ideas/01_raise.md",
    "prices": "prices.yaml",
}
SOUND = {
    "rubrics/quality.yaml": QUALITY_RUBRIC, "rubrics/review.yaml": REVIEW, "suites/agents.yaml": AGENTS,
    "suites/writer.cases.yaml": CASES, "suites/data/notes.txt": "some notes\n",
    "suites/prompts/judge.md": prompt_text(), "goals/synth/goal.md": GOAL, "goals/synth/ideas/01_raise.md": IDEA,
    "prices.yaml": PRICES,
}
BIG = MAX_FILE_BYTES + 1024 * 1024  # a file over the size limit
NOT_UTF8 = b"caf\xe9"  # Latin-1 bytes, as an old editor saves them


Contents = str | bytes | Callable[[], str | bytes]


@dataclass(frozen=True)
class Bad:
    """One broken input: the whole file of ``kind`` (``TARGETS``), and what its one line must say."""

    kind: str
    contents: Contents
    expect: tuple[str, ...]
    file: str | None = None  # the file the line names, when it is not the broken one (default TARGETS[kind])
    extra: dict[str, str | bytes] = field(default_factory=dict)  # more files the input needs


def edit(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} not in the text"
    return text.replace(old, new, 1)


def latin1(text: str, old: str) -> bytes:
    """``text`` saved with one non-UTF-8 byte in place of ``old``'s first letter."""
    assert old in text
    return text.encode("utf-8").replace(old.encode(), NOT_UTF8 + old[1:].encode(), 1)


def padded(text: str) -> Callable[[], str]:
    return lambda: text + "# " + "x" * BIG + "\n"


def rubric(old: str, new: str) -> str:
    return edit(QUALITY_RUBRIC, old, new)


def check(spec: str) -> str:
    return rubric("      contains: {all: [hello]}", f"      {spec}")


def review(old: str, new: str) -> str:
    return edit(REVIEW, old, new)


def agents(old: str, new: str) -> str:
    return edit(AGENTS, old, new)


def cases(old: str, new: str) -> str:
    return edit(CASES, old, new)


def shaped(keys: str, expect: tuple[str, ...], *, file: str | None = None,
           refs: str = '{"id": "q1", "note": "a"}\n') -> Bad:
    """A dataset of two rows (id, text) with ``keys`` added to its ``dataset:``; data/refs.jsonl beside it."""
    return Bad("cases", f"agent: writer\ndataset: {{file: data/qa.jsonl, {keys}}}\n", expect, file=file,
               extra={"suites/data/qa.jsonl": '{"id": "q1", "text": "hello"}\n{"id": "q2", "text": "hi"}\n',
                      "suites/data/refs.jsonl": refs})


def goal(old: str, new: str) -> str:
    return edit(GOAL, old, new)


def idea(old: str, new: str) -> str:
    return edit(IDEA, old, new)


ALIAS_BOMB = "metadata: {name: Q, version: '1.0.0'}\nthreshold: 0.8\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10 if i else ['x'] * 10)}]\n" for i in range(8))
DOT = "suites/writer.cases.yaml"

CORPUS: dict[str, Bad] = {
    # --- rubrics (seed 000 dimensions) ---------------------------------------------------------------------
    "rubric-not-utf8": Bad("rubric", latin1(QUALITY_RUBRIC, "Says hello"), (
        "rubrics/quality.yaml: line 9: byte 0xe9 at column 22 (byte offset 137)", "is not UTF-8",
        "(fix: save the file as UTF-8)")),
    "rubric-over-the-size-limit": Bad("rubric", padded(QUALITY_RUBRIC), (
        "rubrics/quality.yaml: file is 5", "over the 4 MB limit for a file the harness reads")),
    "rubric-alias-bomb": Bad("rubric", ALIAS_BOMB, ("expands to more than 2,000,000 values",)),
    "rubric-brackets-nested-too-deep": Bad("rubric", "a: " + "[" * 60_000, ("nested more than 1000 levels",)),
    # Deep blocks and control characters are measured by the harness, not worded by the YAML library: the
    # line stays the same whatever the library's release says (PyYAML 6.0.4 changed its words for deep blocks).
    "rubric-blocks-nested-too-deep": Bad("rubric", "".join(" " * i + "a:\n" for i in range(1500)),
                                         ("rubrics/quality.yaml: indented blocks nested more than 1000 levels deep "
                                          "(fix: flatten the YAML structure)",)),
    "rubric-sequences-nested-too-deep": Bad("rubric", "- " * 1500 + "a\n", (
        "indented blocks nested more than 1000 levels deep",)),
    "rubric-control-character": Bad("rubric", rubric("Says hello", "Says \x01hello"), (
        "rubrics/quality.yaml: line 9: control character U+0001 at column 24 is not allowed in YAML (fix: remove it, "
        "or write it as the escape \"\\x01\" in a double-quoted string)",)),
    "rubric-invalid-yaml": Bad("rubric", rubric("threshold: 0.8", "threshold: [0.8"), ("line ", "fix the YAML")),
    "rubric-duplicate-key": Bad("rubric", rubric("  concise:\n", "  greeting:\n"), (
        "duplicate key 'greeting'",)),
    "rubric-unquoted-slot-as-key": Bad("rubric", rubric("threshold: 0.8", "threshold: {{threshold}}"), (
        "line 5: a mapping or list used as a key (is `{{...}}` a template slot that needs quotes?)",)),
    "rubric-empty": Bad("rubric", "", ("expected a mapping, got nothing",)),
    "rubric-a-list": Bad("rubric", "- metadata\n", ("expected a mapping, got ['metadata']",)),
    "rubric-unknown-key": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nthresold: 0.9"), (
        "thresold: unknown key (did you mean 'threshold'?)",)),
    "rubric-unknown-dimension-key": Bad("rubric", rubric("    weight: 0.4", "    wieght: 0.4"), (
        "dimensions.concise.wieght: unknown key (did you mean 'weight'?)",)),
    "rubric-unknown-metadata-key": Bad("rubric", rubric("  agent: writer", "  agnet: writer"), (
        "metadata.agnet: unknown key (did you mean 'agent'?)",)),
    "rubric-missing-version": Bad("rubric", rubric('  version: "1.2.0"\n', ""), ("metadata.version: missing",)),
    "rubric-version-not-semver": Bad("rubric", rubric('"1.2.0"', '"v1"'), (
        "metadata.version: 'v1' is not a semantic version",)),
    "rubric-metadata-a-list": Bad("rubric", edit(QUALITY_RUBRIC, "metadata:\n  name: Quality\n  version: \"1.2.0\"\n"
                                                 "  agent: writer\n", "metadata: [Quality]\n"), (
        "metadata: expected a mapping, got ['Quality']",)),
    "rubric-threshold-above-1": Bad("rubric", rubric("threshold: 0.8", "threshold: 1.5"), (
        "threshold: 1.5 is outside 0..1",)),
    "rubric-threshold-nan": Bad("rubric", rubric("threshold: 0.8", "threshold: .nan"), (
        "threshold: expected a number, got nan",)),
    "rubric-threshold-text": Bad("rubric", rubric("threshold: 0.8", "threshold: high"), (
        "threshold: expected a number, got 'high'",)),
    "rubric-weights-not-summing": Bad("rubric", rubric("weight: 0.4", "weight: 0.3"), (
        "dimensions.*.weight: weights sum to 0.9",)),
    "rubric-negative-weight": Bad("rubric", rubric("weight: 0.4", "weight: -0.4"), (
        "dimensions.concise.weight: -0.4 is outside 0..1",)),
    "rubric-dimensions-a-list": Bad("rubric", edit(QUALITY_RUBRIC, QUALITY_RUBRIC[QUALITY_RUBRIC.index("dimensions:"):],
                                                   "dimensions: [concise]\n"),
                                    ("dimensions: expected a mapping of dimension",)),
    "rubric-bad-dimension-id": Bad("rubric", rubric("  concise:", "  'two words':"), (
        "dimensions.two words: dimension id 'two words' is not a valid id",)),
    "rubric-score-level-above-1": Bad("rubric", rubric('1.0: "hello is there"', '1.5: "hello is there"'), (
        "dimensions.greeting.scoring.1.5: 1.5 is outside 0..1",)),
    "rubric-score-level-not-a-number": Bad("rubric", rubric('1.0: "hello is there"', 'top: "hello is there"'), (
        "dimensions.greeting.scoring.top: score level 'top' is not a number",)),
    # --- a stepped scale (docs/material.md, "Scales and choices") ---
    "rubric-scale-step-zero": Bad("rubric", rubric("    check:\n      length: {max_words: 12}",
                                                   "    scale: [1, 10]\n    step: 0"), (
        "dimensions.concise.step: must be above 0, got 0", "step: 0.5")),
    "rubric-step-without-scale": Bad("rubric", rubric("    check:\n      length: {max_words: 12}", "    step: 0.5"), (
        "dimensions.concise.step: is the step between a scale's ratings, and this dimension has no scale",
        "add `scale: [1, 10]` beside it, or remove step")),
    "rubric-step-not-dividing-the-scale": Bad("rubric", rubric("    check:\n      length: {max_words: 12}",
                                                               "    scale: [1, 10]\n    step: 0.4"), (
        "dimensions.concise.step: 0.4 does not divide the scale [1, 10] into whole steps",)),
    "rubric-steps-written-for-step": Bad("rubric", rubric("    check:\n      length: {max_words: 12}",
                                                          "    scale: [1, 10]\n    steps: 0.5"), (
        "dimensions.concise.steps: is a list of evaluation steps, and 0.5 is a number", "write `step: 0.5`")),
    "rubric-unknown-check-kind": Bad("rubric", check("contain: {all: [hello]}"), (
        "dimensions.greeting.check.contain: unknown check kind 'contain'", "did you mean 'contains'?")),
    "rubric-invalid-regex": Bad("rubric", check("regex: '([a-z'"), (
        "dimensions.greeting.check.regex: invalid regular expression",)),
    "rubric-regex-nested-plus": Bad("rubric", check("regex: '(a+)+b'"), (
        "dimensions.greeting.check.regex: pattern '(a+)+b' can backtrack without bound", "nested quantifiers")),
    "rubric-regex-nested-star": Bad("rubric", check("regex: {pattern: '(a*)*'}"), (
        "dimensions.greeting.check.regex.pattern: pattern '(a*)*' can backtrack without bound",)),
    "rubric-regex-overlapping-alternatives": Bad("rubric", check("regex: '(a|a)*'"), (
        "can backtrack without bound", "alternatives that can match the same text")),
    "rubric-regex-prefix-alternatives": Bad("rubric", check("regex: '(?:ab|a)+c'"), ("alternatives that can match",)),
    "rubric-regex-optional-separator": Bad("rubric", check("regex: '^(\\w+\\s?)*$'"), (
        "pattern '^(\\\\w+\\\\s?)*$' can backtrack without bound",)),
    "rubric-regex-large-bounded-repeat": Bad("rubric", check("regex: '(a?){30}a{30}'"), ("nested quantifiers",)),
    "rubric-regex-mixed-runs": Bad("rubric", check("regex: '(\\d+|[a-z]+)+$'"), ("nested quantifiers",)),
    "rubric-date-pattern-nested": Bad("rubric", check("date_age: {max_days: 30, pattern: '((\\d+-?)+)'}"), (
        "dimensions.greeting.check.date_age.pattern: pattern", "can backtrack without bound")),
    "rubric-regex-flag": Bad("rubric", check("regex: {pattern: a, flags: iq}"), (
        "dimensions.greeting.check.regex.flags: unknown regex flag(s) 'q'",)),
    "rubric-check-option-near-miss": Bad("rubric", check("regex: {pattern: a, min_cout: 2}"), (
        "regex.min_cout: unknown key (did you mean 'min_count'?)",)),
    "rubric-match-location": Bad("rubric", check("match: {location: middle}"), (
        "dimensions.greeting.check.match.location: ", "middle")),
    "rubric-choice-not-a-letter": Bad("rubric", check("choice: Paris"), (
        "dimensions.greeting.check.choice: expected a letter (A, B, ...), got 'Paris'",)),
    "rubric-f1-normalize": Bad("rubric", check("f1: {normalize: [stemming]}"), (
        "dimensions.greeting.check.f1.normalize[0]: ",)),
    "rubric-examples-glob-matches-nothing": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                                 "  gold: ['examples/nope/*.md']"), (
        "examples.gold: 'examples/nope/*.md' matches no file",)),
    "rubric-example-glob-absolute": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                          "  gold: ['/etc/*']"), (
        "examples.gold: '/etc/*' is not a glob relative to the rubric file",)),
    "rubric-example-glob-outside": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                         "  anti_patterns: ['../../outside/*.txt']"), (
        "examples.anti_patterns: '../../outside/*.txt' matches", "outside the project")),
    "rubric-example-not-utf8": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                     "  gold: ['examples/*.md']"), (
        "rubrics/examples/good.md: line 2: byte 0xe9", "save the file as UTF-8"), file="rubrics/examples/good.md",
        extra={"rubrics/examples/good.md": b"# Good\nhello caf" + NOT_UTF8 + b"\n"}),
    "rubric-example-input-absolute-path": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                               "  inputs: {x: {file: /etc/passwd}}"), (
        "examples.inputs.x.file: /etc/passwd is outside the project", "harness_input_dirs")),
    "rubric-example-input-climbing-out": Bad("rubric", rubric("threshold: 0.8", "threshold: 0.8\nexamples:\n"
                                                              "  inputs: {x: {file: ../../../../../../etc/passwd}}"), (
        "examples.inputs.x.file: ../../../../../../etc/passwd is outside the project",)),

    # --- review rubrics (seed 003 criteria) ----------------------------------------------------------------
    "review-not-utf8": Bad("review", latin1(REVIEW, "hello appears"), (
        "rubrics/review.yaml: line 9:", "is not UTF-8", "save the file as UTF-8")),
    "review-scoring-mode": Bad("review", review("scoring_mode: weighted", "scoring_mode: graded"), (
        "scoring_mode: unknown scoring mode 'graded'", "use one of: binary, weighted")),
    "review-no-criteria": Bad("review", REVIEW[:REVIEW.index("criteria:")] + "criteria: []\n", (
        "criteria: expected a list with at least one criterion",)),
    "review-criterion-missing-condition": Bad("review", review('    fail_condition: "no hello"\n', ""), (
        "criteria[0].fail_condition: missing",)),
    "review-criterion-weight-zero": Bad("review", review("    check:", "    weight: 0\n    check:"), (
        "criteria[0].weight: weight must be positive, got 0",)),
    "review-unknown-key-near-miss": Bad("review", review("pass_threshold: 0.8", "pass_treshold: 0.8"), (
        "pass_treshold: unknown key (did you mean 'pass_threshold'?)",)),
    "review-bad-rubric-id": Bad("review", review("rubric_id: review", "rubric_id: 'my review'"), (
        "rubric_id: rubric id 'my review' is not a valid id",)),
    "review-output-schema-invalid": Bad("review", REVIEW + "output_schema: {type: nonsense}\n", (
        "output_schema.type: not a valid JSON Schema",)),
    "review-unknown-criterion-key": Bad("review", review("    name: Greets", "    nmae: Greets"), (
        "criteria[0].nmae: unknown key (did you mean 'name'?)",)),

    # --- agents.yaml ---------------------------------------------------------------------------------------
    "agents-not-utf8": Bad("agents", latin1(AGENTS, "exec_level_partner"), (
        "suites/agents.yaml: line 3:", "is not UTF-8", "save the file as UTF-8")),
    "agents-over-the-size-limit": Bad("agents", padded(AGENTS), ("over the 4 MB limit",)),
    "agents-judge-model-empty": Bad("agents", agents("model: claude-haiku-4-5", 'model: ""'), (
        "judge.model: '' is not a model name", "remove the line for the default")),
    "agents-judge-model-blank": Bad("agents", agents("model: claude-haiku-4-5", 'model: "  "'), (
        "judge.model: '  ' is not a model name",)),
    "agents-agent-judge-model-empty": Bad("agents", agents("    evaluator:",
                                                           "    judge: {model: ''}\n    evaluator:"), (
        "agents.writer.judge.model: '' is not a model name",)),
    "agents-judge-unknown-key": Bad("agents", agents("model: claude-haiku-4-5", "modle: claude-haiku-4-5"), (
        "judge.modle: unknown key (did you mean 'model'?)",)),
    "agents-judge-temperature": Bad("agents", agents("  model: claude-haiku-4-5", "  temperature: 3"), (
        "judge.temperature: 3 is outside 0..2",)),
    "agents-judge-max-tokens-zero": Bad("agents", agents("  model: claude-haiku-4-5", "  max_tokens: 0"), (
        "judge.max_tokens: expected a whole number >= 1, got 0",)),
    "agents-judge-stop-text": Bad("agents", agents("  model: claude-haiku-4-5", '  stop: "\\n\\n"'), (
        "judge.stop: expected a list of non-empty text (the sequences that end an answer), got '\\n\\n'",
        'write e.g. `stop: ["\\n\\n"]`')),
    "agents-model-stop-empty-text": Bad("agents", agents("judge:\n  model: claude-haiku-4-5",
                                                         "model:\n  stop: ['']"), (
        "model.stop: expected a list of non-empty text",)),
    "agents-judge-top-p-above-1": Bad("agents", agents("  model: claude-haiku-4-5", "  top_p: 1.5"), (
        "judge.top_p: 1.5 is outside 0..1",)),
    "agents-judge-seed-text": Bad("agents", agents("  model: claude-haiku-4-5", "  seed: lucky"), (
        "judge.seed: expected a whole number >= 0, got 'lucky'",)),
    "agents-weighted-score-without-verdict": Bad("agents", agents("    evaluator: prompts/judge.md",
                                                                  "    evaluator: {prompt: prompts/judge.md, "
                                                                  "score: weighted}"), (
        "agents.writer.evaluator.score: weighs the rating by the probabilities of its token in a free-text answer",
        "add `verdict: PATTERN`")),
    "agents-judge-timeout-negative": Bad("agents", agents("  model: claude-haiku-4-5", "  timeout_s: -5"), (
        "judge.timeout_s: -5 is outside",)),
    "agents-escalate-conditions-text": Bad("agents", agents("escalate_conditions: [exec_level_partner]",
                                                            "escalate_conditions: exec_level_partner, low_fit"), (
        "defaults.escalate_conditions: expected a list of text, got 'exec_level_partner, low_fit'",
        "escalate_conditions: [first, second]")),
    "agents-agent-escalate-conditions-text": Bad("agents", agents("    evaluator:", "    escalate_conditions: x\n"
                                                                  "    evaluator:"), (
        "agents.writer.escalate_conditions: expected a list of text, got 'x'",)),
    "agents-escalate-conditions-numbers": Bad("agents", agents("[exec_level_partner]", "[1, 2]"), (
        "defaults.escalate_conditions[0]: expected non-empty text, got 1",)),
    "agents-command-timeout-negative": Bad("agents", agents("timeout_s: 60", "timeout_s: -1"), (
        "agents.writer.reviser.timeout_s: expected a positive number of seconds, got -1",)),
    "agents-command-timeout-zero": Bad("agents", agents("timeout_s: 60", "timeout_s: 0"), (
        "agents.writer.reviser.timeout_s: expected a positive number of seconds, got 0",)),
    "agents-command-timeout-infinite": Bad("agents", agents("timeout_s: 60", "timeout_s: .inf"), (
        "reviser.timeout_s: expected a positive number of seconds, got inf",)),
    "agents-command-timeout-nan": Bad("agents", agents("timeout_s: 60", "timeout_s: .nan"), (
        "reviser.timeout_s: expected a positive number of seconds, got nan",)),
    "agents-command-timeout-text": Bad("agents", agents("timeout_s: 60", "timeout_s: '60'"), (
        "reviser.timeout_s: expected a positive number of seconds, got '60'",)),
    "agents-command-option-near-miss": Bad("agents", agents("timeout_s: 60", "timeout: 60"), (
        "agents.writer.reviser.timeout: unknown key (did you mean 'timeout_s'?)", "use one of: timeout_s, env")),
    "agents-command-env-text": Bad("agents", agents("env: [MY_TOKEN]", "env: MY_TOKEN"), (
        "agents.writer.reviser.env: expected a list of environment variable names",)),
    "agents-command-env-bad-name": Bad("agents", agents("env: [MY_TOKEN]", "env: [MY-TOKEN]"), (
        "agents.writer.reviser.env: expected a list of environment variable names",)),
    "agents-unknown-agent-key": Bad("agents", agents("    producer:", "    producr:"), (
        "agents.writer.producr: unknown key (did you mean 'producer'?)",)),
    "agents-missing-producer": Bad("agents", agents('    producer: {python: "agentlib:produce"}\n', ""), (
        "agents.writer.producer: missing",)),
    "agents-unknown-rubric": Bad("agents", agents("rubric: quality", "rubric: qualty"), (
        "agents.writer.rubric: no rubric 'qualty'", "use one of: quality, review")),
    "agents-runner-kind-near-miss": Bad("agents", agents('{python: "agentlib:produce"}', '{pyhton: "agentlib:x"}'), (
        "agents.writer.producer: cannot tell the kind of runner (did you mean 'python'?)",)),
    "agents-unknown-runner-kind": Bad("agents", agents('{python: "agentlib:produce"}', "{kind: http, target: x}"), (
        "agents.writer.producer.kind: unknown runner kind 'http'",)),
    "agents-python-target": Bad("agents", agents('"agentlib:produce"', '"agentlib.produce"'), (
        "agents.writer.producer.python: 'agentlib.produce' is not module:function",)),
    "agents-producer-not-a-prompt": Bad("agents", agents('{python: "agentlib:produce"}', "produce.txt"), (
        "agents.writer.producer: 'produce.txt' is not a prompt file",)),
    "agents-max-attempts-zero": Bad("agents", agents("max_attempts: 3", "max_attempts: 0"), (
        "defaults.max_attempts: expected a whole number >= 1, got 0",)),
    "agents-pass-threshold-above-1": Bad("agents", agents("  max_attempts: 3", "  pass_threshold: 1.2"), (
        "defaults.pass_threshold: 1.2 is outside 0..1",)),
    "agents-default-key-near-miss": Bad("agents", agents("  max_attempts: 3", "  max_attempt: 3"), (
        "defaults.max_attempt: unknown key (did you mean 'max_attempts'?)",)),
    "agents-escalate-on-fail-text": Bad("agents", agents("  max_attempts: 3", "  escalate_on_fail: sometimes"), (
        "defaults.escalate_on_fail: expected true or false, got 'sometimes'",)),
    "agents-margin-in-defaults": Bad("agents", agents("  max_attempts: 3", "  margin_required: 0.1"), (
        "defaults.margin_required: is per agent",)),
    "agents-no-agents": Bad("agents", AGENTS[:AGENTS.index("agents:")] + "agents: {}\n", (
        "agents: expected a mapping of agent names",)),
    "agents-bad-agent-name": Bad("agents", agents("  writer:", "  'my writer':"), (
        "agents.my writer: agent name 'my writer' is not a valid id",)),
    "agents-top-level-near-miss": Bad("agents", agents("judge:", "judges:"), (
        "judges: unknown key (did you mean 'judge'?)",)),

    # --- thresholds.yaml beside agents.yaml ----------------------------------------------------------------
    "thresholds-not-utf8": Bad("thresholds", latin1(THRESHOLDS, "pass_threshold"), (
        "suites/thresholds.yaml: line 2:", "is not UTF-8")),
    "thresholds-unknown-agent": Bad("thresholds", edit(THRESHOLDS, "  writer:", "  writr:"), (
        "suites/thresholds.yaml: agents.writr: unknown key (did you mean 'writer'?)",)),
    "thresholds-value-out-of-range": Bad("thresholds", edit(THRESHOLDS, "0.8", "2"), (
        "suites/thresholds.yaml: defaults.pass_threshold: 2 is outside 0..1",)),
    "thresholds-agent-value": Bad("thresholds", edit(THRESHOLDS, "max_attempts: 2", "max_attempts: 0"), (
        "suites/thresholds.yaml: agents.writer.max_attempts: expected a whole number >= 1, got 0",)),
    "thresholds-conditions-text": Bad("thresholds", edit(THRESHOLDS, "  pass_threshold: 0.8",
                                                         "  escalate_conditions: a, b"), (
        "suites/thresholds.yaml: defaults.escalate_conditions: expected a list of text",)),
    "thresholds-disagrees": Bad("thresholds", edit(THRESHOLDS, "  pass_threshold: 0.8", "  max_attempts: 5"), (
        "suites/thresholds.yaml: defaults.max_attempts: is 5 here but 3 in agents.yaml",)),

    # --- case files and their input files ------------------------------------------------------------------
    "cases-not-utf8": Bad("cases", latin1(CASES, "hello"), (f"{DOT}: line 4:", "is not UTF-8",
                                                          "save the file as UTF-8")),
    "cases-over-the-size-limit": Bad("cases", padded(CASES), ("over the 4 MB limit",)),
    "cases-input-absolute-path": Bad("cases", cases("data/notes.txt", "/etc/passwd"), (
        f"{DOT}: cases[0].inputs.notes.file: /etc/passwd is outside the project",
        "move the file into the project, or list its folder in ini harness_input_dirs")),
    "cases-input-climbing-out": Bad("cases", cases("data/notes.txt", "../../../../../../../etc/passwd"), (
        "cases[0].inputs.notes.file: ../../../../../../../etc/passwd is outside the project",)),
    "cases-input-climbing-out-and-back": Bad("cases", cases("data/notes.txt", "../../outside/notes.txt"), (
        "cases[0].inputs.notes.file: ../../outside/notes.txt is outside the project",)),
    "cases-whole-inputs-file-outside": Bad("cases", cases('{text: "hello", notes: {file: data/notes.txt}}',
                                                          "{file: /etc/hostname}"), (
        "cases[0].inputs.file: /etc/hostname is outside the project",)),
    "cases-shared-inputs-outside": Bad("cases", "inputs: {file: /etc/passwd}\n" + CASES, (
        f"{DOT}: inputs.file: /etc/passwd is outside the project",)),
    "cases-input-missing": Bad("cases", cases("data/notes.txt", "data/nowhere.txt"), (
        "cases[0].inputs.notes.file: cannot read", "fix the path")),
    "cases-whole-inputs-missing": Bad("cases", cases('{text: "hello", notes: {file: data/notes.txt}}',
                                                     "{file: data/nowhere.yaml}"), (
        "cases[0].inputs.file: cannot read",)),
    "cases-whole-inputs-a-list": Bad("cases", cases('{text: "hello", notes: {file: data/notes.txt}}',
                                                    "{file: data/list.yaml}"), (
        "cases[0].inputs.file: expected a mapping of input names in data/list.yaml, got ['a', 'b']",),
        extra={"suites/data/list.yaml": "- a\n- b\n"}),
    "cases-input-path-empty": Bad("cases", cases("data/notes.txt", "''"), (
        "cases[0].inputs.notes.file: expected a file path, got ''",)),
    "cases-input-path-nul": Bad("cases", cases("data/notes.txt", '"data/notes\\0.txt"'), (
        "cases[0].inputs.notes.file: expected a file path",)),
    "cases-input-path-a-list": Bad("cases", cases("data/notes.txt", "[a, b]"), (
        "cases[0].inputs.notes.file: expected a file path, got ['a', 'b']",)),
    "cases-inputs-a-list": Bad("cases", cases('{text: "hello", notes: {file: data/notes.txt}}', "[hello]"), (
        "cases[0].inputs: expected a mapping of input names",)),
    "cases-duplicate-id": Bad("cases", CASES + "  - id: greet\n", ("cases[1].id: duplicate case id 'greet'",)),
    "cases-missing-id": Bad("cases", CASES + "  - inputs: {text: hi}\n", ("cases[1].id: missing",)),
    "cases-bad-id": Bad("cases", cases("id: greet", "id: 'two words'"), (
        "cases[0].id: case id 'two words' is not a valid id",)),
    "cases-key-near-miss": Bad("cases", cases("inputs:", "input:"), (
        "cases[0].input: unknown key (did you mean 'inputs'?)",)),
    "cases-top-key-near-miss": Bad("cases", cases("agent: writer", "agnet: writer"), (
        "agnet: unknown key (did you mean 'agent'?)",)),
    "cases-unknown-agent": Bad("cases", cases("agent: writer", "agent: ghost"), (
        "agent: unknown agent 'ghost'", "use one of: writer")),
    "cases-today-not-a-date": Bad("cases", CASES + "    today: tomorrow\n", (
        "cases[0].today: expected a date, got 'tomorrow'",)),
    "cases-no-cases": Bad("cases", "agent: writer\ncases: []\n", ("cases: expected a list with at least one case",)),
    "cases-flags-numbers": Bad("cases", CASES + "    flags: [1, 2]\n", (
        "cases[0].flags[0]: expected non-empty text, got 1",)),
    "cases-beside-a-dataset": Bad("cases", CASES + "dataset: {file: data/qa.jsonl}\n", (
        "suites/writer.cases.yaml: cases: given beside dataset:, but a case file takes its cases from one of them "
        "(fix: move the hand-written cases to a case file of their own)",),
        extra={"suites/data/qa.jsonl": '{"text": "hello"}\n'}),
    "dataset-empty": Bad("cases", "agent: writer\ndataset: {file: data/qa.jsonl}\n", (
        "suites/data/qa.jsonl: the dataset has no rows, so it gives no cases (fix: add rows",),
        file="suites/data/qa.jsonl", extra={"suites/data/qa.jsonl": "\n\n"}),
    "dataset-csv-header-only": Bad("cases", "agent: writer\ndataset: {file: data/qa.csv}\n", (
        "suites/data/qa.csv: the dataset has no rows",), file="suites/data/qa.csv",
        extra={"suites/data/qa.csv": "text\n"}),
    "dataset-sampled-empty": Bad("cases", "agent: writer\ndataset: {file: data/qa.jsonl, sample: 3}\n", (
        "suites/data/qa.jsonl: the dataset has no rows",), file="suites/data/qa.jsonl",
        extra={"suites/data/qa.jsonl": ""}),
    "dataset-csv-nul-character": Bad("cases", "agent: writer\ndataset: {file: data/qa.csv}\n", (
        "suites/data/qa.csv: row 2 (line 3): holds a NUL character: a CSV file is text (is it UTF-16, or binary?) "
        "(fix: save the file as UTF-8 CSV, without NUL characters)",), file="suites/data/qa.csv",
        extra={"suites/data/qa.csv": 'text\nhello\n"hel\x00lo"\n'}),
    "dataset-csv-utf16": Bad("cases", "agent: writer\ndataset: {file: data/qa.csv}\n", (
        "suites/data/qa.csv: line 1 (the header): holds a NUL character",), file="suites/data/qa.csv",
        extra={"suites/data/qa.csv": "text\nhello\n".encode("utf-16-le")}),
    # data shaping (docs/material.md, "Shaping data")
    "dataset-filter-unknown-operator": shaped("filter: {text: {contains: hi}}", (
        "suites/writer.cases.yaml: dataset.filter.text.contains: unknown key", "use one of: equals, in, matches")),
    "dataset-filter-in-not-a-list": shaped("filter: {text: {in: hello}}", (
        "dataset.filter.text.in: expected a non-empty list of values, got 'hello'",)),
    "dataset-filter-backtracks": shaped("filter: {text: {matches: '(a+)+$'}}", (
        "dataset.filter.text.matches: pattern '(a+)+$' can backtrack without bound",)),
    "dataset-filter-passes-nothing": shaped("filter: {txt: hello}", (
        "dataset.filter: none of the 2 rows read passes the filter (no row has a column 'txt'), so the dataset "
        "gives no cases",)),
    "dataset-join-on-is-yaml-true": shaped("join: {file: data/refs.jsonl, on: id}", (
        "dataset.join.on: YAML reads `on:` as true", "write `key: COLUMN`")),
    "dataset-join-no-key": shaped("join: {file: data/refs.jsonl}", ("dataset.join.key: missing",)),
    "dataset-join-duplicate-key": shaped("join: {file: data/refs.jsonl, key: id}", (
        "suites/data/refs.jsonl: row 2: id 'q1' again (row 1 has it too): dataset.join needs one row per key",
        "keep one row per id in refs.jsonl"), file="suites/data/refs.jsonl",
        refs='{"id": "q1", "note": "a"}\n{"id": "q1", "note": "b"}\n'),
    "dataset-join-no-match": shaped("join: {file: data/refs.jsonl, key: id, missing: error}", (
        "suites/data/qa.jsonl: row 2: refs.jsonl has no row with id 'q2' (dataset.join)", "missing: drop"),
        file="suites/data/qa.jsonl"),
    "dataset-join-column-clash": shaped("join: {file: data/refs.jsonl, key: id}", (
        "suites/data/qa.jsonl: row 1: the row and refs.jsonl both have a column 'text'", "`as: ref`"),
        file="suites/data/qa.jsonl", refs='{"id": "q1", "text": "a"}\n'),
    "dataset-join-missing-choice": shaped("join: {file: data/refs.jsonl, key: id, missing: skip}", (
        "dataset.join.missing: unknown missing 'skip'", "use one of: keep, drop, error")),
    "dataset-extract-no-match": shaped("extract: {final: {from: text, regex: '#### (\\d+)'}}", (
        "suites/data/qa.jsonl: row 1: dataset.extract.final: the regex '#### (\\\\d+)' does not match its text "
        "('hello')",), file="suites/data/qa.jsonl"),
    "dataset-extract-no-from": shaped("extract: {final: {regex: x}}", (
        "dataset.extract.final: expected a mapping with `from:` and `regex:`",)),
    "dataset-fewshot-no-template": shaped("fewshot: {file: data/qa.jsonl, n: 1}", (
        "dataset.fewshot.template: missing",)),
    "dataset-fewshot-too-few": shaped("fewshot: {file: data/refs.jsonl, n: 5, template: '{note}'}", (
        "dataset.fewshot.n: refs.jsonl has 1 example, fewer than n (5)", "lower n")),
    "dataset-fewshot-split-of-a-file": shaped("fewshot: {split: train, n: 1, template: '{text}'}", (
        "dataset.fewshot.split: is a split of a Hugging Face dataset, and this dataset is a file",)),
    "dataset-template-unknown-filter": shaped("inputs: {t: '{text|upper}'}", (
        "dataset.inputs.t: {text|upper} uses the filter 'upper', which does not exist (filters: json, letter, "
        "lettered, letters, numbered)",)),
    "dataset-filter-refuses-the-value": shaped("inputs: {t: '{text|lettered}'}", (
        "suites/data/qa.jsonl: row 1: dataset.inputs.t: lettered takes a list, got 'hello'",),
        file="suites/data/qa.jsonl"),
    "rubric-transform-regex-group": Bad("rubric", rubric("threshold: 0.8\n", "threshold: 0.8\n"
                                                         "transform: {regex: '(\\d+)', group: 3}\n"), (
        "transform.group: the pattern has 1 group(s), not 3",)),
    "agents-template-unknown-filter": Bad("agents", agents('producer: {python: "agentlib:produce"}',
                                                           "producer: {template: prompts/t.txt, model: "
                                                           "claude-haiku-4-5}"), (
        "agents.writer.producer.template: t.txt: {text|bogus} uses the filter 'bogus'",),
        extra={"suites/prompts/t.txt": "Say {text|bogus}\n"}),
    "input-text-not-utf8": Bad("input", b"first line\nsecond " + NOT_UTF8 + b"\n", (
        "suites/data/notes.txt: line 2: byte 0xe9 at column 11 (byte offset 21) is not UTF-8",
        "save the file as UTF-8")),
    "input-over-the-size-limit": Bad("input", lambda: "x" * BIG, ("suites/data/notes.txt: file is 5",
                                                                  "over the 4 MB limit")),
    "input-yaml-not-utf8": Bad("cases", cases("data/notes.txt", "data/facts.yaml"), (
        "suites/data/facts.yaml: line 1:", "is not UTF-8"), file="suites/data/facts.yaml",
        extra={"suites/data/facts.yaml": b"city: Bogot" + NOT_UTF8 + b"\n"}),
    "input-yaml-invalid": Bad("cases", cases("data/notes.txt", "data/facts.yaml"), (
        "suites/data/facts.yaml: line ", "fix the YAML syntax"), file="suites/data/facts.yaml",
        extra={"suites/data/facts.yaml": "city: [Bogota\n"}),
    "input-json-invalid": Bad("cases", cases("data/notes.txt", "data/facts.json"), (
        "suites/data/facts.json: line 1: invalid JSON", "fix the JSON"), file="suites/data/facts.json",
        extra={"suites/data/facts.json": "{city: Bogota}"}),
    "input-json-nested-too-deep": Bad("cases", cases("data/notes.txt", "data/facts.json"), (
        "suites/data/facts.json: JSON nested too deeply",), file="suites/data/facts.json",
        extra={"suites/data/facts.json": "[" * 100_000 + "]" * 100_000}),

    # --- prompt files ----------------------------------------------------------------------------------------
    "prompt-not-utf8": Bad("prompt", latin1(prompt_text(), "Some examples"), (
        "suites/prompts/judge.md: line ", "is not UTF-8", "save the file as UTF-8")),
    "prompt-over-the-size-limit": Bad("prompt", lambda: prompt_text() + "x" * BIG, ("over the 4 MB limit",)),
    "prompt-missing-section": Bad("prompt", prompt_text(without="Constraints"), (
        "suites/prompts/judge.md: ## Constraints: missing or empty section: Constraints",)),
    "prompt-empty-section": Bad("prompt", prompt_text().replace("Some examples.", ""), (
        "## Examples: missing or empty section: Examples",)),
    "prompt-empty-file": Bad("prompt", "", ("missing or empty sections: Role, Inputs",)),
    "prompt-missing-file": Bad("agents", agents("prompts/judge.md", "prompts/nowhere.md"), (
        "suites/agents.yaml: agents.writer.evaluator: prompt file", "nowhere.md cannot be read")),

    # --- files a suite names, and code data names (data is data) --------------------------------------------
    "agents-prompt-outside": Bad("agents", agents("prompts/judge.md", "../../outside/judge.md"), (
        "suites/agents.yaml: agents.writer.evaluator: ../../outside/judge.md is outside the project",
        "list its folder in ini harness_input_dirs")),
    "agents-prompt-absolute": Bad("agents", agents("prompts/judge.md", "{prompt: /etc/passwd}"), (
        "agents.writer.evaluator.prompt: /etc/passwd is outside the project",)),
    "agents-judge-template-outside": Bad("agents", agents("prompts/judge.md", "{template: ../../outside/notes.txt}"), (
        "agents.writer.evaluator.template: ../../outside/notes.txt is outside the project",)),
    "agents-template-climbing-out": Bad("agents", agents('{python: "agentlib:produce"}',
                                                         "{template: ../../../../../../../../etc/passwd}"), (
        "agents.writer.producer.template: ../../../../../../../../etc/passwd is outside the project",)),
    # --- chat templates (docs/material.md, "Chat templates"): the line names the template file and the message -------
    "chat-template-unknown-role": Bad("agents", agents("prompts/judge.md", "{template: judges/mt.json}"), (
        "suites/judges/mt.json: [1].role: unknown role 'judge'", "use one of: system, user, assistant"),
        file="suites/judges/mt.json", extra={"suites/judges/mt.json": '[{"role": "system", "content": "Be fair."}, '
                                                                      '{"role": "judge", "content": "{output}"}]'}),
    "chat-template-system-later": Bad("agents", agents("prompts/judge.md", "{template: judges/mt.yaml}"), (
        "suites/judges/mt.yaml: [1].role: a system message comes first, and only once",), file="suites/judges/mt.yaml",
        extra={"suites/judges/mt.yaml": "- {role: user, content: '{output}'}\n- {role: system, content: Be fair.}\n"
                                        "- {role: user, content: Grade it.}\n"}),
    "chat-template-ends-with-assistant": Bad("agents", agents("prompts/judge.md", "{template: judges/mt.yaml}"), (
        "suites/judges/mt.yaml: [1].role: the last message is an assistant message", "end the list with a user "
        "message"), file="suites/judges/mt.yaml",
        extra={"suites/judges/mt.yaml": "- {role: user, content: '{output}'}\n- {role: assistant, content: OK}\n"}),
    "chat-template-content-not-text": Bad("agents", agents("prompts/judge.md", "{template: judges/mt.yaml}"), (
        "suites/judges/mt.yaml: [0].content: expected the message's text, got",), file="suites/judges/mt.yaml",
        extra={"suites/judges/mt.yaml": "- {role: user, content: {text: '{output}'}}\n"}),
    "chat-template-not-a-list": Bad("agents", agents("prompts/judge.md", "{template: judges/mt.json}"), (
        "suites/judges/mt.json: expected a list of chat messages, each {role, content}",), file="suites/judges/mt.json",
        extra={"suites/judges/mt.json": '{"role": "user", "content": "{output}"}'}),
    "chat-template-leaks-expected": Bad("agents", agents('{python: "agentlib:produce"}',
                                                         "{template: prompts/ask.yaml}"), (
        "agents.writer.producer.template: ask.yaml (message [0]) uses {expected}, the expected answer",),
        extra={"suites/prompts/ask.yaml": "- {role: system, content: 'Say {expected}.'}\n"
                                          "- {role: user, content: '{text}'}\n"}),
    "agents-rubric-outside": Bad("agents", agents("rubric: quality", "rubric: ../../outside/quality.yaml"), (
        "agents.writer.rubric: ../../outside/quality.yaml is outside the project",)),
    "rubric-schema-file-outside": Bad("rubric", check("json_schema: {schema: /etc/passwd}"), (
        "dimensions.greeting.check.json_schema.schema: /etc/passwd is outside the project",)),
    "cases-check-names-code": Bad("cases", cases("notes: {file: data/notes.txt}}", "notes: {file: data/notes.txt}}\n"
                                                 "    checks: [{python: 'shutil:rmtree'}]"), (
        "cases[0].checks[0].check.python: 'shutil:rmtree' names code in module 'shutil'",
        "(fix: name the check in the rubric, or list the module in ini harness_data_modules)")),
    "cases-transform-names-code": Bad("cases", cases("notes: {file: data/notes.txt}}", "notes: {file: data/notes.txt}}"
                                                     "\n    checks: [{check: {regex: h}, transform: 'os:getcwd'}]"), (
        "cases[0].checks[0].transform: 'os:getcwd' names code in module 'os'",
        "(fix: name the transform in the rubric, or list the module in ini harness_data_modules)")),

    # --- goal files ------------------------------------------------------------------------------------------
    "goal-not-utf8": Bad("goal", latin1(GOAL, "Raise VALUE"), (
        "goals/synth/goal.md: line 4:", "is not UTF-8", "save the file as UTF-8")),
    "goal-over-the-size-limit": Bad("goal", lambda: GOAL + "x" * BIG, ("over the 4 MB limit",)),
    "goal-unknown-section": Bad("goal", goal("## Metric\n", "## Metrik\n"), (
        "goal.md:6: metrik: unknown section (did you mean 'metric'?)",)),
    "goal-section-twice": Bad("goal", GOAL + "\n## Agents\n- planners: 1\n", (
        "agents: section given twice", "merge the two '## Agents' sections")),
    "goal-field-twice": Bad("goal", goal("- timeout: 20", "- timeout: 20\n- timeout: 30"), (
        "benchmark.timeout: given twice", "the first is on line 12")),
    "goal-direction": Bad("goal", goal("direction: maximize", "direction: up"), (
        "goal.md:8: metric.direction: unknown direction 'up'", "use one of: maximize, minimize")),
    "goal-timeout-negative": Bad("goal", goal("- timeout: 20", "- timeout: -1"), (
        "benchmark.timeout: -1 is not above 0", "use a value above 0")),
    "goal-timeout-text": Bad("goal", goal("- timeout: 20", "- timeout: soon"), (
        "benchmark.timeout: expected a number, got 'soon'",)),
    "goal-field-near-miss": Bad("goal", goal("- planners: 0", "- planerz: 0"), (
        "agents.planerz: unknown field (did you mean 'planners'?)",)),
    "goal-regex-invalid": Bad("goal", goal("- timeout: 20", "- score_regex: `(unclosed`"), (
        "benchmark.score_regex: invalid regular expression", "fix the pattern")),
    "goal-regex-no-group": Bad("goal", goal("- timeout: 20", "- score_regex: `score=\\d+`"), (
        "needs one capturing group", "put the number in parentheses")),
    "goal-parse-regex-without-pattern": Bad("goal", goal("- timeout: 20", "- parse: regex"), (
        "benchmark.score_regex: missing (parse: regex needs it)",)),
    "goal-noise-runs": Bad("goal", goal("- noise_runs: 3", "- noise_runs: 1"), (
        "acceptance.noise_runs: expected a whole number >= 2, got 1", "write a whole number >= 2")),
    "goal-significance": Bad("goal", goal("- significance: mann_whitney", "- significance: t-test"), (
        "acceptance.significance: unknown significance 't_test'", "use one of: mann_whitney, bootstrap")),
    "goal-alpha": Bad("goal", goal("- post_merge_runs: 1", "- alpha: 2"), (
        "acceptance.alpha: 2 is not below 1", "use a value below 1")),
    "goal-executor-network": Bad("goal", goal("- env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP",
                                              "- executor_network: maybe"), (
        "sandbox.executor_network: expected on or off, got 'maybe'", "write '- executor_network: on'")),
    "goal-two-active-phases": Bad("goal", goal("| value >= 15 | pending |", "| value >= 15 | active |"), (
        "phases: 2 phases are active, expected exactly one",)),
    "goal-phase-status": Bad("goal", goal("| ok >= 1 | active |", "| ok >= 1 | done |"), (
        "phases.phase_1:", "Status is active, pending or completed")),
    "goal-phase-target-unreadable": Bad("goal", goal("| ok >= 1 | active |", "| ok is big | active |"), (
        "phases.phase_1.sub_score_targets: cannot read 'ok is big'",)),
    "goal-phase-target-not-a-number": Bad("goal", goal("| ok >= 1 | active |", "| ok >= 1.2.3 | active |"), (
        "phases.phase_1.sub_score_targets: '1.2.3' is not a number",)),
    "goal-phase-names-shared": Bad("goal", goal("| phase_2 | High |", "| phase_1 | High |"), (
        "phases: two phases share a name", "give every phase its own name")),
    "goal-table-columns": Bad("goal", goal("| Phase | Focus | Sub-Score Targets | Status |", "| Phase | Focus |"), (
        "phases: table columns are", "use the header")),
    "goal-table-row-cells": Bad("goal", goal("| phase_2 | High | value >= 15 | pending |", "| phase_2 | High |"), (
        "phases: row has 2 cells, expected 4", "give every row the cells")),
    "goal-family-tag": Bad("goal", GOAL + "\n## Approach families\n| Tag | Description |\n|---|---|\n"
                                          "| Micro-Tuning | small things |\n", (
        "approach_families.Micro-Tuning: a tag is lower case letters", "rename it")),
    "goal-family-description": Bad("goal", GOAL + "\n## Approach families\n| Tag | Description |\n|---|---|\n"
                                                  "| micro |  |\n", (
        "approach_families.micro: needs a description", "fill in the Description cell")),
    "goal-sealed-outside": Bad("goal", goal("- goals/synth/bench.py", "- /etc/passwd"), (
        "sealed_paths: '/etc/passwd' is not a path inside the repository",)),
    "goal-objective-empty": Bad("goal", goal("Raise VALUE in goals/synth/app/value.py.\n", ""), (
        "objective: is empty",)),
    "goal-bullet-unreadable": Bad("goal", goal("- planners: 0", "- planners 0"), (
        "agents: cannot read '- planners 0'", "write '- key: value'")),

    # --- ideas -----------------------------------------------------------------------------------------------
    "idea-not-utf8": Bad("idea", latin1(IDEA, "Setting VALUE"), ("goals/synth/ideas/01_raise.md: line 4:",
                                                                "is not UTF-8")),
    "idea-missing-family": Bad("idea", idea("- approach_family: optimization\n", ""), (
        "approach_family: missing", "add '- approach_family: ...'")),
    "idea-missing-hypothesis": Bad("idea", IDEA[:IDEA.index("- hypothesis")] + IDEA[IDEA.index("## Diff"):], (
        "hypothesis: missing",)),
    "idea-field-near-miss": Bad("idea", idea("- hypothesis:", "- hypotesis:"), (
        "hypotesis: unknown field (did you mean 'hypothesis'?)",)),
    "idea-unknown-section": Bad("idea", idea("## Diff", "## Dif"), (
        "dif: unknown section (did you mean 'diff'?)",)),
    "idea-code-outside-diff": Bad("idea", idea("## Diff\n", ""), ("diff: a code block outside '## Diff'",)),
    "idea-diff-not-closed": Bad("idea", IDEA.rstrip().removesuffix("```"), (
        "diff: the ```diff block is not closed", "end the diff with a ``` line")),
    "idea-not-a-diff": Bad("idea", idea("+++ b/goals/synth/app/value.py", "new file"), (
        "diff: not a unified diff", "paste the output of `git diff`")),
    "idea-no-diff-no-steps": Bad("idea", IDEA[:IDEA.index("## Diff")], ("steps: an idea without a diff needs steps",)),
    "idea-steps-unreadable": Bad("idea", idea("## Diff", "## Steps\nchange it\n\n## Diff"), (
        "steps: cannot read 'change it'", "write '1. path/to/file: what changes'")),

    # --- price tables (ini harness_prices) -------------------------------------------------------------------
    "prices-not-utf8": Bad("prices", b"claude-haiku-4-5: {input: 1, output: 5} # " + NOT_UTF8 + b"\n", (
        "prices.yaml: line 1:", "is not UTF-8")),
    "prices-missing-output": Bad("prices", "my-model: {input: 2}\n", ("prices.yaml: my-model.output: missing",)),
    "prices-negative": Bad("prices", "claude-haiku-4-5: {input: -1}\n", ("claude-haiku-4-5.input: -1 is below 0",)),
}


def _write(root: Path, relpath: str, contents: str | bytes) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(contents, bytes):
        path.write_bytes(contents)
    else:
        path.write_text(contents, encoding="utf-8")


def load(kind: str, root: Path) -> object:
    """What the harness does with a file of ``kind``: the loader a collection (or ``harness improve``) calls."""
    if kind in ("rubric", "review"):
        return load_rubric(root / TARGETS[kind], import_root=root, input_roots=(root,))
    if kind == "goal":
        return load_goal(root / TARGETS["goal"])
    if kind == "idea":
        return parse_idea(root / TARGETS["idea"])
    if kind == "prices":
        return load_price_table(root / "prices.yaml")
    suite = load_suite(root / "suites/agents.yaml", rubrics_dir=root / "rubrics", runner_kinds=BUILTIN_RUNNER_KINDS,
                       input_roots=(root,))
    if kind in ("cases", "input"):
        return load_cases(root / DOT, agents=suite.agents, input_roots=(root,))
    return suite


@pytest.mark.parametrize("bad", list(CORPUS.values()), ids=list(CORPUS))
def test_a_malformed_input_is_one_line_naming_file_field_and_fix(tmp_path: Path, bad: Bad) -> None:
    root = tmp_path.resolve() / "project"
    for relpath, text in SOUND.items():
        _write(root, relpath, text)
    _write(tmp_path, "outside/notes.txt", "secret\n")
    contents = bad.contents() if callable(bad.contents) else bad.contents
    _write(root, TARGETS[bad.kind], contents)
    for relpath, text in bad.extra.items():
        _write(root, relpath, text)

    with pytest.raises(HarnessConfigError) as info:  # anything else is the traceback a user would see
        load(bad.kind, root)

    line = info.value.message(root)
    assert "\n" not in line and len(line) < 1000, line
    assert line.startswith(bad.file or TARGETS[bad.kind]), line  # the file
    assert re.search(r"\(fix: \S[^)]*", line), line  # the fix
    for part in bad.expect:  # the field and the problem
        assert part in line, f"{part!r} not in {line!r}"


def test_the_corpus_covers_every_kind_of_input() -> None:
    kinds = {bad.kind for bad in CORPUS.values()}
    assert kinds == set(TARGETS)
    total = len(CORPUS) + len(JUDGE_ANSWERS) + len(OPTION_VALUES) + len(RUNS)
    assert total >= 120, total


# --- the sound project loads: the corpus breaks it, nothing else does -----------------------------------------


def test_the_sound_project_loads(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    for relpath, text in SOUND.items():
        _write(root, relpath, text)
    _write(root, TARGETS["thresholds"], THRESHOLDS)
    for kind in TARGETS:
        load(kind, root)


def test_inputs_file_loads_the_whole_mapping(tmp_path: Path) -> None:
    """README: ``inputs: {file: path}`` is a YAML or JSON file holding the whole mapping of inputs."""
    root = tmp_path.resolve()
    for relpath, text in SOUND.items():
        _write(root, relpath, text)
    _write(root, "suites/data/inputs.yaml", "text: hello\ncity: Bogotá\n")
    _write(root, "suites/data/more.json", json.dumps({"text": "hi", "n": 3}))
    _write(root, DOT, "agent: writer\ninputs: {file: data/more.json}\ncases:\n"
                      "  - id: a\n    inputs: {file: data/inputs.yaml}\n  - id: b\n")
    (first, second) = load("cases", root)
    assert first.inputs == {"text": "hello", "city": "Bogotá", "n": 3}
    assert second.inputs == {"text": "hi", "n": 3}


def test_input_files_may_come_from_a_folder_the_user_allows(tmp_path: Path) -> None:
    root = tmp_path.resolve() / "project"
    for relpath, text in SOUND.items():
        _write(root, relpath, text)
    _write(tmp_path, "shared/notes.txt", "shared notes\n")
    _write(root, DOT, cases("data/notes.txt", str(tmp_path.resolve() / "shared/notes.txt")))
    suite = load_suite(root / "suites/agents.yaml", rubrics_dir=root / "rubrics", runner_kinds=BUILTIN_RUNNER_KINDS)
    with pytest.raises(HarnessConfigError, match="is outside the project"):
        load_cases(root / DOT, agents=suite.agents, input_roots=(root,))
    (case,) = load_cases(root / DOT, agents=suite.agents, input_roots=(root, tmp_path.resolve() / "shared"))
    assert case.inputs["notes"] == "shared notes\n"


def test_a_symbolic_link_out_of_the_project_is_outside(tmp_path: Path) -> None:
    root = tmp_path.resolve() / "project"
    for relpath, text in SOUND.items():
        _write(root, relpath, text)
    (root / "suites/data/notes.txt").unlink()
    (root / "suites/data/notes.txt").symlink_to("/etc/hostname" if Path("/etc/hostname").exists() else "/etc/passwd")
    with pytest.raises(HarnessConfigError) as info:
        load("cases", root)
    assert "cases[0].inputs.notes.file: data/notes.txt is outside the project" in info.value.message(root)


def test_a_prompt_loaded_on_its_own_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_bytes(prompt_text().encode() + b"\n" + NOT_UTF8 + b"\n")
    with pytest.raises(HarnessConfigError, match=r"p.md: line \d+: byte 0xe9 .* \(fix: save the file as UTF-8\)"):
        load_prompt(path, source="agents.yaml: agents.x.evaluator")


# --- regexes that run too long are stopped ---------------------------------------------------------------------


def test_a_pattern_that_backtracks_too_long_is_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``\\d+\\d+x`` passes the load-time check (it is polynomial, not exponential) but takes minutes on 30,000
    digits: the helper process running it is killed and the check is one line naming the rubric field."""
    monkeypatch.setattr(safe_regex, "TIMEOUT_S", 0.5)
    found = parse_check({"regex": r"\d+\d+x"}, path=tmp_path / "r.yaml", field="dimensions.d.check",
                        base_dir=tmp_path, import_root=tmp_path)
    context = CheckContext(inputs={}, today=dt.date(2026, 1, 1))
    assert found.run("12 34x", context).score == 1.0
    with pytest.raises(HarnessConfigError) as info:
        found.run("1" * 30_000, context)
    line = info.value.message(tmp_path)
    assert line.startswith("r.yaml: dimensions.d.check.regex: pattern '\\\\d+\\\\d+x' did not finish within 0.5 s "
                           "on a 30,000-character text"), line
    assert "(fix: simplify the pattern" in line
    assert found.run("56 78x", context).score == 1.0  # a fresh helper takes over


@pytest.mark.parametrize("pattern", [r"BU:\s*(Bitwage|TeamPay)", r"^(\d{1,3}\.){3}\d{1,3}$", r"[a-z]+(?:-[a-z]+)*",
                                     r"(\w+\s)*end", r"(a+b+)*c", r"(?:foo|bar)+", r"(a++)+b", r"(?>a+)+b"])
def test_patterns_that_split_text_one_way_are_accepted(tmp_path: Path, pattern: str) -> None:
    parse_check({"regex": pattern}, path=tmp_path / "r.yaml", field="f", base_dir=tmp_path, import_root=tmp_path)


# --- judge answers ---------------------------------------------------------------------------------------------

JUDGED = """\
rubric_id: judged
version: "1.0.0"
scoring_mode: weighted
pass_threshold: 0.5
criteria:
  - {id: tone, name: Tone, description: warm, pass_condition: warm, fail_condition: cold}
"""
DIMENSIONS_RUBRIC = """\
metadata: {name: Judged, version: "1.0.0"}
threshold: 0.5
dimensions:
  accuracy: {weight: 0.5, description: right}
  clarity: {weight: 0.5, description: clear}
"""


def answer(**changes: object) -> dict[str, object]:
    good: dict[str, object] = {
        "overallScore": 0.9, "passed": True, "feedback": "fine", "suggestedFixes": [],
        "dimensionScores": {"accuracy": {"score": 0.9, "weight": 0.5, "reason": "right"},
                            "clarity": {"score": 0.8, "weight": 0.5, "reason": "clear"}}}
    for key, value in changes.items():
        if key.startswith("accuracy_"):
            good["dimensionScores"]["accuracy"][key.removeprefix("accuracy_")] = value  # type: ignore[index]
        elif value is None:
            good.pop(key)
        else:
            good[key] = value
    return good


JUDGE_ANSWERS = {
    "score-above-1": (answer(accuracy_score=1.7), "dimensionScores.accuracy.score: 1.7 is above the maximum 1"),
    "score-below-0": (answer(accuracy_score=-0.5), "dimensionScores.accuracy.score: -0.5 is below the minimum 0"),
    "score-text": (answer(accuracy_score="high"), "dimensionScores.accuracy.score: 'high' is text, not a number"),
    "reason-empty": (answer(accuracy_reason=""), "dimensionScores.accuracy.reason: empty"),
    "passed-text": (answer(passed="yes"), "passed: 'yes' is text, not true or false"),
    "fixes-text": (answer(suggestedFixes="add more"), "suggestedFixes: 'add more' is text, not a list"),
    "fix-a-number": (answer(suggestedFixes=["ok", 3]), "suggestedFixes[1]: 3 is a number, not text"),
    "feedback-10-mb": (answer(feedback="x" * 10_000_000),
                       "feedback: 10,000,000 characters, more than the maximum 20,000"),
    "too-many-fixes": (answer(suggestedFixes=["fix"] * 500), "suggestedFixes: "),
    "feedback-missing": (answer(feedback=None), "feedback: missing"),
    "dimension-missing": (answer(dimensionScores={"accuracy": {"score": 1, "weight": 0.5, "reason": "r"}}),
                          "dimensionScores.clarity: missing"),
    "dimension-unexpected": (answer(dimensionScores={**answer()["dimensionScores"],  # type: ignore[dict-item]
                                                     "extra": {"score": 1, "weight": 0, "reason": "r"}}),
                             "dimensionScores.extra: not expected (allowed: accuracy, clarity)"),
}


class Answers:
    """An evaluator (a Python or command runner) that answers with ``data``."""

    def __init__(self, data: object):
        self.data = data

    def run(self, request: dict[str, object]) -> RunnerOutput:
        return RunnerOutput(data=self.data)  # type: ignore[arg-type]


@pytest.mark.parametrize(("data", "expected"), list(JUDGE_ANSWERS.values()), ids=list(JUDGE_ANSWERS))
def test_a_bad_judge_answer_names_the_field_and_the_problem(tmp_path: Path, data: object, expected: str) -> None:
    """Type and range errors come first, so the one line shows them, not only missing fields."""
    path = tmp_path / "judged.yaml"
    path.write_text(DIMENSIONS_RUBRIC)
    rubric = load_rubric(path, import_root=tmp_path)
    context = CheckContext(inputs={}, today=dt.date(2026, 1, 1))
    with pytest.raises(ValidationFailed) as info:
        evaluate("an artifact", rubric=rubric, threshold=0.5, context=context, judge=Answers(data),
                 about=Subject("a", "c", 1, {}))
    message = str(info.value)
    assert "\n" not in message and len(message) < 2000, message[:3000]
    assert message.startswith("the evaluator's answer does not match EvaluatorOutput: ")
    assert expected in message.split(" (fix: ")[0], message
    assert "(fix: make the evaluator return" in message


def test_the_judge_models_invalid_answer_names_type_and_range_errors(fake_anthropic: FakeAnthropic,
                                                                      tmp_path: Path) -> None:
    """The Claude judge's answer fails twice with a missing field AND a range error: the line shows both."""
    path = tmp_path / "judged.yaml"
    path.write_text(DIMENSIONS_RUBRIC)
    rubric = load_rubric(path, import_root=tmp_path)
    bad = answer(accuracy_score=1.7, feedback=None, passed="yes")
    fake_anthropic.queue(Reply.tool(bad), Reply.tool(bad))
    client = ModelClient(ModelSettings(timeout_s=5, max_retries=0))
    prompt_path = tmp_path / "judge.md"
    prompt_path.write_text(prompt_text())
    judge = LlmJudge(load_prompt(prompt_path, source="agents.yaml"), client)
    with pytest.raises(ValidationFailed) as info:
        evaluate("an artifact", rubric=rubric, threshold=0.5, context=CheckContext({}, dt.date(2026, 1, 1)),
                 judge=judge, about=Subject("a", "c", 1, {}))
    client.close()
    message = str(info.value)
    assert "dimensionScores.accuracy.score: 1.7 is above the maximum 1; passed: 'yes' is text, not true or false; " \
           "feedback: missing" in message, message
    assert "(fix: " in message


# --- option values (the argparse types behind every option and its ini twin) -----------------------------------

OPTION_VALUES = {
    "max-cost-nan": (dollars, "nan", "'nan' is not an amount in USD such as 2.50 (fix: give a finite number"),
    "max-cost-inf": (dollars, "inf", "'inf' is not an amount in USD"),
    "max-cost-minus-inf": (dollars, "-inf", "'-inf' is not an amount in USD"),
    "max-cost-negative": (dollars, "-1", "-1 must not be negative (fix: "),
    "max-cost-text": (dollars, "lots", "'lots' is not an amount in USD such as 2.50 (fix: "),
    "concurrency-text": (whole_number(1), "abc", "'abc' is not a whole number (fix: give a whole number such as 4)"),
    "concurrency-zero": (whole_number(1), "0", "0 must be at least 1 (fix: "),
    "concurrency-fraction": (whole_number(1), "1.5", "'1.5' is not a whole number (fix: "),
    "interval-nan": (seconds, "nan", "'nan' is not a number of seconds (fix: "),
    "interval-negative": (seconds, "-1", "'-1' is not a number of seconds (fix: "),
    "interval-text": (seconds, "often", "'often' is not a number of seconds (fix: "),
    "indeterminate-choice": (choice("skip", "fail"), "maybe", "'maybe' is not one of skip, fail (fix: use one of"),
}


@pytest.mark.parametrize(("parse", "text", "expected"), list(OPTION_VALUES.values()), ids=list(OPTION_VALUES))
def test_a_bad_option_value_is_refused_with_a_fix(parse: Callable[[str], object], text: str, expected: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    assert expected in str(info.value)


# --- pytest runs: options, ini values, the work folder, collection -----------------------------------------------

EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception):")


def _unwritable(project: Project) -> str:
    folder = project.root / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    if not os.access(folder, os.W_OK):
        return str(folder / "WORK")
    if Path("/proc/1").is_dir() and not os.access("/proc/1", os.W_OK):  # root: chmod does not stop it
        return "/proc/1/harness-work"
    pytest.skip("no folder this user cannot write to")


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    ini: str = ""
    setup: Callable[[Project], object] | None = None
    expect: tuple[str, ...] = ()
    ret: int = 4  # pytest's usage error; 2 for a collection error


RUNS = {
    "option-max-cost-nan": Run(("--harness-max-cost", "nan"), expect=(
        "argument --harness-max-cost: 'nan' is not an amount in USD", "(fix: ")),
    "option-max-cost-inf": Run(("--harness-max-cost", "inf"), expect=("--harness-max-cost: 'inf'", "(fix: ")),
    "option-concurrency-text": Run(("--harness-concurrency", "abc"), expect=(
        "argument --harness-concurrency: 'abc' is not a whole number (fix: ",)),
    "work-dir-is-a-file": Run(("--harness-work-dir", "pytest.ini"), expect=(
        "--harness-work-dir ", "pytest.ini: is a file, not a folder (fix: give a folder for the records")),
    "work-dir-below-a-file": Run(("--harness-work-dir", "pytest.ini/WORK"), expect=(
        "--harness-work-dir ", "cannot be made: ", "pytest.ini is a file, not a folder (fix: ")),
    "work-dir-unwritable": Run(("--harness-work-dir", "{unwritable}"), expect=(
        "--harness-work-dir ", "cannot write there", "(fix: give a folder you can write to)")),
    # permission bits do not tell: root may write anywhere they say, but not into /proc
    "work-dir-in-proc": Run(("--harness-work-dir", "/proc/nope"), expect=(
        "--harness-work-dir /proc/nope: cannot write there (", "(fix: give a folder you can write to)")),
    "ini-work-dir-is-a-file": Run((), ini="harness_work_dir = pytest.ini", expect=(
        "ini harness_work_dir ", "is a file, not a folder (fix: ")),
    "ini-concurrency-text": Run((), ini="harness_concurrency = abc", expect=(
        "ini harness_concurrency = 'abc': 'abc' is not a whole number (fix: give a whole number such as 4)",)),
    "ini-max-cost-nan": Run((), ini="harness_max_cost = nan", expect=(
        "ini harness_max_cost = 'nan': 'nan' is not an amount in USD", "(fix: ")),
    "ini-progress-interval-nan": Run((), ini="harness_progress_interval = nan", expect=(
        "ini harness_progress_interval = 'nan': 'nan' is not a number of seconds (fix: ",)),
    "ini-batch-maybe": Run((), ini="harness_batch = maybe", expect=("ini harness_batch: ",
                                                                    "(fix: write true or false)")),
    "ini-prices-missing": Run((), ini="harness_prices = prices.yaml", expect=(
        "ini harness_prices = 'prices.yaml': no file ", "(fix: create the price table")),
    "ini-input-dirs-missing": Run((), ini="harness_input_dirs = ../nowhere", expect=(
        "ini harness_input_dirs: ../nowhere", "is not a folder (fix: ")),
    "ini-data-modules-not-a-module": Run((), ini="harness_data_modules = my-checks", expect=(
        "ini harness_data_modules: 'my-checks' is not a module name (fix: list dotted module names",)),
    "collect-case-check-names-code": Run(("suites/",), setup=lambda p: p.cases(
        "writer", CASES_RUN + '    checks: [{python: "shutil:rmtree"}]\n'), ret=2,
        expect=("suites/writer.cases.yaml: cases[0].checks[0].check.python: 'shutil:rmtree' names code in module "
                "'shutil'", "(fix: name the check in the rubric, or list the module in ini harness_data_modules)")),
    "collect-case-file-not-utf8": Run(("suites/",), setup=lambda p: p.write("suites/writer.cases.yaml", "").write_bytes(
        latin1(CASES_RUN, "hello")), ret=2, expect=(
        "suites/writer.cases.yaml: line 4: byte 0xe9", "(fix: save the file as UTF-8)")),
    "collect-input-outside": Run(("suites/",), setup=lambda p: p.cases("writer", CASES_RUN.replace(
        '"hello"', '{file: /etc/passwd}')), ret=2, expect=(
        "suites/writer.cases.yaml: cases[0].inputs.text.file: /etc/passwd is outside the project",
        "(fix: move the file into the project, or list its folder in ini harness_input_dirs)")),
}
CASES_RUN = """\
agent: writer
cases:
  - id: greet
    inputs: {text: "hello"}
"""


@pytest.mark.parametrize("run", list(RUNS.values()), ids=list(RUNS))
def test_a_bad_option_ini_value_or_work_folder_is_one_line(project: Project, run: Run) -> None:
    project.standard(CASES_RUN)
    if run.ini:
        project.ini(run.ini + "\n")
    if run.setup is not None:
        run.setup(project)
    args = tuple(_unwritable(project) if a == "{unwritable}" else a for a in run.args)
    result = project.run(*args) if args and args[0] == "suites/" else project.run("suites/", *args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == run.ret, output
    assert "Traceback" not in output and not EXCEPTION_NAME.search(output), output
    if run.ret == 2:
        lines = [section[0] for section in error_sections(result) if len(section) == 1]
    else:
        lines = [line for line in result.errlines if line.strip()]
    naming = [line for line in lines if run.expect[0] in line]
    assert len(naming) == 1, lines
    for part in run.expect:
        assert part in naming[0], f"{part!r} not in {naming[0]!r}"
    assert "(fix: " in naming[0]
    assert not project.work.exists()


def test_an_allowed_input_folder_is_read(project: Project, tmp_path_factory: pytest.TempPathFactory) -> None:
    shared = tmp_path_factory.mktemp("shared")
    (shared / "notes.txt").write_text("hello from outside\n")
    project.standard(CASES_RUN.replace('"hello"', f"{{file: {shared / 'notes.txt'}}}"))
    project.ini(f"harness_input_dirs =\n    {shared}\n")
    result = project.run("suites/", "-q")
    result.assert_outcomes(passed=1)


def test_a_json_price_table_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_bytes(b'{"my-model": {"input": 1, "output": 2}, "note": "' + NOT_UTF8 + b'"}')
    with pytest.raises(HarnessConfigError) as caught:
        load_price_table(prices)
    assert "prices.json: line 1: byte 0xe9" in str(caught.value) and "(fix: save the file as UTF-8)" in str(caught.value)


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("schema.json", b'{"type": "object", "title": "' + NOT_UTF8 + b'"}', "schema.json: line 1: byte 0xe9"),
    ("schema.json", b"[" * 100_000 + b"]" * 100_000, "schema.json' is nested too deeply"),
    ("schema.yaml", b"a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                    b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                    b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                    b"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n",
     "schema.yaml"),
])
def test_a_json_schema_checks_schema_file_is_guarded_like_every_file(tmp_path: Path, name: str, content: bytes,
                                                                      expected: str) -> None:
    from harness.checks import parse_check

    (tmp_path / name).write_bytes(content)
    with pytest.raises(HarnessConfigError) as caught:
        parse_check({"json_schema": {"schema": name}}, path=tmp_path / "rubric.yaml", field="dimensions.d.check",
                    base_dir=tmp_path, import_root=tmp_path)
    assert expected in str(caught.value) and "(fix: " in str(caught.value)
