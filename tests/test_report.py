"""CI outputs: the Markdown summary, $GITHUB_STEP_SUMMARY, and the self-contained HTML report (in Chromium)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_tracking_support import two_cycles

from harness.apps.cli import main
from harness.apps.tracking.compare import DimensionDrop, Regression
from harness.apps.tracking.markdown import append_step_summary, render_markdown
from harness.apps.tracking.report import CSP, render_html
from harness.apps.tracking.results import ReportItem, results_from_records


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, str, str]:
    work_dir = tmp_path / "WORK"
    return (work_dir, *two_cycles(work_dir))


def test_markdown_lists_failed_items_first_with_their_worst_dimensions(work: tuple[Path, str, str]) -> None:
    work_dir, _, second = work
    text = render_markdown(results_from_records(work_dir, [second]))
    lines = text.splitlines()
    assert lines[0] == f"## pytest-rubric · cycle {second}"
    assert lines[2] == "**1 failed**, 2 passed · 5 attempts · cost $0.0500"
    rows = [line for line in lines if line.startswith("| ") and "`" in line]
    assert rows[0].startswith("| ❌ failed | `writer::case-b` | 0.69 | 0.80 | 3 | $0.0300 | **accuracy** 0.60: ")
    assert "**sources** 0.70: sources reason: scored 0.7 on attempt 3" in rows[0]
    assert all("✅ passed" in row for row in rows[1:])


def test_markdown_lists_regressions_with_before_and_after() -> None:
    regression = Regression("s.yaml::c", 0.91, 0.78, True, (DimensionDrop("accuracy", 0.9, 0.6),))
    results = [
        ReportItem("s.yaml::c", "passed", 0.78, 0.7, 1, 0.01, agent="w", case="c", test_outcome="failed",
                   regression=regression),
        ReportItem("s.yaml::d", "passed", 0.95, 0.7, 1, 0.01, agent="w", case="d", test_outcome="passed"),
    ]
    text = render_markdown(results, baseline="2026-01-30-001")
    assert "| ❌ regressed | `w::c` | 0.78 |" in text
    assert "### Regressions against 2026-01-30-001" in text
    assert "| `w::c` | 0.910 | 0.780 | -0.130 | accuracy 0.900 → 0.600 |" in text


def test_markdown_escapes_table_breakers() -> None:
    result = ReportItem("n", "failed", 0.1, 0.8, 1, agent="a", case="c",
                        dimensions={"x": {"score": 0.1, "weight": 1.0, "reason": "a | b\nnew line"}})
    row = next(line for line in render_markdown([result]).splitlines() if "`a::c`" in line)
    assert "a \\| b new line" in row


def test_step_summary_is_appended_only_when_set(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert append_step_summary("## ours", {"GITHUB_STEP_SUMMARY": str(target)}) == target
    assert target.read_text() == "earlier step\n## ours\n"
    assert append_step_summary("## ours", {}) is None


def test_html_is_self_contained(work: tuple[Path, str, str]) -> None:
    work_dir, _, second = work
    page = render_html(work_dir, [second], results_from_records(work_dir, [second]))
    assert page.startswith("<!DOCTYPE html>")
    assert f'content="{CSP}"' in page
    assert "<script" not in page
    assert not re.search(r'(?:src|href)="(?!data:|#)', page), "a reference outside the page"
    assert page.count('src="data:image/png;base64,') == 6  # 2 score plots, 2 dimension plots, 2 heatmaps


def test_html_shows_attempts_dimensions_fixes_and_diffs(work: tuple[Path, str, str]) -> None:
    work_dir, _, second = work
    page = render_html(work_dir, [second], results_from_records(work_dir, [second]), plots=False)
    failing = page[page.index('data-nodeid="suites/writer.yaml::case-b"'):]
    failing = failing[: failing.index("</section>")]
    assert failing.count('class="attempt"') == 3
    assert '<details class="attempt" open><summary>Attempt 3: failed, score 0.69' in failing
    assert "accuracy reason: scored 0.6 on attempt 3" in failing
    assert "<li>improve accuracy of case-b</li>" in failing
    assert '<span class="del">-The sky is green.</span><span class="add">+The sky is blue.</span>' in failing
    assert html.escape("Sources: NASA.") in failing
    # failed first: the failing item comes before the passing ones
    assert page.index("suites/writer.yaml::case-b") < page.index("suites/writer.yaml::case-a")


def test_cli_report(work: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    monkeypatch: pytest.MonkeyPatch) -> None:
    work_dir, first, second = work
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)  # on a terminal: a file, and its path printed
    assert main(["report", "--work-dir", str(work_dir), "--tracking-dir", str(tmp_path / "tracking"),
                 "--no-plots"]) == 0
    monkeypatch.undo()
    out = Path(capsys.readouterr().out.strip())
    assert out == tmp_path / "tracking" / f"report-{second}.html"  # latest by default
    assert "writer::case-b" in out.read_text()

    md = tmp_path / "r.md"
    assert main(["report", first, "--work-dir", str(work_dir), "--markdown", "-o", str(md)]) == 0
    assert md.read_text().startswith(f"## pytest-rubric · cycle {first}")

    assert main(["report", "2020-01-01-001", "--work-dir", str(work_dir)]) == 66
    assert "has no records" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["redirected", "-o -"])
def test_cli_report_writes_to_stdout_as_the_readme_says(work: tuple[Path, str, str], tmp_path: Path,
                                                         how: str) -> None:
    """`harness report CYCLE > report.html` as a shell runs it: the report itself lands in the file."""
    import subprocess
    import sys

    work_dir, _, second = work
    page = tmp_path / "report.html"
    args = [sys.executable, "-c", "import sys; from harness.apps.cli import main; sys.exit(main())", "report", second, "--work-dir", str(work_dir), "--no-plots",
            *(["-o", "-"] if how == "-o -" else [])]
    with page.open("w") as stdout:
        done = subprocess.run(args, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "writer::case-b" in text
    assert not (tmp_path / "-").exists() and not (tmp_path / "tracking").exists()


# --- headless Chromium -----------------------------------------------------------------------

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)")

# Injected into a copy of the report: records console errors, failed loads, CSP violations and images
# that did not render, and which of the failing item's dimension rows a person can see.
PROBE = """<script>
window.__problems = [];
const __error = console.error.bind(console);
console.error = (...args) => { window.__problems.push("console.error: " + args.join(" ")); __error(...args); };
window.addEventListener("error", e => window.__problems.push(
  "error: " + (e.message || (e.target && (e.target.src || e.target.href)) || "resource")), true);
