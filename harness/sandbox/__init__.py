"""Confined commands: code a user did not write runs here, never straight on the machine.

The confinement is built from bubblewrap (``bwrap``, Debian package ``bubblewrap``), which puts the
command in new Linux namespaces:

* no network (a loopback of its own), unless the caller allows it;
* the whole system read-only, the working folder writable, ``/tmp`` and ``$HOME`` private and empty;
* folders the caller hides (the user's checkout, every home) out of sight, except what is bound back:
  the interpreter, the harness's own code, read-only paths the configuration declares;
* files laid read-only over paths of the working folder (a tournament's sealed benchmark, taken from
  the manifest, not from the candidate's tree);
* an environment the caller builds from an allowlist (``harness.redaction.child_environment``);
* CPU, memory and time limits; every process the command starts dies with it.

The first process inside is the harness's own runner (``runner.py``): it sets the limits, runs the
command, and reaps what the command leaves behind, so the CPU time read from outside with ``wait4``
(``Finished.cpu_ms``) covers every process and no code inside can patch that clock.

Where no sandbox can be made (no ``bwrap``, or user namespaces are disabled), :func:`sandbox` says why,
and callers decide: the tournament refuses to run commands from models or ideas without an explicit
opt-in. ``HARNESS_BWRAP`` names the bwrap binary to use (tests point it at a missing file).
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import harness

RUNNER = Path(__file__).with_name("runner.py")
RUNNER_INSIDE = "/tmp/.harness/runner.py"
BWRAP_ENV = "HARNESS_BWRAP"
_ACTIVE: set[subprocess.Popen[bytes]] = set()
_ACTIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Wall-clock time (the run is killed past it), CPU seconds per process and address space.

    ``cpu_s`` is off by default because an armed CPU limit makes the kernel's per-process CPU clock
    tick-grained (``time.process_time()`` then reads 0 or 4 ms): benchmarks that time themselves need
    it off, and their wall-clock limit bounds their CPU anyway.
    """

    timeout_s: float
    cpu_s: float | None = None
    memory_mb: int = 8192


@dataclass(frozen=True)
class Confinement:
    """What a confined command may see and do."""

    workdir: Path                                  # writable, seen at its own path
    env: Mapping[str, str]                         # the whole environment (build it from the allowlist)
    cwd: Path | None = None                        # default: workdir
    hidden: tuple[Path, ...] = ()                  # folders replaced by empty ones (the user's checkout)
    read_only: tuple[Path, ...] = ()               # bound back read-only, even inside hidden folders
    writable: tuple[Path, ...] = ()                # bound back writable
    overlays: tuple[tuple[Path, str], ...] = ()    # (file outside, path inside): laid over, read-only
    network: bool = False


@dataclass
class Finished:
    """One confined run. ``exit_code`` is None when the run was killed for its time limit."""

    exit_code: int | None
    stdout: str
    stderr: str
    wall_ms: float
    cpu_ms: float           # user + system time of every process of the run, measured from outside
    max_rss_kb: int
    timed_out: bool = False
    result: str | None = None   # what the command wrote to its result channel (HARNESS_RESULT_FD)
    confined: bool = True


