"""argparse value types shared by the pytest options and the ``harness`` command.

A bad value is an ``argparse.ArgumentTypeError``: argparse (and pytest) print it as a usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(minimum: int = 1) -> Callable[[str], int]:
    """A whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


def dollars(text: str) -> float:
    """An amount in USD, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD such as 2.50") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must not be negative")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    """One of ``allowed``."""

    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse
