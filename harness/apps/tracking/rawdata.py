"""Seed 001's tracking files: ``tracking/raw_data.json`` (section 5) and ``tracking/events.json`` (section 11).

Both are append-only JSON arrays written through :mod:`harness.base.appendlog`. The typed entries here check
what a writer appends and what the plots read; fields beyond the seed's (the tournament's ``goal``
slug, for one) are kept as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.base.appendlog import append_entries, read_entries
from harness.base.clock import utc_now
from harness.base.errors import HarnessConfigError

RAW_DATA = "raw_data.json"
EVENTS = "events.json"


class RawDataEntry(BaseModel):
    """One candidate of one tournament iteration (seed 001 section 5)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    iteration: int = Field(ge=0)
    plan_id: str
    benchmark_score: float | None  # None: the candidate's benchmark errored or timed out
    is_winner: bool = False
    approach_family: str = "other"
    sub_scores: dict[str, float | None] = Field(default_factory=dict)
    goal: str | None = None

    @property
    def is_baseline(self) -> bool:
        """The unchanged code's score: iteration 0, or a plan id that says so."""
        return self.iteration == 0 or self.plan_id == "baseline" or self.approach_family == "baseline"


class Event(BaseModel):
    """One config change or phase transition (seed 001 section 11)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    timestamp: str
    event_type: Literal["config_change", "phase_transition"] | str
    iteration: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    goal: str | None = None


def _validated(path: Path, model: type[BaseModel], entries: list[Any]) -> list[Any]:
    out = []
    for index, raw in enumerate(entries):
        try:
            out.append(model.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            problem = "missing" if first["type"] == "missing" else first["msg"]  # the one word for it
            raise HarnessConfigError(path, f"[{index}].{where}", problem,
                                     "repair or remove that entry; the harness will not overwrite the file") from None
    return out


def _plain(model: BaseModel) -> dict[str, Any]:
    data = model.model_dump(mode="json")
    if data.get("goal") is None:
        data.pop("goal", None)
    return data


def read_raw_data(path: Path) -> list[RawDataEntry]:
    """Every entry of ``raw_data.json``; a malformed file or entry names the path and where."""
    return _validated(Path(path), RawDataEntry, read_entries(Path(path)))


def read_events(path: Path) -> list[Event]:
    return _validated(Path(path), Event, read_entries(Path(path)))


def append_raw_data(path: Path, entries: list[RawDataEntry | dict[str, Any]]) -> int:
    """Check and append candidates to ``raw_data.json``; returns the new length."""
    checked = [RawDataEntry.model_validate(e) if isinstance(e, dict) else e for e in entries]
    return append_entries(Path(path), [_plain(e) for e in checked])


def append_event(path: Path, event_type: str, details: dict[str, Any], *, iteration: int | None = None,
                 goal: str | None = None, timestamp: str | None = None) -> int:
    """Append one event to ``events.json``; the timestamp defaults to now (UTC, ISO 8601)."""
    stamp = timestamp or utc_now()
    event = Event(timestamp=stamp, event_type=event_type, iteration=iteration, details=details, goal=goal)
    return append_entries(Path(path), [_plain(event)])
