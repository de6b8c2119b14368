"""Sharded CI runs (issue 25, part 2): ``--harness-shard I/N`` splits a session's items, ``harness merge`` makes the
shards' work folders one cycle whose records are an unsharded run's, and the compare gate works on a fresh checkout
(a restored baseline, or a loud failure with ``--harness-compare-required``).

Shards run as CI runs them: each in a checkout of its own with the default ``WORK/``, which is then set aside as
the artifact a merge job downloads (``shards/shard-I``). pytest runs in-process where the outcome is what matters,
in a subprocess for pytest-xdist; ``harness merge`` runs as a real command, as a CI step runs it.
"""

from __future__ import annotations

import collections
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas  # noqa: F401 - imported once here: an in-process run that compares must not import numpy again
import pytest

from conftest import AGENT_MODULE, QUALITY_RUBRIC, Project
from harness.face.shards import shard_of

AGENTS = """\
agents:
  writer:
    rubric: quality
    producer: {{python: "agentlib:produce"}}
    reviser: {{python: "agentlib:revise"}}
    max_attempts: {writer_attempts}
  solo:
    rubric: quality
    producer: {{python: "agentlib:produce"}}
    reviser: {{python: "agentlib:stubborn"}}
    max_attempts: 2
"""

# 11 cases of writer (passing at once, revised for the greeting, revised for length) and the one case of solo
# (its records straight under runs/{cycle}/solo/), which never passes: 12 items.
TEXTS = ("hello case {i}", "case {i} has no greeting", "hello case {i} " + "word " * 15)
CYCLE_FILES = {".alive.lock", ".run-log.lock", ".reconciled", ".session", "run-log.json", "execution-results.jsonl",
               "shard.json", "merged.json", "reconciliation.json"}


def writer_cases(count: int = 11, extra: tuple[str, ...] = ()) -> str:
    lines = ["agent: writer", "cases:"]
    ids = [f"c{i:02d}" for i in range(1, count + 1)]
    ids[count // 2:count // 2] = list(extra)  # added cases go in the middle: positions move, shards must not
    for number, case in enumerate(ids, 1):
        lines += [f"  - id: {case}", f"    inputs: {{text: \"{TEXTS[number % 3].format(i=number)}\"}}"]
    return "\n".join(lines) + "\n"


def suite(project: Project, *, writer_attempts: int = 3, version: str = "1.2.0", threshold: float = 0.8) -> Project:
    project.rubric("quality", QUALITY_RUBRIC.replace('"1.2.0"', f'"{version}"').replace("threshold: 0.8",
                                                                                          f"threshold: {threshold}"))
    project.write("agentlib.py", AGENT_MODULE)
    project.agents(AGENTS.format(writer_attempts=writer_attempts))
    project.cases("writer", writer_cases())
    project.cases("solo", "agent: solo\ncases:\n  - id: lonely\n    inputs: {text: \"no greeting at all here\"}\n")
    return project


def run_into(project: Project, folder: str, *args: str) -> Path:
    """One run in the checkout (its WORK/ as CI's would be), then its WORK/ set aside as ``folder``."""
    result = project.run("suites/", *args)
    assert result.ret in (0, 1), result.stdout.str()
    place = project.root / folder
    place.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(project.work), str(place))
    return place


def run_shards(project: Project, count: int = 3, *args: str) -> list[Path]:
    return [run_into(project, f"shards/shard-{i}", f"--harness-shard={i}/{count}", *args) for i in range(1, count + 1)]


