"""The sealed benchmark of goals/demo_primes: times count_primes and checks its answer.

Prints one JSON line: {"score": <best runtime in ms>, "sub_scores": {"runtime_ms": ..., "correct": 1.0}}.
A wrong answer is an error (exit 1), never a score.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "program"))

from primes import count_primes  # noqa: E402

LIMIT = 10_000
EXPECTED = 1229
REPEATS = 5


def main() -> int:
    answer = count_primes(LIMIT)  # also warms up
    if answer != EXPECTED:
        print(f"wrong answer: count_primes({LIMIT}) returned {answer}, expected {EXPECTED}", file=sys.stderr)
        return 1
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        count_primes(LIMIT)
        times.append((time.process_time() - start) * 1000.0)
    best = round(min(times), 4)
    print(json.dumps({"score": best, "sub_scores": {"runtime_ms": best, "correct": 1.0}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
