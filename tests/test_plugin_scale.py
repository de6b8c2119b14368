"""Speed and cost at scale (issue 3) as a user sees it: concurrent cases reported in order, -x and the cost cap,
--collect-only, the response cache, judge samples, cost in the summary, batching, progress, failing calls and
pytest-xdist, all through the real SDK against the fake Anthropic server on 127.0.0.1.

The model-access layer has unit tests of its own (test_llm, test_cache, test_ratelimit, test_batching); here
every test runs pytest in a pytester project (``project`` in conftest.py) and asserts on what pytest printed,
on what the fake server received and on the records. No test asserts on wall time.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import json
import re
import sqlite3
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from conftest import JUDGED_AGENTS, Project, error_sections, prompt_text
from harness.testing import FakeAnthropic, Reply, judge_responder

AGENT = "judged_writer"
CASES_FILE = f"suites/{AGENT}.cases.yaml"

# A producer that may take its time (``inputs.sleep`` seconds) before it returns ``inputs.text``.
SCALE_MODULE = '''\
import time


def produce(request):
    time.sleep(float(request["inputs"].get("sleep", 0)))
    return request["inputs"]["text"]
'''

# Markers in a case's text tell the fake judge how to answer (see ``judge``).
FAIL = "FAILME"  # the judge scores tone and clarity 0: overall 0.2 < 0.8
BROKEN = "BROKEN"  # the judge answers 500 every time
SLOW = "SLOWJUDGE"  # the judge answers 0.4 s later than the others


def cases(*specs: str | tuple[str, str] | tuple[str, str, float]) -> str:
    """A cases file for the judged agent: each spec is an id (text "hello <id>"), (id, text) or (id, text, sleep)."""
    lines = [f"agent: {AGENT}", "cases:"]
    for spec in specs:
        case_id, text, sleep = (spec, f"hello {spec}", 0.0) if isinstance(spec, str) else (*spec, 0.0)[:3]
        lines += [f"  - id: {case_id}", f"    inputs: {{text: \"{text}\", sleep: {sleep}}}"]
    return "\n".join(lines) + "\n"


def many(n: int, *, fail: Iterable[int] = (), slow: Iterable[int] = (), sleep: float = 0.0) -> str:
    """``n`` cases c1..cn; those numbered in ``fail`` are scored low, those in ``slow`` are judged late."""
    fail, slow = set(fail), set(slow)
    return cases(*((f"c{i}", " ".join(["hello case", str(i), *([FAIL] if i in fail else []),
                                       *([SLOW] if i in slow else [])]), sleep) for i in range(1, n + 1)))


def scale_project(project: Project, case_text: str, *, max_retries: int = 0) -> Project:
    """The judged rubric and agent of conftest (no reviser: one attempt, one judge call per case)."""
    project.judged(case_text, max_retries=max_retries)
    project.write("scalelib.py", SCALE_MODULE)
    project.agents(JUDGED_AGENTS.format(timeout_s=5, max_retries=max_retries)
                   .replace("agentlib:produce", "scalelib:produce"))
    return project


def artifact_of(request: Mapping[str, Any]) -> str:
    return json.dumps(request.get("messages"))


def judge(*, usage: Callable[[dict[str, Any]], Mapping[str, int]] | None = None,
          tone: float = 1.0, clarity: float = 1.0) -> Callable[[dict[str, Any]], Reply]:
    """A fake judge that reads the markers in the artifact; ``usage`` fixes the tokens it reports."""
    good = judge_responder({"tone": tone, "clarity": clarity})
    bad = judge_responder({"tone": 0.0, "clarity": 0.0})

    def respond(request: dict[str, Any]) -> Reply:
        text = artifact_of(request)
        if BROKEN in text:
            return Reply.error(500, message="the fake judge is broken")
        reply = (bad if FAIL in text else good)(request)
        if usage is not None:
            reply = dataclasses.replace(reply, usage=usage(request))
        if SLOW in text:
            reply = Reply.slow(0.4, reply)
        return reply

    return respond


def case_of(request: Mapping[str, Any]) -> str:
    """Which case a judge request is about: the case number in "hello case <n>"."""
    match = re.search(r"hello case (\d+)", artifact_of(request))
    assert match is not None, request
    return f"c{match.group(1)}"


def summary_row(result: pytest.RunResult, rubric: str = "judged") -> list[str]:
    """The cells of a rubric's row in the harness summary (two spaces or more between cells)."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.outlines
            if line.split()[:1] == [rubric] and "$" in line]
    assert len(rows) == 1, result.stdout.str()
    return rows[0]


def integrity_ok(project: Project) -> bool:
    conn = sqlite3.connect(project.work / "harness.db")
    try:
        return conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def samples_of(project: Project) -> list[list[float] | None]:
    return [None if r["samples"] is None else json.loads(r["samples"])
            for r in project.rows("SELECT samples FROM attempt_details ORDER BY run_id")]


def scores(project: Project) -> dict[str, tuple[str, float | None, dict[str, Any]]]:
    """case id -> (outcome, overall score, dimension scores) of the last attempt."""
    return {r["case_id"]: (r["outcome"], r["overall_score"], json.loads(r["dimension_scores"] or "null"))
            for r in project.runs()}


