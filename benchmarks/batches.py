"""Message Batches at scale (issue 25, part 3): a judge run of many items through batches, left and resumed.

    python benchmarks/batches.py                          # 10,000 judged items (about 9 minutes on 2 CPUs)
    python benchmarks/batches.py --items 2000 --processing 3

A suite of N items, each a Python producer and one model judge (claude-haiku-4-5), so that every item makes one
request and, with --harness-batch, every request goes in a Message Batch. The fake Anthropic server runs in this
process (harness.testing.FakeAnthropic: it counts the batches created, the requests in them, the polls and the
downloads of results); each pytest run is a fresh process whose own peak RSS is read from wait4. Measured:

1. a batched run that waits for its batches (they take --processing seconds on the fake): wall time, peak RSS,
   batches, requests submitted, polls, downloads; with more items than harness.face.scheduler.BATCH_WORKERS
   (5,000), in rounds;
2. the same suite on a fresh work folder, killed (SIGKILL) once its first round of requests is in batches that have
   been polled; then run again, with those batches ended meanwhile (the resume: it submits only what the killed
   run had not, and nothing twice: the "twice" column counts requests a run of the same work folder had submitted
   before); then a third time (the response cache answers: no poll, no download);
3. --harness-batch-submit, which submits, records and ends without waiting; then --harness-batch once the batches
   ended;
and, for reference, the peak RSS of `--collect-only` on the suite: the items' own cost before any model work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from speed import RUBRIC  # the benchmarks' one rubric

from harness.face.scheduler import BATCH_WORKERS
from harness.testing import FakeAnthropic, judge_responder

HERE = Path(__file__).resolve().parent
JUDGE_PROMPT = """# Bench judge

## Role
Benchmark judge.

## Inputs
- **artifact**: text

## Outputs
- **evaluation**: JSON

## Instructions
Score the answer.

## Examples
Input: an answer. Output: a score.

## Constraints
- Be fair.
"""
AGENTS = """\
judge: {model: claude-haiku-4-5, timeout_s: 30, max_retries: 2}
agents:
  bench:
    rubric: bench
    producer: {python: "benchagent:produce"}
    evaluator: prompts/evaluator.md
    max_attempts: 1
"""
PRODUCER = '''\
def produce(request):
    return "# Answer\\n\\nA short answer to " + request["inputs"]["question"] + ".\\n"
'''


def write_suite(root: Path, items: int) -> None:
    (root / "rubrics").mkdir(parents=True)
    (root / "suites" / "prompts").mkdir(parents=True)
    (root / "rubrics" / "bench.yaml").write_text(RUBRIC)
    (root / "suites" / "prompts" / "evaluator.md").write_text(JUDGE_PROMPT)
    (root / "suites" / "agents.yaml").write_text(AGENTS)
    (root / "benchagent.py").write_text(PRODUCER)
    lines = ["agent: bench", "cases:"]
    lines += [f"  - {{id: case-{i:05d}, inputs: {{question: 'question {i}'}}}}" for i in range(items)]
    (root / "suites" / "bench.cases.yaml").write_text("\n".join(lines) + "\n")
    (root / "pytest.ini").write_text("[pytest]\nharness = true\n")


class Child(NamedTuple):
    wall: float  # seconds
    rss_mb: float  # the child's own peak resident set
    code: int  # exit status (-9: killed)
    output: str


def run_pytest(root: Path, args: list[str], base_url: str, *, kill_when: Callable[[], bool] | None = None,
               log: Path | None = None) -> Child:
    """One pytest run in a fresh process (its output in ``log``); with ``kill_when``, SIGKILL its process group as
    soon as that is true."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="sk-benchmark",
               NO_PROXY=",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1", "localhost"])))
    log = log or root / "last-run.txt"
    with log.open("w") as out:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if kill_when is not None else 0)
            if pid:
                break
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Child(wall, usage.ru_maxrss / 1024, proc.returncode, log.read_text())


class Counts(NamedTuple):
    batches: int
    requests: int
    polls: int
    reads: int
    calls: int
    twice: int = 0  # requests a run of the same work folder had submitted before

    def __sub__(self, other: Counts) -> Counts:  # type: ignore[override]
        return Counts(*(a - b for a, b in zip(self, other, strict=True)))


