"""The inputs of one run of goals/demo_primes, drawn from the run's challenge.

The harness gives the measured run and the check the same fresh challenge (HARNESS_CHALLENGE, a random hex
string) for every run: the workload counts the primes below these limits, and the check works the right
counts out for itself. A run that prints answers it remembered, or exits before counting, fails the check.
"""

import hashlib

LOW, HIGH = 15_000, 18_750   # each limit is drawn from [LOW, HIGH)
COUNT = 5                    # limits per run


def limits(challenge: str) -> list[int]:
    """The run's limits: the same challenge always gives the same ones."""
    drawn = []
    for index in range(COUNT):
        digest = hashlib.sha256(f"{challenge}:{index}".encode()).digest()
        drawn.append(LOW + int.from_bytes(digest[:8], "big") % (HIGH - LOW))
    return drawn
