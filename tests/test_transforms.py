"""Transforms: the artifact rewritten before the checks and the judge see it (``transform:`` in a rubric)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project
from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.fields import Fields
from harness.checks.transforms import Transform, TransformError, parse_transform

FIELD = "dimensions.exact.transform"

USER_MODULE = '''\
def last_line(artifact):
    return artifact.strip().splitlines()[-1]


def as_data(artifact):
    return {"answer": artifact.upper(), "n": 2}


def shout(artifact):
    raise ValueError("no answer line in " + repr(artifact[:10]))


def forgets(artifact):
    artifact.strip()


def two_args(artifact, context):
    return artifact


NOT_CALLABLE = 3
'''


@pytest.fixture
def user_module(tmp_path: Path) -> Iterator[str]:
    """A module of transforms at the project root (tmp_path), unique per test, forgotten afterwards."""
    name = f"user_transforms_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE, encoding="utf-8")
    yield name
    sys.modules.pop(name, None)


def place(tmp_path: Path) -> Fields:
    return Fields(tmp_path / "rubrics" / "qa.yaml", FIELD, tmp_path / "rubrics", tmp_path)


def parse(raw: Any, tmp_path: Path) -> Transform:
    return parse_transform(raw, place(tmp_path))


def failure(transform: Transform, artifact: str) -> TransformError:
    with pytest.raises(TransformError) as info:
        transform.apply(artifact)
    err = info.value
    assert isinstance(err, HarnessError)
    text = str(err)
    assert "\n" not in text and "Traceback" not in text and "(fix: " in text, text
    return err


# ------------------------------------------------------------------ a function


def test_a_function_rewrites_the_artifact(tmp_path: Path, user_module: str) -> None:
    transform = parse(f"{user_module}:last_line", tmp_path)
    assert transform.spec == f"{user_module}:last_line"
    assert transform.apply("Let me think.\nThe answer:\nParis\n") == "Paris"


def test_a_function_returning_data_is_written_as_json(tmp_path: Path, user_module: str) -> None:
    assert parse(f"{user_module}:as_data", tmp_path).apply("paris") == '{"answer": "PARIS", "n": 2}'


def test_a_function_that_raises_is_one_line_naming_file_and_field(tmp_path: Path, user_module: str) -> None:
    err = failure(parse(f"{user_module}:shout", tmp_path), "hello there")
    assert str(err) == (f"{tmp_path}/rubrics/qa.yaml: {FIELD}: {user_module}:shout raised ValueError: no answer "
                        "line in 'hello ther' (fix: fix the function, or make it return the artifact unchanged "
                        "when it cannot transform it)")
    assert err.exit_code == ExitCode.GENERAL_FAILURE
    assert err.message(tmp_path).startswith(f"rubrics/qa.yaml: {FIELD}: ")


def test_a_function_that_returns_nothing_is_an_error(tmp_path: Path, user_module: str) -> None:
    err = failure(parse(f"{user_module}:forgets", tmp_path), "x")
    assert err.problem == f"{user_module}:forgets returned None"


@pytest.mark.parametrize(("name", "problem"), [
    ("two_args", "cannot be called with the artifact alone"),
    ("NOT_CALLABLE", "is a int, not a function"),
    ("last_lin", "has no function 'last_lin'"),
])
def test_a_function_that_cannot_be_used_is_a_load_error(tmp_path: Path, user_module: str, name: str,
                                                        problem: str) -> None:
    with pytest.raises(HarnessConfigError) as info:
        parse(f"{user_module}:{name}", tmp_path)
    assert info.value.field == FIELD
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{tmp_path}/rubrics/qa.yaml: {FIELD}: ")


# ------------------------------------------------------------------ a JSON path


def test_a_json_path_takes_the_value_there_as_text(tmp_path: Path) -> None:
    transform = parse({"json_path": "answer.text"}, tmp_path)
    assert transform.spec == "json_path answer.text"
    assert transform.apply('{"answer": {"text": "Paris", "confidence": 0.9}}') == "Paris"
    assert transform.apply('Here:\n```json\n{"answer": {"text": "Lyon"}}\n```\nDone.') == "Lyon"
    assert parse({"json_path": "$.answer.items[1]"}, tmp_path).apply('{"answer": {"items": [1, 2.5]}}') == "2.5"
    assert parse({"json_path": "answer"}, tmp_path).apply('{"answer": {"a": [1, "b"]}}') == '{"a": [1, "b"]}'


def test_an_artifact_that_is_not_json_is_a_data_error(tmp_path: Path) -> None:
    err = failure(parse({"json_path": "answer.text"}, tmp_path), "The answer is Paris.")
    line = str(err)  # the JSON parser's own words stand between ours: not asserted
    assert line.startswith(f"{tmp_path}/rubrics/qa.yaml: {FIELD}.json_path: cannot read answer.text: the artifact "
                           "is not valid JSON: ")
    assert line.endswith(" at line 1 column 1 (fix: make the producer answer JSON (or a ```json block), or drop the "
                         "transform)")
    assert err.exit_code == ExitCode.DATA_ERROR


def test_nothing_at_the_path_names_what_is_there(tmp_path: Path) -> None:
    err = failure(parse({"json_path": "answer.text"}, tmp_path), '{"answer": {"txt": "Paris"}}')
    assert err.problem == "the artifact's JSON has no value at answer.text (its keys: answer)"
    assert err.exit_code == ExitCode.DATA_ERROR
    err = failure(parse({"json_path": "answer"}, tmp_path), '["Paris"]')
    assert err.problem == "the artifact's JSON has no value at answer (it is a list)"


@pytest.mark.parametrize(("raw", "field", "problem"), [
    ({"json_path": "a..b"}, f"{FIELD}.json_path", "bad JSON path 'a..b'"),
    ({"json_path": ""}, f"{FIELD}.json_path", "expected a JSON path"),
    ({"json_pth": "a"}, f"{FIELD}.json_pth", "did you mean 'json_path'"),
    ({}, FIELD, "needs at least one of json_path"),
    (3, FIELD, "expected a mapping, got 3"),
    ("no_colon", FIELD, "is not 'module:function'"),
])
def test_a_malformed_transform_is_a_load_error(tmp_path: Path, raw: Any, field: str, problem: str) -> None:
    with pytest.raises(HarnessConfigError) as info:
        parse(raw, tmp_path)
    assert info.value.field == field
    assert problem in info.value.problem
    assert info.value.fix


# ------------------------------------------------------------------ end to end

TRANSFORM_RUBRIC = """\
metadata:
  name: QA
  version: "1.0.0"
  agent: writer
