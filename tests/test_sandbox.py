"""The sandbox on its own: what a confined command can see, reach and use, and what it cannot."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import needs_sandbox
from harness.sandbox import Confinement, Finished, Limits, kill_active, sandbox, unconfined

pytestmark = needs_sandbox


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A stand-in for the user's checkout, with a worktree inside it and a file that must stay private."""
    root = tmp_path / "checkout"
    (root / "wt").mkdir(parents=True)
    (root / "private.txt").write_text("the user's own file")
    return root


def confined(checkout: Path, code: str, *, timeout: float = 20, network: bool = False,
             **limits: float) -> tuple[int | None, str, str]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    run = sandbox().run([sys.executable, "-c", code], Confinement(workdir=checkout / "wt", env=env, hidden=(checkout,),
                                                                   network=network),
                        Limits(timeout_s=timeout, **limits))  # type: ignore[arg-type]
    return run.exit_code, run.stdout, run.stderr


def test_the_worktree_is_writable_and_the_rest_is_out_of_sight_or_read_only(checkout: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    code = f"""
import os
open("made.txt", "w").write("ok")
print("checkout:", sorted(os.listdir({str(checkout)!r})))
print("outside:", os.path.exists({str(outside)!r}))
print("home:", os.listdir(os.environ["HOME"]))
for target in ("/usr/harness-was-here", "/etc/harness-was-here"):
    try:
        open(target, "w")
        print("wrote", target)
    except OSError as exc:
        print("refused", target, exc.errno)
"""
    code_, out, err = confined(checkout, code)
    assert code_ == 0, err
    assert (checkout / "wt" / "made.txt").read_text() == "ok"
    assert "checkout: ['wt']" in out            # the user's file is not there to read
    assert "outside: False" in out              # the real /tmp is not there either
    assert "refused /usr/harness-was-here 30" in out and "refused /etc/harness-was-here 30" in out  # EROFS
    assert outside.read_text() == "keep" and (checkout / "private.txt").read_text() == "the user's own file"


def test_home_is_private(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE")
    monkeypatch.setenv("HOME", str(home))
    code_, out, _ = confined(checkout, "import os, pathlib; print(sorted(os.listdir(pathlib.Path.home())))")
    assert code_ == 0 and out.strip() == "[]"


def test_no_network_unless_allowed(checkout: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.settimeout(3)
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("connected")
except OSError as exc:
    print("refused", exc)
"""
    try:
        _, out, _ = confined(checkout, code)
        assert "refused" in out
        _, out, _ = confined(checkout, code, network=True)
        assert "connected" in out
    finally:
        thread.join()
        server.close()
    assert len(accepted) == 1  # only the run with the network allowed reached the host


def run_code(workdir: Path, code: str, *, cancel: threading.Event | None = None, **limits: float) -> Finished:
    limits.setdefault("timeout_s", 30)
    return sandbox().run([sys.executable, "-c", code], Confinement(workdir=workdir, env={"PATH": os.environ["PATH"]}),
                         Limits(**limits), cancel=cancel)  # type: ignore[arg-type]


def test_time_and_cpu_limits(checkout: Path) -> None:
    started = time.monotonic()
    code_, _, _ = confined(checkout, "import time; time.sleep(60)", timeout=1)
    assert code_ is None and time.monotonic() - started < 10
    code_, _, _ = confined(checkout, "while True: pass", cpu_s=1)
    assert code_ == 128 + 24  # SIGXCPU


def test_the_whole_run_shares_one_memory_bound(checkout: Path) -> None:
    # three processes of 200 MB each: under a per-process limit of 512 MB each would pass; together they may not
    code = """
import subprocess, sys
hog = "import time; x = bytearray(200 * 1024 * 1024); time.sleep(3)"
procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
print([p.wait() for p in procs])
"""
    run = run_code(checkout / "wt", code, memory_mb=400)
    if sandbox().cgroups is None:
        pytest.skip("no control group can be made on this machine: memory is bounded per process")
    assert "memory" in run.limits_hit, (run.stdout, run.stderr)
    assert "-9" in run.stdout  # the kernel killed one of them, inside the run's own group
    assert "used more than 400 MB of memory" in run.limit_problem(Limits(timeout_s=1, memory_mb=400))


def test_private_tmp_is_bounded_and_counts_as_memory(checkout: Path) -> None:
    code = """
import errno
try:
    with open("/tmp/fill", "wb") as out:
        for _ in range(64):
            out.write(b"x" * (1024 * 1024))
    print("wrote it all")
except OSError as exc:
    print("stopped", errno.errorcode[exc.errno])
"""
    run = run_code(checkout / "wt", code, tmp_mb=16)
    assert run.exit_code == 0 and "stopped ENOSPC" in run.stdout, run.stderr


def test_processes_are_bounded(checkout: Path) -> None:
    if sandbox().cgroups is None and os.getuid() == 0:
        pytest.skip("no control group here, and the per-process limit does not bind root")
    code = """
import subprocess
started = []
for _ in range(64):
    try:
        started.append(subprocess.Popen(["sleep", "5"]))
    except OSError as exc:
        print("refused after", len(started), type(exc).__name__)
        break
"""
    run = run_code(checkout / "wt", code, processes=16)
    assert "refused after" in run.stdout, (run.stdout, run.stderr)
    assert int(run.stdout.split("refused after ")[1].split()[0]) < 16
    assert run.wall_ms < 4000  # the sleeps it did start were killed with the run, not waited for
    if sandbox().cgroups is not None:
        assert "processes" in run.limits_hit


def test_the_writable_folder_may_grow_only_so_much(checkout: Path) -> None:
    wt = checkout / "wt"
    one_file = """
import errno
try:
    open('big.bin', 'wb').write(b'x' * (40 * 1024 * 1024))
except OSError as exc:
    print("stopped", errno.errorcode[exc.errno])
"""
    run = run_code(wt, one_file, disk_mb=8)
    assert "stopped EFBIG" in run.stdout, run.stderr  # no one file may be larger than the growth allowed
    assert (wt / "big.bin").stat().st_size <= 8 * 1024 * 1024
    many_files = """
import os, time
for n in range(400):
    with open(f"part-{n}.bin", "wb") as out:
        out.write(os.urandom(256 * 1024))
    time.sleep(0.01)
print("wrote them all")
"""
    run = run_code(wt, many_files, disk_mb=8)
    assert "disk" in run.limits_hit and "wrote them all" not in run.stdout, (run.stdout, run.stderr)
    assert sum(p.stat().st_size for p in wt.glob("part-*.bin")) < 60 * 1024 * 1024


def test_output_keeps_a_bounded_head_and_tail(checkout: Path) -> None:
    code = """
import sys
sys.stdout.write("FIRST LINE\\n")
chunk = "y" * 1023 + "\\n"
for _ in range(64 * 1024):
    sys.stdout.write(chunk)
sys.stdout.write("LAST LINE\\n")
"""
    run = run_code(checkout / "wt", code, output_kb=64)
    assert run.exit_code == 0
    assert run.stdout.startswith("FIRST LINE") and run.stdout.rstrip().endswith("LAST LINE")
    assert len(run.stdout) < 200 * 1024 and run.dropped["stdout"] > 60 * 1024 * 1024
    assert "bytes dropped" in run.stdout


def test_nothing_outlives_the_run_and_its_cpu_time_is_counted(checkout: Path, tmp_path: Path) -> None:
    marker = checkout / "wt" / "late.txt"
    code = f"""
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); open({str(marker)!r}, 'w').write('late')"],
                 start_new_session=True)
subprocess.Popen([sys.executable, "-c", "sum(i * i for i in range(2_000_000))"]).wait()
"""
    run = sandbox().run([sys.executable, "-c", code],
                        Confinement(workdir=checkout / "wt", env={"PATH": os.environ["PATH"]}, hidden=(checkout,)),
                        Limits(timeout_s=20))
    assert run.exit_code == 0 and run.wall_ms < 1900
    assert run.cpu_ms > 50  # the child's loop is in the run's CPU time, read from outside
    time.sleep(2.5)
    assert not marker.exists()  # the background process died with the run


def test_the_root_is_empty_but_for_what_a_run_needs(checkout: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "secret.txt").write_text("another project's file")
    code = f"""
import os, pwd
print("root:", sorted(os.listdir("/")))
print("etc:", sorted(os.listdir("/etc")))
print("users:", sorted(p.pw_name for p in pwd.getpwall()))
for path in ("/etc/shadow", "/etc/ssh", "/etc/ssl/private", {str(other / 'secret.txt')!r}, {str(tmp_path)!r},
             "/srv", "/home", "/work", "/var/log", "/run", "/sys", "/mnt", "/opt", "/boot"):
    print("exists" if os.path.exists(path) else "absent", path)
import subprocess
print(subprocess.run(["ls", "/usr/bin/env"], capture_output=True, text=True).stdout.strip())
"""
    code_, out, err = confined(checkout, code)
    assert code_ == 0, err
    absent = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("absent ")]
    assert set(absent) >= {"/etc/shadow", "/etc/ssh", "/etc/ssl/private", str(other / "secret.txt"), "/srv",
                           "/var/log", "/run", "/sys", "/mnt", "/boot"}, out
    assert not any(line.startswith("exists " + str(tmp_path)) for line in out.splitlines()) or \
        str(tmp_path) in str(checkout)  # only the parents of the worktree exist, empty but for it
    users = out.split("users: ")[1].splitlines()[0]
    assert set(eval(users)) <= {"root", "nobody", os.environ.get("USER", "root"), f"user{os.getuid()}"}
    assert "/usr/bin/env" in out  # the system's programs are there to run


def test_what_a_run_may_see_of_the_tree_holding_its_worktree(checkout: Path) -> None:
    code = f"print(sorted(os.listdir({str(checkout)!r})), sorted(os.listdir({str(checkout.parent)!r})))"
    code_, out, err = confined(checkout, "import os; " + code)
    assert code_ == 0, err
    assert out.strip() == "['wt'] ['checkout']"


def test_a_grandchild_left_running_does_not_hold_up_the_run(checkout: Path) -> None:
    code = """
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, time; os.fork() or time.sleep(60); time.sleep(60)"],
                 start_new_session=True, stdout=sys.stdout, stderr=sys.stderr)
