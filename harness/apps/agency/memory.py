"""What a pipeline with memory remembers across its runs: ``WORK/memory/<name>/``, human-readable JSON files.

- ``candidates.json``: lessons a Learner proposed, waiting for a Gatekeeper's review;
- ``lessons.json``: the lessons a Gatekeeper approved (``rejected.json``: those it did not), each naming the run that
  proposed it and the one that approved it;
- ``portfolio.json``: runs the Gatekeeper scored 15 or more, with their scorecards (the Retriever's examples);
- ``improvements.json``: each run's Gatekeeper improvements (the next run's Guide reads the latest);
- ``level.json``: the Learner's permission level (0-3) and every promotion.

Every change is one locked read, check and atomic replace (``.memory.lock``), so runs in several processes never
lose each other's entries; a file that is not what it should be is an error naming it, never overwritten. A run
reads what earlier runs left: a pipeline with memory runs its items one after another, in collection order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.base.appendlog import read_entries
from harness.base.clock import utc_now
from harness.base.errors import HarnessConfigError
from harness.base.fileio import atomic_write_json, file_lock

CANDIDATES, LESSONS, REJECTED = "candidates.json", "lessons.json", "rejected.json"
PORTFOLIO, IMPROVEMENTS, LEVEL = "portfolio.json", "improvements.json", "level.json"
START_LEVEL = 1  # a new Learner may read and create files; editing and commands come with promotions
PORTFOLIO_SCORE = 15  # a run scoring this much (of 25) is kept as an example


class Memory:
    """One memory folder, read and changed by the stages of the runs that share it."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @contextmanager
    def changing(self) -> Iterator[None]:
        """One change of several files, alone: other processes wait for it."""
        with file_lock(self.root / ".memory.lock"):
            yield

    # -- reading --------------------------------------------------------------------------------------------

    def entries(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_entries(self.root / name) if isinstance(e, dict)]

    def lessons(self) -> list[dict[str, Any]]:
        return self.entries(LESSONS)

    def candidates(self) -> list[dict[str, Any]]:
        return self.entries(CANDIDATES)

    def portfolio(self) -> list[dict[str, Any]]:
        return self.entries(PORTFOLIO)

    def latest_improvements(self) -> list[str]:
        """The improvements of the last run the Gatekeeper gave any to."""
        for entry in reversed(self.entries(IMPROVEMENTS)):
            if entry.get("improvements"):
                return [str(i) for i in entry["improvements"]]
        return []

    def level(self) -> int:
        path = self.root / LEVEL
        if not path.exists():
            return START_LEVEL
        try:
            value = json.loads(path.read_text(encoding="utf-8"))["level"]
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessConfigError(path, "level", f"not a memory's level file ({exc})",
                                     "repair it as {\"level\": 1} or delete it (the Learner starts at level 1)")
        return max(0, min(3, int(value)))

    # -- changing -------------------------------------------------------------------------------------------

    def append(self, name: str, *entries: dict[str, Any]) -> None:
        with self.changing():
            self._replace(name, [*self.entries(name), *entries])

    def propose(self, run: dict[str, Any], lessons: list[dict[str, Any]]) -> None:
        """A Learner's candidate lessons, waiting for the next Gatekeeper."""
        self.append(CANDIDATES, *({**lesson, "proposedBy": run, "proposedAt": utc_now()} for lesson in lessons))

    def review(self, run: dict[str, Any], verdict: Any) -> tuple[list[str], list[str]]:
        """A Gatekeeper's review of every waiting candidate: ``verdict(candidate) -> bool`` approves it. Returns the
        titles approved and rejected; the candidates reviewed leave the waiting list."""
        with self.changing():
            waiting = self.entries(CANDIDATES)
            approved = [c for c in waiting if verdict(c)]
            rejected = [c for c in waiting if c not in approved]
            stamp = {"reviewedBy": run, "reviewedAt": utc_now()}
            known = {lesson["title"] for lesson in self.entries(LESSONS)}
            fresh = [{**c, **stamp} for c in approved if c.get("title") not in known]
            self._replace(LESSONS, [*self.entries(LESSONS), *fresh])
            self._replace(REJECTED, [*self.entries(REJECTED), *({**c, **stamp} for c in rejected)])
            self._replace(CANDIDATES, [])
        return [str(c.get("title")) for c in approved], [str(c.get("title")) for c in rejected]

    def set_level(self, level: int, run: dict[str, Any]) -> None:
        with self.changing():
            path = self.root / LEVEL
            history = []
            if path.exists():
                try:
                    history = list(json.loads(path.read_text(encoding="utf-8")).get("history") or [])
                except (ValueError, AttributeError):
                    history = []
            atomic_write_json(path, {"level": level, "history": [*history, {"level": level, "by": run,
                                                                             "at": utc_now()}]})

    def _replace(self, name: str, entries: list[dict[str, Any]]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.root / name, entries)
