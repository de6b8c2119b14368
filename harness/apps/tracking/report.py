"""CI reports: a Markdown summary (for a file and ``$GITHUB_STEP_SUMMARY``) and a self-contained HTML report.

The HTML report of a cycle needs nothing but the file: CSS is inline, plots are PNG data URIs, there is
no script and no network request. Per item it shows every attempt with its dimension scores and
reasons, the feedback and suggested fixes, and the diff from the previous attempt; failed items first.
"""

from __future__ import annotations

import base64
import datetime as dt
import difflib
import html
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from harness.apps.tracking.frames import attempts_frame, items_frame
from harness.apps.tracking.markdown import _score, _status, summary_counts
from harness.apps.tracking.plots import plot_dimensions, plot_scores, plot_trajectories
from harness.apps.tracking.results import ReportItem
from harness.apps.tracking.comparisons import GRID_CSS, grid_html, pairwise_html, report_grids, report_pairwise
from harness.base.fileio import atomic_write_text
from harness.evaluation.comparison import PAIRWISE_RUBRIC
from harness.records import RecordReader, run_location

ARTIFACT_LIMIT = 200_000  # characters of one artifact shown in the HTML report

# --- HTML --------------------------------------------------------------------------------------

CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #57606a; --line: #d0d7de; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; margin: 0;
       padding: 24px 32px; max-width: 1200px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0; } .muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
         color: #fff; background: var(--muted); }
