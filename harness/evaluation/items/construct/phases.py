"""One phase of a construct item: an execution with gates 1-4 and its execution result, each attempt recorded from
the shared steps.

1. precondition: the handoff it receives (its checks, made when the phase before it ended), its named precondition
   checks, its contract's inputs (and, for the first phase, what it ``receives``); a check that fails ends the phase
   before it runs: 66 (no_input) when something is missing, 65 (data_error) when something is wrong;
2. execution: its producer (a runner made as agents.yaml's are) or its skill, given the phase's request, within
   ``timeout_ms`` (81 past it); the phase's own exit code is read through ``contracts.<phase>.exit_codes`` (``2:
   blocked`` makes 2 the list's 80), and an attempt whose code calls for a retry (1-3, 75) is run again up to
   ``max_retries`` times;
3. output: what it ``produces``, its ``output`` gate and its contract's outputs, then the handoff to the next phase
   (84 when they fail, or when the handoff blocks);
4. goal: the phase's rubric (its checks, then its evaluator), when it names one; a skill's own verdict.

The runner's answer (a model's text, a command's stdout, a skill's output) is written to the phase's first
``produces`` path, unless the phase wrote that file itself.
"""

from __future__ import annotations

import contextvars
import dataclasses
import glob
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.base import exit_codes
from harness.base.errors import AgentRunError, ExitCode, HarnessError, ValidationFailed
from harness.base.events import ExecutionProgress, HandoffAttempted
from harness.base.requests import AgentRequest, Subject
from harness.base.usage import Spend
from harness.evaluation.assessment import Check, Execution
from harness.evaluation.items.construct.artifacts import (
    RECEIVED_LIMIT,
    Workspace,
    check_artifact,
    text_of,
)
from harness.evaluation.items.construct.handoff import HandoffResult, attempt_handoff
from harness.evaluation.items.construct.preconditions import precondition_checks
from harness.evaluation.items.skill import InputRejected, skill_attempt
from harness.evaluation.runners import RunnerOutput
from harness.evaluation.steps import Attempt, ItemRun
from harness.loading.construct_parts import ArtifactSpec

if TYPE_CHECKING:  # the kind's package imports this module
    from harness.evaluation.items.construct import ConstructRun


@dataclass
class PhaseOutcome:
    """How a phase ended, as the item's result and its failure report say it."""

    name: str
    status: str  # passed, failed, blocked, skipped, not_run
    exit_code: int | None = None
    reason: str = ""
    attempts: int = 0
    written: list[str] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    outgoing: HandoffResult | None = None  # the handoff to the next phase, when it was made


class PhaseTimedOut(AgentRunError):
    """A phase ran past ``timeout_ms``: a Python phase cannot be stopped, so its thread is left to finish unheard."""


class PhaseExited(AgentRunError):
    """A Python phase called ``sys.exit(n)``: n is its own exit code."""


