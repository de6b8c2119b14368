"""The regression gate: compare this run's scores with a baseline cycle's records.

In the spirit of pytest-benchmark's ``--benchmark-compare-fail``: ``overall:0.05,dimension:0.1``
fails an item whose overall score dropped by more than 0.05, or any one of whose dimension scores
dropped by more than 0.1, against the same item's final attempt in the baseline cycle. A margin
written with ``%`` is relative to the baseline score (``overall:5%``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import ExitCode, HarnessError

CYCLE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{3}$")
MARGIN_KEYS = ("overall", "dimension")
DEFAULT_MARGINS = "overall:0.05,dimension:0.1"


@dataclass(frozen=True)
class Margin:
    """A largest allowed drop: absolute (score points) or relative (fraction of the baseline)."""

    value: float
    relative: bool = False

    def exceeded(self, before: float, after: float) -> bool:
        allowed = self.value * before if self.relative else self.value
        return before - after > allowed + 1e-9

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass(frozen=True)
class Margins:
    overall: Margin | None = None
    dimension: Margin | None = None

    def __str__(self) -> str:
        parts = [f"{key} > {margin}" for key, margin in (("overall", self.overall), ("dimension", self.dimension))
                 if margin is not None]
        return ", ".join(parts) or "no margins"


def parse_margins(text: str) -> Margins:
    """``overall:0.05,dimension:0.1`` (absolute) or ``overall:5%``; an argparse type function."""
    found: dict[str, Margin] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, raw = part.partition(":")
        key, raw = key.strip(), raw.strip()
        if not sep or key not in MARGIN_KEYS:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not KEY:MARGIN with KEY overall or dimension (example: {DEFAULT_MARGINS})")
        if key in found:
            raise argparse.ArgumentTypeError(f"{key} is given twice in {text!r}")
        relative = raw.endswith("%")
        try:
            value = float(raw[:-1] if relative else raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} in {part!r} is not a number (example: {key}:0.05)") from None
        value = value / 100 if relative else value
        if not 0 <= value <= 1:
            raise argparse.ArgumentTypeError(
                f"{raw!r} in {part!r} is outside 0..1 (scores are 0..1; write 5% for a relative margin)")
        found[key] = Margin(value, relative)
    return Margins(**found)


def parse_baseline(text: str) -> str:
    """``latest`` or a cycle id ``YYYY-MM-DD-NNN``; an argparse type function."""
    text = text.strip()
    if text == "latest" or CYCLE_PATTERN.match(text):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not 'latest' or a cycle id such as 2026-01-31-001")


# --- naming a cycle: `harness report`, `harness diff` and the gate's named baseline -------------------------

CYCLE_NAMES = ("latest", "previous")  # the newest cycle with finished records, and the one before it


def parse_cycle(text: str) -> str:
    """``latest``, ``previous`` or a cycle id ``YYYY-MM-DD-NNN``; an argparse type function."""
    text = text.strip()
    if text in CYCLE_NAMES or CYCLE_PATTERN.match(text):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not latest, previous or a cycle id such as 2026-01-31-001")


class CycleNotFound(HarnessError, LookupError):
    """A cycle named on the command line (or as the baseline) has no records: one line naming it and the cycles
    that have some. The ``harness`` command prints it without a traceback."""

    exit_code = ExitCode.NO_INPUT

    def __init__(self, which: str, work_dir: Path, known: Sequence[str]):
        shown = ", ".join(known[-10:]) if known else "none yet"
        if len(known) > 10:
            shown = f"the last 10 of {len(known)}: {shown}"
        if which == "previous" and len(known) == 1:
            problem = f"cycle previous: only one cycle has records in {work_dir} ({known[0]})"
        else:
            problem = f"cycle {which} has no records in {work_dir} (cycles with records: {shown})"
        super().__init__(problem)


BaselineNotFound = CycleNotFound  # the gate's name for it


def resolve_cycle(which: str, work_dir: Path, known: Sequence[str]) -> str:
    """The cycle id ``which`` names among ``known`` (oldest first): ``latest`` the newest, ``previous`` the one
    before it, else the id itself; :class:`CycleNotFound` when there is no such cycle."""
    index = {"latest": -1, "previous": -2}.get(which)
    if index is not None and len(known) >= -index:
        return known[index]
    if index is None and which in known:
        return which
    raise CycleNotFound(which, work_dir, known)


@dataclass(frozen=True)
class BaselineItem:
    score: float | None
    dimensions: dict[str, float | None]


@dataclass(frozen=True)
class Baseline:
    """The final scores of every item of one cycle, by nodeid and by ``agent::case``."""

    cycle_id: str
    items: dict[str, BaselineItem] = field(default_factory=dict)

    def find(self, nodeid: str, agent: str | None = None, case: str | None = None) -> BaselineItem | None:
        return self.items.get(nodeid) or (self.items.get(f"{agent}::{case}") if agent and case else None)

    def to_wire(self) -> dict[str, Any]:
        """Plain data for pytest-xdist's workerinput."""
        return {"cycle_id": self.cycle_id,
                "items": {k: {"score": v.score, "dimensions": v.dimensions} for k, v in self.items.items()}}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Baseline:
        return cls(data["cycle_id"], {k: BaselineItem(v["score"], dict(v["dimensions"]))
                                      for k, v in data["items"].items()})


