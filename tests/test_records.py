"""Records: the seed's agent_runs table, cycle ids, the artifact layout, run-log.json and crash safety."""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from pathlib import Path

import pytest

from conftest import Project

SEEDS = Path("/work/shared/seeds")

# Seed 000 section 1, the SQLite table, as the seed writes it (used when the seed file is not around).
SEED_SQL_COPY = """
CREATE TABLE IF NOT EXISTS agent_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  cycle_id TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL CHECK (status IN ('running', 'passed', 'failed', 'escalated')),
  overall_score REAL,
  dimension_scores TEXT,  -- JSON string
  feedback TEXT,
  suggested_fixes TEXT,   -- JSON array string
  artifact_path TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  duration_ms INTEGER,
  rubric_version TEXT
);

CREATE INDEX idx_agent_runs_cycle ON agent_runs(cycle_id);
CREATE INDEX idx_agent_runs_agent ON agent_runs(agent_name);
CREATE INDEX idx_agent_runs_status ON agent_runs(status);
"""

RUN_RECORD_FIELDS = {"cycle_id", "agent_name", "attempt", "status", "overall_score", "dimension_scores", "feedback",
                     "suggested_fixes", "artifact_path", "created_at", "duration_ms", "rubric_version"}
EVALUATOR_OUTPUT_FIELDS = {"overallScore", "passed", "dimensionScores", "feedback", "suggestedFixes", "metadata"}
CYCLE_ID = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{3}$")

FAIL_THEN_PASS = """\
agent: writer
cases:
  - id: greet
    inputs: {text: "goodbye friend"}
"""


def seed_sql() -> str:
    """The ```sql block of seed 000 section 1 ("SQLite Table"), or the copy above without /work/shared."""
    seed = sorted(SEEDS.glob("000_*.txt")) if SEEDS.is_dir() else []
    if not seed:
        return SEED_SQL_COPY
    text = seed[0].read_text(encoding="utf-8")
    section = text[text.index("## 1."):text.index("## 2.")]
    return re.search(r"```sql\n(.*?)```", section, re.S)[1]


def normalise(sql: str | None) -> str:
    """SQL without comments, IF NOT EXISTS and layout, to compare definitions."""
    sql = re.sub(r"--[^\n]*", "", sql or "")
    sql = re.sub(r"\bIF NOT EXISTS\b", "", sql, flags=re.I)
    sql = re.sub(r"\s+", " ", sql)
    return re.sub(r"\s*([(),])\s*", r"\1", sql).strip().rstrip(";")