def harness(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``harness`` command, as a CI step runs it, in the project's folder."""
    return subprocess.run([sys.executable, "-m", "harness.apps.cli", *args], cwd=project.root, capture_output=True,
                          text=True, timeout=120)


def merge(project: Project, shards: list[Path], *args: str, into: str = "WORK") -> subprocess.CompletedProcess[str]:
    return harness(project, "merge", *(str(s.relative_to(project.root)) for s in shards), "--into", into, *args)


# --- what the records say, set beside another run's ---------------------------------------------------------


def inside(path: str | None) -> str | None:
    """A records path with its work folder and cycle set aside: ``writer/c01/attempt-1.md``."""
    return path.split("runs/", 1)[1].split("/", 1)[1] if path else path


def connect(work: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(work / "harness.db")
    conn.row_factory = sqlite3.Row
    return conn


def only_cycle(work: Path) -> str:
    (cycle,) = {row[0] for row in connect(work).execute("SELECT DISTINCT cycle_id FROM agent_runs")}
    return cycle


def attempt_rows(work: Path, cycle: str) -> list[dict[str, Any]]:
    """Every attempt of the cycle, ids, cycle, start times and durations set aside, JSON decoded."""
    rows = []
    query = ("SELECT r.*, d.* FROM agent_runs r JOIN attempt_details d ON d.run_id = r.id WHERE r.cycle_id = ?")
    for row in map(dict, connect(work).execute(query, (cycle,))):
        for name in ("id", "run_id", "cycle_id", "created_at", "duration_ms"):
            row.pop(name)
        row["artifact_path"] = inside(row["artifact_path"])
        for name in ("dimension_scores", "suggested_fixes", "dimensions", "samples", "model_usage", "commands"):
            row[name] = json.loads(row[name]) if row[name] is not None else None
        rows.append(row)
    return sorted(rows, key=lambda r: (r["nodeid"], r["attempt"]))


def timeless(entry: dict[str, Any]) -> dict[str, Any]:
    entry = {k: v for k, v in entry.items() if k not in ("created_at", "duration_ms", "cycle_id")}
    entry["artifact_path"] = inside(entry["artifact_path"])
    return entry


def run_log(work: Path, cycle: str) -> list[dict[str, Any]]:
    entries = json.loads((work / "runs" / cycle / "run-log.json").read_text(encoding="utf-8"))
    return sorted((timeless(e) for e in entries), key=lambda e: (e["artifact_path"], e["attempt"]))


def loop_results(work: Path, cycle: str) -> dict[str, Any]:
    found = {}
    for row in connect(work).execute("SELECT * FROM loop_results WHERE cycle_id = ?", (cycle,)):
        result = json.loads(row["result"])
        result["artifactPath"] = inside(result["artifactPath"])
        result["allRuns"] = [timeless(r) for r in result["allRuns"]]
        found[row["nodeid"]] = (row["agent_name"], row["case_id"], result, json.loads(row["case_data"] or "null"))
    return found


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def execution_results(work: Path, cycle: str) -> list[tuple[Any, ...]]:
    return sorted((r["nodeid"], r["status"], r["exit_code"], r["attempts"],
                   tuple(inside(a["path"]) for a in r["outputs"]["artifacts"]))
                  for r in lines(work / "runs" / cycle / "execution-results.jsonl"))


def trace_events(work: Path, cycle: str) -> collections.Counter[tuple[str, str | None]]:
    return collections.Counter((line["event"], line["data"].get("nodeid"))
                               for line in lines(work / "traces" / f"{cycle}.jsonl"))


def item_files(work: Path, cycle: str) -> dict[str, bytes | None]:
    """The items' files of the cycle: each artifact's bytes (the agents' text); the other files by name."""
    folder = work / "runs" / cycle
    return {path.relative_to(folder).as_posix(): (path.read_bytes() if path.suffix == ".md" else None)
            for path in folder.rglob("*") if path.is_file() and path.name not in CYCLE_FILES}


def snapshot(work: Path) -> dict[str, Any]:
    """Everything a merge could change in a work folder: every row (ids too) and every file's bytes (locks and the
    database's own files aside)."""
    conn = connect(work)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rows = {table: sorted(map(tuple, conn.execute(f"SELECT * FROM {table}")), key=repr) for table in tables}
    files = {p.relative_to(work).as_posix(): p.read_bytes() for p in work.rglob("*")
             if p.is_file() and not p.name.endswith((".lock", "harness.db", "-wal", "-shm"))}
    return {"rows": rows, "files": files}


def one_line(text: str) -> str:
    found = [line for line in text.splitlines() if line.strip()]
    assert len(found) == 1 and "Traceback" not in text, text
    return found[0]


# --- the split ----------------------------------------------------------------------------------------------


def collected(project: Project, *args: str, paths: tuple[str, ...] = ("suites/",)) -> list[str]:
    result = project.run(*paths, "--collect-only", "-q", *args)
    assert result.ret == 0, result.stdout.str()
    return [line.strip() for line in result.outlines if "::" in line and not line.startswith(" ")]


def test_the_shards_split_every_item_once_and_adding_a_case_moves_no_other(project: Project) -> None:
    suite(project)
    project.write("tests_plain/test_plain.py", "".join(f"def test_{i}():\n    pass\n\n" for i in range(9)))
    both = ("suites/", "tests_plain/")
    everything = collected(project, paths=both)
    assert len(everything) == 12 + 9
    shards = {i: collected(project, f"--harness-shard={i}/3", paths=both) for i in (1, 2, 3)}
    assert sorted(sum(shards.values(), [])) == sorted(everything)  # each item in exactly one shard
    assert all(shards.values())
    with_plain = [i for i, found in shards.items() if any(n.startswith("tests_plain/") for n in found)]
    assert len(with_plain) > 1, "plain pytest tests are split too, not run in every shard"

    # three cases added in the middle of the file, a new case file: every earlier item stays in its shard
    project.cases("writer", writer_cases(extra=("new-a", "new-b", "new-c")))
    project.cases("later", "agent: writer\ncases:\n  - id: z1\n    inputs: {text: hello}\n")
    after = {i: collected(project, f"--harness-shard={i}/3", paths=both) for i in (1, 2, 3)}
    for i in (1, 2, 3):
        assert set(shards[i]) <= set(after[i]), f"shard {i} lost {set(shards[i]) - set(after[i])}"
    assert sum(map(len, after.values())) == len(everything) + 4


def test_the_split_is_a_stable_hash_that_spreads_items_evenly() -> None:
    """The shard of a node id is fixed (a change of hash would move every case of every CI job) and about 1/N of
    many items land in each."""
    assert [shard_of(f"suites/writer.cases.yaml::c{i:02d}", 3) for i in range(1, 7)] == [2, 3, 2, 2, 2, 1]
    spread = collections.Counter(shard_of(f"suites/s{i % 7}.cases.yaml::case-{i}", 4) for i in range(4000))
    assert sorted(spread) == [1, 2, 3, 4] and all(900 < n < 1100 for n in spread.values()), spread


@pytest.mark.parametrize(("given", "said"), [
    (("--harness-shard", "4/3"), "argument --harness-shard: '4/3': the shard must be 1 to 3 (fix: shards count "
                                 "from 1, such as 1/3 to 3/3)"),
    (("--harness-shard", "two"), "argument --harness-shard: 'two' is not I/N (fix: give this job's shard and the "
                                 "number of shards, such as 2/3 for the second of three)"),
    (("-o", "harness_shard=1/0"), "ini harness_shard = '1/0': '1/0': the number of shards must be 1 to 1000"),
], ids=["shard-past-the-count", "not-i-of-n", "ini-no-shards"])
def test_a_bad_shard_is_one_usage_error_naming_the_option_and_the_fix(project: Project, given: tuple[str, str],
                                                                       said: str) -> None:
    suite(project)
    result = project.run("suites/", *given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not project.work.exists()


def test_a_shard_that_draws_no_item_passes_and_says_so_also_under_xdist(project: Project) -> None:
    suite(project)
    project.cases("writer", "agent: writer\ncases:\n  - id: only\n    inputs: {text: hello there}\n")
    (project.root / "suites" / "solo.cases.yaml").unlink()
    mine = shard_of("suites/writer.cases.yaml::only", 4)
    empty = 1 if mine != 1 else 2
    for extra in ((), ("-n", "2")):
        result = project.run("suites/", f"--harness-shard={empty}/4", *extra, subprocess=bool(extra))
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines([f"harness: shard {empty}/4 holds none of the 1 item collected; nothing to run "
                                     "(exit status 0)"])
    result = project.run("suites/", f"--harness-shard={mine}/4")
    result.assert_outcomes(passed=1)


def test_a_shard_under_xdist_records_exactly_its_items_in_one_cycle(project: Project) -> None:
    suite(project)
    mine = {n for n in collected(project, "--harness-shard=2/3")}
    result = project.run("suites/", "--harness-shard=2/3", "-n", "2", subprocess=True)
    failing = "suites/solo.cases.yaml::lonely" in mine  # solo's case never passes
    assert result.ret == (1 if failing else 0), result.stdout.str()
    result.stdout.fnmatch_lines([f"2 workers [[]{len(mine)} items[]]"])
    cycle = only_cycle(project.work)
    recorded = {row["nodeid"] for row in attempt_rows(project.work, cycle)}
    assert recorded == mine
    shard = json.loads((project.work / "runs" / cycle / "shard.json").read_text(encoding="utf-8"))
    assert shard == {"shard": "2/3", "items": len(mine), "collected": 12}


# --- the merge ----------------------------------------------------------------------------------------------


def test_three_merged_shards_hold_the_records_of_one_unsharded_run(project: Project) -> None:
    suite(project)
    reference = run_into(project, "reference")
    shards = run_shards(project)
    done = merge(project, shards)
    assert done.returncode == 0, done.stderr
    work = project.work
    cycle = only_cycle(work)
    assert cycle == only_cycle(reference)  # the shards' own id: the target had none
    assert done.stdout.splitlines() == [
        f"harness merge: cycle {cycle} of WORK (the shards' own id): 12 items, "
        f"{len(attempt_rows(reference, cycle))} attempts from 3 shards",
        *(f"  shards/shard-{i} (cycle {cycle}, shard {i}/3): "
          f"{json.loads((s / 'runs' / cycle / 'shard.json').read_text())['items']} items"
          for i, s in enumerate(shards, 1))]

    assert attempt_rows(work, cycle) == attempt_rows(reference, cycle)
    assert run_log(work, cycle) == run_log(reference, cycle)
    assert loop_results(work, cycle) == loop_results(reference, cycle)
    assert execution_results(work, cycle) == execution_results(reference, cycle)
    assert trace_events(work, cycle) == trace_events(reference, cycle)
    assert item_files(work, cycle) == item_files(reference, cycle)
    assert "solo/attempt-2.md" in item_files(work, cycle)  # a one-case agent keeps the flat layout, as unsharded
    for row in connect(work).execute("SELECT artifact_path FROM agent_runs"):
        assert row[0].startswith(f"WORK/runs/{cycle}/") and (project.root / row[0]).is_file(), row[0]

    for command in (("history",), ("history", "--format", "json"), ("report", "latest", "--markdown", "-o", "-")):
        merged = harness(project, *command, "--work-dir", "WORK")
        unsharded = harness(project, *command, "--work-dir", "reference")
        assert merged.returncode == 0 and merged.stdout == unsharded.stdout, (merged.stdout, unsharded.stdout)
    assert "**1 failed**, 11 passed" in merged.stdout


def test_merging_the_same_shards_again_changes_nothing_and_says_so(project: Project) -> None:
    suite(project)
    shards = run_shards(project)
    assert merge(project, shards).returncode == 0
    before = snapshot(project.work)
    again = merge(project, [shards[2], shards[0], shards[1], shards[0]])  # any order, one of them twice
    assert again.returncode == 0, again.stderr
    cycle = only_cycle(project.work)
    assert again.stdout.strip() == (f"harness merge: nothing to do: these 3 shards are already merged into cycle "
                                    f"{cycle} of WORK; it was left as it was")
    assert snapshot(project.work) == before
    copy = project.root / "download" / "shard-2"  # the same artifact downloaded twice
    shutil.copytree(shards[1], copy)
    assert merge(project, [shards[0], copy]).stdout.startswith("harness merge: nothing to do: these 2 shards")
    assert snapshot(project.work) == before


def test_two_versions_of_one_rubric_are_refused_in_one_line_and_nothing_is_written(project: Project) -> None:
    suite(project)
    first = run_into(project, "shards/shard-1", "--harness-shard=1/3")
    suite(project, version="1.3.0")  # a commit between the shard jobs changed the rubric
    rest = [run_into(project, f"shards/shard-{i}", f"--harness-shard={i}/3") for i in (2, 3)]
    done = merge(project, [first, *rest])
    assert done.returncode == 65
    cycle = only_cycle(first)
    assert one_line(done.stderr) == (
        f"harness: rubric quality is version 1.2.0 in shards/shard-1 (cycle {cycle}, shard 1/3) and version 1.3.0 "
        f"in shards/shard-2 (cycle {cycle}, shard 2/3): one merged cycle holds one version of each rubric (fix: run "
        "every shard from the same commit, or merge only the shards that ran one version)")
    assert done.stdout == "" and not project.work.exists()


def test_overlapping_shards_and_shards_of_different_splits_are_refused(project: Project) -> None:
    suite(project)
    first = run_into(project, "shards/shard-1", "--harness-shard=1/3")
    suite(project, writer_attempts=1)  # the same shard run again, with other results
    again = run_into(project, "shards/shard-1-again", "--harness-shard=1/3")
    other = run_into(project, "shards/quarter", "--harness-shard=2/4")
    done = merge(project, [first, again])
    assert done.returncode == 65
    line = one_line(done.stderr)
    assert line.startswith("harness: shards/shard-1 (cycle ") and "both hold suites/" in line
    assert line.endswith("with different records: the shards overlap (fix: give each shard's work folder once, all "
                         "from one run split with the same --harness-shard I/N; a shard job run again replaces its "
                         "folder)")
    done = merge(project, [first, other])
    assert done.returncode == 65
    assert one_line(done.stderr) == ("harness: shards/shard-1 ran shard 1/3 and shards/quarter shard 2/4: shards of "
                                     "different splits (fix: merge the shards of one run, all with the same "
                                     "--harness-shard I/N)")
    assert not project.work.exists()


def test_a_failed_merge_leaves_the_target_as_it_was(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows are rolled back and the files moved out again when anything fails before the commit: here the
    rename of the trace, after the cycle folder was already in place."""
    import harness.records.merge.write as write
    from harness.records.merge import merge_shards

    suite(project)
    previous = run_into(project, "previous")
    shards = run_shards(project)
    shutil.copytree(previous, project.work)  # the restored records of the previous run
    before = snapshot(project.work)
    rename = write.os.rename

    def failing(source: Any, place: Any) -> None:
        if "traces" in Path(place).parts and Path(source).name.endswith(".jsonl") and ".merge-" in str(source):
            raise OSError(28, "No space left on device")
        rename(source, place)

    monkeypatch.setattr(write.os, "rename", failing)
    with pytest.raises(OSError, match="No space left"):
        merge_shards(shards, project.work)
    monkeypatch.setattr(write.os, "rename", rename)
    assert snapshot(project.work) == before
    assert not list(project.work.glob(".merge-*"))
    assert merge(project, shards).returncode == 0  # and the same merge, tried again, is made whole


def test_an_attempt_a_killed_shard_left_running_is_merged_as_interrupted(project: Project) -> None:
    suite(project)
    shards = run_shards(project)
    conn = sqlite3.connect(shards[0] / "harness.db")
    run_id, artifact = conn.execute("SELECT id, artifact_path FROM agent_runs ORDER BY id DESC LIMIT 1").fetchone()
    with conn:  # the job was killed during this attempt: its row says running, its run-log entry was never written
        conn.execute("UPDATE agent_runs SET status = 'running', overall_score = NULL WHERE id = ?", (run_id,))
        conn.execute("UPDATE attempt_details SET outcome = 'running' WHERE run_id = ?", (run_id,))
    conn.close()
    cycle = only_cycle(shards[0])
    log = shards[0] / "runs" / cycle / "run-log.json"
    entries = [e for e in json.loads(log.read_text()) if e["artifact_path"] != artifact]
    log.write_text("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")
    assert merge(project, shards).returncode == 0
    rows = [r for r in attempt_rows(project.work, cycle) if r["artifact_path"] == inside(artifact)]
    assert [(r["status"], r["outcome"], r["exit_code"]) for r in rows] == [("escalated", "interrupted", 3)]
    logged = [e for e in run_log(project.work, cycle) if e["artifact_path"] == inside(artifact)]
    assert [e["status"] for e in logged] == ["escalated"]


# --- the compare gate on a fresh checkout -------------------------------------------------------------------


def restore_baseline(project: Project, previous: Path) -> None:
    """What a CI job restores from its cache: the previous run's harness.db, nothing else."""
    project.work.mkdir()
    for database in previous.glob("harness.db*"):  # with its write-ahead log, as a session left it
        shutil.copy2(database, project.work / database.name)


def test_a_restored_baseline_lets_the_merged_run_flag_its_regressions(project: Project) -> None:
    suite(project)
    previous = run_into(project, "previous")  # yesterday's run: every writer case revised until it passed
    baseline = only_cycle(previous)
    # today's: no revision, so the cases that needed one end lower; a lower bar lets the long ones still pass
    suite(project, writer_attempts=1, version="1.3.0", threshold=0.5)
    shards = run_shards(project)
    restore_baseline(project, previous)
    done = merge(project, shards, "--compare", "latest")
    assert done.returncode == 1, done.stdout + done.stderr
    merged = max(c for c in {r[0] for r in connect(project.work).execute("SELECT cycle_id FROM agent_runs")})
    assert merged == f"{baseline[:10]}-002"  # the shards' -001 is the restored baseline's: a new id
    out = done.stdout.splitlines()
    assert out[0].startswith(f"harness merge: cycle {merged} of WORK (a new id: the shards' {baseline} is taken "
                             "there): 12 items")
    assert f"harness compare: cycle {merged} against {baseline} (overall > 0.05, dimension > 0.1)" in out
    dropped = [line.split()[1] for line in out if line.startswith("FAILED ")]
    revised = [f"suites/writer.cases.yaml::c{i:02d}" for i in range(1, 12) if i % 3]  # those that needed revision
    assert dropped == revised
    assert "    overall 1.000 -> 0.400 (-0.600)" in out
    assert out[-1] == f"{len(revised)} of 12 compared items dropped beyond the margin"
    assert "    overall 1.000 -> 0.600 (-0.400)" in out  # one that passed today's bar, and dropped
    # the items that passed but dropped are failed in the records too, as the pytest gate fails them
    verdicts = {r["nodeid"]: r["verdict"] for r in attempt_rows(project.work, merged) if r["verdict"]}
    assert verdicts == {f"suites/writer.cases.yaml::c{i:02d}": "failed" for i in (2, 5, 8, 11)}
    history = harness(project, "history", "--work-dir", "WORK", "--format", "json")
    rows = [row for row in json.loads(history.stdout) if row["agent"] == "writer"]
    assert [(row["cycle"], row["items"], row["judged"], round(row["pass_rate"] * row["judged"])) for row in rows] == [
        (baseline, 11, 11, 11), (merged, 11, 11, 3)]


def test_without_a_baseline_the_required_gate_fails_loudly(project: Project) -> None:
    suite(project)
    result = project.run("suites/", "--harness-compare", "latest", "--harness-compare-required")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert one_line(result.stderr.str()) == (
        f"ERROR: --harness-compare latest: no earlier cycle with records in {project.work} to compare with, and "
        f"--harness-compare-required asks for a comparison (fix: restore the previous run's harness.db into "
        f"{project.work} before the run, docs/ci.md; or leave --harness-compare-required out of the first run)")
    assert not project.work.exists()  # nothing ran, nothing was spent
    project.ini("harness_compare_required = true\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini harness_compare_required asks for a comparison" in result.stderr.str()

    project.ini()
    shards = run_shards(project)
    done = merge(project, shards, "--compare-required")
    assert done.returncode == 66
    assert one_line(done.stderr).startswith("harness merge: --compare latest: no earlier cycle in WORK to compare "
                                            "cycle ")
    plain = merge(project, shards, "--compare", "latest", into="WORK_B")
    assert plain.returncode == 0
    assert plain.stdout.splitlines()[-1] == ("harness compare: no earlier cycle in WORK_B to compare with; nothing "
                                             "was compared")


def test_a_shard_compares_against_a_restored_baseline_with_the_pytest_gate(project: Project) -> None:
    suite(project)
    previous = run_into(project, "previous")
    suite(project, writer_attempts=1)
    restore_baseline(project, previous)
    mine = collected(project, "--harness-shard=1/3")
    result = project.run("suites/", "--harness-shard=1/3", "--harness-compare-required")
    revised = [n for n in mine if n.startswith("suites/writer") and int(n[-2:]) % 3]
    assert revised and result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([f"*harness compare against {only_cycle(previous)}*",
                                 f"{len(revised)} of {len(mine)} compared items dropped beyond the margin"])
