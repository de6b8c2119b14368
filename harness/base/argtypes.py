"""argparse value types shared by the pytest options and the ``harness`` command.

A bad value is an ``argparse.ArgumentTypeError``: argparse (and pytest) print it as a usage error.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(minimum: int = 1) -> Callable[[str], int]:
    """A whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number "
                                             f"(fix: give a whole number such as {max(minimum, 4)})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum} "
                                             f"(fix: give a whole number of at least {minimum})")
        return value

    return parse


def dollars(text: str) -> float:
    """An amount in USD, 0 or more and finite (``nan`` would disable a cost cap, ``inf`` is no cap)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD such as 2.50 "
                                         "(fix: give a number of dollars)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD such as 2.50 "
                                         "(fix: give a finite number of dollars; leave the cap out for none)")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must not be negative (fix: give 0 or more, such as 2.50)")
    return value


def seconds(text: str) -> float:
    """A number of seconds, 0 or more and finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds "
                                         "(fix: give seconds such as 10)") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (fix: give 0 or more, such as 10)")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    """One of ``allowed``."""

    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)} "
                                             f"(fix: use one of {', '.join(allowed)})")
        return text

    return parse
