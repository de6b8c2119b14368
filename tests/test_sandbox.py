"""The sandbox on its own: what a confined command can see, reach and use, and what it cannot."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import needs_sandbox

from harness.sandbox import Confinement, Limits, kill_active, sandbox

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


def test_time_memory_and_cpu_limits(checkout: Path) -> None:
    started = time.monotonic()
    code_, _, _ = confined(checkout, "import time; time.sleep(60)", timeout=1)
    assert code_ is None and time.monotonic() - started < 10
    code_, _, err = confined(checkout, "x = bytearray(2 * 1024 ** 3)", memory_mb=512)
    assert code_ == 1 and "MemoryError" in err
    code_, _, _ = confined(checkout, "while True: pass", cpu_s=1)
    assert code_ == 128 + 24  # SIGXCPU


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