def schema_of(conn: sqlite3.Connection) -> dict[str, object]:
    return {
        "columns": conn.execute("PRAGMA table_info(agent_runs)").fetchall(),
        "table_sql": normalise(conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'agent_runs'").fetchone()[0]),
        "indexes": sorted((name, unique, origin, partial) for _, name, unique, origin, partial
                          in conn.execute("PRAGMA index_list(agent_runs)").fetchall()),
        "index_columns": {name: conn.execute(f"PRAGMA index_info({name})").fetchall()
                          for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                                      "AND tbl_name = 'agent_runs' AND sql IS NOT NULL")},
        "index_sql": sorted(normalise(sql) for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'agent_runs' AND sql IS NOT NULL")),
    }


def test_agent_runs_has_exactly_the_seeds_columns_check_and_indexes(project: Project) -> None:
    project.standard(FAIL_THEN_PASS)
    project.run("suites/").assert_outcomes(passed=1)

    seed = sqlite3.connect(":memory:")
    seed.executescript(seed_sql())
    ours = sqlite3.connect(project.work / "harness.db")
    try:
        expected, actual = schema_of(seed), schema_of(ours)
        assert [c[1] for c in actual["columns"]] == [
            "id", "cycle_id", "agent_name", "attempt", "status", "overall_score", "dimension_scores", "feedback",
            "suggested_fixes", "artifact_path", "created_at", "duration_ms", "rubric_version"]
        assert actual == expected
        assert "CHECK(status IN('running','passed','failed','escalated'))" in actual["table_sql"]
        assert {name for name, *_ in actual["indexes"]} == {
            "idx_agent_runs_cycle", "idx_agent_runs_agent", "idx_agent_runs_status"}
        # The CHECK is enforced, not just declared.
        with pytest.raises(sqlite3.IntegrityError):
            ours.execute("INSERT INTO agent_runs (cycle_id, agent_name, status) VALUES ('x', 'y', 'done')")
    finally:
        seed.close()
        ours.close()


def test_cycle_ids_are_dated_and_numbered_per_session(project: Project) -> None:
    project.standard(FAIL_THEN_PASS)
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    project.run("suites/").assert_outcomes(passed=1)
    project.run("suites/").assert_outcomes(passed=1)
    cycles = project.cycles()
    assert all(CYCLE_ID.match(c) for c in cycles), cycles
    assert cycles == [f"{today}-001", f"{today}-002"]
    rows = project.rows()
    assert [r["cycle_id"] for r in rows] == [cycles[0]] * 2 + [cycles[1]] * 2
    for cycle in cycles:
        assert {e["cycle_id"] for e in project.run_log(cycle)} == {cycle}


def test_artifact_layout_eval_json_and_run_log(project: Project) -> None:
    project.standard(FAIL_THEN_PASS)
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    cycle = project.cycles()[0]
    run_dir = project.work / "runs" / cycle
    assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")) == [
        "execution-results.jsonl", "run-log.json", "writer"]
    folder = run_dir / "writer"  # the seed's artifact layout, exactly
    assert sorted(p.name for p in folder.iterdir()) == [
        "attempt-1.eval.json", "attempt-1.md", "attempt-2.eval.json", "attempt-2.md", "final.md"]
    assert (folder / "final.md").read_bytes() == (folder / "attempt-2.md").read_bytes()

    # attempt-{n}.eval.json is the seed's EvaluatorOutput.
    first = json.loads((folder / "attempt-1.eval.json").read_text())
    assert set(first) == EVALUATOR_OUTPUT_FIELDS
    assert first["overallScore"] == 0.4 and first["passed"] is False
    assert set(first["dimensionScores"]) == {"greeting", "concise"}
    for dim in first["dimensionScores"].values():
        assert set(dim) == {"score", "weight", "reason"} and dim["reason"]
    assert first["dimensionScores"]["greeting"] == {
        "score": 0.0, "weight": 0.6, "reason": "0/1 required phrases present; missing: 'hello'"}
    assert first["suggestedFixes"] == ["Add 'hello'"] and first["feedback"]
    assert {"rubricVersion", "evaluatedAt", "itemsEvaluated"} <= set(first["metadata"])
    assert first["metadata"]["rubricVersion"] == "1.2.0" and first["metadata"]["itemsEvaluated"] == 1  # the artifact is one item: the rubric names no list
    assert re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", first["metadata"]["evaluatedAt"])
    second = json.loads((folder / "attempt-2.eval.json").read_text())
    assert second["overallScore"] == 1.0 and second["passed"] is True

    # run-log.json is an array of RunRecord, one per attempt, in the same order as agent_runs.
    log = project.run_log()
    assert isinstance(log, list) and len(log) == 2
    for entry in log:
        assert set(entry) == RUN_RECORD_FIELDS
    assert [(e["attempt"], e["status"], e["overall_score"]) for e in log] == [(1, "failed", 0.4), (2, "passed", 1.0)]
    assert log[0]["dimension_scores"] == {"greeting": 0.0, "concise": 1.0}
    assert log[0]["suggested_fixes"] == ["Add 'hello'"]
    assert all(e["cycle_id"] == cycle and e["agent_name"] == "writer" and e["rubric_version"] == "1.2.0"
               for e in log)
    assert all(isinstance(e["duration_ms"], int) and e["duration_ms"] >= 0 for e in log)
    assert [e["artifact_path"] for e in log] == [f"WORK/runs/{cycle}/writer/attempt-{n}.md" for n in (1, 2)]
    assert all((project.root / e["artifact_path"]).is_file() for e in log)

    # The table holds the same records.
    rows = project.rows()
    for row, entry in zip(rows, log, strict=True):
        assert row["cycle_id"] == entry["cycle_id"] and row["attempt"] == entry["attempt"]
        assert row["status"] == entry["status"] and row["overall_score"] == entry["overall_score"]
        assert json.loads(row["dimension_scores"]) == entry["dimension_scores"]
        assert json.loads(row["suggested_fixes"]) == entry["suggested_fixes"]
        assert row["artifact_path"] == entry["artifact_path"] and row["feedback"] == entry["feedback"]
        assert row["rubric_version"] == "1.2.0" and row["duration_ms"] == entry["duration_ms"]
        assert row["created_at"] == entry["created_at"]


def test_no_final_md_when_no_attempt_passed(project: Project) -> None:
    project.standard(FAIL_THEN_PASS)
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   '    reviser: {python: "agentlib:stubborn"}\n    max_attempts: 2\n')
    project.run("suites/").assert_outcomes(failed=1)
    folder = project.cycle_dir() / "writer"
    assert sorted(p.name for p in folder.iterdir()) == [
        "attempt-1.eval.json", "attempt-1.md", "attempt-2.eval.json", "attempt-2.md"]


