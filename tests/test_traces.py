"""The execution trace (WORK/traces/{cycle}.jsonl): valid lines of the trace contract, inputs hashed unless asked
otherwise, no secret, model calls tied to their items, whole lines whoever writes, capture settings, pruning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import JUDGED_RUBRIC, Project, prompt_text
from harness.base.attempts import RunLocation
from harness.base.capture import digest
from harness.base.events import (
    ArtifactProduced,
    ExecutionProgress,
    GateChecked,
    HandoffAttempted,
    ItemStarted,
    ModelCalled,
    SkillInvoked,
)
from harness.base.jsonschemas import contract_errors
from harness.base.usage import Spend, Usage
from harness.records import TraceSink, prune_traces, read_trace, trace_path
from harness.base.jsonlines import encode_batch, json_line
from harness.records.traces import timestamp, trace_line

SECRET = "trace-secret-value-8231"  # held by TRACE_TEST_API_KEY: a credential by its name
MARKER = "RAW-INPUT-MARKER"

# Producers that never repeat their input (an input found in the trace came from what the trace keeps of inputs);
# one puts the environment's secret in its artifact.
AGENTS_MODULE = '''\
import os


def produce(request):
    return "hello, a reply of %d characters" % len(request["inputs"]["text"])


def leak(request):
    return "hello, the key is " + os.environ["TRACE_TEST_API_KEY"]
'''

AGENTS = """\
judge: {{model: mock/score-0.9}}
agents:
  judged_writer:
    rubric: judged
    producer: {{python: "traceagents:{producer}"}}
    evaluator: prompts/judge.md
    max_attempts: 1
"""


def judged_project(project: Project, cases: int, *, producer: str = "produce", extra: str = "") -> Project:
    project.rubric("judged", JUDGED_RUBRIC)
    project.write("rubrics/examples/judged/gold/warm.md", "hello, a warm note\n")
    project.write("rubrics/examples/judged/anti/cold.md", "a cold note\n")
    project.write("suites/prompts/judge.md", prompt_text())
    project.write("traceagents.py", AGENTS_MODULE)
    project.agents(AGENTS.format(producer=producer))
    lines = ["agent: judged_writer", "cases:"]
    lines += [f"  - {{id: case-{i:03d}, inputs: {{text: '{MARKER}-{i} {extra}'}}}}" for i in range(cases)]
    project.write("suites/judged_writer.cases.yaml", "\n".join(lines) + "\n")
    return project


def trace_of(project: Project) -> tuple[Path, list[dict]]:
    """The one trace of the project's one cycle, every line parsed (a line that does not parse fails the test)."""
    cycle = project.cycle_dir().name
    path = project.work / "traces" / f"{cycle}.jsonl"
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return path, [json.loads(line) for line in text.splitlines()]


def invalid(lines: list[dict]) -> list[str]:
    return [f"line {n}: {e}" for n, line in enumerate(lines, 1) for e in contract_errors("trace_line", line)]


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TRACE_TEST_API_KEY", SECRET)
    return SECRET


# --- a run's trace --------------------------------------------------------------------------------------------