@pytest.fixture
def fast_batch_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Poll Message Batches every 50 ms instead of every 5 s (no option sets the interval).

    The session builds its Batcher through ``harness.llm.Batcher``; in-process runs share that module.
    """
    import harness.llm.policy
    from harness.llm.batching import Batcher

    monkeypatch.setattr(harness.llm.policy, "Batcher", functools.partial(Batcher, poll_s=0.05, quiet_s=0.1))


# --- 0. the options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "ini", "message"), [
    (("--harness-concurrency", "0"), None, "argument --harness-concurrency: 0 must be at least 1"),
    (("--harness-judge-samples", "x"), None, "argument --harness-judge-samples: 'x' is not a whole number"),
    (("--harness-max-cost", "lots"), None, "argument --harness-max-cost: 'lots' is not an amount in USD such as 2.50"),
    (("--harness-max-cost", "-1"), None, "argument --harness-max-cost: -1 must not be negative"),
    (("--harness-cache", "bogus"), None, "argument --harness-cache: 'bogus' is not one of auto, off, read, write, "
                                        "refresh (fix: use one of"),
    (("--harness-rpm", "0"), None, "argument --harness-rpm: 0 must be at least 1"),
    ((), "harness_concurrency = many", "ini harness_concurrency = 'many': 'many' is not a whole number"),
    ((), "harness_cache = sometimes", "ini harness_cache = 'sometimes'"),
    ((), "harness_itpm = 0", "ini harness_itpm = '0': 0 must be at least 1"),
    ((), "harness_progress_interval = soon", "ini harness_progress_interval = 'soon'"),
    # a bool ini value that does not parse fails inside getini(); the error must still name the key
    ((), "harness_batch = maybe", "harness_batch"),
], ids=["concurrency", "samples", "max-cost", "max-cost-negative", "cache", "rpm", "ini-concurrency", "ini-cache",
        "ini-itpm", "ini-progress", "ini-batch"])
def test_a_bad_scale_option_is_a_usage_error_naming_it(project: Project, fake_anthropic: FakeAnthropic,
                                                       args: tuple[str, ...], ini: str | None, message: str) -> None:
    scale_project(project, many(1))
    fake_anthropic.responder = judge()
    if ini is not None:
        project.ini(f"{ini}\n")
    result = project.run("suites/", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert any(message in line for line in errors), errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert fake_anthropic.calls == 0 and not project.work.exists()


# --- 1. concurrency -----------------------------------------------------------------------------------


def test_cases_run_concurrently_and_are_reported_one_by_one_in_collection_order(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    # c1 is judged last (0.4 s later than the others), c3 and c6 fail: the report still follows collection order.
    scale_project(project, many(8, fail=(3, 6), slow=(1,)))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.3
    result = project.run("suites/", "-v", "--harness-concurrency", "8")

    assert 1 < fake_anthropic.peak_in_flight <= 8
    assert fake_anthropic.calls == 8
    assert sorted(case_of(r) for r in fake_anthropic.requests) == sorted(f"c{i}" for i in range(1, 9))
    result.assert_outcomes(passed=6, failed=2)
    assert result.ret == 1
    verdicts = [line.split()[:2] for line in result.outlines if line.startswith(f"{CASES_FILE}::")]
    assert verdicts == [[f"{CASES_FILE}::c{i}", "FAILED" if i in (3, 6) else "PASSED"] for i in range(1, 9)]
    # Each failure is its own section naming its own case.
    result.stdout.fnmatch_lines([f"{AGENT}[[]c3[]] ESCALATED after 1 attempt*", f"{AGENT}[[]c6[]] ESCALATED*"])
    assert {case: outcome for case, (outcome, _, _) in scores(project).items()} == {
        f"c{i}": "escalated" if i in (3, 6) else "passed" for i in range(1, 9)}


def test_the_scheduler_lets_an_items_result_go_once_pytest_has_taken_it() -> None:
    # A session of 100,000 items must not hold 100,000 loop results (their attempts, evaluations and records)
    # until it ends: the result is the item's to report, then garbage.
    from harness.base.stop import StopFlag
    from harness.face.scheduler import CaseScheduler

    class Result:  # a loop result stand-in that a weak reference can watch
        pass

    made: dict[str, weakref.ref] = {}

    def job(key: str) -> Callable[[], Result]:
        def run() -> Result:
            result = Result()
            made[key] = weakref.ref(result)
            return result
        return run

    scheduler = CaseScheduler(max_workers=2, stop=StopFlag())
    scheduler.submit_all([(key, job(key)) for key in ("a", "b", "c")])
    try:
        assert isinstance(scheduler.wait("a"), Result)  # taken, and dropped at once by this caller
        gc.collect()
        assert made["a"]() is None and not scheduler.has("a")
        assert scheduler.has("b") and scheduler.has("c")  # not reported yet: still the scheduler's
    finally:
        assert scheduler.shutdown("done") == 0  # waits for the rest, as at the session's end


def test_a_session_leaves_the_interpreters_thread_switch_interval_as_it_found_it(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    # The scheduler lengthens the GIL switch interval while its cases run; code run after pytest.main()
    # (or by other plugins after the session) must not inherit that.
    scale_project(project, many(4))
    fake_anthropic.responder = judge()
    before = sys.getswitchinterval()
    project.run("suites/", "--harness-concurrency", "4").assert_outcomes(passed=4)
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize(("own", "while_running"), [
    ((700, 10, 10), (20_000, 20, 20)),  # Python's defaults: raised while the items run
    ((50_000, 0, 5), (50_000, 0, 20)),  # a threshold set higher stays, and a generation turned off stays off
])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_garbage_collector_runs_less_often_while_items_run_and_is_put_back_after(
        project: Project, fake_anthropic: FakeAnthropic, concurrency: int, own: tuple[int, int, int],
        while_running: tuple[int, int, int]) -> None:
    # A session keeps every item's reports and results: with Python's thresholds, full collections walk more of
    # them each time. The process's own thresholds are back once the session ends (pytest.main() in a program).
    scale_project(project, many(4))
    seen: list[tuple[int, int, int]] = []
    answer = judge()

    def respond(request):  # noqa: ANN001, ANN202 - the fake server's thread, in this process, while an item runs
        seen.append(gc.get_threshold())
        return answer(request)

    fake_anthropic.responder = respond
    before = gc.get_threshold()
    gc.set_threshold(*own)
    try:
        project.run("suites/", "--harness-concurrency", str(concurrency)).assert_outcomes(passed=4)
        assert gc.get_threshold() == own
    finally:
        gc.set_threshold(*before)
    assert seen and set(seen) == {while_running}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_concurrency_bounds_the_calls_in_flight(project: Project, fake_anthropic: FakeAnthropic,
                                                    concurrency: int) -> None:
    scale_project(project, many(6))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.1
    result = project.run("suites/", "-v", "--harness-concurrency", str(concurrency))
    result.assert_outcomes(passed=6)
    assert fake_anthropic.calls == 6
    if concurrency == 1:
        assert fake_anthropic.peak_in_flight == 1
    else:
        assert 1 < fake_anthropic.peak_in_flight <= concurrency
    verdicts = [line.split()[0] for line in result.outlines if line.startswith(f"{CASES_FILE}::")]
    assert verdicts == [f"{CASES_FILE}::c{i}" for i in range(1, 7)]


# --- 2. -x and --maxfail ------------------------------------------------------------------------------


def stop_project(project: Project) -> None:
    """c1 fails fast; c2..c6 spend 2.5 s in their producer, so the stop comes while cases are producing. The margin
    is wide on purpose: c1's judge call waits for the SDK's first import in a fresh process, which took longer than
    0.6 s on a loaded CI machine and let c2 reach the judge before the stop, leaving no case interrupted."""
    scale_project(project, cases(("c1", f"hello case 1 {FAIL}"),
                                 *((f"c{i}", f"hello case {i}", 2.5) for i in range(2, 7))))


def assert_clean_stop(project: Project, fake_anthropic: FakeAnthropic) -> None:
    """Two cases run at once. c1 fails; by then c2 may have reached the judge (in a fresh process the first model
    call waits for the SDK import), and the threads freed by c1 and c2 may have started c3 and c4. Nothing else
    starts: c5 and c6 are never produced nor sent, and every attempt that was started is finished."""
    judged = [case_of(r) for r in fake_anthropic.requests]
    assert "c1" in judged and set(judged) <= {"c1", "c2"} and len(judged) == len(set(judged))
    assert integrity_ok(project)
    runs = {r["case_id"]: r for r in project.runs()}
    assert runs["c1"]["status"] == "escalated" and runs["c1"]["outcome"] == "escalated"
    assert set(runs) <= {"c1", "c2", "c3", "c4"}
    assert not list(project.cycle_dir().glob(f"{AGENT}/c[56]/*"))
    interrupted = [case for case in runs if case not in judged]
    assert interrupted  # the stop came while at least one case was producing
    for case in interrupted:  # stopped between producing and scoring: an error without a score, not "running"
        row = runs[case]
        assert (row["status"], row["outcome"], row["exit_code"], row["overall_score"]) == (
            "escalated", "error", 3, None), row
        assert row["feedback"] == "interrupted before scoring: the session is stopping (-x, --maxfail or Ctrl-C)"
    for case in judged:
        assert runs[case]["status"] in ("passed", "failed", "escalated") and runs[case]["overall_score"] is not None
    log = project.run_log()  # valid JSON, one entry per row
    assert sorted(e["artifact_path"] for e in log) == sorted(r["artifact_path"] for r in runs.values())
    assert not [p for p in project.work.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("flag", ["-x", "--maxfail=1"])
def test_x_stops_after_the_first_failure_and_leaves_whole_records(
        project: Project, fake_anthropic: FakeAnthropic, flag: str) -> None:
    stop_project(project)
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.1
    result = project.run("suites/", "-v", flag, "--harness-concurrency", "2", subprocess=True)
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    assert f"{CASES_FILE}::c2" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    assert summary_row(result)[:3] == ["judged", "1", "0"]
    assert_clean_stop(project, fake_anthropic)


def test_x_in_process_returns_only_when_the_cases_it_started_have_stopped(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    """pytest.main() (here: pytester in-process) must not return while case threads still write records:
    the cases that had started stop at their next step and finish their records before the session ends.
    """
    stop_project(project)
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.1
    try:
        result = project.run("suites/", "-x", "--harness-concurrency", "2")
        result.assert_outcomes(failed=1)
        alive = [t.name for t in threading.enumerate() if t.name.startswith("harness-case")]
        running = [r["case_id"] for r in project.runs() if r["status"] == "running"]
        assert (alive, running) == ([], [])
        assert_clean_stop(project, fake_anthropic)
    finally:
        for thread in threading.enumerate():
            if thread.name.startswith("harness-case"):
                thread.join(timeout=5)


# --- 3. --collect-only --------------------------------------------------------------------------------


def test_collect_only_makes_no_model_call_and_writes_nothing(project: Project,
                                                             fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(4))
    fake_anthropic.responder = judge()
    result = project.run("suites/", "rubrics/", "--collect-only", "--harness-concurrency", "4")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*7 tests collected*"])  # 4 cases, the rubric's validity and 2 examples
    assert fake_anthropic.calls == 0 and fake_anthropic.batch_requests == []
    assert not project.work.exists()
    assert "harness summary" not in result.stdout.str()


# --- 4. the response cache ----------------------------------------------------------------------------


def test_a_second_identical_session_is_answered_from_the_cache(project: Project,
                                                               fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(3, fail=(2,)))
    fake_anthropic.responder = judge()
    first = project.run("suites/")
    first.assert_outcomes(passed=2, failed=1)
    assert fake_anthropic.calls == 3
    before = scores(project)
    assert (project.work / "cache.db").is_file()

    fake_anthropic.reset()
    fake_anthropic.responder = None  # a call now would be answered 400: only the cache can pass these cases
    second = project.run("suites/")
    second.assert_outcomes(passed=2, failed=1)
    assert fake_anthropic.calls == 0
    cycles = project.cycles()
    assert len(cycles) == 2
    again = {r["case_id"]: (r["outcome"], r["overall_score"], json.loads(r["dimension_scores"]))
             for r in project.runs() if r["cycle_id"] == cycles[1]}
    assert again == before
    # The replayed answers take no tokens and cost nothing, and the summary says where they came from.
    one, two = summary_row(first), summary_row(second)
    assert one[:6] == two[:6] and one[6] != "0/0" and one[7] != "$0.0000" and two[6:] == ["0/0", "$0.0000"]
    second.stdout.fnmatch_lines(["judged: 3 model answers from the response cache (replayed, not called: *"])
    replayed = [r for r in project.runs() if r["cycle_id"] == cycles[1]]
    assert {(r["cost_usd"], r["input_tokens"], r["cached_answers"]) for r in replayed} == {(0.0, 0, 1)}
    # each replayed item's cost says where its $0 came from; the first cycle's paid items say nothing of a cache
    from harness.apps.cli import main

    for cycle, marked in ((cycles[0], 0), (cycles[1], 3)):
        report = project.root / f"report-{cycle}.md"
        assert main(["report", cycle, "--work-dir", str(project.work), "--markdown", "--output", str(report)]) == 0
        assert report.read_text().count("| $0.0000 (cached) |") == marked


def test_a_session_answered_whole_by_the_cache_never_imports_the_sdk(project: Project,
                                                                    fake_anthropic: FakeAnthropic) -> None:
    # Importing the SDK takes about 1.5 s; a replayed run has no use for it. The first run (no cache yet)
    # imports it, so the check itself is shown to see an import when there is one.
    scale_project(project, many(3))
    project.write("conftest.py", """