def test_an_agent_with_two_cases_gets_a_folder_per_case(project: Project) -> None:
    project.standard("""\
agent: writer
cases:
  - id: first
    inputs: {text: "hello"}
  - id: second
    inputs: {text: "goodbye"}
""")
    project.run("suites/").assert_outcomes(passed=2)
    cycle = project.cycles()[0]
    folder = project.cycle_dir() / "writer"
    assert sorted(p.name for p in folder.iterdir()) == ["first", "second"]
    assert sorted(p.name for p in (folder / "first").iterdir()) == [
        "attempt-1.eval.json", "attempt-1.md", "final.md"]
    assert sorted(p.name for p in (folder / "second").iterdir()) == [
        "attempt-1.eval.json", "attempt-1.md", "attempt-2.eval.json", "attempt-2.md", "final.md"]
    # one execution result per item, each naming its item and how many attempts it took
    assert sorted((r["nodeid"].rsplit("::", 1)[1], r["attempts"], r["exit_code"])
                  for r in project.execution_results()) == [("first", 1, 0), ("second", 2, 0)]
    log = project.run_log()
    assert sorted(e["artifact_path"] for e in log) == [
        f"WORK/runs/{cycle}/writer/first/attempt-1.md",
        f"WORK/runs/{cycle}/writer/second/attempt-1.md",
        f"WORK/runs/{cycle}/writer/second/attempt-2.md",
    ]
    details = project.runs()
    assert sorted((d["case_id"], d["attempt"]) for d in details) == [("first", 1), ("second", 1), ("second", 2)]


@pytest.mark.parametrize("how", ["work-dir option", "ini"])
def test_the_work_folder_is_configurable(project: Project, how: str) -> None:
    project.standard(FAIL_THEN_PASS)
    if how == "ini":
        project.ini("harness_work_dir = records/here\n")
        args: tuple[str, ...] = ()
    else:
        args = ("--harness-work-dir", "records/here")
    project.run("suites/", *args).assert_outcomes(passed=1)
    assert not project.work.exists()
    work = project.root / "records" / "here"
    assert (work / "harness.db").is_file()
    (cycle,) = [p for p in (work / "runs").iterdir() if p.is_dir()]
    assert (cycle / "writer" / "final.md").is_file()
    log = json.loads((cycle / "run-log.json").read_text())
    assert len(log) == 2
    # The recorded artifact path leads to the file, from the rootdir (where pytest runs) or absolutely.
    for entry in log:
        assert (project.root / entry["artifact_path"]).resolve() == (cycle / "writer" / f"attempt-{entry['attempt']}.md")


