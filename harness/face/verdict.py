"""The run's exit status, decided in one place.

pytest's own status stands, except that a run the cost cap cut short is not a green run: when the cap left
items not run and nothing else failed, the status is 82 (the exit codes' quota exceeded). The plugin hands the
verdict what the session saw when it ends (``pytest_sessionfinish``), on the process that reports (never an
xdist worker), and the summary says why the status is what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.errors import ExitCode


@dataclass
class RunVerdict:
    status: int | None = None  # the exit status the run ended with
    why: str | None = None     # what changed pytest's own status, for the summary

    def finish(self, pytest_status: int, *, not_run_by_cost_cap: int) -> int:
        """The exit status of a run pytest ended with ``pytest_status``."""
        self.status = pytest_status
        if pytest_status == 0 and not_run_by_cost_cap:
            self.status = int(ExitCode.QUOTA_EXCEEDED)
            self.why = f"exit status {self.status}"
        return self.status
