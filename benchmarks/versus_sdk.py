"""The harness against the bare SDK on each provider, in interleaved pairs (issue 25's measure):

    python benchmarks/versus_sdk.py                     # both providers, N = 500 and 5,000, 3 pairs each
    python benchmarks/versus_sdk.py --provider openai --rounds 5 --sizes 500

Each pair runs, one right after the other on the same fake server (speed.py's suite: a producer call and a judge call
a case, concurrency 32), the harness's pytest run and a bare process that makes the same calls from as many threads
with the provider's own SDK (speed.py's ``BARE_SDK``), sending the harness's own requests (a producer's and a
judge's, as the fake server got them from a one-case run). Pairs alternate which goes first, so a shared machine's drift
falls on both. Printed per provider, medians of the pairs:

- at 200 ms a call, for each N: the wall time of each and their ratio (harness / bare SDK);
- the CPU per case above the bare SDK, at 0 ms and N = 500 (the harness's run less the bare process's, per case),
  and the same less what plain pytest spends on as many trivial items (pytest's own cost per item, which any
  pytest plugin pays);
- the marginal CPU per case above the bare SDK: the slope of CPU between the smallest and the largest N at 200 ms,
  which leaves out every one-time cost (start-up, imports, the SDK's client);
- the bare SDK's own marginal CPU a call at 0 ms and at 200 ms: on a shared machine, work done after a wait costs
  more (cold caches), and the margin at 200 ms carries the same factor.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NamedTuple

import speed


class Pair(NamedTuple):
    harness_wall: float
    harness_cpu: float
    sdk_wall: float
    sdk_cpu: float


def pairs(root: Path, cases: int, latency: float, rounds: int, concurrency: int, requests: Path) -> list[Pair]:
    suite = root / f"{speed.PROVIDER}-{cases}"
    if not suite.exists():
        speed.write_suite(suite, cases, trivial=True)
    # each run's records stay (speed.runs_folder keeps them): removing thousands of files just before the next run
    # made that run's files cost twice the CPU (ext4 without a journal passes over the inodes deleted in the last
    # few minutes when it hands out a new one), a cost of the benchmark's cleaning up, not of the harness
    options = ["suites/", f"--harness-concurrency={concurrency}", "-o", "harness_progress_interval=0",
               "--harness-cache=off"]
    found = []
    for n in range(rounds):
        with speed.fake_server(latency, root) as (url, _):
            def harness() -> speed.Run:
                done = speed.run_pytest(suite, [*options, f"--harness-work-dir=W-{latency}-{n}"], url)
                if done.code != 0:
                    raise SystemExit(f"the harness's run of {cases} cases exited {done.code}")
                return done

            if n % 2 == 0:
                ran = harness()
                wall, cpu = speed.bare_sdk_run(url, 2 * cases, concurrency, requests)
            else:
                wall, cpu = speed.bare_sdk_run(url, 2 * cases, concurrency, requests)
                ran = harness()
        found.append(Pair(ran.wall, ran.cpu, wall, cpu))
    return found


def bare_sdk_marginal(root: Path, small: int, large: int, rounds: int, concurrency: int, requests: Path) -> float:
    """The bare SDK's CPU seconds a call at 0 ms, between ``2 * small`` and ``2 * large`` calls (medians of the rounds)."""
    found = []
    with speed.fake_server(0.0, root) as (url, _):
        for _round in range(rounds):
            few, many = (speed.bare_sdk_run(url, 2 * small, concurrency, requests)[1],
                         speed.bare_sdk_run(url, 2 * large, concurrency, requests)[1])
            found.append((many - few) / (2 * (large - small)))
    return speed.median(found)


def median_of(found: list[Pair], field: str) -> float:
    return speed.median([getattr(p, field) for p in found])


def measure(provider: str, sizes: list[int], rounds: int, concurrency: int, root: Path) -> list[str]:
    speed.PROVIDER = provider
    requests = speed.harness_requests(root)  # made before any pair's server is up: both take the benchmark's port
    lines = [f"\n{provider} (medians of {rounds} interleaved pairs, concurrency {concurrency})"]
    at_200: dict[int, list[Pair]] = {}
    for cases in sizes:
        found = at_200[cases] = pairs(root, cases, 0.2, rounds, concurrency, requests)
        harness, sdk = median_of(found, "harness_wall"), median_of(found, "sdk_wall")
        lines.append(f"  N={cases:>6,} at 200 ms: harness {harness:7.2f} s, bare SDK {sdk:7.2f} s, "
                     f"wall ratio {speed.median([p.harness_wall / p.sdk_wall for p in found]):.2f}")
    small = min(sizes)
    zero = pairs(root, small, 0.0, rounds, concurrency, requests)
    plain = speed.median([speed.run_pytest(root / f"{provider}-{small}", ["test_trivial.py"]).cpu for _ in range(rounds)])
    above = speed.median([(p.harness_cpu - p.sdk_cpu) / small * 1000 for p in zero])
    lines.append(f"  CPU per case above the bare SDK, 0 ms, N={small:,}: {above:.2f} ms "
                 f"(harness {median_of(zero, 'harness_cpu') / small * 1000:.2f}, bare SDK "
                 f"{median_of(zero, 'sdk_cpu') / small * 1000:.2f}); less plain pytest's "
                 f"{plain / small * 1000:.2f} ms an item: {above - plain / small * 1000:.2f} ms")
    if len(sizes) > 1:
        large = max(sizes)
        slope = ((median_of(at_200[large], "harness_cpu") - median_of(at_200[small], "harness_cpu"))
                 - (median_of(at_200[large], "sdk_cpu") - median_of(at_200[small], "sdk_cpu"))) / (large - small)
        lines.append(f"  marginal CPU per case above the bare SDK, 200 ms, N={small:,} to {large:,}: "
                     f"{slope * 1000:.2f} ms (one-time costs left out)")
        # the same calls cost more CPU when each waits 200 ms: a thread that sleeps between bursts finds its caches
        # cold (a shared VM); the margin above, measured at 200 ms, carries that factor too (benchmarks/README.md)
        waited = (median_of(at_200[large], "sdk_cpu") - median_of(at_200[small], "sdk_cpu")) / (2 * (large - small))
        hot = bare_sdk_marginal(root, small, large, rounds, concurrency, requests)
        lines.append(f"  the bare SDK's marginal CPU a call: {hot * 1000:.2f} ms at 0 ms, {waited * 1000:.2f} ms at "
                     f"200 ms: waiting makes the same work {waited / hot:.1f} times dearer on this machine")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=sorted(speed.MODELS), action="append",
                        help="a provider to measure (default: both)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000], help="numbers of cases (default: 500 "
                        "5000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved pairs per measure (default: 3)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see speed.py)
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    root = speed.runs_folder(args.dir, "versus-sdk")
    for provider in args.provider or sorted(speed.MODELS):
        print("\n".join(measure(provider, sorted(set(args.sizes)), args.rounds, args.concurrency, root)),
              flush=True)
    print(speed.kept(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
