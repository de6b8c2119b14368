"""Datasets: a case file's cases from a JSONL, CSV or JSON file, one pytest item per row."""

from __future__ import annotations

import csv
import io
import json

import pytest

from conftest import Project

ROWS = 300


def jsonl(rows: int = ROWS) -> str:
    return "".join(json.dumps({"qid": f"q{n}", "text": f"hello number {n}", "answer": n}) + "\n"
                   for n in range(1, rows + 1))


def collected(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.strip() for line in result.stdout.lines if "::" in line]


def test_a_jsonl_dataset_is_one_item_per_row_with_templated_ids_inputs_and_expected(project: Project) -> None:
    project.standard()
    project.write("suites/data/qa.jsonl", jsonl())
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/qa.jsonl, id: "{qid}", inputs: {text: "{text}", number: "{answer}"}, expected: "{answer}"}
    """)
    result = project.run("suites/", "-q")
    result.assert_outcomes(passed=ROWS)
    ids = [row["case_id"] for row in project.runs()]
    assert sorted(ids) == sorted(f"q{n}" for n in range(1, ROWS + 1))


def test_a_dataset_row_keeps_a_single_slot_value_of_its_own_type(project: Project) -> None:
    from harness.loading import load_cases, load_suite

    project.standard()
    project.write("suites/data/qa.jsonl", jsonl(3))
    path = project.cases("writer", """\
        agent: writer
        dataset: {file: data/qa.jsonl, inputs: {text: "{text}", number: "{answer}", both: "{qid}={answer}"},
                  expected: "{answer}"}
    """)
    suite = load_suite(project.root / "suites/agents.yaml", rubrics_dir=project.root / "rubrics",
                       runner_kinds=("python", "command", "prompt"))
    cases = load_cases(path, agents=suite.agents, input_roots=[project.root])
    assert [c.id for c in cases] == ["row-1", "row-2", "row-3"]  # the default id: the row number
    assert cases[1].inputs == {"text": "hello number 2", "number": 2, "both": "q2=2"} and cases[1].expected == 2


def test_a_csv_dataset_with_limit_and_a_seeded_sample(project: Project) -> None:
    project.standard()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["name", "text"])
    writer.writerows([f"c{n}", f"hello, {n}"] for n in range(1, 51))
    project.write("suites/data/cases.csv", out.getvalue())
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/cases.csv, id: "{name}", limit: 7}
    """)
    result = project.run("suites/", "--collect-only", "-q")
    assert collected(result) == [f"suites/writer.cases.yaml::c{n}" for n in range(1, 8)]
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/cases.csv, id: "{name}", sample: 5, seed: 3}
    """)
    first = collected(project.run("suites/", "--collect-only", "-q"))
    again = collected(project.run("suites/", "--collect-only", "-q"))
    assert len(first) == 5 and first == again  # seeded: the same rows every run, in file order
    numbers = [int(item.rsplit("::c", 1)[1]) for item in first]
    assert numbers == sorted(numbers) and numbers != list(range(1, 6))


def test_a_bad_row_names_the_file_the_row_and_the_column(project: Project) -> None:
    project.standard()
    project.write("suites/data/qa.jsonl", jsonl(4) + '{"qid": "q5"}\n')
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/qa.jsonl, id: "{qid}", inputs: {text: "{text}"}}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/data/qa.jsonl: row 5: no column 'text' for dataset.inputs.text "
                                 "(fix: give every row a 'text' column, or change the template (columns: qid))*"])
    assert "Traceback" not in result.stdout.str()
    project.write("suites/data/qa.jsonl", jsonl(2) + "{not json\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/data/qa.jsonl: line 3: invalid JSON*"])


def test_a_dataset_outside_the_project_is_refused(project: Project, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("elsewhere") / "qa.jsonl"
    outside.write_text(jsonl(2))
    project.standard()
    project.cases("writer", f"""\
        agent: writer
        dataset: {{file: {outside}}}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*dataset.file: *is outside the project*"])


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("bad.jsonl", b'{"text": "hello"}\n{"text": "caf\xe9"}\n',
     "*bad.jsonl: line 2: is not UTF-8*save the file as UTF-8*"),
    ("bad.csv", b'text\n"hello\n', "*bad.csv: line *: cannot read the CSV*"),
    ("ragged.csv", b"name,text\na,hello\nb\n", "*ragged.csv: row 2 (line 3): has another number of cells*"),
    ("list.json", b'{"text": "hello"}', "*list.json: a JSON dataset is a list of objects, not dict*"),
])
def test_an_unreadable_dataset_file_is_one_line_naming_the_file(project: Project, name: str, content: bytes,
                                                                 expected: str) -> None:
    project.standard()
    (project.root / "suites/data").mkdir(parents=True, exist_ok=True)
    (project.root / "suites/data" / name).write_bytes(content)
    project.cases("writer", f"""\
        agent: writer
        dataset: {{file: data/{name}}}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


def test_a_template_format_that_does_not_fit_a_row_is_one_line(project: Project) -> None:
    project.standard()
    project.write("suites/data/qa.jsonl", '{"text": "hello", "n": "seven"}\n')
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/qa.jsonl, inputs: {text: "{text} {n:d}"}}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*qa.jsonl: row 1: dataset.inputs.text: cannot fill '{text} {n:d}'*"])
    assert "Traceback" not in result.stdout.str()
