"""``harness traces`` as a user runs it (a subprocess): filters, formats, errors, ``--follow``; and the pandas loaders
that compute a score from a real run's gates after the fact."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import harness.apps.traces.frames  # noqa: F401 - pandas imported once, before any in-process pytester run
from conftest import Project
from harness.apps.traces import load_execution_traces, load_executions
from harness.base import exit_codes
from harness.base.events import ExecutionCompleted, GateChecked, ModelCalled, SkillInvoked, item_span
from harness.base.usage import Usage
from harness.records import TraceSink

DAY = "2026-01-31"
T0 = 1769850000.0  # 2026-01-31T09:00:00Z
# (case, exit code) of the items in a made-up cycle: a pass, a command's data error, a timeout, an escalation
ITEMS = (("ok", 0), ("bad-data", 65), ("slow", 81), ("human", 83))


def write_cycle(work: Path, cycle: str, items=ITEMS, start: float = T0) -> None:
    """A trace as a session writes it: each item invoked, a gate, a model call, its execution result."""
    sink = TraceSink(work, cycle)
    for n, (case, code) in enumerate(items):
        nodeid = f"suites/w.cases.yaml::{case}"
        at = start + n * 60
        gate = {"gate": 2, "name": "execution", "passed": code == 0, "checked_at": "",
                "details": {"checks_performed": [{"name": "ran", "passed": code == 0, "message": ""}],
                            "failures": [] if code == 0 else [{"name": "ran", "message": f"exit {code}"}]}}
        result = {"execution_id": f"x-{case}", "skill_id": "writer", "status": exit_codes.status(code),
                  "exit_code": code, "exit_meaning": exit_codes.name(code), "triage": exit_codes.triage(code),
                  "duration_ms": 12.0, "outputs": {"primary": None, "artifacts": [], "side_effects": []},
                  "diagnostics": {"gates_passed": [gate], "errors": [], "warnings": [], "retries": []},
                  "assessment": {"score": 1.0 if code == 0 else None}}
        sink(SkillInvoked(nodeid, "writer", "1.0.0", "command", {"text": "sha256:00"}, at=at))
        sink(GateChecked(nodeid, gate, at=at + 1))
        with item_span(nodeid):
            sink(ModelCalled("claude-haiku-4-5", Usage(100, 20), 0.0002, False, False, 300.0, at=at + 2))
        sink(ExecutionCompleted(nodeid, result, at=at + 3))
    sink.close()


def harness(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.apps.cli", "traces", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def cases_of(output: str) -> list[str]:
    return [json.loads(line)["data"]["nodeid"].rsplit("::", 1)[1] for line in output.splitlines()]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "WORK"
    write_cycle(work, f"{DAY}-001", items=(("yesterday", 0),), start=T0 - 86400)
    write_cycle(work, f"{DAY}-002")
    return work


def test_text_reads_one_line_per_event_of_the_latest_cycle(work: Path) -> None:
    done = harness("--work-dir", str(work))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 * 4 and "yesterday" not in done.stdout
    assert lines[0].split() == ["2026-01-31T09:00:00.000Z", "skill_invoked", "suites/w.cases.yaml::ok", "writer",
                                "1.0.0", "via", "command,", "attempt", "1,", "0", "chars", "of", "input", "(inputs:",
                                "text)"]
    assert "gate 2 execution FAILED (1 check): ran: exit 65" in lines[5]
    assert lines[6].endswith("claude-haiku-4-5 100/20 tokens, $0.000200, 300 ms")
    assert lines[7].endswith("failure exit 65 (data_error; fix_inputs) in 12 ms, gates 2-")
    assert lines[3].endswith("success exit 0 in 12 ms, score 1.000, gates 2+")


def test_filters_by_item_event_and_exit_code(work: Path) -> None:
    by_item = harness("--work-dir", str(work), "--item", "slow", "--format", "json")
    assert set(cases_of(by_item.stdout)) == {"slow"} and len(by_item.stdout.splitlines()) == 4
    events = harness("--work-dir", str(work), "--event", "model_call", "--event", "gate-checked", "--format", "json")
    assert [json.loads(line)["event"] for line in events.stdout.splitlines()] == ["gate_checked", "model_call"] * 4
    for spec, wanted in (("65", {"bad-data"}), ("80-83", {"slow", "human"}), ("escalate", {"slow", "human"}),
                         ("timeout,0", {"slow", "ok"}), ("fix_inputs", {"bad-data"})):
        done = harness("--work-dir", str(work), "--exit-code", spec, "--format", "json")
        assert done.returncode == 0, done.stderr
        assert set(cases_of(done.stdout)) == wanted, spec
        assert len(done.stdout.splitlines()) == 4 * len(wanted)  # each item's whole story, not only its end
    both = harness("--work-dir", str(work), "--exit-code", "escalate", "--event", "execution_complete",
                   "--format", "json")
    assert [json.loads(line)["data"]["exit_code"] for line in both.stdout.splitlines()] == [81, 83]


def test_cycles_and_since(work: Path) -> None:
    every = harness("--work-dir", str(work), "--cycle", "all", "--format", "json")
    assert [json.loads(line)["cycle"] for line in every.stdout.splitlines()] == [f"{DAY}-001"] * 4 + [f"{DAY}-002"] * 16
    older = harness("--work-dir", str(work), "--cycle", f"{DAY}-001", "--format", "json")
    assert set(cases_of(older.stdout)) == {"yesterday"}
    text = harness("--work-dir", str(work), "--cycle", "all")
    assert f"  {DAY}-001  skill_invoked" in text.stdout  # several cycles: each line names its own
    since = harness("--work-dir", str(work), "--cycle", "all", "--since", "2026-01-31T09:02", "--format", "json")
    assert set(cases_of(since.stdout)) == {"slow", "human"}
    since_date = harness("--work-dir", str(work), "--cycle", "all", "--since", DAY, "--format", "json")
    assert "yesterday" not in since_date.stdout and len(since_date.stdout.splitlines()) == 16
    nothing = harness("--work-dir", str(work), "--item", "no-such-item")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert f"no line of {DAY}-002 matches" in nothing.stderr


def test_readable_errors_for_a_missing_work_folder_cycle_or_value(work: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "a project without records"
    nowhere.mkdir()
    missing = harness(cwd=nowhere)
    assert missing.returncode == 66
    assert "no WORK/traces in this folder or above" in missing.stderr and "Traceback" not in missing.stderr
    empty = harness("--work-dir", str(tmp_path / "elsewhere"))
    assert empty.returncode == 66 and "no traces in" in empty.stderr
    cycle = harness("--work-dir", str(work), "--cycle", "2020-01-01-001")
    assert cycle.returncode == 66
    assert "no trace of cycle 2020-01-01-001" in cycle.stderr and f"{DAY}-002" in cycle.stderr
    for args, named in ((("--exit-code", "soon"), "--exit-code"), (("--event", "model_calls"), "--event"),
                        (("--since", "yesterday-ish"), "--since")):
        done = harness("--work-dir", str(work), *args)
        assert done.returncode == 2 and named in done.stderr and "fix:" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_lines_that_are_not_trace_lines_are_skipped_and_counted(work: Path) -> None:
    path = work / "traces" / f"{DAY}-002.jsonl"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("not json\n")
        handle.write('{"ts": "2026-01-31T10:00:00.000Z", "event": "model_call", "data": {"model": "half"')  # no \n
    done = harness("--work-dir", str(work), "--format", "json")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 16
    assert f"skipped 1 line that is not a trace line (first: {path}:17: not JSON" in done.stderr


def test_follow_shows_new_lines_and_the_next_cycle_until_ctrl_c(tmp_path: Path) -> None:
    work = tmp_path / "WORK"
    write_cycle(work, f"{DAY}-001", items=(("first", 0),))
    follower = subprocess.Popen([sys.executable, "-m", "harness.apps.cli", "traces", "--follow", "--format", "json",
                                 "--work-dir", str(work), "--event", "execution_complete"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [seen.put(line) for line in follower.stdout], daemon=True).start()

    def next_line() -> dict:
        return json.loads(seen.get(timeout=20))

    try:
        assert next_line()["data"]["nodeid"].endswith("::first")  # what was there already
        write_cycle(work, f"{DAY}-001", items=(("second", 65),), start=T0 + 600)  # appended to the same cycle
        line = next_line()
        assert line["data"]["exit_code"] == 65 and line["cycle"] == f"{DAY}-001"
        time.sleep(0.3)
        write_cycle(work, f"{DAY}-002", items=(("next-run", 0),), start=T0 + 1200)  # a new session's cycle
        line = next_line()
        assert line["cycle"] == f"{DAY}-002" and line["data"]["nodeid"].endswith("::next-run")
    finally:
        follower.send_signal(signal.SIGINT)
        code = follower.wait(timeout=20)
    assert code == 0
    assert "Traceback" not in follower.stderr.read()


def test_follow_waits_for_a_first_trace(tmp_path: Path) -> None:
    follower = subprocess.Popen([sys.executable, "-m", "harness.apps.cli", "traces", "-f", "--work-dir",
                                 str(tmp_path / "WORK")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the trace is written once the follower says it waits (a loaded machine may take seconds to start it)
        assert "waiting for a trace in" in follower.stderr.readline()
        write_cycle(tmp_path / "WORK", f"{DAY}-001", items=(("late", 0),))
        line = follower.stdout.readline()
        assert "skill_invoked" in line and "::late" in line
    finally:
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=20) == 0
    assert "Traceback" not in follower.stderr.read()


def test_json_output_loads_back_into_the_frame(work: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    out.write_text(harness("--work-dir", str(work), "--cycle", "all", "--format", "json").stdout)
    exported = load_execution_traces(out)
    direct = load_execution_traces("*.jsonl", work_dir=work)
    assert len(exported) == len(direct) == 20
    assert exported["cycle"].tolist() == direct["cycle"].tolist()
    assert exported.drop(columns="data").equals(direct.drop(columns="data"))


# --- the north star: a score from a real run's gates, after the fact --------------------------------------------

AGENTS = """\
judge: {model: mock/score-0.9}
agents:
  judged_writer:
    rubric: judged
    producer: {python: "agentlib:produce"}
    evaluator: prompts/judge.md
    max_attempts: 1
