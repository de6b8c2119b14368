"""The deadline around every model call: ``timeout_s`` bounds a whole call, whatever its provider does.

A provider's SDK bounds each read, not a call: a server that trickles its answer a byte at a time restarts
the read timeout with every byte, a ``retry-after`` can hold a retry for a minute, and a plugin provider may
block for good. So :func:`call_within` runs the provider's ``send`` on another thread and waits for it at
most ``timeout_s``; then the call ends as a :class:`~harness.base.errors.ModelCallError` with exit code 81
(timeout), whatever that thread is still doing.

A provider whose every wait is bounded by the call's clock needs no other thread: the built-in SDK providers
cap each HTTP attempt's timeouts and cut off a trickled answer (:func:`http_event_hooks`) and cap the SDK's wait
before a retry (:func:`cap_retry_waits`), so their calls run on the caller's thread (:func:`call_inline`) and end
as the timeout error just the same. That spares a thread and two hand-overs of the GIL a call (a run at
concurrency 32 has 32 threads fewer); the CPU it saves is within a shared machine's noise (benchmarks/README.md,
"The harness against the bare SDK").

The clock (:class:`CallClock`) counts the call's time at the provider: its attempts and the backoff between
them. The time it waits for the harness's own bounds (a slot of the concurrency bound, the rate limits) is
the harness's queue, not the model's slowness, and is not counted (:meth:`CallClock.waiting`). The thread
that is left behind stops as soon as it can: the policy starts no attempt after the deadline, each attempt's
SDK timeout is what is left of the call's, and an answer still arriving is cut off between two reads
(:func:`http_event_hooks`).
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from harness.base.errors import ExitCode, ModelCallError

Result = TypeVar("Result")

# How often a caller whose call waits in the harness's queue looks at the clock again.
_QUEUE_POLL_S = 0.05

_current: contextvars.ContextVar[CallClock | None] = contextvars.ContextVar("harness_model_call", default=None)


class CallClock:
    """How long one model call has run at its provider, leaving out the time it waited in the harness's queue."""

    def __init__(self, timeout_s: float, model: str) -> None:
        self.timeout_s = float(timeout_s)
        self.model = model
        self.attempts = 0  # HTTP attempts started (for a provider that goes through the policy)
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._queued_s = 0.0
        self._queued_since: float | None = None
        self._queue_depth = 0
        self.abandoned = False  # the caller gave up at the deadline: the call's thread is on its own
        self._on_abandon: list[Callable[[], None]] = []

    def elapsed(self) -> float:
        with self._lock:
            now = time.monotonic()
            queued = self._queued_s + (now - self._queued_since if self._queued_since is not None else 0.0)
            return now - self._started - queued

    def remaining(self) -> float:
        return self.timeout_s - self.elapsed()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def on_abandon(self, release: Callable[[], None]) -> Callable[[], None]:
        """Run ``release`` when the caller gives up on the call (or now, if it has); returns the undo."""
        with self._lock:
            if not self.abandoned:
                self._on_abandon.append(release)
                return lambda: self._forget(release)
        release()
        return lambda: None

    def _forget(self, release: Callable[[], None]) -> None:
        with self._lock:
            if release in self._on_abandon:
                self._on_abandon.remove(release)

    def abandon(self) -> None:
        """The caller gave up: whatever the call holds that others wait for (a concurrency slot) is let go."""
        with self._lock:
            self.abandoned = True
            releases, self._on_abandon = self._on_abandon, []
        for release in releases:
            release()

    def timed_out(self) -> ModelCallError:
        """The error the call ends with once its time is up."""
        return timeout_error(self.model, self.timeout_s, self.attempts)

    @property
    def queued(self) -> bool:
        with self._lock:
            return self._queued_since is not None

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A stretch the call spends in the harness's queue (a concurrency slot, the rate limits): not counted."""
        with self._lock:
            self._queue_depth += 1
            if self._queue_depth == 1:
                self._queued_since = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._queue_depth -= 1
                if self._queue_depth == 0 and self._queued_since is not None:
                    self._queued_s += time.monotonic() - self._queued_since
                    self._queued_since = None


def current_clock() -> CallClock | None:
    """The clock of the model call this thread is making, or None outside one."""
    return _current.get()


@contextlib.contextmanager
def queued() -> Iterator[None]:
    """Wrap a wait for the harness's own bounds, so that it does not count against the call's ``timeout_s``."""
    clock = _current.get()
    if clock is None:
        yield
        return
    with clock.waiting():
        yield


def timeout_error(model: str, timeout_s: float, attempts: int = 0) -> ModelCallError:
    """The one line of a call that ran out of time: which model and how long."""
    tried = f"; {attempts} attempts" if attempts > 1 else ""
    return ModelCallError(f"model call to {model} timed out after {timeout_s:g}s (timeout_s bounds the whole call, "
                          f"retries included{tried}); raise timeout_s or retry later", ExitCode.TIMEOUT)


def call_timed_out(model: str, timeout_s: float) -> ModelCallError:
    """The timeout error of the call this thread is making (an SDK's own timeout fired), with its attempts."""
    clock = _current.get()
    return clock.timed_out() if clock is not None else timeout_error(model, timeout_s)


