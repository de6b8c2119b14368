"""Rate limits (harness.ratelimit): token-bucket arithmetic on a fake clock; no test here sleeps for real."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from harness.base.errors import ModelCallError
from harness.llm import CallPolicy, Message, ModelClient, ModelSettings
from harness.llm.ratelimit import RateLimiter, RateLimits, estimate_input_tokens
from harness.testing import FakeAnthropic, Reply


class FakeClock:
    """``clock()`` reads it; ``wait(cond, seconds)`` records the wait and moves time on instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def limiter(clock: FakeClock, **limits: float) -> RateLimiter:
    return RateLimiter(RateLimits(**limits), clock=clock, wait=clock.wait)


def test_requests_per_minute_allows_a_minutes_burst_then_one_per_interval() -> None:
    clock = FakeClock()
    rl = limiter(clock, requests_per_minute=60)
    for _ in range(60):
        rl.acquire(0, 0)
    assert clock.waits == []
    rl.acquire(0, 0)
    rl.acquire(0, 0)
    assert clock.waits == [pytest.approx(1.0), pytest.approx(1.0)]
    clock.now += 30  # refills 30 requests...
    assert rl.levels()["requests"] == pytest.approx(30)
    clock.now += 3600  # ...but never more than a minute's worth
    assert rl.levels()["requests"] == pytest.approx(60)


def test_input_tokens_wait_for_exactly_the_missing_tokens() -> None:
    clock = FakeClock()
    rl = limiter(clock, input_tokens_per_minute=6000)  # 100 tokens a second
    rl.acquire(5000, 0)
    assert rl.delay(1500, 0) == pytest.approx(5.0)  # 1000 left: 500 more take 5 s
    assert clock.waits == []  # delay() only looks
    rl.acquire(1500, 0)
    assert clock.waits == [pytest.approx(5.0)]
    assert rl.levels()["input"] == pytest.approx(0)


def test_settle_gives_back_an_over_estimate_and_takes_an_under_estimate() -> None:
    clock = FakeClock()
    rl = limiter(clock, input_tokens_per_minute=6000, output_tokens_per_minute=600)
    over = rl.acquire(4000, 500)  # output reserved as max_tokens
    assert rl.levels() == {"input": pytest.approx(2000), "output": pytest.approx(100)}
    rl.settle(over, input_tokens=1000, output_tokens=50)
    assert rl.levels() == {"input": pytest.approx(5000), "output": pytest.approx(550)}
    rl.settle(over, input_tokens=0, output_tokens=0)  # settling twice changes nothing
    assert rl.levels()["input"] == pytest.approx(5000)

    under = rl.acquire(1000, 50)
    rl.settle(under, input_tokens=7000, output_tokens=50)
    assert rl.levels()["input"] == pytest.approx(-2000)  # in debt: the next request waits it off
    rl.acquire(100, 0)
    assert clock.waits == [pytest.approx(21.0)]  # (2000 + 100) / 100 per second


def test_refund_returns_tokens_but_not_the_request() -> None:
    clock = FakeClock()
    rl = limiter(clock, requests_per_minute=10, input_tokens_per_minute=600, output_tokens_per_minute=600)
    reservation = rl.acquire(300, 400)
    rl.refund(reservation)
    assert rl.levels() == {"requests": pytest.approx(9), "input": pytest.approx(600), "output": pytest.approx(600)}


def test_a_request_larger_than_the_bucket_is_not_stuck() -> None:
    clock = FakeClock()
    rl = limiter(clock, input_tokens_per_minute=600)  # 10 tokens a second
    rl.acquire(100, 0)
    rl.acquire(5000, 0)  # waits for a full bucket (10 s), then goes into debt
    assert clock.waits == [pytest.approx(10.0)]
    assert rl.levels()["input"] == pytest.approx(-4400)
    rl.acquire(10, 0)
    assert clock.waits[-1] == pytest.approx(441.0)


def test_threads_are_served_in_turn_without_polling() -> None:
    clock = FakeClock()
    rl = limiter(clock, requests_per_minute=60)
    for _ in range(60):
        rl.acquire(0, 0)
    threads = [threading.Thread(target=rl.acquire, args=(0, 0)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in threads)
    assert clock.now == pytest.approx(1008.0)  # 8 more requests at 1 a second
    assert sum(clock.waits) == pytest.approx(8.0) and len(clock.waits) <= 16  # timed waits only, no spinning
    assert rl.waited_s >= 8.0 - 1e-9


def test_limits_validate_and_are_optional() -> None:
    assert not RateLimits() and RateLimits(requests_per_minute=5)
    with pytest.raises(ValueError, match="requests_per_minute must be a positive number"):
        RateLimits(requests_per_minute=0)
    assert CallPolicy(rate_limits=RateLimits()).limiter is None
    assert RateLimits(60, None, 8000).shared_by(4) == RateLimits(15, None, 2000)


def test_estimate_input_tokens() -> None:
    body = {"system": "s" * 400, "messages": [Message.user("x" * 400)], "max_tokens": 10}
    assert 200 <= estimate_input_tokens(body) <= 230
    assert estimate_input_tokens({}) == 1


# -- behind the client ------------------------------------------------------------------------------

FAST = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0, max_tokens=1000)


def test_client_waits_for_the_limits_and_settles_with_real_usage(fake_anthropic: FakeAnthropic) -> None:
    clock = FakeClock()
    rl = limiter(clock, requests_per_minute=2, input_tokens_per_minute=6000, output_tokens_per_minute=6000)
    client = ModelClient(FAST, policy=CallPolicy(rate_limits=rl))
    usage = {"input_tokens": 40, "output_tokens": 30, "cache_creation_input_tokens": 60}
    fake_anthropic.queue(*(Reply.text("ok", usage=usage) for _ in range(3)))
    for _ in range(3):
        client.complete(system="s", messages=[Message.user("hi")])

    assert fake_anthropic.calls == 3
    assert clock.waits == [pytest.approx(30.0)]  # the third request waited for the RPM bucket
    levels = rl.levels()
    # each request used 100 input tokens (cache writes count) and 30 output tokens (1000 were reserved);
    # the 30 s wait refilled the first two, so what is missing is the third's real usage
    assert levels == {"requests": pytest.approx(0), "input": pytest.approx(5900), "output": pytest.approx(5970)}


def test_every_attempt_counts_and_failures_refund_tokens(fake_anthropic: FakeAnthropic) -> None:
    clock = FakeClock()
    rl = limiter(clock, requests_per_minute=10, output_tokens_per_minute=60_000)
    client = ModelClient(replace(FAST, max_retries=1), policy=CallPolicy(rate_limits=rl))
    fake_anthropic.queue(Reply.error(429, retry_after=0.01), Reply.error(400))
    with pytest.raises(ModelCallError):
        client.complete(system="s", messages=[Message.user("hi")])
    assert fake_anthropic.calls == 2
    assert rl.levels() == {"requests": pytest.approx(8), "output": pytest.approx(60_000)}
