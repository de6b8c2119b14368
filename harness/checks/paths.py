"""Dotted paths into parsed JSON: reading a value at one, and naming a place in error text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MISSING = object()
"""What :func:`value_at` returns when nothing is at the path (``None`` is a value JSON can hold)."""


def value_at(document: Any, path: Iterable[str]) -> Any:
    """The value at a dotted path's parts (keys, or list indexes as digits), or ``MISSING``."""
    value = document
    for part in path:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def json_path(parts: Iterable[str | int], prefix: str = "") -> str:
    """``targets[2].name`` from ``("targets", 2, "name")``; ``(root)`` for no parts."""
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"