window.addEventListener("unhandledrejection", e => window.__problems.push("rejection: " + e.reason));
document.addEventListener("securitypolicyviolation", e => window.__problems.push("csp: " + e.blockedURI));
window.addEventListener("load", () => {
  for (const img of document.images) {
    if (!img.complete || img.naturalWidth === 0) window.__problems.push("image not rendered: " + img.alt);
  }
  const visible = [...document.querySelectorAll("section.item.failed tr[data-dimension]")]
    .filter(tr => tr.getClientRects().length > 0 && tr.closest("details[open]") !== null)
    .map(tr => tr.dataset.dimension + "=" + tr.cells[2].innerText.trim());
  const shown = el => el.getClientRects().length > 0 && (el.closest("details") === null || el.closest("details[open]"));
  const grid = [...document.querySelectorAll("table.grid td.cell")].filter(shown).map(td => td.innerText.trim());
  const pairs = [...document.querySelectorAll("table.pairwise tr")].filter(shown).slice(1)
    .map(tr => tr.cells[0].innerText.trim());
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({problems: window.__problems, visible: visible, grid: grid, pairs: pairs});
  document.body.appendChild(out);
});
</script>"""


def run_in_chromium(page: Path, tmp_path: Path) -> tuple[dict, str]:
    """Open ``page`` with the probe in headless Chromium; return the probe's findings and Chromium's log."""
    probed = page.with_name("probed-" + page.name)
    text = page.read_text()
    text = text.replace(f'content="{CSP}"', f"content=\"{CSP}; script-src 'unsafe-inline'\"")
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1))
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the probe did not run:\n{done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1))), done.stderr


def console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@needs_chromium
def test_html_report_renders_in_chromium_without_errors(work: tuple[Path, str, str], tmp_path: Path) -> None:
    work_dir, _, second = work
    page = tmp_path / "report.html"
    assert main(["report", second, "--work-dir", str(work_dir), "-o", str(page)]) == 0
    probe, log = run_in_chromium(page, tmp_path)
    assert probe["problems"] == []
    assert console_lines(log) == []
    assert probe["visible"] == ["accuracy=0.60", "sources=0.70", "clarity=0.85"]  # the failing item, lowest first


@needs_chromium
def test_chromium_probe_catches_errors(tmp_path: Path) -> None:
    """The check above is only worth something if a broken page fails it."""
    page = tmp_path / "broken.html"
    page.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
                    '</head><body><img alt="missing" src="data:image/png;base64,AAAA">'
                    '<img alt="remote" src="https://example.invalid/x.png">'
                    '<script>console.error("boom")</script></body></html>')
    probe, _ = run_in_chromium(page, tmp_path)
    problems = " | ".join(probe["problems"])
    assert "console.error: boom" in problems
    assert "image not rendered: missing" in problems
    assert "csp: https://example.invalid/x.png" in problems
