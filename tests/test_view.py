"""``harness view``: the local read-only viewer, over records a real run wrote (the plugin, a mock judge, Python
producers); and the inputs and reference answer the records now keep of each item.

The project runs once per module (pytest in a subprocess, as a user runs it); the viewer serves it on an ephemeral
port in a thread and the pages are fetched with urllib, then opened in headless Chromium.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import AGENT_MODULE, JUDGED_RUBRIC, prompt_text
from test_report import CHROMIUM, console_lines, needs_chromium, run_in_chromium

from harness.apps.cli import main
from harness.apps.tracking.report import case_html, render_html
from harness.apps.tracking.results import results_from_records
from harness.apps.view.server import CSP, ViewServer, make_server
from harness.records import LOOP_RESULTS_SCHEMA, RecordReader, RecordStore
from harness.records.schema import MAX_CASE_DATA_BYTES, encode_case_data

AGENTS = """\
judge:
  model: mock/score-0.9
agents:
  judged_writer:
    rubric: judged
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:revise"}
    evaluator: prompts/judge.md
    max_attempts: 2
  judged_stuck:
    rubric: judged
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:stubborn"}
    evaluator: prompts/judge.md
    max_attempts: 2
"""

WRITER_CASES = """\
agent: judged_writer
cases:
  - id: revised
    description: "A short note that greets the customer"
    inputs:
      text: "goodbye friend, see you on Tuesday"
      audience: {name: "Ana", role: "customer"}
    expected: "hello goodbye friend, see you on Tuesday"
"""

# An artifact and inputs a hostile model or dataset could write; a key-shaped input the records must redact.
STUCK_CASES = """\
agent: judged_stuck
cases:
  - id: hostile
    inputs:
      text: "<script>alert(1)</script> goodbye"
      token: "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789abcd"
    expected: "<b>hello</b> & goodbye"
"""

SECRET = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789abcd"


def write_project(root: Path) -> None:
    """The judged rubric (tone and clarity by the judge, greeting by a check), a writer whose reviser adds the
    greeting (attempt 1 fails, attempt 2 passes) and a stuck one whose reviser changes nothing (fails twice)."""
    files = {
        "pytest.ini": "[pytest]\nharness = true\n",
        "rubrics/judged.yaml": JUDGED_RUBRIC,
        "rubrics/examples/judged/gold/warm.md": "GOLD-EXAMPLE-MARKER hello, a warm note\n",
        "rubrics/examples/judged/anti/cold.md": "ANTI-PATTERN-MARKER a cold note\n",
        "suites/prompts/judge.md": prompt_text(),
        "suites/agents.yaml": AGENTS,
        "suites/judged_writer.cases.yaml": WRITER_CASES,
        "suites/judged_stuck.cases.yaml": STUCK_CASES,
        "agentlib.py": AGENT_MODULE,
    }
    for relpath, text in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def run_project(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "PYTEST_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "suites/",
                           "--harness-cache", "off"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project run once: its WORK/ (one cycle: ``revised`` passed on attempt 2, ``hostile`` failed) and the
    plots ``harness plot`` wrote to tracking/plots."""
    root = tmp_path_factory.mktemp("view-project")
    write_project(root)
    done = run_project(root)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # one item fails, on purpose
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert main(["plot", "--work-dir", str(root / "WORK"), "--tracking-dir", str(root / "tracking")]) == 0
    return root


@pytest.fixture(scope="module")
def viewer(project: Path) -> Iterator[ViewServer]:
    server = make_server(project / "WORK", port=0, tracking_dir=project / "tracking")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


def fetch(server: ViewServer, path: str) -> tuple[int, dict[str, str], str]:
    """GET ``path``: the status, the headers and the body; a 4xx or 5xx is returned, not raised."""
    try:
        with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode("utf-8")


def cycle_of(project: Path) -> str:
    (cycle,) = RecordReader(project / "WORK").cycles()
    return cycle


def item_path(cycle: str, case: str) -> str:
    agent = "judged_writer" if case == "revised" else "judged_stuck"
    return f"/cycle/{cycle}/item/{quote(f'suites/{agent}.cases.yaml::{case}', safe='')}"


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder``: its size, modification time and SHA-256."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns,
                                         hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*")) if p.is_file()}


# --- the records keep each item's inputs and reference answer ----------------------------------------------------


