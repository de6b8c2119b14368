"""Dotted paths into parsed JSON: reading a value at one, and naming a place in error text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from harness.fields import Fields

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


_BRACKET = re.compile(r"""\[\s*(?:(\d+)|'([^']*)'|"([^"]*)")\s*\]""")
PATH_EXAMPLE = "answer.items.0.name (or $.answer.items[0].name)"


def parse_path(text: str) -> tuple[str, ...]:
    """The parts of ``answer.items.0.name``, ``$.answer.items[0].name`` or ``$['answer']``; ``$`` alone is the
    whole document, ``()``. Raises ``ValueError`` saying what is wrong with a malformed path."""
    rest = text.strip()
    if rest.startswith("$"):
        rest = rest[1:]
        if not rest:
            return ()
        if rest[0] not in ".[":
            raise ValueError("'$' must be followed by '.' or '['")
    dotted = _BRACKET.sub(lambda m: "." + next(g for g in m.groups() if g is not None), rest)
    if "[" in dotted or "]" in dotted:
        raise ValueError("a '[...]' is not a list index such as [0] or a quoted key such as ['name']")
    parts = tuple((dotted[1:] if dotted.startswith(".") else dotted).split("."))
    if any(not part.strip() for part in parts):
        raise ValueError("it has an empty part (two dots in a row, or a dot at an end)")
    return parts


def path_option(raw: object, f: Fields, key: str | None) -> tuple[str, ...]:
    """A JSON path written in a user file (:func:`parse_path`), or a one-line error naming the field."""
    text = f.string(raw, key, what=f"a JSON path such as {PATH_EXAMPLE}")
    try:
        return parse_path(text)
    except ValueError as exc:
        raise f.error(key, f"bad JSON path {text!r}: {exc}", f"write a path such as {PATH_EXAMPLE}") from None


def dotted(parts: Iterable[str]) -> str:
    """How a parsed path reads in a reason: ``answer.items.0.name``, or ``$`` for the whole document."""
    return ".".join(parts) or "$"