import sys


def pytest_unconfigure(config):
    with open("sdk-imported.txt", "w") as out:
        out.write(str("anthropic" in sys.modules))
""")
    fake_anthropic.responder = judge()
    project.run("suites/", subprocess=True).assert_outcomes(passed=3)
    assert (project.root / "sdk-imported.txt").read_text() == "True"
    fake_anthropic.reset()
    project.run("suites/", subprocess=True).assert_outcomes(passed=3)
    assert fake_anthropic.calls == 0
    assert (project.root / "sdk-imported.txt").read_text() == "False"


@pytest.mark.parametrize("change", ["rubric description", "evaluator prompt"])
def test_a_changed_rubric_or_prompt_is_never_answered_from_the_cache(
        project: Project, fake_anthropic: FakeAnthropic, change: str) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = judge()
    project.run("suites/").assert_outcomes(passed=2)
    assert fake_anthropic.calls == 2
    if change == "rubric description":
        path = project.root / "rubrics/judged.yaml"
        path.write_text(path.read_text().replace("TONE-DESCRIPTION: warm and specific", "TONE-DESCRIPTION: warm"))
    else:
        project.write("suites/prompts/judge.md", prompt_text(marker="A REWORDED EVALUATOR PROMPT"))
    fake_anthropic.reset()
    fake_anthropic.responder = judge(tone=0.0)  # the new answer fails both cases: a stale one would pass them
    project.run("suites/").assert_outcomes(failed=2)
    assert fake_anthropic.calls == 2


def test_cache_off_always_calls_and_keeps_no_cache(project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = judge()
    for _ in range(2):
        project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=2)
    assert fake_anthropic.calls == 4
    assert not (project.work / "cache.db").exists()


def test_cache_refresh_calls_and_overwrites(project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = judge()
    project.run("suites/").assert_outcomes(passed=2)
    fake_anthropic.responder = judge(tone=0.0)
    project.run("suites/", "--harness-cache", "refresh").assert_outcomes(failed=2)
    assert fake_anthropic.calls == 4
    # The refreshed answers replaced the old ones: a default run now replays them without a call.
    project.run("suites/").assert_outcomes(failed=2)
    assert fake_anthropic.calls == 4


def test_cache_read_replays_but_never_stores(project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = judge()
    project.run("suites/", "--harness-cache", "read").assert_outcomes(passed=2)
    project.run("suites/", "--harness-cache", "read").assert_outcomes(passed=2)
    assert fake_anthropic.calls == 4  # nothing was stored, so nothing was replayed
    project.run("suites/").assert_outcomes(passed=2)  # auto stores...
    project.run("suites/", "--harness-cache", "read").assert_outcomes(passed=2)  # ...and read replays
    assert fake_anthropic.calls == 6


# --- 5. judge variance --------------------------------------------------------------------------------


def cycling_judge(overalls: list[float]) -> Callable[[dict[str, Any]], Reply]:
    """Each call scores tone and clarity so that the overall (greeting 1.0 x 0.2 by check) is the next value."""
    counter = itertools.count()
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Reply:
        with lock:
            overall = overalls[next(counter) % len(overalls)]
        judged = (overall - 0.2) / 0.8
        return judge_responder({"tone": judged, "clarity": judged})(request)

    return respond


def test_judge_samples_use_the_mean_keep_every_sample_and_list_unstable_verdicts(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, cases("warm-hello"))
    fake_anthropic.responder = cycling_judge([0.9, 0.5, 0.9])
    result = project.run("suites/", "--harness-judge-samples", "3")
    assert fake_anthropic.calls == 3  # one attempt, three samples
    # Every sample differs only by its index in the cache key: three answers, not one replayed.
    assert len({json.dumps(r, sort_keys=True) for r in fake_anthropic.requests}) == 1
    # Two samples pass (0.9) but the mean (0.767) is below 0.8: the verdict is the mean's.
    result.assert_outcomes(failed=1)
    data = json.loads((project.cycle_dir() / AGENT / "attempt-1.eval.json").read_text())
    meta = data["metadata"]
    assert sorted(meta["samples"]) == [0.5, 0.9, 0.9]
    assert data["overallScore"] == pytest.approx(sum(meta["samples"]) / 3, abs=1e-5)
    assert meta["sampleSpread"]["min"] == 0.5 and meta["sampleSpread"]["max"] == 0.9
    assert meta["sampleSpread"]["stdev"] == pytest.approx(0.188562, abs=1e-6)
    assert meta["unstable"] is True
    assert [sorted(s) for s in samples_of(project)] == [[0.5, 0.9, 0.9]]
    (row,) = project.runs()
    assert row["overall_score"] == pytest.approx(0.766667, abs=1e-5)
    result.stdout.fnmatch_lines([
        "judged: judge samples spread (max - min of the overall score): mean 0.400, worst 0.400",
        f"judged: unstable verdicts (samples on both sides of the threshold): {CASES_FILE}::warm-hello",
    ])


def test_stable_judge_samples_list_no_unstable_item(project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = cycling_judge([0.9, 0.85, 0.9])
    result = project.run("suites/", "--harness-judge-samples", "3")
    result.assert_outcomes(passed=2)
    assert fake_anthropic.calls == 6
    assert "unstable verdicts" not in result.stdout.str()
    result.stdout.fnmatch_lines(["judged: judge samples spread (max - min of the overall score): *worst 0.050"])
    for samples in samples_of(project):
        assert samples is not None and len(samples) == 3 and min(samples) >= 0.8


# --- 6. cost ------------------------------------------------------------------------------------------

TOKENS = {"c1": (1000, 200, 400, 0), "c2": (2000, 100, 0, 400), "c3": (500, 50, 0, 0)}


def fixed_usage(request: dict[str, Any]) -> dict[str, int]:
    inp, out, write, read = TOKENS[case_of(request)]
    return {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read}


def expected_cost(price: tuple[float, float, float, float]) -> dict[str, float]:
    return {case: sum(n * p for n, p in zip(tokens, price)) / 1e6 for case, tokens in TOKENS.items()}


HAIKU = (1.0, 5.0, 1.25, 0.10)  # USD per million tokens: input, output, cache write, cache read


@pytest.mark.parametrize("price_file", [None, "prices.yaml", "prices.json"])
def test_the_summary_cost_is_the_recorded_cost_at_the_price_table(
        project: Project, fake_anthropic: FakeAnthropic, price_file: str | None) -> None:
    scale_project(project, many(3))
    fake_anthropic.responder = judge(usage=fixed_usage)
    price = HAIKU
    if price_file is not None:  # the judge's model costs four times as much; cache prices follow input
        price = (4.0, 20.0, 5.0, 0.4)
        table = {"claude-haiku-4-5": {"input": 4, "output": 20, "cache_write": 5, "cache_read": 0.4}}
        if price_file.endswith(".json"):
            project.write(price_file, json.dumps(table))
        else:
            project.write(price_file, "claude-haiku-4-5: {input: 4, output: 20, cache_write: 5, cache_read: 0.4}\n")
        project.ini(f"harness_prices = {price_file}\n")
    result = project.run("suites/")
    result.assert_outcomes(passed=3)

    want = expected_cost(price)
    recorded = {r["case_id"]: r["cost_usd"] for r in project.runs()}
    assert recorded == pytest.approx(want)
    for row in project.runs():
        assert (row["input_tokens"], row["output_tokens"], row["cache_write_tokens"], row["cache_read_tokens"]) \
            == TOKENS[row["case_id"]]
    total = sum(recorded.values())
    row = summary_row(result)
    assert row[6] == f"{sum(t[0] for t in TOKENS.values())}/{sum(t[1] for t in TOKENS.values())}"
    assert row[7] == f"${total:.4f}" == f"${sum(want.values()):.4f}"


def test_a_bad_price_file_is_one_line_naming_file_and_field(project: Project,
                                                            fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(1))
    fake_anthropic.responder = judge()
    project.write("prices.yaml", "my-proxy-model: {input: 2}\n")
    project.ini("harness_prices = prices.yaml\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert error_sections(result) == [[
        "prices.yaml: my-proxy-model.output: missing (fix: add `output:`)"]]
    assert fake_anthropic.calls == 0


@pytest.mark.parametrize("concurrency", [1, 2])
def test_the_cost_cap_stops_starting_new_work_and_says_so(project: Project, fake_anthropic: FakeAnthropic,
                                                          concurrency: int) -> None:
    scale_project(project, many(5))
    fake_anthropic.responder = judge(usage=lambda request: {"input_tokens": 1000, "output_tokens": 200})
    fake_anthropic.latency_s = 0.2  # with two in flight, both calls are sent before either answer costs anything
    result = project.run("suites/", "-v", "-rs", "--harness-max-cost", "0.000001",
                         "--harness-concurrency", str(concurrency))
    # The first attempt(s) already running when the cap is reached finish; nothing starts after them.
    assert fake_anthropic.calls == concurrency
    result.assert_outcomes(passed=concurrency, skipped=5 - concurrency)
    verdicts = [line.split()[1] for line in result.outlines if line.startswith(f"{CASES_FILE}::")]
    assert verdicts == ["PASSED"] * concurrency + ["SKIPPED"] * (5 - concurrency)
    not_run = 5 - concurrency
    result.stdout.fnmatch_lines([f"stopped starting new work: cost cap * reached ($0.0020 spent); {not_run} items "
                                 "not run (exit status 82)" if concurrency == 1 else
                                 f"stopped starting new work: cost cap * reached*; {not_run} items not run (exit*"])
    # Every item that ran passed, but the run is not green: CI must not read a cut-short run as a pass.
    assert result.ret == 82
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len(skips) == 5 - concurrency and all("not run: cost cap" in line for line in skips), skips
    assert len(project.runs()) == concurrency  # no record of the items not run
    assert summary_row(result)[1:3] == [str(concurrency), str(concurrency)]


def test_the_cost_cap_shows_the_cap_the_user_set(project: Project, fake_anthropic: FakeAnthropic) -> None:
    """The cap is shown as the user gave it (a cap of 0.0005 must not read "$0.00")."""
    scale_project(project, many(2))
    fake_anthropic.responder = judge(usage=lambda request: {"input_tokens": 1000, "output_tokens": 200})
    result = project.run("suites/", "--harness-max-cost", "0.0005", "--harness-concurrency", "1")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["stopped starting new work: cost cap $0.0005 reached ($0.0020 spent); 1 item not run*"])


@pytest.mark.parametrize("how", ["another case's spend", "its own producer's spend"])
def test_an_attempt_cut_short_by_the_cost_cap_is_not_run_rather_than_failed(
        project: Project, fake_anthropic: FakeAnthropic, how: str) -> None:
    """An attempt the cap stops between producing and scoring has no verdict: the item is "not run",
    like the cases never started, not failed. Both ways the cap can cut an attempt short:

    * another case's spend reached the cap while this one was producing (engine Interrupted, exit code 3);
    * an LLM producer's own call passed the cap, so the judge call is refused (CostCapReached, exit 82).
    """
    judge_only = judge(usage=lambda request: {"input_tokens": 1000, "output_tokens": 200})
    if how == "another case's spend":  # c1 is judged while c2 is still producing
        scale_project(project, cases(("c1", "hello case 1"), ("c2", "hello case 2", 0.5), "c3", "c4"))
        fake_anthropic.responder = judge_only
        args, not_run = ("--harness-concurrency", "2"), ["c2", "c3", "c4"]
    else:  # a prompt producer: its call costs $0.002, so the judge call after it is refused
        scale_project(project, many(2))
        project.write("suites/prompts/producer.md", prompt_text("Producer", marker="PRODUCER-PROMPT"))
        project.agents(JUDGED_AGENTS.format(timeout_s=5, max_retries=0)
                       .replace('{python: "agentlib:produce"}', "prompts/producer.md"))
        fake_anthropic.responder = lambda request: (judge_only(request) if request.get("tools") else Reply.text(
            "hello case 1", usage={"input_tokens": 1000, "output_tokens": 200}))
        args, not_run = ("--harness-concurrency", "1"), ["c1", "c2"]
    result = project.run("suites/", "-v", "-rs", "--harness-max-cost", "0.001", *args)
    assert fake_anthropic.calls == 1  # one answer, and nothing started after it cost more than the cap
    runs = {r["case_id"]: r for r in project.runs()}
    for case in not_run:
        if case in runs:  # started, then stopped by the cap: recorded without a score
            assert (runs[case]["status"], runs[case]["overall_score"]) == ("escalated", None)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes.get("skipped", 0) == len(not_run)
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert all("not run: " in line and "cost cap" in line for line in skips), skips
    result.stdout.fnmatch_lines(["stopped starting new work: *cost cap*"])
    assert result.ret == 82


# --- 7. batching --------------------------------------------------------------------------------------


def test_batch_sends_the_judge_requests_as_one_message_batch_at_half_price(
        project: Project, fake_anthropic: FakeAnthropic, fast_batch_polls: None) -> None:
    scale_project(project, many(3, fail=(2,)))
    fake_anthropic.responder = judge(usage=fixed_usage)
    direct = project.run("suites/", "--harness-cache", "off")
    direct.assert_outcomes(passed=2, failed=1)
    assert fake_anthropic.calls == 3 and fake_anthropic.batch_requests == []
    first_cycle = project.cycles()[0]

    fake_anthropic.reset()
    fake_anthropic.batch_processing_s = 1.2  # long enough for a progress line while the batch is processing
    batched = project.run("suites/", "--harness-cache", "off", "--harness-batch",
                          "-o", "harness_progress_interval=0.2")
    batched.assert_outcomes(passed=2, failed=1)
    batched.stdout.fnmatch_lines(["harness: 0/3 cases done, *; batch msgbatch_fake_*: 3 processing"])
    assert fake_anthropic.calls == 0  # no direct /v1/messages call
    assert sorted(case_of(r) for r in fake_anthropic.batch_requests) == ["c1", "c2", "c3"]
    (batch,) = fake_anthropic.batches  # gathered into one batch
    assert len(batch["custom_ids"]) == 3 and batch["status"] == "ended"

    runs = project.runs()
    second_cycle = project.cycles()[1]
    by_cycle = {cycle: {r["case_id"]: r for r in runs if r["cycle_id"] == cycle} for cycle in (first_cycle,
                                                                                               second_cycle)}
    for case in ("c1", "c2", "c3"):
        one, two = by_cycle[first_cycle][case], by_cycle[second_cycle][case]
        for key in ("status", "outcome", "overall_score", "dimension_scores", "feedback", "suggested_fixes",
                    "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "exit_code"):
            assert one[key] == two[key], (case, key)
        assert two["cost_usd"] == pytest.approx(one["cost_usd"] / 2)
        assert one["cost_usd"] == pytest.approx(expected_cost(HAIKU)[case])
    one, two = summary_row(direct), summary_row(batched)
    assert one[:7] == two[:7]
    assert float(two[7].lstrip("$")) == pytest.approx(float(one[7].lstrip("$")) / 2, abs=1e-4)


# --- 8. progress --------------------------------------------------------------------------------------


def test_long_runs_print_progress_lines(project: Project, fake_anthropic: FakeAnthropic) -> None:
    """Progress lines follow harness_progress_interval, even below a second and for cases shorter than one."""
    scale_project(project, many(4))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.7
    result = project.run("suites/", "--harness-concurrency", "2", "-o", "harness_progress_interval=0.2")
    result.assert_outcomes(passed=4)
    progress = [line for line in result.outlines if line.startswith("harness:")]
    assert progress, result.stdout.str()
    for line in progress:
        assert re.match(r"harness: [0-4]/4 cases done, \$\d+\.\d{4} spent, \d+ calls in flight, \d+ calls, "
                        r"\d+ cache hits, tokens in/out \d+/\d+(, about \d+ s left)?$", line), line


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_a_user_sees_progress_in_a_normal_run(project: Project, fake_anthropic: FakeAnthropic,
                                              workers: tuple[str, ...]) -> None:
    """As a user runs it: pytest in a process of its own, its output captured as a terminal shows it (pytest's
    capture on); a slow model, so the run lasts several intervals. Under -n the controller says it."""
    scale_project(project, many(8))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.5
    result = project.run("suites/", "--harness-concurrency", "2", "-o", "harness_progress_interval=0.3", *workers,
                         subprocess=True)
    result.assert_outcomes(passed=8)
    what = "items" if workers else "cases"
    progress = [line for line in result.outlines if line.startswith("harness: ") and " done, " in line]
    assert len(progress) >= 2, result.stdout.str()
    for line in progress:
        assert re.match(rf"harness: [0-8]/8 {what} done, \$\d+\.\d{{4}} spent", line), line
    assert any(re.search(r", about \d+ s left", line) for line in progress), progress


def terminal_screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: carriage returns and backspaces move the cursor, a character overwrites
    the one under it."""
    lines, line, col = [], [], 0
    for char in raw:
        if char == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        elif char == "\r":
            col = 0
        elif char == "\b":
            col = max(0, col - 1)
        else:
            line[col:col + 1] = [char]
            col += 1
    return lines + ["".join(line).rstrip()]


