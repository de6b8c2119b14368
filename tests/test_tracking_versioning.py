"""Rubric versioning (seed 000 section 3): ``harness rubric diff`` and the functions the rubric item calls."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.apps.cli import main
from harness.loading import load_rubric
from harness.loading.versioning import (
    Bump,
    RubricVersionTooLow,
    check_version_bump,
    committed_rubric,
    minimum_version,
    required_bump,
    version_problem,
)

BASE = """\
metadata:
  name: "Summary Quality"
  version: "{version}"
  agent: writer
threshold: {threshold}
dimensions:
  accuracy:
    weight: {accuracy}
    description: "Claims are correct"
    scoring:
      1.0: "All claims correct"
      0.0: "A claim is wrong"
  clarity:
    weight: {clarity}
    description: "{clarity_text}"
    scoring:
      1.0: "Clear"
      0.0: "Unclear"
{extra}"""


def rubric_text(version: str = "1.0.0", threshold: float = 0.8, accuracy: float = 0.6, clarity: float = 0.4,
                clarity_text: str = "Easy to read", extra: str = "") -> str:
    return BASE.format(version=version, threshold=threshold, accuracy=accuracy, clarity=clarity,
                       clarity_text=clarity_text, extra=extra)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def pair(tmp_path: Path):
    def make(new_text: str, old_text: str | None = None):
        old = write(tmp_path / "old" / "summary-quality.yaml", old_text or rubric_text())
        new = write(tmp_path / "new" / "summary-quality.yaml", new_text)
        return load_rubric(old, import_root=tmp_path), load_rubric(new, import_root=tmp_path)
    return make


def test_unchanged_needs_nothing(pair) -> None:
    assert required_bump(*pair(rubric_text())) == (Bump.NONE, [])


def test_wording_is_patch(pair) -> None:
    bump, reasons = required_bump(*pair(rubric_text(clarity_text="Easy to read aloud")))
    assert bump is Bump.PATCH
    assert reasons == ["PATCH: description of clarity reworded"]


def test_small_weight_change_is_minor(pair) -> None:
    bump, reasons = required_bump(*pair(rubric_text(accuracy=0.62, clarity=0.38)))
    assert bump is Bump.MINOR
    assert "MINOR: weight of accuracy: 0.6 -> 0.62 (change 0.02 < 0.05)" in reasons


def test_new_scoring_level_is_minor(pair) -> None:
    text = rubric_text().replace('      1.0: "Clear"\n', '      1.0: "Clear"\n      0.5: "Mostly clear"\n')
    bump, reasons = required_bump(*pair(text))
    assert bump is Bump.MINOR
    assert reasons == ["MINOR: scoring levels of clarity added: 0.5 (levels now 0, 0.5, 1)"]


def test_a_changed_step_is_minor(pair) -> None:
    def scaled(extra: str) -> str:
        return rubric_text().replace('    description: "Easy to read"\n',
                                     f'    description: "Easy to read"\n    scale: [0, 10]\n{extra}')

    bump, reasons = required_bump(*pair(scaled("    step: 0.5\n"), old_text=scaled("")))
    assert (bump, reasons) == (Bump.MINOR, ["MINOR: scale of clarity changed: [0, 10] -> [0, 10] step 0.5"])


def test_changed_check_is_minor_and_says_what_changed(pair) -> None:
    def with_check(check: str) -> str:
        return rubric_text().replace('    description: "Easy to read"\n', f'    description: "Easy to read"\n    check: {check}\n')

    bump, reasons = required_bump(*pair(with_check("{length: {max_words: 300}}"),
                                         old_text=with_check("{length: {max_words: 400}}")))
    assert bump is Bump.MINOR
    assert reasons == ["MINOR: check of clarity changed: bounds (('words', None, 400),) -> (('words', None, 300),)"]
    bump, reasons = required_bump(*pair(with_check("{length: {max_words: 300}}")))
    assert reasons == ["MINOR: check of clarity changed: LLM judge -> length check"]


@pytest.mark.parametrize(("changed", "reason"), [
    (rubric_text(accuracy=0.7, clarity=0.3), "MAJOR: weight of accuracy: 0.6 -> 0.7 (change 0.1 >= 0.05)"),
    (rubric_text(accuracy=0.65, clarity=0.35), "MAJOR: weight of accuracy: 0.6 -> 0.65 (change 0.05 >= 0.05)"),
    (rubric_text(threshold=0.85), "MAJOR: threshold changed: 0.8 -> 0.85"),
    (rubric_text(accuracy=0.5, clarity=0.3, extra='  sources:\n    weight: 0.2\n    description: "Cites"\n'),
     "MAJOR: dimension added: sources"),
])
def test_major_changes(pair, changed: str, reason: str) -> None:
    bump, reasons = required_bump(*pair(changed))
    assert bump is Bump.MAJOR
    assert reason in reasons
    assert reasons == sorted(reasons, key=lambda r: ["MAJOR", "MINOR", "PATCH"].index(r.split(":")[0]))


def test_removed_dimension_is_major(pair) -> None:
    old_text = rubric_text(accuracy=0.5, clarity=0.3, extra='  sources:\n    weight: 0.2\n    description: "Cites"\n')
    bump, reasons = required_bump(*pair(rubric_text(), old_text=old_text))
    assert bump is Bump.MAJOR and "MAJOR: dimension removed: sources" in reasons


def test_minimum_versions() -> None:
    assert str(minimum_version("1.4.2", Bump.MAJOR)) == "2.0.0"
    assert str(minimum_version("1.4.2", Bump.MINOR)) == "1.5.0"
    assert str(minimum_version("1.4.2", Bump.PATCH)) == "1.4.3"
    assert str(minimum_version("1.4.2", Bump.NONE)) == "1.4.2"


def test_version_problem_names_the_needed_version(pair) -> None:
    old, new = pair(rubric_text(version="1.0.1", threshold=0.9))
    problem = version_problem(old, new)
    assert problem == ("version 1.0.1 is too low: the change since 1.0.0 needs a MAJOR bump (version 2.0.0 or "
                       "later): MAJOR: threshold changed: 0.8 -> 0.9")
    assert version_problem(*pair(rubric_text(version="2.0.0", threshold=0.9))) is None
    assert version_problem(*pair(rubric_text(version="1.0.1", clarity_text="Plain"))) is None


def test_cli_rubric_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path / "a" / "summary-quality.yaml", rubric_text())
    new = write(tmp_path / "b" / "summary-quality.yaml", rubric_text(version="1.1.0", accuracy=0.7, clarity=0.3))
    assert main(["rubric", "diff", str(old), str(new)]) == 1
    captured = capsys.readouterr()
    assert "1.0.0 -> 1.1.0; the change needs MAJOR (version 2.0.0 or later)" in captured.out
    assert "  - MAJOR: weight of accuracy: 0.6 -> 0.7 (change 0.1 >= 0.05)" in captured.out
    assert "version 1.1.0 is too low" in captured.err

    write(new, rubric_text(version="2.0.0", accuracy=0.7, clarity=0.3))
    assert main(["rubric", "diff", str(old), str(new)]) == 0


def test_cli_rubric_diff_needs_no_example_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An old copy kept elsewhere (a download, a release folder) whose example globs match nothing there."""
    examples = 'examples:\n  gold: ["examples/gold/*.md"]\n  anti_patterns: ["examples/anti/*.md"]\n'
    old = write(tmp_path / "old" / "summary-quality.yaml", rubric_text() + examples)
    new = write(tmp_path / "new" / "summary-quality.yaml", rubric_text(version="1.0.1", clarity_text="Plain")
                + examples)
    assert main(["rubric", "diff", str(old), str(new)]) == 0
    assert "1.0.0 -> 1.0.1; the change needs PATCH" in capsys.readouterr().out


