"""Where a tournament keeps its records, and the writers that validate each one before it lands.

Everything is git-ignored so the user's working tree stays clean between runs::

    WORK/improve/<slug>/
      iteration_state.json            seed 001 section 8, rewritten at every step
      agent-settings.json             current phase, agent counts, ideas consumed
      baseline.json                   the score the pytest gate compares against
      research/round_N.json           research briefs
      plan_archive/round_N/<plan_id>.json   every plan with its critic and architect reviews
      results/round_N/executor_K.json benchmark results
      history/iteration_N.json        iteration history records
      merge_reports/iteration_N.json  merge reports
      sealed/round_N.json             the SHA-256 manifest of the sealed paths
      .sealed/round_N/                the manifest's files, laid read-only over every benchmark run's worktree
      logs/round_N/executor_K.log     what each executor and benchmark run printed
      .worktrees/                     executor worktrees while a run is going (removed after)
    tracking/raw_data.json, tracking/events.json   append-only arrays (seed 001 sections 5 and 11)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.appendlog import append_entries, read_entries
from harness.clock import utc_now
from harness.errors import HarnessConfigError
from harness.fileio import append_text, atomic_write_json
from harness.tournament.schemas import RecordInvalid, errors_for, validate, write_record


def now_iso() -> str:
    return utc_now("milliseconds")


@dataclass(frozen=True)
class Layout:
    """Paths of one goal's records under the repository ``root``."""

    root: Path
    slug: str

    @property
    def base(self) -> Path:
        return self.root / "WORK" / "improve" / self.slug

    @property
    def state_file(self) -> Path:
        return self.base / "iteration_state.json"

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
        marker = self.root / "WORK" / "improve" / ".gitignore"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("# written by harness improve: tournament records and worktrees stay untracked\n*\n")

    def research(self, n: int) -> Path:
        return self.base / "research" / f"round_{n}.json"

    def plan_dir(self, n: int) -> Path:
        return self.base / "plan_archive" / f"round_{n}"

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
        raise HarnessConfigError(path, None, f"cannot read the record ({exc})",
                                 "move it away; the tournament will start that step again") from None
    if schema:
        validate(schema, data, str(path))
    return data


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
    errors = errors_for(schema, entries)
    if errors:
        raise RecordInvalid(schema, str(path), errors)
    append_entries(path, entries)


def goal_entries(path: Path, slug: str) -> list[dict[str, Any]]:
    return [e for e in read_entries(path) if isinstance(e, dict) and e.get("goal") == slug]


class StateStore:
    """``iteration_state.json``: validated and written atomically at every step."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.data: dict[str, Any] | None = None

    def load(self) -> dict[str, Any] | None:
        try:
            self.data = read_json(self.layout.state_file, "iteration_state")
        except FileNotFoundError:
            self.data = None
        return self.data

    def new(self, iteration: int, run: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """A new iteration's state; ``run`` (which run it belongs to) and ``extra`` fields are saved with it in
        the same write."""
        stamp = now_iso()
        self.data = {
            "iteration": iteration, "status": "in_progress", "current_step": "research",
            "started_at": stamp, "updated_at": stamp,
            "research": {"status": "pending", "output_path": None, "completed_at": None},
            "planning": {"status": "pending", "plans": {}, "approved_count": 0, "completed_at": None},
            "execution": {"status": "pending", "executors": {}, "completed_at": None},
            "tournament": {"status": "pending", "winner": None, "winner_score": None, "completed_at": None},
            "recording": {"status": "pending", "history_path": None, "visualization_updated": False,
                          "cleanup_done": False},
            "user_ideas_consumed": [],
        }
        if run is not None:
            self.data["run"] = run
        self.data.update(extra)
        self.save()
        return self.data

    def save(self) -> None:
        assert self.data is not None
        self.data["updated_at"] = now_iso()
        write_record(self.layout.state_file, "iteration_state", self.data)

    def step(self, name: str) -> None:
        assert self.data is not None
        self.data["current_step"] = name
        self.data["status"] = "in_progress"
        self.save()


def write_json_plain(path: Path, data: Any) -> None:
    """For files without a seed schema (logs index, manifests)."""
    atomic_write_json(path, data)


def append_log(path: Path, text: str) -> None:
    append_text(path, text, durable=True)
