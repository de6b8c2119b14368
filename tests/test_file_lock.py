"""The file locks (harness.base.fileio): ``file_lock`` (exclusive) and ``shared_lock`` (readers and a writer), a try
that says the lock is taken, held across processes and let go when its holder dies; filelock's, on every system."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

from harness.base.fileio import file_lock, shared_lock

_HOLDER = """
import sys, time
from pathlib import Path
from harness.base.fileio import file_lock, shared_lock
kind = sys.argv[2]
with (file_lock(Path(sys.argv[1])) if kind == "file" else shared_lock(Path(sys.argv[1]), shared=kind == "shared")):
    print("held", flush=True)
    time.sleep(600)
"""


def _taken(path: Path, *, shared: bool = False) -> bool:
    """Whether a readers-writer lock (:func:`shared_lock`) on ``path`` refuses a holder of this kind now."""
    with shared_lock(path, shared=shared, wait=False) as held:
        return not held


def _file_taken(path: Path) -> bool:
    with file_lock(path, wait=False) as held:
        return not held


def test_an_exclusive_lock_refuses_every_other_holder_until_it_is_let_go(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / ".lock"  # its folder is made
    with file_lock(path) as held:
        assert held is True
        assert _file_taken(path)
    assert not _file_taken(path)
    shared = tmp_path / "other" / ".alive.lock"
    with shared_lock(shared, shared=False) as held:
        assert held is True
        assert _taken(shared) and _taken(shared, shared=True)
    assert not _taken(shared) and not _taken(shared, shared=True)


def test_shared_holders_coexist_and_keep_an_exclusive_one_out(tmp_path: Path) -> None:
    path = tmp_path / ".alive.lock"
    with shared_lock(path), shared_lock(path, wait=False) as second:
        assert second is True
        assert _taken(path)
    assert not _taken(path)


def test_a_waiting_lock_is_taken_once_the_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    order: list[str] = []

    def waiter() -> None:
        with file_lock(path) as held:
            order.append(f"waiter {held}")

    with file_lock(path):
        thread = threading.Thread(target=waiter)
        thread.start()
        order.append("holder done")
    thread.join(30)
    assert order == ["holder done", "waiter True"]


def test_a_lock_held_past_one_block_goes_with_its_exit_stack(tmp_path: Path) -> None:
    path = tmp_path / ".alive.lock"
    stack = contextlib.ExitStack()
    assert stack.enter_context(shared_lock(path)) is True
    assert _taken(path)
    stack.close()
    assert not _taken(path)


def test_another_process_sees_the_lock_and_a_killed_holder_leaves_it_free(tmp_path: Path) -> None:
    path = tmp_path / ".alive.lock"
    for kind in ("shared", "exclusive"):
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), kind], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            assert _taken(path)
            assert _taken(path, shared=True) is (kind == "exclusive")
        finally:
            holder.kill()  # SIGKILL: no finally of the holder runs; the kernel lets the lock go
            holder.wait(30)
            if holder.stdout is not None:
                holder.stdout.close()
        assert not _taken(path)


def test_an_exclusive_file_lock_is_seen_by_another_process_and_a_killed_holder_leaves_it_free(tmp_path: Path) -> None:
    path = tmp_path / ".run-log.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "file"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert _file_taken(path)
    finally:
        holder.kill()
        holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()
    assert not _file_taken(path)


def test_a_shared_lock_taken_on_one_thread_is_let_go_on_another(tmp_path: Path) -> None:
    """A session's store may take its cycle's lock on a worker thread and close on the main one."""
    path = tmp_path / ".alive.lock"
    stack = contextlib.ExitStack()
    taken = threading.Thread(target=lambda: stack.enter_context(shared_lock(path)))
    taken.start()
    taken.join(30)
    assert _taken(path)
    stack.close()
    assert not _taken(path)