def test_the_records_keep_each_items_inputs_and_reference_answer_once_redacted(project: Path) -> None:
    cycle = cycle_of(project)
    given = RecordReader(project / "WORK").case_data(cycle)
    writer = given["suites/judged_writer.cases.yaml::revised"]
    assert writer == {"inputs": {"text": "goodbye friend, see you on Tuesday",
                                 "audience": {"name": "Ana", "role": "customer"}},
                      "expected": "hello goodbye friend, see you on Tuesday",
                      "description": "A short note that greets the customer", "cut": {}}
    hostile = given["suites/judged_stuck.cases.yaml::hostile"]
    assert hostile["inputs"]["text"] == "<script>alert(1)</script> goodbye"
    assert hostile["inputs"]["token"] == "[REDACTED:anthropic-key]"
    assert hostile["expected"] == "<b>hello</b> & goodbye"
    conn = sqlite3.connect(project / "WORK" / "harness.db")
    try:
        rows = conn.execute("SELECT nodeid, case_data FROM loop_results").fetchall()
    finally:
        conn.close()
    assert len(rows) == 2  # once per item, not per attempt
    assert all(SECRET not in text for _, text in rows)
    assert RecordReader(project / "WORK").case_data(cycle, "suites/judged_writer.cases.yaml::revised") == {
        "suites/judged_writer.cases.yaml::revised": writer}


def test_case_data_over_the_limit_is_cut_and_says_so(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "WORK")
    cycle = store.allocate_cycle(dt.date(2026, 2, 1))
    big = {"inputs": {"document": "word \"quoted\" " * 20_000, "question": "which word?"},
           "expected": "word", "description": None}
    store.write_loop_result(store.location(cycle, "reader", "big"), "suites/reader.cases.yaml::big", "big",
                            {"success": True}, case_data=big)
    store.close()
    (row,) = RecordReader(tmp_path / "WORK").case_data(cycle).values()
    whole = len(json.dumps(big["inputs"], ensure_ascii=False).encode())
    assert row["cut"] == {"inputs": whole}
    assert isinstance(row["inputs"], str) and row["inputs"].startswith('{"document": "word \\"quoted\\" word')
    assert row["expected"] == "word"  # the small field is kept whole
    assert len(encode_case_data(big).encode()) <= MAX_CASE_DATA_BYTES
    shown = case_html(row)  # as the report and the viewer show it
    assert f"inputs cut: {whole:,} bytes of JSON, of which the first 64 KB are kept and shown" in shown
    assert '<pre class="inputs">{&quot;document&quot;: &quot;word' in shown


def test_an_older_work_folder_gains_the_column_and_reads_without_it(tmp_path: Path) -> None:
    work = tmp_path / "WORK"
    work.mkdir()
    conn = sqlite3.connect(work / "harness.db")
    conn.executescript(LOOP_RESULTS_SCHEMA.replace("  case_data TEXT,  -- JSON {inputs, expected, description[, "
                                                   "cut]}: what the item was given; NULL: not recorded\n", ""))
    conn.execute("INSERT INTO loop_results VALUES ('2026-01-30-001', 'a.yaml::x', 'a', 'x', '{\"success\": true}')")
    conn.commit()
    conn.close()
    assert RecordReader(work).case_data("2026-01-30-001") == {}  # read-only: nothing migrated, nothing there
    store = RecordStore(work)
    cycle = store.allocate_cycle(dt.date(2026, 2, 1))  # the next session adds the column
    store.write_loop_result(store.location(cycle, "a", "y"), "a.yaml::y", "y", {"success": True},
                            case_data={"inputs": {"q": 1}, "expected": None, "description": None})
    store.close()
    assert RecordReader(work).loop_results("2026-01-30-001") == {"a.yaml::x": {"success": True}}
    assert RecordReader(work).case_data("2026-01-30-001") == {}
    assert RecordReader(work).case_data(cycle) == {"a.yaml::y": {"inputs": {"q": 1}, "expected": None,
                                                                 "description": None, "cut": {}}}


def test_the_html_report_shows_inputs_and_the_reference_answer(project: Path) -> None:
    cycle = cycle_of(project)
    page = render_html(project / "WORK", [cycle], results_from_records(project / "WORK", [cycle]), plots=False)
    writer = page[page.index('data-nodeid="suites/judged_writer.cases.yaml::revised"'):]
    writer = writer[:writer.index("</section>")]
    assert '<tr data-input="text"><th>text</th><td><pre>goodbye friend, see you on Tuesday</pre>' in writer
    assert '<pre class="expected">hello goodbye friend, see you on Tuesday</pre>' in writer
    assert "&quot;name&quot;: &quot;Ana&quot;" in writer  # a structured input, as JSON
    assert "<summary>Inputs (2) and reference answer</summary>" in writer
    assert "&lt;b&gt;hello&lt;/b&gt; &amp; goodbye" in page and "<b>hello</b>" not in page


# --- the viewer's pages ----------------------------------------------------------------------------------------


