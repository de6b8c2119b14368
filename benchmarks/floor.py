"""The least a case can cost above the bare SDK before any of the harness's code runs: its records and pytest's item.

    python benchmarks/floor.py                        # anthropic, 2,000 cases, concurrency 32, 200 ms, 3 rounds
    python benchmarks/floor.py --provider openai --latency 0 --concurrency 1

versus_sdk.py measures the harness's CPU per case above the bare SDK. Part of that figure is set by what a case
must leave behind, whoever writes it, and by pytest running it as an item. This measures that part, in two pieces:

- **The records.** One process makes the bare SDK's calls (speed.py's ``BARE_SDK``: the harness's own producer
  and judge requests, from as many threads) and nothing else; another makes the same calls and writes, beside
  them, what the run record and the assessment contracts ask of a case, with bare ``os`` and ``sqlite3`` calls
  and every file's content encoded once before the run (the sizes the harness writes): the attempt's rows as
  ``running`` before the producer's call (the harness's own schema); the case's folder, ``attempt-1.md`` and
  ``attempt-1.eval.json``, each through a temporary file and a rename; one transaction that completes the
  attempt's rows and adds the loop result and pytest's verdict (the harness takes three); the run-log entry,
  appended under its lock file; ``final.md`` as a hard link; the execution result's line and the case's trace
  lines. The difference between the two processes, per case, is the records' floor: no harness code, no
  encoding, no redaction, fewer transactions than the harness.
- **pytest's item.** Plain pytest running as many trivial test functions: what any pytest plugin pays per item.

Each is a marginal cost (N/5 cases to N), so start-up stays out; the rounds alternate which process goes first.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import speed

# the bytes a case of speed.py's suite writes, by file (measured on a harness run of it)
EVALUATION_BYTES = 670
RUN_LOG_ENTRY_BYTES = 420
EXECUTION_RESULT_BYTES = 2_000
TRACE_LINES, TRACE_LINE_BYTES = 9, 420
CYCLE = "2026-11-27-001"


def _text(size: int) -> bytes:
    return json.dumps({"text": "x" * max(0, size - 12)}).encode()


class CaseRecords:
    """A case's records, written with bare calls: the floor of what the contracts ask (see the module's text)."""

    def __init__(self, work: Path):
        from harness.records.schema import DETAIL_WRITE_COLUMNS, ensure_schema

        self.cycle = work / "runs" / CYCLE
        self.cycle.mkdir(parents=True)
        self.db = sqlite3.connect(work / "harness.db", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        ensure_schema(self.db)
        self.db_lock = threading.Lock()
        self.insert_details = (f"INSERT OR REPLACE INTO attempt_details ({', '.join(DETAIL_WRITE_COLUMNS)}) "
                               f"VALUES ({', '.join('?' for _ in DETAIL_WRITE_COLUMNS)})")
        self.detail_columns = len(DETAIL_WRITE_COLUMNS)
        self.run_log = self.cycle / "run-log.json"
        self.run_log.write_bytes(b"[\n" + _text(RUN_LOG_ENTRY_BYTES) + b"\n]\n")
        self.run_log_lock = self.cycle / ".run-log.lock"
        self.execution_results = open(self.cycle / "execution-results.jsonl", "ab", buffering=0)  # noqa: SIM115
        self.traces = open(work / "traces.jsonl", "ab", buffering=0)  # noqa: SIM115
        self.evaluation = _text(EVALUATION_BYTES)
        self.run_log_entry = b",\n" + _text(RUN_LOG_ENTRY_BYTES) + b"\n]\n"
        self.execution_result = _text(EXECUTION_RESULT_BYTES) + b"\n"
        self.trace_lines = (_text(TRACE_LINE_BYTES) + b"\n") * TRACE_LINES

    def _details(self, run_id: int, case: int) -> tuple:
        nodeid = f"suites/bench.cases.yaml::case-{case:05d}"
        return (run_id, nodeid, f"case-{case:05d}", "bench", "passed", 0, 0.5, "claude-haiku-4-5", 106, 22, 0, 0,
                0.0002, '{"quality": 0.9}', *([None] * (self.detail_columns - 14)))

    def _transaction(self, statements):
        with self.db_lock:
            self.db.execute("BEGIN IMMEDIATE")
            result = statements()
            self.db.execute("COMMIT")
            return result

    def started(self, case: int) -> int:
        def insert() -> int:
            run_id = self.db.execute(
                "INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, artifact_path, created_at,"
                " rubric_version) VALUES (?, 'bench', 1, 'running', ?, '2026-11-27T00:00:00Z', '1.0.0')",
                (CYCLE, f"W/runs/{CYCLE}/bench/case-{case:05d}/attempt-1.md")).lastrowid
            self.db.execute(self.insert_details, self._details(run_id, case))
            return run_id

        return self._transaction(insert)

    def _atomic(self, path: Path, data: bytes) -> None:
        temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.write(handle, data)
        os.close(handle)
        os.replace(temporary, path)

    def produced(self, case: int, answer: bytes) -> Path:
        folder = self.cycle / "bench" / f"case-{case:05d}"
        folder.mkdir(parents=True)
        self._atomic(folder / "attempt-1.md", b"# Artifact\n\n" + answer[:40])
        return folder

    def judged(self, case: int, run_id: int, folder: Path) -> None:
        self._atomic(folder / "attempt-1.eval.json", self.evaluation)

        def finish() -> None:
            self.db.execute("UPDATE agent_runs SET status = 'passed', overall_score = 0.9, dimension_scores = ?,"
                            " feedback = 'f', suggested_fixes = '[]', duration_ms = 3 WHERE id = ?",
                            ('{"quality": 0.9}', run_id))
            self.db.execute(self.insert_details, self._details(run_id, case))
            self.db.execute("INSERT OR REPLACE INTO loop_results (cycle_id, nodeid, agent_name, case_id, result)"
                            " VALUES (?, ?, 'bench', ?, '{\"success\": true}')",
                            (CYCLE, f"n{case}", f"case-{case:05d}"))
            self.db.execute("UPDATE attempt_details SET verdict = 'passed' WHERE run_id = ?", (run_id,))

        self._transaction(finish)
        lock = os.open(self.run_log_lock, os.O_RDWR | os.O_CREAT)
        fcntl.flock(lock, fcntl.LOCK_EX)
        handle = os.open(self.run_log, os.O_RDWR)
        end = os.fstat(handle).st_size - 3
        os.lseek(handle, end, os.SEEK_SET)
        os.read(handle, 3)
        os.lseek(handle, end, os.SEEK_SET)
        os.write(handle, self.run_log_entry)
        os.close(handle)
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
        os.link(folder / "attempt-1.md", folder / "final.md")
        self.execution_results.write(self.execution_result)
        self.traces.write(self.trace_lines)


def child(args: argparse.Namespace) -> None:
    """The measured process: ``--cases`` cases on ``--concurrency`` threads, each the SDK's two calls, and with
    ``--records`` the case's records."""
    requests = json.loads(args.requests.read_text(encoding="utf-8"))
    if speed.PROVIDER == "openai":
        import openai

        create = openai.OpenAI().chat.completions.with_raw_response.create
    else:
        import anthropic

        create = anthropic.Anthropic().messages.with_raw_response.create
    records = CaseRecords(args.work) if args.records else None

    def call(which: int) -> bytes:  # as the bare SDK reference sends a request and reads the answer
        content = create(**requests[which]).http_response.content
        json.loads(content)
        return content

    def case(number: int) -> None:
        run_id = records.started(number) if records else 0
        answer = call(0)
        folder = records.produced(number, answer) if records else None
        call(1)
        if records:
            records.judged(number, run_id, folder)

    call(0)
    with ThreadPoolExecutor(args.concurrency) as pool:
        list(pool.map(case, range(args.cases)))


