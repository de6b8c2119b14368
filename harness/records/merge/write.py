"""A merge written into the target work folder, whole or not at all.

Everything is built first in a staging folder inside the target (``.merge-*``, on the same file system): the cycle
folder with every item's files, run-log.json, execution-results.jsonl, merged.json and the ``.reconciled`` mark, and
the cycle's trace. Then, holding the target's ``.cycle.lock`` (so no session takes a cycle meanwhile), one SQLite
transaction inserts the rows; inside it the staged folder and trace are renamed into place, and the transaction
commits. An error anywhere before the commit rolls the rows back and moves the files out again: the target is as it
was. (A process killed between the renames and the commit leaves a cycle folder that no row names, which no reader
shows, and the next merge takes the next cycle id.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.clock import utc_now
from harness.base.errors import ExitCode
from harness.base.fileio import atomic_write_json, atomic_write_text, file_lock
from harness.base.jsonlines import json_line
from harness.records.database import connect_writer, transaction
from harness.records.layout import (
    EXECUTION_RESULTS_NAME,
    MERGED_FILE,
    RECONCILED_MARK,
    RUN_LOG_NAME,
    cycle_path,
    database_path,
    runs_path,
    trace_path,
    traces_path,
)
from harness.records.merge.plan import MergePlan
from harness.records.merge.read import Attempt, MergeRefused, ShardRecords, run_log_entry
from harness.records.merge.relocate import Relocate
from harness.records.reader import select_merged_shards, select_used_cycles
from harness.records.runlog import write_entries
from harness.records.schema import MERGED_SHARDS_SCHEMA, ensure_schema

_RUN_JSON = {"dimension_scores": True, "suggested_fixes": True}  # JSON columns, and whether written ASCII-only
_DETAIL_JSON = {"dimensions": True, "samples": True, "model_usage": True, "commands": True}
_LOOP_JSON = {"result": False}


@dataclass
class MergeResult:
    plan: MergePlan
    cycle_id: str
    already: bool = False  # the target held these shards' records already: nothing was written
    kept_id: bool = False  # the merged cycle has the shards' own id


def write_merge(plan: MergePlan) -> MergeResult:
    target = plan.target
    made_target = not target.exists()
    made_database = not database_path(target).exists()
    try:
        target.mkdir(parents=True, exist_ok=True)
        with file_lock(target / ".cycle.lock"):
            conn = connect_writer(database_path(target))
            try:
                ensure_schema(conn)
                done = _merged_before(conn, plan)
                if done is not None:
                    return MergeResult(plan, done, already=True)
                cycle_id, kept = _cycle_id(conn, plan)
                _write(conn, plan, cycle_id)
                with contextlib.suppress(sqlite3.Error):  # harness.db whole on its own: what a CI cache keeps
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                return MergeResult(plan, cycle_id, kept_id=kept)
            finally:
                conn.close()
    except BaseException:
        if made_target:
            shutil.rmtree(target, ignore_errors=True)
        elif made_database:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{database_path(target)}{suffix}")
        raise


def _merged_before(conn: sqlite3.Connection, plan: MergePlan) -> str | None:
    """The cycle an earlier merge made of every one of these shards, if there is one."""
    wanted = {shard.fingerprint for shard in plan.shards}
    by_cycle: dict[str, set[str]] = {}
    for row in select_merged_shards(conn):
        by_cycle.setdefault(row["cycle_id"], set()).add(row["fingerprint"])
    return next((cycle for cycle, held in sorted(by_cycle.items()) if wanted <= held), None)


def _cycle_id(conn: sqlite3.Connection, plan: MergePlan) -> tuple[str, bool]:
    """The shards' own cycle id when they all have the same one and the target has no such cycle; else the next
    free id of the shards' (earliest) day in the target."""
    ids = sorted({shard.cycle_id for shard in plan.shards})
    day = ids[0][:10]
    taken = set(select_used_cycles(conn, day))
    runs = runs_path(plan.target)
    if runs.is_dir():
        taken |= {p.name for p in runs.glob(f"{day}-[0-9][0-9][0-9]")}
    taken |= {p.stem for p in traces_path(plan.target).glob(f"{day}-*.jsonl")}
    if len(ids) == 1 and ids[0] not in taken:
        return ids[0], True
    numbers = [int(name[len(day) + 1:]) for name in taken if name[len(day) + 1:].isdigit()]
    return f"{day}-{max(numbers, default=0) + 1:03d}", False


