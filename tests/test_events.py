"""The event stream: a plugin's sink sees an item's whole life and every model call; a broken sink never fails a run."""

from __future__ import annotations

import json

import pytest

from conftest import JUDGED_CASES, Project
from harness.base.events import Events, ItemStarted

SINK = '''
import json
from dataclasses import asdict

from harness.base import events

SEEN = []


def pytest_harness_event_sinks(config):
    path = config.rootpath / "events.jsonl"

    def write(event):
        fields = {k: v for k, v in vars(event).items() if isinstance(v, (str, int, float, bool, type(None)))}
        with open(path, "a") as out:
            out.write(json.dumps({"type": type(event).__name__, **fields}) + "\\n")

    return [write]
'''


def read_events(project: Project) -> list[dict]:
    return [json.loads(line) for line in (project.root / "events.jsonl").read_text().splitlines()]


def test_a_sink_sees_each_step_of_an_item_and_each_model_call(project: Project) -> None:
    project.judged(JUDGED_CASES)
    project.write("conftest.py", SINK)
    project.run("suites/", "--harness-judge-model", "mock/score-0.9", "--harness-cache", "off").assert_outcomes(
        passed=1)
    everything = read_events(project)
    # the assessment's events, in the order the gates are checked
    assert [(e["type"], e.get("skill_id")) for e in everything if e["type"] == "SkillInvoked"] == [
        ("SkillInvoked", "judged_writer")]
    ends = ("GateChecked", "AttemptFinished", "ExecutionCompleted", "ItemFinished")
    assert [e["type"] for e in everything if e["type"] in ends] == ["GateChecked"] * 4 + list(ends[1:])
    seen = [e for e in everything if e["type"] not in ("SkillInvoked", "GateChecked", "ExecutionCompleted")]
    assert [e["type"] for e in seen] == ["ItemStarted", "AttemptStarted", "ArtifactProduced", "ModelCalled",
                                         "Judged", "AttemptFinished", "ItemFinished"]
    started, attempt, produced, call, judged, finished, done = seen
    assert attempt["attempt"] == 1 and attempt["created_at"]
    assert started["case_id"] == "warm-hello" and started["nodeid"].endswith("warm-hello")
    assert produced["role"] == "producer" and produced["text"]
    assert call["model"] == "mock/score-0.9" and call["cached"] is False
    assert judged["score"] == pytest.approx(0.92) and judged["passed"] is True
    assert finished["outcome"] == "passed" and finished["attempt"] == 1
    assert done["outcome"] == "passed" and done["attempts"] == 1
    assert all(e["at"] > 0 for e in seen)
    # every event, the model call deep in the judge included, names the item it belongs to
    assert {e["span"] for e in everything} == {started["nodeid"]}


def test_items_running_at_once_keep_their_own_spans(project: Project) -> None:
    project.judged(JUDGED_CASES + "  - id: second\n    inputs: {text: \"hello again, shall we talk on Monday?\"}\n")
    project.write("conftest.py", SINK)
    project.run("suites/", "--harness-judge-model", "mock/score-0.9", "--harness-cache", "off",
                "--harness-concurrency", "2").assert_outcomes(passed=2)
    seen = read_events(project)
    calls = [e for e in seen if e["type"] == "ModelCalled"]
    assert len(calls) == 2 and {c["span"].rsplit("::", 1)[1] for c in calls} == {"warm-hello", "second"}


def test_a_replayed_answer_is_an_event_that_says_so(project: Project) -> None:
    project.judged(JUDGED_CASES)
    project.write("conftest.py", SINK)
    project.run("suites/", "--harness-judge-model", "mock/score-0.9").assert_outcomes(passed=1)
    (project.root / "events.jsonl").unlink()
    project.run("suites/", "--harness-judge-model", "mock/score-0.9").assert_outcomes(passed=1)
    (call,) = [e for e in read_events(project) if e["type"] == "ModelCalled"]
    assert call["cached"] is True


def test_a_sink_that_raises_is_dropped_with_a_warning_and_the_run_goes_on(project: Project) -> None:
    project.judged(JUDGED_CASES)
    project.write("conftest.py", '''
        def pytest_harness_event_sinks(config):
            def broken(event):
                raise RuntimeError("sink is broken")
            return [broken]
    ''')
    result = project.run("suites/", "--harness-judge-model", "mock/score-0.9", "-W", "always")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*the event sink*broken*raised RuntimeError: sink is broken*"])


def test_sinks_receive_events_in_order_and_can_leave() -> None:
    events, got = Events(), []
    leave = events.subscribe(got.append)
    events.emit(ItemStarted("a", "agent", "case", 1))
    leave()
    events.emit(ItemStarted("b", "agent", "case", 1))
    assert [e.nodeid for e in got] == ["a"] and not events