def load_baseline(work_dir: Path, which: str, exclude: tuple[str, ...] = ()) -> Baseline | None:
    """The baseline cycle's final scores. ``latest`` is the newest finished cycle not in ``exclude``
    (None when there is none yet); a named cycle that has no records raises ``BaselineNotFound``."""
    from harness.apps.tracking.frames import attempts_frame, cycle_ids, items_frame  # pandas: only when comparing

    known = cycle_ids(work_dir)
    if which == "latest":
        candidates = [c for c in known if c not in exclude]
        if not candidates:
            return None
        cycle = candidates[-1]
    else:
        cycle = resolve_cycle(which, work_dir, known)
    items = items_frame(attempts_frame(work_dir, cycles=[cycle]))
    found: dict[str, BaselineItem] = {}
    for row in items.itertuples(index=False):
        score = None if row.overall_score != row.overall_score else float(row.overall_score)  # NaN -> None
        dims = {d: (v.get("score") if isinstance(v, dict) else v) for d, v in (row.dimensions or {}).items()}
        item = BaselineItem(score, dims)
        found[row.nodeid] = item
        found.setdefault(f"{row.agent_name}::{row.case_id}", item)
    return Baseline(cycle, found)


@dataclass(frozen=True)
class DimensionDrop:
    dimension: str
    before: float
    after: float


@dataclass(frozen=True)
class Regression:
    """One item whose score dropped beyond a margin against the baseline."""

    nodeid: str
    before: float | None
    after: float | None
    overall_dropped: bool
    dimensions: tuple[DimensionDrop, ...] = ()

    def describe(self) -> list[str]:
        """What changed, as ``harness diff`` says it of an item (:func:`change_lines`)."""
        return change_lines(self.before, self.after, [(d.dimension, d.before, d.after) for d in self.dimensions],
                            note="" if self.overall_dropped else "within margin")

    def to_json(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "before": self.before, "after": self.after,
                "overall_dropped": self.overall_dropped,
                "dimensions": [{"dimension": d.dimension, "before": d.before, "after": d.after}
                               for d in self.dimensions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Regression:
        return cls(data["nodeid"], data["before"], data["after"], data["overall_dropped"],
                   tuple(DimensionDrop(**d) for d in data["dimensions"]))


def compare_item(nodeid: str, baseline: BaselineItem, score: float | None,
                 dimensions: dict[str, float | None], margins: Margins) -> Regression | None:
    """The regression of one item, or None when nothing dropped beyond its margin.

    An unknown score on either side (indeterminate) is never a regression: there is nothing to compare.
    """
    overall_dropped = (margins.overall is not None and baseline.score is not None and score is not None
                       and margins.overall.exceeded(baseline.score, score))
    drops = []
    if margins.dimension is not None:
        for dim, before in sorted(baseline.dimensions.items()):
            after = dimensions.get(dim)
            if before is not None and after is not None and margins.dimension.exceeded(before, after):
                drops.append(DimensionDrop(dim, float(before), float(after)))
    if not overall_dropped and not drops:
        return None
    return Regression(nodeid, baseline.score, score, overall_dropped, tuple(drops))


# --- how a change of one item is said: the gate's failure text and `harness diff` say it the same way --------


def signed(change: float, digits: int = 3) -> str:
    """``+0.050``, ``-0.300``; never ``-0.000`` for a change that is nothing but float noise."""
    return f"{round(change, digits) + 0.0:+.{digits}f}"


def score_change(label: str, before: float | None, after: float | None, *, note: str = "",
                 why_none: tuple[str | None, str | None] = (None, None)) -> str:
    """``overall 0.880 -> 0.820 (-0.060)``; a side with no score says why (``overall 0.880 -> none (an error
    ended it before scoring)``); ``note`` follows a change in brackets (``(within margin)``)."""
    def shown(score: float | None, why: str | None) -> str:
        return f"{score:.3f}" if score is not None else "none" + (f" ({why})" if why else "")

    text = f"{label} {shown(before, why_none[0])} -> {shown(after, why_none[1])}"
    if before is not None and after is not None:
        text += f" ({signed(after - before)})" + (f" ({note})" if note else "")
    return text


def change_lines(before: float | None, after: float | None, dimensions: Iterable[tuple[str, float, float]], *,
                 verdicts: tuple[str, str] | None = None, note: str = "",
                 why_none: tuple[str | None, str | None] = (None, None)) -> list[str]:
    """One item's change, a line each: its verdict when it changed (``passed -> failed``), its overall score,
    then each dimension (``dimension accuracy 0.900 -> 0.600 (-0.300)``). No overall line when neither side has
    a score."""
    lines = [f"{verdicts[0]} -> {verdicts[1]}"] if verdicts and verdicts[0] != verdicts[1] else []
    if before is not None or after is not None:
        lines.append(score_change("overall", before, after, note=note, why_none=why_none))
    lines += [score_change(f"dimension {name}", b, a) for name, b, a in dimensions]
    return lines