class PhaseRun:
    """One phase of one construct item."""

    def __init__(self, item: ConstructRun, index: int, incoming: HandoffResult | None):
        self.item, self.index, self.incoming = item, index, incoming
        self.phase = item.construct.phases[index]
        self.work = item.work.phases[self.phase.name]
        self.workspace: Workspace = item.workspace
        self.next = item.construct.handoffs[index] if index < len(item.construct.handoffs) else None
        self.execution: Execution | None = None
        self.answer: str | None = None
        self.written: list[str] = []
        self.own: list[Check] = []
        self.outgoing: HandoffResult | None = None
        self.failed_gate: int | None = None
        self.retries: list[dict[str, Any]] = []

    # -- the phase --------------------------------------------------------------------------------------

    def run(self) -> PhaseOutcome:
        item, phase = self.item, self.phase
        received = self._start()
        failed, missing = self._gate1()
        if failed:
            code = ExitCode.NO_INPUT if missing else ExitCode.DATA_ERROR
            return self._end(int(code), "precondition", f"{phase.name}'s preconditions failed: "
                             + "; ".join(f"{c.name}: {c.message}" for c in failed), attempts=0)
        run = ItemRun(item.nodeid, item.construct.name, f"{item.case}.{phase.name}", self.work.rubric,
                      self.work.threshold, item.phase_location(phase.name), item.events, item.context.stop)
        before = self.workspace.snapshot()  # what the phase wrote is what changed over all its attempts
        for number in range(1, phase.max_retries + 2):
            self.failed_gate = None
            with run.attempt() as attempt:
                self._attempt(attempt, received, before)
            last = run.last
            retry = (self.failed_gate == 2 and exit_codes.triage(last.exit_code) == "retry"
                     and number <= phase.max_retries)
            self._gate2(last.exit_code, last.reason, number, retry)
            if not retry:
                break
            self.retries.append({"attempt": number, "exit_code": last.exit_code, "reason": last.reason or "",
                                 "kind": "retry", "duration_ms": last.duration_ms})
        last = run.last
        spend = Spend()
        for result in run.attempts:
            spend.merge(result.spend)
        output = [*self.own, *(self.outgoing.checks if self.outgoing else ())]
        if self.failed_gate != 2 and output:  # a last phase that declares no output has no gate 3 to check
            self.execution.gate(3, output, attempt=last.attempt)
        if last.evaluation is not None and last.evaluation.passed is not None:
            self._gate4(last.evaluation, last.attempt)
        status = "passed" if last.exit_code == 0 else "failed"
        return self._end(last.exit_code, status, last.reason or "", attempts=len(run.attempts), spend=spend,
                         evaluation=last.evaluation)

    def blocked(self) -> PhaseOutcome:
        """The receiver of a handoff that blocked: its gate 1 failed, so it does not run (80, blocked)."""
        assert self.incoming is not None
        self._start()
        assert self.execution is not None
        self.execution.gate(1, list(self.incoming.checks))
        outcome = self._end(int(ExitCode.BLOCKED), "handoff", self.incoming.record["rejection_reason"], attempts=0)
        return dataclasses.replace(outcome, status="blocked")

    def _start(self) -> dict[str, str]:
        """The phase's execution begins, on the artifacts it receives (their text, returned)."""
        item, phase = self.item, self.phase
        item.events.emit(ExecutionProgress(item.nodeid, phase_entered=phase.name))
        received = self.workspace.received(self._received_specs())
        self.execution = Execution(
            nodeid=item.nodeid, skill_id=self._skill_id(), version=self._version(), operator_type=phase.operator_type,
            inputs={**item.construct.vars, **received}, events=item.events, capture=item.construct.kept,
            location=item.location, phase=phase.name,
            goal_statement=phase.description or f"{item.construct.name}: phase {phase.name}")
        return received

    def _attempt(self, attempt: Attempt, received: dict[str, str], before: dict[str, tuple[int, int]]) -> None:
        """One attempt, inside the steps' attempt: a ``HarnessError`` raised here ends it as the error it is."""
        if self.phase.skill is not None:
            output = self._skill(attempt)
        else:
            output = self._producer(attempt, received)
        self.written = self.workspace.written(before)
        self.answer = self._write_answer(output)
        if self.phase.skill is None:
            attempt.keep(self.answer or "", role="producer")
        self.failed_gate = 3
        self.own = self._own_checks()
        failed = [c for c in self.own if not c.passed]
        if failed:
            problems = [c.message for c in failed]
            raise ValidationFailed(f"{self.phase.name}'s output failed its gate: {'; '.join(problems[:3])}", problems)
        if self.work.scored:
            evaluation = attempt.evaluation or attempt.evaluate(
                judge=self.work.judge, about=Subject(self.item.construct.name, self.item.case, attempt.number,
                                                     dict(self.item.construct.vars)),
                context=self.item.check_context())
            if not evaluation.passed:
                self.failed_gate = 4
                attempt.decide()
                return
        if self.next is not None:
            self.outgoing = attempt_handoff(self.next, self.item.construct, self.workspace, self.written,
                                            nodeid=self.item.nodeid, cycle_id=self.item.location.cycle_id)
            self.item.events.emit(HandoffAttempted(self.item.nodeid, self.outgoing.record, location=self.item.location))
            if self.outgoing.decision == "block":
                reason = self.outgoing.record["rejection_reason"]
                raise ValidationFailed(f"handoff {self.next.name} blocked: {reason}", list(self.outgoing.problems))
        self.failed_gate = None
        if self.work.scored:
            attempt.decide()
        else:
            attempt.finish("passed", "passed")

    # -- running ----------------------------------------------------------------------------------------

    def _producer(self, attempt: Attempt, received: dict[str, str]) -> str:
        """The phase's producer on its request; a failure raised with the phase's exit code, as its contract
        reads it."""
        item, phase = self.item, self.phase
        self.failed_gate = 2
        request = AgentRequest(role="producer", agent=self.work.agent_name, case=item.case, attempt=attempt.number,
                               inputs={"construct": item.construct.name, "phase": phase.name,
                                       "workspace": str(self.workspace.root), "vars": dict(item.construct.vars),
                                       "received": received, "produces": [s.path for s in phase.produces]})
        runner = self.work.runner
        assert runner is not None
        try:
            if phase.timeout_ms is None or self.work.kills_itself:
                made = _exit_of(lambda: runner.run(request))
            else:
                made = _in_time(lambda: _exit_of(lambda: runner.run(request)), phase.timeout_ms, phase.name)
        except HarnessError as exc:
            raise self._as_phase_error(exc) from None
        attempt.outputs.append(made)
        attempt.flags = made.flags
        return made.text

    def _skill(self, attempt: Attempt) -> str:
        """The phase's skill, through the skill kind's own steps, on the phase's ``inputs``."""
        self.failed_gate = 2
        work = self.work.skill_work(self.workspace, self.item.construct)
        try:
            if self.phase.timeout_ms is None:
                output = skill_attempt(work, attempt, self.item.context)
            else:
                output = _in_time(lambda: skill_attempt(work, attempt, self.item.context), self.phase.timeout_ms,
                                  self.phase.name)
        except InputRejected:
            raise  # the phase's inputs: the skill never ran (65)
        except ValidationFailed as exc:
            self.failed_gate = 3  # the skill ran; its output failed its own schema
            self.own = [Check(f"skill {self._skill_id()} output", False, str(exc), "make the output match the "
                              "skill's output_schema")]
            raise
        except HarnessError as exc:
            raise self._as_phase_error(exc) from None
        return output if isinstance(output, str) else json.dumps(output, indent=2, ensure_ascii=False)

    def _as_phase_error(self, exc: HarnessError) -> HarnessError:
        """A runner's failure with the phase's exit code: the phase's own code (a command's status, a Python phase's
        ``sys.exit`` or uncaught exception) mapped by ``contracts.<phase>.exit_codes`` to the list's code it stands
        for; a code the harness gave (a timeout, a refused sandbox, a model out of reach) as it is."""
        raw = int(exc.exit_code)
        contract = self.phase.contract
        if raw not in contract.exit_codes or not self._own_code(exc):
            return exc
        code = contract.standard[raw]
        error = AgentRunError(f"{exc} (contracts.{self.phase.name}.exit_codes: {raw} means {contract.exit_codes[raw]}, "
                              f"exit code {code})", code)
        error.commands = getattr(exc, "commands", ())  # type: ignore[attr-defined]
        error.spend = getattr(exc, "spend", None)  # type: ignore[attr-defined]
        return error

    def _own_code(self, exc: HarnessError) -> bool:
        if isinstance(exc, PhaseTimedOut):
            return False
        commands = getattr(exc, "commands", ())
        if self.phase.agent is not None and self.phase.agent.producer.kind == "command":
            return bool(commands) and commands[-1].exit_code is not None  # it ran, and was not stopped
        return type(exc) in (AgentRunError, PhaseExited)

    def _write_answer(self, text: str) -> str | None:
        """The runner's answer, written to the first ``produces`` path unless the phase wrote it; the primary
        artifact's text."""
        primary = self.phase.produces[0] if self.phase.produces else None
        if primary is None or glob.has_magic(primary.path):
            return text or None
        target = self.workspace.root / primary.path
        if primary.path not in self.written and text.strip():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            self.written = sorted({*self.written, primary.path})
        return text_of(target, RECEIVED_LIMIT) if target.is_file() else (text or None)

    # -- gates ------------------------------------------------------------------------------------------

    def _gate1(self) -> tuple[list[Check], bool]:
        """Gate 1, checked: the handoff the phase receives (which its ``on_failure`` already decided on) and its own
        preconditions. The own ones that failed are returned, and whether one found something missing."""
        handoff = list(self.incoming.checks) if self.incoming is not None else []
        own, missing = precondition_checks(self.phase, self.item.construct, self.workspace, first=self.index == 0)
        if handoff or own:
            assert self.execution is not None
            self.execution.gate(1, [*handoff, *own])
        return [c for c in own if not c.passed], missing

    def _gate2(self, code: int, reason: str | None, number: int, retry: bool) -> None:
        assert self.execution is not None
        ran = self.failed_gate != 2
        checks = [Check("ran without error", ran or code == ExitCode.TIMEOUT,
                        f"attempt {number} made its output" if ran else (reason or f"exit code {code}"),
                        None if ran else "fix the phase's producer (its error is above)")]
        if self.phase.timeout_ms is not None:
            late = not ran and code == ExitCode.TIMEOUT
            checks.append(Check("in time", not late, reason if late else f"within {self.phase.timeout_ms} ms",
                                "raise timeout_ms or make the phase faster" if late else None))
        self.execution.gate(2, checks, attempt=number, remediation_attempted=retry)

    def _gate4(self, evaluation: Any, number: int) -> None:
        assert self.execution is not None
        overall = evaluation.overall
        shown = f"score {overall:.3f} against the threshold {self.work.threshold:g}" if overall is not None else ""
        self.execution.gate(4, [Check("verdict", bool(evaluation.passed), shown,
                                      None if evaluation.passed else "; ".join(evaluation.suggested_fixes) or None)],
                            attempt=number)

    def _own_checks(self) -> list[Check]:
        """Gate 3 of the phase's own: what it produces, its output gate, its contract's outputs."""
        construct, phase = self.item.construct, self.phase
        checks = []
        specs = [*phase.produces, *((phase.output,) if phase.output else ())]
        for spec in specs:
            checked = check_artifact(spec, self.workspace, construct.schemas, producer=phase.name)
            label = "output gate" if spec is phase.output else "produces"
            checks.append(Check(f"{label}: {spec.path}", checked.passed,
                                "; ".join(checked.problems) or f"{len(checked.files)} file(s), completeness "
                                f"{checked.completeness:.2f}", "; ".join(checked.fixes) or None))
        for output in phase.contract.outputs:
            there = bool(self.workspace.matches(output.path))
            if not output.optional or there:
                checks.append(Check(f"contract output: {output.path}", there, "there" if there else "missing",
                                    None if there else f"make phase {phase.name} write {output.path}"))
        return checks

    # -- the end ----------------------------------------------------------------------------------------

    def _end(self, code: int, status: str, reason: str, *, attempts: int, spend: Spend | None = None,
             evaluation: Any = None) -> PhaseOutcome:
        item, phase = self.item, self.phase
        assert self.execution is not None
        errors = [] if code == 0 else [{"code": code, "source": status if status in ("precondition", "handoff") else "phase",
                                        "message": reason or exit_codes.name(code, item.construct.exit_names)}]
        warnings = [{"source": "handoff", "message": w} for h in (self.incoming, self.outgoing) if h is not None
                    and h.decision == "proceed_with_warnings" for w in h.record["validation"]["warnings"]]
        artifacts = [self.workspace.artifact(self.workspace.root / path) for path in self.written
                     if (self.workspace.root / path).is_file()]
        effects = [{"type": "file_write", "target": path, "reversible": True,
                    "description": f"phase {phase.name} wrote {path} in the item's workspace"} for path in self.written]
        evidence = [] if evaluation is None else [
            {"kind": v.source, "reference": dim, "summary": f"{dim}: {v.reason}"[:500]}
            for dim, v in evaluation.dimensions.items()]
        self.execution.finish(code, primary=self.answer, artifacts=artifacts, side_effects=effects, errors=errors,
                              warnings=warnings, retries=self.retries, evidence=evidence,
                              score=evaluation.overall if evaluation is not None else None, attempts=attempts,
                              exit_names=item.construct.exit_names, cycle_id=item.location.cycle_id)
        item.events.emit(ExecutionProgress(item.nodeid, phase_exited=phase.name, artifacts_created=tuple(self.written),
                                           side_effects=tuple(effects)))
        return PhaseOutcome(phase.name, "passed" if code == 0 else "failed", code, reason, attempts, self.written,
                            spend or Spend(), self.outgoing)

    # -- what it is given -------------------------------------------------------------------------------

    def _received_specs(self) -> tuple[ArtifactSpec, ...]:
        incoming = self.incoming.handoff.artifacts if self.incoming is not None else ()
        contract = tuple(ArtifactSpec(path=c.path, required=not c.optional) for c in self.phase.contract.inputs)
        return (*incoming, *self.phase.receives, *contract)

    def _skill_id(self) -> str:
        skill = self.phase.skill
        return skill.skill_id if skill is not None else f"{self.item.construct.name}.{self.phase.name}"

    def _version(self) -> str:
        skill = self.phase.skill
        return skill.skill.version if skill is not None and skill.skill else self.item.construct.version


def _exit_of(call: Callable[[], RunnerOutput]) -> RunnerOutput:
    """``call``, a Python phase's ``sys.exit(n)`` read as its exit code n (0: it made no answer)."""
    try:
        return call()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0:
            return RunnerOutput()
        raise PhaseExited(f"the phase called sys.exit({exc.code!r})", code) from None


def _in_time(call: Callable[[], Any], timeout_ms: int, phase: str) -> Any:
    """``call`` on a thread of its own (with this thread's context: its model calls stay tied to the item), waited
    for ``timeout_ms``; past it, :class:`PhaseTimedOut`."""
    done: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            done["value"] = context.run(call)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=target, name=f"phase-{phase}", daemon=True)
    thread.start()
    thread.join(timeout_ms / 1000)
    if thread.is_alive():
        raise PhaseTimedOut(f"phase {phase} ran past its {timeout_ms} ms (timeout_ms)", int(ExitCode.TIMEOUT))
    if "error" in done:
        raise done["error"]
    return done["value"]
