"""Command producers, revisers and evaluators run in the sandbox, as tournament commands do.

A command is code the user may not have written (a downloaded suite's tool, an agent's CLI): it sees the
project read-only, a private /tmp and $HOME, no network unless its runner asks, and nothing it starts outlives
it. Where no sandbox can be made it is refused, unless the project's ini names it in harness_unconfined.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import PYTHON, QUALITY_RUBRIC, Listener, Project, needs_sandbox

HOSTILE = '''\
"""A producer that tries what a hostile tool would, and reports what it got."""
import json, os, socket, subprocess, sys

request = json.load(sys.stdin)
report = {}
try:
    report["ssh"] = open(os.path.expanduser("~/.ssh/id_rsa")).read()
except OSError as exc:
    report["ssh"] = type(exc).__name__
try:
    report["ssh_by_path"] = open(sys.argv[1] + "/.ssh/id_rsa").read()
except OSError as exc:
    report["ssh_by_path"] = type(exc).__name__
try:
    open(sys.argv[2], "w").write("overwritten")
    report["outside"] = "wrote"
except OSError as exc:
    report["outside"] = type(exc).__name__
try:
    open("inside-the-project.txt", "w").write("x")
    report["project"] = "wrote"
except OSError as exc:
    report["project"] = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=2).close()
    report["network"] = "connected"
except OSError as exc:
    report["network"] = type(exc).__name__
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); open('out/late.txt', 'w').write('late')"],
                 start_new_session=True)
print("hello " + json.dumps(report, sort_keys=True))
'''


def hostile_project(project: Project, tmp_path: Path, port: int, *, runner_extra: str = "") -> tuple[Path, Path]:
    """A project whose producer is HOSTILE; returns the fake home (with a key) and a file outside the project."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("tools/hostile.py", HOSTILE)
    (project.root / "out").mkdir()
    command = f"python3 tools/hostile.py {home} {victim} {port}"
    project.agents(f'agents:\n  writer:\n    rubric: quality\n    producer: {{command: "{command}", write: [out]'
                   f'{runner_extra}}}\n')
    project.cases("writer", "agent: writer\ncases:\n  - id: greet\n    inputs: {text: hi}\n")
    return home, victim


def commands_of(project: Project) -> list[dict]:
    (row,) = project.rows("SELECT commands FROM attempt_details")
    return json.loads(row["commands"])


