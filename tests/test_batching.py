"""Message Batches (harness.batching) through ModelClient and the real SDK, against the fake server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.base.errors import ExitCode, ModelCallError
from harness.llm import CallPolicy, GenerationResult, Message, ModelClient, ModelReply, ModelSettings, price_usd
from harness.llm.batching import Batcher
from harness.llm.cache import ResponseCache
from harness.testing import FakeAnthropic, Reply, judge_responder

FAST = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0)


def batch_policy(**kwargs: Any) -> CallPolicy:
    batcher = Batcher(quiet_s=kwargs.pop("quiet_s", 0.1), poll_s=0.01, **kwargs)
    return CallPolicy(batcher=batcher)


def run_all(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run ``jobs`` at once (as the harness runs a session's items); exceptions are returned, not raised."""

    def wrap(job: Callable[[], Any]) -> Any:
        try:
            return job()
        except Exception as err:
            return err

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(wrap, jobs))


def schema(*dims: str) -> dict[str, Any]:
    dim = {"type": "object", "required": ["score", "weight", "reason"]}
    return {
        "type": "object",
        "required": ["overallScore", "dimensionScores"],
        "properties": {
            "overallScore": {"type": "number"},
            "dimensionScores": {"type": "object", "required": list(dims), "properties": {d: dim for d in dims}},
        },
    }


def judge_jobs(client: ModelClient, n: int) -> list[Callable[[], GenerationResult]]:
    return [
        (lambda k=k: client.generate_json(system="judge", prompt=f"artifact {k}", schema=schema("clarity", "tone")))
        for k in range(n)
    ]


def scores_by_artifact(request: dict[str, Any]) -> dict[str, float]:
    k = int(request["messages"][0]["content"].split()[-1])
    return {"clarity": k / 10, "tone": 1 - k / 10}