print("leaving")
"""
    started = time.monotonic()
    run = run_code(checkout / "wt", code, timeout_s=20)
    assert run.exit_code == 0 and not run.timed_out and "leaving" in run.stdout
    assert time.monotonic() - started < 8
    assert run.leftovers >= 1  # stopped by the runner, and counted


def test_unconfined_runs_keep_the_bounds_that_need_no_namespaces(tmp_path: Path) -> None:
    box = unconfined("chosen by the test")
    marker = tmp_path / "late.txt"
    code = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, time; os.fork(); time.sleep(2); open({str(marker)!r}, 'w')"],
                 start_new_session=True, stdout=sys.stdout)
print("x" * 300_000)
"""
    run = box.run([sys.executable, "-c", code], Confinement(workdir=tmp_path, env={"PATH": os.environ["PATH"]}),
                  Limits(timeout_s=20, output_kb=16))
    assert run.exit_code == 0 and not run.confined and run.wall_ms < 1900
    assert run.leftovers >= 1 and run.dropped["stdout"] > 250_000
    time.sleep(2.5)
    assert not marker.exists()


def test_the_command_holds_no_descriptor_but_its_own(checkout: Path) -> None:
    code = "import json, os; print(json.dumps(sorted(int(fd) for fd in os.listdir('/proc/self/fd'))))"
    run = sandbox().run([sys.executable, "-c", code], Confinement(workdir=checkout / "wt",
                                                                  env={"PATH": os.environ["PATH"]}),
                        Limits(timeout_s=20), result_channel=True)
    held = json.loads(run.stdout)
    # stdin, stdout, stderr, the result channel it was given, and the one listdir opened: not the runner's
    assert len(held) == 5 and held[:3] == [0, 1, 2], held