threshold: 1.0
transform: qa_transforms:answer_line
dimensions:
  exact:
    weight: 1.0
    description: "The answer line is the expected answer"
    check:
      equals: "{expected}"
"""

QA_TRANSFORMS = '''\
def answer_line(artifact):
    for line in artifact.splitlines():
        if line.startswith("Answer:"):
            return line[len("Answer:"):]
    raise ValueError("no line starts with 'Answer:'")
'''

QA_AGENTS = """\
agents:
  writer:
    rubric: qa
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
    max_attempts: 1
"""


def test_a_rubric_transform_is_what_the_checks_see(project: Project) -> None:
    project.rubric("qa", TRANSFORM_RUBRIC)
    project.write("qa_transforms.py", QA_TRANSFORMS)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(QA_AGENTS)
    project.cases("writer", textwrap.dedent("""\
        agent: writer
        cases:
          - id: right
            inputs: {text: "I think.\\nAnswer: Paris"}
            expected: Paris
          - id: wrong
            inputs: {text: "I think.\\nAnswer: Lyon"}
            expected: Paris
        """))
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*::right PASSED*", "*::wrong FAILED*"])
    assert "expected 'Paris', found ' Lyon'" in result.stdout.str()


def test_a_transform_that_fails_on_an_artifact_ends_the_case_in_one_line(project: Project) -> None:
    project.rubric("qa", TRANSFORM_RUBRIC)
    project.write("qa_transforms.py", QA_TRANSFORMS)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(QA_AGENTS)
    project.cases("writer", "agent: writer\ncases:\n  - id: rambles\n    inputs: {text: 'I think'}\n"
                            "    expected: Paris\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out
    assert ("rubrics/qa.yaml: transform: qa_transforms:answer_line raised ValueError: no line starts with "
            "'Answer:' (fix: ") in out