def test_a_500_case_run_under_xdist_writes_one_whole_valid_trace(project: Project, secret_env: str) -> None:
    """The closing note's run: 500 cases on two workers, each with a model call (the judge). One file, every line
    whole and valid, no raw input, no secret (the artifacts hold one), every model call tied to its item."""
    judged_project(project, 500, producer="leak", extra=secret_env)
    result = project.run("suites/", "-n", "2", "--harness-cache", "off", subprocess=True)
    result.assert_outcomes(passed=500)
    assert [p.name for p in (project.work / "traces").iterdir()] == [f"{project.cycle_dir().name}.jsonl"]
    path, lines = trace_of(project)
    assert not invalid(lines)
    text = path.read_text(encoding="utf-8")
    assert MARKER not in text and secret_env not in text
    by_event: dict[str, list[dict]] = {}
    for line in lines:
        by_event.setdefault(line["event"], []).append(line["data"])
    items = {data["nodeid"] for data in by_event["skill_invoked"]}
    assert len(items) == 500
    completed = by_event["execution_complete"]
    assert len(completed) == 500 and all(d["exit_code"] == 0 for d in completed)
    calls = by_event["model_call"]
    assert sorted(call["nodeid"] for call in calls) == sorted(items)  # one judge call each, named by its item
    assert all(call["model"] == "mock/score-0.9" and call["cost_usd"] is None for call in calls)
    gates = {(d["nodeid"], d["gate_id"]) for d in by_event["gate_checked"]}
    assert {(nodeid, 4) for nodeid in items} <= gates
    made = [d for d in by_event["execution_progress"] if d["artifacts_created"]]
    assert len(made) == 500 and all(d["artifacts_created"][0].endswith("attempt-1.md") for d in made)
    # the execution results, appended by both workers to one file: a whole, valid line per item, no raw input
    results = project.execution_results()
    assert sorted(r["nodeid"] for r in results) == sorted(items)
    assert not [e for r in results for e in contract_errors("execution_result", r)]
    assert all(r["inputs"]["provided"]["text"].startswith("sha256:") for r in results)
    assert MARKER not in (project.cycle_dir() / "execution-results.jsonl").read_text(encoding="utf-8")


def test_inputs_are_hashed_by_default_kept_with_full_capture_and_left_out_with_none(project: Project) -> None:
    judged_project(project, 2)
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=2)
    path, lines = trace_of(project)
    assert MARKER not in path.read_text(encoding="utf-8")
    invoked = sorted((line["data"] for line in lines if line["event"] == "skill_invoked"), key=lambda d: d["nodeid"])
    assert [d["input_summary"] for d in invoked] == [{"text": digest(f"{MARKER}-{i} ")} for i in range(2)]
    assert all(d["context_size"] == len(f"{MARKER}-0 ") for d in invoked)

    path.unlink()
    project.ini("harness_capture_inputs = full\n")
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=2)
    cycle = max(project.cycles())
    kept = [line["data"]["input_summary"] for line in read_trace(project.work / "traces" / f"{cycle}.jsonl")
            if line["event"] == "skill_invoked"]
    assert sorted(k["text"] for k in kept) == [f"{MARKER}-0 ", f"{MARKER}-1 "]

    project.run("suites/", "--harness-cache", "off", "--harness-capture-inputs", "none").assert_outcomes(passed=2)
    cycle = max(project.cycles())
    kept = [line["data"]["input_summary"] for line in read_trace(project.work / "traces" / f"{cycle}.jsonl")
            if line["event"] == "skill_invoked"]
    assert kept == [{}, {}]


def test_a_secret_never_reaches_the_trace_even_with_full_capture(project: Project, secret_env: str) -> None:
    judged_project(project, 1, producer="leak", extra=secret_env)
    project.run("suites/", "--harness-cache", "off", "--harness-capture-inputs", "full",
                "--harness-capture-outputs", "full").assert_outcomes(passed=1)
    path, lines = trace_of(project)
    text = path.read_text(encoding="utf-8")
    assert secret_env not in text
    assert "[REDACTED:TRACE_TEST_API_KEY]" in text and f"{MARKER}-0" in text  # kept, with the secret taken out
    assert not invalid(lines)


def test_items_running_at_once_keep_their_own_model_calls(project: Project) -> None:
    judged_project(project, 4)
    project.run("suites/", "--harness-cache", "off", "--harness-concurrency", "4").assert_outcomes(passed=4)
    _, lines = trace_of(project)
    calls = [line["data"]["nodeid"] for line in lines if line["event"] == "model_call"]
    assert sorted(c.rsplit("::", 1)[1] for c in calls) == [f"case-{i:03d}" for i in range(4)]


