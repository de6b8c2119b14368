"""Datasets: a case file's cases from a JSONL, CSV or JSON file or a Hugging Face dataset, one pytest item per row.

The Hugging Face tests never reach the network: their datasets are local folders inside the project, and the hub
is switched off (HF_HUB_OFFLINE)."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Project
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.loading.datasets import dataset_rows

try:  # imported once here, so pytester's in-process runs reuse it (pyarrow is not imported twice)
    import datasets
except ImportError:  # the tests that need it are skipped
    datasets = None

ROWS = 300
needs_datasets = pytest.mark.skipif(datasets is None, reason="needs the datasets package (extra `datasets`)")


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


def test_braces_that_are_not_slots_stay_as_written_and_double_braces_are_slots(project: Project) -> None:
    from harness.loading import load_cases, load_suite

    project.standard()
    project.write("suites/data/qa.jsonl", '{"text": "hello", "meta": {"n": 7}}\n')
    path = project.cases("writer", """\
        agent: writer
        dataset: {file: data/qa.jsonl, inputs: {text: '{{ text }} {"n": 1} \\d{2,3} {meta.n}'}}
    """)
    suite = load_suite(project.root / "suites/agents.yaml", rubrics_dir=project.root / "rubrics",
                       runner_kinds=("python", "command", "prompt"))
    (case,) = load_cases(path, agents=suite.agents, input_roots=[project.root])
    assert case.inputs["text"] == 'hello {"n": 1} \\d{2,3} 7'


# --- Hugging Face datasets ------------------------------------------------------------------------------


@pytest.fixture
def offline_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No network for the datasets package, and its cache in a temporary folder.

    The variables are set for any process a test starts; the library reads them when it is imported (once,
    at the top of this module), so its own copies are set too."""
    cache = tmp_path / "hf-cache"
    for variable, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("HF_DATASETS_CACHE", str(cache))):
        monkeypatch.setenv(variable, value)
    if datasets is not None:
        import huggingface_hub.constants

        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    yield


def hf_folder(project: Project, rows: int = 20) -> None:
    """suites/data/hfqa: a Hugging Face dataset folder of JSON Lines files, a test and a train split."""
    project.write("suites/data/hfqa/test.jsonl", jsonl(rows))
    project.write("suites/data/hfqa/train.jsonl", '{"qid": "t1", "text": "hello train", "answer": 0}\n')


def rows_of(project: Project, raw: dict) -> list[tuple[int, dict]]:  # type: ignore[type-arg]
    path = project.root / "suites/writer.cases.yaml"
    return list(dataset_rows(raw, Fields.of(path, "dataset"), path.parent, [project.root]))


@needs_datasets
def test_a_local_hugging_face_dataset_is_one_item_per_row_of_its_split(project: Project, offline_hub: None) -> None:
    project.standard()
    hf_folder(project)
    project.cases("writer", """\
        agent: writer
        dataset: {hf: data/hfqa, split: test, id: "{qid}", inputs: {text: "{text}"}, expected: "{answer}", limit: 7}
    """)
    result = project.run("suites/", "--collect-only", "-q")
    assert collected(result) == [f"suites/writer.cases.yaml::q{n}" for n in range(1, 8)]
    result = project.run("suites/", "-q")
    result.assert_outcomes(passed=7)
    assert sorted(row["case_id"] for row in project.runs()) == sorted(f"q{n}" for n in range(1, 8))


