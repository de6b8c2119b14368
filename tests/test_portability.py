"""Linux, macOS and Windows (issue 25, part 2): the harness and its records use nothing POSIX-only outside the
sandbox, and where the sandbox is needed on a system without bubblewrap the refusal is one line saying why.

The CI workflow of docs/ci.md runs the suite on all three systems; here, on Linux, the other systems are what the
code reads them as (``sys.platform``, ``os.name``)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import harness
from conftest import QUALITY_RUBRIC, Project
from harness.sandbox import Confinement, Limits, not_linux, unconfined

ROOT = Path(harness.__file__).parent
POSIX_ONLY_MODULES = {"fcntl", "resource", "termios", "pwd", "grp", "posix"}
POSIX_ONLY_CALLS = {"pread", "pwrite", "killpg", "wait4", "getuid", "geteuid", "setsid", "fork", "uname"}
# What needs a POSIX system on purpose: the sandbox, and the tournament (whose every run is confined).
POSIX_PARTS = ("sandbox", "apps/tournament")


def test_the_records_path_imports_and_calls_nothing_posix_only() -> None:
    """The plugin, the records, the loaders, the evaluation and the commands of the records (history, report, merge)
    import no POSIX-only module and call no POSIX-only function of ``os``: they run on Windows as they are."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(POSIX_PARTS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [f"{relative}: import {a.name}" for a in node.names if a.name.split(".")[0] in POSIX_ONLY_MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in POSIX_ONLY_MODULES:
                found.append(f"{relative}: from {node.module} import ...")
            elif (isinstance(node, ast.Attribute) and node.attr in POSIX_ONLY_CALLS and isinstance(node.value, ast.Name)
                  and node.value.id == "os"):
                found.append(f"{relative}:{node.lineno}: os.{node.attr}")
    assert found == []


@pytest.mark.parametrize(("platform", "name"), [("darwin", "macOS"), ("win32", "Windows")])
def test_on_a_system_without_bubblewrap_the_reason_says_so(platform: str, name: str) -> None:
    assert not_linux(platform) == (f"bubblewrap needs Linux and this is {name}; commands that must run confined run "
                                   "on a Linux machine or CI runner with bubblewrap (apt install bubblewrap)")
    assert not_linux("linux") == ""


def test_on_macos_a_command_producer_is_refused_in_one_line(project: Project) -> None:
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("tools/produce.py", "print('hello there')\n")
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {command: "python tools/produce.py"}\n')
    project.cases("writer", "agent: writer\ncases:\n  - id: one\n    inputs: {text: x}\n")
    project.write("conftest.py", "import sys\nsys.platform = 'darwin'  # what a Mac's Python says\n")
    result = project.run("suites/", subprocess=True)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    # pytest's own short summary repeats the first line, whole when CI is set, cut to the terminal's width otherwise
    refused = [line for line in result.stdout.lines if "command refused" in line and not line.startswith("FAILED ")]
    assert len(refused) == 1 and "Traceback" not in out
    assert ("producer command refused: no sandbox can be made here (bubblewrap needs Linux and this is macOS; "
            "commands that must run confined run on a Linux machine or CI runner with bubblewrap") in refused[0]


def test_on_windows_a_command_cannot_run_even_unconfined_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    monkeypatch.setattr(os, "name", "nt")
    done = unconfined("ini harness_unconfined names writer.producer").run(
        ["/bin/true"], Confinement(workdir=tmp_path, env={}), Limits(timeout_s=5))
    monkeypatch.undo()
    assert (done.exit_code, done.confined) == (126, False)
    assert done.stderr.startswith("commands cannot run on Windows, confined or not: the harness runs them under a "
                                  "POSIX process runner")
    assert "\n" not in done.stderr


def test_records_are_written_in_binary(tmp_path: Path) -> None:
    """Files are opened so that "\\n" is written as it is (Windows' text mode would make it "\\r\\n", and the
    run-log's O(1) append reads its last bytes)."""
    from harness.base.fileio import append_text, atomic_write_text

    atomic_write_text(tmp_path / "a.json", "[\n1\n]\n")
    append_text(tmp_path / "b.log", "one")
    assert (tmp_path / "a.json").read_bytes() == b"[\n1\n]\n"
    assert (tmp_path / "b.log").read_bytes() == b"one\n"
    source = (ROOT / "base" / "fileio.py").read_text(encoding="utf-8")
    # on Linux text mode changes nothing, so the source is what says Windows would get the same bytes: the atomic
    # writer writes encoded bytes to a descriptor opened O_BINARY, the appender opens its file with newline=""
    assert source.count('getattr(os, "O_BINARY", 0)') == 2 and source.count('newline=""') == 1
    assert 'redact(text).encode("utf-8")' in source and "os.fdopen" not in source
