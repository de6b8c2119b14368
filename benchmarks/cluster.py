"""What ``harness improve --scheduler local:2`` costs and saves against the thread pool. One command, prints a table:

    python benchmarks/cluster.py                 # 3 rounds of each, alternated
    python benchmarks/cluster.py --rounds 5 --sleep 1.0

* the offline demo, ``harness improve goals/demo_primes --iterations 2``, in a fresh repository (as from a fresh
  clone): the thread pool, then ``--scheduler local:2``; the wall time of the whole command (the cluster's start
  and close included) and each run's merge decisions, which must be the same;
* the tests' synthetic goal with four candidates measured three times each, whose benchmark waits ``--sleep``
  seconds a run (time that is not this machine's CPU: a benchmark on a device, a service, a remote host), one
  iteration: 3 noise runs, 12 candidates' runs shared by the workers, then 8 + 1 for the winner on one worker;
* a local cluster of 2 workers started and closed, nothing run: the fixed cost of ``local:N``.

Rounds alternate the two ways, so a shared machine's drift falls on both alike. Needs the distributed extra
(``pip install -e '.[distributed]'``).
"""

from __future__ import annotations

import argparse
import json
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

from harness.apps.tournament.testing import demo_repo, goal_repo, synth_goal_md, value_idea  # noqa: E402


def improve_s(repo: Path, goal: Path, iterations: int, scheduler: str | None, env: dict[str, str]) -> tuple[float, str]:
    """Wall time of one ``harness improve`` and its decisions: each iteration's status and merged winner."""
    argv = [sys.executable, "-m", "harness.apps.cli", "improve", str(goal.relative_to(repo)), "--iterations",
            str(iterations), "--no-plots", *(["--scheduler", scheduler] if scheduler else [])]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:])} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    reports = sorted((repo / "WORK" / "improve" / goal.name / "merge_reports").glob("*.json"))
    decisions = []
    for path in reports:
        report = json.loads(path.read_text())
        winner = (report.get("winner") or {}).get("plan_id") if report["status"] == "merged" else None
        decisions.append(f"{report['status']}{f' ({winner})' if winner else ''}")
    return elapsed, ", ".join(decisions)


def synth(repo: Path) -> Path:
    """Four candidates that each gain, measured 3 times each (the candidates' phase is what workers share), then
    the winner's 4 pairs and 1 run after the merge (on one worker, whatever the cluster)."""
    ideas = {f"{name}.md": value_idea(name.title(), family, 10.0, value)
             for name, family, value in (("one", "optimization", 11.0), ("two", "data", 12.0),
                                         ("three", "architecture", 13.0), ("four", "testing", 20.0))}
    md = synth_goal_md(executors=4).replace("- candidate_runs: 1", "- candidate_runs: 3")
    return goal_repo(repo, ideas=ideas, goal_md=md)


def cluster_start_s() -> float:
    from distributed import Client, LocalCluster

    from harness.apps.tournament.cluster import QUIET_HTTP, RESOURCE

    started = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={RESOURCE: 1},
                      dashboard_address=None, scheduler_kwargs=QUIET_HTTP) as cluster, Client(cluster):
        pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds each synthetic benchmark run waits")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    ways = {"thread pool": None, "--scheduler local:2": "local:2"}
    times: dict[tuple[str, str], list[float]] = {}
    decided: dict[tuple[str, str], set[str]] = {}
    with tempfile.TemporaryDirectory(dir=HERE) as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            for way, scheduler in ways.items():
                for name, make, iterations, extra in (
                        ("demo tournament, 2 iterations", lambda repo: demo_repo(repo, ROOT / "goals" / "demo_primes"),
                         2, {}),
                        (f"4 candidates x 3 runs of {args.sleep:g} s waiting", synth, 1,
                         {"SYNTH_BENCH_SLEEP": str(args.sleep)})):
                    repo = work / f"{len(times)}-{r}-{scheduler or 'pool'}-{iterations}"
                    goal = make(repo)
                    elapsed, decisions = improve_s(repo, goal, iterations, scheduler, {**env, **extra})
                    times.setdefault((name, way), []).append(elapsed)
                    decided.setdefault((name, way), set()).add(decisions)
                    print(f"round {r + 1}: {name}, {way}: {elapsed:.2f} s: {decisions}", flush=True)
    start = cluster_start_s()
    print(f"\n{'measure':45}  {'way':22}  median of {args.rounds} (each)")
    for (name, way), each in times.items():
        print(f"{name:45}  {way:22}  {median(each):.2f} s ({', '.join(f'{t:.2f}' for t in each)})")
    print(f"{'a local cluster of 2 workers, started and closed':45}  {'':22}  {start:.2f} s")
    print("\ndecisions:")
    for (name, way), seen in decided.items():
        print(f"  {name}, {way}: {' | '.join(sorted(seen))}")


if __name__ == "__main__":
    main()