def _write(conn: sqlite3.Connection, plan: MergePlan, cycle_id: str) -> None:
    staging = plan.target / f".merge-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    moved: list[tuple[Path, Path]] = []  # (staged, in place): undone when the transaction does not commit
    committed = False
    try:
        prefix = _prefix(plan)
        moves = {shard.fingerprint: Relocate(shard.cycle_id, cycle_id, prefix) for shard in plan.shards}
        attempts = _attempts(plan)
        staged_cycle, staged_trace = _stage(plan, staging, cycle_id, moves, attempts)
        with transaction(conn):
            _insert_rows(conn, plan, cycle_id, moves, attempts)
            for source, place in ((staged_cycle, cycle_path(plan.target, cycle_id)),
                                  (staged_trace, trace_path(plan.target, cycle_id))):
                if source is None:
                    continue
                if place.exists():  # only a cycle id no folder and no trace has is chosen
                    raise MergeRefused(f"{place} appeared while merging (fix: merge again)", ExitCode.TEMP_FAIL)
                place.parent.mkdir(parents=True, exist_ok=True)
                os.rename(source, place)
                moved.append((source, place))
        committed = True
    finally:
        if not committed:
            for source, place in reversed(moved):
                with contextlib.suppress(OSError):
                    os.rename(place, source)
        shutil.rmtree(staging, ignore_errors=True)


def _prefix(plan: MergePlan) -> str:
    """How the target's records name its work folder: relative to the root (``WORK/``), else absolute."""
    target = plan.target.resolve()
    relative = os.path.relpath(target, plan.root.resolve())
    shown = str(target) if relative.startswith("..") else relative
    return "" if shown == "." else shown.rstrip("/\\") + os.sep


def _attempts(plan: MergePlan) -> list[tuple[ShardRecords, Attempt]]:
    """Every attempt the merged cycle holds, in the order they started (then shard, then row)."""
    order = {shard.fingerprint: index for index, shard in enumerate(plan.shards)}
    found = [(shard, attempt) for nodeid, shard in plan.owner.items() for attempt in shard.items[nodeid].attempts]
    return sorted(found, key=lambda pair: (pair[1].run["created_at"] or "", order[pair[0].fingerprint],
                                           pair[1].run["id"]))


# --- the files --------------------------------------------------------------------------------------------------


def _stage(plan: MergePlan, staging: Path, cycle_id: str, moves: dict[str, Relocate],
           attempts: list[tuple[ShardRecords, Attempt]]) -> tuple[Path, Path | None]:
    folder = staging / "runs" / cycle_id
    folder.mkdir(parents=True)
    for shard in plan.shards:
        for name in shard.files:
            _stage_file(shard, name, folder / name, moves[shard.fingerprint])
    write_entries(folder / RUN_LOG_NAME, [moves[shard.fingerprint].value(run_log_entry(shard, attempt))
                                          for shard, attempt in attempts])
    executions = _lines(plan, moves, lambda shard: shard.executions, lambda line: line.get("nodeid"),
                        lambda line: line.get("completed_at") or line.get("started_at") or "")
    if executions:
        atomic_write_text(folder / EXECUTION_RESULTS_NAME, executions)
    atomic_write_json(folder / MERGED_FILE, _provenance(plan))
    atomic_write_text(folder / RECONCILED_MARK, utc_now() + "\n")  # whole by construction: nothing to reconcile
    trace = _lines(plan, moves, lambda shard: shard.trace, lambda line: (line.get("data") or {}).get("nodeid"),
                   lambda line: line.get("ts") or "")
    if not trace:
        return folder, None
    staged_trace = staging / "traces" / f"{cycle_id}.jsonl"
    atomic_write_text(staged_trace, trace)
    return folder, staged_trace


