"""Where a case's CPU goes, part by part: the harness's budget per case, measured inside one process.

    python benchmarks/budget.py                      # 1,000 cases, concurrency 1, 0 ms, medians of 3 runs
    python benchmarks/budget.py --provider openai --latency 0.02 --rounds 5

speed.py's suite (a producer call and a judge call a case) runs on the fake server with budget_meter.py as a pytest
plugin, which adds up the thread CPU time spent inside each part of a case: pytest's item, the item's steps, the model
calls in the provider (the SDK's work and the wire format), the records, the trace lines. Thread CPU time counts what
the thread itself runs, not what it waits for, and leaves start-up out: two sets of 3 runs taken minutes apart read
3.03 and 2.82 ms a case for the harness's own work, where the whole process read 5.24 and 4.54. So this is the
measure to trim a case's path with, and ab.py (the whole process, alternated) the one to confirm a change with.

Printed per case, medians of the runs: each part; pytest's own work and the plugin's hooks around the item (the
item's three phases less its run); the harness's own work (everything less the model calls); and for reference the
whole process's CPU between a run of N/5 cases and one of N (its marginal cost a case), beside the bare SDK's for
the same two calls (speed.py's ``BARE_SDK`` on one thread sending the harness's own two requests, N/5
against N cases' calls).

``--latency`` shows what waiting does to the same work: on a machine shared with others (a VM), a thread that
sleeps between bursts finds its caches cold, and each burst costs more CPU. The bare SDK pays it too.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import speed

ITEM = "_pytest.runner:runtestprotocol"
RUN = "harness.face.nodes:KindItem.runtest"
TRACES = "harness.records.traces:TraceSink._flush"
SENDS = {"anthropic": "harness.llm.providers.anthropic:AnthropicProvider.send",
         "openai": "harness.llm.providers.openai:OpenAIProvider.send"}


def parts(provider: str) -> list[tuple[str, str]]:
    """(what it is, the function metered), in the order printed; indented parts are inside the one above."""
    return [
        ("pytest's item: setup, call and teardown", ITEM),
        ("  the item's run", RUN),
        ("    producing (with its model call)", "harness.evaluation.steps:Attempt.produce"),
        ("    judging (with its model call)", "harness.evaluation.steps:Attempt.evaluate"),
        ("    finishing the attempt", "harness.evaluation.steps:Attempt.finish"),
        ("    finishing the item", "harness.evaluation.steps:ItemRun.finish"),
        ("  the model calls in the provider (SDK and wire format)", SENDS[provider]),
        ("  the records (attempt files, rows, run-log)", "harness.records.writer:RecordWriter.__call__"),
        ("the trace lines (built and written on a thread of their own)", TRACES),
    ]


def measure(root: Path, cases: int, url: str, args: argparse.Namespace, n: int) -> tuple[dict, float]:
    """One metered run: {function: seconds} and the whole process's CPU seconds."""
    out = root / f"budget-{cases}-{n}.json"
    meter = {"BUDGET_PARTS": ",".join(function for _, function in parts(args.provider)), "BUDGET_OUT": str(out),
             "PYTHONPATH": os.pathsep.join(filter(None, [str(speed.HERE), os.environ.get("PYTHONPATH")]))}
    run = speed.run_pytest(root / f"suite-{cases}", ["suites/", "-p", "budget_meter",
                                                     f"--harness-concurrency={args.concurrency}",
                                                     "-o", "harness_progress_interval=0", "--harness-cache=off",
                                                     f"--harness-work-dir=W-{n}", *args.pytest_option], url,
                           env_extra=meter)
    if run.code != 0:
        raise SystemExit(f"the run of {cases} cases exited {run.code}")
    return {function: seconds for function, (seconds, _calls) in json.loads(out.read_text()).items()}, run.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds a model call takes at the fake server")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--provider", choices=sorted(SENDS), default="anthropic")
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    parser.add_argument("--pytest-option", action="append", default=[], metavar="OPTION",
                        help="one more option for the harness's runs, e.g. -p=NAME for a trial plugin (repeatable)")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see speed.py)
    speed.PROVIDER = args.provider
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    small = max(1, args.cases // 5)
    root = speed.runs_folder(args.dir, "budget")
    for cases in (small, args.cases):
        speed.write_suite(root / f"suite-{cases}", cases)
    found: list[dict[str, float]] = []
    requests = speed.harness_requests(root)
    with speed.fake_server(args.latency, root) as (url, _):
        for n in range(args.rounds):
            metered, cpu = measure(root, args.cases, url, args, n)
            _, small_cpu = measure(root, small, url, args, n)
            sdk = speed.bare_sdk_run(url, 2 * args.cases, args.concurrency, requests)[1]
            small_sdk = speed.bare_sdk_run(url, 2 * small, args.concurrency, requests)[1]
            per_case = {function: seconds / args.cases for function, seconds in metered.items()}
            per_case["process"] = (cpu - small_cpu) / (args.cases - small)
            per_case["sdk"] = (sdk - small_sdk) / (args.cases - small)
            found.append(per_case)
    print_budget(found, args)
    print(speed.kept(root))
    return 0


def print_budget(found: list[dict[str, float]], args: argparse.Namespace) -> None:
    def ms(key: str) -> float:
        return speed.median([per_case.get(key, 0.0) for per_case in found]) * 1000

    def own(per_case: dict[str, float]) -> float:
        return per_case[ITEM] + per_case[TRACES] - per_case[SENDS[args.provider]]

    print(f"\nA case's CPU, part by part ({args.provider}, {args.cases:,} cases, concurrency {args.concurrency}, "
          f"{args.latency * 1000:g} ms a call; ms a case, medians of {len(found)} runs)\n")
    rows = [(label, ms(function)) for label, function in parts(args.provider)]
    rows.insert(1, ("  pytest's own work and the plugin's hooks around the run",
                    speed.median([(p[ITEM] - p[RUN]) for p in found]) * 1000))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value:7.3f}")
    label = "the harness's own work: all of the above less the model calls"
    print(f"{label:<{width}}{speed.median([own(p) for p in found]) * 1000:7.3f}")
    print(f"\n{'the whole process, marginal (N/5 cases to N)':<{width}}{ms('process'):7.3f}")
    print(f"{'the bare SDK making the same two calls, marginal':<{width}}{ms('sdk'):7.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
