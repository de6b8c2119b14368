"""Batches at scale (issue 25, part 3): a batched run left and resumed through the batch journal (WORK/batches.db),
against the fake Message Batches API, which counts every batch created, every request in one, every poll and every
download of results. Nothing may be submitted (and paid for) twice.

* pytest as a user runs it: a run killed (SIGKILL) once its batch is submitted, then resumed; --harness-batch-submit
  then --harness-batch (also under pytest-xdist); an earlier run's batch that expired;
* the batcher through ModelClient: a stop leaves a recorded batch running; results read before their requests are
  made again are kept and taken without another poll; a batch the API no longer knows; batches cut at max_bytes;
* the journal on its own.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import Project
from harness.base.errors import ModelUnavailable
from harness.llm import CallPolicy, Message, ModelClient, ModelReply, ModelSettings
from harness.llm.batch_journal import BatchJournal
from harness.llm.batching import Batcher
from harness.llm.cache import ResponseCache
from harness.testing import FakeAnthropic, Reply, judge_responder

FAST = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0)

# Three cases the fake judge scores by their number: c1 and c2 pass, c3 fails (threshold 0.8, greeting 0.2 by check).
CASES = """\
agent: judged_writer
cases:
  - {id: c1, inputs: {text: "hello case 1"}}
  - {id: c2, inputs: {text: "hello case 2"}}
  - {id: c3, inputs: {text: "hello case 3"}}
"""
SCORES = {"1": {"tone": 1.0, "clarity": 1.0}, "2": {"tone": 0.9, "clarity": 0.6}, "3": {"tone": 0.2, "clarity": 0.1}}


def by_case(request: dict[str, Any]) -> dict[str, float]:
    match = re.search(r"hello case (\d)", json.dumps(request.get("messages")))
    assert match is not None, request
    return SCORES[match.group(1)]


@pytest.fixture
def fast_batch_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs poll every 50 ms and gather for 100 ms (no option sets them)."""
    import harness.llm.policy

    monkeypatch.setattr(harness.llm.policy, "Batcher", functools.partial(Batcher, poll_s=0.05, quiet_s=0.1))


def judged_project(project: Project, fake: FakeAnthropic) -> Project:
    project.judged(CASES)
    fake.responder = judge_responder(by_case)
    return project


def records_by_case(project: Project, cycle: str) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in project.runs() if r["cycle_id"] == cycle}


def same_scores(project: Project, one: str, two: str, *, replayed: bool = False) -> None:
    """The cycles ``one`` and ``two`` scored every case alike; ``two`` at the batch price of ``one``'s direct calls
    (``replayed``: from the response cache, no tokens and no cost this time)."""
    first, second = records_by_case(project, one), records_by_case(project, two)
    assert sorted(first) == sorted(second) == ["c1", "c2", "c3"]
    for case in first:
        for key in ("status", "outcome", "overall_score", "dimension_scores", "feedback", "suggested_fixes"):
            assert first[case][key] == second[case][key], (case, key)
        if replayed:
            assert (second[case]["cost_usd"], second[case]["cached_answers"]) == (0, 1)
            continue
        assert (first[case]["input_tokens"], first[case]["output_tokens"]) == (
            second[case]["input_tokens"], second[case]["output_tokens"])
        assert second[case]["cost_usd"] == pytest.approx(first[case]["cost_usd"] / 2)


def new_cycle(project: Project, before: list[str]) -> str:
    (cycle,) = [c for c in project.cycles() if c not in before]
    return cycle


def pending(project: Project) -> list[Any]:
    journal = BatchJournal(project.work / "batches.db")
    try:
        return journal.pending()
    finally:
        journal.close()


# --- as a user runs it -------------------------------------------------------------------------------------------