def test_cli_rubric_diff_reports_a_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path / "a.yaml", rubric_text())
    new = write(tmp_path / "b.yaml", rubric_text(accuracy=0.9))  # weights sum to 1.3
    assert main(["rubric", "diff", str(old), str(new)]) == 78
    assert "b.yaml: dimensions.*.weight: weights sum to 1.3" in capsys.readouterr().err


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.invalid", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


@needs_git
def test_committed_rubric_and_the_item_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    path = write(repo / "rubrics" / "summary-quality.yaml", rubric_text())
    assert committed_rubric(path) is None  # not a git work tree
    git(repo, "init", "-q")
    assert committed_rubric(path) is None  # never committed
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "rubric")
    write(path, rubric_text(version="1.0.1", threshold=0.9))  # working copy: threshold raised, patch bump only
    committed = committed_rubric(path)
    assert committed is not None and committed.version == "1.0.0" and committed.threshold == 0.8
    assert committed.name == "summary-quality" and committed.path == path.resolve()
    current = load_rubric(path, import_root=repo)
    assert "needs a MAJOR bump (version 2.0.0 or later)" in version_problem(committed, current)

    assert main(["rubric", "diff", str(path)]) == 1  # one file: against git HEAD
    assert "(HEAD -> working copy): 1.0.0 -> 1.0.1; the change needs MAJOR" in capsys.readouterr().out

    with pytest.raises(RubricVersionTooLow) as info:  # what the rubric item runs
        check_version_bump(current)
    assert str(info.value) == (
        f"{path.resolve()}: metadata.version: version 1.0.1 is too low: the change since 1.0.0 needs a MAJOR bump "
        "(version 2.0.0 or later): MAJOR: threshold changed: 0.8 -> 0.9 (fix: set metadata.version to 2.0.0 or later)")
    write(path, rubric_text(version="2.0.0", threshold=0.9))
    check_version_bump(load_rubric(path, import_root=repo))  # bumped enough: passes


@needs_git
def test_version_check_passes_when_there_is_nothing_to_compare(tmp_path: Path) -> None:
    path = write(tmp_path / "rubrics" / "summary-quality.yaml", rubric_text())
    check_version_bump(load_rubric(path, import_root=tmp_path))  # not in git
    git(tmp_path, "init", "-q")
    check_version_bump(load_rubric(path, import_root=tmp_path))  # in git, never committed


@needs_git
def test_rubric_item_fails_when_the_version_is_too_low(pytester: pytest.Pytester) -> None:
    """The whole path a user sees: edit a committed rubric without bumping enough, run pytest."""
    path = write(pytester.path / "rubrics" / "summary-quality.yaml", rubric_text())
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", ".")
    git(pytester.path, "commit", "-q", "-m", "rubric")
    write(path, rubric_text(version="1.1.0", accuracy=0.7, clarity=0.3))
    result = pytester.runpytest("rubrics", "-o", "harness=true", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*metadata.version: version 1.1.0 is too low: the change since 1.0.0 needs a MAJOR "
                                 "bump (version 2.0.0 or later): MAJOR: weight of accuracy: 0.6 -> 0.7*"])
    write(path, rubric_text(version="2.0.0", accuracy=0.7, clarity=0.3))
    pytester.runpytest("rubrics", "-o", "harness=true", "-p", "no:cacheprovider").assert_outcomes(passed=1)