def measured(url: str, args: argparse.Namespace, cases: int, records: bool, work: Path, requests: Path) -> float:
    """CPU seconds of one child process."""
    variables = dict(zip(speed.KEY_VARIABLES[speed.PROVIDER], (url, "sk-benchmark"), strict=True))
    before = speed.children_cpu()
    subprocess.run([sys.executable, __file__, "--child", "--provider", speed.PROVIDER, "--cases", str(cases),
                    "--concurrency", str(args.concurrency), "--requests", str(requests), "--work", str(work),
                    *(["--records"] if records else [])], env={**os.environ, **variables}, check=True)
    return speed.children_cpu() - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds a model call takes at the fake server")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--provider", choices=sorted(speed.MODELS), default="anthropic")
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--records", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    speed.PROVIDER = args.provider
    if args.child:
        child(args)
        return 0
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    root = speed.runs_folder(args.dir, "floor")
    small = max(1, args.cases // 5)
    for cases in (small, args.cases):
        speed.write_suite(root / f"suite-{cases}", cases, trivial=True)
    requests = speed.harness_requests(root)
    per_case: dict[str, list[float]] = {"sdk": [], "records": [], "pytest": []}
    with speed.fake_server(args.latency, root) as (url, _):
        for n in range(args.rounds):
            for records in ((False, True) if n % 2 == 0 else (True, False)):
                cpu = {cases: measured(url, args, cases, records, root / f"{records}-{n}-{cases}", requests)
                       for cases in (args.cases, small)}
                per_case["records" if records else "sdk"].append((cpu[args.cases] - cpu[small]) / (args.cases - small))
            plain = {cases: speed.run_pytest(root / f"suite-{cases}", ["test_trivial.py"]).cpu
                     for cases in (args.cases, small)}
            per_case["pytest"].append((plain[args.cases] - plain[small]) / (args.cases - small))

    def ms(values: list[float]) -> float:
        return speed.median(values) * 1000

    records_above = ms([with_records - bare for bare, with_records in zip(per_case["sdk"], per_case["records"],
                                                                             strict=True)])
    print(f"\nThe floor of a case above the bare SDK ({args.provider}, {args.cases:,} cases, concurrency "
          f"{args.concurrency}, {args.latency * 1000:g} ms a call; ms of CPU a case, marginal, medians of "
          f"{args.rounds} rounds)\n")
    rows = [("the bare SDK's two calls", ms(per_case["sdk"])),
            ("the same with the case's records", ms(per_case["records"])),
            ("the records above the SDK", records_above),
            ("plain pytest's item", ms(per_case["pytest"])),
            ("the floor: the records and pytest's item", records_above + ms(per_case["pytest"]))]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value:7.3f}")
    print(speed.kept(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