def test_judge_requests_as_a_batch_give_the_same_results_as_direct_calls(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = judge_responder(scores_by_artifact)
    progress: list[tuple[str, dict[str, int]]] = []
    policy = batch_policy(quiet_s=60.0, max_size=6, on_progress=lambda b, counts: progress.append((b, counts)))
    batched = run_all(judge_jobs(ModelClient(FAST, policy=policy), 6))

    assert fake_anthropic.calls == 0 and len(fake_anthropic.batch_requests) == 6
    (batch,) = fake_anthropic.batches
    assert batch["status"] == "ended" and len(batch["custom_ids"]) == 6
    assert progress[0][1]["processing"] == 6 and progress[-1][1]["succeeded"] == 6
    assert {p[0] for p in progress} == {batch["id"]}

    fake_anthropic.reset()
    direct_policy = CallPolicy()
    direct = run_all(judge_jobs(ModelClient(FAST, policy=direct_policy), 6))
    assert fake_anthropic.calls == 6 and fake_anthropic.batch_requests == []

    for b, d in zip(batched, direct, strict=True):
        assert isinstance(b, GenerationResult) and isinstance(d, GenerationResult)
        assert b.success and b.data == d.data and b.usage == d.usage and b.attempts == d.attempts == 1
        assert b.cost_usd == pytest.approx(d.cost_usd / 2)  # the batch discount
    assert [b.data["dimensionScores"]["clarity"]["score"] for b in batched] == [k / 10 for k in range(6)]

    stats = policy.stats.snapshot()
    assert stats["batched"] == 6 and stats["batches"] == 1 and stats["calls"] == 0 and stats["batch_waiting"] == 0
    assert stats["cost_usd"] == pytest.approx(direct_policy.stats.snapshot()["cost_usd"] / 2)


def test_a_batched_reply_is_the_direct_reply_at_half_price(fake_anthropic: FakeAnthropic) -> None:
    usage = {
        "input_tokens": 1000,
        "output_tokens": 200,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 50,
    }
    fake_anthropic.queue(Reply.tool({"a": 1}, usage=usage), Reply.tool({"a": 1}, usage=usage))
    kwargs: dict[str, Any] = {"system": "s", "messages": [Message.user("hi")]}
    kwargs["cached_system_prefix"] = "RUBRIC"
    policy = batch_policy()
    via_batch = ModelClient(FAST, policy=policy).complete(**kwargs)
    direct = ModelClient(FAST).complete(**kwargs)

    assert via_batch.batched and not direct.batched
    assert via_batch.tool_input == direct.tool_input == {"a": 1} and via_batch.usage == direct.usage
    assert via_batch.tool_call and via_batch.stop_reason == direct.stop_reason == "tool_use"
    assert direct.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", direct.usage))
    assert via_batch.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", direct.usage, batch=True))
    assert fake_anthropic.batch_requests[0] == fake_anthropic.requests[0]  # the very same request body
    stats = policy.stats.snapshot()
    assert (stats["cache_write_tokens"], stats["cache_read_tokens"]) == (300, 50)


def test_a_failed_request_fails_only_itself(fake_anthropic: FakeAnthropic) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        content = request["messages"][0]["content"]
        if content == "bad":
            return Reply.error(400, message="prompt is too long")
        if content == "busy":
            return Reply.error(529)
        if content == "late":
            return Reply.expired()
        return Reply.text(f"answer to {content}")

    fake_anthropic.responder = respond
    policy = batch_policy(quiet_s=60.0, max_size=6)
    client = ModelClient(FAST, policy=policy)
    contents = ["one", "bad", "two", "late", "busy", "three"]
    results = run_all(
        [(lambda c=c: client.complete(system="s", messages=[Message.user(c)])) for c in contents]
    )

    assert len(fake_anthropic.batches) == 1
    one, bad, two, late, busy, three = results
    assert [r.text for r in (one, two, three)] == ["answer to one", "answer to two", "answer to three"]
    assert isinstance(bad, ModelCallError) and bad.exit_code == ExitCode.PROTOCOL
    assert "invalid_request_error" in str(bad) and "prompt is too long" in str(bad)
    assert isinstance(busy, ModelCallError) and busy.exit_code == ExitCode.TEMP_FAIL
    assert isinstance(late, ModelCallError) and late.exit_code == ExitCode.TEMP_FAIL and "expired" in str(late)
    assert all("\n" not in str(e) for e in (bad, busy, late))
    stats = policy.stats.snapshot()
    assert stats["batched"] == 3 and stats["failures"] == 3


def test_the_size_cap_submits_without_waiting_for_quiet(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda request: Reply.text("ok")
    policy = batch_policy(quiet_s=60.0, max_size=3)  # only the cap can send these within the test
    client = ModelClient(FAST, policy=policy)
    results = run_all(
        [(lambda k=k: client.complete(system="s", messages=[Message.user(str(k))])) for k in range(6)]
    )
    assert all(isinstance(r, ModelReply) and r.text == "ok" for r in results)
    assert sorted(len(b["custom_ids"]) for b in fake_anthropic.batches) == [3, 3]
    policy.close()


def test_a_quiet_window_submits_what_has_gathered(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda request: Reply.text("ok")
    client = ModelClient(FAST, policy=batch_policy(quiet_s=0.2))  # far below the size cap
    results = run_all(
        [(lambda k=k: client.complete(system="s", messages=[Message.user(str(k))])) for k in range(3)]
    )
    assert all(isinstance(r, ModelReply) for r in results)
    assert sum(len(b["custom_ids"]) for b in fake_anthropic.batches) == 3


def test_batch_false_sends_directly(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("direct"))
    reply = ModelClient(FAST, policy=batch_policy()).complete(
        system="s", messages=[Message.user("hi")], batch=False
    )
    assert reply.text == "direct" and not reply.batched
    assert fake_anthropic.calls == 1 and fake_anthropic.batches == []


def test_batched_answers_fill_the_response_cache(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = lambda request: Reply.text("from a batch")
    kwargs: dict[str, Any] = {"system": "s", "messages": [Message.user("hi")]}

    def policy() -> CallPolicy:
        return CallPolicy(cache=ResponseCache(tmp_path / "cache.db"), batcher=Batcher(quiet_s=0.05, poll_s=0.01))

    first = ModelClient(FAST, policy=policy()).complete(**kwargs)
    second_policy = policy()
    second = ModelClient(FAST, policy=second_policy).complete(**kwargs)
    assert first.batched and second.cached and second.text == "from a batch" and second.cost_usd == 0
    assert len(fake_anthropic.batches) == 1 and second_policy.stats.snapshot()["batches"] == 0


def test_closing_the_policy_fails_the_waiting_requests_and_cancels_the_batch(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda request: Reply.text("too slow")
    fake_anthropic.batch_processing_s = 60.0
    progress = threading.Event()
    policy = CallPolicy(batcher=Batcher(quiet_s=0.05, poll_s=0.05, on_progress=lambda b, c: progress.set()))
    client = ModelClient(FAST, policy=policy)
    outcome: list[Any] = []

    def ask() -> None:
        outcome.extend(run_all([lambda: client.complete(system="s", messages=[Message.user("x")])]))

    waiter = threading.Thread(target=ask)
    waiter.start()
    assert progress.wait(10)  # the batch exists and is being polled
    policy.close()
    waiter.join(timeout=10)

    (error,) = outcome
    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TEMP_FAIL
    assert "session is ending" in str(error)
    (batch,) = fake_anthropic.batches
    assert batch["status"] == "ended"  # canceled on the server
    with pytest.raises(ModelCallError, match="stopped"):  # a request after close fails at once
        client.complete(system="s", messages=[Message.user("y")])


def test_an_unreachable_batch_api_fails_every_request_in_it() -> None:
    with FakeAnthropic() as server:
        dead_url = server.base_url
    policy = batch_policy()
    client = ModelClient(FAST, api_key="sk-ant-test-dummy", base_url=dead_url, policy=policy)
    results = run_all([(lambda: client.complete(system="s", messages=[Message.user("x")]))] * 2)
    assert all(isinstance(r, ModelCallError) and r.exit_code == ExitCode.UNAVAILABLE for r in results)
    assert all(dead_url in str(r) for r in results)


# -- the batcher on its own, with a stub API --------------------------------------------------------


class StubBatches:
    """Just enough of ``messages.batches``: every request succeeds with its custom_id as the message."""

    def __init__(self, failing_polls: int = 0, in_progress_polls: int = 0) -> None:
        self.failing_polls = failing_polls
        self.in_progress_polls = in_progress_polls  # polls (after the failing ones) that find it still running
        self.polls = 0
        self.requests: list[dict[str, Any]] = []

    def create(self, *, requests: Any) -> Any:
        self.requests = list(requests)
        return SimpleNamespace(id="b1", processing_status="in_progress", request_counts=None)

    def retrieve(self, message_batch_id: str) -> Any:
        self.polls += 1
        if self.polls <= self.failing_polls:
            raise ConnectionError("flaky network")
        ended = self.polls > self.failing_polls + self.in_progress_polls
        return SimpleNamespace(id=message_batch_id, processing_status="ended" if ended else "in_progress",
                               request_counts=None)

    def results(self, message_batch_id: str) -> Any:
        return [
            SimpleNamespace(custom_id=r["custom_id"], result=SimpleNamespace(type="succeeded", message=r["custom_id"]))
            for r in self.requests
        ]

    def cancel(self, message_batch_id: str) -> Any:
        return None


def mapped(err: BaseException) -> ModelCallError:
    return ModelCallError(f"mapped: {err}", ExitCode.UNAVAILABLE)


def test_a_failed_poll_is_tried_again() -> None:
    api = StubBatches(failing_polls=2)
    batcher = Batcher(quiet_s=0.0, poll_s=0.0, poll_failures=3)
    future = batcher.submit({"model": "m"}, api=api, map_error=mapped)
    assert future.result(timeout=5) == api.requests[0]["custom_id"] and api.polls == 3
    assert api.requests[0]["params"] == {"model": "m"}


def test_polls_failing_in_a_row_fail_the_batch() -> None:
    batcher = Batcher(quiet_s=0.0, poll_s=0.0, poll_failures=3)
    future = batcher.submit({"model": "m"}, api=StubBatches(failing_polls=3), map_error=mapped)
    with pytest.raises(ModelCallError, match="mapped: flaky network"):
        future.result(timeout=5)


class RecordedWaits(threading.Event):
    """The batcher's stop event, recording how long each poll would have waited (and not waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def test_polls_come_soon_then_less_often_up_to_the_longest_interval() -> None:
    """A small batch's answers arrive within a second or two of its end; a batch of hours is not polled
    thousands of times."""
    batcher = Batcher(quiet_s=0.0, poll_s=1.0, poll_max_s=4.0)
    batcher._stop = waits = RecordedWaits()
    api = StubBatches(in_progress_polls=6)
    future = batcher.submit({"model": "m"}, api=api, map_error=mapped)
    assert future.result(timeout=5) == api.requests[0]["custom_id"] and api.polls == 7
    assert waits.waits == [1.0, 1.5, 2.25, 3.375, 4.0, 4.0, 4.0]