def call_within(timeout_s: float, send: Callable[[], Result], *, model: str,
                late: Callable[[Result], None] | None = None) -> Result:
    """``send()`` on another thread, waited for at most ``timeout_s`` of call time; then a timeout error.

    ``send`` runs in a copy of the caller's context (its event span included) with a fresh :class:`CallClock`.
    What it raises is raised here. A result that arrives after the caller gave up goes to ``late`` (the
    policy counts what the call cost: it was billed all the same).
    """
    clock = CallClock(timeout_s, model)
    context = contextvars.copy_context()
    context.run(_current.set, clock)
    done = threading.Event()
    outcome: dict[str, Any] = {}
    lock = threading.Lock()

    def work() -> None:
        try:
            outcome["value"] = context.run(send)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller whole
            outcome["error"] = exc
        finally:
            with lock:
                done.set()
                gave_up = clock.abandoned
            if gave_up and late is not None and "value" in outcome:
                try:
                    late(outcome["value"])
                except Exception:  # noqa: BLE001, S110 - accounting for a call nobody waits for: never a thread's crash
                    pass

    _THREADS.run(work)
    while not done.wait(max(clock.remaining(), _QUEUE_POLL_S if clock.queued else 0.0)):
        if clock.expired():
            with lock:
                gave_up = not done.is_set()
                if gave_up:
                    clock.abandoned = True
            if gave_up:
                clock.abandon()
                raise clock.timed_out()
            break
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def call_inline(timeout_s: float, send: Callable[[], Result], *, model: str) -> Result:
    """``send()`` on the caller's thread, with a fresh :class:`CallClock` of ``timeout_s``: for a provider that keeps
    every wait of a call within its clock itself (``Provider.bounds_its_calls``), which ends the call as the clock's
    timeout error."""
    token = _current.set(CallClock(timeout_s, model))
    try:
        return send()
    finally:
        _current.reset(token)


def cap_retry_waits(sdk_client: Any) -> bool:
    """Cap the wait before each retry of ``sdk_client`` (an anthropic or openai SDK client) at what is left of the
    call, so that a ``retry-after`` longer than the call may take ends the call at its deadline: the next attempt
    finds no time left and is not sent (:meth:`~harness.llm.policy.CallPolicy.http_attempt`).

    Both SDKs compute the wait in ``_calculate_retry_timeout`` and sleep it out; returns False, changing nothing,
    for a client that has no such method (another SDK, or a release that renamed it): its calls then run on a
    thread of their own (:func:`call_within`), bounded as before."""
    compute = getattr(sdk_client, "_calculate_retry_timeout", None)
    if not callable(compute):
        return False

    def within_the_call(*args: Any, **kwargs: Any) -> float:
        wait = compute(*args, **kwargs)
        clock = _current.get()
        return wait if clock is None else max(0.0, min(float(wait), clock.remaining()))

    sdk_client._calculate_retry_timeout = within_the_call
    return True


class _Threads:
    """The threads calls run on, reused: a new thread per call cost about 0.3 ms of CPU per call (the 0 ms model
    path, 1.0 ms a call without it). A call whose caller gave up keeps its thread until it ends; the next call
    gets another, so nothing waits behind it. Threads are daemons (one blocked for good must not hold up the
    interpreter's exit) and end after a minute without work."""

    IDLE_S = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
            worker.start()
        worker.inbox.put(job)

    def _done(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def _retire(self, worker: _Worker) -> bool:
        """Whether an idle worker may end: not when a caller just took it (its job is on the way)."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


class _Worker(threading.Thread):
    def __init__(self, pool: _Threads) -> None:
        super().__init__(name="harness-model-call", daemon=True)
        self.pool = pool
        self.inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            try:
                job = self.inbox.get(timeout=self.pool.IDLE_S)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                job = self.inbox.get()
            job()
            self.pool._done(self)


_THREADS = _Threads()


def http_event_hooks(http: Any) -> dict[str, list[Callable[[Any], None]]]:
    """httpx event hooks (``http`` is the SDK's httpx module) that keep an SDK's HTTP attempts inside the call's
    deadline: each attempt's timeouts are at most what is left of the call, and an answer that is still
    arriving when the call's time is up (a server trickling it a byte at a time) is cut off between two reads
    with the SDK's own read timeout."""

    class DeadlineStream(http.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, clock: CallClock, request: Any) -> None:
            self.inner, self.clock, self.request = inner, clock, request

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                if self.clock.expired():
                    raise http.ReadTimeout("the model call's timeout_s ran out while its answer arrived",
                                           request=self.request)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    def cap_timeouts(request: Any) -> None:
        clock = _current.get()
        if clock is None:
            return
        left = max(clock.remaining(), 0.001)
        timeouts = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {name: left if value is None else min(value, left)
                                         for name, value in {"connect": None, "read": None, "write": None,
                                                             "pool": None, **timeouts}.items()}

    def bound_body(response: Any) -> None:
        clock = _current.get()
        if clock is not None:
            response.stream = DeadlineStream(response.stream, clock, response.request)

    return {"request": [cap_timeouts], "response": [bound_body]}