@pytest.mark.parametrize("crash", ["interrupt", "hard_exit"])
def test_a_crash_mid_run_leaves_earlier_records_whole(project: Project, crash: str) -> None:
    """Ctrl-C (KeyboardInterrupt) or a hard exit while attempt 2 is produced."""
    project.standard("""\
agent: writer
cases:
  - id: greet
    inputs: {text: "goodbye friend"}
""")
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   f'    reviser: {{python: "agentlib:{crash}"}}\n')
    result = project.run("suites/", subprocess=True)
    assert result.ret != 0
    if crash == "interrupt":
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])

    cycle_dir = project.cycle_dir()
    folder = cycle_dir / "writer"
    # Attempt 1 is whole on disk...
    assert (folder / "attempt-1.md").read_text() == "goodbye friend"
    assert json.loads((folder / "attempt-1.eval.json").read_text())["overallScore"] == 0.4
    assert not (folder / "attempt-2.md").exists() and not (folder / "final.md").exists()
    assert not [p.name for p in cycle_dir.rglob("*") if p.name.endswith(".tmp")]
    # ...in run-log.json (valid JSON, one entry)...
    (entry,) = project.run_log()
    assert (entry["attempt"], entry["status"], entry["overall_score"]) == (1, "failed", 0.4)
    # ...and in a consistent database, where attempt 2 was started and never finished.
    conn = sqlite3.connect(project.work / "harness.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    rows = project.rows()
    assert [(r["attempt"], r["status"], r["overall_score"]) for r in rows] == [(1, "failed", 0.4), (2, "running", None)]
    assert json.loads(rows[0]["dimension_scores"]) == {"greeting": 0.0, "concise": 1.0}

    # The next session starts a new cycle; the attempt the crash cut short is recorded as interrupted.
    project.agents()
    project.run("suites/").assert_outcomes(passed=1)
    assert len(project.cycles()) == 2
    assert [(r["status"], r["outcome"]) for r in project.runs()] == [
        ("failed", "failed"), ("escalated", "interrupted"), ("failed", "failed"), ("passed", "passed")]
    assert [e["attempt"] for e in project.run_log(project.cycles()[0])] == [1, 2]


def test_two_xdist_workers_write_one_cycle(project: Project) -> None:
    """`pytest -n 2`: every case runs once, and all records land in one database and one run-log of one cycle."""
    project.standard("""\
agent: writer
cases:
  - id: c1
    inputs: {text: "hello"}
  - id: c2
    inputs: {text: "goodbye"}
  - id: c3
    inputs: {text: "hello there"}
  - id: c4
    inputs: {text: "so long"}
  - id: c5
    inputs: {text: "hello again"}
  - id: c6
    inputs: {text: "farewell"}
""")
    result = project.run("suites/", "-n", "2", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*2 workers*", "*= harness summary =*", "cycle ????-??-??-001*"])
    result.stdout.fnmatch_lines(["quality * 6 * 6 * 100% * 1.000 * 1.5 *"])

    (cycle,) = project.cycles()
    runs = project.runs()
    assert sorted((r["case_id"], r["attempt"]) for r in runs) == [
        ("c1", 1), ("c2", 1), ("c2", 2), ("c3", 1), ("c4", 1), ("c4", 2), ("c5", 1), ("c6", 1), ("c6", 2)]
    assert {r["cycle_id"] for r in runs} == {cycle}
    assert {r["status"] for r in runs} == {"passed", "failed"}
    log = project.run_log(cycle)
    assert len(log) == len(runs) and {e["cycle_id"] for e in log} == {cycle}
    assert sorted(e["artifact_path"] for e in log) == sorted(r["artifact_path"] for r in runs)
    by_path = {e["artifact_path"]: e for e in log}
    assert all(by_path[r["artifact_path"]]["created_at"] == r["created_at"] for r in runs)  # one record, one time
    for case in ("c1", "c2", "c3", "c4", "c5", "c6"):
        assert (project.work / "runs" / cycle / "writer" / case / "final.md").is_file()


def test_ctrl_c_while_cases_run_concurrently_leaves_a_consistent_store(project: Project) -> None:
    project.standard("""\
agent: writer
cases:
  - id: needs-revision
    inputs: {text: "goodbye friend"}
  - id: fine
    inputs: {text: "hello friend"}
  - id: also-fine
    inputs: {text: "hello again"}
""")
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   '    reviser: {python: "agentlib:interrupt"}\n')
    result = project.run("suites/", "--harness-concurrency", "3", subprocess=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in result.stdout.str()

    conn = sqlite3.connect(project.work / "harness.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    runs = project.runs()
    by_case = {(r["case_id"], r["attempt"]): r for r in runs}
    assert by_case[("needs-revision", 1)]["status"] == "failed"
    assert by_case[("needs-revision", 2)]["status"] == "running"
    for row in runs:  # every row is finished with a score, or visibly unfinished
        assert (row["status"] == "running") == (row["overall_score"] is None), row
    finished = sorted(r["artifact_path"] for r in runs if r["status"] != "running")
    log = project.run_log()
    assert sorted(e["artifact_path"] for e in log) == finished
    for entry in log:
        assert (project.root / entry["artifact_path"]).is_file()
        assert Path(str(project.root / entry["artifact_path"]).replace(".md", ".eval.json")).is_file()


@pytest.mark.parametrize("crash", ["interrupt", "hard_exit"])
def test_a_crash_keeps_every_finished_attempt_of_the_cycle_in_run_log(project: Project, crash: str) -> None:
    """Several attempts finish within a second, then the process dies: run-log.json still lists all of them."""
    project.standard("""\
agent: writer
cases:
  - id: a-passes
    inputs: {text: "hello"}
  - id: b-passes
    inputs: {text: "hello there"}
  - id: c-crashes
    inputs: {text: "goodbye friend"}
""")
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   f'    reviser: {{python: "agentlib:{crash}"}}\n')
    result = project.run("suites/", "--harness-concurrency", "1", subprocess=True)
    assert result.ret != 0
    finished = [r for r in project.runs() if r["status"] != "running"]
    assert sorted((r["case_id"], r["attempt"]) for r in finished) == [("a-passes", 1), ("b-passes", 1),
                                                                      ("c-crashes", 1)]
    log = project.run_log()
    assert sorted(e["artifact_path"] for e in log) == sorted(r["artifact_path"] for r in finished)


# ---------------------------------------------------------------------------------------------- one record

SLOW_MODULE = '''\
import time


def produce(request):
    """Returns once the wall clock's second has changed: the attempt ends in a later second than it began."""
    start = int(time.time())
    while int(time.time()) == start:
        time.sleep(0.01)
    return request["inputs"]["text"]
'''


def _utc(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_an_attempts_row_and_run_log_entry_carry_one_created_at_its_start(project: Project) -> None:
    """Seed 000: created_at is when the run record was created, i.e. when the attempt started."""
    project.standard(FAIL_THEN_PASS)
    project.write("slowlib.py", SLOW_MODULE)
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "slowlib:produce"}\n'
                   '    reviser: {python: "agentlib:revise"}\n')
    project.run("suites/").assert_outcomes(passed=1)
    rows, log = project.rows(), project.run_log()
    assert [r["attempt"] for r in rows] == [e["attempt"] for e in log] == [1, 2]
    for row, entry in zip(rows, log, strict=True):
        assert row["created_at"] == entry["created_at"], (row, entry)
    # attempt 1 ran into a later second before it was scored: the record has the second it started in
    evaluated = json.loads((project.cycle_dir() / "writer" / "attempt-1.eval.json").read_text())
    assert _utc(log[0]["created_at"]) < _utc(evaluated["metadata"]["evaluatedAt"])
    assert _utc(log[0]["created_at"]) <= _utc(log[1]["created_at"])


# ---------------------------------------------------------------------------------------------- LoopResult

# Seed 000 section 6's LoopResult, as a JSON Schema (finalScore is null when nobody could score the item).
LOOP_RESULT_SCHEMA = {
    "type": "object",
    "required": ["success", "finalAttempt", "finalScore", "artifactPath", "allRuns", "escalated"],
    "additionalProperties": False,
    "properties": {
        "success": {"type": "boolean"},
        "finalAttempt": {"type": "integer", "minimum": 1},
        "finalScore": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "artifactPath": {"type": "string", "minLength": 1},
        "allRuns": {"type": "array", "minItems": 1, "items": {"type": "object", "required": sorted(RUN_RECORD_FIELDS),
                                                               "properties": {f: {} for f in RUN_RECORD_FIELDS},
                                                               "additionalProperties": False}},
        "escalated": {"type": "boolean"},
        "escalationReason": {"type": "string", "minLength": 1},
    },
}


def loop_result(project: Project, case: str) -> dict:
    """The item's loop result, as the records keep it (table ``loop_results``)."""
    import jsonschema

    (row,) = project.rows("SELECT result FROM loop_results WHERE case_id = ?", (case,))
    data = json.loads(row["result"])
    jsonschema.validate(data, LOOP_RESULT_SCHEMA)
    return data


def test_each_item_writes_its_loop_result(project: Project) -> None:
    project.standard("""\
agent: writer
cases:
  - id: revised
    inputs: {text: "goodbye friend"}
  - id: stuck
    inputs: {text: "goodbye friend"}
""")
    project.write("stucklib.py", "def revise(request):\n    if request['case'] == 'stuck':\n"
                  "        return request['artifact']\n    from agentlib import revise\n    return revise(request)\n")
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   '    reviser: {python: "stucklib:revise"}\n    max_attempts: 2\n')
    project.run("suites/").assert_outcomes(passed=1, failed=1)
    cycle = project.cycles()[0]
    log = project.run_log()

    passed = loop_result(project, "revised")
    assert passed == {
        "success": True, "finalAttempt": 2, "finalScore": 1.0,
        "artifactPath": f"WORK/runs/{cycle}/writer/revised/attempt-2.md",
        "allRuns": [e for e in log if "/revised/" in e["artifact_path"]], "escalated": False}
    assert [r["attempt"] for r in passed["allRuns"]] == [1, 2]

    stuck = loop_result(project, "stuck")
    assert (stuck["success"], stuck["finalAttempt"], stuck["finalScore"], stuck["escalated"]) == (False, 2, 0.4, True)
    assert stuck["escalationReason"] == "below threshold 0.80 after 2 attempts"
    assert stuck["allRuns"] == [e for e in log if "/stuck/" in e["artifact_path"]]
    assert [r["status"] for r in stuck["allRuns"]] == ["failed", "escalated"]


def test_an_agent_with_one_case_has_its_loop_result_too(project: Project) -> None:
    project.standard(FAIL_THEN_PASS)
    project.run("suites/").assert_outcomes(passed=1)
    result = loop_result(project, "greet")
    assert (result["success"], result["finalAttempt"], result["allRuns"]) == (True, 2, project.run_log())
    assert "escalationReason" not in result
