"""The run's exit status, decided in one place.

pytest's own status stands by default, except that a run the cost cap cut short is not a green run: when the cap
left items not run and nothing else failed, the status is 82 (the exit codes' quota exceeded). With
``--harness-exit-status item`` (ini ``harness_exit_status = item``) a run whose items failed exits with the most
severe failed item's exit code instead of pytest's 1, so a CI job can tell a blocked handoff (80) from a command's
bad data (65) from an output that failed validation (84). A run pytest did not finish (interrupted, an internal or
usage error, nothing collected) keeps pytest's status in both modes. The precedence, most severe first
(harness.base.exit_codes.severity): killed by a signal (128+N), the agent cannot run (126-127), a precondition
(64-78), blocked, timed out, over quota or escalated (80-83), validation failed (84), below the bar (1-4); within a
range the larger code. A failed test that is not an item of ours counts as 1.

The plugin hands the verdict what the session saw when it ends (``pytest_sessionfinish``), on the process that
reports (never an xdist worker), and the summary says why the status is what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base import exit_codes
from harness.base.errors import ExitCode

PYTEST_TESTS_FAILED = 1  # pytest.ExitCode.TESTS_FAILED: the only pytest status item codes may replace


@dataclass
class RunVerdict:
    status: int | None = None  # the exit status the run ended with
    why: str | None = None     # what changed pytest's own status, for the summary

    def finish(self, pytest_status: int, *, not_run_by_cost_cap: int, failed_codes: list[int] | None = None,
               mode: str = "pytest") -> int:
        """The exit status of a run pytest ended with ``pytest_status``; ``failed_codes`` are the exit codes of
        the items that failed (``mode`` "item" makes the most severe one the status)."""
        self.status = pytest_status
        if pytest_status == 0 and not_run_by_cost_cap:
            self.status = int(ExitCode.QUOTA_EXCEEDED)
            self.why = f"exit status {self.status}"
        elif mode == "item" and pytest_status == PYTEST_TESTS_FAILED and failed_codes:
            worst = exit_codes.most_severe(failed_codes)
            if worst and worst != pytest_status:
                self.status = worst
                self.why = (f"exit status {worst} ({exit_codes.name(worst)}): the most severe failed item's "
                            f"(--harness-exit-status item)")
        return self.status