@dataclass(frozen=True)
class Sandbox:
    """The machine's sandbox: ``available`` or not, with the reason."""

    bwrap: str | None
    available: bool
    reason: str = ""
    version: str = ""

    def describe(self) -> str:
        if self.available:
            return (f"sandbox: {self.version or 'bubblewrap'} (no network, system read-only, worktree writable, "
                    "checkout and home hidden, allowlisted environment, memory and time limits)")
        return f"sandbox: unavailable ({self.reason})"

    def run(self, argv: list[str], confinement: Confinement, limits: Limits, *, stdin: str | None = None,
            result_channel: bool = False, cancel: threading.Event | None = None,
            merge_stderr: bool = False) -> Finished:
        """Run ``argv`` confined (or, when no sandbox can be made, under the runner alone) and wait for it.

        ``result_channel`` opens a pipe the command finds as ``HARNESS_RESULT_FD`` (and
        ``HARNESS_RESULT_FILE``, ``/dev/fd/N``); what it writes there comes back as ``Finished.result``.
        ``cancel`` set while it runs kills it and raises KeyboardInterrupt.
        """
        read_end = write_end = None
        env = dict(confinement.env)
        pass_fds: tuple[int, ...] = ()
        if result_channel:
            read_end, write_end = os.pipe()
            env["HARNESS_RESULT_FD"] = str(write_end)
            env["HARNESS_RESULT_FILE"] = f"/dev/fd/{write_end}"
            pass_fds = (write_end,)
        cpu = math.ceil(limits.cpu_s) if limits.cpu_s else 0
        inner = [sys.executable, "-I", "-S", RUNNER_INSIDE if self.available else str(RUNNER),
                 str(cpu), str(limits.memory_mb), "--", *argv]
        full = (self._bwrap_argv(confinement) + inner) if self.available else inner
        cwd = confinement.cwd or confinement.workdir
        started = time.monotonic()
        try:
            proc = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None
                                    else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                    pass_fds=pass_fds, start_new_session=True)
        except OSError as exc:
            for fd in (read_end, write_end):
                if fd is not None:
                    os.close(fd)
            return Finished(126, "", f"cannot start {full[0]!r}: {exc.strerror or exc}", 0.0, 0.0, 0,
                            confined=self.available)
        if write_end is not None:
            os.close(write_end)
        with _ACTIVE_LOCK:
            _ACTIVE.add(proc)
        collected: dict[str, bytes] = {}
        readers = [_reader(proc.stdout, collected, "stdout")]
        if proc.stderr is not None:
            readers.append(_reader(proc.stderr, collected, "stderr"))
        if read_end is not None:
            readers.append(_reader(os.fdopen(read_end, "rb"), collected, "result"))
        for thread in readers:
            thread.start()
        timed_out = threading.Event()
        threading.Thread(target=_watch, args=(proc, limits.timeout_s, timed_out, cancel), daemon=True).start()
        if stdin is not None:
            _feed(proc, stdin)
        try:
            _, status, usage = _wait4(proc.pid)
        except BaseException:
            _kill(proc)
            proc.wait()
            raise
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.discard(proc)
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped by wait4 above: the watchdog must not signal a reused pid
        for thread in readers:
            thread.join()
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        result = collected.get("result")
        return Finished(
            exit_code=None if timed_out.is_set() else (128 - code if code < 0 else code),
            stdout=_text(collected.get("stdout", b"")), stderr=_text(collected.get("stderr", b"")),
            wall_ms=(time.monotonic() - started) * 1000.0,
            cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0, max_rss_kb=int(usage.ru_maxrss),
            timed_out=timed_out.is_set(), result=None if result is None else _text(result),
            confined=self.available)

    def _bwrap_argv(self, c: Confinement) -> list[str]:
        assert self.bwrap is not None
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL"]
        if c.network:
            args.append("--share-net")
        home = Path.home()
        hidden = dict.fromkeys((Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run"), Path("/home"),
                                Path("/root"), home, *c.hidden))
        for folder in hidden:
            if folder.is_dir() and folder != Path("/"):  # a HOME of "/" must not hide the whole system
                args += ["--tmpfs", str(folder)]
        visible = [*_interpreter_paths(), *c.read_only]
        if c.network:
            visible += [Path("/etc/resolv.conf").resolve()]  # often a link into the hidden /run
        for path in visible:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for path in (c.workdir, *c.writable):
            if path.exists():
                args += ["--bind", str(path), str(path)]
        for source, inside in c.overlays:
            args += ["--ro-bind", str(source), inside]
        args += ["--ro-bind", str(RUNNER), RUNNER_INSIDE, "--setenv", "HOME", str(home),
                 "--chdir", str(c.cwd or c.workdir), "--"]
        return args


@functools.lru_cache(maxsize=None)
def _interpreter_paths() -> tuple[Path, ...]:
    """What ``{python}`` and the runner need inside, even where the checkout or home is hidden:
    the interpreter's installation, the virtual environment, and the harness's own code."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent,
             Path(harness.__file__).resolve().parent}
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        paths.add(Path(user_site))
    return tuple(sorted(p for p in paths if p.exists()))


def sandbox() -> Sandbox:
    """The sandbox of this machine (probed once per process)."""
    return _probe(os.environ.get(BWRAP_ENV) or shutil.which("bwrap") or "")


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str) -> Sandbox:
    if not bwrap or not os.path.isfile(bwrap):
        where = f"{BWRAP_ENV}={bwrap}" if os.environ.get(BWRAP_ENV) else "on PATH"
        return Sandbox(None, False, f"bubblewrap (bwrap) is not installed {where}; on Debian or Ubuntu: "
                                    "apt install bubblewrap")
    try:
        probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
                                "--die-with-parent", "--as-pid-1", "--", "/bin/true"],
                               capture_output=True, text=True, timeout=30)
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sandbox(bwrap, False, f"{bwrap} cannot run ({exc})")
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        return Sandbox(bwrap, False, f"{bwrap} cannot make namespaces here ({why}); user namespaces may be "
                                     "disabled (sysctl kernel.unprivileged_userns_clone)")
    return Sandbox(bwrap, True, version=version)


def kill_active() -> None:
    """Stop every confined run still going (Ctrl-C: they run in their own sessions and miss SIGINT)."""
    with _ACTIVE_LOCK:
        procs = list(_ACTIVE)
    for proc in procs:
        _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _wait4(pid: int) -> tuple[int, int, os.struct_rusage]:  # type: ignore[name-defined]
    while True:
        try:
            return os.wait4(pid, 0)
        except InterruptedError:
            continue


def _watch(proc: subprocess.Popen[bytes], timeout_s: float, timed_out: threading.Event,
           cancel: threading.Event | None) -> None:
    deadline = time.monotonic() + timeout_s
    while proc.returncode is None:
        if cancel is not None and cancel.is_set():
            _kill(proc)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out.set()
            _kill(proc)
            return
        time.sleep(min(0.05, left))


def _reader(stream, sink: dict[str, bytes], name: str) -> threading.Thread:  # type: ignore[no-untyped-def]
    def read() -> None:
        with stream:
            sink[name] = stream.read()
    return threading.Thread(target=read, daemon=True)


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8"))
    except BrokenPipeError:
        pass  # the command does not read its input: not an error of ours
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
