"""``harness diff CYCLE_A CYCLE_B``: what changed from one cycle to another, item by item.

:func:`diff_cycles` reads the two cycles' records the way the history and the reports read them
(:func:`harness.apps.tracking.results.results_from_records`, over ``frames.items_frame``) into a
:class:`CycleDiff`; :func:`render_text`, :func:`render_json` and :func:`render_html` read only that. Items are
keyed by node id: an item in one cycle only is listed as added or removed. An item's change is said as the
compare gate says it (:func:`harness.apps.tracking.compare.change_lines`).
"""

from __future__ import annotations

import html
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.tracking.compare import change_lines, resolve_cycle, signed
from harness.apps.tracking.results import ReportItem, results_from_records
from harness.base.stats import Interval, PairedTest, mean_interval, paired_test
from harness.base.usage import shown_cost
from harness.evaluation.comparison import PAIRWISE_RUBRIC
from harness.evaluation.items.result import why_no_score
from harness.face.report_text import VERDICT_PASSED, VERDICTS
from harness.records import RecordReader

TOP = 10  # score changes listed in the text and HTML (the JSON has them all)


@dataclass(frozen=True)
class Side:
    """One item in one cycle: its final attempt, and totals over its attempts."""

    verdict: str  # pytest's word, as the history counts it
    outcome: str  # the harness's word
    score: float | None
    no_score: str | None  # why it has no score
    rubric: str | None
    dimensions: dict[str, float | None]
    attempts: int
    tokens: int
    cost_usd: float  # of the models with a price
    cost_known: bool
    duration_ms: int | None  # its attempts' durations summed; None when none was recorded

    @property
    def passed(self) -> float | None:
        """1.0 passed, 0.0 failed, None skipped (as pass rates count it)."""
        return VERDICT_PASSED.get(self.verdict)

    @property
    def shown_score(self) -> str:
        return f"{self.score:.3f}" if self.score is not None else f"none ({self.no_score})"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "outcome": self.outcome, "score": self.score, "no_score": self.no_score,
                "rubric": self.rubric, "dimensions": self.dimensions, "attempts": self.attempts,
                "tokens": self.tokens, "cost_usd": self.cost_usd if self.cost_known else None,
                "cost": shown_cost(self.cost_usd, self.cost_known), "duration_ms": self.duration_ms}


@dataclass(frozen=True)
class ItemDiff:
    """One node id in the two cycles; ``a`` or ``b`` is None for an item in one of them only."""

    nodeid: str
    a: Side | None
    b: Side | None

    @property
    def status(self) -> str:
        return "added" if self.a is None else "removed" if self.b is None else "in both"

    @property
    def flipped(self) -> bool:
        """Passed in one cycle and failed in the other (a skipped side is neither)."""
        return (self.a is not None and self.b is not None and None not in (self.a.passed, self.b.passed)
                and self.a.passed != self.b.passed)

    @property
    def score_change(self) -> float | None:
        if self.a is None or self.b is None or self.a.score is None or self.b.score is None:
            return None
        return self.b.score - self.a.score

    @property
    def scored_in_one(self) -> bool:
        """In both cycles, with a score in one of them only."""
        return self.a is not None and self.b is not None and (self.a.score is None) != (self.b.score is None)

    @property
    def dimension_changes(self) -> list[tuple[str, float, float]]:
        """The dimensions scored in both cycles whose score changed, largest drop first."""
        if self.a is None or self.b is None:
            return []
        pairs = [(name, before, self.b.dimensions.get(name)) for name, before in self.a.dimensions.items()]
        changed = [(n, float(x), float(y)) for n, x, y in pairs
                   if x is not None and y is not None and abs(y - x) > 1e-9]
        return sorted(changed, key=lambda c: (c[2] - c[1], c[0]))

    def describe(self) -> list[str]:
        """What changed, a line each (the compare gate's wording)."""
        if self.a is None or self.b is None:
            side = self.a or self.b
            assert side is not None
            return [f"{self.status}: {side.verdict}, score {side.shown_score}"]
        verdicts = (self.a.verdict, self.b.verdict)
        return change_lines(self.a.score, self.b.score, self.dimension_changes, verdicts=verdicts,
                            why_none=(self.a.no_score, self.b.no_score))

    def to_json(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "status": self.status, "flipped": self.flipped,
                "score_change": self.score_change, "a": self.a and self.a.to_json(),
                "b": self.b and self.b.to_json(), "changes": self.describe()}