def test_the_cycles_page_lists_the_cycle(project: Path, viewer: ViewServer) -> None:
    cycle = cycle_of(project)
    status, headers, page = fetch(viewer, "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    row = page[page.index(f'<tr data-cycle="{cycle}">'):]
    row = row[:row.index("</tr>")]
    assert f'<a href="/cycle/{cycle}">{cycle}</a>' in row
    assert "1 failed, 1 passed" in row
    assert re.search(r"0\.\d{3} over 2 of 2 items", row), row
    assert '<td class="num">4</td>' in row  # attempts
    assert row.endswith('<td class="num">unknown</td>')  # the mock judge has no price: never shown as $0.0000


def test_the_cycle_page_lists_its_items_failed_first(project: Path, viewer: ViewServer) -> None:
    cycle = cycle_of(project)
    status, _, page = fetch(viewer, f"/cycle/{cycle}")
    assert status == 200
    assert '<p id="summary">1 failed, 1 passed · 4 attempts · cost unknown</p>' in page
    assert page.index("judged_stuck::hostile") < page.index("judged_writer::revised")
    # the stuck item is escalated (escalate_on_fail), which pytest fails: first, with its outcome's badge
    assert '<span class="badge escalated">escalated</span>' in page
    assert '<span class="badge passed">passed</span>' in page
    assert f'href="{item_path(cycle, "hostile")}"' in page
    assert f'href="/cycle/{cycle}/traces"' in page


def test_the_item_page_shows_inputs_reference_each_attempts_reasons_and_the_diff(project: Path,
                                                                                  viewer: ViewServer) -> None:
    cycle = cycle_of(project)
    status, _, page = fetch(viewer, item_path(cycle, "revised"))
    assert status == 200
    assert '<details class="given" open>' in page
    assert '<tr data-input="text"><th>text</th><td><pre>goodbye friend, see you on Tuesday</pre>' in page
    assert '<pre class="expected">hello goodbye friend, see you on Tuesday</pre>' in page
    assert '<p class="description">A short note that greets the customer</p>' in page
    assert page.count('<details class="attempt" open>') == 2  # every attempt open on an item's page
    attempt_1 = page[page.index("<summary>Attempt 1"):page.index("<summary>Attempt 2")]
    attempt_2 = page[page.index("<summary>Attempt 2"):]
    for attempt in (attempt_1, attempt_2):  # each attempt's dimension scores and reasons
        assert all(f'<tr data-dimension="{d}">' in attempt for d in ("tone", "clarity", "greeting"))
    assert "Attempt 1: failed" in attempt_1 and "Attempt 2: passed" in attempt_2
    assert "<strong>Suggested fixes:</strong>" in attempt_1 and "Add &#x27;hello&#x27;" in attempt_1
    assert "<details open><summary>Changes from attempt 1</summary>" in attempt_2
    assert "<details open><summary>Artifact (attempt-1.md)</summary><pre>goodbye friend, see" in attempt_1
    assert '<span class="del">-goodbye friend, see you on Tuesday</span>' in attempt_2
    assert '<span class="add">+hello goodbye friend, see you on Tuesday</span>' in attempt_2


def test_untrusted_text_is_escaped_and_no_script_may_run(project: Path, viewer: ViewServer) -> None:
    cycle = cycle_of(project)
    status, headers, page = fetch(viewer, item_path(cycle, "hostile"))
    assert status == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt; goodbye" in page  # the artifact, the inputs
    assert "<script" not in page.lower()
    assert "&lt;b&gt;hello&lt;/b&gt; &amp; goodbye" in page  # the reference answer
    assert SECRET not in page and "[REDACTED:anthropic-key]" in page
    assert headers["Content-Security-Policy"] == CSP
    policy = dict(part.strip().split(" ", 1) for part in CSP.split(";"))
    assert policy["default-src"] == "'none'" and "script-src" not in policy  # so no script at all, from anywhere
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["/nowhere", "/cycle/2020-01-01-001", "/cycle/{cycle}/item/nope",
                                  "/cycle/{cycle}/item/" + quote("suites/judged_writer.cases.yaml::nope", safe=""),
                                  "/cycle/2020-01-01-001/traces", "/plots/..%2F..%2FWORK%2Fharness.db",
                                  "/plots/nothing.png", "/cycle/{cycle}/item/x/more"])
def test_what_the_records_do_not_hold_is_a_404_page(project: Path, viewer: ViewServer, path: str) -> None:
    status, headers, page = fetch(viewer, path.format(cycle=cycle_of(project)))
    assert status == 404
    assert headers["Content-Type"] == "text/html; charset=utf-8" and headers["Content-Security-Policy"] == CSP
    assert "<h1>Not found</h1>" in page and '<a href="/">cycles</a>' in page


