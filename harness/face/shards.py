"""``--harness-shard I/N``: one of N deterministic parts of a session's items, for a suite split across CI jobs.

An item belongs to shard ``1 + h mod N``, where ``h`` is the first 8 bytes of the SHA-256 of its node id
(``suites/writer.cases.yaml::c01``): the same on every machine, Python version and operating system (pytest writes
node ids with ``/`` everywhere), and independent of the other items, so adding, removing or renaming a case moves
no other case between shards. Every item of the session is split, the harness's and plain pytest tests alike: the
N shards together run each item exactly once, as the unsharded run does. The items of other shards are deselected
(pytest reports them as ``N deselected``, as ``-k`` does). A hash does not balance small suites evenly: with 12 items
in 3 shards, 2 to 6 in each is usual; a shard that draws none ends with exit status 0 and says so.

Nothing here imports more than the standard library: the plugin loads it in every session.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

SHARD_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 1000
T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, nodeid: str) -> bool:
        """Whether the item ``nodeid`` runs in this shard."""
        return shard_of(nodeid, self.count) == self.index


def shard_of(nodeid: str, count: int) -> int:
    """The shard (1..count) an item belongs to: its node id's stable hash, modulo ``count``."""
    digest = hashlib.sha256(nodeid.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> str:
    """``I/N`` with ``1 <= I <= N``: an argparse type function. The value stays the text ``I/N`` (option values
    travel to pytest-xdist's workers); :func:`shard` reads it."""
    found = SHARD_PATTERN.match(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N (fix: give this job's shard and the number of "
                                         "shards, such as 2/3 for the second of three)")
    index, count = int(found.group(1)), int(found.group(2))
    if count < 1 or count > MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"{text!r}: the number of shards must be 1 to {MAX_SHARDS} (fix: give I/N "
                                         "such as 2/3)")
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"{text!r}: the shard must be 1 to {count} (fix: shards count from 1, such "
                                         f"as 1/{count} to {count}/{count})")
    return f"{index}/{count}"


def shard(text: str | None) -> Shard | None:
    """The shard an ``I/N`` text (as :func:`parse_shard` gave it) names; None for none."""
    if not text:
        return None
    index, count = parse_shard(text).split("/")
    return Shard(int(index), int(count))


def split(items: Sequence[T], part: Shard, nodeid_of=lambda item: item.nodeid) -> tuple[list[T], list[T]]:  # noqa: ANN001
    """The items this shard runs, and those it leaves to the others; both in collection order."""
    keep: list[T] = []
    drop: list[T] = []
    for item in items:
        (keep if part.holds(nodeid_of(item)) else drop).append(item)
    return keep, drop
