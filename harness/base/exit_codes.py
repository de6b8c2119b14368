"""What an exit code means: its name, the execution status it stands for, the orchestrator's triage of it, and how
severe it is beside others (the exit codes' list, docs/contracts.md "Exit codes").

:class:`~harness.base.errors.ExitCode` names the codes; this module reads them. A command's own code is kept as it
is (65 stays 65); a process ended by signal N is ``128 + N`` (:func:`from_process`). A construct may rename a code
(``assessment.exit_codes: {80: waiting_for_human}``) or say what its phase's codes mean
(``contracts.<phase>.exit_codes: {2: blocked}``): :func:`named` turns such a name into the standard code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from harness.base.errors import ExitCode

SIGNAL_BASE = 128

# The names the exit codes' list gives (``ExitCode``'s own, in lower case).
NAMES: dict[int, str] = {int(code): code.name.lower() for code in ExitCode}
# Words a construct's contracts use for the same meanings.
SYNONYMS: dict[str, int] = {"failure": 1, "failed": 1, "escalation_required": 83, "needs_human": 83,
                            "waiting_for_human": 80, "invalid_output": 84, "timed_out": 81}

Status = Literal["success", "failure", "partial", "blocked", "timeout"]
Triage = Literal["success", "retry", "fix_inputs", "escalate", "review_output", "alert_maintainer", "investigate"]


def name(code: int, overrides: Mapping[int, str] | None = None) -> str:
    """The meaning of ``code`` (a construct's override first): ``signal_15`` for 143, ``exit_7`` for one unlisted."""
    if overrides and code in overrides:
        return overrides[code]
    if code in NAMES:
        return NAMES[code]
    if code > SIGNAL_BASE:
        return f"signal_{code - SIGNAL_BASE}"
    return f"exit_{code}"


def named(meaning: str) -> int | None:
    """The standard code a meaning names (``blocked`` -> 80), None for a word the list does not have."""
    word = meaning.strip().lower().replace("-", "_").replace(" ", "_")
    for code, known in NAMES.items():
        if known == word:
            return code
    return SYNONYMS.get(word)


def from_process(returncode: int) -> int:
    """A process's status as the exit codes' list keeps it: its own code, or ``128 + N`` when signal N ended it
    (Python's ``returncode`` is ``-N`` then)."""
    return SIGNAL_BASE - returncode if returncode < 0 else returncode


def status(code: int) -> Status:
    """The execution result's status for an execution that ended with ``code``."""
    if code == 0:
        return "success"
    if code in (ExitCode.INCOMPLETE, ExitCode.PARTIAL):
        return "partial"
    if code == ExitCode.BLOCKED:
        return "blocked"
    if code == ExitCode.TIMEOUT:
        return "timeout"
    return "failure"


def triage(code: int) -> Triage:
    """What an orchestrator does about ``code`` (the list's section on triage): retry a soft failure (1-3) or a
    temporary one (75); fix the inputs of a precondition failure (64-78); escalate or wait when blocked (80-83);
    review an output that failed validation (84); alert a maintainer when the agent cannot run (126-127)."""
    if code == 0:
        return "success"
    if 1 <= code <= 3 or code == ExitCode.TEMP_FAIL:
        return "retry"
    if 64 <= code <= 78:
        return "fix_inputs"
    if 80 <= code <= 83:
        return "escalate"
    if code == ExitCode.VALIDATION_FAILED:
        return "review_output"
    if code in (126, 127):
        return "alert_maintainer"
    return "investigate"


# Most severe first: a run whose agent was killed or could not start says so before one whose inputs were wrong,
# which says so before one blocked or escalated, before an output that failed validation, before a plain failure.
_SEVERITY_RANGES: tuple[tuple[int, int], ...] = ((129, 255), (126, 127), (64, 78), (80, 83), (84, 84), (1, 4))


def severity(code: int) -> tuple[int, int]:
    """A sort key: the larger, the more severe. Within a range the larger code wins; 0 is the least severe."""
    if code == 0:
        return (0, 0)
    for rank, (low, high) in enumerate(_SEVERITY_RANGES):
        if low <= code <= high:
            return (len(_SEVERITY_RANGES) + 1 - rank, code)
    return (1, code)  # a code the list does not have: above success, below every listed failure


def most_severe(codes: list[int]) -> int:
    """The code a run of items with ``codes`` exits with when the item codes decide (0 for none)."""
    return max(codes, key=severity, default=0)
