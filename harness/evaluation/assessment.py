"""The assessment of an execution: its gates 0-4 and its execution result (docs/contracts.md, "Assessment").

An :class:`Execution` is one execution of an item (or of a construct's phase). Starting it emits
``SkillInvoked``; each gate it checks is a GateResult, emitted as ``GateChecked``; finishing it builds the
execution result and emits ``ExecutionCompleted``, which the records append to ``execution-results.jsonl`` and the
trace keeps. The shared steps (:mod:`harness.evaluation.steps`) drive one for every item: a kind of item gets
its gates and its execution result without writing them.

The gates are 0 selection (was the right agent or skill chosen), 1 precondition (its inputs present and valid),
2 execution (it ran without error, in time), 3 output (the output's schema, sections, completeness) and
4 goal (the rubric's verdict). A gate not checked is left out of the list, never passed by default.
"""

from __future__ import annotations

import mimetypes
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base import exit_codes
from harness.base.attempts import RunLocation
from harness.base.capture import Capture, sha256_hex
from harness.base.clock import utc_now
from harness.base.errors import ExitCode, HarnessError, ValidationFailed
from harness.base.events import Events, ExecutionCompleted, GateChecked, SkillInvoked
from harness.evaluation.evaluate import Evaluation

GATE_NAMES = {0: "selection", 1: "precondition", 2: "execution", 3: "output", 4: "goal"}


@dataclass(frozen=True)
class Check:
    """One check a gate performed; a failed one may say what would fix it."""

    name: str
    passed: bool
    message: str = ""
    remediation: str | None = None


def gate_result(gate: int, checks: Sequence[Check]) -> dict[str, Any]:
    """The GateResult of ``gate`` after ``checks``: passed when every check passed (and there was one)."""
    failures = [{"name": c.name, "message": c.message, "remediation": c.remediation} for c in checks if not c.passed]
    return {"gate": gate, "name": GATE_NAMES[gate], "passed": bool(checks) and not failures, "checked_at": utc_now(),
            "details": {"checks_performed": [{"name": c.name, "passed": c.passed, "message": c.message}
                                             for c in checks],
                        "failures": failures or ([] if checks else [{"name": "checks", "message": "no check ran",
                                                                     "remediation": None}])}}


def failed(gate: dict[str, Any]) -> list[str]:
    """A gate's failures, one line each."""
    return [f"{f['name']}: {f['message']}" if f["message"] else f["name"] for f in gate["details"]["failures"]]


class Execution:
    """One execution: its start (``SkillInvoked``), its gates (``GateChecked``) and its result
    (``ExecutionCompleted``)."""

    def __init__(self, *, nodeid: str, skill_id: str, version: str | None, operator_type: str,
                 inputs: Mapping[str, Any], events: Events, capture: Capture = Capture(),
                 location: RunLocation | None = None, phase: str | None = None, goal_statement: str | None = None,
                 defaults_used: Iterable[str] = (), missing: Iterable[str] = ()):
        self.nodeid, self.skill_id, self.version, self.phase = nodeid, skill_id, version or "", phase
        self.events, self.capture, self.location = events, capture, location
        self.goal_statement = goal_statement
        self.execution_id = uuid.uuid4().hex
        self.started_at = utc_now()
        self._started = time.monotonic()
        self.inputs = {"provided": capture.inputs(inputs), "defaults_used": sorted(defaults_used),
                       "missing": sorted(missing)}
        self.gates: dict[int, dict[str, Any]] = {}  # the latest result of each gate checked
        events.emit(SkillInvoked(nodeid, skill_id, version, operator_type, self.inputs["provided"],
                                 context_size=_size(inputs), phase=phase))

    def gate(self, number: int, checks: Sequence[Check], *, attempt: int = 1,
             remediation_attempted: bool = False) -> dict[str, Any]:
        """Check gate ``number`` with ``checks``; its GateResult is emitted and kept (a later check of the same
        gate, in a later attempt, replaces it)."""
        result = gate_result(number, checks)
        self.gates[number] = result
        self.events.emit(GateChecked(self.nodeid, result, attempt=attempt, phase=self.phase,
                                     remediation_attempted=remediation_attempted))
        return result

    def passed(self, number: int) -> bool | None:
        """Whether gate ``number`` passed; None when it was not checked."""
        gate = self.gates.get(number)
        return None if gate is None else gate["passed"]

    def finish(self, exit_code: int, *, primary: Any = None, artifacts: Sequence[dict[str, Any]] = (),
               side_effects: Sequence[dict[str, Any]] = (), errors: Sequence[dict[str, Any]] = (),
               warnings: Sequence[dict[str, Any]] = (), retries: Sequence[dict[str, Any]] = (),
               confidence: float | None = None, evidence: Sequence[dict[str, Any]] = (),
               human_review_requested: bool = False, score: float | None = None, attempts: int | None = None,
               exit_names: Mapping[int, str] | None = None, cycle_id: str | None = None) -> dict[str, Any]:
        """The execution result, emitted (the records write it, the trace keeps its summary)."""
        result: dict[str, Any] = {
            "execution_id": self.execution_id, "skill_id": self.skill_id, "skill_version": self.version,
            "status": exit_codes.status(exit_code), "exit_code": exit_code,
            "started_at": self.started_at, "completed_at": utc_now(),
            "duration_ms": round((time.monotonic() - self._started) * 1000, 3),
            "inputs": self.inputs,
            "outputs": {"primary": self.capture.output(primary), "artifacts": list(artifacts),
                        "side_effects": list(side_effects)},
            "diagnostics": {"gates_passed": [self.gates[n] for n in sorted(self.gates)], "errors": list(errors),
                            "warnings": list(warnings), "retries": list(retries)},
            "assessment": {"confidence": confidence, "goal_statement": self.goal_statement,
                           "evidence": list(evidence), "human_review_requested": human_review_requested,
                           "score": score},
            "exit_meaning": exit_codes.name(exit_code, exit_names), "triage": exit_codes.triage(exit_code),
            "nodeid": self.nodeid, "phase": self.phase,
        }
        if cycle_id is not None:
            result["cycle_id"] = cycle_id
        if attempts is not None:
            result["attempts"] = attempts
        self.events.emit(ExecutionCompleted(self.nodeid, result, location=self.location, phase=self.phase))
        return result