@dataclass(frozen=True)
class DimensionMean:
    """One rubric dimension's mean in each cycle over the items that scored it in both."""

    rubric: str
    dimension: str
    items: int
    a: float
    b: float

    @property
    def change(self) -> float:
        return self.b - self.a

    def to_json(self) -> dict[str, Any]:
        return {"rubric": self.rubric, "dimension": self.dimension, "items": self.items, "a": self.a, "b": self.b,
                "change": self.change}


@dataclass(frozen=True)
class CycleTotals:
    """One cycle's items counted as the history counts them."""

    cycle: str
    items: int
    scored: int
    mean_score: float | None
    verdicts: dict[str, int]
    cost_usd: float
    cost_known: bool
    tokens: int
    duration_ms: int
    median_duration_ms: float | None  # per item, over the items with a recorded duration
    comparisons: int = 0  # pairwise items: a preference, not a score, so not in the mean
    rubric_versions: dict[str, str] = field(default_factory=dict)  # the versions each rubric was scored with

    @property
    def cost(self) -> str:
        return shown_cost(self.cost_usd, self.cost_known)

    @property
    def mean_text(self) -> str:
        """``0.812 over 18 of 20 items``: what the mean divides by."""
        left_out = f" ({self.comparisons} pairwise aside)" if self.comparisons else ""  # a preference, not a score
        if self.mean_score is None:
            return f"none: no item of {self.items} has a score{left_out}"
        return f"{self.mean_score:.3f} over {self.scored} of {self.items} item{'s' * (self.items != 1)}{left_out}"

    @property
    def verdict_text(self) -> str:
        return ", ".join(f"{n} {word}" for word, n in self.verdicts.items() if n) or "no items"

    def to_json(self) -> dict[str, Any]:
        return {"cycle": self.cycle, "items": self.items, "scored": self.scored, "comparisons": self.comparisons,
                "mean_score": self.mean_score,
                "mean": self.mean_text, "verdicts": self.verdicts,
                "cost_usd": self.cost_usd if self.cost_known else None, "cost_known": self.cost_known,
                "cost": self.cost, "tokens": self.tokens, "duration_ms": self.duration_ms,
                "median_duration_ms": self.median_duration_ms, "rubric_versions": self.rubric_versions}


