"""Data is data (issue 19): a dataset row, a case file's own ``checks:`` and an imported config fill slots; they
never name code unless the project lists the module (ini harness_data_modules), and never a file outside the
project. Every file a suite names (templates, prompts, schema files, a rubric, its examples) is read only from
inside the project; ``harness import`` refuses a path outside it before writing anything, and writes all or
nothing."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import AGENT_MODULE, Project, error_sections
from harness.apps.cli import main
from harness.base.errors import ExitCode, HarnessConfigError
from harness.checks import CheckContext, parse_check
from harness.loading import BUILTIN_RUNNER_KINDS, load_cases, load_rubric, load_suite

TODAY = dt.date(2026, 1, 1)
FIX = "(fix: name the check in the rubric, or list the module in ini harness_data_modules)"

# A rubric of no dimensions of its own: every case brings its checks (a case's `checks:`, a dataset row's).
OPEN_RUBRIC = """\
metadata: {name: Open, version: "1.0.0", agent: writer}
threshold: 0.8
dimensions: {}
"""

AGENTS = """\
agents:
  writer:
    rubric: open
    producer: {python: "agentlib:produce"}
    max_attempts: 1
"""

# A module of the project's: checks it may let cases name, and the names it imported from elsewhere.
CHECKLIB = """\
import shutil
from shutil import rmtree


def has_hello(artifact, context):
    return (1.0, "says hello") if "hello" in artifact else (0.0, "no hello")
"""

CHECKLIB_EXTRA = """\
def short(artifact, context, limit=40):
    return (1.0, "short") if len(artifact) < limit else (0.0, "long")


def upper(artifact):
    return artifact.upper()
"""


def open_project(project: Project, cases: str | None = None) -> Project:
    project.rubric("open", OPEN_RUBRIC)
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(AGENTS)
    project.write("checklib/__init__.py", CHECKLIB)
    project.write("checklib/extra.py", CHECKLIB_EXTRA)
    if cases is not None:
        project.cases("writer", cases)
    return project


def only_error(result: pytest.RunResult) -> str:
    """The one line of the run's one collection error; the run stopped at collection, without a traceback."""
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED), result.stdout.str()  # -n 2: 1
    assert result.parseoutcomes().get("passed", 0) == 0
    assert "Traceback" not in result.stdout.str()
    ((line,),) = error_sections(result)
    return line


# --- 1. data never names code -------------------------------------------------------------------------------