def assess_attempt(execution: Execution | None, *, number: int, exit_code: int, error: HarnessError | None,
                   artifact: str | None, evaluation: Evaluation | None, threshold: float,
                   preconditions: Callable[[], list[Check]], started: float, selection: str | None = None) -> None:
    """Gates of an attempt, as far as it got: an input rejected fails gate 1, an error before an output gate 2,
    an output that failed validation gate 3; the rubric's verdict is gate 4. ``preconditions`` are the item's
    gate 1 when its kind did not check it at the start; ``selection`` the dimension that says whether the right
    agent or skill was chosen (gate 0), when the item names one."""
    if execution is None:
        return
    made = artifact is not None
    chosen = evaluation.dimensions.get(selection) if evaluation is not None and selection else None
    if chosen is not None and chosen.score is not None:
        bar = next((d.min_score for d in evaluation.rubric.dimensions if d.id == selection), None) or 1.0
        right = chosen.score >= bar - 1e-9
        execution.gate(0, [Check(f"chosen by {chosen.source}", right, chosen.reason,
                                 None if right else "route this request to the agent or skill the case names")],
                       attempt=number)
    if error is not None and not made and exit_codes.triage(exit_code) == "fix_inputs":
        execution.gate(1, [Check("inputs", False, str(error), "fix the inputs or the settings it names")],
                       attempt=number)
        return
    if 1 not in execution.gates:
        execution.gate(1, preconditions(), attempt=number)
    if error is not None and not made and not isinstance(error, ValidationFailed):
        if exit_code == ExitCode.TIMEOUT:
            checks = [Check("ran without error", True, "no error before the time limit"),
                      Check("in time", False, str(error), "raise the time limit or make it faster")]
        else:
            checks = [Check("ran without error", False, str(error), _remedy(exit_code))]
        execution.gate(2, checks, attempt=number)
        return
    took = f"{int((time.monotonic() - started) * 1000)} ms"
    execution.gate(2, [Check("ran without error", True, f"attempt {number} made its output"),
                       Check("in time", True, took)], attempt=number)
    if isinstance(error, ValidationFailed):
        execution.gate(3, [Check("output schema", False, problem, "make the output match its schema")
                           for problem in (error.errors[:20] or [str(error)])], attempt=number)
        return
    execution.gate(3, output_checks(artifact, evaluation, exclude=selection), attempt=number)
    if evaluation is None or evaluation.passed is None:
        return  # nobody could score it: the goal was not assessed (a warning of the execution result)
    overall = evaluation.overall
    shown = f"score {overall:.3f} against the threshold {threshold:g}" if overall is not None else ""
    checks = [Check("verdict", evaluation.passed, shown)]
    checks += [Check("min_score", False, line, "raise this dimension above its min_score")
               for line in evaluation.failed_gates]
    execution.gate(4, checks, attempt=number)