def test_a_run_killed_after_submitting_is_resumed_without_submitting_again(
        project: Project, fake_anthropic: FakeAnthropic, fast_batch_polls: None) -> None:
    judged_project(project, fake_anthropic)
    direct = project.run("suites/", "--harness-cache", "off")
    direct.assert_outcomes(passed=2, failed=1)
    (direct_cycle,) = project.cycles()
    fake_anthropic.reset()
    fake_anthropic.responder = judge_responder(by_case)
    fake_anthropic.batch_processing_s = 3600.0  # processing for as long as the first run lives

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/", "--harness-batch"],
                            cwd=project.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        # the batch is recorded as soon as the API returns its id, before its first poll
        while not (fake_anthropic.batches and fake_anthropic.batches[0]["polls"] >= 1):
            assert proc.poll() is None, f"the run ended first (exit status {proc.returncode})"
            assert time.monotonic() < deadline, "the batch was never submitted and polled"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    (killed_cycle,) = [c for c in project.cycles() if c != direct_cycle]
    (batch,) = fake_anthropic.batches
    assert len(fake_anthropic.batch_requests) == 3 and batch["reads"] == 0
    assert [(b.batch_id, b.requests) for b in pending(project)] == [(batch["id"], 3)]

    fake_anthropic.batch_processing_s = 0.0  # it ended while nobody waited
    resumed = project.run("suites/", "--harness-batch")
    resumed.assert_outcomes(passed=2, failed=1)
    resumed.stdout.fnmatch_lines([
        f"harness: 1 Message Batch of an earlier run holds 3 requests ({batch['id']}; submitted * ago, recorded in "
        "*batches.db): the requests it holds are taken from it, not submitted again",
        f"harness: Message Batch {batch['id']} of an earlier run has ended: its 3 results are taken, not submitted "
        "again",
        "harness: 3 answers taken from Message Batches of earlier runs: not submitted, not paid for again",
    ])
    (batch,) = fake_anthropic.batches  # nothing submitted twice
    assert len(fake_anthropic.batch_requests) == 3 and fake_anthropic.calls == 0 and batch["reads"] == 1
    same_scores(project, direct_cycle, new_cycle(project, [direct_cycle, killed_cycle]))
    assert pending(project) == []

    # A second resume costs nothing: the response cache holds every answer; no poll, no download.
    polls = batch["polls"]
    before = project.cycles()
    again = project.run("suites/", "--harness-batch")
    again.assert_outcomes(passed=2, failed=1)
    assert "earlier run" not in again.stdout.str()
    assert fake_anthropic.batches == [{**batch, "polls": polls}] and len(fake_anthropic.batch_requests) == 3
    same_scores(project, direct_cycle, new_cycle(project, before), replayed=True)


def test_submit_without_waiting_then_take_the_answers(
        project: Project, fake_anthropic: FakeAnthropic, fast_batch_polls: None) -> None:
    judged_project(project, fake_anthropic)
    fake_anthropic.batch_processing_s = 3600.0
    submitted = project.run("suites/", "--harness-batch-submit")
    submitted.assert_outcomes(skipped=3)
    (batch,) = fake_anthropic.batches
    submitted.stdout.fnmatch_lines([
        f"harness: submitted 3 requests in 1 Message Batch ({batch['id']}) without waiting, recorded in "
        "*batches.db; to take their answers run: pytest * suites/ --harness-batch* (a batch ends within 24 hours, "
        "most within one)",
        "judged: 3 not scored (indeterminate): the answer is pending in Message Batch msgbatch_fake_*, submitted "
        "without waiting (--harness-batch-submit); run again with --harness-batch to take it",
    ])
    assert submitted.ret == 0 and batch["polls"] == 0 and len(fake_anthropic.batch_requests) == 3

    # Still processing: a second submit takes nothing, submits nothing, and says the answers are pending.
    still = project.run("suites/", "--harness-batch-submit")
    still.assert_outcomes(skipped=3)
    still.stdout.fnmatch_lines(["*the answer is pending in Message Batch msgbatch_fake_*, submitted by an earlier run "
                                "and still processing; run again with --harness-batch to take it*"])
    assert len(fake_anthropic.batches) == 1 and len(fake_anthropic.batch_requests) == 3

    fake_anthropic.batch_processing_s = 0.0
    taken = project.run("suites/", "--harness-batch")
    taken.assert_outcomes(passed=2, failed=1)
    taken.stdout.fnmatch_lines(["harness: 3 answers taken from Message Batches of earlier runs: *"])
    assert len(fake_anthropic.batches) == 1 and len(fake_anthropic.batch_requests) == 3 and fake_anthropic.calls == 0
    assert pending(project) == []


