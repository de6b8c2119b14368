"""Where a tournament keeps its records, and the readers and writers that validate each one.

The work folder (``WORK`` in the repository root unless ``harness improve --work-dir`` says otherwise) is
chosen once, when the :class:`Layout` is made. Everything is git-ignored so the user's working tree stays
clean between runs::

    WORK/improve/<slug>/              the goal's self-improve root (seed 001's <self-improve-root>)
      state/iteration_state.json      seed 001 section 8, rewritten at every step
      state/plan_archive/round_N/<plan_id>.json   seed 001 section 10: every plan with both reviews
      agent-settings.json             current phase, agent counts, ideas consumed
      baseline.json                   the score the pytest gate compares against
      research/round_N.json           research briefs
      results/round_N/executor_K.json benchmark results
      history/iteration_N.json        iteration history records
      merge_reports/iteration_N.json  merge reports
      sealed/round_N.json             the SHA-256 manifest of the sealed paths
      .sealed/round_N/                the manifest's files, laid read-only over every benchmark run's worktree
      logs/round_N/executor_K.log     what each executor and benchmark run printed
      .worktrees/                     executor worktrees while a run is going (removed after)
    tracking/raw_data.json, tracking/events.json   append-only arrays (seed 001 sections 5 and 11), in the
                                    repository root: every goal's, each entry naming its goal

Records of the earlier layout (``iteration_state.json`` and ``plan_archive/`` straight under the goal's folder)
are moved into ``state/`` once, by :mod:`harness.apps.tournament.migrate`, when a run starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from harness.apps.tournament.models import BaselineRecord, ExecutorResult, Plan, Record
from harness.apps.tournament.schemas import RecordInvalid, validate, write_record
from harness.apps.tournament.state import IterationState, RunInfo, Step
from harness.base.appendlog import append_entries, read_entries
from harness.base.clock import utc_now
from harness.base.errors import HarnessConfigError
from harness.base.fileio import append_text, atomic_write_json, ctrl_c_deferred
from harness.base.jsonschemas import contract_errors

DEFAULT_WORK_DIR = "WORK"  # under the repository root
_DAMAGED_FIX = "move it away; the tournament will start that step again"
R = TypeVar("R", bound=Record)


def now_iso() -> str:
    return utc_now("milliseconds")


@dataclass(frozen=True)
class Layout:
    """Paths of one goal's records: ``work_dir/improve/<slug>/`` (``work_dir`` defaults to ``WORK`` in the
    repository ``root``) and ``root/tracking/``. Paths in the records are written relative to ``root``."""

    root: Path
    slug: str
    work: Path | None = None   # the work folder given (``--work-dir``); None: the default

    @property
    def work_dir(self) -> Path:
        return self.work if self.work is not None else self.root / DEFAULT_WORK_DIR

    @property
    def base(self) -> Path:
        return self.work_dir / "improve" / self.slug

    @property
    def state_dir(self) -> Path:
        """``state/``: the iteration state and the plan archive, where seed 001 places them."""
        return self.base / "state"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "iteration_state.json"

    @property
    def settings_file(self) -> Path:
        return self.base / "agent-settings.json"

    @property
    def baseline_file(self) -> Path:
        return self.base / "baseline.json"

    @property
    def lock_file(self) -> Path:
        return self.base / ".lock"

    @property
    def worktrees(self) -> Path:
        return self.base / ".worktrees"

    @property
    def tracking(self) -> Path:
        return self.root / "tracking"

    @property
    def raw_data(self) -> Path:
        return self.tracking / "raw_data.json"

    @property
    def events(self) -> Path:
        return self.tracking / "events.json"

    def ensure_ignored(self) -> None:
        """WORK/improve/.gitignore ignores everything below it, whatever the repository's .gitignore says."""
        marker = self.work_dir / "improve" / ".gitignore"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("# written by harness improve: tournament records and worktrees stay untracked\n*\n")

    def research(self, n: int) -> Path:
        return self.base / "research" / f"round_{n}.json"

    @property
    def plan_archive(self) -> Path:
        return self.state_dir / "plan_archive"

    def plan_dir(self, n: int) -> Path:
        return self.plan_archive / f"round_{n}"

    def plan(self, n: int, plan_id: str) -> Path:
        return self.plan_dir(n) / f"{plan_id}.json"

    def result(self, n: int, executor_id: str) -> Path:
        return self.base / "results" / f"round_{n}" / f"{executor_id}.json"

    def history(self, n: int) -> Path:
        return self.base / "history" / f"iteration_{n}.json"

    def merge_report(self, n: int) -> Path:
        return self.base / "merge_reports" / f"iteration_{n}.json"

    def sealed(self, n: int) -> Path:
        return self.base / "sealed" / f"round_{n}.json"

    def sealed_copy(self, n: int) -> Path:
        """The sealed files of round N as the manifest has them: what every benchmark run is given."""
        return self.base / ".sealed" / f"round_{n}"

    def log(self, n: int, name: str) -> Path:
        return self.base / "logs" / f"round_{n}" / f"{name}.log"

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def read_json(path: Path, schema: str | None = None) -> Any:
    """Read a record back; a damaged one is a one-line error naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, json.JSONDecodeError) as exc:
        raise HarnessConfigError(path, None, f"cannot read the record ({exc})", _DAMAGED_FIX) from None
    if schema:
        validate(schema, data, str(path))
    return data


def read_model(path: Path, schema: str, model: type[R]) -> R:
    """Read a record back as its typed model (the schema checked first)."""
    data = read_json(path, schema)
    try:
        return model.from_json(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "(top)"
        raise HarnessConfigError(path, where, f"cannot read the record ({problem['msg']})", _DAMAGED_FIX) from None


def read_plan(path: Path) -> Plan:
    return read_model(path, "plan", Plan)


def read_result(path: Path) -> ExecutorResult:
    return read_model(path, "benchmark_result", ExecutorResult)


def recorded_baseline(layout: Layout) -> BaselineRecord | None:
    """The recorded baseline (``baseline.json``: the current best), or None before one is recorded."""
    try:
        return read_model(layout.baseline_file, "baseline", BaselineRecord)
    except FileNotFoundError:
        return None


def histories(layout: Layout) -> list[dict[str, Any]]:
    """Every iteration history record of the goal, oldest first."""
    folder = layout.base / "history"
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("iteration_*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    return [read_json(p, "iteration_history") for p in files]


def merge_reports(layout: Layout) -> list[dict[str, Any]]:
    folder = layout.base / "merge_reports"
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("iteration_*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    return [read_json(p, "merge_report") for p in files]


def append_array(path: Path, schema: str, entries: list[dict[str, Any]]) -> None:
    """Validate ``entries`` as items of the array schema, then append them under the file lock."""
    errors = contract_errors(schema, entries)
    if errors:
        raise RecordInvalid(schema, str(path), errors)
    append_entries(path, entries)


def goal_entries(path: Path, slug: str) -> list[dict[str, Any]]:
    return [e for e in read_entries(path) if isinstance(e, dict) and e.get("goal") == slug]


class StateStore:
    """``iteration_state.json``: validated and written atomically at every step."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.state: IterationState | None = None

    def load(self) -> IterationState | None:
        try:
            self.state = read_model(self.layout.state_file, "iteration_state", IterationState)
        except FileNotFoundError:
            self.state = None
        return self.state

    def new(self, iteration: int, *, run: RunInfo, base_commit: str, branch: str) -> IterationState:
        """A new iteration's state, with the run it belongs to, the commit it starts from and the user's branch,
        in one write."""
        stamp = now_iso()
        self.state = IterationState(iteration=iteration, started_at=stamp, updated_at=stamp, run=run,
                                    base_commit=base_commit, branch=branch)
        self.save()
        return self.state

    def save(self) -> None:
        assert self.state is not None
        with ctrl_c_deferred():  # Ctrl-C lands after the state is on disk, never inside its serialiser
            self.state.updated_at = now_iso()
            write_record(self.layout.state_file, "iteration_state", self.state.to_json())

    def step(self, name: Step) -> None:
        assert self.state is not None
        self.state.current_step = name
        self.state.status = "in_progress"
        self.save()


def write_json_plain(path: Path, data: Any) -> None:
    """For files without a seed schema (logs index, manifests)."""
    atomic_write_json(path, data)


def append_log(path: Path, text: str) -> None:
    append_text(path, text, durable=True)
