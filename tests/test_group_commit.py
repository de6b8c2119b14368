"""The group commit that the records' writers share (harness/base/group_commit.py): writes that threads make at once
are done together, and each caller still gets its own write done, in its order, with its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.base.group_commit import GroupCommit


class Journal:
    """A store with transactions: a group is written whole or not at all, and fails when it holds a bad job."""

    def __init__(self, pause_s: float = 0.0) -> None:
        self.written: list[str] = []
        self.commits: list[int] = []  # the size of each group written
        self.pause_s = pause_s
        self.lock = threading.Lock()

    def commit(self, jobs: Sequence[str]) -> list[str]:
        time.sleep(self.pause_s)  # the time a write takes, in which other threads queue theirs
        if any(job.startswith("bad") for job in jobs):
            raise ValueError(f"cannot write {[job for job in jobs if job.startswith('bad')]}")
        with self.lock:
            self.written.extend(jobs)
            self.commits.append(len(jobs))
        return [job.upper() for job in jobs]


def test_threads_writing_at_once_share_writes_and_each_gets_its_own_result() -> None:
    journal = Journal(pause_s=0.005)
    write = GroupCommit(journal.commit)
    jobs = [f"job-{n:03d}" for n in range(320)]
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(write, jobs))
    assert results == [job.upper() for job in jobs]
    assert sorted(journal.written) == jobs  # every job once
    assert len(journal.commits) < len(jobs) / 4, journal.commits  # grouped: far fewer writes than jobs


def test_a_thread_s_writes_stay_in_the_order_it_made_them() -> None:
    journal = Journal(pause_s=0.001)
    write = GroupCommit(journal.commit)

    def writer(name: str) -> None:
        for n in range(30):
            write(f"{name}-{n:02d}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, [f"t{n}" for n in range(8)]))
    for name in (f"t{n}" for n in range(8)):
        mine = [job for job in journal.written if job.startswith(f"{name}-")]
        assert mine == [f"{name}-{n:02d}" for n in range(30)]


def test_a_bad_write_fails_its_own_caller_only() -> None:
    """The group holding it fails whole; each of its writes is made again alone, so the others are written once."""
    journal = Journal(pause_s=0.005)
    write = GroupCommit(journal.commit)
    jobs = [f"bad-{n}" if n % 10 == 3 else f"job-{n:03d}" for n in range(100)]

    def outcome(job: str) -> str:
        try:
            return write(job)
        except ValueError as exc:
            return f"error: {exc}"

    with ThreadPoolExecutor(16) as pool:
        outcomes = dict(zip(jobs, pool.map(outcome, jobs), strict=True))
    for job, said in outcomes.items():
        assert said == (f"error: cannot write ['{job}']" if job.startswith("bad") else job.upper())
    good = [job for job in jobs if not job.startswith("bad")]
    assert sorted(journal.written) == sorted(good)  # each good job exactly once


def test_writes_queued_behind_an_interrupted_writer_are_still_written() -> None:
    """Ctrl-C reaches the main thread while it writes a group: what it had taken from the queue and not written goes
    back for the next writer, so no caller returns without its write."""
    journal = Journal()
    first_group = threading.Event()
    release = threading.Event()

    def commit(jobs: Sequence[str]) -> list[str]:
        if "interrupted" in jobs:
            first_group.set()
            release.wait(5)  # the others queue meanwhile
            raise KeyboardInterrupt
        return journal.commit(jobs)

    write = GroupCommit(commit)
    with ThreadPoolExecutor(4) as pool:
        interrupted = pool.submit(write, "interrupted")
        assert first_group.wait(5)
        others = [pool.submit(write, f"job-{n}") for n in range(6)]
        time.sleep(0.05)
        release.set()
        with pytest.raises(KeyboardInterrupt):
            interrupted.result(timeout=5)
        assert [other.result(timeout=5) for other in others] == [f"JOB-{n}" for n in range(6)]
    assert sorted(journal.written) == [f"job-{n}" for n in range(6)]
