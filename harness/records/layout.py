"""Where the records of a work folder live on disk: the database, the cycles' folders and the files in them.

```
WORK/harness.db
WORK/runs/{cycle}/{agent}[/{case}]/attempt-{n}.md, attempt-{n}.eval.json, final.md
WORK/runs/{cycle}/run-log.json, execution-results.jsonl, reconciliation.json, shard.json, merged.json,
                 .alive.lock, .reconciled
WORK/traces/{cycle}.jsonl
```
"""

from __future__ import annotations

from pathlib import Path

from harness.base.attempts import RunLocation

DATABASE_NAME = "harness.db"
RUNS_DIR = "runs"
RUN_LOG_NAME = "run-log.json"
EXECUTION_RESULTS_NAME = "execution-results.jsonl"  # runs/{cycle}/: the execution result of each item or phase
ALIVE_LOCK = ".alive.lock"  # runs/{cycle}/: shared-locked by every process of the cycle's session
RECONCILED_MARK = ".reconciled"  # runs/{cycle}/: its session is gone and its records were made whole
RECONCILIATION_FILE = "reconciliation.json"  # runs/{cycle}/: what the session that made the cycle reconciled
SHARD_FILE = "shard.json"  # runs/{cycle}/: the shard (--harness-shard I/N) its session ran, and how many items
MERGED_FILE = "merged.json"  # runs/{cycle}/: the shards harness merge made the cycle of
TRACES_DIR = "traces"  # traces/{cycle}.jsonl: the execution trace of each cycle, append-only JSON lines
TRACE_SUFFIX = ".jsonl"


def database_path(work_dir: Path) -> Path:
    return Path(work_dir) / DATABASE_NAME


def runs_path(work_dir: Path) -> Path:
    return Path(work_dir) / RUNS_DIR


def cycle_path(work_dir: Path, cycle_id: str) -> Path:
    return runs_path(work_dir) / cycle_id


def run_log_path(work_dir: Path, cycle_id: str) -> Path:
    return cycle_path(work_dir, cycle_id) / RUN_LOG_NAME


def execution_results_path(work_dir: Path, cycle_id: str) -> Path:
    """The execution results of a cycle, one JSON line per item execution (or construct phase)."""
    return cycle_path(work_dir, cycle_id) / EXECUTION_RESULTS_NAME


def traces_path(work_dir: Path) -> Path:
    return Path(work_dir) / TRACES_DIR


def trace_path(work_dir: Path, cycle_id: str) -> Path:
    """The execution trace of a cycle: ``traces/{cycle}.jsonl``."""
    return traces_path(work_dir) / f"{cycle_id}{TRACE_SUFFIX}"


def run_location(work_dir: Path, cycle_id: str, agent_name: str, case_id: str | None,
                 variant: str | None = None) -> RunLocation:
    """An agent with one case keeps ``runs/{cycle}/{agent}``; with several, each case has a subfolder, under a
    folder per variant when the agent has variants (all a variant wrote, side by side)."""
    directory = cycle_path(work_dir, cycle_id) / agent_name
    if variant is not None:
        directory = directory / variant
    if case_id is not None:
        directory = directory / case_id
    return RunLocation(cycle_id=cycle_id, agent_name=agent_name, directory=directory)


def safe_cycle_name(cycle_id: str) -> bool:
    """A cycle id from the database names one folder under ``runs/``, never a path out of it."""
    return bool(cycle_id) and cycle_id not in (".", "..") and "/" not in cycle_id and "\\" not in cycle_id