def output_checks(artifact: str | None, evaluation: Evaluation | None, exclude: str | None = None) -> list[Check]:
    """Gate 3 of an output: each deterministic check of the rubric conforms fully (or to its min_score); with no
    check, that there is an output."""
    checks = []
    if evaluation is not None:
        minimums = {dim.id: dim.min_score for dim in evaluation.rubric.dimensions}
        for dim_id, verdict in evaluation.dimensions.items():
            if verdict.source != "check" or verdict.score is None or dim_id == exclude:
                continue
            bar = minimums.get(dim_id)
            conforms = verdict.score >= (1.0 if bar is None else bar) - 1e-9
            checks.append(Check(dim_id, conforms, verdict.reason, None if conforms else "; ".join(verdict.fixes) or None))
    if not checks:
        text = (artifact or "").strip()
        checks.append(Check("output produced", bool(text), f"{len(text)} characters",
                            None if text else "the producer must write its output"))
    return checks


def _remedy(exit_code: int) -> str | None:
    """What to do about an execution that failed with ``exit_code`` (its triage, in words)."""
    return {"retry": "a soft failure: running it again may pass (max_retries retries it)",
            "escalate": "it needs a person, or what it waits for",
            "alert_maintainer": "the agent cannot run: check its command or module",
            "investigate": "see the error"}.get(exit_codes.triage(exit_code))


def artifact_of(path: Path, root: Path | None = None, metadata: Mapping[str, Any] | None = None, *,
                written: bytes | None = None) -> dict[str, Any]:
    """The Artifact of a file: its path (relative to ``root`` when under it), MIME type, size and SHA-256; of the
    bytes ``written`` to it when the caller has them (the file is not read again)."""
    data = path.read_bytes() if written is None else written
    shown = path
    if root is not None:
        try:
            shown = path.relative_to(root)
        except ValueError:
            pass
    return {"type": "file", "path": str(shown), "content_type": content_type(path), "size_bytes": len(data),
            "checksum": sha256_hex(data), "metadata": dict(metadata or {})}


def content_type(path: Path) -> str:
    if path.suffix.lower() in (".md", ".markdown"):
        return "text/markdown"
    if path.suffix.lower() in (".yaml", ".yml"):
        return "application/yaml"
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")


def sections(markdown: str) -> dict[str, str]:
    """A Markdown text's sections: each heading (lower-cased, spaces as ``_``) and the text under it."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = found.setdefault(section_key(heading.group(2)), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def section_key(title: str) -> str:
    """How a section is named in ``required_sections``: ``Data model`` and ``data_model`` are the same."""
    return re.sub(r"[\s\-]+", "_", title.strip().lower())


def completeness(content: Any, *, required_sections: Sequence[str] = (),
                 schema: Mapping[str, Any] | None = None) -> float:
    """How complete ``content`` is, 0-1: the share of required sections present with text under them (Markdown),
    or of the schema's required fields present and not empty (JSON, nested objects counted field by field).
    Content with nothing required is complete when it is not empty."""
    if required_sections:
        found = sections(content) if isinstance(content, str) else {}
        filled = sum(1 for name in required_sections if found.get(section_key(name)))
        return round(filled / len(required_sections), 4)
    if schema is not None and isinstance(content, Mapping):
        filled, total = _required_filled(content, schema)
        if total:
            return round(filled / total, 4)
    return 1.0 if not _empty(content) else 0.0


def _required_filled(value: Mapping[str, Any], schema: Mapping[str, Any]) -> tuple[int, int]:
    filled = total = 0
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        inner = properties.get(name) or {}
        child = value.get(name)
        if isinstance(child, Mapping) and inner.get("required"):
            more, count = _required_filled(child, inner)
            filled, total = filled + more, total + count
        else:
            total += 1
            filled += 0 if _empty(child) else 1
    return filled, total


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict, tuple)) and not (value.strip() if isinstance(
        value, str) else value))


def _size(inputs: Mapping[str, Any]) -> int:
    return sum(len(value) if isinstance(value, str) else len(str(value)) for value in inputs.values())
