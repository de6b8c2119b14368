"""A shard's records moved to their merged cycle: the cycle id and the paths into ``runs/{cycle}/`` rewritten.

Records name their files by a display path (``WORK/runs/2026-01-31-001/writer/c01/attempt-1.md``, relative to the
shard's project root, or absolute) and their cycle by id (``cycle_id`` in the run record, the loop result's runs,
the execution results). Merged, the files live under the target's ``runs/{merged cycle}/``: every path into the
shard's cycle folder is rewritten to name it (whatever stood before ``runs/``: the shard's work folder, as its
session named it), and every ``cycle_id`` to the merged cycle's. Artifacts (``attempt-N.md``) are never rewritten:
they are the agents' bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN_STOPS = ' \t\r\n"\'(<[{,;='  # what ends a path written inside a sentence


class Relocate:
    """Rewrites values of one shard's cycle ``old`` for the merged cycle ``new`` under ``prefix`` (the target's work
    folder as records name it, ending with a separator, e.g. ``WORK/``; empty for a path relative to it)."""

    def __init__(self, old: str, new: str, prefix: str):
        self.old, self.new, self.prefix = old, new, prefix
        self._marker = re.compile(r"runs([/\\])" + re.escape(old) + r"(?=[/\\]|$|[\s\"',;)\]}])")

    def touches(self, text: str) -> bool:
        """Whether ``text`` may hold something to rewrite (a cheap test before parsing)."""
        return self.old in text

    def path_text(self, text: str) -> str:
        """``text`` with every path into the shard's cycle folder pointing into the merged one."""
        if self.old not in text:
            return text
        out: list[str] = []
        position = 0
        for found in self._marker.finditer(text):
            start = found.start()
            if start > 0 and text[start - 1] not in "/\\" and text[start - 1] not in _TOKEN_STOPS:
                continue  # "reruns/..." is not a records path
            begin = max((text.rfind(stop, position, start) for stop in _TOKEN_STOPS), default=-1) + 1
            begin = max(begin, position)
            separator = found.group(1)
            prefix = self.prefix.replace("/", separator).replace("\\", separator) if self.prefix else ""
            out += [text[position:begin], f"{prefix}runs{separator}{self.new}"]
            position = found.end()
        out.append(text[position:])
        return "".join(out)

    def value(self, value: Any, key: str | None = None) -> Any:
        """A JSON value with its paths and its ``cycle_id`` fields rewritten (a copy; the input is left alone)."""
        if isinstance(value, str):
            if key == "cycle_id" and value == self.old:
                return self.new
            return self.path_text(value)
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def json_text(self, text: str | None, *, ensure_ascii: bool = False) -> str | None:
        """A JSON column's text rewritten; untouched (the same text) when there is nothing in it to rewrite."""
        if text is None or not self.touches(text):
            return text
        try:
            data = json.loads(text)
        except ValueError:
            return self.path_text(text)
        moved = self.value(data)
        return text if moved == data else json.dumps(moved, ensure_ascii=ensure_ascii)
