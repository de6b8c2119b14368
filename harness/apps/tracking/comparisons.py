"""Comparisons in the Markdown and HTML reports: per agent with ``variants:``, each variant's pass rate and mean
score with their intervals, the paired tests against the best variant and the case x variant grid; per pairwise
comparison, each pair's wins, ties and win rate, and the Bradley-Terry ranking.

They are the tables the terminal summary prints (:mod:`harness.evaluation.comparison`), in their two other
renderings. Nothing here imports pandas: the Markdown summary stays light.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from harness.apps.tracking.results import ReportItem
from harness.evaluation.comparison import (
    GridEntry,
    PairwiseTable,
    VariantGrid,
    pair_entry,
    pairwise_tables,
    variant_grids,
)

GRID_CASES_SHOWN = 500  # rows of the case x variant table in a report; the summaries cover every case


def report_grids(results: Iterable[ReportItem]) -> list[VariantGrid]:
    """The grids of the reported items of agents with variants."""
    return variant_grids(GridEntry(agent=r.agent or "", rubric=r.rubric, variant=r.variant, case=r.case or r.nodeid,
                                   score=r.score, passed=None if r.verdict == "skipped" else not r.failed,
                                   cost_usd=r.cost_usd, cost_known=r.cost_known,
                                   no_score=None if r.score is not None else r.shown_score)
                         for r in results if r.variant)


def _mean_text(grid: VariantGrid, name: str) -> str:
    column = grid.variants[name]
    mean = column.mean
    if mean is None:
        return "–"
    return mean.text() + (f" ({mean.n}/{len(column.cells)})" if mean.n < len(column.cells) else "")


def _rate_text(grid: VariantGrid, name: str) -> str:
    column = grid.variants[name]
    rate = column.pass_rate
    return f"{rate.percent()} of {len(column.decided)}" if rate is not None else "–"


# --- Markdown ----------------------------------------------------------------------------------


def grid_markdown(grids: Sequence[VariantGrid]) -> list[str]:
    lines: list[str] = []
    for grid in grids:
        names = list(grid.variants)
        lines += ["", f"### {grid.agent}: {len(names)} variants x {len(grid.cases)} cases", "",
                  "| variant | items | passed | pass rate [95% CI] | mean score [95% CI] | cost |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, column in grid.variants.items():
            best = " (best)" if name == grid.best else ""
            lines.append(f"| `{name}`{best} | {len(column.cells)} | {column.passed} | {_rate_text(grid, name)} | "
                         f"{_mean_text(grid, name)} | {column.cost} |")
        comparisons = grid.comparisons()
        if comparisons:
            lines += ["", "Each against the best, case by case: scores over the cases both scored, verdicts over the "
                      "cases both decided" + (" (p-values Holm-adjusted):" if len(comparisons) > 1 else ":"), ""]
            lines += [f"- {comparison.text()}" for comparison in comparisons]
        shown = grid.cases[:GRID_CASES_SHOWN]
        lines += ["", f"<details><summary>case x variant ({len(grid.cases)} cases)</summary>", "",
                  "| case | " + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---:|" * len(names)]
        for case in shown:
            cells = []
            for name in names:
                entry = grid.cell(case, name)
                cells.append("" if entry is None else (("✅ " if entry.passed else "❌ " if entry.passed is False
                                                        else "") + (f"{entry.score:.2f}" if entry.score is not None
                                                                    else "none")))
            lines.append(f"| `{case}` | " + " | ".join(cells) + " |")
        if len(grid.cases) > len(shown):
            lines.append(f"| … {len(grid.cases) - len(shown)} more cases | " + " | " * (len(names) - 1) + " |")
        lines += ["", "</details>"]
    return lines


# --- HTML --------------------------------------------------------------------------------------

GRID_CSS = """
table.grid td.cell { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.grid td.cell.pass { background: #dafbe1; } table.grid td.cell.fail { background: #ffebe9; }
table.grid td.cell.none { color: var(--muted); } .best { font-weight: 600; }
.grid-wrap { max-height: 480px; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
.grid-wrap table { margin: 0; } .grid-wrap th { position: sticky; top: 0; }
"""


def grid_html(grids: Sequence[VariantGrid]) -> str:
    """The section of the HTML report: per agent, the variants table, the paired tests and the grid."""
    if not grids:
        return ""
    e = html.escape
    parts = ["<h2>Variants</h2>"]
    for grid in grids:
        names = list(grid.variants)
        rows = "".join(
            f"<tr><td class='{'best' if name == grid.best else ''}'><code>{e(name)}</code>"
            f"{' (best)' if name == grid.best else ''}</td><td class='num'>{len(column.cells)}</td>"
            f"<td class='num'>{column.passed}</td><td class='num'>{e(_rate_text(grid, name))}</td>"
            f"<td class='num'>{e(_mean_text(grid, name))}</td><td class='num'>{e(column.cost)}</td></tr>"
            for name, column in grid.variants.items())
        parts.append(f"<h3>{e(grid.agent)}: {len(names)} variants x {len(grid.cases)} cases"
                     + (f" <span class='muted'>scored by {e(grid.rubric)}</span>" if grid.rubric else "") + "</h3>"
                     "<table class='variants'><tr><th>variant</th><th>items</th><th>passed</th>"
                     "<th>pass rate [95% CI]</th><th>mean score [95% CI]</th><th>cost</th></tr>" + rows + "</table>")
        comparisons = grid.comparisons()
        if comparisons:
            adjusted = " (p-values Holm-adjusted)" if len(comparisons) > 1 else ""
            parts.append("<p class='muted'>Each against the best, case by case: scores over the cases both scored, "
                         f"verdicts over the cases both decided{adjusted}:</p><ul>"
                         + "".join(f"<li class='{'regression' if c.significant else ''}'>{e(c.text())}</li>"
                                   for c in comparisons) + "</ul>")
        head = "".join(f"<th>{e(n)}</th>" for n in names)
        body = []
        for case in grid.cases[:GRID_CASES_SHOWN]:
            cells = []
            for name in names:
                entry = grid.cell(case, name)
                if entry is None:
                    cells.append("<td class='cell none'></td>")
                    continue
                style = "pass" if entry.passed else "fail" if entry.passed is False else "none"
                text = f"{entry.score:.2f}" if entry.score is not None else "none"
                title = f" title='{e(entry.no_score)}'" if entry.no_score else ""
                cells.append(f"<td class='cell {style}'{title}>{text}</td>")
            body.append(f"<tr><td><code>{e(case)}</code></td>{''.join(cells)}</tr>")
        more = len(grid.cases) - GRID_CASES_SHOWN
        parts.append(f"<details open><summary>case x variant ({len(grid.cases)} cases)</summary>"
                     f"<div class='grid-wrap'><table class='grid'><tr><th>case</th>{head}</tr>{''.join(body)}"
                     + (f"<tr><td colspan='{len(names) + 1}' class='muted'>… {more} more cases</td></tr>"
                        if more > 0 else "") + "</table></div></details>")
    return "".join(parts)


# --- pairwise ---------------------------------------------------------------------------------------


def report_pairwise(results: Iterable[ReportItem]) -> list[PairwiseTable]:
    return pairwise_tables(entry for r in results
                           for entry in [pair_entry(r.agent, r.variant, r.case, r.dimensions)] if entry)


def _ranking_text(table: PairwiseTable) -> str:
    return ", ".join(f"{n}. {side} {strength:.0%}" for n, (side, strength) in enumerate(table.ranking(), 1))


def pairwise_markdown(tables: Sequence[PairwiseTable]) -> list[str]:
    lines: list[str] = []
    for table in tables:
        lines += ["", f"### {table.comparison}: pairwise over {len(table.cases)} cases", "",
                  "| pair | first wins | second wins | ties (orders disagreed) | first's win rate [95% CI] | p |",
                  "|---|---:|---:|---:|---:|---:|"]
        for pair, t in table.pairs.items():
            rate = t.win_rate
            lines.append(f"| `{pair}` | {t.a_wins} | {t.b_wins} | {t.ties} ({t.inconsistent}) | "
                         f"{rate.percent() + f' of {t.judged}' if rate else '–'} | {t.p_value:.3g} |")
        if table.ranking():
            lines += ["", f"Bradley-Terry ranking (A beats B with chance A / (A + B)): {_ranking_text(table)}"]
    return lines


def pairwise_html(tables: Sequence[PairwiseTable]) -> str:
    if not tables:
        return ""
    e = html.escape
    parts = ["<h2>Pairwise</h2>"]
    for table in tables:
        rows = "".join(
            f"<tr><td><code>{e(pair)}</code></td><td class='num'>{t.a_wins}</td><td class='num'>{t.b_wins}</td>"
            f"<td class='num'>{t.ties} ({t.inconsistent})</td>"
            f"<td class='num'>{e(t.win_rate.percent() + f' of {t.judged}' if t.win_rate else '–')}</td>"
            f"<td class='num'>{t.p_value:.3g}</td></tr>" for pair, t in table.pairs.items())
        parts.append(f"<h3>{e(table.comparison)}: pairwise over {len(table.cases)} cases</h3>"
                     "<table class='pairwise'><tr><th>pair</th><th>first wins</th><th>second wins</th>"
                     "<th>ties (orders disagreed)</th><th>first's win rate [95% CI]</th><th>p</th></tr>"
                     + rows + "</table>")
        if table.ranking():
            parts.append(f"<p>Bradley-Terry ranking (A beats B with chance A / (A + B)): "
                         f"{e(_ranking_text(table))}</p>")
    return "".join(parts)
