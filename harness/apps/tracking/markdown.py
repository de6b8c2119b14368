"""The Markdown summary of a run, for a file and for ``$GITHUB_STEP_SUMMARY``.

Kept apart from the HTML report so that writing it never imports pandas or matplotlib.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness.apps.tracking.results import ReportItem
from harness.apps.tracking.comparisons import grid_markdown, pairwise_markdown, report_grids, report_pairwise
from harness.base.fileio import append_text, atomic_write_text
from harness.base.usage import shown_cost
from harness.face.report_text import VERDICTS

REASON_LIMIT = 90

STATUS_ICON = {"passed": "✅", "failed": "❌", "escalated": "⚠️", "indeterminate": "❔", "error": "💥",
               "validation_failed": "🧩", "running": "⏳", "interrupted": "⏹️"}


# --- Markdown ----------------------------------------------------------------------------------


def _cell(text: str, limit: int = REASON_LIMIT) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def _score(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _status(result: ReportItem) -> str:
    if result.regression is not None and result.failed and result.outcome == "passed":
        return "❌ regressed"
    if result.failed and result.outcome == "passed":
        return "❌ failed"
    return f"{STATUS_ICON.get(result.outcome, '')} {result.outcome}".strip()


def summary_counts(results: Sequence[ReportItem]) -> str:
    """The counts in pytest's words and order (``1 failed, 2 passed, 1 skipped``), then attempts and cost."""
    counts = {word: sum(r.verdict == word for r in results) for word in VERDICTS}
    parts = [f"**{n} {word}**" if word == "failed" else f"{n} {word}" for word, n in counts.items() if n]
    attempts = sum(r.attempts for r in results)
    cost = shown_cost(sum(r.cost_usd for r in results), all(r.cost_known for r in results))
    cached = sum(r.cached_answers for r in results)
    replayed = f" · {cached} model answer{'s' * (cached != 1)} from the response cache" if cached else ""
    return f"{', '.join(parts) or 'no items'} · {attempts} attempts · cost {cost}{replayed}"


def render_markdown(results: Sequence[ReportItem], *, title: str = "pytest-rubric",
                    baseline: str | None = None) -> str:
    """Failed items first, each with its worst dimensions; then the regressions against the baseline."""
    results = sorted(results, key=ReportItem.sort_key)
    cycles = sorted({r.cycle for r in results if r.cycle})
    heading = f"## {title}" + (f" · cycle {', '.join(cycles)}" if cycles else "")
    lines = [heading, "", summary_counts(results) + (f" · baseline {baseline}" if baseline else ""), ""]
    if not results:
        return "\n".join([heading, "", "No harness items ran.", ""])
    lines += ["| status | item | score | threshold | attempts | cost | worst dimensions |",
              "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        worst = "; ".join(f"**{name}** {score:.2f}: {_cell(reason, 70)}" for name, score, reason in
                          r.worst_dimensions()) if (r.failed or r.outcome != "passed") else ""
        lines.append(f"| {_status(r)} | `{_cell(r.name, 80)}` | {r.shown_score} | {_score(r.threshold)} | "
                     f"{r.attempts} | {r.cost} | {worst} |")
    lines += grid_markdown(report_grids(results)) + pairwise_markdown(report_pairwise(results))
    regressions = [r for r in results if r.regression is not None]
    if regressions:
        lines += ["", f"### Regressions against {baseline or 'the baseline'}", "",
                  "| item | before | after | change | dimensions that dropped |", "|---|---:|---:|---:|---|"]
        for r in regressions:
            reg = r.regression
            change = f"{reg.after - reg.before:+.3f}" if reg.before is not None and reg.after is not None else "–"
            dims = "; ".join(f"{d.dimension} {d.before:.3f} → {d.after:.3f}" for d in reg.dimensions)
            lines.append(f"| `{_cell(r.name, 80)}` | {_score(reg.before, 3)} | {_score(reg.after, 3)} | {change} | "
                         f"{dims} |")
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, text: str) -> Path:
    atomic_write_text(Path(path), text)
    return Path(path)


def append_step_summary(text: str, environ: dict[str, str] | None = None) -> Path | None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when it is set (GitHub Actions appends each step's part)."""
    target = (environ if environ is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    append_text(Path(target), text)
    return Path(target)
