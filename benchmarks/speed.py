"""Speed and cost benchmark (issue 3). One command, prints a table:

    python benchmarks/speed.py            # medians of 3 runs each
    python benchmarks/speed.py --runs 5 --cases 500 --concurrency 32
    python benchmarks/speed.py --provider openai   # the same through the openai provider and SDK

Measured against the fake Anthropic server (benchmarks/fake_server.py, its own process) with a
generated suite whose producer and judge each make one model call per case:

1. wall time at concurrency C with 200 ms per call, as a ratio to the limit
   ceil(2 * cases / C) * 0.2 s + pytest start-up (start-up = a --collect-only run of the same suite),
   and again with start-up counted up to the first model call (the SDK's one-time import included);
   the bare SDK making the same calls on C threads, for reference; the server's peak calls in
   flight, which must equal C and never exceed it;
2. with 0 ms latency, the harness's wall and CPU per case beside plain pytest running as many
   trivial items, and the share of that the SDK alone needs (a bare process importing it and making
   the same calls); what is left is the harness's own cost (target: under 5 ms per case);
3. a second identical run: model calls (target 0, the response cache) and its wall time;
4. collection of 10,000 cases: seconds and peak memory (targets: 5 s, 500 MB).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
RUBRIC = """\
metadata: {name: Bench, version: "1.0.0"}
threshold: 0.5
dimensions:
  quality: {weight: 1.0, description: "Is the answer useful?", scoring: {1.0: "useful", 0.0: "useless"}}
"""
PROMPT = """# {title}

## Role
Benchmark {role}.

## Inputs
- **question**: text

## Outputs
- **answer**: text

## Instructions
Answer.

## Examples
Input: a question. Output: an answer.

## Constraints
- Be short.
"""


PYTHON_AGENTS = """\
agents:
  bench:
    rubric: bench
    producer: {python: "benchagent:produce"}
    evaluator: {python: "benchagent:judge"}
    max_attempts: 1
"""
PYTHON_AGENT_MODULE = """\
def produce(request):
    return "# Artifact\\n\\nA short answer produced for the benchmark.\\n"


def judge(request):
    return {"overallScore": 0.9, "passed": True, "feedback": "fine", "suggestedFixes": [],
            "dimensionScores": {"quality": {"score": 0.9, "weight": 1.0, "reason": "useful"}}}
"""


MODELS = {"anthropic": "claude-haiku-4-5", "openai": "openai/gpt-4.1-mini"}
KEY_VARIABLES = {"anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
                 "openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
PROVIDER = "anthropic"  # set by --provider
PORT = 0  # one port for every server of a benchmark: base_url is part of the response cache key


def write_suite(root: Path, cases: int, *, trivial: bool = False, python_agents: bool = False) -> None:
    (root / "rubrics").mkdir(parents=True)
    (root / "suites" / "prompts").mkdir(parents=True)
    (root / "rubrics" / "bench.yaml").write_text(RUBRIC)
    for role in ("producer", "evaluator"):
        (root / "suites" / "prompts" / f"{role}.md").write_text(PROMPT.format(title=f"Bench {role}", role=role))
    (root / "suites" / "agents.yaml").write_text(textwrap.dedent(f"""\
        judge: {{model: {MODELS[PROVIDER]}, timeout_s: 30, max_retries: 2}}
        model: {{model: {MODELS[PROVIDER]}, timeout_s: 30, max_retries: 2}}
        agents:
          bench:
            rubric: bench
            producer: prompts/producer.md
            evaluator: prompts/evaluator.md
            max_attempts: 1
        """))
    lines = ["agent: bench", "cases:"]
    lines += [f"  - {{id: case-{i:05d}, inputs: {{question: 'question {i}'}}}}" for i in range(cases)]
    (root / "suites" / "bench.cases.yaml").write_text("\n".join(lines) + "\n")
    (root / "pytest.ini").write_text("[pytest]\nharness = true\n")  # the project opts in
    if python_agents:
        (root / "suites" / "agents.yaml").write_text(PYTHON_AGENTS)
        (root / "benchagent.py").write_text(PYTHON_AGENT_MODULE)
    if trivial:
        (root / "test_trivial.py").write_text(textwrap.dedent(f"""\
            import pytest

            @pytest.mark.parametrize("i", range({cases}))
            def test_trivial(i):
                assert i >= 0
            """))


def runs_folder(parent: Path, name: str) -> Path:
    """A new folder for one benchmark's runs under ``parent``; the benchmark keeps it and ends with :func:`kept`.

    Not removed: on ext4 without a journal, an inode deleted in the last few minutes is passed over when a file is
    created, so removing a benchmark's thousands of record files made the files of the next benchmark started within
    minutes dearer (budget.py read 2.4 to 2.7 ms of records a case after a removal, 1.1 to 1.3 ms without)."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime(f"{name}-%Y%m%d-%H%M%S-"), dir=parent))


