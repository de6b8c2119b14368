"""Typed appends to tracking/raw_data.json (seed 001 section 5) and tracking/events.json (section 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.apps.tracking.rawdata import append_event, append_raw_data, read_events, read_raw_data
from harness.base.errors import HarnessConfigError


def test_raw_data_round_trip_keeps_seed_fields_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "tracking" / "raw_data.json"
    append_raw_data(path, [{"iteration": 1, "plan_id": "round_1_planner_a", "benchmark_score": 85.2,
                            "is_winner": True, "approach_family": "training_config", "sub_scores": {"a": 1.0},
                            "goal": "speed", "executor_id": "executor_1"}])
    append_raw_data(path, [{"iteration": 2, "plan_id": "round_2_planner_a", "benchmark_score": None}])
    on_disk = json.loads(path.read_text())
    assert on_disk[0] == {"iteration": 1, "plan_id": "round_1_planner_a", "benchmark_score": 85.2,
                          "is_winner": True, "approach_family": "training_config", "sub_scores": {"a": 1.0},
                          "goal": "speed", "executor_id": "executor_1"}
    assert "goal" not in on_disk[1] and on_disk[1]["benchmark_score"] is None
    first, second = read_raw_data(path)
    assert first.goal == "speed" and first.is_winner and not first.is_baseline
    assert second.approach_family == "other"


def test_a_bad_entry_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "raw_data.json"
    append_raw_data(path, [{"iteration": 0, "plan_id": "baseline", "benchmark_score": 80.0}])
    before = path.read_bytes()
    with pytest.raises(ValidationError):
        append_raw_data(path, [{"iteration": -1, "plan_id": "x", "benchmark_score": 1.0}])
    assert path.read_bytes() == before
    assert read_raw_data(path)[0].is_baseline


def test_events(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    append_event(path, "config_change", {"field": "number_of_agents", "old_value": 2, "new_value": 3,
                                         "source": "user"}, iteration=5, timestamp="2026-01-31T10:00:00Z")
    append_event(path, "phase_transition", {"from": "phase_1", "to": "phase_2"}, goal="speed")
    first, second = read_events(path)
    assert first.event_type == "config_change" and first.iteration == 5 and first.details["new_value"] == 3
    assert second.timestamp.endswith("Z") and second.goal == "speed"


def test_a_hand_edited_entry_is_reported_with_its_index(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps([{"timestamp": "t", "event_type": "config_change"}, {"event_type": "x"}]))
    with pytest.raises(HarnessConfigError, match=r"events\.json: \[1\]\.timestamp: missing \(fix: "):
        read_events(path)
