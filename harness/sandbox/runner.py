"""The harness's own runner: the first process of every confined command (pid 1 of the sandbox).

It is started as ``python -I -S runner.py CPU_SECONDS MEMORY_MB -- COMMAND...`` from the installed harness,
never from a candidate's tree, and imports only the standard library (it runs before, and outside of,
any code it confines). It

* sets the CPU and memory limits that every process below it inherits;
* runs the command in the foreground and exits with its status (128 + N when a signal N ended it);
* then kills and reaps every process the command left behind, so that the CPU time the harness reads
  from outside (``wait4`` on the sandbox) counts all of them, and nothing outlives the run.

The result channel (``HARNESS_RESULT_FD``) does not pass through here: the harness opens that pipe
itself and the command inherits it directly.
"""

import os
import resource
import sys

# The C module behind `signal`: importing `signal` itself pulls in enum and costs 5 ms a run.
import _signal as signal  # noqa: I001

PR_SET_CHILD_SUBREAPER = 36


def set_limits(cpu_seconds: int, memory_mb: int) -> None:
    if cpu_seconds > 0:
        # the soft limit sends SIGXCPU, the hard one a second later SIGKILL
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if memory_mb > 0:
        size = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))


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


def kill_leftovers() -> None:
    while True:
        pids = children()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, 0):
                pass
        except ChildProcessError:
            pass
        if not pids:
            return


def main(argv: list[str]) -> int:
    cpu_seconds, memory_mb, separator, *command = argv
    if separator != "--" or not command:
        print("usage: runner.py CPU_SECONDS MEMORY_MB -- COMMAND...", file=sys.stderr)
        return 2
    set_limits(int(cpu_seconds), int(memory_mb))
    become_subreaper()
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"cannot start {command[0]}: {exc}", file=sys.stderr)
        return 126
    if pid == 0:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    kill_leftovers()
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