def test_capture_off_writes_no_trace_and_the_run_is_recorded_as_before(project: Project) -> None:
    judged_project(project, 1)
    project.ini("harness_capture = off\n")
    project.run("suites/").assert_outcomes(passed=1)
    assert not (project.work / "traces").exists()
    assert len(project.runs()) == 1
    project.ini("")
    project.run("suites/", "--harness-capture", "off").assert_outcomes(passed=1)
    assert not (project.work / "traces").exists()


@pytest.mark.parametrize(("setting", "value", "named"), [
    ("harness_capture_inputs", "raw", "none, hashed, full"),
    ("harness_capture_outputs", "everything", "none, summary, full"),
    ("harness_capture_retention_days", "0", "never"),
    ("harness_capture_retention_days", "a month", "never"),
    ("harness_capture", "maybe", "on or off"),
])
def test_a_bad_capture_setting_is_one_error_naming_it_and_the_fix(project: Project, setting: str, value: str,
                                                                  named: str) -> None:
    judged_project(project, 1)
    project.ini(f"{setting} = {value}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert f"ini {setting} = {value!r}" in error and "fix:" in error and named in error
    assert "Traceback" not in error
    project.ini("")
    flag = "--" + setting.replace("_", "-")
    result = project.run("suites/", f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert flag in result.stderr.str() and "fix:" in result.stderr.str()


def test_a_trace_that_cannot_be_written_never_fails_the_run(project: Project) -> None:
    judged_project(project, 1)
    project.work.mkdir()
    (project.work / "traces").write_text("a file where the folder should be\n")
    result = project.run("suites/", "-W", "always")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*the event sink*TraceSink*raised*; it receives no more events*"])
    assert len(project.runs()) == 1


# --- the sink, event by event -----------------------------------------------------------------------------------


def test_each_event_of_the_assessment_becomes_one_valid_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Construct phases and handoffs too (emitted here as a construct emits them); a secret an event carries
    raw is redacted by the sink itself."""
    monkeypatch.setenv("TRACE_TEST_API_KEY", SECRET)
    sink = TraceSink(tmp_path, "2026-01-31-001")
    where = RunLocation("2026-01-31-001", "writer", tmp_path / "runs", shown_directory="WORK/runs/x/writer")
    handoff = {"from_phase": "discovery", "to_phase": "design", "handoff_at": "2026-01-31T00:45:00Z",
               "artifacts": {"required": [], "provided": [{"type": "file", "path": "prd.md"}], "missing": ["sdd.md"],
                             "extra": []},
               "validation": {"schema_valid": True, "completeness": 0.5, "blockers": ["sdd.md is missing"],
                              "warnings": []},
               "accepted": False, "rejection_reason": "sdd.md is missing", "remediation": "write sdd.md"}
    gate = {"gate": 3, "name": "output", "passed": False, "checked_at": "2026-01-31T00:45:00Z",
            "details": {"checks_performed": [{"name": "schema", "passed": False, "message": "no title"}],
                        "failures": [{"name": "schema", "message": "no title", "remediation": None}]}}
    for event in (SkillInvoked("x::a", "writer", "1.0.0", "python", {"token": f"Bearer {SECRET}"}, context_size=9,
                               phase="discovery"),
                  GateChecked("x::a", gate, phase="discovery", remediation_attempted=True),
                  ExecutionProgress("x::a", phase_entered="design", artifacts_created=("prd.md",)),
                  ArtifactProduced("x::a", 2, "reviser", f"the text {SECRET}", Spend(), location=where),
                  HandoffAttempted("x::a", handoff),
                  ModelCalled("claude-haiku-4-5", Usage(10, 5), 0.0001, False, False, 12.5),
                  ItemStarted("x::a", "writer", "a", 1)):  # not a line of the trace
        sink(event)
    sink.close()
    text = sink.path.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["event"] for line in lines] == ["skill_invoked", "gate_checked", "execution_progress",
                                                 "execution_progress", "handoff_attempted", "model_call"]
    assert not invalid(lines)
    assert SECRET not in text and "the text" not in text  # an artifact's text never; a secret never
    assert lines[0]["data"]["input_summary"] == {"token": "Bearer [REDACTED:TRACE_TEST_API_KEY]"}
    assert lines[3]["data"]["artifacts_created"] == ["WORK/runs/x/writer/attempt-2.md"]
    assert lines[4]["data"]["accepted"] is False and lines[4]["data"]["artifacts_missing"] == ["sdd.md"]
    assert lines[5]["data"]["nodeid"] is None  # a call made outside any item


def test_a_line_names_its_time_in_utc_with_milliseconds() -> None:
    assert timestamp(1769820300.1234) == "2026-01-31T00:45:00.123Z"
    line = trace_line(ExecutionProgress("x::a", phase_entered="design", at=1769820300.0))
    assert line is not None and line["ts"] == "2026-01-31T00:45:00.000Z"
    assert json_line({"ts": "t", "event": "model_call", "data": {"score": float("nan")}}) == \
        b'{"ts":"t","event":"model_call","data":{"score":null}}\n'


def test_a_batch_of_lines_is_redacted_line_by_line_only_when_it_may_hold_a_secret(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_API_KEY", "hunter2-very-secret")
    clean = [{"event": "a", "data": {"n": 1}}, None, {"event": "b", "data": {"text": "plain"}}]
    assert encode_batch(clean) == b'{"event":"a","data":{"n":1}}\n{"event":"b","data":{"text":"plain"}}\n'
    leaky = [{"event": "a", "data": {"n": 1}}, {"event": "b", "data": {"text": "key hunter2-very-secret"}}]
    assert encode_batch(leaky) == b"".join(json_line(line) for line in leaky)
    assert b"hunter2" not in encode_batch(leaky) and b"[REDACTED:HARNESS_TEST_API_KEY]" in encode_batch(leaky)


# --- whole lines, whoever writes -------------------------------------------------------------------------------

WRITER = textwrap.dedent("""\
    import random, sys
    from pathlib import Path
    from harness.base.events import ExecutionProgress
    from harness.records import TraceSink

    work, who, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    sink = TraceSink(work, "2026-01-31-001")
    rng = random.Random(who)
    print("ready", flush=True)
    sys.stdin.readline()  # both start writing at once
    for n in range(count):
        size = rng.choice((10, 3000, 5000, 70000, 300000))  # past PIPE_BUF (4 KB), a page, and a batch
        sink(ExecutionProgress(f"{who}::{n}", artifacts_created=(who * size,)))
    sink.close()
""")


def test_two_processes_appending_to_one_trace_keep_every_line_whole(tmp_path: Path) -> None:
    count = 400
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [subprocess.Popen([sys.executable, str(script), str(tmp_path), who, str(count)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for who in ("a", "b")]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    lines = trace_path(tmp_path, "2026-01-31-001").read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = [json.loads(line)["data"] for line in lines[:-1]]  # a line interleaved with another would not parse
    for who in ("a", "b"):
        mine = [data for data in parsed if data["nodeid"].startswith(f"{who}::")]
        assert [int(d["nodeid"].split("::")[1]) for d in mine] == list(range(count))  # whole, in the order written
        assert all(d["artifacts_created"][0] == who * len(d["artifacts_created"][0]) for d in mine)


def test_threads_of_one_process_keep_every_line_whole(tmp_path: Path) -> None:
    sink = TraceSink(tmp_path, "c")

    def emit(worker: int) -> None:
        for n in range(300):
            sink(ExecutionProgress(f"x::{worker}", artifacts_created=(f"{worker}-{n}-" + "p" * (n * 50),)))

    threads = [threading.Thread(target=emit, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.close()
    lines = list(read_trace(sink.path))
    assert len(lines) == 8 * 300
    for worker in range(8):
        made = [line["data"]["artifacts_created"][0] for line in lines if line["data"]["nodeid"] == f"x::{worker}"]
        assert [int(m.split("-")[1]) for m in made] == list(range(300))


# --- retention ---------------------------------------------------------------------------------------------------


def _trace_aged(work: Path, cycle: str, days: float) -> Path:
    path = trace_path(work, cycle)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"ts":"2026-01-01T00:00:00.000Z","event":"model_call","data":{}}\n')
    when = time.time() - days * 86400
    os.utime(path, (when, when))
    return path


def test_traces_last_written_more_than_retention_days_ago_are_deleted(tmp_path: Path) -> None:
    old, recent, kept = (_trace_aged(tmp_path, c, d) for c, d in (("old", 31), ("recent", 29), ("current", 90)))
    (tmp_path / "traces" / "notes.txt").write_text("not a trace")
    assert prune_traces(tmp_path, None) == []  # never
    assert prune_traces(tmp_path, 30, keep=("current",)) == [old]
    assert not old.exists() and recent.exists() and kept.exists() and (tmp_path / "traces" / "notes.txt").exists()
    assert prune_traces(tmp_path, 30, now=time.time() + 2 * 86400, keep=("current",)) == [recent]
    assert prune_traces(tmp_path / "nowhere", 30) == []


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_a_run_prunes_old_traces_at_its_start_once(project: Project, workers: tuple[str, ...]) -> None:
    judged_project(project, 2)
    old = _trace_aged(project.work, "2025-01-01-001", 45)
    recent = _trace_aged(project.work, "2025-02-01-001", 5)
    result = project.run("suites/", "--harness-capture-retention-days", "30", *workers, subprocess=bool(workers))
    result.assert_outcomes(passed=2)
    assert not old.exists() and recent.exists()
    result.stdout.fnmatch_lines(["harness: deleted 1 trace last written more than 30 days ago*"])
    assert len(list((project.work / "traces").glob("*.jsonl"))) == 2  # the recent one and this run's


def test_never_keeps_every_trace_and_collect_only_deletes_nothing(project: Project) -> None:
    judged_project(project, 1)
    old = _trace_aged(project.work, "2020-01-01-001", 2000)
    project.run("suites/", "--collect-only")
    assert old.exists()
    project.ini("harness_capture_retention_days = never\n")
    project.run("suites/").assert_outcomes(passed=1)
    assert old.exists()
    project.ini("harness_capture_retention_days = 7\n")
    project.run("suites/").assert_outcomes(passed=1)
    assert not old.exists()


def test_a_constructs_phases_and_handoffs_are_traced(project: Project) -> None:
    """The constructs demo: each phase invoked, gated and completed; each handoff, accepted or not, with why."""
    repo = Path(__file__).resolve().parents[1]
    shutil.copytree(repo / "constructs", project.root / "constructs",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "WORK"))
    shutil.copy(repo / "conftest.py", project.root / "conftest.py")
    project.run("constructs/", subprocess=True).assert_outcomes(passed=1, xfailed=1)
    _, lines = trace_of(project)
    assert not invalid(lines)
    handoffs = {line["data"]["nodeid"].split("/")[1]: line["data"] for line in lines
                if line["event"] == "handoff_attempted"}
    assert handoffs["fixed"]["accepted"] is True and handoffs["fixed"]["rejection_reason"] is None
    assert handoffs["broken"]["accepted"] is False and handoffs["broken"]["rejection_reason"]
    assert (handoffs["broken"]["from_phase"], handoffs["broken"]["to_phase"]) == ("discovery", "design")
    ends = {(line["data"]["nodeid"].split("/")[1], line["data"]["phase"]): line["data"]["exit_code"]
            for line in lines if line["event"] == "execution_complete"}
    assert ends[("broken", "design")] == 80 and ends[("fixed", "design")] == 0
    entered = [line["data"]["phase_entered"] for line in lines
               if line["event"] == "execution_progress" and "fixed" in line["data"]["nodeid"]]
    assert [phase for phase in entered if phase] == ["discovery", "design"]
