"""The session's stop flag: -x, --maxfail, Ctrl-C and the cost cap set it; the engine checks it between steps."""

from __future__ import annotations

import threading


class StopRequested(Exception):
    """Raised inside a case when the session asked to stop before the case's next step."""


class StopFlag:
    """Why the session stops starting new work; checked by the engine between steps."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        self.cause: str | None = None  # "cost_cap" when the cap stopped the session, for the exit status

    def set(self, reason: str, *, cause: str = "stop") -> None:
        if not self._event.is_set():
            self.reason, self.cause = reason, cause
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise StopRequested(self.reason or "the session is stopping")