@dataclass(frozen=True)
class CycleDiff:
    """Cycle ``a`` against cycle ``b``: totals, every item, the dimensions and a paired test of the scores."""

    a: CycleTotals
    b: CycleTotals
    items: tuple[ItemDiff, ...]  # by node id
    dimensions: tuple[DimensionMean, ...]
    paired: PairedTest  # b - a over the items scored in both
    shared_a: Interval | None  # the mean of those items in a, and in b
    shared_b: Interval | None

    @property
    def flipped(self) -> list[ItemDiff]:
        return [i for i in self.items if i.flipped]

    @property
    def score_changes(self) -> list[ItemDiff]:
        """Items scored in both whose score changed, largest change first."""
        changed = [i for i in self.items if i.score_change is not None and abs(i.score_change) > 1e-9]
        return sorted(changed, key=lambda i: (-abs(i.score_change or 0.0), i.nodeid))

    @property
    def scored_in_one(self) -> list[ItemDiff]:
        return [i for i in self.items if i.scored_in_one]

    @property
    def added(self) -> list[ItemDiff]:
        return [i for i in self.items if i.a is None]

    @property
    def removed(self) -> list[ItemDiff]:
        return [i for i in self.items if i.b is None]

    @property
    def rubric_changes(self) -> list[tuple[str, str, str]]:
        """(rubric, version in A, version in B) for each rubric scored in both cycles with another version: their
        scores are not like for like."""
        a, b = self.a.rubric_versions, self.b.rubric_versions
        return [(name, a[name], b[name]) for name in sorted(a.keys() & b.keys()) if a[name] != b[name]]

    @property
    def cost_change(self) -> str:
        """``+$0.0100``, or ``unknown`` when either cycle's cost is."""
        if not (self.a.cost_known and self.b.cost_known):
            return "unknown"
        change = self.b.cost_usd - self.a.cost_usd
        return f"{'-' if change < 0 else '+'}${abs(change):.4f}"

    def paired_lines(self) -> list[str]:
        """The paired test: what it is over, the two means, the difference and its p-value; or plainly why there is
        none."""
        n = self.paired.pairs
        if n < 2:
            which = "no item is" if n == 0 else "only 1 item is"
            return [f"no paired test: {which} scored in both cycles (it needs 2 or more)"]
        assert self.shared_a is not None and self.shared_b is not None
        how = "exact sign-flip test" if self.paired.exact else "sign-flip test, sampled"
        return [f"over the {n} items scored in both", f"mean A {self.shared_a.text()}, B {self.shared_b.text()}",
                f"{self.paired.text('A', 'B')} ({how})"]

    @property
    def paired_text(self) -> str:
        return "; ".join(self.paired_lines())

    def to_json(self) -> dict[str, Any]:
        paired = {**self.paired.to_json(), "text": self.paired_text, "enough": self.paired.pairs >= 2,
                  "mean_a": self.shared_a and self.shared_a.to_json(),
                  "mean_b": self.shared_b and self.shared_b.to_json()}
        return {
            "a": self.a.to_json(), "b": self.b.to_json(),
            "changes": {"cost_usd": None if self.cost_change == "unknown" else self.b.cost_usd - self.a.cost_usd,
                        "cost": self.cost_change, "tokens": self.b.tokens - self.a.tokens,
                        "duration_ms": self.b.duration_ms - self.a.duration_ms,
                        "median_duration_ms": _minus(self.b.median_duration_ms, self.a.median_duration_ms),
                        "rubric_versions": [f"{n} {a} -> {b}" for n, a, b in self.rubric_changes]},
            "paired_test": paired,
            "flipped": [i.to_json() for i in self.flipped],
            "score_changes": [i.to_json() for i in self.score_changes],
            "scored_in_one": [i.to_json() for i in self.scored_in_one],
            "added": [i.to_json() for i in self.added], "removed": [i.to_json() for i in self.removed],
            "dimensions": [d.to_json() for d in self.dimensions],
            "items": [i.to_json() for i in self.items],
        }


def _minus(b: float | None, a: float | None) -> float | None:
    return None if a is None or b is None else b - a


# --- reading the records ---------------------------------------------------------------------------------------


def diff_cycles(work_dir: Path, a: str = "previous", b: str = "latest") -> CycleDiff:
    """Cycle ``a`` against cycle ``b`` (ids, or ``latest`` and ``previous``); ``CycleNotFound`` names a cycle
    that has no records."""
    work_dir = Path(work_dir)
    reader = RecordReader(work_dir)
    known = reader.cycles()
    cycle_a, cycle_b = resolve_cycle(a, work_dir, known), resolve_cycle(b, work_dir, known)
    versions_a: dict[str, set[str]] = {}
    versions_b: dict[str, set[str]] = {}
    sides_a, sides_b = _sides(reader, cycle_a, versions_a), _sides(reader, cycle_b, versions_b)
    items = tuple(ItemDiff(n, sides_a.get(n), sides_b.get(n)) for n in sorted({*sides_a, *sides_b}))
    shared = [i for i in items if i.score_change is not None and i.b is not None and i.b.rubric != PAIRWISE_RUBRIC]
    before = [i.a.score for i in shared if i.a is not None and i.a.score is not None]
    after = [i.b.score for i in shared if i.b is not None and i.b.score is not None]
    return CycleDiff(
        a=_totals(cycle_a, sides_a, versions_a), b=_totals(cycle_b, sides_b, versions_b), items=items,
        dimensions=_dimension_means(items),
        paired=paired_test(before, after), shared_a=mean_interval(before) if before else None,
        shared_b=mean_interval(after) if after else None)


