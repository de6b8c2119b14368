"""Client-side rate limits: requests, input tokens and output tokens per minute, as token buckets.

A :class:`RateLimiter` holds one bucket per configured limit. Each bucket holds at most one minute's
allowance and refills continuously at ``limit / 60`` per second (the Anthropic API describes its own
limits this way). Before a request is sent, :meth:`RateLimiter.acquire` blocks until every bucket
holds what the request needs, then takes it:

* requests: 1;
* input tokens: an estimate, ``characters / 4`` of the request (see :func:`estimate_input_tokens`);
* output tokens: the request's ``max_tokens``, the most it can use.

After the answer, :meth:`RateLimiter.settle` corrects both token estimates with the real counts (giving
back what was over-estimated, taking what was under); a request that got no answer is refunded its
tokens with :meth:`RateLimiter.refund` (the request itself stays counted).

A request larger than a bucket (say 50k input tokens under a 40k limit) waits for a full bucket and
then drives it into debt, so later requests wait until the debt is paid off: it is never stuck.

Waiters are served first come, first served; only the first in line sleeps on a timer, the others
wait to be woken, so there is no busy-waiting. ``clock`` and ``wait`` are injectable for tests.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RateLimits", "RateLimiter", "Reservation", "TokenBucket", "estimate_input_tokens"]

Clock = Callable[[], float]
Wait = Callable[[threading.Condition, float], Any]


@dataclass(frozen=True)
class RateLimits:
    """Optional per-minute limits; ``None`` means no limit of that kind."""

    requests_per_minute: float | None = None
    input_tokens_per_minute: float | None = None
    output_tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number or None, not {value!r}")

    def shared_by(self, processes: int) -> RateLimits:
        """One process's share when ``processes`` share the account (pytest-xdist: the worker count)."""
        n = max(1, int(processes))

        def part(value: float | None) -> float | None:
            return None if value is None else value / n

        return RateLimits(
            part(self.requests_per_minute), part(self.input_tokens_per_minute), part(self.output_tokens_per_minute)
        )

    def __bool__(self) -> bool:
        return any(
            v is not None
            for v in (self.requests_per_minute, self.input_tokens_per_minute, self.output_tokens_per_minute)
        )


class TokenBucket:
    """One bucket: holds up to ``per_minute``, refills at ``per_minute / 60`` per second; may go into debt.

    Not thread-safe on its own; :class:`RateLimiter` uses it under its lock.
    """

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = self.capacity / 60.0
        self.level = self.capacity
        self._stamp = now

    def refill(self, now: float) -> None:
        if now > self._stamp:
            self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = max(self._stamp, now)

    def delay(self, amount: float) -> float:
        """Seconds until ``amount`` (at most a full bucket) is available; 0 when it is now."""
        need = min(float(amount), self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def give(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


@dataclass
class Reservation:
    """What one request took from the buckets; settle or refund it once."""

    input_tokens: int
    output_tokens: int
    settled: bool = False


def _default_wait(cond: threading.Condition, seconds: float) -> None:
    cond.wait(seconds)


class RateLimiter:
    """Thread-safe token buckets for :class:`RateLimits`."""

    def __init__(self, limits: RateLimits, *, clock: Clock = time.monotonic, wait: Wait = _default_wait) -> None:
        self.limits = limits
        self._clock = clock
        self._wait = wait
        self._cond = threading.Condition()
        self._line: collections.deque[object] = collections.deque()
        now = clock()
        self._requests = TokenBucket(limits.requests_per_minute, now) if limits.requests_per_minute else None
        self._input = TokenBucket(limits.input_tokens_per_minute, now) if limits.input_tokens_per_minute else None
        self._output = TokenBucket(limits.output_tokens_per_minute, now) if limits.output_tokens_per_minute else None
        self.waited_s = 0.0  # total time requests spent waiting for the limits

    def _buckets(self) -> list[tuple[TokenBucket, str]]:
        pairs = [(self._requests, "requests"), (self._input, "input"), (self._output, "output")]
        return [(b, n) for b, n in pairs if b is not None]

    def _needs(self, input_tokens: int, output_tokens: int) -> list[tuple[TokenBucket, float]]:
        amounts = {"requests": 1.0, "input": float(input_tokens), "output": float(output_tokens)}
        return [(b, amounts[name]) for b, name in self._buckets()]

    def delay(self, input_tokens: int, output_tokens: int) -> float:
        """Seconds a request of this size would wait now if it were first in line (no side effects)."""
        with self._cond:
            now = self._clock()
            for bucket, _ in self._buckets():
                bucket.refill(now)
            return max((b.delay(a) for b, a in self._needs(input_tokens, output_tokens)), default=0.0)

    def levels(self) -> dict[str, float]:
        """What each configured bucket holds now (negative while in debt)."""
        with self._cond:
            now = self._clock()
            out: dict[str, float] = {}
            for bucket, name in self._buckets():
                bucket.refill(now)
                out[name] = bucket.level
            return out

    def acquire(self, input_tokens: int, output_tokens: int) -> Reservation:
        """Block until the request fits every limit, then take it; first come, first served."""
        input_tokens, output_tokens = max(0, int(input_tokens)), max(0, int(output_tokens))
        ticket = object()
        with self._cond:
            self._line.append(ticket)
            started = self._clock()
            try:
                while True:
                    if self._line[0] is not ticket:
                        self._cond.wait()  # woken when the line moves or tokens come back
                        continue
                    now = self._clock()
                    needs = self._needs(input_tokens, output_tokens)
                    for bucket, _ in needs:
                        bucket.refill(now)
                    wait_s = max((b.delay(a) for b, a in needs), default=0.0)
                    if wait_s <= 0:
                        for bucket, amount in needs:
                            bucket.take(amount)
                        break
                    self._wait(self._cond, wait_s)
            finally:
                self._line.remove(ticket)
                self.waited_s += max(0.0, self._clock() - started)
                self._cond.notify_all()
        return Reservation(input_tokens=input_tokens, output_tokens=output_tokens)

    def settle(self, reservation: Reservation, *, input_tokens: int, output_tokens: int) -> None:
        """Replace the reservation's estimates with the real counts (once; later calls do nothing)."""
        with self._cond:
            if reservation.settled:
                return
            reservation.settled = True
            now = self._clock()
            for bucket, estimate, actual in (
                (self._input, reservation.input_tokens, input_tokens),
                (self._output, reservation.output_tokens, output_tokens),
            ):
                if bucket is None:
                    continue
                bucket.refill(now)
                if estimate > actual:
                    bucket.give(estimate - actual)
                else:
                    bucket.take(actual - estimate)
            self._cond.notify_all()

    def refund(self, reservation: Reservation) -> None:
        """The request got no answer: give its tokens back (the request still counts against RPM)."""
        self.settle(reservation, input_tokens=0, output_tokens=0)


def estimate_input_tokens(body: Mapping[str, Any] | None) -> int:
    """Input tokens of a Messages request before sending it: 4 characters a token, at least 1."""
    if not body:
        return 1
    parts = [body.get("system"), body.get("messages"), body.get("tools")]
    chars = len(json.dumps(parts, ensure_ascii=False, default=str))
    return max(1, chars // 4)
