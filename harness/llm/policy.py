"""The call policy: how every model call of a session is made, whatever the provider.

One :class:`CallPolicy` is shared by every client of a session. It holds the bound on HTTP calls in flight
(a semaphore around every attempt, retries included), optional rate limits (:mod:`harness.llm.ratelimit`),
the response cache (:mod:`harness.llm.cache`), the Message Batches path (:mod:`harness.llm.batching`), the
price table, the cost cap and live :class:`CallStats`. Providers call :meth:`CallPolicy.http_attempt` around
each HTTP attempt (both SDKs through their client's send), so the bound and the limits hold for every
provider alike. :meth:`CallPolicy.send` is the one way a request reaches a provider: within the deadline of
its ``timeout_s`` (:mod:`harness.llm.deadline`), and a provider's own failure as one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.base.errors import ExitCode, HarnessError, ModelCallError
from harness.base.events import Events, ModelCalled
from harness.base.usage import Usage
from harness.llm.batch_journal import JOURNAL_FILE, BatchJournal
from harness.llm.batching import Batcher, NoticeCallback, ProgressCallback
from harness.llm.cache import CACHE_FILE, CACHE_MODES, ResponseCache, cache_access
from harness.llm.deadline import call_inline, call_within, current_clock, queued
from harness.llm.prices import PRICES_PER_MTOK, Price, known_price, load_price_table, missing_price_line, price_usd
from harness.llm.providers import provider_failure
from harness.llm.ratelimit import RateLimiter, RateLimits, Reservation, estimate_input_tokens
from harness.llm.types import ModelReply

if TYPE_CHECKING:
    from harness.llm.providers import Provider
    from harness.llm.types import ModelRequest

Response = TypeVar("Response")

DEFAULT_MAX_IN_FLIGHT = 16
_STAT_COUNTERS = (
    "calls",  # Messages API requests sent (HTTP attempts, retries included; batched requests not)
    "retries",  # HTTP attempts that were SDK retries (any endpoint)
    "cache_hits",  # answers served by the response cache
    "batched",  # answers that came back through a Message Batch
    "failures",  # complete() calls that ended in ModelCallError
    "unpriced",  # answers from a model with no price (their cost is unknown, left out of cost_usd)
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
)


class CallStats:
    """Live, thread-safe counters of one policy; :meth:`snapshot` is the progress line's and benchmarks' view."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_STAT_COUNTERS, 0)
        self._cost = 0.0
        self._in_flight = 0
        self._peak = 0
        self._unpriced: set[str] = set()
        self._limiter: RateLimiter | None = None
        self._batcher: Batcher | None = None

    def snapshot(self) -> dict[str, Any]:
        """Everything at once: the counters above, ``in_flight``, ``peak_in_flight``, ``cost_usd``,
        ``batches`` (created), ``batch_waiting`` (requests waiting on a batch), ``batch_resumed`` (answers
        taken from batches an earlier run submitted) and ``rate_wait_s`` (total time spent waiting for rate
        limits)."""
        with self._lock:
            snap: dict[str, Any] = dict(self._counts)
            snap["in_flight"] = self._in_flight
            snap["peak_in_flight"] = self._peak
            snap["cost_usd"] = self._cost
        snap["batches"] = self._batcher.batches_created if self._batcher is not None else 0
        snap["batch_waiting"] = self._batcher.waiting if self._batcher is not None else 0
        snap["batch_resumed"] = self._batcher.resumed if self._batcher is not None else 0
        snap["rate_wait_s"] = self._limiter.waited_s if self._limiter is not None else 0.0
        return snap

    @property
    def cost_usd(self) -> float:
        """What the priced answers cost (an unpriced model's answers are left out: see ``unpriced_models``)."""
        with self._lock:
            return self._cost

    @property
    def unpriced_models(self) -> list[str]:
        """The models that answered and have no price: their cost is unknown."""
        with self._lock:
            return sorted(self._unpriced)

    def _add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answered(self, reply: ModelReply) -> None:
        with self._lock:
            if reply.batched:
                self._counts["batched"] += 1
            self._counts["input_tokens"] += reply.usage.input_tokens
            self._counts["output_tokens"] += reply.usage.output_tokens
            self._counts["cache_write_tokens"] += reply.usage.cache_write_tokens
            self._counts["cache_read_tokens"] += reply.usage.cache_read_tokens
            if reply.cost_usd is None:
                self._counts["unpriced"] += 1
                self._unpriced.add(reply.model)
            else:
                self._cost += reply.cost_usd