def _sides(reader: RecordReader, cycle: str, versions: dict[str, set[str]]) -> dict[str, Side]:
    """The cycle's items; ``versions`` gets each rubric's versions in its attempts."""
    durations: dict[str, int] = {}  # an item's attempts, summed
    for attempt in reader.attempts([cycle]):
        if attempt.get("rubric_name") and attempt.get("rubric_version"):
            versions.setdefault(attempt["rubric_name"], set()).add(str(attempt["rubric_version"]))
        if attempt.get("duration_ms") is not None:
            durations[attempt["nodeid"]] = durations.get(attempt["nodeid"], 0) + int(attempt["duration_ms"])
    loops = reader.loop_results(cycle)
    return {r.nodeid: _side(r, durations.get(r.nodeid), loops.get(r.nodeid) or {})
            for r in results_from_records(reader.work_dir, [cycle])}


def _side(item: ReportItem, duration_ms: int | None, loop: dict[str, Any]) -> Side:
    unscored = loop.get("escalationReason") if isinstance(loop.get("escalationReason"), str) else None
    dims = {name: (d.get("score") if isinstance(d, dict) else d) for name, d in item.dimensions.items()}
    return Side(verdict=item.verdict, outcome=item.outcome, score=item.score,
                no_score=None if item.score is not None else why_no_score(item.outcome, unscored),
                rubric=item.rubric, dimensions=dims, attempts=item.attempts, tokens=item.tokens,
                cost_usd=item.cost_usd, cost_known=item.cost_known, duration_ms=duration_ms)


def _totals(cycle: str, sides: dict[str, Side], versions: dict[str, set[str]]) -> CycleTotals:
    scores = [s.score for s in sides.values() if s.score is not None and s.rubric != PAIRWISE_RUBRIC]
    durations = [s.duration_ms for s in sides.values() if s.duration_ms is not None]
    return CycleTotals(
        cycle=cycle, items=len(sides), scored=len(scores), mean_score=statistics.fmean(scores) if scores else None,
        verdicts={word: sum(s.verdict == word for s in sides.values()) for word in VERDICTS},
        cost_usd=sum(s.cost_usd for s in sides.values()), cost_known=all(s.cost_known for s in sides.values()),
        tokens=sum(s.tokens for s in sides.values()), duration_ms=sum(durations),
        median_duration_ms=float(statistics.median(durations)) if durations else None,
        comparisons=sum(s.rubric == PAIRWISE_RUBRIC for s in sides.values()),
        rubric_versions={name: ", ".join(sorted(found)) for name, found in sorted(versions.items())})


def _dimension_means(items: tuple[ItemDiff, ...]) -> tuple[DimensionMean, ...]:
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for item in items:
        if item.a is None or item.b is None or item.a.rubric != item.b.rubric:
            continue
        for name, before in item.a.dimensions.items():
            after = item.b.dimensions.get(name)
            if before is not None and after is not None:
                pairs.setdefault((item.b.rubric or "?", name), []).append((float(before), float(after)))
    return tuple(DimensionMean(rubric, dim, len(p), statistics.fmean(x for x, _ in p),
                               statistics.fmean(y for _, y in p)) for (rubric, dim), p in sorted(pairs.items()))


# --- text ----------------------------------------------------------------------------------------------------


