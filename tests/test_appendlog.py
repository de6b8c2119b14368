"""raw_data.json / events.json: append-only, safe with several writers, never truncated, never overwritten."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.base.appendlog import append_entries, append_entry, read_entries
from harness.base.errors import HarnessConfigError


def test_missing_or_empty_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_entries(tmp_path / "raw_data.json") == []
    (tmp_path / "empty.json").write_text("\n")
    assert read_entries(tmp_path / "empty.json") == []


def test_appends_keep_earlier_entries_and_order(tmp_path: Path) -> None:
    path = tmp_path / "tracking" / "raw_data.json"
    assert append_entry(path, {"iteration": 1}) == 1
    assert append_entries(path, [{"iteration": 2}, {"iteration": 3}]) == 3
    assert json.loads(path.read_text()) == [{"iteration": 1}, {"iteration": 2}, {"iteration": 3}]


def _writer(path: str, writer: int, count: int) -> None:
    for n in range(count):
        append_entry(Path(path), {"writer": writer, "n": n})


def test_several_processes_appending_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    ctx = multiprocessing.get_context("spawn")  # forking a process with threads can copy a held lock
    procs = [ctx.Process(target=_writer, args=(str(path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    entries = read_entries(path)
    assert len(entries) == 100
    for w in range(4):  # each writer's entries are all there, in its own order
        assert [e["n"] for e in entries if e["writer"] == w] == list(range(25))


_LOOPING_WRITER = """
import sys
from pathlib import Path
from harness.base.appendlog import append_entry
path = Path(sys.argv[1])
n = 0
while True:
    append_entry(path, {"n": n, "pad": "x" * 2000})
    n += 1
"""


def test_a_killed_writer_never_leaves_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "raw_data.json"
    proc = subprocess.Popen([sys.executable, "-c", _LOOPING_WRITER, str(path)])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(read_entries(path)) < 30:
            time.sleep(0.01)  # reading while the writer replaces the file: always a whole array
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    entries = read_entries(path)
    assert len(entries) >= 30
    assert [e["n"] for e in entries] == list(range(len(entries)))
    assert append_entry(path, {"n": len(entries)}) == len(entries) + 1  # the next writer carries on


def test_failure_during_replace_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "raw_data.json"
    append_entry(path, {"iteration": 1})
    before = path.read_bytes()

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        append_entry(path, {"iteration": 2})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_unserialisable_entry_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    append_entry(path, {"ok": True})
    before = path.read_bytes()
    with pytest.raises(TypeError):
        append_entry(path, {"when": object()})
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('[\n  {"iteration": 1},\n  {"iteration": 2,\n]\n', 4),  # trailing comma
        ('[\n  {"iteration": 1}\n', 3),  # truncated by hand
        ('\n\n{"iteration": 1}\n', 3),  # an object, not an array
    ],
)
def test_malformed_file_is_reported_with_path_and_line_and_never_overwritten(
    tmp_path: Path, text: str, line: int
) -> None:
    path = tmp_path / "raw_data.json"
    path.write_text(text)
    with pytest.raises(HarnessConfigError) as info:
        append_entry(path, {"iteration": 3})
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert "will not overwrite" in str(info.value)
    assert path.read_text() == text


def test_binary_garbage_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_bytes(b'[\n{"a": 1},\n\xff\xfe]\n')
    with pytest.raises(HarnessConfigError, match=r"events\.json:3: not UTF-8"):
        read_entries(path)
    assert path.read_bytes() == b'[\n{"a": 1},\n\xff\xfe]\n'


def test_ctrl_c_during_a_record_write_lands_after_the_record_is_whole(tmp_path: Path) -> None:
    """The tournament's state is written inside ctrl_c_deferred: Ctrl-C in the middle (here, between the two
    halves of a write) is raised once the file is complete, not inside the serialiser."""
    from harness.base.fileio import atomic_write_json, ctrl_c_deferred

    path = tmp_path / "state.json"
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred():
            record = {"status": "in_progress"}
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal is delivered here, and held
            record["updated"] = True
            atomic_write_json(path, record)
    assert json.loads(path.read_text()) == {"status": "in_progress", "updated": True}
    assert signal.getsignal(signal.SIGINT) is before  # the session's own Ctrl-C handling is back
