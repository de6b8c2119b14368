"""The case x variant grid of an agent with ``variants:`` (docs/comparisons.md): each variant's pass rate and mean
score with their intervals, and each variant against the best one, case by case: its scores by a paired test
over the cases both scored, its verdicts by McNemar's exact test over the cases both decided (an item its checks
failed before judging has a verdict but no score, and must not drop out of the comparison).

The terminal summary builds it from the items' results, the Markdown and HTML reports from theirs: one grid,
three renderings. It computes from what the items reported and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.base.stats import (
    CONFIDENCE,
    Interval,
    PairedTest,
    bradley_terry,
    holm,
    mcnemar_p,
    mean_interval,
    paired_test,
    wilson_interval,
)
from harness.base.usage import shown_cost


@dataclass(frozen=True)
class GridEntry:
    """One item of a variant: what the grid needs of its result."""

    agent: str
    rubric: str | None
    variant: str
    case: str
    score: float | None
    passed: bool | None  # None: neither (skipped, not run)
    cost_usd: float = 0.0
    cost_known: bool = True
    no_score: str | None = None  # why it has no score, when it has none


@dataclass
class VariantColumn:
    """One variant's items, and what they add up to."""

    name: str
    cells: dict[str, GridEntry] = field(default_factory=dict)  # by case

    @property
    def scores(self) -> list[float]:
        return [e.score for e in self.cells.values() if e.score is not None]

    @property
    def decided(self) -> list[GridEntry]:
        return [e for e in self.cells.values() if e.passed is not None]

    @property
    def passed(self) -> int:
        return sum(bool(e.passed) for e in self.decided)

    @property
    def pass_rate(self) -> Interval | None:
        decided = self.decided
        return wilson_interval(self.passed, len(decided)) if decided else None

    @property
    def mean(self) -> Interval | None:
        scores = self.scores
        return mean_interval(scores) if scores else None

    @property
    def cost(self) -> str:
        return shown_cost(sum(e.cost_usd for e in self.cells.values()),
                          all(e.cost_known for e in self.cells.values()))


@dataclass(frozen=True)
class Comparison:
    """A variant against the best one: the paired test of their scores, the McNemar test of their verdicts (passed
    only by the variant: ``wins``; only by the best: ``losses``), each p-value adjusted for the number of
    comparisons."""

    variant: str
    best: str
    test: PairedTest
    adjusted_p: float
    wins: int
    losses: int
    decided: int  # cases both have a verdict on
    verdict_p: float
    adjusted_verdict_p: float

    @property
    def scores_differ(self) -> bool:
        return self.test.pairs > 0 and self.adjusted_p < 1 - CONFIDENCE

    @property
    def verdicts_differ(self) -> bool:
        return self.adjusted_verdict_p < 1 - CONFIDENCE

    @property
    def significant(self) -> bool:
        return self.scores_differ or self.verdicts_differ

    def conclusion(self) -> str:
        ahead = set()
        if self.scores_differ:
            ahead.add(self.variant if self.test.difference.estimate > 0 else self.best)
        if self.verdicts_differ:
            ahead.add(self.variant if self.wins > self.losses else self.best)
        if not ahead:
            return "no significant difference"
        return f"{ahead.pop()} is better" if len(ahead) == 1 else "they differ: one scores higher, the other passes more"

    def text(self) -> str:
        test = self.test
        adjusted = f", adjusted {self.adjusted_p:.3g}" if self.adjusted_p != test.p_value else ""
        if test.pairs:
            diff = test.difference
            scores = (f"scores {diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] over {test.pairs} cases "
                      f"({test.b_better} up, {test.a_better} down), p={test.p_value:.3g}{adjusted}")
        else:
            scores = "no case scored by both"
        verdict_adjusted = (f", adjusted {self.adjusted_verdict_p:.3g}"
                            if self.adjusted_verdict_p != self.verdict_p else "")
        verdicts = (f"verdicts {self.wins} better, {self.losses} worse of {self.decided}, "
                    f"p={self.verdict_p:.3g}{verdict_adjusted}" if self.wins + self.losses
                    else f"the same verdict on all {self.decided}")
        return f"{self.variant} vs {self.best}: {scores}; {verdicts}: {self.conclusion()}"


@dataclass
class VariantGrid:
    """An agent's variants over its cases (:func:`variant_grids` orders them)."""

    agent: str
    rubric: str | None
    variants: dict[str, VariantColumn] = field(default_factory=dict)
    cases: list[str] = field(default_factory=list)

    def add(self, entry: GridEntry) -> None:
        if entry.case not in self.cases:
            self.cases.append(entry.case)
        self.variants.setdefault(entry.variant, VariantColumn(entry.variant)).cells[entry.case] = entry

    def cell(self, case: str, variant: str) -> GridEntry | None:
        return self.variants[variant].cells.get(case)

    @property
    def best(self) -> str | None:
        """The first variant of the ranking (:func:`variant_grids`); None when it has no variant with an item."""
        return next(iter(self.variants), None)

    def comparisons(self) -> list[Comparison]:
        """Each other variant against the best, case by case; each family of p-values Holm-adjusted."""
        best = self.best
        if best is None:
            return []
        top = self.variants[best]
        found = []
        for name, column in self.variants.items():
            if name == best:
                continue
            shared = [case for case in self.cases if _scored(column, case) and _scored(top, case)]
            test = paired_test([top.cells[c].score for c in shared],  # type: ignore[misc]
                               [column.cells[c].score for c in shared])  # type: ignore[misc]
            decided = [case for case in self.cases if _decided(column, case) and _decided(top, case)]
            wins = sum(bool(column.cells[c].passed) and not top.cells[c].passed for c in decided)
            losses = sum(bool(top.cells[c].passed) and not column.cells[c].passed for c in decided)
            found.append((name, test, wins, losses, len(decided), mcnemar_p(losses, wins)))
        adjusted = holm([f[1].p_value for f in found])
        adjusted_verdicts = holm([f[5] for f in found])
        return [Comparison(name, best, test, p, wins, losses, decided, verdict_p, q)
                for (name, test, wins, losses, decided, verdict_p), p, q in zip(found, adjusted, adjusted_verdicts)]