@needs_datasets
def test_a_saved_hugging_face_dataset_samples_and_shuffles_the_rows_a_file_would(project: Project,
                                                                                 offline_hub: None) -> None:
    project.standard()
    project.write("suites/data/qa.jsonl", jsonl(50))
    records = [json.loads(line) for line in jsonl(50).splitlines()]
    datasets.DatasetDict(test=datasets.Dataset.from_list(records)).save_to_disk(
        str(project.root / "suites/data/saved"))
    for choice in ({"sample": 5, "seed": 3}, {"shuffle": True, "seed": 1, "limit": 4}, {"sample": 6, "shuffle": True}):
        from_file = rows_of(project, {"file": "data/qa.jsonl", "id": "{qid}", **choice})
        from_hf = rows_of(project, {"hf": "data/saved", "split": "test", "id": "{qid}", **choice})
        assert from_hf == from_file and len(from_hf) in (4, 5, 6)
    (number, row), *_ = rows_of(project, {"hf": "data/saved", "split": "test", "sample": 1, "seed": 5})
    assert row == {"id": f"row-{number}", "inputs": records[number - 1]}  # the default id and inputs
    with pytest.raises(HarnessConfigError, match="dataset.split: data/saved has no split 'validation' "
                                                 r"\(fix: use one of: test\)"):
        rows_of(project, {"hf": "data/saved", "split": "validation"})


@needs_datasets
def test_a_bad_hugging_face_row_or_an_unknown_hub_dataset_is_one_line(project: Project, offline_hub: None) -> None:
    project.standard()
    hf_folder(project, rows=3)
    project.cases("writer", """\
        agent: writer
        dataset: {hf: data/hfqa, split: train, inputs: {text: "{question}"}}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/data/hfqa: row 1: no column 'question' for dataset.inputs.text*"])
    project.cases("writer", """\
        agent: writer
        dataset: {hf: nobody/no-such-dataset, split: test}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*writer.cases.yaml: dataset.hf: cannot load nobody/no-such-dataset (split test): *"
                                 "(fix: check the name, split, config and revision; offline*"])
    assert "Traceback" not in result.stdout.str()


def test_without_the_datasets_package_hf_says_how_to_install_it(project: Project,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now raises ImportError
    project.standard()
    project.cases("writer", """\
        agent: writer
        dataset: {hf: openai/gsm8k, config: main, split: test}
    """)
    result = project.run("suites/")
    assert ("suites/writer.cases.yaml: dataset.hf: reading a Hugging Face dataset needs the datasets package, which "
            "is not installed (fix: pip install 'pytest-rubric[datasets]')") in result.stdout.lines
    assert "Traceback" not in result.stdout.str()
    assert result.ret != 0


@pytest.mark.parametrize(("dataset", "expected"), [
    ("{file: data/qa.jsonl, hf: data/hfqa, split: test}",
     "dataset.hf: file and hf cannot both be given (fix: keep one: file for a .jsonl, .csv or .json file, hf for*"),
    ("{id: '{qid}'}", "dataset: needs at least one of file or hf*"),
    ("{hf: data/hfqa}", "dataset.split: missing: a Hugging Face dataset is read one split at a time*"),
    ("{file: data/qa.jsonl, split: test}", "dataset.split: is only for a Hugging Face dataset (hf:)*"),
])
def test_a_dataset_reads_exactly_one_source(project: Project, dataset: str, expected: str) -> None:
    project.standard()
    project.write("suites/data/qa.jsonl", jsonl(2))
    project.cases("writer", f"""\
        agent: writer
        dataset: {dataset}
    """)
    result = project.run("suites/")
    result.stdout.fnmatch_lines([f"*suites/writer.cases.yaml: {expected}"])
    assert "Traceback" not in result.stdout.str()


def test_criteria_and_checks_templates_are_filled_per_row(project: Project) -> None:
    project.write("suites/data/qa.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"q": "Capital of France?", "answer": "Paris", "criterion": "names: Does it name the city?", "words": 5},
        {"q": "2 + 2?", "answer": 4, "criterion": "maths: Is the sum right?", "words": 3}]))
    raw = {"file": "data/qa.jsonl", "inputs": {"question": "{q}"}, "expected": "{answer}",
           "criteria": ["{criterion}", {"id": "short", "description": "At most {words} words?", "weight": 2}],
           "checks": [{"contains": {"all": ["{answer}"]}},
                      {"id": "exact", "check": {"equals": "{expected}"}, "min_score": 1},
                      {"length": {"max_words": "{words}"}}, {"regex": {"pattern": "^\\d{1,3}$|{inputs.question}"}}]}
    (_, first), (_, second) = rows_of(project, raw)
    assert first["criteria"] == ["names: Does it name the city?",
                                 {"id": "short", "description": "At most 5 words?", "weight": 2}]
    assert second["criteria"][0] == "maths: Is the sum right?"
    assert second["checks"] == [{"contains": {"all": [4]}},  # one slot: the column's own type
                                {"id": "exact", "check": {"equals": "{expected}"}, "min_score": 1},  # the case's
                                {"length": {"max_words": 3}}, {"regex": {"pattern": "^\\d{1,3}$|{inputs.question}"}}]
    assert first["expected"] == "Paris" and "criteria" not in rows_of(project, {"file": "data/qa.jsonl"})[0][1]
    raw["checks"] = [{"contains": {"all": ["{answr}"]}}]
    with pytest.raises(HarnessConfigError, match=r"qa.jsonl: row 1: no column 'answr' for dataset.checks\[0\]"
                                                 r".contains.all\[0\]"):
        rows_of(project, raw)


