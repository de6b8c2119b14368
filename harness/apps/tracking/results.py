"""One item's result as a report shows it: from its report (``user_properties``, read by the one codec,
``harness.evaluation.items.result``) or from the records.

The pytest plugin builds :class:`ReportItem` from each call report's ``user_properties`` (so it works
the same on pytest-xdist's controller); ``harness report`` builds them from a cycle's records. The
Markdown and HTML reports read only this.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.apps.tracking.compare import Regression
from harness.base.usage import shown_cost
from harness.evaluation.items.result import ItemResult, number_or_none, why_no_score
from harness.face.report_text import default_verdict


@dataclass(frozen=True)
class ReportItem:
    nodeid: str
    outcome: str  # the harness outcome: passed|failed|escalated|indeterminate|error|validation_failed|interrupted
    score: float | None = None
    threshold: float | None = None
    attempts: int = 0
    cost_usd: float = 0.0  # of the models with a price
    cost_known: bool = True  # no model it called lacked a price: cost_usd is the whole cost
    tokens: int = 0
    agent: str | None = None
    case: str | None = None
    variant: str | None = None  # the agent's variant it ran (``variants:``)
    rubric: str | None = None
    cycle: str | None = None
    artifact: str | None = None
    dimensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    cached_answers: int = 0  # model answers replayed from the response cache
    test_outcome: str | None = None  # pytest's word: passed|failed|skipped|xfailed|xpassed (session or records)
    regression: Regression | None = None

    @property
    def verdict(self) -> str:
        """pytest's word for the item: what its session said, else what the outcome gets by default."""
        return self.test_outcome or default_verdict(self.outcome)

    @property
    def failed(self) -> bool:
        """Red in a report: pytest failed it."""
        return self.verdict == "failed"

    @property
    def cost(self) -> str:
        """Its cost as people read it: a number, ``unknown``, or a number ``+ unknown``; ``(cached)`` after one that
        the response cache answered in part or whole (a replayed answer costs nothing, whatever the model's price)."""
        shown = shown_cost(self.cost_usd, self.cost_known)
        return f"{shown} (cached)" if self.cached_answers else shown

    @property
    def shown_score(self) -> str:
        """Its score, or why it has none."""
        return f"{self.score:.2f}" if self.score is not None else f"none: {why_no_score(self.outcome)}"

    @property
    def name(self) -> str:
        if not (self.agent and self.case):
            return self.nodeid
        return f"{self.agent}::{self.case}" + (f"[{self.variant}]" if self.variant else "")

    def worst_dimensions(self, count: int = 2) -> list[tuple[str, float, str]]:
        """The lowest-scored dimensions with their reasons; ties go to the heavier dimension."""
        scored = [(name, float(d["score"]), str(d.get("reason") or ""), float(d.get("weight") or 0))
                  for name, d in self.dimensions.items() if isinstance(d, dict) and _number(d.get("score"))]
        scored.sort(key=lambda t: (t[1], -t[3], t[0]))
        return [(name, score, reason) for name, score, reason, _ in scored[:count]]

    def sort_key(self) -> tuple[int, float, str]:
        rank = 0 if self.failed else (1 if self.outcome != "passed" else 2)
        return rank, (self.score if self.score is not None else -1.0), self.nodeid


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def from_user_properties(nodeid: str, properties: Iterable[tuple[str, Any]],
                         test_outcome: str | None = None) -> ReportItem | None:
    """The item's result from its report's ``user_properties`` (the one codec reads them); None for an item that
    is not ours."""
    result = ItemResult.read(properties)
    if result is None:
        return None
    return ReportItem(
        nodeid=nodeid, outcome=result.outcome, score=result.score, threshold=result.threshold,
        attempts=result.attempts, cost_usd=result.cost_usd, cost_known=result.cost_known, tokens=result.tokens,
        agent=result.agent,
        case=result.case, variant=result.variant, rubric=result.rubric, cycle=result.cycle, artifact=result.artifact,
        dimensions=result.dimensions, test_outcome=test_outcome, cached_answers=result.cached_answers,
        regression=Regression.from_json(result.regression) if result.regression else None,
    )


def results_from_records(work_dir: Path, cycles: list[str]) -> list[ReportItem]:
    """The items of ``cycles`` as the records hold them (final attempt, totals over attempts)."""
    from harness.apps.tracking.frames import attempts_frame, items_frame  # pandas: only when reporting

    items = items_frame(attempts_frame(Path(work_dir), cycles=cycles))
    out = []
    for row in items.itertuples(index=False):
        out.append(ReportItem(
            nodeid=row.nodeid, outcome=row.outcome, score=number_or_none(row.overall_score), threshold=number_or_none(row.threshold),
            attempts=int(row.attempts), cost_usd=float(row.cost_usd), cost_known=bool(row.cost_known),
            tokens=int(row.tokens), agent=row.agent_name,
            case=row.case_id, variant=row.variant if isinstance(row.variant, str) else None, rubric=row.rubric_name,
            cycle=row.cycle_id, artifact=row.artifact_path,
            dimensions=row.dimensions or {}, test_outcome=row.verdict, cached_answers=int(row.cached_answers),
        ))
    return sorted(out, key=ReportItem.sort_key)


def merge(records: list[ReportItem], session: list[ReportItem]) -> list[ReportItem]:
    """Records overlaid with the session's verdicts (pytest outcome, regression) by nodeid."""
    by_id = {r.nodeid: r for r in session}
    merged = [replace(r, test_outcome=by_id[r.nodeid].test_outcome, regression=by_id[r.nodeid].regression)
              if r.nodeid in by_id else r for r in records]
    known = {r.nodeid for r in merged}
    merged += [r for r in session if r.nodeid not in known]
    return sorted(merged, key=ReportItem.sort_key)