def duration(ms: float | None, *, change: bool = False) -> str:
    """``850 ms``, ``1.2 s``, ``3.5 min``; ``-`` for none."""
    if ms is None:
        return "-"
    sign = "-" if ms < 0 else "+" if change and ms > 0 else ""
    ms = abs(ms)
    size = f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"
    return sign + size


def _rows(diff: CycleDiff) -> list[tuple[str, str, str, str]]:
    """The totals side by side: what, A, B, change."""
    a, b = diff.a, diff.b
    return [
        ("items", str(a.items), str(b.items), f"{b.items - a.items:+d}"),
        ("verdicts", a.verdict_text, b.verdict_text, ""),
        ("mean score", a.mean_text, b.mean_text, "(paired test below)"),
        ("cost", a.cost, b.cost, diff.cost_change),
        ("tokens", str(a.tokens), str(b.tokens), f"{b.tokens - a.tokens:+d}"),
        ("items' time, summed", duration(a.duration_ms), duration(b.duration_ms),  # not wall time: items overlap
         duration(b.duration_ms - a.duration_ms, change=True)),
        ("median per item", duration(a.median_duration_ms), duration(b.median_duration_ms),
         duration(_minus(b.median_duration_ms, a.median_duration_ms), change=True)),
        *[("rubric", f"{name} {old}", f"{name} {new}", "another version: scores not like for like")
          for name, old, new in diff.rubric_changes],
    ]


def _changes_title(changed: int) -> str:
    if changed <= TOP:
        return f"Score changes ({changed}, largest first)"
    return f"Score changes (the {TOP} largest of {changed})"


