"""Count the prime numbers below a limit."""


def is_prime(n: int) -> bool:
    """Trial division by every candidate divisor up to the square root."""
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def count_primes(limit: int) -> int:
    """How many primes are smaller than ``limit``."""
    return sum(1 for n in range(limit) if is_prime(n))
