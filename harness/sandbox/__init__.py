"""Confined commands: code a user did not write runs here, never straight on the machine.

The confinement is built from bubblewrap (``bwrap``, Debian package ``bubblewrap``), which puts the
command in new Linux namespaces on an empty root (:mod:`harness.sandbox.root` says what is put in it):

* no network (a loopback of its own), unless the caller allows it;
* the system's programs read-only, a few files of ``/etc``, the interpreter, the working folder writable,
  paths the caller declares; nothing else of the machine (no ``/home``, ``/root``, other projects, the
  user's checkout);
* files laid read-only over paths of the working folder (a tournament's sealed benchmark, taken from
  the manifest, not from the candidate's tree);
* an environment the caller builds from an allowlist (``harness.base.redaction.child_environment``);
* bounds (:class:`Limits`): time; memory for the whole run, private ``/tmp`` included, and a process
  count (a control group of the run's own where the machine allows it, :mod:`harness.sandbox.cgroups`,
  else per-process limits); the private ``/tmp``, ``$HOME`` and ``/dev/shm``; the growth of the writable
  folders; output kept to a bounded head and tail; every process the command starts dies with it.

The first process inside is the harness's own runner (``runner.py``): it sets the per-process limits, runs
the command, and reaps what the command leaves behind, so the CPU time read from outside with ``wait4``
(``Finished.cpu_ms``) covers every process and no code inside can patch that clock.

Where no sandbox can be made (no ``bwrap``, or user namespaces are disabled), :func:`sandbox` says why,
and callers decide: the tournament and the command runners refuse to run what they were given without an
explicit opt-in. ``HARNESS_BWRAP`` names the bwrap binary to use (tests point it at a missing file).
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.base import exit_codes
from harness.sandbox.cgroups import CgroupFamily, RunGroup, cgroup_family
from harness.sandbox.process import DiskWatch, kill_active, run_process
from harness.sandbox.root import RUNNER, RUNNER_INSIDE, interpreter_paths, network_args, private_tmpfs, system_args

__all__ = ["BWRAP_ENV", "Confinement", "Finished", "Limits", "Sandbox", "kill_active", "sandbox", "unconfined"]

BWRAP_ENV = "HARNESS_BWRAP"


@dataclass(frozen=True)
class Limits:
    """What one run may use. ``timeout_s`` is wall-clock time (the run is killed past it).

    ``cpu_s`` is off by default because an armed CPU limit makes the kernel's per-process CPU clock
    tick-grained (``time.process_time()`` then reads 0 or 4 ms): benchmarks that time themselves need
    it off, and their wall-clock limit bounds their CPU anyway.
    """

    timeout_s: float
    cpu_s: float | None = None
    memory_mb: int = 8192     # the whole run: every process and its private /tmp
    processes: int = 256      # processes (and threads) at once
    tmp_mb: int = 256         # the private /tmp, $HOME and /dev/shm, in memory (counted in memory_mb too)
    disk_mb: int = 1024       # how much the writable folders (the worktree) may grow during the run
    output_kb: int = 1024     # kept of stdout and of stderr each: the head and the tail, the middle dropped


@dataclass(frozen=True)
class Confinement:
    """What a confined command may see and do."""

    workdir: Path                                  # seen at its own path, writable unless workdir_writable=False
    env: Mapping[str, str]                         # the whole environment (build it from the allowlist)
    cwd: Path | None = None                        # default: workdir
    hidden: tuple[Path, ...] = ()                  # folders that stay empty even where a bound folder holds them
    read_only: tuple[Path, ...] = ()               # bound in read-only
    writable: tuple[Path, ...] = ()                # bound in writable
    overlays: tuple[tuple[Path, str], ...] = ()    # (file outside, path inside): laid over, read-only
    network: bool = False
    workdir_writable: bool = True


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
    limits_hit: tuple[str, ...] = ()   # the bounds the run ran into: "time", "memory", "processes", "disk"
    dropped: dict[str, int] = field(default_factory=dict)  # stream name -> bytes dropped from its middle
    leftovers: int = 0      # processes still running when the command ended, stopped by the runner

    def limit_problem(self, limits: Limits) -> str:
        """The bounds the run hit, in words (empty when none)."""
        words = {"time": f"ran past its {limits.timeout_s:g} s", "memory": f"used more than {limits.memory_mb} MB "
                 "of memory", "processes": f"started more than {limits.processes} processes",
                 "disk": f"wrote more than {limits.disk_mb} MB"}
        said = [words[name] for name in self.limits_hit if name in words]
        said += [f"printed {n:,} bytes more on {stream} than the {limits.output_kb} KB kept of its head and tail"
                 for stream, n in self.dropped.items()]
        return "; ".join(said)


@dataclass(frozen=True)
class Sandbox:
    """The machine's sandbox: ``available`` or not, with the reason."""

    bwrap: str | None
    available: bool
    reason: str = ""
    version: str = ""
    cgroups: CgroupFamily | None = None

    def describe(self) -> str:
        bounds = (f"memory and processes bounded per run by a {self.cgroups.describe()}" if self.cgroups else
                  "memory bounded per process" + (" and processes per run" if self._processes_per_run() else "")
                  + " (no control group can be made here)")
        if self.available:
            return (f"sandbox: {self.version or 'bubblewrap'} (empty root: system read-only, worktree writable, "
                    f"nothing else of the machine; no network; allowlisted environment; time, {bounds}, private "
                    "/tmp, disk growth and output bounded)")
        return f"sandbox: unavailable ({self.reason})"

    def run(self, argv: list[str], confinement: Confinement, limits: Limits, *, stdin: str | None = None,
            result_channel: bool = False, cancel: threading.Event | None = None,
            merge_stderr: bool = False) -> Finished:
        """Run ``argv`` confined (or, when no sandbox can be made, under the runner alone) and wait for it.

        ``result_channel`` opens a pipe the command finds as ``HARNESS_RESULT_FD`` (and
        ``HARNESS_RESULT_FILE``, ``/dev/fd/N``); what it writes there comes back as ``Finished.result``.
        ``cancel`` set while it runs kills it and raises KeyboardInterrupt.
        """
        if os.name == "nt":  # the runner needs process groups and wait4: one line, never a crash
            return Finished(126, "", "commands cannot run on Windows, confined or not: the harness runs them under "
                            "a POSIX process runner (process groups, wait4); run them on Linux (or macOS, "
                            "unconfined)", 0.0, 0.0, 0, confined=False)
        env = dict(confinement.env)
        pipes = {"status": os.pipe()}
        if result_channel:
            pipes["result"] = channel = os.pipe()
            env["HARNESS_RESULT_FD"] = str(channel[1])
            env["HARNESS_RESULT_FILE"] = f"/dev/fd/{channel[1]}"
        group = self._group(limits)
        cpu = math.ceil(limits.cpu_s) if limits.cpu_s else 0
        # a control group bounds the run's memory as a whole; without one, each process's address space is
        # bounded instead (which breaks runtimes that reserve more than they use, so only then)
        processes = limits.processes if group is None and self._processes_per_run() else 0
        inner = [sys.executable, "-I", "-S", RUNNER_INSIDE if self.available else str(RUNNER), str(cpu),
                 "0" if group else str(limits.memory_mb), str(processes), str(limits.disk_mb),
                 str(pipes["status"][1]), "--", *argv]
        full = (self._bwrap_argv(confinement, limits) + inner) if self.available else inner
        if group is not None:
            full = group.enter_argv(full)
        writable = [*([confinement.workdir] if confinement.workdir_writable else []), *confinement.writable]
        try:
            ended = run_process(full, cwd=confinement.cwd or confinement.workdir, env=env,
                                stdin=None if stdin is None else stdin.encode("utf-8"), timeout_s=limits.timeout_s,
                                keep_bytes=limits.output_kb * 1024, merge_stderr=merge_stderr, pipes=pipes,
                                cancel=cancel, disk=DiskWatch([p for p in writable if p.exists()],
                                                              limits.disk_mb * 1024 * 1024),
                                kill_also=group.kill_all if group else None)
        except OSError as exc:
            if group is not None:
                group.remove()
            return Finished(126, "", f"cannot start {full[0]!r}: {exc.strerror or exc}", 0.0, 0.0, 0,
                            confined=self.available)
        hit = []
        if ended.timed_out:
            hit.append("time")
        if group is not None:
            group.kill_all()  # a process that left the run's session is still in its group
            hit += group.limits_hit()
            group.remove()
        if ended.disk:
            hit.append("disk")
        if ended.cancelled:
            raise KeyboardInterrupt
        code = os.waitstatus_to_exitcode(ended.status)
        usage = ended.usage
        output = ended.output
        result = output.pop("result", None)
        status = _text(output.pop("status").value()).split()
        return Finished(
            exit_code=None if ended.timed_out else exit_codes.from_process(code),
            stdout=_text(output["stdout"].value()),
            stderr=_text(output["stderr"].value()) if "stderr" in output else "",
            wall_ms=ended.wall_ms, cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0,  # type: ignore[attr-defined]
            max_rss_kb=int(usage.ru_maxrss),  # type: ignore[attr-defined]
            timed_out=ended.timed_out, result=None if result is None else _text(result.value()),
            confined=self.available, limits_hit=tuple(hit),
            dropped={name: kept.dropped for name, kept in output.items() if kept.dropped},
            leftovers=int(status[1]) if status[:1] == ["leftovers"] and status[1:2] and status[1].isdigit() else 0)

    def _processes_per_run(self) -> bool:
        """Whether a per-process limit can bound the run's processes: only inside the sandbox's user namespace,
        where Linux 5.14 and later count a user's processes per namespace (elsewhere the limit would count
        every process the user has on the machine), and never for root, whom it does not bind."""
        return self.available and os.getuid() != 0 and _kernel_at_least(5, 14)

    def _group(self, limits: Limits) -> RunGroup | None:
        if self.cgroups is None:
            return None
        try:
            return RunGroup(self.cgroups, memory_mb=limits.memory_mb, processes=limits.processes)
        except OSError:
            return None  # the machine took the right away since the probe: the per-process limits apply

    def _bwrap_argv(self, c: Confinement, limits: Limits) -> list[str]:
        assert self.bwrap is not None
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
                "--hostname", "sandbox", *system_args(), "--dev", "/dev", "--proc", "/proc"]
        if c.network:
            args += ["--share-net", *network_args()]
        home = Path(c.env.get("HOME") or Path.home())
        private = [Path("/tmp"), Path("/dev/shm")]
        if home.is_absolute() and home != Path("/"):
            private.append(home)
        args += private_tmpfs(private, limits.tmp_mb)
        args += ["--symlink", "/tmp", "/var/tmp"]
        bound: list[Path] = []
        for path in (*interpreter_paths(), *c.read_only):
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
                bound.append(path)
        if c.workdir.exists():
            args += ["--bind" if c.workdir_writable else "--ro-bind", str(c.workdir), str(c.workdir)]
            bound.append(c.workdir)
        for path in c.writable:
            if path.exists():
                args += ["--bind", str(path), str(path)]
                bound.append(path)
        for folder in c.hidden:
            if folder.is_dir() and any(folder == b or b in folder.parents for b in bound):
                args += private_tmpfs([folder], 1)
        for source, inside in c.overlays:
            args += ["--ro-bind", str(source), inside]
        # the root is bubblewrap's own folder in memory: read-only once everything is in place
        args += ["--ro-bind", str(RUNNER), RUNNER_INSIDE, "--remount-ro", "/", "--setenv", "HOME", str(home),
                 "--setenv", "TMPDIR", "/tmp", "--chdir", str(c.cwd or c.workdir), "--"]
        return args


