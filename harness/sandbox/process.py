"""One process run to its end: its output kept to a bounded head and tail, a deadline, cancellation, a watch on
the disk it may write, and the CPU time of all its processes read from outside with ``wait4``.

Everything happens in the calling thread around one selector, but ``wait4``, which blocks in a small thread of
its own and wakes the selector when the process ends, so the wall time is the exit's, not a poll's.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CHUNK = 65536
POLL_S = 0.1           # how often the deadline, a cancel and the disk are looked at while nothing happens
DRAIN_S = 1.0          # after the exit, how long output still held open by a leftover is read
DISK_EVERY_S = 0.5
SCAN_AT_MOST = 200_000  # files looked at when the disk shrank: more than this many new ones is over any limit

_ACTIVE: dict[int, Callable[[], None]] = {}
_ACTIVE_LOCK = threading.Lock()


class Kept:
    """The first and the last ``keep`` bytes of a stream; what lies between is counted, not held."""

    def __init__(self, keep: int):
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.keep
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def value(self) -> bytes:
        if not self.dropped:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {self.dropped:,} bytes dropped ...]\n".encode() + bytes(self.tail)


@dataclass
class DiskWatch:
    """Stops a run whose writable folders grow past ``limit_bytes``.

    Cheap while nothing happens: the free space of each folder's file system (``statvfs``) every half second.
    Only when that has shrunk by more than the limit are the folders walked, counting what changed since the
    run started, so other programs writing to the same disk do not stop the run.
    """

    folders: Sequence[Path]
    limit_bytes: int
    started: float = field(default_factory=time.time)
    _free: dict[int, int] = field(default_factory=dict)
    _next: float = 0.0

    def __post_init__(self) -> None:
        for folder in self.folders:
            device, free = _free_space(folder)
            if device is not None:
                self._free.setdefault(device, free)

    def over(self, *, now: float | None = None, force: bool = False) -> bool:
        now = time.monotonic() if now is None else now
        if not force and now < self._next:
            return False
        self._next = now + DISK_EVERY_S
        shrunk = False
        for folder in self.folders:
            device, free = _free_space(folder)
            if device is not None and self._free.get(device, free) - free > self.limit_bytes:
                shrunk = True
        return shrunk and self.grown() > self.limit_bytes

    def grown(self) -> int:
        """Bytes in files the run wrote (changed since it started) under the folders."""
        total, seen = 0, 0
        stack = [str(f) for f in self.folders]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > SCAN_AT_MOST:
                    return self.limit_bytes + 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif info.st_mtime >= self.started - 1:
                    total += info.st_blocks * 512
        return total


def _free_space(folder: Path) -> tuple[int | None, int]:
    try:
        stat = os.statvfs(folder)
        return os.stat(folder).st_dev, stat.f_bavail * stat.f_frsize
    except OSError:
        return None, 0


@dataclass
class Ended:
    """How one process run ended."""

    status: int
    usage: object           # the resource usage of the process and every descendant it reaped (wait4)
    wall_ms: float
    output: dict[str, Kept]
    timed_out: bool = False
    cancelled: bool = False
    disk: bool = False


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None, timeout_s: float,
                keep_bytes: int, merge_stderr: bool = False, pipes: dict[str, tuple[int, int]] | None = None,
                cancel: threading.Event | None = None, disk: DiskWatch | None = None,
                kill_also: Callable[[], None] | None = None) -> Ended:
    """Run ``argv`` in a session of its own and wait for it. ``pipes`` are named pipes (read end, write end):
    the process inherits each write end, and what it writes there is kept as the stream of that name. OSError
    when it cannot start (the pipes are closed then)."""
    pipes = pipes or {}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None
                                else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                pass_fds=tuple(w for _, w in pipes.values()), start_new_session=True)
    except OSError:
        for read_end, _ in pipes.values():
            os.close(read_end)
        raise
    finally:
        for _, write_end in pipes.values():
            os.close(write_end)
    reaped = threading.Event()
    lock = threading.Lock()

    def kill() -> None:
        with lock:
            if not reaped.is_set():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if kill_also is not None:
            kill_also()

    with _ACTIVE_LOCK:
        _ACTIVE[proc.pid] = kill
    try:
        return _supervise(proc, started, stdin, timeout_s, keep_bytes, pipes, cancel, disk, kill, reaped, lock)
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.pop(proc.pid, None)


def _supervise(proc: subprocess.Popen[bytes], started: float, stdin: bytes | None, timeout_s: float,
               keep_bytes: int, pipes: dict[str, tuple[int, int]], cancel: threading.Event | None,
               disk: DiskWatch | None, kill: Callable[[], None], reaped: threading.Event,
               lock: threading.Lock) -> Ended:
    ended: dict[str, object] = {}
    wake_read, wake_write = os.pipe()

    def wait() -> None:
        while True:
            try:
                _, status, usage = os.wait4(proc.pid, 0)
                break
            except InterruptedError:
                continue
        with lock:
            reaped.set()
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: nobody may signal a reused pid
        ended.update(status=status, usage=usage, at=time.monotonic())
        os.write(wake_write, b"x")

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    selector = selectors.DefaultSelector()
    kept: dict[str, Kept] = {}
    names: dict[int, str] = {}
    for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        if stream is not None:
            names[stream.fileno()] = name
    for name, (read_end, _) in pipes.items():
        names[read_end] = name
    for fd, name in names.items():
        kept[name] = Kept(keep_bytes)
        selector.register(fd, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
    if proc.stdin is not None and stdin_fd is not None:
        os.set_blocking(stdin_fd, False)
        if pending:
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    deadline = started + timeout_s
    timed_out = cancelled = disk_hit = False
    drain_until: float | None = None
    try:
        while True:
            now = time.monotonic()
            open_streams = [fd for fd in names if _registered(selector, fd)]
            if drain_until is not None and (not open_streams or now >= drain_until):
                break
            wait_s = POLL_S if drain_until is None else drain_until - now
            if drain_until is None:
                wait_s = min(wait_s, max(deadline - now, 0.0))
            for key, _ in selector.select(timeout=max(wait_s, 0.0)):
                fd = key.fd
                if fd == wake_read:
                    selector.unregister(fd)
                    drain_until = time.monotonic() + DRAIN_S
                elif fd == stdin_fd:
                    pending = _feed(proc, selector, pending)
                else:
                    data = _read(fd)
                    if data:
                        kept[names[fd]].add(data)
                    else:
                        selector.unregister(fd)
            if drain_until is not None:
                continue
            now = time.monotonic()
            if not (timed_out or cancelled or disk_hit):
                if now >= deadline:
                    timed_out = True
                elif cancel is not None and cancel.is_set():
                    cancelled = True
                elif disk is not None and disk.over(now=now):
                    disk_hit = True
                if timed_out or cancelled or disk_hit:
                    kill()
    except BaseException:
        kill()
        waiter.join()
        raise
    finally:
        for key in list(selector.get_map().values()):
            selector.unregister(key.fd)
        selector.close()
        for fd in (wake_read, wake_write):
            os.close(fd)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        for read_end, _ in pipes.values():
            try:
                os.close(read_end)
            except OSError:
                pass
    waiter.join()
    if disk is not None and not disk_hit and disk.over(force=True):
        disk_hit = True
    return Ended(status=int(ended["status"]), usage=ended["usage"],  # type: ignore[call-overload]
                 wall_ms=(float(ended["at"]) - started) * 1000.0,  # type: ignore[arg-type]
                 output=kept, timed_out=timed_out, cancelled=cancelled, disk=disk_hit)


def _registered(selector: selectors.BaseSelector, fd: int) -> bool:
    try:
        selector.get_key(fd)
        return True
    except KeyError:
        return False


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def _feed(proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, pending: memoryview) -> memoryview:
    assert proc.stdin is not None
    fd = proc.stdin.fileno()
    try:
        written = os.write(fd, pending[:CHUNK])
        pending = pending[written:]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        pending = pending[:0]  # the command does not read its input: not an error of ours
    if not pending:
        selector.unregister(fd)
        try:
            proc.stdin.close()
        except OSError:
            pass
    return pending


def kill_active() -> None:
    """Stop every run still going (Ctrl-C: they run in sessions of their own and miss SIGINT)."""
    with _ACTIVE_LOCK:
        kills = list(_ACTIVE.values())
    for kill in kills:
        kill()