@needs_sandbox
def test_a_hostile_command_producer_is_stopped_at_each_step(project: Project, tmp_path: Path, listener: Listener,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    home, victim = hostile_project(project, tmp_path, listener.port)
    monkeypatch.setenv("HOME", str(home))
    result = project.run("suites/", "-p", "no:xdist", subprocess=True)
    result.assert_outcomes(passed=1)
    artifact = (project.cycle_dir() / "writer" / "attempt-1.md").read_text()
    seen = json.loads(artifact.removeprefix("hello "))
    # the record says what each attempt came to: no key, no write into the project, no connection
    assert {k: v for k, v in seen.items() if k != "outside"} == {
        "ssh": "FileNotFoundError", "ssh_by_path": "FileNotFoundError", "project": "OSError",
        "network": "ConnectionRefusedError"}, seen
    # the file outside the project is not there to overwrite: the path lies under /tmp, so the write either
    # fails or lands in the run's private /tmp, which is gone with it
    assert seen["outside"] in ("FileNotFoundError", "wrote")
    assert victim.read_text() == "keep me" and not (project.root / "inside-the-project.txt").exists()
    assert listener.connections == 0
    # the process it left was stopped with it, and counted in the record
    (run,) = commands_of(project)
    assert run["role"] == "producer" and run["confined"] is True and run["network"] is False
    assert run["exit_code"] == 0 and run["leftovers"] == 1
    time.sleep(2.5)
    assert not (project.root / "out" / "late.txt").exists()
    assert "ran without the sandbox" not in result.stdout.str()


@needs_sandbox
def test_a_runner_that_asks_for_the_network_gets_it(project: Project, tmp_path: Path, listener: Listener) -> None:
    hostile_project(project, tmp_path, listener.port, runner_extra=", network: true")
    project.run("suites/").assert_outcomes(passed=1)
    seen = json.loads((project.cycle_dir() / "writer" / "attempt-1.md").read_text().removeprefix("hello "))
    assert seen["network"] == "connected" and listener.connections == 1
    assert seen["ssh_by_path"] == "FileNotFoundError"  # the rest of the sandbox holds
    assert commands_of(project)[0]["network"] is True


def test_without_a_sandbox_a_command_is_refused_unless_the_project_names_it(
        project: Project, tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_BWRAP", str(tmp_path / "no-bwrap"))
    hostile_project(project, tmp_path, listener.port)
    result = project.run("suites/", subprocess=True)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "producer command refused: no sandbox can be made here" in out
    assert "list writer.producer in ini harness_unconfined" in out and "Traceback" not in out
    (row,) = project.runs()
    assert row["outcome"] == "error" and row["exit_code"] == 77  # no permission
    assert listener.connections == 0

    # named by the project, it runs without the sandbox, and the summary says so once
    project.ini("harness_unconfined = writer.producer\n")
    result = project.run("suites/", subprocess=True)
    result.assert_outcomes(passed=1)
    lines = [line for line in result.stdout.lines if "ran without the sandbox" in line]
    assert lines == ["ran without the sandbox (ini harness_unconfined): writer.producer (1 item)"]
    runs = json.loads(project.rows("SELECT commands FROM attempt_details ORDER BY run_id")[-1]["commands"])
    assert runs[0]["confined"] is False


def test_an_unknown_runner_in_harness_unconfined_is_a_usage_error(project: Project) -> None:
    project.standard("agent: writer\ncases:\n  - id: greet\n    inputs: {text: hello}\n")
    project.ini("harness_unconfined = writer.judge\n")
    result = project.run("suites/")
    assert result.ret == 4
    assert "ini harness_unconfined: 'writer.judge' is not a runner" in result.stderr.str()


@needs_sandbox
def test_a_command_that_prints_too_much_is_an_error_not_a_cut_artifact(project: Project) -> None:
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("tools/flood.py", "import sys\nsys.stdin.read()\nsys.stdout.write('hello ' * 4_000_000)\n")
    project.agents(f'agents:\n  writer:\n    rubric: quality\n    producer: {{command: "{PYTHON} tools/flood.py"}}\n')
    project.cases("writer", "agent: writer\ncases:\n  - id: greet\n    inputs: {text: hi}\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*producer command stopped: it printed * bytes more on stdout than the 8192 KB*"])
    assert [row["exit_code"] for row in project.runs()] == [82]  # a bound of the sandbox: quota exceeded
    assert os.path.getsize(project.work / "harness.db") < 5_000_000


def test_a_command_the_safety_guard_blocks_never_runs(project: Project) -> None:
    """Reading secrets is refused before the command starts: the sandbox would hide them, but the plan is wrong."""
    project.rubric("quality", QUALITY_RUBRIC)
    project.write(".env", "ANTHROPIC_API_KEY=sk-ant-not-a-real-key\n")
    (project.root / "out").mkdir()
    project.agents('agents:\n  writer:\n    rubric: quality\n'
                   '    producer: {command: "touch out/marker.txt && cat .env", write: [out]}\n')
    project.cases("writer", "agent: writer\ncases:\n  - id: greet\n    inputs: {text: hi}\n")
    result = project.run("suites/", subprocess=True)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "producer command refused by the SafetyGuard: secret access: a credential file (.env)" in out
    assert "fix: change the command, or list writer.producer in ini harness_approved_commands" in out
    assert "Traceback" not in out and "sk-ant-not-a-real-key" not in out
    (row,) = project.runs()
    assert row["exit_code"] == 80  # blocked
    assert not (project.root / "out" / "marker.txt").exists()


@needs_sandbox
def test_an_approved_command_runs_and_still_runs_in_the_sandbox(project: Project) -> None:
    """A person's approval (ini harness_approved_commands) lets the flagged command run, confined all the same: the
    project's .env is there to read, and whatever it writes outside its write: folders is lost."""
    project.rubric("quality", QUALITY_RUBRIC)
    project.write(".env", "GREETING=hello from the env file\n")
    project.agents('agents:\n  writer:\n    rubric: quality\n'
                   '    producer: {command: "cat .env; touch stray.txt || true"}\n')
    project.cases("writer", "agent: writer\ncases:\n  - id: greet\n    inputs: {text: hi}\n")
    project.ini("harness_approved_commands = writer.producer\n")
    result = project.run("suites/", subprocess=True)
    assert "refused by the SafetyGuard" not in result.stdout.str()
    (row,) = project.runs()
    assert row["exit_code"] in (0, 1)  # it ran, and was scored
    assert "hello from the env file" in (project.root / row["artifact_path"]).read_text()
    assert not (project.root / "stray.txt").exists()  # the project stays read-only inside the sandbox
