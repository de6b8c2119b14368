"""A change's cost, measured A/B: another revision against the working tree, on speed.py's suites, alternated.

    python benchmarks/ab.py cabd161               # 7 rounds (about 6 minutes)
    python benchmarks/ab.py HEAD~3 --rounds 9 --cases 500

The revision's tree is exported (``git archive``) to ``benchmarks/.runs/ab-<rev>`` and imported ahead of the
installed package (``PYTHONPATH``); the working tree is imported the same way, so both runs share everything but the
code. Each round runs, in alternating order, the 500-case suite of speed.py on the 0 ms fake server (the model path,
2 calls a case, cache off) and with a Python producer and judge (no model). Alternating keeps a shared machine's
drift out of the difference, which is what a set of ``speed.py`` runs taken one after the other cannot do. Prints
the medians per case, wall and CPU, each side and the difference.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

import speed

REPO = speed.HERE.parent


def export(revision: str, into: Path) -> Path:
    """The tree of ``revision`` in ``into`` (made once per commit)."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = into / f"ab-{commit}"
    if not (folder / "harness").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", "--format=tar", commit, "harness"], cwd=REPO,
                                 capture_output=True, check=True).stdout
        with tempfile.TemporaryFile() as handle:
            handle.write(archive)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(folder, filter="data")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="the revision to compare the working tree with (a commit, HEAD~1, a tag)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see speed.py)
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    sides = {args.revision: export(args.revision, args.dir), "working tree": REPO}
    root = Path(tempfile.mkdtemp(prefix="harness-ab-", dir=args.dir))
    walls: dict[tuple[str, str], list[float]] = {(p, s): [] for p in ("model", "local") for s in sides}
    cpus: dict[tuple[str, str], list[float]] = {key: [] for key in walls}
    try:
        suite, local = root / "suite", root / "local"
        speed.write_suite(suite, args.cases)
        speed.write_suite(local, args.cases, python_agents=True)
        common = ["suites/", "--harness-concurrency=32", "-o", "harness_progress_interval=0"]
        order = list(sides)
        for n in range(args.rounds):
            for side in order if n % 2 == 0 else order[::-1]:
                tag = f"{n}-{'base' if side == args.revision else 'head'}"
                with speed.fake_server(0.0, root) as (url, _):
                    done = speed.run_pytest(suite, [*common, "--harness-cache=off", f"--harness-work-dir=Z-{tag}"],
                                            url, code=sides[side])
                if done.code not in (0, 1):
                    raise SystemExit(f"{side}: pytest exited {done.code} on the model suite")
                walls["model", side].append(done.wall)
                cpus["model", side].append(done.cpu)
                done = speed.run_pytest(local, [*common, f"--harness-work-dir=L-{tag}"], code=sides[side])
                if done.code not in (0, 1):
                    raise SystemExit(f"{side}: pytest exited {done.code} on the Python suite")
                walls["local", side].append(done.wall)
                cpus["local", side].append(done.cpu)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per = 1000 / args.cases
    base, head = sides
    print(f"\nmedians of {args.rounds} alternating rounds, ms per case: {base} / {head} (difference)")
    for path, name in (("model", "0 ms server, 2 model calls a case"), ("local", "no model: Python producer and judge")):
        wall_a, wall_b = (statistics.median(walls[path, s]) * per for s in sides)
        cpu_a, cpu_b = (statistics.median(cpus[path, s]) * per for s in sides)
        print(f"{name:<38} wall {wall_a:6.2f} / {wall_b:6.2f} ({wall_b - wall_a:+.2f})   "
              f"CPU {cpu_a:6.2f} / {cpu_b:6.2f} ({cpu_b - cpu_a:+.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
