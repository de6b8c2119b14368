"""Records for the tracking tests, written through ``RecordStore`` as the engine writes them.

Other tracking test modules import ``record_item`` and ``two_cycles`` from here; the tests below check
that the frames read those records back as a user would count them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from harness.apps.tracking.frames import attempts_frame, cycle_ids, dimensions_frame, items_frame
from harness.base.models import RunRecord
from harness.records import AttemptDetails, RecordStore

DIMS = {"accuracy": 0.5, "clarity": 0.3, "sources": 0.2}

Dims = Mapping[str, float | None]


def record_item(store: RecordStore, cycle: str, agent: str, case: str, attempts: Sequence[Dims], *,
                rubric: str = "summary-quality", threshold: float = 0.8, weights: Mapping[str, float] = DIMS,
                texts: Sequence[str] | None = None, samples: Sequence[float] | None = None,
                cost_per_attempt: float = 0.01, tokens_per_attempt: int = 1000,
                rubric_version: str = "1.0.0", final_outcome: str | None = None, nodeid: str | None = None) -> str:
    """Record one item's attempts; each attempt is ``{dim: score}``. Returns the item's nodeid."""
    nodeid = nodeid or f"suites/{agent}.yaml::{case}"
    where = store.location(cycle, agent, case)
    run_log = store.run_log_path(cycle)
    for number, dim_scores in enumerate(attempts, start=1):
        details = AttemptDetails(nodeid=nodeid, case_id=case, rubric_name=rubric, threshold=threshold)
        run_id = store.start_attempt(where, number, rubric_version, details)
        text = texts[number - 1] if texts else f"# {case}\n\nattempt {number}\n"
        artifact = store.write_artifact(where, number, text)
        known = [dim_scores[d] * weights[d] for d in dim_scores if dim_scores[d] is not None]
        overall = round(sum(known), 4) if len(known) == len(dim_scores) else None
        last = number == len(attempts)
        if overall is None:
            outcome = "indeterminate"
        else:
            outcome = "passed" if overall >= threshold else "failed"
        if last and final_outcome:
            outcome = final_outcome
        status = {"passed": "passed", "failed": "failed"}.get(outcome, "escalated")
        dimensions = {
            d: {"score": s, "weight": weights[d], "reason": f"{d} reason: scored {s} on attempt {number}"}
            for d, s in dim_scores.items()
        }
        fixes = [f"improve {d} of {case}" for d, s in dim_scores.items() if s is not None and s < 0.8]
        record = RunRecord(
            cycle_id=cycle, agent_name=agent, attempt=number, status=status, overall_score=overall,
            dimension_scores=dict(dim_scores), feedback=f"{case} attempt {number}: overall {overall}",
            suggested_fixes=fixes, artifact_path=str(artifact), created_at="2026-01-31T10:00:00Z",
            duration_ms=1200, rubric_version=rubric_version,
        )
        done = AttemptDetails(
            nodeid=nodeid, case_id=case, rubric_name=rubric, threshold=threshold, outcome=outcome,
            exit_code=0 if outcome == "passed" else 1, model="claude-test", input_tokens=tokens_per_attempt,
            output_tokens=tokens_per_attempt // 2, cost_usd=cost_per_attempt, dimensions=dimensions,
            samples=list(samples) if samples and last else None,
        )
        store.finish_attempt(run_id, record, done, run_log)
    return nodeid


def two_cycles(work_dir: Path) -> tuple[str, str]:
    """Two cycles of two agents; in the second, ``writer/case-b`` drops and fails on ``accuracy``."""
    store = RecordStore(work_dir)
    first = store.allocate_cycle(dt.date(2026, 1, 30))
    record_item(store, first, "writer", "case-a", [{"accuracy": 0.9, "clarity": 0.9, "sources": 0.8}],
                samples=[0.86, 0.88, 0.9])
    record_item(store, first, "writer", "case-b", [{"accuracy": 0.6, "clarity": 0.8, "sources": 0.5},
                                                   {"accuracy": 0.95, "clarity": 0.9, "sources": 0.9}])
    record_item(store, first, "planner", "plan-1", [{"accuracy": 0.8, "clarity": 0.9, "sources": 1.0}],
                rubric="plan-quality")
    second = store.allocate_cycle(dt.date(2026, 1, 31))
    record_item(store, second, "writer", "case-a", [{"accuracy": 0.9, "clarity": 0.95, "sources": 0.8}],
                samples=[0.87, 0.9, 0.92])
    record_item(store, second, "writer", "case-b",
                [{"accuracy": 0.5, "clarity": 0.8, "sources": 0.6},
                 {"accuracy": 0.55, "clarity": 0.85, "sources": 0.7},
                 {"accuracy": 0.6, "clarity": 0.85, "sources": 0.7}],
                texts=["# Summary\n\nThe sky is green.\nSources: none.\n",
                       "# Summary\n\nThe sky is blue.\nSources: none.\n",
                       "# Summary\n\nThe sky is blue on clear days.\nSources: NASA.\n"])
    record_item(store, second, "planner", "plan-1", [{"accuracy": 0.85, "clarity": 0.9, "sources": 1.0}],
                rubric="plan-quality")
    store.close()
    return first, second


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, str, str]:
    work_dir = tmp_path / "WORK"
    first, second = two_cycles(work_dir)
    return work_dir, first, second


def test_items_are_the_final_attempts_with_totals(work: tuple[Path, str, str]) -> None:
    work_dir, first, second = work
    items = items_frame(attempts_frame(work_dir))
    assert len(items) == 6
    b = items[(items.cycle_id == second) & (items.case_id == "case-b")].iloc[0]
    assert b.attempt == 3 and b.attempts == 3
    assert b.overall_score == pytest.approx(0.5 * 0.6 + 0.3 * 0.85 + 0.2 * 0.7)
    assert not b.passed and b.outcome == "failed"
    assert b.cost_usd == pytest.approx(0.03)
    assert b.tokens == 3 * 1500
    assert b.dimensions["accuracy"]["reason"].startswith("accuracy reason")
    assert cycle_ids(work_dir) == [first, second]


def test_dimensions_frame_is_long_format(work: tuple[Path, str, str]) -> None:
    work_dir, _, second = work
    dims = dimensions_frame(items_frame(attempts_frame(work_dir, cycles=[second])))
    assert len(dims) == 9
    assert set(dims.dimension) == set(DIMS)
    row = dims[(dims.nodeid == "suites/writer.yaml::case-b") & (dims.dimension == "accuracy")].iloc[0]
    assert row.score == pytest.approx(0.6) and row.weight == pytest.approx(0.5)


def test_no_database_means_empty_frames(tmp_path: Path) -> None:
    assert attempts_frame(tmp_path).empty
    assert items_frame(attempts_frame(tmp_path)).empty
    assert cycle_ids(tmp_path) == []
    assert not (tmp_path / "harness.db").exists()  # reading never creates the database
