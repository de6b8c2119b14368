"""The sealed check of goals/demo_primes: reads what the measured run printed (stdin) and checks every count.

It runs in a process of its own that sees the sealed files only, never the program it checks, and counts the
primes itself (a sieve of its own), so a run that printed remembered answers, or exited before counting,
fails. A wrong or missing count exits 1 with the reason on stderr: the harness reports the run as a wrong
answer. Otherwise it writes {"sub_scores": {"correct": 1.0}} to the result channel the harness opened for it
(HARNESS_RESULT_FILE; stdout when run by hand). The score is the run's CPU time, which the harness measures.
"""

import json
import os
import re
import sys

from challenge import limits

ANSWER = re.compile(r"count_primes\((\d+)\) = (-?\d+)")


def primes_below(limit: int) -> int:
    sieve = bytearray([1]) * max(limit, 2)
    sieve[0:2] = b"\x00\x00"
    for p in range(2, int(limit ** 0.5) + 1):
        if sieve[p]:
            sieve[p * p::p] = bytes(len(range(p * p, limit, p)))
    return sum(sieve[:limit])


def main() -> int:
    printed: dict[int, list[int]] = {}
    for line in sys.stdin:
        match = ANSWER.fullmatch(line.strip())
        if match:
            printed.setdefault(int(match[1]), []).append(int(match[2]))
    for limit in limits(os.environ.get("HARNESS_CHALLENGE", "by hand")):
        expected = primes_below(limit)
        answers = printed.get(limit)
        if not answers:
            print(f"missing answer: the run printed no count for count_primes({limit})", file=sys.stderr)
            return 1
        wrong = next((got for got in answers if got != expected), None)
        if wrong is not None:
            print(f"wrong answer: count_primes({limit}) returned {wrong}, expected {expected}", file=sys.stderr)
            return 1
    result = {"sub_scores": {"correct": 1.0}}
    if "HARNESS_RESULT_FILE" in os.environ:
        with open(os.environ["HARNESS_RESULT_FILE"], "w") as channel:
            channel.write(json.dumps(result) + "\n")
    else:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
