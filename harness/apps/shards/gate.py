"""The compare gate of a merged cycle: each item's final score against its score in a baseline cycle of the same
work folder, with the margins and the words of the ``--harness-compare`` gate (harness/apps/tracking/compare.py).

An item that dropped beyond a margin is failed in the records too (its final attempt's ``verdict``), as the pytest
gate fails it, so ``harness report`` and ``harness history`` count it as failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.apps.tracking.compare import Margins, Regression, compare_item, load_baseline
from harness.apps.tracking.frames import cycle_ids
from harness.apps.tracking.results import ReportItem, results_from_records
from harness.records import RecordStore


@dataclass
class GateOutcome:
    baseline: str | None  # the baseline cycle; None when the work folder has none to compare with
    compared: int = 0
    dropped: list[tuple[ReportItem, Regression]] = field(default_factory=list)

    def lines(self, cycle: str, margins: Margins) -> list[str]:
        """What the gate says, as the pytest gate's summary says it."""
        if self.baseline is None:
            return []
        head = [f"harness compare: cycle {cycle} against {self.baseline} ({margins})"]
        if not self.dropped:
            return head + [f"{self.compared} item{'s' * (self.compared != 1)} compared; none dropped beyond the "
                           "margin"]
        body = []
        for item, regression in self.dropped:
            body.append(f"{'FAILED' if item.verdict in ('passed', 'failed') else 'DROPPED'} {item.nodeid}")
            body += [f"    {line}" for line in regression.describe()]
        return head + body + [f"{len(self.dropped)} of {self.compared} compared item{'s' * (self.compared != 1)} "
                              "dropped beyond the margin"]


def compare_merged(work_dir: Path, cycle: str, which: str, margins: Margins) -> GateOutcome:
    """Compare ``cycle`` with ``which`` (a cycle id, or ``latest``: the newest cycle with records before it); the
    items that dropped are failed in the records. A named cycle without records raises ``CycleNotFound``."""
    later = tuple(c for c in cycle_ids(work_dir) if c >= cycle)
    baseline = load_baseline(work_dir, which, exclude=later)
    if baseline is None or baseline.cycle_id == cycle:
        return GateOutcome(None)
    outcome = GateOutcome(baseline.cycle_id)
    for item in sorted(results_from_records(work_dir, [cycle]), key=lambda r: r.nodeid):
        base = baseline.find(item.nodeid, item.agent, item.case)
        if base is None:
            continue
        outcome.compared += 1
        dimensions = {name: (dim.get("score") if isinstance(dim, dict) else dim)
                      for name, dim in item.dimensions.items()}
        regression = compare_item(item.nodeid, base, item.score, dimensions, margins)
        if regression is not None:
            outcome.dropped.append((item, regression))
    if outcome.dropped:
        store = RecordStore(work_dir)
        try:
            for item, _ in outcome.dropped:
                if item.verdict == "passed":
                    store.record_verdict(cycle, item.nodeid, "failed")
        finally:
            store.close()
    return outcome
