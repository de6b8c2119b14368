"""Dotted paths into parsed JSON: reading a value at one, and naming a place in error text."""

from __future__ import annotations

import re
from collections.abc import Iterable

from harness.base.fields import Fields
from harness.base.slots import MISSING, value_at  # one dotted-path reader, shared with the slots

__all__ = ["MISSING", "dotted", "json_path", "parse_path", "path_option", "value_at"]


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