def _scored(column: VariantColumn, case: str) -> bool:
    entry = column.cells.get(case)
    return entry is not None and entry.score is not None


def _decided(column: VariantColumn, case: str) -> bool:
    entry = column.cells.get(case)
    return entry is not None and entry.passed is not None


def _rank(column: VariantColumn) -> tuple[float, float, str]:
    """Pass rate first (the verdict every report agrees on), then mean score; a variant lacking either is behind."""
    rate = column.pass_rate
    return (-(rate.estimate if rate is not None else -1.0), -(column.mean.estimate if column.mean else -1.0),
            column.name)


PAIRWISE_RUBRIC = "(pairwise)"  # what the records name a pairwise comparison's rubric: no rubric file is named so


def variant_grids(entries: Iterable[GridEntry]) -> list[VariantGrid]:
    """One grid per agent (and rubric) with variants, its cases in name order and its variants ranked as a
    leaderboard: the highest pass rate first, then the highest mean score, equals by name. A pairwise
    comparison's items (no rubric of their own) are not variants: :func:`pairwise_tables` counts them."""
    grids: dict[tuple[str, str | None], VariantGrid] = {}
    chosen = (e for e in entries if e.rubric not in (None, PAIRWISE_RUBRIC))
    for entry in sorted(chosen, key=lambda e: (e.agent, e.rubric or "", e.case, e.variant)):
        key = (entry.agent, entry.rubric)
        grids.setdefault(key, VariantGrid(entry.agent, entry.rubric)).add(entry)
    for grid in grids.values():
        grid.variants = dict(sorted(grid.variants.items(), key=lambda kv: _rank(kv[1])))
    return list(grids.values())


# --- pairwise comparisons ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PairEntry:
    """One pairwise item: which comparison, which pair, and the judge's preference for the first side."""

    comparison: str
    pair: str  # "a vs b"
    case: str
    preference: float | None  # 1 the first side is better, 0 the second, 0.5 a tie; None: not judged
    consistent: bool | None = None  # both orders gave the same verdict

    @property
    def sides(self) -> tuple[str, str]:
        a, _, b = self.pair.partition(" vs ")
        return a, b


@dataclass
class PairTally:
    """One pair's results over the cases: wins each way, ties, and the ties that were orders disagreeing."""

    a: str
    b: str
    a_wins: int = 0
    b_wins: int = 0
    ties: int = 0
    inconsistent: int = 0
    unjudged: int = 0

    @property
    def judged(self) -> int:
        return self.a_wins + self.b_wins + self.ties

    @property
    def win_rate(self) -> Interval | None:
        """The first side's win rate, a tie half a win, with its Wilson interval."""
        return wilson_interval(self.a_wins + self.ties / 2, self.judged) if self.judged else None

    @property
    def p_value(self) -> float:
        """Whether one side wins more than chance would have it (a two-sided sign test over the decided cases)."""
        return mcnemar_p(self.a_wins, self.b_wins)


@dataclass
class PairwiseTable:
    comparison: str
    pairs: dict[str, PairTally] = field(default_factory=dict)
    cases: set[str] = field(default_factory=set)

    def ranking(self) -> list[tuple[str, float]]:
        """The sides by Bradley-Terry strength (the chance of beating an average other side), strongest first;
        only with three sides or more, where the pairs alone do not order them."""
        sides = {side for tally in self.pairs.values() for side in (tally.a, tally.b)}
        if len(sides) < 3:
            return []
        wins: dict[tuple[str, str], float] = {}
        for t in self.pairs.values():
            wins[(t.a, t.b)] = wins.get((t.a, t.b), 0.0) + t.a_wins + t.ties / 2
            wins[(t.b, t.a)] = wins.get((t.b, t.a), 0.0) + t.b_wins + t.ties / 2
        return sorted(bradley_terry(wins).items(), key=lambda kv: (-kv[1], kv[0]))


def pairwise_tables(entries: Iterable[PairEntry]) -> list[PairwiseTable]:
    """One table per comparison, its pairs in name order."""
    tables: dict[str, PairwiseTable] = {}
    for entry in sorted(entries, key=lambda e: (e.comparison, e.pair, e.case)):
        table = tables.setdefault(entry.comparison, PairwiseTable(entry.comparison))
        table.cases.add(entry.case)
        tally = table.pairs.setdefault(entry.pair, PairTally(*entry.sides))
        if entry.preference is None:
            tally.unjudged += 1
        elif entry.preference > 0.75:
            tally.a_wins += 1
        elif entry.preference < 0.25:
            tally.b_wins += 1
        else:
            tally.ties += 1
            tally.inconsistent += entry.consistent is False
    return list(tables.values())


def pair_entry(comparison: str | None, pair: str | None, case: str | None,
               dimensions: dict[str, Any]) -> PairEntry | None:
    """A pairwise item's entry from what its result or its record holds (the ``preference`` and ``agreement``
    dimensions); None for an item that is not one."""
    if not (comparison and pair and " vs " in pair and isinstance(dimensions.get("preference"), dict)):
        return None
    agreement = dimensions.get("agreement")
    agreed = agreement.get("score") if isinstance(agreement, dict) else None
    return PairEntry(comparison, pair, case or "", dimensions["preference"].get("score"),
                     None if agreed is None else agreed >= 0.5)