def test_a_dataset_row_naming_shutil_rmtree_is_a_collection_error_and_the_folder_stays(
        project: Project, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The attack: a row's checks column names ``shutil:rmtree`` and the producer answers with a folder's path.
    Before, the check was called with the answer and the folder was gone."""
    victim = tmp_path_factory.mktemp("victim")
    (victim / "keep.txt").write_text("still here\n", encoding="utf-8")
    open_project(project)
    project.write("suites/data/rows.jsonl", json.dumps({"id": "wipe", "text": str(victim),
                                                        "checks": [{"python": "shutil:rmtree"}]}) + "\n")
    project.cases("writer", 'agent: writer\ndataset: {file: data/rows.jsonl, id: "{id}", inputs: {text: "{text}"}, '
                            'checks: "{checks}"}\n')

    for args in ((), ("-n", "2")):
        line = only_error(project.run("suites/", *args))
        assert line == ("suites/writer.cases.yaml: dataset (row 1).checks[0].check.python: 'shutil:rmtree' names code "
                        "in module 'shutil': data (a case, a dataset row) may name code only from the modules of ini "
                        f"harness_data_modules, which lists none {FIX}")
        assert (victim / "keep.txt").read_text(encoding="utf-8") == "still here\n"
    assert not project.work.exists()  # nothing ran, nothing was recorded


def test_a_case_naming_code_is_refused_until_the_project_lists_its_module(project: Project) -> None:
    open_project(project, """\
        agent: writer
        cases:
          - id: greet
            inputs: {text: hello there}
            checks:
              - {python: "checklib:has_hello"}
              - {id: short, check: {python: {function: "checklib.extra:short", options: {limit: 20}}}}
    """)
    line = only_error(project.run("suites/"))
    assert line == ("suites/writer.cases.yaml: cases[0].checks[0].check.python: 'checklib:has_hello' names code in "
                    "module 'checklib': data (a case, a dataset row) may name code only from the modules of ini "
                    f"harness_data_modules, which lists none {FIX}")

    project.ini("harness_data_modules =\n    checklib\n")  # the module and its submodules
    project.run("suites/").assert_outcomes(passed=1)
    (run,) = project.runs()
    assert run["overall_score"] == 1.0  # both of the case's checks ran and passed


@pytest.mark.parametrize(("check", "module"), [
    ('{python: "checklib:rmtree"}', "shutil"),  # imported by the listed module, defined in shutil
    ('{python: "checklib:shutil.rmtree"}', "shutil"),  # reached through the listed module
    ('{python: "checklib:__builtins__.get"}', "checklib"),  # private names are not data's to reach
    ('{python: "checklibx:has_hello"}', "checklibx"),  # a name that merely starts like a listed module
])
def test_a_listed_module_lends_no_other_code(project: Project, check: str, module: str) -> None:
    project.write("checklibx.py", "def has_hello(artifact, context):\n    return 1.0\n")
    open_project(project, f"agent: writer\ncases:\n  - id: greet\n    inputs: {{text: hello}}\n    checks: [{check}]\n")
    project.ini("harness_data_modules = checklib\n")
    line = only_error(project.run("suites/"))
    assert line.startswith("suites/writer.cases.yaml: cases[0].checks[0].check.python: ")
    assert f"names code in module {module!r}: " in line and "which lists checklib" in line and line.endswith(FIX)


def test_a_module_data_names_is_refused_before_it_is_imported(project: Project) -> None:
    project.write("side_effect.py", "open('IMPORTED', 'w').close()\n\ndef score(artifact, context):\n    return 1.0\n")
    open_project(project, "agent: writer\ncases:\n  - id: a\n    inputs: {text: hi}\n"
                          "    checks: [{python: \"side_effect:score\"}]\n")
    assert "'side_effect:score' names code in module 'side_effect'" in only_error(project.run("suites/"))
    assert not (project.root / "IMPORTED").exists()


PLUGIN_KIND = """\
from dataclasses import dataclass

from harness.checks import CheckResult


@dataclass(frozen=True)
class Shouted:
    kind = "shouted"

    def run(self, artifact, context):
        return CheckResult(1.0 if artifact.isupper() else 0.0, "shouted" if artifact.isupper() else "not shouted")


def pytest_harness_check_kinds():
    return {"shouted": lambda options, fields: Shouted()}
"""


def test_rows_and_cases_keep_their_checks_that_are_not_code(project: Project) -> None:
    """regex, contains, equals and a plugin's kind (the project installed it) from rows and cases, no ini needed."""
    open_project(project)
    project.write("conftest.py", PLUGIN_KIND)
    rows = [{"id": "a", "text": "hello", "answer": "hello", "checks": [{"contains": {"all": ["hello"]}}]},
            {"id": "b", "text": "HI THERE", "answer": "HI THERE", "checks": [{"shouted": {}}, {"regex": "^HI"}]},
            {"id": "c", "text": "hello", "answer": "bye", "checks": [{"equals": "{expected}"}]}]
    project.write("suites/data/rows.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    project.cases("writer", """\
        agent: writer
        dataset: {file: data/rows.jsonl, id: "{id}", inputs: {text: "{text}"}, expected: "{answer}", checks: "{checks}"}
    """)
    project.write("suites/more.cases.yaml", """\
        agent: writer
        cases:
          - id: d
            inputs: {text: "hello"}
            checks: [{regex: {pattern: "^h", must_match: true}}, {id: loud, check: {shouted: {}}, weight: 0.01}]
    """)
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*writer.cases.yaml::c FAILED*"])


# The spellings of code a case or a row may try: the check kind, its mapping form, a dimension with a check, a
# transform on a check; each refused at its own field, with the fix.
CODE_SPELLINGS = [
    ({"python": "shutil:rmtree"}, "checks[0].check.python", "check"),
    ({"python": {"function": "shutil:rmtree"}}, "checks[0].check.python.function", "check"),
    ({"id": "wipe", "check": {"python": "os.path:exists"}}, "checks[0].check.python", "check"),
    ({"id": "t", "check": {"contains": {"all": ["x"]}}, "transform": "os:getcwd"}, "checks[0].transform",
     "transform"),
]


@pytest.fixture(autouse=True)
def forget_checklib() -> Any:
    """Each test's project has its own ``checklib``: the loaders' tests import it in this process."""
    yield
    for name in [name for name in sys.modules if name.split(".")[0] in ("checklib", "checklibx", "side_effect")]:
        del sys.modules[name]


def sound_files(root: Path) -> None:
    for relpath, text in {"rubrics/open.yaml": OPEN_RUBRIC, "suites/agents.yaml": AGENTS, "agentlib.py": AGENT_MODULE,
                          "checklib/__init__.py": CHECKLIB, "checklib/extra.py": CHECKLIB_EXTRA}.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text, encoding="utf-8")


def loaded_cases(root: Path, text: str, data_modules: tuple[str, ...] = ()) -> list[Any]:
    suite = load_suite(root / "suites/agents.yaml", rubrics_dir=root / "rubrics", runner_kinds=BUILTIN_RUNNER_KINDS,
                       input_roots=(root,))
    (root / "suites/writer.cases.yaml").write_text(text, encoding="utf-8")
    return load_cases(root / "suites/writer.cases.yaml", agents=suite.agents, input_roots=(root,), import_root=root,
                      data_modules=data_modules)


@pytest.mark.parametrize(("check", "field", "what"), CODE_SPELLINGS)
@pytest.mark.parametrize("source", ["case", "row"])
def test_every_spelling_of_code_in_data_is_refused_at_its_field(tmp_path: Path, check: dict[str, Any], field: str,
                                                                what: str, source: str) -> None:
    root = tmp_path.resolve()
    sound_files(root)

    def cases(check: dict[str, Any]) -> str:
        if source == "case":
            return "agent: writer\ncases:\n  - id: a\n    inputs: {text: hi}\n    checks: [" + json.dumps(check) + "]\n"
        (root / "suites/rows.jsonl").write_text(json.dumps({"text": "hi", "checks": [check]}) + "\n")
        return 'agent: writer\ndataset: {file: rows.jsonl, inputs: {text: "{text}"}, checks: "{checks}"}\n'

    with pytest.raises(HarnessConfigError) as info:
        loaded_cases(root, cases(check), data_modules=("checklib",))
    line = info.value.message(root)
    where = f"cases[0].{field}" if source == "case" else f"dataset (row 1).{field}"
    assert line.startswith(f"suites/writer.cases.yaml: {where}: "), line
    assert line.endswith(f"(fix: name the {what} in the rubric, or list the module in ini harness_data_modules)")
    # the project may let data name its own code, and nothing else
    own = json.loads(json.dumps(check).replace("shutil:rmtree", "checklib:has_hello").replace(
        "os.path:exists", "checklib:has_hello").replace("os:getcwd", "checklib.extra:upper"))
    (case,) = loaded_cases(root, cases(own), data_modules=("checklib",))
    assert len(case.checks) == 1


def test_a_rubric_names_code_but_never_lets_a_case_fill_in_which(tmp_path: Path) -> None:
    """A rubric is the project's own configuration: its python checks and transforms work as before. A slot in a
    python check's function would let each case choose the code, so it is refused when the rubric loads;
    the case's values still reach the function as options."""
    root = tmp_path.resolve()
    sound_files(root)

    def rubric(check: str) -> Path:
        path = root / "rubrics/code.yaml"
        path.write_text(f"metadata: {{name: Code, version: '1.0.0'}}\nthreshold: 0.5\ndimensions:\n  d:\n"
                        f"    weight: 1\n    description: d\n    check: {check}\n", encoding="utf-8")
        return path

    today = TODAY
    check = load_rubric(rubric("{python: 'checklib:has_hello'}"), import_root=root).dimensions[0].check
    assert check.run("hello", CheckContext(inputs={}, today=today)).score == 1.0
    check = load_rubric(rubric("{python: {function: 'checklib.extra:short', options: {limit: '{inputs.limit}'}}}"),
                        import_root=root).dimensions[0].check
    assert check.run("hello", CheckContext(inputs={"limit": 9}, today=today)).score == 1.0
    assert check.run("hello", CheckContext(inputs={"limit": 2}, today=today)).score == 0.0
    for spelled in ("{python: '{inputs.fn}'}", "{python: {function: '{expected}'}}", "{python: '{fn}'}"):
        with pytest.raises(HarnessConfigError) as info:
            load_rubric(rubric(spelled), import_root=root)
        line = info.value.message(root)
        assert line.startswith("rubrics/code.yaml: dimensions.d.check.python"), line
        assert "never a value or a slot: a case would choose the code" in line, line


def test_a_bad_data_modules_line_is_one_usage_error(project: Project) -> None:
    open_project(project, "agent: writer\ncases:\n  - id: a\n    inputs: {text: hi}\n    checks: [{regex: h}]\n")
    project.ini("harness_data_modules =\n    checklib\n    my-checks\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini harness_data_modules: 'my-checks' is not a module name (fix: list dotted "
                                 "module names such as my_checks or my_project.checks, one a line)"])


# --- 2. templates, prompts and schema files only from inside the project ----------------------------------------


@pytest.mark.parametrize("template", ["../../etc/passwd", "../../../../../../../../../../etc/passwd", "/etc/passwd",
                                      "prompts/linked.txt"])
def test_a_template_outside_the_project_is_a_collection_error(project: Project, template: str) -> None:
    open_project(project, "agent: writer\ncases:\n  - id: a\n    inputs: {text: hi}\n    checks: [{regex: h}]\n")
    (project.root / "suites/prompts").mkdir()
    (project.root / "suites/prompts/linked.txt").symlink_to("/etc/passwd")  # a link that leads out
    project.agents(AGENTS.replace('producer: {python: "agentlib:produce"}', f"producer: {{template: {template}}}"))
    result = project.run("suites/")
    line = only_error(result)
    assert line == (f"suites/agents.yaml: agents.writer.producer.template: {template} is outside the project: a "
                    f"file named here must be under {project.root.resolve()} (fix: move the file into the project, "
                    "or list its folder in ini harness_input_dirs)")
    assert "root:" not in result.stdout.str()  # not a line of the file, anywhere
    assert not project.work.exists()


def test_files_outside_the_project_are_read_from_a_folder_the_project_lists(
        project: Project, tmp_path_factory: pytest.TempPathFactory) -> None:
    """ini harness_input_dirs lets a suite's templates, a rubric's schema file and its examples' inputs come from
    a shared folder, as it lets case inputs."""
    shared = tmp_path_factory.mktemp("shared")
    (shared / "answer.txt").write_text("{inputs.text}", encoding="utf-8")
    (shared / "schema.json").write_text('{"type": "string"}', encoding="utf-8")
    (shared / "example-input.txt").write_text("hello\n", encoding="utf-8")
    open_project(project, "agent: writer\ncases:\n  - id: a\n    inputs: {text: '\"hello\"'}\n")
    project.rubric("open", OPEN_RUBRIC.replace("dimensions: {}", f"""\
dimensions:
  json:
    weight: 1
    description: a JSON string
    check: {{json_schema: {{schema: {shared}/schema.json}}}}
examples:
  inputs: {{text: {{file: {shared}/example-input.txt}}}}"""))
    project.agents(AGENTS.replace('producer: {python: "agentlib:produce"}',
                                  f"producer: {{template: {shared}/answer.txt, model: mock/echo}}"))
    assert "is outside the project" in only_error(project.run("suites/"))
    project.ini(f"harness_input_dirs =\n    {shared}\n")
    project.run("suites/").assert_outcomes(passed=1)


@pytest.mark.parametrize(("where", "check"), [
    ("rubric", "{json_schema: {schema: /etc/passwd}}"),
    ("rubric", "{json_schema: {schema: ../../outside/schema.json}}"),
    ("case", '{json_schema: {schema: "../../outside/schema.json"}}'),
])
def test_a_schema_file_outside_the_project_is_refused_when_it_loads(tmp_path: Path, where: str, check: str) -> None:
    root = tmp_path.resolve() / "project"
    root.mkdir()
    sound_files(root)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/schema.json").write_text('{"type": "object"}', encoding="utf-8")
    with pytest.raises(HarnessConfigError) as info:
        if where == "rubric":
            (root / "rubrics/s.yaml").write_text("metadata: {name: S, version: '1.0.0'}\nthreshold: 0.5\ndimensions:\n"
                                                 f"  d: {{weight: 1, description: d, check: {check}}}\n")
            load_rubric(root / "rubrics/s.yaml", import_root=root, input_roots=(root,))
        else:
            loaded_cases(root, f"agent: writer\ncases:\n  - id: a\n    inputs: {{text: hi}}\n    checks: [{check}]\n")
    line = info.value.message(root)
    assert ".json_schema.schema: " in line and "is outside the project" in line, line
    assert "harness_input_dirs" in line


def test_a_schema_file_a_case_fills_in_is_read_only_from_inside_the_project(tmp_path: Path) -> None:
    """``schema: "{inputs.schema}"`` takes the file from each case: a case naming /etc/passwd is refused when it
    runs, in one line, and the file is not read."""
    root = tmp_path.resolve()
    check = parse_check({"json_schema": {"schema": "{inputs.schema}"}}, path=root / "rubrics/r.yaml",
                        field="dimensions.d.check", base_dir=root / "rubrics", import_root=root, roots=(root,))
    (root / "rubrics").mkdir()
    (root / "rubrics/ok.json").write_text('{"type": "object"}', encoding="utf-8")
    assert check.run("{}", CheckContext(inputs={"schema": "ok.json"}, today=TODAY)).score == 1.0
    with pytest.raises(HarnessConfigError) as info:
        check.run("{}", CheckContext(inputs={"schema": "/etc/passwd"}, today=TODAY))
    assert "dimensions.d.check.json_schema.schema: filled from the case ({inputs.schema} = '/etc/passwd'): " \
           "/etc/passwd is outside the project" in info.value.message(root)


# --- 3. importers: nothing from outside the project, all or nothing -------------------------------------------

CONFIG = """\
prompts: ['Say {{text}}']
providers: [echo]
tests:
  - vars: {text: hello}
    assert: [{type: contains, value: hello}]
"""


def listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_import_fed_etc_passwd_writes_nothing(tmp_path: Path) -> None:
    """As a user runs it: one line naming the config, the field and the fix, exit code 64, no file written."""
    (tmp_path / "promptfooconfig.yaml").write_text(CONFIG.replace("['Say {{text}}']", "[file:///etc/passwd]"))
    before = listing(tmp_path)
    done = subprocess.run([sys.executable, "-m", "harness.apps.cli", "import", "promptfoo", "promptfooconfig.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.USAGE_ERROR, done.stderr
    assert done.stdout == ""
    assert done.stderr == (f"harness: promptfooconfig.yaml: prompts[0]: file:///etc/passwd is outside the project: the "
                           f"files a config names must be under its folder ({tmp_path.resolve()}) or --out "
                           f"({tmp_path.resolve()}) (fix: copy the file into the project and name it relative to the "
                           "config)\n")
    assert listing(tmp_path) == before


def run_import(*argv: str) -> tuple[int, str, str]:
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["import", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("edit", "field"), [
    (("['Say {{text}}']", "[file://../../x.txt]"), "prompts[0]"),
    (("['Say {{text}}']", "['file://../../*.txt']"), "prompts[0]"),
    (("['Say {{text}}']", "['file:///etc/*.conf']"), "prompts[0]"),
    (("['Say {{text}}']", "[file://linked.txt]"), "prompts[0]"),
    (("tests:\n", "defaultTest: file:///etc/passwd\ntests:\n"), "defaultTest"),
    (("  - vars: {text: hello}\n", "  - file://../../x.csv\n  - vars: {text: hello}\n"), "tests[0]"),
    (("vars: {text: hello}", "vars: {text: file:///etc/hostname}"), "tests[0].vars.text"),
    (("vars: {text: hello}", "vars: file://../../vars.yaml"), "tests[0].vars"),
    (("[{type: contains, value: hello}]", "[{type: is-json, value: 'file://../../schema.json'}]"),
     "tests[0].assert[0].value"),
    (("[{type: contains, value: hello}]", "[{type: llm-rubric, value: Says hello}]\n"
      "defaultTest: {options: {rubricPrompt: 'file:///etc/passwd'}}"), "defaultTest.options.rubricPrompt"),
])
def test_an_importer_refuses_every_path_outside_the_project_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: tuple[str, str], field: str) -> None:
    outside = tmp_path / "outside"
    project = tmp_path / "project"
    (project / "eval").mkdir(parents=True)
    outside.mkdir()
    for name, text in {"x.txt": "secret", "x.csv": "text\nsecret\n", "vars.yaml": "text: secret\n",
                       "schema.json": "{}"}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (project / "eval/linked.txt").symlink_to(tmp_path / "x.txt")
    (project / "eval/promptfooconfig.yaml").write_text(CONFIG.replace(*edit), encoding="utf-8")
    monkeypatch.chdir(project)
    before = listing(project)
    code, out, err = run_import("promptfoo", "eval/promptfooconfig.yaml", "--out", ".")
    assert code == ExitCode.USAGE_ERROR, err
    assert err.count("\n") == 1 and err.startswith(f"harness: eval/promptfooconfig.yaml: {field}: "), err
    assert "is outside the project" in err and err.endswith("(fix: copy the file into the project and name it "
                                                            "relative to the config)\n")
    assert out == "" and "secret" not in err
    assert listing(project) == before


def test_an_import_that_cannot_write_one_file_writes_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file where one of the import's folders goes: said before anything is written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "promptfooconfig.yaml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "suites/hello/prompts").parent.mkdir(parents=True)
    (tmp_path / "suites/hello/prompts").write_text("in the way\n", encoding="utf-8")
    before = listing(tmp_path)
    code, out, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "hello")
    assert code == ExitCode.CANT_CREATE
    assert err == ("harness: import: cannot write suites/hello/prompts/prompt_1.txt: suites/hello/prompts is not a "
                   "folder: nothing was written (fix: move it away, or --out another folder)\n")
    assert out == "" and listing(tmp_path) == before


def test_an_import_failing_part_of_the_way_takes_back_what_it_wrote(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while the files go into place (a full disk, say) removes the import's new files and folders and
    restores the files it was overwriting (--force), byte for byte."""
    import harness.apps.importers as importers

    monkeypatch.chdir(tmp_path)
    (tmp_path / "promptfooconfig.yaml").write_text(CONFIG, encoding="utf-8")
    assert run_import("promptfoo", "promptfooconfig.yaml", "--name", "hello")[0] == 0
    (tmp_path / "rubrics/hello.yaml").write_text("# edited by hand\n", encoding="utf-8")
    (tmp_path / "suites/hello/agents.yaml").unlink()  # the import will make it anew
    two = CONFIG.replace("['Say {{text}}']", "['Say {{text}}', 'Shout {{text}}']")  # a second agent: new files
    (tmp_path / "promptfooconfig.yaml").write_text(two, encoding="utf-8")
    before = listing(tmp_path)
    renames = 0
    real_replace = os.replace

    def failing_replace(source: Any, target: Any) -> None:
        nonlocal renames
        if str(source).split(os.sep)[-2].startswith(".harness-import-") and not str(source).endswith(".tmp"):
            renames += 1
            if renames == 4:
                raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(importers.os, "replace", failing_replace)
    code, out, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "hello", "--force")
    assert code == ExitCode.CANT_CREATE, err
    assert err.startswith("harness: import: cannot write ") and err.endswith(
        ": No space left on device: nothing was written\n"), err
    assert listing(tmp_path) == before  # edited rubric back, no agents.yaml, no second agent's files
    assert not list(tmp_path.glob(".harness-import-*"))


def test_an_imported_config_never_names_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python and JavaScript asserts, code transforms, prompt functions, vars and providers in code: each is a
    `not carried over:` line, and no written file names a module:function."""
    monkeypatch.chdir(tmp_path)
    for name in ("check.py", "transform.py", "prompt.py", "var.py", "provider.py"):
        (tmp_path / name).write_text("def f(*args):\n    return 1\n", encoding="utf-8")
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts: ['Say {{text}}', 'file://prompt.py:f']
        providers: ['file://provider.py', echo]
        tests:
          - vars: {text: hello, extra: 'file://var.py'}
            options: {transform: 'file://transform.py'}
            assert:
              - {type: python, value: 'file://check.py'}
              - {type: javascript, value: 'output.length > 1'}
              - {type: contains, value: hello, transform: 'file://transform.py:f'}
              - {type: llm-rubric, value: Says hello}
    """), encoding="utf-8")
    code, out, err = run_import("promptfoo", "promptfooconfig.yaml", "--name", "hello")
    assert code == 0, err
    lines = out.splitlines()
    for where in ("prompts[1]", "providers[0]", "tests[0].vars.extra", "tests[0].options.transform",
                  "tests[0].assert[0] (python)", "tests[0].assert[1] (javascript)", "tests[0].assert[2].transform"):
        assert any(line.startswith(f"not carried over: {where}") for line in lines), (where, lines)

    def code_named(value: Any) -> list[Any]:
        if isinstance(value, dict):
            found = [v for k, v in value.items() if k == "python" or (k == "transform" and isinstance(v, str))]
            return found + [x for v in value.values() for x in code_named(v)]
        if isinstance(value, list):
            return [x for v in value for x in code_named(v)]
        return []

    written = [p for p in tmp_path.rglob("*.yaml") if p.name != "promptfooconfig.yaml"]
    assert len(written) >= 3
    assert [found for p in written for found in code_named(yaml.safe_load(p.read_text()))] == []


def test_an_evals_registry_does_not_follow_a_link_out_of_itself(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere.yaml").write_text("fact:\n  prompt: '{input} {completion}'\n  choice_strings: YN\n"
                                             "  choice_scores: {Y: 1, N: 0}\n  eval_type: classify\n")
    (tmp_path / "registry/modelgraded").mkdir(parents=True)
    (tmp_path / "registry/evals").mkdir()
    (tmp_path / "registry/modelgraded/fact.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    (tmp_path / "registry/evals/e.yaml").write_text("e:\n  class: evals.elsuite.modelgraded.classify:ModelBasedClassify"
                                                    "\n  args: {modelgraded_spec: fact}\n")
    (tmp_path / "samples.jsonl").write_text('{"input": "hi", "ideal": "hi"}\n')
    code, out, err = run_import("openai-evals", "registry/evals/e.yaml", "samples.jsonl")
    assert code == ExitCode.USAGE_ERROR
    assert "e.args.modelgraded_spec: no spec 'fact' in ../modelgraded/ or beside the file" in err
    assert not (tmp_path / "rubrics").exists() and not (tmp_path / "suites").exists()