def counts(server: FakeAnthropic) -> Counts:
    batches = server.batches
    return Counts(len(batches), len(server.batch_requests), sum(b["polls"] for b in batches),
                  sum(b["reads"] for b in batches), server.calls)


def line_with(output: str, text: str) -> str:
    return next((line for line in output.splitlines() if text in line), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--processing", type=float, default=5.0, help="seconds a batch takes on the fake (default 5)")
    parser.add_argument("--dir", type=Path, default=HERE / ".runs" / "batches")
    args = parser.parse_args()
    root = args.dir
    shutil.rmtree(root, ignore_errors=True)
    write_suite(root, args.items)
    common = ["suites/", "-o", "harness_progress_interval=0", "--tb=no", "-rfE"]

    with FakeAnthropic(keep_alive=True) as server:
        server.responder = judge_responder(default=0.9)
        url = server.base_url

        collect = run_pytest(root, ["suites/", "--collect-only"], url)

        submitted: dict[str, set[str]] = {}  # work folder -> the requests submitted for it (their messages)
        print(f"\n{args.items:,} judged items, one batched judge request each; batches take {args.processing:g} s on "
              f"the fake server; {os.cpu_count()} CPUs\n")
        print(f"{'run':<38} {'wall s':>7} {'peak RSS MB':>12} {'exit':>5} {'batches':>8} {'requests':>9} "
              f"{'twice':>6} {'polls':>6} {'downloads':>10} {'calls':>6}")
        print(f"{'--collect-only (reference)':<38} {collect.wall:7.1f} {collect.rss_mb:12.0f} {collect.code:5d}",
              flush=True)

        def measured(name: str, extra: list[str], folder: str, **kwargs: Callable[[], bool]) -> Child:
            before = counts(server)
            log = root / f"run-{len(list(root.glob('run-*.txt'))) + 1}-{folder}.txt"
            child = run_pytest(root, [*common, *extra, f"--harness-work-dir={folder}"], url, log=log, **kwargs)
            if child.code not in (0, 1, -9):
                raise SystemExit(f"{name}: pytest exited {child.code}:\n{child.output[-3000:]}")
            if child.code == 1:
                print("\n".join(line for line in child.output.splitlines() if line.startswith(("FAILED", "ERROR"))))
            seen = submitted.setdefault(folder, set())
            new = [json.dumps(r["messages"]) for r in server.batch_requests[before.requests:]]
            twice = sum(request in seen for request in new)
            seen.update(new)
            delta = (counts(server) - before)._replace(twice=twice)
            print(f"{name:<38} {child.wall:7.1f} {child.rss_mb:12.0f} {child.code:5d} {delta.batches:8d} "
                  f"{delta.requests:9d} {delta.twice:6d} {delta.polls:6d} {delta.reads:10d} {delta.calls:6d}",
                  flush=True)
            return child

        server.batch_processing_s = args.processing
        measured("1. --harness-batch, waits", ["--harness-batch"], "W1")

        server.batch_processing_s = 3600.0
        start = counts(server)
        first_round = min(args.items, BATCH_WORKERS)

        def first_round_submitted_and_polled() -> bool:
            batches = server.batches[start.batches:]
            return (len(server.batch_requests) - start.requests >= first_round
                    and bool(batches) and all(b["polls"] >= 1 for b in batches))

        measured("2. the same, killed once submitted", ["--harness-batch"], "W2",
                 kill_when=first_round_submitted_and_polled)
        server.batch_processing_s = 0.0  # the batches ended while nobody waited
        resume = measured("   resumed (--harness-batch)", ["--harness-batch"], "W2")
        measured("   resumed again (the cache answers)", ["--harness-batch"], "W2")

        server.batch_processing_s = 3600.0
        submit = measured("3. --harness-batch-submit", ["--harness-batch-submit"], "W3")
        server.batch_processing_s = 0.0
        measured("   then --harness-batch", ["--harness-batch"], "W3")

    print()
    for text in (line_with(resume.output, "answers taken from Message Batches"),
                 line_with(submit.output, "harness: submitted")):
        if text:
            print(textwrap.fill(text, 118, subsequent_indent="    "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
