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
import os
from pathlib import Path

import speed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see speed.py)
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    variants = {"on": speed.Variant(), "off": speed.Variant(options=("--harness-capture=off",))}
    root = speed.runs_folder(args.dir, "traces")
    medians = speed.alternate(variants, args.rounds, args.cases, root)
    speed.print_alternated(medians, args.rounds, "off", "on", target="   target < +0.5")
    print(speed.kept(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