class CostCapReached(ModelCallError):
    """The policy's ``max_cost_usd`` is spent: no new model call starts (cache hits still answer)."""


class CallPolicy:
    """How every model call of a session is made; one instance shared by all its :class:`ModelClient` s.

    * ``max_in_flight``: at most this many HTTP requests at once (a semaphore around every attempt,
      SDK retries included; a retry's backoff sleep holds no slot);
    * ``rate_limits``: :class:`~harness.ratelimit.RateLimits` (or a ready :class:`~harness.ratelimit.RateLimiter`)
      respected before each Messages request is sent;
    * ``cache`` and ``cache_mode``: a :class:`~harness.cache.ResponseCache` and one of
      ``off|read|write|refresh|auto`` (see :mod:`harness.cache`);
    * ``batcher``: a :class:`~harness.batching.Batcher`; with it, requests go through Message Batches;
    * ``prices``: the price table (default :data:`PRICES_PER_MTOK`, see :func:`load_price_table`);
    * ``max_cost_usd``: once this much is spent, new calls raise :class:`CostCapReached` (exit 82).

    ``stats`` (:class:`CallStats`) counts everything live. :meth:`build` makes one from option values.
    """

    def __init__(
        self,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        *,
        rate_limits: RateLimits | RateLimiter | None = None,
        cache: ResponseCache | None = None,
        cache_mode: str = "auto",
        batcher: Batcher | None = None,
        prices: Mapping[str, Price] | None = None,
        max_cost_usd: float | None = None,
    ) -> None:
        if int(max_in_flight) < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if cache_mode not in CACHE_MODES:
            raise ValueError(f"unknown cache mode {cache_mode!r}: use one of {', '.join(CACHE_MODES)}")
        self.max_in_flight = int(max_in_flight)
        if isinstance(rate_limits, RateLimits):
            self.limiter: RateLimiter | None = RateLimiter(rate_limits) if rate_limits else None
        else:
            self.limiter = rate_limits
        self.cache = cache
        self.cache_mode = cache_mode
        self.batcher = batcher
        self.prices: Mapping[str, Price] = dict(prices) if prices is not None else PRICES_PER_MTOK
        self.max_cost_usd = max_cost_usd
        self.stats = CallStats()
        self.events: Events | None = None  # the run's event stream: each answer is a ModelCalled event
        self.stats._limiter = self.limiter
        self.stats._batcher = batcher
        self._slots = threading.BoundedSemaphore(self.max_in_flight)

    @classmethod
    def build(
        cls,
        *,
        concurrency: int = DEFAULT_MAX_IN_FLIGHT,
        cache_mode: str = "auto",
        work_dir: Path | str | None = None,
        requests_per_minute: float | None = None,
        input_tokens_per_minute: float | None = None,
        output_tokens_per_minute: float | None = None,
        processes: int = 1,
        batch: bool = False,
        on_batch_progress: ProgressCallback | None = None,
        batch_submit: bool = False,
        on_batch_notice: NoticeCallback | None = None,
        price_file: Path | str | None = None,
        max_cost_usd: float | None = None,
    ) -> CallPolicy:
        """A policy from option values.

        The cache is ``work_dir/cache.db`` (opened on first use; none without a work dir or with
        ``cache_mode="off"``). The rate limits are the account's: with ``processes`` (pytest-xdist's
        worker count) each process gets its share. ``concurrency`` and ``max_cost_usd`` are per
        process. A bad price file is a HarnessConfigError naming the file and field.

        With ``batch`` and a work dir, every Message Batch is recorded in ``work_dir/batches.db`` (the batch
        journal) and a request an earlier run submitted is taken from its batch, not submitted again;
        ``batch_submit`` records each batch and ends its requests with ``BatchPending`` instead of waiting.
        ``on_batch_notice(text)`` hears what the batcher has to say (a batch resumed, expired, left running).
        """
        cache = None
        if work_dir is not None and cache_mode != "off":
            cache = ResponseCache(Path(work_dir) / CACHE_FILE)
        limits = RateLimits(requests_per_minute, input_tokens_per_minute, output_tokens_per_minute)
        limits = limits.shared_by(processes)
        return cls(
            concurrency,
            rate_limits=limits,
            cache=cache,
            cache_mode=cache_mode,
            batcher=cls._batcher(work_dir, batch=batch or batch_submit, submit_only=batch_submit,
                                 on_progress=on_batch_progress, on_notice=on_batch_notice),
            prices=load_price_table(price_file) if price_file is not None else None,
            max_cost_usd=max_cost_usd,
        )

    @staticmethod
    def _batcher(work_dir: Path | str | None, *, batch: bool, submit_only: bool, on_progress: ProgressCallback | None,
                 on_notice: NoticeCallback | None) -> Batcher | None:
        if not batch:
            return None
        journal = BatchJournal(Path(work_dir) / JOURNAL_FILE) if work_dir is not None else None
        if submit_only and journal is None:
            raise ValueError("batch_submit needs a work_dir: the batches nobody waits for are recorded there")
        return Batcher(on_progress=on_progress, journal=journal, submit_only=submit_only, on_notice=on_notice)

    def __repr__(self) -> str:
        return (
            f"CallPolicy(max_in_flight={self.max_in_flight}, cache={self.cache!r}, cache_mode={self.cache_mode!r}, "
            f"limits={self.limiter.limits if self.limiter else None}, batch={self.batcher is not None})"
        )

    def price(self, model: str, usage: Usage, *, batch: bool = False) -> float | None:
        """``price_usd`` with this policy's table (None: the model has no price)."""
        return price_usd(model, usage, table=self.prices, batch=batch)

    def has_price(self, model: str) -> bool:
        return known_price(model, table=self.prices)

    def answered(self, reply: ModelReply, started: float) -> None:
        """Count an answer (a live one in the stats) and emit it to the event stream."""
        if not reply.cached:
            self.stats._answered(reply)
        if self.events:
            self.events.emit(ModelCalled(reply.model, reply.usage, reply.cost_usd, reply.cached, reply.batched,
                                         (time.perf_counter() - started) * 1000))

    def send(self, provider: Provider, request: ModelRequest, *, batch: bool = False) -> ModelReply:
        """One request through ``provider``, within the deadline of its settings' ``timeout_s``.

        ``timeout_s`` bounds the whole call, retries and their backoff included, whatever the provider does
        (:mod:`harness.llm.deadline`); a batched request waits for its batch instead. Whatever the provider
        raises that is not already one of ours becomes one line (:func:`provider_failure`): never a traceback.
        """
        settings = provider.settings
        try:
            if batch:
                return provider.send(request, batch=True)
            provider.ready()
            if provider.bounds_its_calls():
                return call_inline(settings.timeout_s, lambda: provider.send(request, batch=False),
                                   model=settings.qualified)
            return call_within(settings.timeout_s, lambda: provider.send(request, batch=False),
                               model=settings.qualified, late=lambda reply: self._late(reply, settings.qualified))
        except HarnessError:
            raise
        except Exception as exc:
            raise provider_failure(provider, exc) from None

    def _late(self, reply: ModelReply, model: str) -> None:
        """An answer that came after its call timed out was billed all the same: the cost cap counts it."""
        if isinstance(reply, ModelReply):
            priced_as = reply.model if self.has_price(reply.model) else model
            self.stats._answered(dataclasses.replace(reply, cost_usd=self.price(priced_as, reply.usage)))

    def close(self) -> None:
        """End of session: stop batching (failing whatever still waits) and close the cache."""
        if self.batcher is not None:
            self.batcher.close()
        if self.cache is not None:
            self.cache.close()

    # -- used by ModelClient and the providers ------------------------------------------------------

    def cache_access(self, temperature: float) -> tuple[bool, bool, bool]:
        """(read, write, overwrite) of the response cache for a call at ``temperature``."""
        if self.cache is None:
            return False, False, False
        return cache_access(self.cache_mode, temperature)

    def check_budget(self, model: str) -> None:
        """Refuse a new call once the cost cap is spent, or when the cap cannot hold (the model has no price)."""
        if self.max_cost_usd is None:
            return
        if not self.has_price(model):
            raise ModelCallError(f"--harness-max-cost cannot hold: {missing_price_line(model)}",
                                 ExitCode.CONFIG_ERROR)
        spent = self.stats.cost_usd
        if spent >= self.max_cost_usd:
            raise CostCapReached(
                f"the cost cap of ${self.max_cost_usd:g} is reached (${spent:.4f} spent); "
                "no new model calls start (raise --harness-max-cost to go on)",
                ExitCode.QUOTA_EXCEEDED,
            )

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """A slot of the concurrency bound for one HTTP attempt. A call its caller gave up on at its deadline lets
        its slot go at once: a server that keeps trickling the abandoned answer holds no slot others wait for."""
        with queued():
            self._slots.acquire()
        self.stats._enter()
        held = [True]
        lock = threading.Lock()

        def release() -> None:
            with lock:
                if not held[0]:
                    return
                held[0] = False
            self.stats._leave()
            self._slots.release()

        clock = current_clock()
        forget = clock.on_abandon(release) if clock is not None else None
        try:
            yield
        finally:
            if forget is not None:
                forget()
            release()

    def http_attempt(
        self,
        send: Callable[[], Response],
        *,
        model_call: bool,
        retry: bool,
        body: Mapping[str, Any] | None = None,
        tokens_used: Callable[[Response], tuple[int, int]] | None = None,
    ) -> Response:
        """Run one HTTP attempt of a provider's SDK under the policy: a slot of the concurrency bound, and for a
        model call (``model_call``) the rate limits and the ``calls`` count. ``retry`` says the SDK is retrying;
        ``body`` is the request JSON (its size estimates the input tokens it reserves); ``tokens_used`` reads
        (input, output) tokens from the response to settle the reservation. A retry's backoff sleep happens
        between attempts and holds no slot. Waiting for the slot and the limits does not count against the
        call's ``timeout_s``; an attempt whose call has no time left is not sent."""
        clock = current_clock()
        if retry:
            self.stats._add("retries")
        reservation: Reservation | None = None
        if model_call and self.limiter is not None:
            body = body if isinstance(body, Mapping) else {}
            with queued():
                reservation = self.limiter.acquire(estimate_input_tokens(body), int(
                    body.get("max_tokens") or body.get("max_completion_tokens") or 0))
        try:
            with self._slot():
                if clock is not None:
                    if clock.expired():  # the call's time ran out while this attempt waited: it is not sent
                        raise clock.timed_out()
                    clock.attempts += 1
                if model_call:
                    self.stats._add("calls")
                response = send()
        except BaseException:
            if reservation is not None and self.limiter is not None:
                self.limiter.refund(reservation)
            raise
        if reservation is not None and self.limiter is not None:
            try:
                used_in, used_out = tokens_used(response) if tokens_used is not None else (None, None)
                if used_in is None:
                    raise ValueError("no usage")
                self.limiter.settle(reservation, input_tokens=used_in, output_tokens=used_out or 0)
            except Exception:
                self.limiter.refund(reservation)
        return response
