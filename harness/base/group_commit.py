"""A group commit: writes that many threads of a process make at once, done together by whichever of them has the
turn.

Thirty-two item threads finishing attempts at the same moment each want a write transaction, or a lock on the cycle's
run-log. One at a time, each write is a handful of system calls (a BEGIN and a COMMIT, SQLite's file locks and the
WAL's writes; a lock file, an open, a seek and a write), and at each of them the GIL goes to another thread and has
to be won back. Grouped, the threads that queued while one wrote are written by the next in one go: a few writes
instead of thirty-two, the same as databases do with the commits of many clients (benchmarks/README.md, "The
harness against the bare SDK").

A caller still returns only once its own write is done, in the order it made its writes, and gets its own outcome:
when a group fails, each of its writes is made again alone, so one caller's error is never another's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


class _Queued:
    """A caller's job in the queue. ``wake`` is taken when it is queued and let go once, when the job is done or
    when its caller is to write the next group (the leader)."""

    __slots__ = ("job", "done", "result", "error", "wake")

    def __init__(self, job: Any) -> None:
        self.job = job
        self.done = False
        self.result: Any = None
        self.error: Exception | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit(Generic[Job, Result]):
    """``commit(jobs)`` does a group of jobs in one write and returns their results in order, or raises when any of
    them fails (then nothing of the group may stay written: one transaction, or one append). Calling the instance
    with a job returns that job's result once it is written, or raises its error.

    The caller at the head of the queue writes everything queued by then (the leader, as in LevelDB's writer
    queue); the others sleep until their job is done, each woken once. The jobs queued meanwhile wait for the
    leader's write to end and make the next group, whose first caller is woken to write it."""

    def __init__(self, commit: Callable[[Sequence[Job]], Sequence[Result]]) -> None:
        self._commit = commit
        self._queue: list[_Queued] = []  # the jobs not yet done, oldest first; the first one's caller writes
        self._queue_lock = threading.Lock()

    def __call__(self, job: Job) -> Result:
        queued = _Queued(job)
        with self._queue_lock:
            self._queue.append(queued)
            leads = len(self._queue) == 1
        if not leads:
            queued.wake.acquire()  # its job done by a leader, or its turn to lead
        if not queued.done:
            self._lead(queued)
        if queued.error is not None:
            raise queued.error
        return queued.result

    def _lead(self, leader: _Queued) -> None:
        """Write every job queued now, ``leader``'s first; then wake their callers and the next leader."""
        with self._queue_lock:
            group = list(self._queue)
        try:
            self._write(group)
        finally:  # Ctrl-C on the main thread mid-write too: the jobs it did not finish stay queued for the next leader
            with self._queue_lock:
                finished = [queued for queued in group if queued.done and queued is not leader]
                self._queue = [queued for queued in self._queue if not queued.done and queued is not leader]
                following = self._queue[0] if self._queue else None
            for queued in finished:
                queued.wake.release()
            if following is not None:
                following.wake.release()

    def _write(self, group: list[_Queued]) -> None:
        """Write ``group`` in one go, or each of its jobs alone when that fails, each marked done with its result
        or its error."""
        if len(group) > 1:
            try:
                results = self._commit([queued.job for queued in group])
            except Exception:  # noqa: BLE001, S110 - one job's error is its caller's alone: each is tried by itself
                pass
            else:
                for queued, result in zip(group, results, strict=True):
                    queued.result, queued.done = result, True
                return
        for queued in group:
            try:
                queued.result = self._commit([queued.job])[0]
            except Exception as exc:  # noqa: BLE001 - raised by the caller whose job it is
                queued.error = exc
            queued.done = True