def _stage_file(shard: ShardRecords, name: str, place: Path, move: Relocate) -> None:
    source = shard.folder / name
    data = source.read_bytes()
    if name.endswith(".json") and move.touches(data.decode("utf-8", errors="replace")):
        try:
            data = _json_file(move.value(json.loads(data)))
        except ValueError:
            pass  # not JSON after all: its bytes as they are
    if place.exists():
        if place.read_bytes() != data:
            raise MergeRefused(f"two shards hold {name} of their cycle with different contents, the last from "
                               f"{shard.label()}: the shards overlap (fix: give each shard's work folder once, all "
                               "from one run split with the same --harness-shard I/N)")
        return
    place.parent.mkdir(parents=True, exist_ok=True)
    place.write_bytes(data)
    shutil.copystat(source, place)


def _json_file(data: Any) -> bytes:
    """A record file as :func:`harness.base.fileio.atomic_write_json` writes it."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _lines(plan: MergePlan, moves: dict[str, Relocate], lines_of, nodeid_of, time_of) -> str:  # noqa: ANN001
    """A JSON-lines file of the merged cycle: each shard's lines of the items it brings (and those of no item),
    moved, in time order."""
    order = {shard.fingerprint: index for index, shard in enumerate(plan.shards)}
    kept = []
    for shard in plan.shards:
        for index, line in enumerate(lines_of(shard)):
            owner = plan.owner.get(nodeid_of(line))
            if owner is not None and owner is not shard:
                continue  # an item another shard brings (the same records)
            kept.append((time_of(line), order[shard.fingerprint], index, moves[shard.fingerprint].value(line)))
    kept.sort(key=lambda entry: entry[:3])
    return "".join(json_line(line).decode("utf-8") for *_, line in kept)


def _provenance(plan: MergePlan) -> dict[str, Any]:
    return {"merged_at": utc_now(), "shards": [
        {"source": str(shard.source), "cycle": shard.cycle_id, "shard": shard.shard, "fingerprint": shard.fingerprint,
         "items": sum(owner is shard for owner in plan.owner.values()),
         "attempts": sum(len(shard.items[n].attempts) for n, owner in plan.owner.items() if owner is shard)}
        for shard in plan.shards]}


# --- the rows ---------------------------------------------------------------------------------------------------


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _moved(row: dict[str, Any], columns: list[str], move: Relocate, json_columns: dict[str, bool],
           skip: tuple[str, ...]) -> dict[str, Any]:
    """The row's values for the target's columns (a column the shard's older database lacks takes its default)."""
    out = {}
    for name in columns:
        if name in skip or name not in row:
            continue
        value = row[name]
        if isinstance(value, str) and move.touches(value):
            value = (move.json_text(value, ensure_ascii=json_columns[name]) if name in json_columns
                     else move.path_text(value))
        out[name] = value
    return out


def _insert(conn: sqlite3.Connection, table: str, values: dict[str, Any]) -> int:
    names = list(values)
    cursor = conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                          [values[name] for name in names])
    return int(cursor.lastrowid or 0)


def _insert_rows(conn: sqlite3.Connection, plan: MergePlan, cycle_id: str, moves: dict[str, Relocate],
                 attempts: list[tuple[ShardRecords, Attempt]]) -> None:
    run_columns = _columns(conn, "agent_runs")
    detail_columns = _columns(conn, "attempt_details")
    loop_columns = _columns(conn, "loop_results")
    conn.execute(MERGED_SHARDS_SCHEMA)  # in this transaction: a merge that fails leaves no trace of itself
    for shard, attempt in attempts:
        move = moves[shard.fingerprint]
        run = _moved(attempt.run, run_columns, move, _RUN_JSON, ("id", "cycle_id"))
        run_id = _insert(conn, "agent_runs", {**run, "cycle_id": cycle_id})
        details = _moved(attempt.details, detail_columns, move, _DETAIL_JSON, ("run_id",))
        _insert(conn, "attempt_details", {**details, "run_id": run_id})
    for nodeid, shard in sorted(plan.owner.items()):
        loop = shard.items[nodeid].loop
        if loop is not None:
            values = _moved(loop, loop_columns, moves[shard.fingerprint], _LOOP_JSON, ("cycle_id",))
            _insert(conn, "loop_results", {**values, "cycle_id": cycle_id})
    merged_at = utc_now()
    for shard in plan.shards:
        conn.execute("INSERT INTO merged_shards (cycle_id, fingerprint, source, shard_cycle, shard, items, merged_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (cycle_id, shard.fingerprint, str(shard.source), shard.cycle_id, shard.shard,
                      sum(owner is shard for owner in plan.owner.values()), merged_at))
