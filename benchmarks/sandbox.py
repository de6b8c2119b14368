"""What confinement costs. One command, prints a table:

    python benchmarks/sandbox.py                      # 30 confined /bin/true, 3 demo tournaments
    python benchmarks/sandbox.py --true-runs 50 --demo-runs 5
    python benchmarks/sandbox.py --skip-demo

* a confined ``/bin/true`` through ``harness.sandbox`` (bubblewrap, the harness's runner, and whatever bounds
  the machine allows), against the same ``/bin/true`` started bare: the fixed cost of every confined run;
* a confined ``python -c pass``: the interpreter start-up a command producer or a benchmark pays inside;
* the offline demo tournament, ``harness improve goals/demo_primes --iterations 2``, in a fresh repository
  holding a copy of the demo goal (as from a fresh clone), wall time of the whole command.

Medians of the runs, after one warm-up. The sandbox needs bubblewrap; without it the confined figures are
those of the runner alone, and the table says so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from harness.apps.tournament.testing import demo_repo  # noqa: E402
from harness.sandbox import Confinement, Limits, sandbox  # noqa: E402


def bare_ms(argv: list[str], runs: int) -> float:
    subprocess.run(argv, check=True)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return median(times)


def confined_ms(argv: list[str], runs: int, workdir: Path) -> float:
    box = sandbox()
    confinement = Confinement(workdir=workdir, env={"PATH": "/usr/bin:/bin"})
    limits = Limits(timeout_s=30)
    box.run(argv, confinement, limits)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = box.run(argv, confinement, limits)
        times.append((time.perf_counter() - started) * 1000)
        if done.exit_code != 0:
            raise SystemExit(f"confined {argv} exited {done.exit_code}: {done.stderr.strip()[-300:]}")
    return median(times)


def demo_s(runs: int, folder: Path) -> tuple[float, list[float]]:
    times = []
    for n in range(runs + 1):  # the first is the warm-up
        repo = folder / f"demo-{n}"
        goal = demo_repo(repo, ROOT / "goals" / "demo_primes")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "harness.apps.cli", "improve", str(goal.relative_to(repo)),
                               "--iterations", "2", "--no-plots"], cwd=repo, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"the demo tournament exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        if n:
            times.append(elapsed)
    return median(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--true-runs", type=int, default=30)
    parser.add_argument("--demo-runs", type=int, default=3)
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()
    box = sandbox()
    print(box.describe())
    rows = []
    with tempfile.TemporaryDirectory(dir=HERE) as tmp:
        work = Path(tmp)
        rows.append(("/bin/true, bare", f"{bare_ms(['/bin/true'], args.true_runs):.1f} ms"))
        rows.append(("/bin/true, confined", f"{confined_ms(['/bin/true'], args.true_runs, work):.1f} ms"))
        rows.append(("python -c pass, bare", f"{bare_ms([sys.executable, '-c', 'pass'], args.true_runs):.1f} ms"))
        rows.append(("python -c pass, confined",
                     f"{confined_ms([sys.executable, '-c', 'pass'], args.true_runs, work):.1f} ms"))
        if not args.skip_demo:
            middle, each = demo_s(args.demo_runs, work)
            rows.append(("demo tournament, 2 iterations",
                         f"{middle:.2f} s ({', '.join(f'{t:.2f}' for t in each)})"))
    width = max(len(name) for name, _ in rows)
    print(f"\n{'measure'.ljust(width)}  median of runs")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