def test_on_a_terminal_progress_is_one_status_rewritten_in_place(project: Project,
                                                                  fake_anthropic: FakeAnthropic) -> None:
    """pytest on a pseudo-terminal, as a user at a shell runs it: the status is rewritten every second at the end of
    the line (several states seen), and erased before each result, so the screen ends as pytest's own lines."""
    pty = pytest.importorskip("pty")
    import os
    import subprocess
    scale_project(project, many(4))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 1.5
    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "LINES": "40", "TERM": "xterm"}
    run = subprocess.Popen([sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider",
                            "--harness-concurrency", "2", "-o", "harness_progress_interval=0.5"],
                           cwd=project.pytester.path, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child's end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert run.wait(timeout=120) == 0
    os.close(main)
    raw = b"".join(chunks).decode("utf-8", "replace")
    statuses = set(re.findall(r"\[harness (\d)/4, \$\d+\.\d{4}", raw))
    assert len(statuses) >= 2, raw  # rewritten as cases finish, not printed once
    screen = terminal_screen(raw)
    assert not any("[harness" in line for line in screen), screen
    assert not any(line.startswith("harness: ") for line in screen)  # no plain lines on a terminal
    assert any(re.match(rf"{re.escape(CASES_FILE)} \.\.\.\. +\[100%\]$", line) for line in screen), screen


def test_a_progress_line_has_a_line_of_its_own_and_every_item_still_reports(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(2))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 1.2  # past the one-second tick, so a line is printed even with the bug above
    result = project.run("suites/", "-v", "--harness-concurrency", "2", "-o", "harness_progress_interval=0.2")
    result.assert_outcomes(passed=2)
    progress = [line for line in result.outlines if "cases done" in line]
    assert progress and all(line.startswith("harness: ") for line in progress), result.stdout.str()
    # Every item still gets its own PASSED line (pytest repeats the location that the progress line cut short,
    # as it does for live logs).
    verdicts = [line.split()[:2] for line in result.outlines
                if line.startswith(f"{CASES_FILE}::") and len(line.split()) > 1]
    assert verdicts == [[f"{CASES_FILE}::c1", "PASSED"], [f"{CASES_FILE}::c2", "PASSED"]]


# --- 9. a call that keeps failing ---------------------------------------------------------------------


def test_a_call_that_keeps_failing_ends_that_item_as_an_error_and_the_others_pass(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, cases(("c1", "hello case 1"), ("c2", f"hello case 2 {BROKEN}"), ("c3", "hello case 3"),
                                 ("c4", "hello case 4")))
    fake_anthropic.responder = judge()
    result = project.run("suites/", "-v", "--harness-concurrency", "4")
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == 1
    assert fake_anthropic.calls == 4  # max_retries 0: one call each, the broken one not retried
    verdicts = [line.split()[1] for line in result.outlines if line.startswith(f"{CASES_FILE}::")]
    assert verdicts == ["PASSED", "FAILED", "PASSED", "PASSED"]
    result.stdout.fnmatch_lines([
        f"{AGENT}[[]c2[]] ERROR on attempt 1: model API server error (500 api_error, retries off): "
        "the fake judge is broken; retry later or check the API status"])
    result.stdout.fnmatch_lines([f"FAILED {CASES_FILE}::c2 - *"])
    assert "Traceback" not in result.stdout.str()
    # the failure section has the one-line error; the short summary line may repeat it (terminal width)
    errors = [line for line in result.outlines if line.startswith("judged_writer[c2] ERROR on attempt")]
    assert len(errors) == 1
    runs = {r["case_id"]: r for r in project.runs()}
    assert (runs["c2"]["status"], runs["c2"]["outcome"], runs["c2"]["exit_code"]) == ("escalated", "error", 69)
    assert runs["c2"]["overall_score"] is None
    assert [runs[c]["outcome"] for c in ("c1", "c3", "c4")] == ["passed"] * 3
    # the error counts against the pass rate: 3 of the 4 items that ran passed
    result.stdout.fnmatch_lines(["judged * 4 * 3 * 75% *", "judged: 1 ended in an error (model or agent failure)"])


# --- 10. pytest-xdist ---------------------------------------------------------------------------------


def test_xdist_sends_each_case_once_into_one_cycle(project: Project, fake_anthropic: FakeAnthropic) -> None:
    scale_project(project, many(6, fail=(4,)))
    fake_anthropic.responder = judge()
    fake_anthropic.latency_s = 0.05
    result = project.run("suites/", "-n", "2", subprocess=True)
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*2 workers*", "*= harness summary =*", "cycle ????-??-??-001 - records in *"])

    assert fake_anthropic.calls == 6
    assert sorted(case_of(r) for r in fake_anthropic.requests) == [f"c{i}" for i in range(1, 7)]
    (cycle,) = project.cycles()
    assert sorted(p.name for p in project.work.iterdir() if p.suffix == ".db") == ["cache.db", "harness.db"]
    runs = project.runs()
    assert sorted(r["case_id"] for r in runs) == [f"c{i}" for i in range(1, 7)]
    assert {r["cycle_id"] for r in runs} == {cycle}
    assert sorted(e["artifact_path"] for e in project.run_log()) == sorted(r["artifact_path"] for r in runs)
    row = summary_row(result)
    assert row[1:3] == ["6", "5"]
    tokens_in = sum(r["input_tokens"] for r in runs)
    tokens_out = sum(r["output_tokens"] for r in runs)
    assert row[6] == f"{tokens_in}/{tokens_out}"
    assert row[7] == f"${sum(r['cost_usd'] for r in runs):.4f}"