.badge.passed { background: var(--ok); } .badge.failed, .badge.regressed { background: var(--bad); }
.badge.escalated, .badge.indeterminate, .badge.interrupted { background: var(--warn); }
section.item { border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; margin: 14px 0; }
section.item.failed { border-left: 5px solid var(--bad); } section.item.passed { border-left: 5px solid var(--ok); }
section.item.other { border-left: 5px solid var(--warn); }
details { margin: 8px 0; } summary { cursor: pointer; font-weight: 600; }
.bar { background: #eaeef2; border-radius: 3px; height: 10px; width: 120px; display: inline-block; vertical-align: middle; }
.bar > span { display: block; height: 100%; border-radius: 3px; background: var(--ok); }
.bar.low > span { background: var(--bad); } .bar.mid > span { background: var(--warn); }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; font-size: 12.5px; }
pre.diff span { display: block; } .add { background: #dafbe1; } .del { background: #ffebe9; } .hunk { color: #8250df; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(540px, 1fr)); gap: 12px; }
.plots figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px; background: #fff; }
.plots img { width: 100%; height: auto; } figcaption { font-size: 12px; color: var(--muted); }
.regression { color: var(--bad); font-weight: 600; }
details.given table.inputs th { width: 16%; white-space: nowrap; } details.given pre { margin: 0; }
h4 { font-size: 14px; margin: 10px 0 4px; }
"""


# Nothing may load from anywhere: styles are inline, images are data URIs, there is no script.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _bar(score: float | None, threshold: float | None) -> str:
    if score is None:
        return '<span class="muted">not scored</span>'
    level = "low" if score < 0.5 else ("mid" if threshold is not None and score < threshold else "")
    return (f'<span class="bar {level}" role="img" aria-label="{score:.2f}"><span style="width:{max(0.0, min(1.0, score)) * 100:.0f}%">'
            f'</span></span> {score:.2f}')


def resolve_artifact(path_text: str | None, work_dir: Path, cycle: str, agent: str, case: str, attempt: int) -> Path | None:
    """Find an attempt's artifact: its recorded path (absolute, or relative to the cwd or the work
    folder's parent), else the records layout (``runs/{cycle}/{agent}[/{case}]/attempt-{n}.md``)."""
    candidates = []
    if path_text:
        recorded = Path(path_text)
        candidates += [recorded] if recorded.is_absolute() else [Path.cwd() / recorded, work_dir.parent / recorded,
                                                                   work_dir / recorded]
    candidates += [run_location(work_dir, cycle, agent, where).attempt_artifact(attempt) for where in (case, None)]
    return next((c for c in candidates if c.is_file()), None)


def _read_artifact(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text if len(text) <= ARTIFACT_LIMIT else text[:ARTIFACT_LIMIT] + "\n… (cut: the artifact is longer)\n"


def _diff_html(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""))
    if not lines:
        return '<p class="muted">No change from the previous attempt.</p>'
    out = []
    for line in lines:
        cls = "hunk" if line.startswith("@@") else ("add" if line.startswith("+") else
                                                    ("del" if line.startswith("-") else ""))
        if line.startswith(("+++", "---")):
            cls = "muted"
        out.append(f'<span class="{cls}">{_e(line) or " "}</span>')
    return '<pre class="diff">' + "".join(out) + "</pre>"


def _score_words(result: ReportItem) -> str:
    """How an item's head says its score: against its threshold, or for a pairwise item what its preference means."""
    if result.rubric == PAIRWISE_RUBRIC:
        return f"pairwise · preference {result.shown_score} (1: the first side better, 0: the second, 0.50: a tie)"
    return f"rubric {result.rubric or '?'} · score {result.shown_score} / threshold {_score(result.threshold)}"


def _attempt_html(row: pd.Series, previous_text: str | None, text: str | None, open_: bool,
                  expand: bool = False) -> str:
    score = None if pd.isna(row["overall_score"]) else float(row["overall_score"])
    threshold = float(row["threshold"])
    parts = [f'<details class="attempt"{" open" if open_ else ""}><summary>Attempt {int(row["attempt"])}: '
             f'{_e(row["outcome"])}, score {_score(score)} (threshold {threshold:.2f})</summary>']
    dims = row["dimensions"] or {}
    if dims:
        parts.append('<table class="dimensions"><thead><tr><th>dimension</th><th>weight</th><th>score</th>'
                     '<th>reason</th></tr></thead><tbody>')
        for name, d in sorted(dims.items(), key=lambda kv: (kv[1].get("score") is None, kv[1].get("score") or 0)):
            weight = d.get("weight")
            parts.append(f'<tr data-dimension="{_e(name)}"><td>{_e(name)}</td>'
                         f'<td class="num">{"" if weight is None else f"{float(weight):.2f}"}</td>'
                         f'<td class="num">{_bar(d.get("score"), threshold)}</td><td>{_e(d.get("reason", ""))}</td></tr>')
        parts.append("</tbody></table>")
    if row["feedback"]:
        parts.append(f'<p><strong>Feedback:</strong> {_e(row["feedback"])}</p>')
    fixes = row["suggested_fixes"] or []
    if fixes:
        parts.append("<p><strong>Suggested fixes:</strong></p><ul>" + "".join(f"<li>{_e(f)}</li>" for f in fixes)
                     + "</ul>")
    attempt = int(row["attempt"])
    if previous_text is not None and text is not None:
        parts.append(f"<details{' open' if expand else ''}><summary>Changes from attempt {attempt - 1}</summary>"
                     + _diff_html(previous_text, text, f"attempt-{attempt - 1}.md", f"attempt-{attempt}.md")
                     + "</details>")
    if text is not None:
        parts.append(f"<details{' open' if expand else ''}><summary>Artifact (attempt-{attempt}.md)</summary>"
                     f"<pre>{_e(text)}</pre></details>")
    elif row["artifact_path"]:
        parts.append(f'<p class="muted">Artifact not found: {_e(row["artifact_path"])}</p>')
    parts.append("</details>")
    return "".join(parts)


def _given_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def case_html(case_data: dict | None, *, open_: bool = False) -> str:
    """An item's inputs and reference answer as the records keep them (``RecordReader.case_data``); nothing for an
    item recorded without them."""
    if not case_data:
        return ""
    inputs, expected, cut = case_data.get("inputs"), case_data.get("expected"), case_data.get("cut") or {}
    parts = []
    if case_data.get("description"):
        parts.append(f'<p class="description">{_e(case_data["description"])}</p>')
    parts.append("<h4>Inputs</h4>")
    if isinstance(inputs, dict) and "inputs" not in cut:
        rows = "".join(f'<tr data-input="{_e(name)}"><th>{_e(name)}</th><td><pre>{_e(_given_text(value))}</pre>'
                       "</td></tr>" for name, value in inputs.items())
        parts.append(f'<table class="inputs"><tbody>{rows}</tbody></table>' if rows else
                     '<p class="muted">none</p>')
    else:
        parts.append(f'<pre class="inputs">{_e(_given_text(inputs))}</pre>')
    parts.append("<h4>Reference answer</h4>")
    parts.append('<p class="muted">none</p>' if expected is None else
                 f'<pre class="expected">{_e(_given_text(expected))}</pre>')
    for name, size in cut.items():
        parts.append(f'<p class="muted">{_e(name)} cut: {int(size):,} bytes of JSON, of which the first 64 KB are '
                     "kept and shown</p>")
    count = len(inputs) if isinstance(inputs, dict) else "?"
    summary = f"Inputs ({count}) and reference answer{'' if expected is not None else ' (none)'}"
    return (f'<details class="given"{" open" if open_ else ""}><summary>{_e(summary)}</summary>{"".join(parts)}'
            "</details>")


def item_html(result: ReportItem, attempts: pd.DataFrame, work_dir: Path, case_data: dict | None = None, *,
              expand: bool = False) -> str:
    """One item's section: its head, its inputs and reference answer, then every attempt (``expand``: each one
    open, with its diff)."""
    kind = "failed" if result.failed else ("passed" if result.outcome == "passed" else "other")
    status = _status(result).split(" ", 1)[-1]
    anchor = "item-" + "".join(c if c.isalnum() else "-" for c in result.nodeid)
    head = (f'<section class="item {kind}" id="{_e(anchor)}" data-nodeid="{_e(result.nodeid)}">'
            f'<h3>{_e(result.name)} <span class="badge {_e(status)}">{_e(status)}</span></h3>'
            f'<p class="muted">{_e(result.nodeid)} · {_e(_score_words(result))} · '
            f'{result.attempts} attempt{"s" if result.attempts != 1 else ""} · '
            f'cost {_e(result.cost)} · {result.tokens} tokens</p>')
    parts = [head]
    if result.regression is not None:
        parts.append('<p class="regression">Regression against the baseline: '
                     + _e("; ".join(result.regression.describe())) + "</p>")
    parts.append(case_html(case_data, open_=expand))
    rows = attempts[attempts["nodeid"] == result.nodeid].sort_values("attempt")
    previous: str | None = None
    last = len(rows) - 1
    for index, (_, row) in enumerate(rows.iterrows()):
        path = resolve_artifact(row["artifact_path"], work_dir, row["cycle_id"], row["agent_name"], row["case_id"],
                                int(row["attempt"]))
        text = _read_artifact(path)
        parts.append(_attempt_html(row, previous, text, open_=expand or (index == last and kind != "passed"),
                                   expand=expand))
        previous = text
    if rows.empty and result.dimensions:  # a session result without records: show what the report carried
        parts.append(_attempt_html(pd.Series({
            "attempt": result.attempts or 1, "outcome": result.outcome, "overall_score": result.score,
            "threshold": result.threshold or 0.0, "dimensions": result.dimensions, "feedback": "",
            "suggested_fixes": [], "artifact_path": result.artifact}), None, None, open_=True))
    parts.append("</section>")
    return "".join(parts)


def _plots_html(work_dir: Path, cycles: list[str], tracking_dir: Path | None) -> str:
    """Plots of the history up to the report's last cycle, rendered now and embedded as PNG data URIs."""
    every = attempts_frame(work_dir)
    if every.empty and tracking_dir is None:
        return ""
    upto = max(cycles) if cycles else None
    history = every[every["cycle_id"] <= upto] if upto else every
    shown = history[history["agent_name"].isin(set(every[every["cycle_id"].isin(cycles)]["agent_name"]))]
    figures = []
    with tempfile.TemporaryDirectory(prefix="harness-report-") as tmp:
        items = items_frame(shown)
        paths = plot_scores(items, Path(tmp)) + plot_dimensions(items, Path(tmp))
        raw = tracking_dir / "raw_data.json" if tracking_dir is not None else None
        if raw is not None and raw.exists():
            paths += plot_trajectories(raw, Path(tmp))
        for path in paths:
            if path.suffix != ".png":
                continue
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            figures.append(f'<figure><img alt="{_e(path.stem)}" src="data:image/png;base64,{data}">'
                           f"<figcaption>{_e(path.stem)}</figcaption></figure>")
    if not figures:
        return ""
    return '<h2 id="plots">Plots</h2><div class="plots">' + "".join(figures) + "</div>"


def items_table(results: Sequence[ReportItem], href: Callable[[ReportItem], str] | None = None) -> str:
    """The overview: one row per item (in the order given) with its badge, score, attempts, cost and worst
    dimensions; each item links to ``href(item)``, by default its section of the same page."""
    parts = ['<table class="overview"><thead><tr><th>status</th><th>item</th><th>score</th><th>threshold</th>'
             "<th>attempts</th><th>cost</th><th>worst dimensions</th></tr></thead><tbody>"]
    for r in results:
        link = href(r) if href is not None else "#item-" + "".join(c if c.isalnum() else "-" for c in r.nodeid)
        worst = "; ".join(f"{n} {s:.2f}" for n, s, _ in r.worst_dimensions())
        status = _status(r).split(" ", 1)[-1]
        parts.append(f'<tr class="{_e(status)}"><td><span class="badge {_e(status)}">{_e(status)}</span></td>'
                     f'<td><a href="{_e(link)}">{_e(r.name)}</a></td>'
                     f'<td class="num">{_e(r.shown_score)}</td><td class="num">{_score(r.threshold)}</td>'
                     f'<td class="num">{r.attempts}</td><td class="num">{_e(r.cost)}</td>'
                     f"<td>{_e(worst)}</td></tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def render_html(work_dir: Path, cycles: list[str], results: Sequence[ReportItem], *,
                baseline: str | None = None, tracking_dir: Path | None = None, plots: bool = True,
                title: str = "pytest-rubric report") -> str:
    """The whole report as one HTML document (see the module docstring)."""
    work_dir = Path(work_dir)
    results = sorted(results, key=ReportItem.sort_key)
    attempts = attempts_frame(work_dir, cycles=cycles) if cycles else attempts_frame(work_dir).iloc[0:0]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    counts = summary_counts(results).replace("**", "")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<link rel="icon" href="data:,">',
        f"<title>{_e(title)}{(' · ' + _e(', '.join(cycles))) if cycles else ''}</title>",
        f"<style>{CSS}{GRID_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">cycle {_e(", ".join(cycles) or "none")}'
        + (f" · baseline {_e(baseline)}" if baseline else "") + f" · generated {when}</p>",
        f'<p id="summary">{_e(counts)}</p>',
    ]
    parts.append(grid_html(report_grids(results)) + pairwise_html(report_pairwise(results)))  # the comparisons first
    if results:
        parts.append('<h2 id="overview">Items</h2>' + items_table(results))
    else:
        parts.append("<p>No harness items in this cycle.</p>")
    if plots:
        parts.append(_plots_html(work_dir, cycles, tracking_dir))
    if results:
        parts.append('<h2 id="details">Attempts</h2>')
        reader = RecordReader(work_dir)
        given = {(cycle, nodeid): data for cycle in cycles for nodeid, data in reader.case_data(cycle).items()}
        parts += [item_html(r, attempts, work_dir, given.get((r.cycle, r.nodeid))) for r in results]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html(path: Path, text: str) -> Path:
    atomic_write_text(Path(path), text)
    return Path(path)