"""
CASES = """\
agent: judged_writer
cases:
  - id: warm
    inputs: {text: "hello friend, shall we meet on Tuesday?"}
  - id: cold
    inputs: {text: "we meet on Tuesday"}
"""


def assess(*gates: object, goal: float | None) -> float:
    """A scorer a user might write: nothing for a run that failed a gate, else the goal's score."""
    if any(gate is False for gate in gates) or goal is None:
        return 0.0
    return goal


def test_a_score_is_computed_from_the_gates_of_a_real_runs_trace(project: Project,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    project.judged(None)
    project.agents(AGENTS)
    project.cases("judged_writer", CASES)
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=1, failed=1)
    monkeypatch.chdir(project.root)  # the nearest WORK/traces is found, as `harness traces` finds it
    lines = load_execution_traces("*.jsonl")
    assert {"skill_invoked", "gate_checked", "execution_complete", "model_call"} <= set(lines["event"])
    assert str(lines["ts"].dtype).startswith("datetime64") and lines["cycle"].nunique() == 1
    gates = lines[lines["event"] == "gate_checked"]
    assert gates["gate"].notna().all() and gates["passed"].notna().all()

    runs = load_executions(lines).set_index("nodeid")
    scores = {nodeid.rsplit("::", 1)[1]: assess(run.gate_0, run.gate_1, run.gate_2, run.gate_3,
                                               goal=run.score if run.gate_4 else 0.0)
              for nodeid, run in runs.iterrows()}
    assert scores == {"warm": pytest.approx(0.92), "cold": 0.0}
    cold = runs.loc[next(n for n in runs.index if n.endswith("::cold"))]
    assert bool(cold["gate_4"]) is False
    assert cold["exit_code"] == 83 and cold["triage"] == "escalate"  # a failed last attempt is escalated
    assert cold["model_calls"] == 1 and cold["input_tokens"] > 0
    assert set(cold["gates"]) == {n for n in range(5) if not pd_isna(cold[f"gate_{n}"])}
    assert load_executions("*.jsonl", work_dir=project.work)["execution_id"].tolist() == runs["execution_id"].tolist()


def pd_isna(value: object) -> bool:
    import pandas as pd

    return bool(pd.isna(value))
