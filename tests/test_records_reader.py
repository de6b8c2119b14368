"""The read side of the records: RecordReader runs the store's SQL read-only, per-model usage and unknown costs
round-trip, an older database reads (and is migrated by the next session), and reading never creates anything."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from pathlib import Path

import pytest

from harness.apps.cli import main
from harness.apps.tracking.frames import attempts_frame, cycle_ids, items_frame
from harness.apps.tracking.history import history_frame
from harness.base.models import RunRecord
from harness.records import AGENT_RUNS_SCHEMA, ATTEMPT_DETAILS_SCHEMA, AttemptDetails, RecordReader, RecordStore

DAY = dt.date(2026, 2, 1)
USAGE = {
    "anthropic/claude-producer": {"calls": 2, "input_tokens": 1200, "output_tokens": 300, "cache_write_tokens": 0,
                                  "cache_read_tokens": 800, "cost_usd": 0.0125},
    "openai/judge-without-price": {"calls": 1, "input_tokens": 900, "output_tokens": 40, "cache_write_tokens": 0,
                                   "cache_read_tokens": 0, "cost_usd": None},
}


def attempt(store: RecordStore, cycle: str, case: str, number: int, **details: object) -> int:
    """One finished attempt of ``writer/{case}``; ``details`` go to its AttemptDetails."""
    where = store.location(cycle, "writer", case)
    base = {"nodeid": f"suites/writer.yaml::{case}", "case_id": case, "rubric_name": "quality", "threshold": 0.8}
    run_id = store.start_attempt(where, number, "1.0.0", AttemptDetails(**base), created_at="2026-02-01T10:00:00Z")
    record = RunRecord(cycle_id=cycle, agent_name="writer", attempt=number, status="passed", overall_score=0.9,
                       dimension_scores={"clarity": 0.9}, feedback="fine", suggested_fixes=[],
                       artifact_path=f"WORK/runs/{cycle}/writer/{case}/attempt-{number}.md",
                       created_at="2026-02-01T10:00:00Z", duration_ms=10, rubric_version="1.0.0")
    store.finish_attempt(run_id, record, AttemptDetails(**base, outcome="passed", cost_usd=0.0125, **details),
                         store.run_log_path(cycle))
    return run_id


def test_model_usage_and_cost_known_round_trip(tmp_path: Path) -> None:
    work = tmp_path / "WORK"
    store = RecordStore(work)
    cycle = store.allocate_cycle(DAY)
    attempt(store, cycle, "two-models", 1, model_usage=USAGE, cost_known=False)
    producer_only = {"anthropic/claude-producer": USAGE["anthropic/claude-producer"]}
    attempt(store, cycle, "two-models", 2, model_usage=producer_only)
    attempt(store, cycle, "old-style", 1)

    stored = {(r["case_id"], r["attempt"]): r for r in store.rows(
        "SELECT d.case_id, r.attempt, d.model_usage, d.cost_known FROM attempt_details d"
        " JOIN agent_runs r ON r.id = d.run_id")}
    assert stored[("two-models", 1)]["cost_known"] == 0
    assert stored[("old-style", 1)] == {"case_id": "old-style", "attempt": 1, "model_usage": None, "cost_known": 1}

    reader = RecordReader(work)
    read = {(r["case_id"], r["attempt"]): r for r in reader.attempts()}
    assert read[("two-models", 1)]["model_usage"] == USAGE
    assert read[("two-models", 1)]["cost_known"] is False
    assert read[("two-models", 2)]["cost_known"] is True
    assert read[("old-style", 1)]["model_usage"] is None and read[("old-style", 1)]["cost_known"] is True
    assert [r["case_id"] for r in reader.attempts(cycles=[cycle])] == ["old-style", "two-models", "two-models"]
    assert reader.attempts(cycles=["2026-01-01-001"]) == []
    assert reader.cycles() == [cycle]
    assert reader.run_records(cycle) == reader.run_log(cycle) == store.read_run_log(cycle)

    frame = attempts_frame(work)
    assert list(frame.model_usage) == [None, USAGE, producer_only]
    assert list(frame.cost_known) == [True, False, True]
    items = items_frame(frame).set_index("case_id")
    assert not items.loc["two-models", "cost_known"]  # one of its attempts called a model with no price
    assert items.loc["old-style", "cost_known"] and items.loc["old-style", "model_usage"] is None
    merged = items.loc["two-models", "model_usage"]
    assert merged["anthropic/claude-producer"]["calls"] == 4
    assert merged["anthropic/claude-producer"]["cost_usd"] == pytest.approx(0.025)
    assert merged["openai/judge-without-price"] == {**USAGE["openai/judge-without-price"]}
    store.close()


def old_database(work: Path) -> None:
    """A work folder written before model_usage and cost_known existed, with one finished attempt."""
    work.mkdir(parents=True)
    old = ATTEMPT_DETAILS_SCHEMA
    old = old[:old.index("  model_usage")].rstrip().replace("verdict TEXT,", "verdict TEXT") + "\n);\n"
    conn = sqlite3.connect(work / "harness.db")
    conn.executescript(AGENT_RUNS_SCHEMA + old)
    conn.execute("INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, overall_score, artifact_path,"
                 " created_at) VALUES ('2026-01-30-001', 'writer', 1, 'passed', 0.9, 'a.md', '2026-01-30T10:00:00Z')")
    conn.execute("INSERT INTO attempt_details (run_id, nodeid, case_id, rubric_name, outcome, threshold, cost_usd)"
                 " VALUES (1, 'suites/writer.yaml::greet', 'greet', 'quality', 'passed', 0.8, 0.02)")
    conn.commit()
    conn.close()


def detail_columns(work: Path) -> set[str]:
    conn = sqlite3.connect(work / "harness.db")
    try:
        return {row[1] for row in conn.execute("PRAGMA table_info(attempt_details)")}
    finally:
        conn.close()


def test_an_older_database_reads_the_new_columns_as_unknown_and_is_migrated(tmp_path: Path) -> None:
    work = tmp_path / "WORK"
    old_database(work)

    (row,) = RecordReader(work).attempts()  # read-only: nothing is migrated
    assert row["model_usage"] is None and row["cost_known"] is True and row["cost_usd"] == 0.02
    assert "model_usage" not in detail_columns(work) and "cost_known" not in detail_columns(work)
    assert list(attempts_frame(work).cost_known) == [True]

    store = RecordStore(work)
    cycle = store.allocate_cycle(DAY)  # the next session brings the table up to date
    assert {"model_usage", "cost_known"} <= detail_columns(work)
    attempt(store, cycle, "greet", 1, model_usage=USAGE, cost_known=False)
    store.close()
    old, new = RecordReader(work).attempts()
    assert (old["model_usage"], old["cost_known"]) == (None, True)
    assert (new["model_usage"], new["cost_known"]) == (USAGE, False)


def test_reading_creates_no_work_folder_and_no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "WORK"
    empty = tmp_path / "empty" / "WORK"
    empty.mkdir(parents=True)
    for work in (missing, empty):
        reader = RecordReader(work)
        assert not reader.exists()
        assert reader.attempts() == [] and reader.cycles() == [] and reader.loop_results("2026-02-01-001") == {}
        assert reader.run_records("2026-02-01-001") == [] and reader.run_log("2026-02-01-001") == []
        assert reader.reconciliation_note("2026-02-01-001") is None
        assert attempts_frame(work).empty and cycle_ids(work) == [] and history_frame(work).empty
        assert main(["history", "--work-dir", str(work)]) == 0
        assert main(["report", "--work-dir", str(work), "--tracking-dir", str(tmp_path / "t")]) != 0
    assert main(["history"]) == 0  # no --work-dir: looks for WORK/harness.db here and above, makes none
    capsys.readouterr()
    assert not missing.exists()
    assert list(empty.iterdir()) == []
    assert not (tmp_path / "t").exists()


def test_a_reader_reads_while_a_session_writes(tmp_path: Path) -> None:
    """WAL: the reader sees the last committed transaction and never waits for the writer's open one."""
    work = tmp_path / "WORK"
    store = RecordStore(work)
    cycle = store.allocate_cycle(DAY)
    attempt(store, cycle, "done", 1, model_usage=USAGE)
    store.write_loop_result(store.location(cycle, "writer", "done"), "suites/writer.yaml::done", "done",
                            {"success": True})

    def read_while_writing(conn: sqlite3.Connection) -> None:  # a write in progress: an attempt started, uncommitted
        conn.execute("INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, created_at)"
                     " VALUES (?, 'writer', 1, 'running', '2026-02-01T10:00:01Z')", (cycle,))
        started = time.monotonic()
        reader = RecordReader(work)
        assert [r["case_id"] for r in reader.attempts()] == ["done"]
        expected = {"suites/writer.yaml::done": {"success": True}}
        assert reader.loop_results(cycle) == store.loop_results(cycle) == expected
        assert len(reader.run_records(cycle)) == 1
        assert time.monotonic() - started < 5

    store._write(read_while_writing)
    assert len(RecordReader(work).run_records(cycle)) == 2
    store.close()


def test_threads_of_one_session_writing_at_once_keep_every_record(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """32 item threads finishing attempts together: every row and every run-log line is there, whole, and the
    threads took turns before SQLite saw them (its busy handler, set here to give up at once, would answer
    'database is locked' to a thread that found another's transaction open)."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from harness.records import store as store_module

    connect = store_module.connect_writer
    monkeypatch.setattr(store_module, "connect_writer", lambda path, **options: connect(path, busy_timeout_s=0,
                                                                                        **options))
    work = tmp_path / "WORK"
    store = RecordStore(work)
    cycle = store.allocate_cycle(DAY)
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda n: attempt(store, cycle, f"case-{n:03d}", 1), range(160)))
    assert len(store.rows()) == 160
    entries = json.loads(store.run_log_path(cycle).read_text())
    assert sorted(e["artifact_path"].split("/")[-2] for e in entries) == [f"case-{n:03d}" for n in range(160)]
    store.close()