def _columns(rows: list[tuple[str, ...]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def render_text(diff: CycleDiff) -> str:
    """The diff as a person reads it in a terminal."""
    lines = [f"harness diff: A {diff.a.cycle} -> B {diff.b.cycle}", ""]
    lines += _columns([("", f"A {diff.a.cycle}", f"B {diff.b.cycle}", "change"), *_rows(diff)])
    first, *rest = diff.paired_lines()
    lines += ["", f"Paired test {first}:" if rest else f"Paired test: {first}", *(f"  {line}" for line in rest)]

    def section(title: str, items: list[ItemDiff]) -> None:
        if items:
            lines.extend(["", f"{title} ({len(items)}):"])
            for item in items:
                lines.append(f"  {item.nodeid}")
                lines.extend(f"      {line}" for line in item.describe())

    section("Flipped", diff.flipped)
    changes = diff.score_changes
    if changes:
        lines += ["", f"{_changes_title(len(changes))}:"]
        lines += _columns([(signed(i.score_change or 0.0), i.nodeid, f"{i.a.shown_score} -> {i.b.shown_score}")
                           for i in changes[:TOP] if i.a and i.b], indent="  ")
    section("Scored in one cycle only", diff.scored_in_one)
    section("Added in B", diff.added)
    section("Removed in B", diff.removed)
    if diff.dimensions:
        lines += ["", "Dimensions (mean over the items that scored the dimension in both):"]
        lines += _columns([("rubric", "dimension", "items", "A", "B", "change")]
                          + [(d.rubric, d.dimension, str(d.items), f"{d.a:.3f}", f"{d.b:.3f}", signed(d.change))
                             for d in diff.dimensions], indent="  ")
    if not (diff.flipped or changes or diff.scored_in_one or diff.added or diff.removed):
        lines += ["", "No item changed its verdict or score."]
    return "\n".join(lines) + "\n"


def render_json(diff: CycleDiff) -> str:
    return json.dumps(diff.to_json(), indent=2) + "\n"


# --- HTML ----------------------------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], numeric: set[int], *, score: int | None = None,
           css: str = "") -> str:
    """Cells are HTML already; the ``score`` column's changes are green up, red down."""
    def cell(i: int, value: str) -> str:
        if i not in numeric:
            return f"<td>{value}</td>"
        moved = i == score and value.strip("+-0.") != ""  # +0.000 is no change
        tone = "" if not moved else " add" if value.startswith("+") else " del" if value.startswith("-") else ""
        return f'<td class="num{tone}">{value}</td>'

    return (f'<table class="{css}"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
            + "</tbody></table>")


def _paired_html(diff: CycleDiff) -> str:
    first, *rest = diff.paired_lines()
    if not rest:
        return f'<p id="paired"><strong>Paired test:</strong> {_e(first)}</p>'
    return (f'<div id="paired"><p><strong>Paired test {_e(first)}:</strong></p><ul>'
            + "".join(f"<li>{_e(line)}</li>" for line in rest) + "</ul></div>")


def render_html(diff: CycleDiff, *, css: str, csp: str) -> str:
    """One self-contained page: ``css`` and ``csp`` are the HTML report's (``report.CSS``, ``report.CSP``: no
    script, nothing loaded), handed in so that this module loads without pandas and matplotlib."""
    a, b = diff.a.cycle, diff.b.cycle
    rows = [tuple(_e(c) for c in row) for row in _rows(diff)]
    rows = [(r[0], r[1], r[2], "" if r[0] in ("verdicts", "mean score") else r[3]) for r in rows]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f'<meta http-equiv="Content-Security-Policy" content="{csp}">', '<link rel="icon" href="data:,">',
             f"<title>harness diff {_e(a)} -> {_e(b)}</title><style>{css}</style></head><body>",
             f"<h1>harness diff: A {_e(a)} → B {_e(b)}</h1>",
             _table(("", f"A {a}", f"B {b}", "change"), rows, {3}, css="totals"),
             _paired_html(diff)]

    def section(title: str, anchor: str, items: list[ItemDiff]) -> None:
        if not items:
            return
        parts.append(f'<h2 id="{anchor}">{_e(title)} ({len(items)})</h2>')
        for item in items:
            # coloured by the verdict in B; an item in one cycle only is neither
            word = item.b.verdict if item.a is not None and item.b is not None else ""
            kind = "failed" if word == "failed" else "passed" if word == "passed" else "other" if word else ""
            badge = (f"{item.a.verdict} → {item.b.verdict}" if item.a and item.b and item.a.verdict != item.b.verdict
                     else item.status if item.status != "in both" else word)
            parts.append(f'<section class="item {kind}" data-nodeid="{_e(item.nodeid)}"><h3>{_e(item.nodeid)} '
                         f'<span class="badge {_e(word)}">{_e(badge)}</span></h3><ul>'
                         + "".join(f"<li>{_e(line)}</li>" for line in item.describe()) + "</ul></section>")

    section("Flipped", "flipped", diff.flipped)
    changes = diff.score_changes
    if changes:
        parts.append(f'<h2 id="score-changes">{_changes_title(len(changes))}</h2>')
        parts.append(_table(("item", "A", "B", "change"),
                            [(_e(i.nodeid), _e(i.a.shown_score), _e(i.b.shown_score), signed(i.score_change or 0.0))
                             for i in changes[:TOP] if i.a and i.b], {1, 2, 3}, score=3))
    section("Scored in one cycle only", "scored-in-one", diff.scored_in_one)
    section("Added in B", "added", diff.added)
    section("Removed in B", "removed", diff.removed)
    if diff.dimensions:
        parts.append('<h2 id="dimensions">Dimensions</h2><p class="muted">The mean over the items that scored the '
                     "dimension in both cycles.</p>")
        parts.append(_table(("rubric", "dimension", "items", "A", "B", "change"),
                            [(_e(d.rubric), _e(d.dimension), str(d.items), f"{d.a:.3f}", f"{d.b:.3f}",
                              signed(d.change)) for d in diff.dimensions], {2, 3, 4, 5}, score=5))
    if not (diff.flipped or changes or diff.scored_in_one or diff.added or diff.removed):
        parts.append("<p>No item changed its verdict or score.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
