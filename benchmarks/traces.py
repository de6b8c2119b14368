"""What the execution trace costs a case: runs with traces on and off, alternated, on speed.py's suites.

    python benchmarks/traces.py              # 9 rounds (about 8 minutes)
    python benchmarks/traces.py --rounds 5

Each round runs, in alternating order, the 500-case suite of speed.py twice (traces on, and off through the public
option --harness-capture=off): on the 0 ms fake server (the model path, 2 calls a case) and with a Python producer
and judge (no model). Alternating, rather than one set of runs then the other as ``speed.py --traces on|off``
does, keeps the drift of a shared machine out of the difference. Prints the medians per case, wall and CPU, and
the difference (target: under 0.5 ms a case).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

import speed

SWITCH = {"on": [], "off": ["--harness-capture=off"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    args = parser.parse_args()
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="harness-traces-", dir=args.dir))
    walls: dict[tuple[str, str], list[float]] = {(p, m): [] for p in ("model", "local") for m in SWITCH}
    cpus: dict[tuple[str, str], list[float]] = {key: [] for key in walls}
    try:
        suite, local = root / "suite", root / "local"
        speed.write_suite(suite, args.cases)
        speed.write_suite(local, args.cases, python_agents=True)
        common = ["suites/", "--harness-concurrency=32", "-o", "harness_progress_interval=0"]
        for n in range(args.rounds):
            for mode in ("on", "off") if n % 2 == 0 else ("off", "on"):
                with speed.fake_server(0.0, root) as (url, _):
                    done = speed.run_pytest(suite, [*common, *SWITCH[mode], "--harness-cache=off",
                                                    f"--harness-work-dir=Z-{n}-{mode}"], url)
                walls["model", mode].append(done.wall)
                cpus["model", mode].append(done.cpu)
                done = speed.run_pytest(local, [*common, *SWITCH[mode], f"--harness-work-dir=L-{n}-{mode}"])
                walls["local", mode].append(done.wall)
                cpus["local", mode].append(done.cpu)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per = 1000 / args.cases
    print(f"\nmedians of {args.rounds} alternating rounds, ms per case: traces on / off (difference)")
    for path, name in (("model", "0 ms server, 2 model calls a case"), ("local", "no model: Python producer and judge")):
        on, off = (statistics.median(walls[path, m]) * per for m in SWITCH)
        cpu_on, cpu_off = (statistics.median(cpus[path, m]) * per for m in SWITCH)
        print(f"{name:<38} wall {on:6.2f} / {off:6.2f} ({on - off:+.2f})   CPU {cpu_on:6.2f} / {cpu_off:6.2f} "
              f"({cpu_on - cpu_off:+.2f})   target < +0.5")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