def kept(folder: Path) -> str:
    """The last line of a benchmark that kept its runs in ``folder``, with their size on disk."""
    blocks = {(found.st_dev, found.st_ino): found.st_blocks  # a hard link (final.md) counted once
              for found in (entry.lstat() for entry in folder.rglob("*"))}
    size = sum(blocks.values()) * 512
    return (f"\nThe runs are kept in {folder} ({size / 1e6:,.0f} MB): remove it when you are done, not just before "
            "another benchmark.")


@contextmanager
def fake_server(latency: float, workdir: Path, *, requests_file: Path | None = None):
    port_file, stats_file = workdir / "server.url", workdir / "server.stats"
    for f in (port_file, stats_file):
        f.unlink(missing_ok=True)
    keep = ["--requests-file", str(requests_file)] if requests_file is not None else []
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_server.py"), "--latency", str(latency),
                             "--port-file", str(port_file), "--stats-file", str(stats_file),
                             "--provider", PROVIDER, "--port", str(PORT), *keep])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the fake server did not start")
            time.sleep(0.05)
        stats: dict = {}
        yield port_file.read_text(), stats
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if stats_file.exists():
            stats.update(json.loads(stats_file.read_text()))


class Run(NamedTuple):
    wall: float  # seconds
    cpu: float  # CPU seconds of the child (user + system)
    code: int  # exit code
    launched_at: float  # time.time() when the child was started


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended: a child's CPU is the difference
    across its run."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_pytest(root: Path, args: list[str], base_url: str | None = None, *, code: Path | None = None,
               env_extra: dict[str, str] | None = None) -> Run:
    """One pytest run in a fresh process; ``code``: the folder whose ``harness`` package it imports (another
    revision's tree, for an A/B), ahead of the installed one; ``env_extra``: more environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | (env_extra or {})
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    url_variable, key_variable = KEY_VARIABLES[PROVIDER]
    if base_url:
        env.update({url_variable: base_url, key_variable: "sk-benchmark"})
    else:
        env.pop(key_variable, None)
    before = children_cpu()
    launched_at = time.time()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root,
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu = children_cpu() - before
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
    return Run(wall, cpu, done.returncode, launched_at)


class Variant(NamedTuple):
    """One side of an alternated comparison: the code it imports (None: the installed package) and its options."""

    code: Path | None = None
    options: tuple[str, ...] = ()


def alternate(variants: dict[str, Variant], rounds: int, cases: int, root: Path) -> dict[tuple[str, str], Run]:
    """Run speed.py's two 500-case suites (the 0 ms server, 2 model calls a case, cache off; a Python producer
    and judge, no model) once per variant in each round, the order reversed every other round, so that a shared
    machine's drift falls on every variant alike. Returns the median wall and CPU per (suite, variant), in ms a
    case (``Run`` with ``code`` 0)."""
    suite, local = root / "suite", root / "local"
    write_suite(suite, cases)
    write_suite(local, cases, python_agents=True)
    common = ["suites/", "--harness-concurrency=32", "-o", "harness_progress_interval=0"]
    walls: dict[tuple[str, str], list[float]] = {(p, v): [] for p in ("model", "local") for v in variants}
    cpus: dict[tuple[str, str], list[float]] = {key: [] for key in walls}
    order = list(variants)
    for n in range(rounds):
        for name in order if n % 2 == 0 else order[::-1]:
            code, options = variants[name]
            tag = f"{n}-{order.index(name)}"
            with fake_server(0.0, root) as (url, _):
                done = run_pytest(suite, [*common, *options, "--harness-cache=off", f"--harness-work-dir=Z-{tag}"],
                                  url, code=code)
            runs = [("model", done), ("local", run_pytest(local, [*common, *options, f"--harness-work-dir=L-{tag}"],
                                                          code=code))]
            for path, done in runs:
                if done.code not in (0, 1):
                    raise SystemExit(f"{name}: pytest exited {done.code} on the {path} suite")
                walls[path, name].append(done.wall)
                cpus[path, name].append(done.cpu)
    per = 1000 / cases
    return {key: Run(median(walls[key]) * per, median(cpus[key]) * per, 0, 0.0) for key in walls}


def print_alternated(medians: dict[tuple[str, str], Run], rounds: int, first: str, second: str,
                     target: str = "") -> None:
    """The medians of :func:`alternate` for two variants, side by side, and the second's difference."""
    print(f"\nmedians of {rounds} alternating rounds, ms per case: {first} / {second} (difference)")
    for path, name in (("model", "0 ms server, 2 model calls a case"), ("local", "no model: Python producer and judge")):
        a, b = medians[path, first], medians[path, second]
        print(f"{name:<38} wall {a.wall:6.2f} / {b.wall:6.2f} ({b.wall - a.wall:+.2f})   "
              f"CPU {a.cpu:6.2f} / {b.cpu:6.2f} ({b.cpu - a.cpu:+.2f}){target}")


