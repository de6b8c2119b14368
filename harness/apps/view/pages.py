"""The pages of ``harness view``: HTML over the records, read-only.

Every value comes from the records' one read interface (:class:`harness.records.RecordReader`), the tracking frames
and results (``harness.apps.tracking.frames``, ``results``) and the execution trace; every piece of an item is
rendered by the HTML report's own functions (``harness.apps.tracking.report``), so the viewer and ``harness report``
show an item the same way. Nothing is computed here beyond putting those together, and every value shown is
HTML-escaped (artifacts and inputs are untrusted text).
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from harness.apps.traces.select import text_line
from harness.apps.tracking.comparisons import GRID_CSS, grid_html, pairwise_html, report_grids, report_pairwise
from harness.apps.tracking.frames import attempts_frame
from harness.apps.tracking.markdown import summary_counts
from harness.apps.tracking.report import CSS, item_html, items_table
from harness.apps.tracking.results import ReportItem, results_from_records
from harness.base.usage import shown_cost
from harness.evaluation.comparison import PAIRWISE_RUBRIC
from harness.records import RecordReader, TraceRead, read_trace, trace_path

TRACE_ROWS = 5_000  # lines of a trace shown on one page; the rest are counted

VIEW_CSS = CSS + GRID_CSS + """
nav.top { display: flex; gap: 18px; align-items: baseline; border-bottom: 1px solid var(--line);
          padding-bottom: 8px; margin-bottom: 16px; }
nav.top .brand { font-weight: 700; } nav.top .where { margin-left: auto; font-size: 12px; }
p.crumbs { margin: 0 0 6px; font-size: 13px; }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
table.traces td { font-size: 12.5px; } table.traces td.ts { white-space: nowrap; }
table.traces td.what { font-family: ui-monospace, monospace; word-break: break-word; }
section.item h3 { font-size: 18px; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def cycle_href(cycle: str) -> str:
    return f"/cycle/{quote(cycle, safe='')}"


def item_href(cycle: str, nodeid: str) -> str:
    """An item's page: its node id is one path segment (``/`` and ``::`` percent-encoded)."""
    return f"{cycle_href(cycle)}/item/{quote(nodeid, safe='')}"


def document(title: str, body: str, *, work_dir: Path, crumbs: Sequence[tuple[str, str | None]] = ()) -> str:
    """A whole page: the report's styles, the viewer's bar, the crumbs back to the cycles, then ``body``."""
    trail = " › ".join(f'<a href="{_e(href)}">{_e(text)}</a>' if href else _e(text) for text, href in crumbs)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', '<link rel="icon" href="data:,">',
        f"<title>{_e(title)} · harness view</title>", f"<style>{VIEW_CSS}</style></head><body>",
        '<nav class="top"><span class="brand">harness view</span><a href="/">Cycles</a><a href="/plots">Plots</a>'
        f'<span class="where muted">{_e(work_dir)} · read-only</span></nav>',
        f'<p class="crumbs">{trail}</p>' if trail else "",
        body, "</body></html>",
    ]) + "\n"


def mean_score(results: Sequence[ReportItem]) -> str:
    """The mean final score of the items that have one, saying what it divides by (as ``harness history`` does); a
    pairwise item's score is a preference, not a quality, and is left out."""
    results = [r for r in results if r.rubric != PAIRWISE_RUBRIC]
    scores = [r.score for r in results if r.score is not None]
    if not scores:
        return f"none (0 of {len(results)} items scored)"
    return f"{sum(scores) / len(scores):.3f} over {len(scores)} of {len(results)} items"