def test_submit_and_resume_under_xdist(project: Project, fake_anthropic: FakeAnthropic) -> None:
    """Every worker records its batches in the one journal; a worker takes answers from batches another submitted."""
    judged_project(project, fake_anthropic)
    fake_anthropic.batch_processing_s = 3600.0
    project.run("suites/", "-n", "2", "--harness-batch-submit", subprocess=True).assert_outcomes(skipped=3)
    submitted = len(fake_anthropic.batches)
    assert len(fake_anthropic.batch_requests) == 3 and sum(len(b["custom_ids"]) for b in fake_anthropic.batches) == 3
    fake_anthropic.batch_processing_s = 0.0
    taken = project.run("suites/", "-n", "2", "--harness-batch", subprocess=True)
    taken.assert_outcomes(passed=2, failed=1)
    taken.stdout.fnmatch_lines(["harness: * of an earlier run hold* 3 requests *: the requests * are taken from *, "
                                "not submitted again"])
    assert len(fake_anthropic.batches) == submitted and len(fake_anthropic.batch_requests) == 3
    assert fake_anthropic.calls == 0 and pending(project) == []


def test_an_expired_batch_is_said_and_its_requests_submitted_again(
        project: Project, fake_anthropic: FakeAnthropic, fast_batch_polls: None) -> None:
    judged_project(project, fake_anthropic)
    fake_anthropic.batch_processing_s = 3600.0
    project.run("suites/", "--harness-batch-submit").assert_outcomes(skipped=3)
    (expired,) = fake_anthropic.batches
    fake_anthropic.expire(expired["id"])  # 24 hours later
    fake_anthropic.batch_processing_s = 0.0

    resumed = project.run("suites/", "--harness-batch")
    resumed.assert_outcomes(passed=2, failed=1)
    resumed.stdout.fnmatch_lines([
        f"harness: Message Batch {expired['id']} of an earlier run expired before 3 requests of it were processed "
        "(nothing is charged for those): they are submitted again"])
    first, second = fake_anthropic.batches
    assert first["id"] == expired["id"] and len(second["custom_ids"]) == 3 and second["reads"] == 1
    assert len(fake_anthropic.batch_requests) == 6  # the three, submitted again once
    assert pending(project) == []


# --- the batcher through ModelClient -------------------------------------------------------------------------------


def journaled(work: Path, *, cache: bool = True, **kwargs: Any) -> tuple[CallPolicy, list[str]]:
    """A policy whose batcher records its batches in ``work/batches.db`` (and with ``cache``, a response cache)."""
    notices: list[str] = []
    batcher = Batcher(quiet_s=kwargs.pop("quiet_s", 0.05), poll_s=0.02, journal=BatchJournal(work / "batches.db"),
                      on_notice=notices.append, **kwargs)
    return CallPolicy(cache=ResponseCache(work / "cache.db") if cache else None, batcher=batcher), notices


def ask(client: ModelClient, *texts: str) -> list[Any]:
    """Ask for every text at once; an exception is returned, not raised."""

    def one(text: str) -> Any:
        try:
            return client.complete(system="s", messages=[Message.user(text)])
        except Exception as err:  # noqa: BLE001
            return err

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, texts))


def texts(replies: list[Any]) -> list[str]:
    assert all(isinstance(r, ModelReply) for r in replies), replies
    return [r.text for r in replies]