def peak_rss_mb_of(root: Path, args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one pytest run, measured in a fresh child."""
    code = ("import resource, subprocess, sys, time; t=time.perf_counter(); "
            "subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *sys.argv[1:]],"
            " stdout=subprocess.DEVNULL); print(time.perf_counter()-t, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=root, capture_output=True, text=True, check=True)
    wall, rss = out.stdout.split()
    return float(wall), float(rss)


BARE_SDK = """
import sys, time
started = time.perf_counter()
import json, anthropic
from concurrent.futures import ThreadPoolExecutor
imported = time.perf_counter()
calls, threads = int(sys.argv[1]), int(sys.argv[2])
asks = json.loads(open(sys.argv[3], encoding="utf-8").read())  # the harness's producer and judge requests
client = anthropic.Anthropic()
def call(i):  # as harness.llm sends a request and reads the answer
    return json.loads(client.messages.with_raw_response.create(**asks[i % 2]).http_response.content)
call(0)
calls_started = time.perf_counter()
with ThreadPoolExecutor(threads) as pool:
    list(pool.map(call, range(calls)))
print(time.perf_counter() - calls_started, time.perf_counter() - started)
"""


BARE_OPENAI_SDK = (BARE_SDK.replace("anthropic.Anthropic()", "openai.OpenAI()").replace("import json, anthropic",
                                                                                        "import json, openai")
                   .replace("client.messages.", "client.chat.completions."))


def harness_requests(root: Path) -> Path:
    """A file of the two requests a case of the benchmark suite sends (the producer's, then the judge's, their JSON
    bodies as the fake server got them), made once per folder by running the harness on a one-case suite.

    The bare SDK sends these very requests, so "the same calls" is true of their content too: a judge's request
    carries the rubric and its output schema, and the SDK's work on a request grows with its size."""
    path = root / f"requests-{PROVIDER}.json"
    if not path.exists():
        suite = root / f"requests-suite-{PROVIDER}"
        shutil.rmtree(suite, ignore_errors=True)
        write_suite(suite, 1)
        with fake_server(0.0, root, requests_file=path) as (url, _):
            done = run_pytest(suite, ["suites/", "--harness-cache=off", "--harness-work-dir=W"], url)
        if done.code != 0 or not path.exists():
            raise RuntimeError(f"the harness did not send a producer's and a judge's request (exit {done.code})")
    return path


def bare_sdk_seconds(base_url: str, calls: int, threads: int, requests: Path) -> tuple[float, float]:
    """The same calls from the bare SDK on as many threads (``requests``: :func:`harness_requests`'s file): (seconds
    for the calls, seconds for the whole process: interpreter, SDK import and calls). What the client and server
    allow."""
    url_variable, key_variable = KEY_VARIABLES[PROVIDER]
    env = {**os.environ, url_variable: base_url, key_variable: "sk-benchmark"}
    script = BARE_OPENAI_SDK if PROVIDER == "openai" else BARE_SDK
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script, str(calls), str(threads), str(requests)], env=env,
                          capture_output=True, text=True, check=True)
    whole = time.perf_counter() - start
    return float(done.stdout.split()[0]), whole