class Pages:
    """The viewer's pages over one work folder. Each returns a whole HTML document, or None for something the
    records do not hold (the server answers 404)."""

    def __init__(self, work_dir: Path, tracking_dir: Path):
        self.work_dir = Path(work_dir)
        self.tracking_dir = Path(tracking_dir).resolve()
        self.reader = RecordReader(self.work_dir)

    @property
    def plots_dir(self) -> Path:
        return self.tracking_dir / "plots"

    def _page(self, title: str, body: str, crumbs: Sequence[tuple[str, str | None]] = ()) -> str:
        return document(title, body, work_dir=self.work_dir, crumbs=crumbs)

    # --- the cycles --------------------------------------------------------------------------

    def cycles(self) -> str:
        known = self.reader.cycles()
        if not known:
            return self._page("Cycles", f"<h1>Cycles</h1><p>No finished attempt in {_e(self.work_dir)} yet.</p>")
        attempts = attempts_frame(self.work_dir)
        started = attempts.groupby("cycle_id")["created_at"].min().to_dict()
        by_cycle = {cycle: list(items) for cycle, items in
                    itertools.groupby(sorted(results_from_records(self.work_dir, known), key=lambda r: r.cycle or ""),
                                      key=lambda r: r.cycle)}
        rows = []
        for cycle in reversed(known):  # the newest first
            results = by_cycle.get(cycle, [])
            counts = summary_counts(results).replace("**", "").split(" · ")[0]
            failed = any(r.failed for r in results)
            cost = shown_cost(sum(r.cost_usd for r in results), all(r.cost_known for r in results))
            rows.append(f'<tr data-cycle="{_e(cycle)}"><td><a href="{_e(cycle_href(cycle))}">{_e(cycle)}</a></td>'
                        f'<td>{_e(started.get(cycle, ""))}</td><td class="num">{len(results)}</td>'
                        f'<td class="{"regression" if failed else ""}">{_e(counts)}</td>'
                        f'<td class="num">{_e(mean_score(results))}</td>'
                        f'<td class="num">{sum(r.attempts for r in results)}</td><td class="num">{_e(cost)}</td></tr>')
        body = ("<h1>Cycles</h1>"
                f'<p class="muted">{len(known)} cycle{"s" * (len(known) != 1)}, the newest first; one pytest session '
                "is one cycle. The mean score is over the items that have one; the cost is of every attempt.</p>"
                '<table class="cycles"><thead><tr><th>cycle</th><th>started (UTC)</th><th>items</th><th>outcome</th>'
                "<th>mean score</th><th>attempts</th><th>cost</th></tr></thead><tbody>" + "".join(rows)
                + "</tbody></table>")
        return self._page("Cycles", body)

    # --- one cycle ---------------------------------------------------------------------------

    def cycle(self, cycle: str) -> str | None:
        if cycle not in self.reader.cycles():
            return None
        results = results_from_records(self.work_dir, [cycle])
        links = []
        if trace_path(self.work_dir, cycle).is_file():
            links.append(f'<a href="{_e(cycle_href(cycle))}/traces">its execution trace</a>')
        links.append(f"a file of it: <code>harness report {_e(cycle)}</code>")
        note = self.reader.reconciliation_note(cycle)
        body = [f"<h1>Cycle {_e(cycle)}</h1>",
                f'<p id="summary">{_e(summary_counts(results).replace("**", ""))}</p>',
                f'<p class="muted">mean score {_e(mean_score(results))} · failed items first · '
                + " · ".join(links) + "</p>"]
        if note:
            body.append(f'<p class="muted">{_e(note)}</p>')
        body.append(grid_html(report_grids(results)) + pairwise_html(report_pairwise(results)))  # the comparisons first
        body.append("<h2>Items</h2>" + items_table(results, href=lambda r: item_href(cycle, r.nodeid)) if results
                    else "<p>No items in this cycle.</p>")
        return self._page(f"Cycle {cycle}", "".join(body), crumbs=[("Cycles", "/"), (cycle, None)])

    # --- one item ----------------------------------------------------------------------------

    def item(self, cycle: str, nodeid: str) -> str | None:
        if cycle not in self.reader.cycles():
            return None
        result = next((r for r in results_from_records(self.work_dir, [cycle]) if r.nodeid == nodeid), None)
        if result is None:
            return None
        attempts = attempts_frame(self.work_dir, cycles=[cycle])
        given = self.reader.case_data(cycle, nodeid).get(nodeid)
        section = item_html(result, attempts, self.work_dir, given, expand=True)
        if given is None:
            section = ('<p class="muted">No inputs or reference answer are recorded for this item (its kind gives '
                       "none, or an older version ran it).</p>" + section)
        return self._page(result.name, section,
                          crumbs=[("Cycles", "/"), (cycle, cycle_href(cycle)), (result.name, None)])

    # --- the trace of a cycle ----------------------------------------------------------------

    def traces(self, cycle: str) -> str | None:
        path = trace_path(self.work_dir, cycle)
        if not path.is_file():
            return None
        report = TraceRead()
        rows, more = [], 0
        for line in read_trace(path, report):
            if len(rows) >= TRACE_ROWS:
                more += 1
                continue
            data = line["data"]
            nodeid = data.get("nodeid")
            prefix = "  ".join([line["ts"], f"{line['event']:<18}", nodeid or "-"]) + "  "
            what = text_line(line).removeprefix(prefix)
            item = f'<a href="{_e(item_href(cycle, nodeid))}">{_e(nodeid)}</a>' if nodeid else "-"
            attempt = data.get("attempt")
            rows.append(f'<tr data-event="{_e(line["event"])}"><td class="ts">{_e(line["ts"])}</td>'
                        f'<td>{_e(line["event"])}</td>'
                        f'<td>{item}</td><td class="num">{"" if attempt is None else _e(attempt)}</td>'
                        f'<td class="what">{_e(what)}</td></tr>')
        notes = []
        if more:
            notes.append(f"{more:,} more lines not shown (<code>harness traces --cycle {_e(cycle)}</code> shows all)")
        if report.bad:
            notes.append(f"{len(report.bad)} lines that are not trace lines skipped")
        if report.partial:
            notes.append("the last line is still being written")
        body = (f"<h1>Execution trace of {_e(cycle)}</h1>"
                f'<p class="muted">{_e(path)} · one row per event, in the order written'
                + "".join(f" · {n}" for n in notes) + "</p>"
                '<table class="traces"><thead><tr><th>time (UTC)</th><th>event</th><th>item</th><th>attempt</th>'
                "<th>what happened</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
        return self._page(f"Trace {cycle}", body,
                          crumbs=[("Cycles", "/"), (cycle, cycle_href(cycle)), ("trace", None)])

    # --- plots -------------------------------------------------------------------------------

    def plot_names(self) -> list[str]:
        """The PNG files directly in the plots folder (``harness plot`` writes them)."""
        folder = self.plots_dir
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.suffix == ".png" and p.is_file())

    def plot_file(self, name: str) -> Path | None:
        """A plot by its file name: only one of :meth:`plot_names`, never another path."""
        return self.plots_dir / name if name in self.plot_names() else None

    def plots(self) -> str:
        names = self.plot_names()
        if not names:
            body = (f"<h1>Plots</h1><p>No plots in {_e(self.plots_dir)}: <code>harness plot</code> (or "
                    "<code>pytest --plot</code>) writes them there.</p>")
        else:
            figures = "".join(f'<figure><img alt="{_e(Path(n).stem)}" src="/plots/{_e(quote(n, safe=""))}">'
                              f"<figcaption>{_e(Path(n).stem)}</figcaption></figure>" for n in names)
            body = (f'<h1>Plots</h1><p class="muted">{_e(self.plots_dir)}, as <code>harness plot</code> last wrote '
                    f'them</p><div class="plots">{figures}</div>')
        return self._page("Plots", body, crumbs=[("Cycles", "/"), ("Plots", None)])

    # --- nothing there -----------------------------------------------------------------------

    def error(self, message: str) -> str:
        return self._page("Error", f"<h1>Error</h1><p>{_e(message)}</p>", crumbs=[("Cycles", "/")])

    def not_found(self, path: str) -> str:
        return self._page("Not found", f'<h1>Not found</h1><p>Nothing here: <code>{_e(path)}</code>. '
                                       'The <a href="/">cycles</a> list what the records hold.</p>',
                          crumbs=[("Cycles", "/")])


__all__ = ["Pages", "cycle_href", "document", "item_href", "mean_score"]