# --- bounded reading ----------------------------------------------------------------------------------------


def write_with_a_huge_row(path: Path, megabytes: int) -> None:
    """Two small rows, then one of ``megabytes`` (written a megabyte at a time: this process stays small)."""
    chunk = "x" * (1024 * 1024)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"text": "one"}\n{"text": "two"}\n{"text": "' if path.suffix == ".jsonl" else "text\none\ntwo\n")
        for _ in range(megabytes):
            out.write(chunk)
        out.write('"}\n' if path.suffix == ".jsonl" else "\n")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_limit_stops_reading_at_the_last_row_it_keeps(tmp_path: Path, suffix: str) -> None:
    """The row after the last one kept is never read: here it is broken, and with limit: 2 nothing says so."""
    data = tmp_path / f"qa{suffix}"
    data.write_text('{"text": "one"}\n{"text": "two"}\n{"text": \n' if suffix == ".jsonl" else
                    'text\none\ntwo\n"three\n')
    case = tmp_path / "qa.cases.yaml"
    rows = dataset_rows({"file": data.name, "limit": 2}, Fields.of(case, "dataset"), tmp_path, [tmp_path])
    assert [row["inputs"]["text"] for _, row in rows] == ["one", "two"]
    with pytest.raises(HarnessConfigError, match=r"qa\.(jsonl|csv): .*line 3"):
        list(dataset_rows({"file": data.name}, Fields.of(case, "dataset"), tmp_path, [tmp_path]))


PEAK_MEMORY_CHILD = r'''
import json, sys
from pathlib import Path
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.loading.datasets import dataset_rows


def kilobytes(field):  # this process's own figures since it started (ru_maxrss would count the parent's)
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field + ":"))
    return int(line.split()[1])


case = Path(sys.argv[1])
before = kilobytes("VmRSS")
try:
    list(dataset_rows({"file": sys.argv[2]}, Fields.of(case, "dataset"), case.parent, [case.parent]))
    message = None
except HarnessConfigError as exc:
    message = exc.message(case.parent)
print(json.dumps({"message": message, "grew_mb": (kilobytes("VmHWM") - before) / 1024}))
'''


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak memory from /proc")
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_row_over_the_size_limit_is_an_error_before_it_is_read_whole(tmp_path: Path, suffix: str) -> None:
    import subprocess

    data = tmp_path / f"qa{suffix}"
    write_with_a_huge_row(data, 64)
    child = subprocess.run([sys.executable, "-c", PEAK_MEMORY_CHILD, str(tmp_path / "qa.cases.yaml"), data.name],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    outcome = json.loads(child.stdout)
    line = "line 3" if suffix == ".jsonl" else "line 4"  # a CSV's header is its line 1
    assert outcome["message"] == (f"qa{suffix}: row 3 ({line}): is over the 16 MB limit for a dataset row (reading "
                                  "stopped there) (fix: keep every row under that size: move bulky text out of the "
                                  "dataset)")
    assert outcome["grew_mb"] < 48, outcome  # reading the 64 MB row whole took twice its size and more