def test_without_a_control_group_memory_is_bounded_per_process(checkout: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SANDBOX_CGROUP", "off")
    assert sandbox().cgroups is None and "no control group" in sandbox().describe()
    run = run_code(checkout / "wt", "x = bytearray(2 * 1024 ** 3)", memory_mb=512)
    assert run.exit_code == 1 and "MemoryError" in run.stderr


def test_the_environment_is_the_one_given(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-never-inside")
    run = sandbox().run([sys.executable, "-c", "import os, json; print(json.dumps(sorted(os.environ)))"],
                        Confinement(workdir=checkout / "wt", env={"PATH": os.environ["PATH"], "ONLY": "this"},
                                    hidden=(checkout,)), Limits(timeout_s=20))
    names = set(__import__("json").loads(run.stdout))
    assert "ANTHROPIC_API_KEY" not in names and {"PATH", "ONLY", "HOME"} <= names


def test_overlays_are_read_only_and_replace_what_the_worktree_has(checkout: Path, tmp_path: Path) -> None:
    sealed = tmp_path / "sealed.py"
    sealed.write_text("print('the sealed benchmark')\n")
    (checkout / "wt" / "bench.py").write_text("print('the candidate's benchmark')\n")
    code = """
import subprocess, sys
subprocess.run([sys.executable, "bench.py"])
try:
    open("bench.py", "w")
except OSError as exc:
    print("write refused", exc.errno)
"""
    run = sandbox().run([sys.executable, "-c", code],
                        Confinement(workdir=checkout / "wt", env={"PATH": os.environ["PATH"]}, hidden=(checkout,),
                                    overlays=((sealed, str(checkout / "wt" / "bench.py")),)), Limits(timeout_s=20))
    assert "the sealed benchmark" in run.stdout and "write refused 30" in run.stdout


def test_the_result_channel_and_stdin(checkout: Path) -> None:
    code = ("import os, sys; data = sys.stdin.read(); "
            "open(os.environ['HARNESS_RESULT_FILE'], 'w').write(data.upper()); print('stdout is separate')")
    run = sandbox().run([sys.executable, "-c", code],
                        Confinement(workdir=checkout / "wt", env={"PATH": os.environ["PATH"]}, hidden=(checkout,)),
                        Limits(timeout_s=20), stdin="hello", result_channel=True)
    assert run.result == "HELLO" and run.stdout.strip() == "stdout is separate"


def test_a_cancelled_run_is_killed(checkout: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sandbox().run([sys.executable, "-c", "import time; time.sleep(60)"],
                      Confinement(workdir=checkout / "wt", env={"PATH": os.environ["PATH"]}, hidden=(checkout,)),
                      Limits(timeout_s=60), cancel=cancel)
    assert time.monotonic() - started < 10
    kill_active()  # nothing left to stop: a no-op


def test_a_missing_bwrap_is_reported_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_BWRAP", str(tmp_path / "nope"))
    box = sandbox()
    assert not box.available and "bubblewrap (bwrap) is not installed" in box.reason
    assert "\n" not in box.describe() and box.describe().startswith("sandbox: unavailable")
