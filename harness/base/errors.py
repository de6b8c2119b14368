"""Error types and exit codes (seed 004's sysexits-style contract)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.base.usage import Spend


def did_you_mean(key: Any, known: Iterable[str]) -> str:
    """`` (did you mean 'producer'?)`` for a near miss of a known name, else nothing."""
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class ExitCode(IntEnum):
    """Exit codes from seed 004, section 3 (BSD sysexits plus skill-specific codes)."""

    SUCCESS = 0
    GENERAL_FAILURE = 1
    MISUSE = 2
    INCOMPLETE = 3
    PARTIAL = 4
    USAGE_ERROR = 64
    DATA_ERROR = 65
    NO_INPUT = 66
    NO_USER = 67
    NO_HOST = 68
    UNAVAILABLE = 69
    INTERNAL_ERROR = 70
    OS_ERROR = 71
    OS_FILE = 72
    CANT_CREATE = 73
    IO_ERROR = 74
    TEMP_FAIL = 75
    PROTOCOL = 76
    NO_PERMISSION = 77
    CONFIG_ERROR = 78
    BLOCKED = 80
    TIMEOUT = 81
    QUOTA_EXCEEDED = 82
    ESCALATION = 83
    VALIDATION_FAILED = 84
    NOT_EXECUTABLE = 126
    NOT_FOUND = 127


class HarnessError(Exception):
    """Base class: an error the harness explains in one line, never with a traceback."""

    exit_code: int = ExitCode.GENERAL_FAILURE  # an ExitCode, or a command's own code (65, 143, ...)


class HarnessConfigError(HarnessError):
    """A user file is wrong. The message names the file, the field and the fix."""

    exit_code = ExitCode.CONFIG_ERROR

    def __init__(self, path: Path | str, field: str | None, problem: str, fix: str | None = None):
        self.path = str(path)
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(self.message())

    def message(self, root: Path | str | None = None) -> str:
        """The one-line error; with ``root``, the file is named relative to it (as users wrote it)."""
        path = self.path
        if root is not None:
            prefix = str(root).rstrip("/") + "/"
            if path.startswith(prefix):
                path = path[len(prefix):]
        where = f"{path}: {self.field}" if self.field else path
        text = f"{where}: {self.problem}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return text


class HarnessConfigWarning(UserWarning):
    """A user file works but departs from a contract's SHOULD; one line, like ``HarnessConfigError``."""

    def __init__(self, path: Path | str, field: str | None, problem: str, fix: str | None = None):
        self.error = HarnessConfigError(path, field, problem, fix)
        super().__init__(self.error.message())


class ModelCallError(HarnessError):
    """A model call failed after its retries (rate limit, server error, timeout, connection).

    ``spend`` carries the earlier calls of the same operation that did succeed (e.g. the first answer of a
    JSON generation whose retry call failed), so they can still be accounted for.
    """

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.UNAVAILABLE, spend: Spend | None = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.spend = spend


class ModelUnavailable(HarnessError):
    """No credentials: anything that needs a model is indeterminate, never passed or failed."""

    exit_code = ExitCode.UNAVAILABLE


class ValidationFailed(HarnessError):
    """A model's structured answer failed schema validation after its one retry (seed 003)."""

    exit_code = ExitCode.VALIDATION_FAILED

    def __init__(self, message: str, errors: list[str], raw_response: str | None = None, *,
                 spend: Spend | None = None):
        super().__init__(message)
        self.errors = errors
        self.raw_response = raw_response
        # the calls that produced the invalid answers were billed: the records and the cost cap count them
        self.spend = spend


class AgentRunError(HarnessError):
    """A producer, reviser or evaluator (callable or command) failed to run."""

    exit_code = ExitCode.GENERAL_FAILURE

    def __init__(self, message: str, exit_code: int = ExitCode.GENERAL_FAILURE):
        super().__init__(message)
        self.exit_code = exit_code