def bare_sdk_run(base_url: str, calls: int, threads: int, requests: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds of a bare process making ``calls`` calls with the provider's SDK (the harness's own
    producer and judge requests, ``requests``, in turn): :func:`bare_sdk_seconds`'s whole process."""
    before = children_cpu()
    whole = bare_sdk_seconds(base_url, calls, threads, requests)[1]
    return whole, children_cpu() - before


def sdk_import_seconds() -> float:
    """What importing the provider's SDK adds to a process (paid once, by the first model call)."""
    code = f"import time; t = time.perf_counter(); import {PROVIDER}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--collect-cases", type=int, default=10_000)
    parser.add_argument("--provider", choices=sorted(MODELS), default="anthropic",
                        help="the provider of the suite's models and the fake server (default: anthropic; the "
                             "bare-SDK reference rows use that provider's SDK)")
    parser.add_argument("--traces", choices=("on", "off"), default="on",
                        help="the execution trace (WORK/traces): on (the default, as users run) or off through the "
                             "public option --harness-capture=off, to measure what the trace costs A/B")
    parser.add_argument("--dir", type=Path, default=HERE / ".runs",
                        help="where the generated suites and their records go (default: benchmarks/.runs, "
                             "on the project's disk, where a user's WORK folder is)")
    args = parser.parse_args()
    global PROVIDER, PORT
    PROVIDER = args.provider
    PORT = free_port()
    # Measure what a user's machine does: Python caches compiled modules (some sandboxes turn that off,
    # which makes every run compile the harness's modules again, about 0.3 s of start-up here).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    args.dir.mkdir(parents=True, exist_ok=True)
    tmp = runs_folder(args.dir, "speed")
    rows: list[tuple[str, str, str]] = []
    suite = tmp / "suite"
    write_suite(suite, args.cases, trivial=True)
    common = ["suites/", f"--harness-concurrency={args.concurrency}", "-o", "harness_progress_interval=0"]
    if args.traces == "off":
        common.append("--harness-capture=off")
    requests = harness_requests(tmp)
    startup = median([run_pytest(suite, ["suites/", "--collect-only"]).wall for _ in range(args.runs)])
    sdk_import = median([sdk_import_seconds() for _ in range(args.runs)])
    calls = 2 * args.cases
    bound = math.ceil(calls / args.concurrency) * args.latency
    limit = bound + startup

    walls, peaks, server_calls, to_first_call = [], [], [], []
    for run in range(args.runs):
        with fake_server(args.latency, tmp) as (url, stats):
            done = run_pytest(suite, [*common, f"--harness-work-dir=WORK-{run}"], url)
        walls.append(done.wall)
        peaks.append(stats.get("peak_in_flight", -1))
        server_calls.append(stats.get("calls", -1))
        if stats.get("first_request_at"):
            to_first_call.append(stats["first_request_at"] - done.launched_at)
    wall = median(walls)
    first = median(to_first_call) if to_first_call else float("nan")
    rows.append((f"{args.cases} cases x 2 calls, {args.latency * 1000:.0f} ms/call, concurrency "
                 f"{args.concurrency}", f"{wall:.2f} s",
                 f"limit {limit:.2f} s = {bound:.1f} s + {startup:.2f} s start-up (--collect-only): "
                 f"ratio {wall / limit:.2f} (target <= 1.25)"))
    rows.append(("  start-up counted up to the first model call", f"{first:.2f} s",
                 f"collection and the SDK's one-time import ({sdk_import:.2f} s alone) included: "
                 f"limit {bound + first:.2f} s, ratio {wall / (bound + first):.2f}"))
    bare = []
    for _ in range(args.runs):
        with fake_server(args.latency, tmp) as (url, _):
            bare.append(bare_sdk_seconds(url, calls, args.concurrency, requests)[0])
    rows.append((f"  the bare SDK: {calls} calls from {args.concurrency} threads, same server",
                 f"{median(bare):.2f} s",
                 f"{median(bare) / bound:.2f}x the {bound:.1f} s latency bound: what the SDK and the fake "
                 "server allow before any harness work"))
    rows.append(("peak calls in flight", f"{max(peaks)}", f"concurrency {args.concurrency} (runs: {peaks}); "
                 f"calls per run {server_calls}"))

    again_walls, again_calls = [], []
    for run in range(args.runs):
        with fake_server(args.latency, tmp) as (url, stats):
            again_walls.append(run_pytest(suite, [*common, f"--harness-work-dir=WORK-{run}"], url).wall)
        again_calls.append(stats.get("calls", -1))
    rows.append(("second identical run (response cache)", f"{median(again_walls):.2f} s",
                 f"model calls {again_calls} (target 0)"))

    harness_wall, harness_cpu, plain_wall, plain_cpu, bare_zero = [], [], [], [], []
    for run in range(args.runs):
        with fake_server(0.0, tmp) as (url, _):
            done = run_pytest(suite, [*common, "--harness-cache=off", f"--harness-work-dir=Z-{run}"], url)
            bare_zero.append(bare_sdk_seconds(url, calls, args.concurrency, requests)[1])
        harness_wall.append(done.wall)
        harness_cpu.append(done.cpu)
        plain = run_pytest(suite, ["test_trivial.py"])
        plain_wall.append(plain.wall)
        plain_cpu.append(plain.cpu)
    per = 1000 / args.cases
    extra_wall = (median(harness_wall) - median(plain_wall)) * per
    sdk_share = median(bare_zero) * per
    rows.append(("0 ms server: harness per case (wall / CPU)",
                 f"{median(harness_wall) * per:.2f} / {median(harness_cpu) * per:.2f} ms",
                 f"plain pytest per item {median(plain_wall) * per:.2f} / {median(plain_cpu) * per:.2f} ms: "
                 f"{extra_wall:.2f} ms/case more"))
    rows.append(("  of which the SDK (import + 2 calls, bare process)", f"{sdk_share:.2f} ms",
                 f"the harness's own cost: {extra_wall - sdk_share:.2f} ms/case (target < 5 ms)"))

    local = tmp / "local"
    write_suite(local, args.cases, python_agents=True)
    local_wall, local_cpu = [], []
    for run in range(args.runs):
        done = run_pytest(local, [*common, f"--harness-work-dir=L-{run}"])
        local_wall.append(done.wall)
        local_cpu.append(done.cpu)
    rows.append(("no model: Python producer and judge, per case (wall / CPU)",
                 f"{median(local_wall) * per:.2f} / {median(local_cpu) * per:.2f} ms",
                 "the harness alone (loop, checks, records): "
                 f"{(median(local_wall) - median(plain_wall)) * per:.2f} "
                 "ms/case more than plain pytest (target < 5 ms)"))

    big = tmp / "big"
    write_suite(big, args.collect_cases)
    measured = [peak_rss_mb_of(big, ["suites/", "--collect-only"]) for _ in range(args.runs)]
    rows.append((f"collect {args.collect_cases} cases", f"{median([m[0] for m in measured]):.2f} s",
                 f"peak memory {median([m[1] for m in measured]):.0f} MB (targets: 5 s, 500 MB)"))

    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{width}}  {'median':>14}  notes (medians of {args.runs} runs)")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>14}  {note}")
    print(kept(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
