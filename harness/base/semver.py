"""Semantic versions, for rubric versioning (seed 000 section 3)."""

from __future__ import annotations

import re
from typing import NamedTuple

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


class Version(NamedTuple):
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_version(text: str) -> Version | None:
    match = SEMVER.match(text.strip())
    if not match:
        return None
    return Version(int(match[1]), int(match[2]), int(match[3]))
