"""The one file lock (harness.base.fileio.file_lock): exclusive, shared, a try that says the lock is taken, held
across processes and let go when its holder dies."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

from harness.base.fileio import file_lock

_HOLDER = """
import sys, time
from pathlib import Path
from harness.base.fileio import file_lock
with file_lock(Path(sys.argv[1]), shared=sys.argv[2] == "shared"):
    print("held", flush=True)
    time.sleep(600)
"""


def _taken(path: Path, *, shared: bool = False) -> bool:
    with file_lock(path, shared=shared, wait=False) as held:
        return not held


def test_an_exclusive_lock_refuses_every_other_holder_until_it_is_let_go(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / ".lock"  # its folder is made
    with file_lock(path) as held:
        assert held is True
        assert _taken(path) and _taken(path, shared=True)
    assert not _taken(path) and not _taken(path, shared=True)


def test_shared_holders_coexist_and_keep_an_exclusive_one_out(tmp_path: Path) -> None:
    path = tmp_path / ".alive.lock"
    with file_lock(path, shared=True), file_lock(path, shared=True, wait=False) as second:
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
    assert stack.enter_context(file_lock(path, shared=True)) is True
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
