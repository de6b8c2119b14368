"""Run the cases of a session concurrently while pytest reports them one by one, in order.

Before pytest's own run loop starts, every case is submitted to a bounded thread pool; each item's
``runtest`` then waits for its own result. Model calls are network-bound and the SDK is
thread-safe, so threads are enough; the model layer's semaphore bounds the calls in flight.
``-x``, ``--maxfail``, Ctrl-C and the cost cap set one stop flag: queued cases are cancelled and
running ones stop before their next step.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

from harness.base.stop import StopFlag

T = TypeVar("T")

# While cases run, a thread keeps the GIL up to 20 ms instead of 5 ms before it is made to hand it over.
# The case threads are I/O-bound and give the GIL up at their next socket, file or SQLite call anyway;
# a forced hand-over every 5 ms only adds context switches (benchmarks/: 500 cases at concurrency 32
# ran about 5% faster). It is restored when the cases are done.
CASE_SWITCH_INTERVAL_S = 0.02

# While items run, the cyclic garbage collector looks at its youngest objects every 20,000 new ones instead of every
# 700 (Python's thresholds are 700, 10, 10), and at the older ones twice as seldom after that. A session keeps what
# every item leaves (pytest's reports, the results its summary counts), and each full collection walks all of it
# again, more each time: at 5,000 items, 16 full collections took 1.5 s of a run's 43 s of CPU and the younger
# generations 1 s more, a cost a case that grows with the session (docs/model-calls.md). Reference counting frees
# almost everything a case makes the moment it is done with; only reference cycles wait for the collector.
# Restored when the items are done.
CASE_GC_THRESHOLD = (20_000, 20, 20)

# With --harness-batch, the most items at once, each a thread waiting on a Message Batch (about 90 KB an item with its
# work in flight; 5,000 fill one batch at the batcher's default size). Past it, an item starts when another ends, so
# a session of more items waits for its batches in rounds; --harness-batch-submit submits every item's requests
# without waiting, whatever their number, and the next run takes the answers as fast as they stream.
BATCH_WORKERS = 5_000


def quieter_gc() -> Callable[[], None]:
    """Raise the garbage collector's thresholds to :data:`CASE_GC_THRESHOLD` for the items' run; return the function
    that puts the process's own back. A threshold the process set higher stays, and one it set to 0 (that generation
    never collected automatically) stays 0."""
    previous = gc.get_threshold()
    gc.set_threshold(*(mine if theirs and theirs < mine else theirs
                       for theirs, mine in zip(previous, CASE_GC_THRESHOLD, strict=False)))
    return lambda: gc.set_threshold(*previous)


class CaseScheduler:
    def __init__(self, max_workers: int, stop: StopFlag):
        self.max_workers = max_workers
        self.stop = stop
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future] = {}  # the items pytest has not taken the result of yet
        self._done = 0
        self.total = 0
        self._lock = threading.Lock()
        self._switch_interval: float | None = None

    def submit_all(self, jobs: list[tuple[str, Callable[[], T]]]) -> None:
        """Submit ``(key, job)`` pairs in order; pytest will ask for them in the same order."""
        self._started = time.monotonic()
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(max(self._switch_interval, CASE_SWITCH_INTERVAL_S))
        self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="harness-case")
        self.total = len(jobs)
        for key, job in jobs:
            self._futures[key] = self._pool.submit(self._guarded, job)

    def _guarded(self, job: Callable[[], T]) -> T:
        try:
            self.stop.check()
            return job()
        finally:
            with self._lock:
                self._done += 1

    def has(self, key: str) -> bool:
        return key in self._futures

    def wait(self, key: str, on_tick: Callable[[], None] | None = None, tick_s: float = 1.0) -> T:
        """Block until ``key`` is done, calling ``on_tick`` from this (the main) thread while waiting. Its future is
        let go once its result is taken: a session of many items does not keep every item's loop result (its
        attempts, evaluations and records) in memory to the end, nor have the garbage collector walk them."""
        future = self._futures[key]
        while True:
            try:
                return future.result(timeout=tick_s if on_tick else None)
            except TimeoutError:
                on_tick()
            finally:
                if future.done():  # its result or its error taken; one still running (Ctrl-C) stays for shutdown()
                    self._futures.pop(key, None)

    @property
    def done(self) -> int:
        return self._done

    def seconds_left(self) -> float | None:
        """About how long the items not done yet will take, at the pace of those done; None before one is."""
        done, started = self._done, getattr(self, "_started", None)
        if not done or started is None or done >= self.total:
            return None
        return (time.monotonic() - started) / done * (self.total - done)

    def shutdown(self, reason: str) -> int:
        """Stop: cancel what has not started and wait for the running cases, which stop before their
        next step, so that their records are finished before the session ends.

        A second Ctrl-C ends the wait; the process exit then waits for the threads. Returns the
        number of cases still running when the wait ended (0 normally).
        """
        self.stop.set(reason)
        if self._pool is None:
            return 0
        self._pool.shutdown(wait=False, cancel_futures=True)
        waiting = list(self._futures.values())  # those whose results pytest took are done
        started = [f for f in waiting if not f.cancelled()]  # wait() never returns on cancelled ones
        try:
            wait(started)
        except KeyboardInterrupt:
            return sum(not f.done() for f in waiting)
        finally:
            if self._switch_interval is not None:
                sys.setswitchinterval(self._switch_interval)
                self._switch_interval = None
        return 0
