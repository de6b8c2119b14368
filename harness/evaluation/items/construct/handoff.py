"""A handoff between two phases: what the sender made, checked against what the receiver needs, as a PhaseHandoff.

The artifacts checked are the handoff's own (``required_artifacts``, with its ``validation``, and
``optional_artifacts``) and the receiver's ``receives``, merged by path when the construct was read. A problem with
a required one is a blocker; with an optional one, a warning. What a failed handoff does is its ``on_failure``:
``block`` (the receiver and every later phase do not run: the item ends blocked, exit code 80), ``warn`` (the
receiver runs; the blockers are kept as warnings) or ``skip`` (the receiver does not run; the next phase gets its own
handoff from the workspace as it is). The PhaseHandoff is gate 3 of the sender and gate 1 of the receiver: its
checks (:attr:`HandoffResult.checks`) go into both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.base.clock import utc_now
from harness.evaluation.assessment import Check
from harness.evaluation.items.construct.artifacts import (
    Checked,
    Workspace,
    check_artifact,
)
from harness.loading.constructs import Construct, Handoff


@dataclass(frozen=True)
class HandoffResult:
    """A handoff made: its PhaseHandoff JSON, and what the gates of both phases record of it."""

    handoff: Handoff
    record: dict[str, Any]
    checks: tuple[Check, ...]
    problems: tuple[str, ...]  # what failed, required artifacts' first

    @property
    def decision(self) -> str:
        return self.record["decision"]

    @property
    def accepted(self) -> bool:
        return self.record["accepted"]


def attempt_handoff(handoff: Handoff, construct: Construct, workspace: Workspace, written: list[str], *,
                    nodeid: str, cycle_id: str | None) -> HandoffResult:
    """Check what ``handoff.from_phase`` left in the workspace (``written``: the files it made) for
    ``handoff.to_phase``."""
    checked = [check_artifact(spec, workspace, construct.schemas, producer=handoff.from_phase)
               for spec in handoff.artifacts]
    required = [c for c in checked if c.spec.required]
    blockers = [problem for c in required for problem in c.problems]
    warnings = [problem for c in checked if not c.spec.required for problem in c.problems]
    fixes = [fix for c in required for fix in c.fixes]
    decision = ("proceed" if not blockers else "proceed_with_warnings" if handoff.on_failure == "warn"
                else handoff.on_failure)
    if decision == "proceed_with_warnings":
        warnings, blockers = blockers + warnings, []
    accepted = decision in ("proceed", "proceed_with_warnings")
    record = {
        "from_phase": handoff.from_phase, "to_phase": handoff.to_phase, "handoff_at": utc_now(),
        "artifacts": {"required": [c.spec.wire() for c in checked], "provided": _provided(checked, workspace, written),
                      "missing": [c.spec.path for c in required if c.missing],
                      "extra": [path for path in written if not _expected(path, checked, workspace)]},
        "validation": {"schema_valid": all(c.schema_valid is not False for c in checked),
                       "completeness": _completeness(required), "blockers": blockers, "warnings": warnings},
        "accepted": accepted,
        "rejection_reason": None if accepted else _rejection(handoff, blockers),
        "remediation": None if not (blockers or decision == "proceed_with_warnings") else "; ".join(
            dict.fromkeys(fixes)) or None,
        "handoff": handoff.name, "on_failure": handoff.on_failure, "decision": decision, "declared": handoff.declared,
        "nodeid": nodeid,
    }
    if not accepted and record["remediation"] is None:
        record["remediation"] = f"make {handoff.from_phase} produce what {handoff.to_phase} receives"
    if cycle_id is not None:
        record["cycle_id"] = cycle_id
    return HandoffResult(handoff, record, _checks(handoff, checked), tuple(blockers or warnings))


def _checks(handoff: Handoff, checked: list[Checked]) -> tuple[Check, ...]:
    """What the two phases' gates record: a check per artifact (an optional one missing passes)."""
    if not checked:
        return (Check(f"handoff {handoff.name}", True, f"{handoff.to_phase} receives nothing it requires"),)
    return tuple(Check(f"handoff {handoff.name}: {c.spec.path}", c.passed,
                       "; ".join(c.problems) if c.problems else _fine(c), "; ".join(c.fixes) or None)
                 for c in checked)


def _fine(checked: Checked) -> str:
    if checked.missing:
        return "optional, not there"
    said = f"{len(checked.files)} file(s), completeness {checked.completeness:.2f}"
    return said + (f", matches {checked.spec.schema_id}" if checked.schema_valid else "")


def _provided(checked: list[Checked], workspace: Workspace, written: list[str]) -> list[dict[str, Any]]:
    """The Artifact of every file the handoff found, and of every file the sender wrote besides."""
    found: dict[str, dict[str, Any]] = {}
    for c in checked:
        for path in c.files:
            found.setdefault(workspace.relative(path), workspace.artifact(path, **c.metadata.get(path, {})))
    for relative in written:
        path = workspace.root / relative
        if relative not in found and path.is_file():
            found[relative] = workspace.artifact(path, expected=False)
    return list(found.values())


def _expected(relative: str, checked: list[Checked], workspace: Workspace) -> bool:
    return any(workspace.relative(path) == relative for c in checked for path in c.files)


def _completeness(required: list[Checked]) -> float:
    """The required artifacts' mean completeness (a missing one counts 0); 1 when none is required."""
    if not required:
        return 1.0
    return round(sum(c.completeness for c in required) / len(required), 4)


def _rejection(handoff: Handoff, blockers: list[str]) -> str:
    more = f" (and {len(blockers) - 1} more)" if len(blockers) > 1 else ""
    return f"{handoff.to_phase} did not accept what {handoff.from_phase} handed on: {blockers[0]}{more}"