def test_the_trace_and_plots_pages(project: Path, viewer: ViewServer) -> None:
    cycle = cycle_of(project)
    status, _, page = fetch(viewer, f"/cycle/{cycle}/traces")
    assert status == 200
    events = re.findall(r'<tr data-event="(\w+)">', page)
    assert {"skill_invoked", "gate_checked", "execution_complete", "model_call"} <= set(events)
    assert f'href="{item_path(cycle, "hostile")}"' in page
    assert "failure exit 83 (escalation; escalate)" in page  # what happened, as `harness traces` says it

    status, _, page = fetch(viewer, "/plots")
    names = re.findall(r'<img alt="[^"]+" src="/plots/([^"]+)">', page)
    assert status == 200 and names and all(n.endswith(".png") for n in names)
    with urllib.request.urlopen(viewer.url + "plots/" + names[0], timeout=30) as answer:
        assert answer.headers["Content-Type"] == "image/png" and answer.read().startswith(b"\x89PNG")


def test_the_viewer_writes_nothing(project: Path, viewer: ViewServer) -> None:
    before = snapshot(project / "WORK"), snapshot(project / "tracking")
    cycle = cycle_of(project)
    for path in ("/", f"/cycle/{cycle}", item_path(cycle, "revised"), item_path(cycle, "hostile"),
                 f"/cycle/{cycle}/traces", "/plots", "/nowhere"):
        fetch(viewer, path)
    assert (snapshot(project / "WORK"), snapshot(project / "tracking")) == before  # no byte, no mtime, no new file
    assert not any(p.name.endswith(("-wal", "-shm")) for p in (project / "WORK").iterdir())


# --- the command -------------------------------------------------------------------------------------------------


def test_a_missing_work_folder_is_one_line_and_an_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["view", "--work-dir", str(tmp_path / "WORK")]) == 66
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"harness view: no records in {tmp_path / 'WORK'}")
    monkeypatch.chdir(tmp_path)
    assert main(["view"]) == 66
    assert "no WORK/harness.db in this folder or above" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # it made nothing


def test_harness_view_says_its_url_serves_and_stops_on_ctrl_c(project: Path) -> None:
    command = [sys.executable, "-c", "import sys; from harness.apps.cli import main; sys.exit(main())", "view",
               "--work-dir", str(project / "WORK"), "--port", "0", "--tracking-dir", str(project / "tracking")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            line = process.stdout.readline()
            found = re.match(r"harness view: serving the records of (.+) at (http://127\.0\.0\.1:\d+/) \(read-only; "
                             r"Ctrl-C stops it\)$", line.strip())
            assert found, line
            assert found[1] == str((project / "WORK").resolve())
            with urllib.request.urlopen(found[2], timeout=30) as answer:
                assert answer.status == 200 and cycle_of(project) in answer.read().decode()
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Traceback" not in err and err.strip() == "harness view: stopped"


def test_a_port_in_use_is_one_line(project: Path, viewer: ViewServer, capsys: pytest.CaptureFixture[str]) -> None:
    port = viewer.server_address[1]
    assert main(["view", "--work-dir", str(project / "WORK"), "--port", str(port)]) == 69
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err


# --- in a browser ------------------------------------------------------------------------------------------------


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=120)


@needs_chromium
@pytest.mark.parametrize("page", ["/", "cycle", "failed item", "/plots", "traces"])
def test_each_page_loads_in_chromium_without_console_errors(project: Path, viewer: ViewServer, tmp_path: Path,
                                                            page: str) -> None:
    cycle = cycle_of(project)
    path = {"cycle": f"/cycle/{cycle}", "failed item": item_path(cycle, "hostile"),
            "traces": f"/cycle/{cycle}/traces"}.get(page, page)
    done = chromium("--dump-dom", viewer.url.rstrip("/") + path, profile=tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "</nav>" in done.stdout  # it rendered
    assert console_lines(done.stderr) == []  # no error, no blocked load, no script


@needs_chromium
def test_a_failed_items_dimensions_are_visible_in_chromium(project: Path, viewer: ViewServer, tmp_path: Path) -> None:
    """The report's probe (tests/test_report.py) on a copy of the failed item's page: no problem, and every
    dimension row of both attempts shows."""
    cycle = cycle_of(project)
    _, _, text = fetch(viewer, item_path(cycle, "hostile"))
    assert '<section class="item failed"' in text
    copy = tmp_path / "item.html"
    copy.write_text(text)  # served, the page has no CSP of its own: its header is the viewer's
    probe, log = run_in_chromium(copy, tmp_path)
    assert probe["problems"] == [] and console_lines(log) == []
    shown = [entry.split("=")[0] for entry in probe["visible"]]
    assert len(shown) == 6 and shown[0] == shown[3] == "greeting", probe["visible"]  # both attempts, lowest first
    assert set(shown) == {"greeting", "tone", "clarity"} and probe["visible"][0] == "greeting=0.00"
    assert html.unescape(text).count("<script>alert(1)</script>") >= 2  # the artifact and the input, as text
