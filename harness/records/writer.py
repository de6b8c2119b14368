"""The records as a sink of the event stream: each step of an item, written as it happens.

The session subscribes one :class:`RecordWriter` as a *required* sink (its errors reach the engine: an
attempt that could not be recorded must not pass). Nothing else writes an item's records.
"""

from __future__ import annotations

import threading

from harness.base.events import (
    ArtifactProduced,
    AttemptFinished,
    AttemptStarted,
    Event,
    ExecutionCompleted,
    Generated,
    HandoffAttempted,
    ItemFinished,
    Judged,
    Reviewed,
)
from harness.records.store import RecordStore


class RecordWriter:
    def __init__(self, store: RecordStore):
        self.store = store
        self._run_ids: dict[tuple[str, str, int], int] = {}  # (cycle, nodeid, attempt) -> the agent_runs row
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        write = self._writers.get(type(event))
        if write is not None and getattr(event, "location", None) is not None:
            write(self, event)

    def _started(self, event: AttemptStarted) -> None:
        run_id = self.store.start_attempt(event.location, event.attempt, event.rubric_version, event.details,
                                          created_at=event.created_at)
        with self._lock:
            self._run_ids[event.location.cycle_id, event.nodeid, event.attempt] = run_id

    def _artifact(self, event: ArtifactProduced) -> None:
        self.store.write_artifact(event.location, event.attempt, event.text)

    def _evaluation(self, event: Judged) -> None:
        if event.output is not None:
            self.store.write_evaluation(event.location, event.attempt, event.output)

    def _review(self, event: Reviewed) -> None:
        self.store.write_review(event.location, event.attempt, event.review)

    def _generation(self, event: Generated) -> None:
        self.store.write_generation(event.location, event.attempt, event.result)

    def _finished(self, event: AttemptFinished) -> None:
        with self._lock:
            run_id = self._run_ids.pop((event.location.cycle_id, event.nodeid, event.attempt))
        self.store.finish_attempt(run_id, event.record, event.details,
                                  self.store.run_log_path(event.location.cycle_id))
        if event.record.status == "passed":
            self.store.write_final(event.location, event.attempt)

    def _execution(self, event: ExecutionCompleted) -> None:
        self.store.append_execution_result(event.location.cycle_id, event.result)

    def _handoff(self, event: HandoffAttempted) -> None:
        self.store.write_handoff(event.location, event.handoff)

    def _item_finished(self, event: ItemFinished) -> None:
        self.store.write_loop_result(event.location, event.nodeid, event.case_id, event.loop_result,
                                     case_data=event.case_data)

    _writers = {AttemptStarted: _started, ArtifactProduced: _artifact, Judged: _evaluation, Reviewed: _review,
                Generated: _generation, AttemptFinished: _finished, ItemFinished: _item_finished,
                ExecutionCompleted: _execution, HandoffAttempted: _handoff}