def submitted_then_stopped(fake: FakeAnthropic, work: Path, *texts_: str) -> tuple[list[Any], list[str]]:
    """A policy submits ``texts_`` as one batch and is closed (the session stops) while the batch processes."""
    fake.responder = lambda request: Reply.text("answer to " + request["messages"][0]["content"])
    fake.batch_processing_s = 3600.0
    policy, notices = journaled(work)
    client = ModelClient(FAST, policy=policy)
    outcome: list[Any] = []
    asking = threading.Thread(target=lambda: outcome.extend(ask(client, *texts_)))
    asking.start()
    deadline = time.monotonic() + 30
    while not (fake.batches and fake.batches[0]["polls"] >= 1):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    policy.close()
    asking.join(timeout=30)
    return outcome, notices


def test_a_stop_leaves_a_recorded_batch_running_and_says_so(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    outcome, notices = submitted_then_stopped(fake_anthropic, tmp_path, "a", "b")
    assert all(isinstance(e, Exception) and "session is ending" in str(e) for e in outcome)
    (batch,) = fake_anthropic.batches
    assert batch["status"] == "in_progress"  # not canceled: a later run takes its answers
    assert notices == [f"Message Batch {batch['id']} (2 requests) left running, recorded in {tmp_path}/batches.db: "
                       "run again with --harness-batch to take its answers instead of submitting them again"]


def test_results_read_before_their_requests_are_kept_and_taken_without_another_poll(
        fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    submitted_then_stopped(fake_anthropic, tmp_path, "a", "b", "c")
    fake_anthropic.batch_processing_s = 0.0
    policy, notices = journaled(tmp_path, cache=False)  # no response cache: the journal alone keeps the answers
    client = ModelClient(FAST, policy=policy)
    assert texts(ask(client, "a")) == ["answer to a"]
    deadline = time.monotonic() + 30
    while not notices:  # the batch is read whole after "a" had its answer
        assert time.monotonic() < deadline
        time.sleep(0.01)
    (batch,) = fake_anthropic.batches
    assert batch["reads"] == 1
    journal = BatchJournal(tmp_path / "batches.db")
    assert [(b.requests, b.results) for b in journal.pending()] == [(2, 2)]  # b and c: read, not asked for yet

    polls = batch["polls"]
    assert texts(ask(client, "b", "c")) == ["answer to b", "answer to c"]
    assert fake_anthropic.batches == [{**batch, "polls": polls}] and len(fake_anthropic.batch_requests) == 3
    stats = policy.stats.snapshot()
    assert stats["batch_resumed"] == 3 and stats["batched"] == 3 and stats["batches"] == 0
    assert journal.pending() == [] and notices == [
        f"Message Batch {batch['id']} of an earlier run has ended: its 3 results are taken, not submitted again"]
    assert all(reply.batched and reply.cost_usd > 0 for reply in ask(client, "d"))  # a new one is batched as ever


def test_a_batch_the_api_no_longer_knows_is_submitted_again(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    submitted_then_stopped(fake_anthropic, tmp_path, "a", "b")
    (gone,) = fake_anthropic.batches
    fake_anthropic.forget(gone["id"])
    fake_anthropic.batch_processing_s = 0.0
    policy, notices = journaled(tmp_path)
    assert texts(ask(ModelClient(FAST, policy=policy), "a", "b")) == ["answer to a", "answer to b"]
    (again,) = fake_anthropic.batches
    assert len(again["custom_ids"]) == 2 and len(fake_anthropic.batch_requests) == 4
    assert notices[0] == (f"Message Batch {gone['id']} of an earlier run is no longer known to the API at "
                          f"{fake_anthropic.base_url}: its requests are submitted again")


def test_submit_only_records_the_batch_and_ends_its_requests_at_once(
        fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = lambda request: Reply.text("later")
    fake_anthropic.batch_processing_s = 3600.0
    policy, _ = journaled(tmp_path, submit_only=True)
    (pending_,) = ask(ModelClient(FAST, policy=policy), "a")
    assert isinstance(pending_, ModelUnavailable) and "pending in Message Batch" in str(pending_)
    (batch,) = fake_anthropic.batches
    assert batch["polls"] == 0 and policy.batcher is not None and policy.batcher.submitted == [(batch["id"], 1)]
    with pytest.raises(ValueError, match="needs a journal"):
        Batcher(submit_only=True)


def test_batches_are_cut_at_max_bytes(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = lambda request: Reply.text("ok")
    policy, _ = journaled(tmp_path, quiet_s=0.3, max_bytes=2500)  # about two of these requests a batch
    replies = ask(ModelClient(FAST, policy=policy), *(f"{k} " + "x" * 1000 for k in range(5)))
    assert texts(replies) == ["ok"] * 5
    assert sorted(len(b["custom_ids"]) for b in fake_anthropic.batches) == [1, 2, 2]
    with pytest.raises(ValueError, match="the API's limit"):
        Batcher(max_size=100_001)
    with pytest.raises(ValueError, match="the API's limit"):
        Batcher(max_bytes=257 * 1024 * 1024)


# --- the journal ---------------------------------------------------------------------------------------------------


def test_the_journal_records_finds_keeps_and_forgets(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path / "WORK" / "batches.db")
    assert journal.find("k1") is None and journal.pending() == []
    assert not journal.path.exists()  # a lookup creates nothing
    journal.record("b1", "http://api", [("c1", "k1"), ("c2", "k2"), ("c3", "k3")])
    found = journal.find("k2")
    assert found is not None and (found.batch_id, found.custom_id, found.endpoint, found.state, found.result) == (
        "b1", "c2", "http://api", "submitted", None)
    journal.keep("b1", [("c2", json.dumps({"type": "succeeded", "message": {"content": []}}))])
    assert journal.find("k2").result == {"type": "succeeded", "message": {"content": []}}  # type: ignore[union-attr]
    assert journal.finish("b1") == 1  # c1 and c3 answered (or had nothing to keep): gone; c2 kept
    assert journal.find("k1") is None and journal.find("k2").state == "read"  # type: ignore[union-attr]
    journal.take("b1", ["c2"])
    assert journal.pending() == [] and journal.finish("b1") == 0
    journal.record("b2", "http://api", [("c1", "k1")])
    journal.forget("b2")
    assert journal.find("k1") is None
    journal.close()



def test_the_records_lend_a_few_connections_not_one_per_thread(tmp_path: Path) -> None:
    """Thousands of item threads waiting on batches all write when their batch ends: a handful of connections serve
    them (a connection costs about 300 KB), and every write lands."""
    from harness.records import RecordStore
    from harness.records.store import MAX_CONNECTIONS
    from test_records_reader import DAY, attempt

    store = RecordStore(tmp_path / "WORK")
    cycle = store.allocate_cycle(DAY)
    with ThreadPoolExecutor(64) as pool:
        list(pool.map(lambda k: attempt(store, cycle, f"case-{k}", 1), range(200)))
    assert 1 <= len(store._idle) <= MAX_CONNECTIONS
    assert len(store.rows()) == 200 and len(store.read_run_log(cycle)) == 200
    store.close()
    assert store._idle == []


def test_a_secret_in_a_kept_result_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = 'sk-ant-api03-"quoted"-' + "x" * 24
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    journal = BatchJournal(tmp_path / "WORK" / "batches.db")
    journal.record("b1", "http://api", [("c1", "k1")])
    answer = {"type": "succeeded", "message": {"content": [{"type": "text", "text": f"the key is {secret}"}]}}
    journal.keep("b1", [("c1", json.dumps(answer))])
    kept = journal.find("k1").result  # type: ignore[union-attr]
    assert kept["message"]["content"][0]["text"] == "the key is [REDACTED:ANTHROPIC_API_KEY]"
    journal.close()
    on_disk = b"".join(path.read_bytes() for path in (tmp_path / "WORK").iterdir())
    assert b"quoted" not in on_disk and b"x" * 24 not in on_disk
