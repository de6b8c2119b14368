"""The measured run of goals/demo_primes: count_primes on the limits the run's challenge gives, one line each.

The harness times this whole process from outside (its CPU time, read with wait4: score_from: cpu_time) and
gives it no result channel, so nothing it prints is a score. bench/check.py, in a process of its own that
never sees the program, reads these lines and checks every count. By hand:

    python goals/demo_primes/bench/workload.py | python goals/demo_primes/bench/check.py
"""

import os
import sys
from pathlib import Path

from challenge import limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "program"))

from primes import count_primes  # noqa: E402


def main() -> int:
    for limit in limits(os.environ.get("HARNESS_CHALLENGE", "by hand")):
        print(f"count_primes({limit}) = {count_primes(limit)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
