"""The harness's own runner: the first process of every confined command (pid 1 of the sandbox).

It is started as ``python -I -S runner.py CPU_S MEMORY_MB PROCESSES FILE_MB STATUS_FD -- COMMAND...`` from the
installed harness, never from a candidate's tree, and imports only the standard library (it runs before, and
outside of, any code it confines). It

* sets the per-process limits every process below it inherits (0 leaves one off): CPU seconds, address space
  (only where no control group bounds the run's memory as a whole), processes (where no control group counts
  them), the size of any one file written, and no core dumps;
* runs the command in the foreground and exits with its status (128 + N when a signal N ended it);
* then kills and reaps every process the command left behind, without ever waiting on one that might not end:
  the CPU time the harness reads from outside (``wait4`` on the sandbox) counts all of them, and nothing
  outlives the run;
* tells the harness how many processes it had to stop, on ``STATUS_FD`` (-1: none), a pipe the command never
  holds (it is closed when the command starts).

The result channel (``HARNESS_RESULT_FD``) does not pass through here: the harness opens that pipe itself and
the command inherits it directly.
"""

# The C module behind `signal`: importing `signal` itself pulls in enum and costs 5 ms a run.
import _signal as signal  # noqa: I001
import os
import resource
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
REAP_FOR_S = 2.0  # a process stuck in the kernel (uninterruptible) is left to the kernel after this


def set_limits(cpu_seconds: int, memory_mb: int, processes: int, file_mb: int) -> None:
    if cpu_seconds > 0:
        # the soft limit sends SIGXCPU, the hard one a second later SIGKILL
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if memory_mb > 0:
        size = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    if processes > 0:
        # counted per user namespace: inside the sandbox, the run's own processes (root is exempt)
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    if file_mb > 0:
        size = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def become_subreaper() -> None:
    """Outside a pid namespace, orphans of the command come back to us instead of to init."""
    if os.getpid() == 1:
        return  # pid 1 of the sandbox reaps orphans already
    import ctypes  # only here: its import is most of this runner's start-up

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def children() -> list[int]:
    mine = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", "replace")
        except OSError:
            continue
        # the process name may hold spaces and parentheses: the fields start after the last ')'
        if stat[stat.rfind(")") + 2:].split(" ")[1] == mine:
            found.append(int(entry))
    return found


def kill_leftovers() -> int:
    """Kill what the command left and reap it, polling: a blocking wait could hang on a process that a
    leftover keeps starting, or on one stuck in the kernel. Returns how many were left."""
    deadline = time.monotonic() + REAP_FOR_S
    left = None
    while True:
        if os.getpid() == 1:
            # pid 1 of a pid namespace: -1 is every other process of the namespace, however far it forked
            if left is None:
                left = sum(1 for entry in os.listdir("/proc") if entry.isdigit() and entry != "1")
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            pids = children()
            left = len(pids) if left is None else left
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not reap() or time.monotonic() > deadline:
            return left


def reap() -> bool:
    """Reap every child that has ended; True while some child is still there."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def main(argv: list[str]) -> int:
    try:
        cpu_seconds, memory_mb, processes, file_mb, status_fd, separator, *command = argv
        limits = [int(cpu_seconds), int(memory_mb), int(processes), int(file_mb)]
        status = int(status_fd)
    except ValueError:
        separator, command, limits, status = "", [], [], -1
    if separator != "--" or not command:
        print("usage: runner.py CPU_S MEMORY_MB PROCESSES FILE_MB STATUS_FD -- COMMAND...", file=sys.stderr)
        return 2
    if status >= 0:
        os.set_inheritable(status, False)  # closed in the command when it starts
    set_limits(*limits)
    become_subreaper()
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"cannot start {command[0]}: {exc}", file=sys.stderr)
        return 126
    if pid == 0:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    while True:  # orphans handed to us are reaped as they end, so they never pile up as zombies
        try:
            done, exit_status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if done == pid:
            break
    left = kill_leftovers()
    if status >= 0:
        try:
            os.write(status, f"leftovers {left}\n".encode())
        except OSError:
            pass
    code = os.waitstatus_to_exitcode(exit_status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