def sandbox() -> Sandbox:
    """The sandbox of this machine (probed once per process)."""
    # the system's folders too: a PATH narrowed for the commands must not make the sandbox disappear
    found = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
    return _probe(os.environ.get(BWRAP_ENV) or found or "", cgroup_family())


def unconfined(reason: str) -> Sandbox:
    """Runs commands under the harness's runner alone, for what the user chose to run unconfined: no
    namespaces, but the bounds that need none (time, the run's control group, output, disk growth)."""
    return Sandbox(None, False, reason, cgroups=cgroup_family())


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str, cgroups: CgroupFamily | None) -> Sandbox:
    elsewhere = not_linux()
    if elsewhere:
        return Sandbox(None, False, elsewhere, cgroups=cgroups)
    if not bwrap or not os.path.isfile(bwrap):
        where = f"at {BWRAP_ENV}={bwrap}" if os.environ.get(BWRAP_ENV) else "on PATH"
        return Sandbox(None, False, f"bubblewrap (bwrap) is not installed {where}; on Debian or Ubuntu: "
                                    "apt install bubblewrap", cgroups=cgroups)
    try:
        probe = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--as-pid-1", *system_args(),
                                "--dev", "/dev", "--proc", "/proc", "--", "/bin/true"],
                               capture_output=True, text=True, timeout=30)
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sandbox(bwrap, False, f"{bwrap} cannot run ({exc})", cgroups=cgroups)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        return Sandbox(bwrap, False, f"{bwrap} cannot make namespaces here ({why}); user namespaces may be "
                                     "disabled (sysctl kernel.unprivileged_userns_clone)", cgroups=cgroups)
    return Sandbox(bwrap, True, version=version, cgroups=cgroups)


def not_linux(platform: str | None = None) -> str:
    """Why no sandbox can be made on this system when it is not Linux (bubblewrap is Linux's namespaces); else ""."""
    platform = platform or sys.platform
    if platform.startswith("linux"):
        return ""
    name = {"darwin": "macOS", "win32": "Windows", "cygwin": "Windows (Cygwin)"}.get(platform, platform)
    return (f"bubblewrap needs Linux and this is {name}; commands that must run confined run on a Linux machine or "
            "CI runner with bubblewrap (apt install bubblewrap)")


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        found = tuple(int(part) for part in os.uname().release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return found >= (major, minor)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
