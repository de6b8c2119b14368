"""What the records keep of one attempt, as the events carry it: where its files go (:class:`RunLocation`) and
its ``attempt_details`` row (:class:`AttemptDetails`). ``harness.records`` writes and reads them; the steps of
every item and its events name them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunLocation:
    """Where one case's attempts live: ``runs/{cycle}/{agent}[/{variant}][/{case}]``."""

    cycle_id: str
    agent_name: str
    directory: Path
    shown_directory: str | None = None  # how records name the folder (relative to the project root)

    def attempt_artifact(self, attempt: int) -> Path:
        return self.directory / f"attempt-{attempt}.md"

    def shown_artifact(self, attempt: int) -> str:
        """How the records name the attempt's artifact."""
        if self.shown_directory is None:
            return str(self.attempt_artifact(attempt))
        return os.path.join(self.shown_directory, self.attempt_artifact(attempt).name)

    def attempt_evaluation(self, attempt: int) -> Path:
        return self.directory / f"attempt-{attempt}.eval.json"

    def attempt_review(self, attempt: int) -> Path:
        return self.directory / f"attempt-{attempt}.review.json"

    def shown_cycle_file(self, name: str) -> str:
        """How the records name a file of the cycle's own folder (``runs/{cycle}/{name}``)."""
        shown = Path(self.shown_directory or self.directory)
        for folder in (shown, *shown.parents):
            if folder.name == self.cycle_id:
                return str(folder / name)
        return name

    @property
    def final(self) -> Path:
        return self.directory / "final.md"


@dataclass(frozen=True)
class AttemptDetails:
    """The extension row of one attempt (``attempt_details``)."""

    nodeid: str
    case_id: str
    rubric_name: str
    threshold: float
    outcome: str = "running"
    exit_code: int = 0
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    dimensions: dict[str, Any] = field(default_factory=dict)
    samples: list[float] | None = None
    cached_answers: int = 0  # model answers replayed from the response cache (no call, no tokens, $0)
    # per model ("provider/model"): calls, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens,
    # cost_usd (None: the model has no price); None: not recorded
    model_usage: dict[str, dict[str, Any]] | None = None
    cost_known: bool = True  # False: some model of the attempt had no price; cost_usd counts the priced ones
    # the commands the attempt ran (producer, reviser, evaluator): confined or not, exit code, bounds hit,
    # processes left running and stopped; None: none ran
    commands: list[dict[str, Any]] | None = None
    variant: str | None = None  # the agent's variant the attempt ran (``variants:``); None: the agent has none
