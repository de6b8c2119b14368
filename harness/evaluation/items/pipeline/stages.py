"""One stage of a pipeline item: an execution with gates 1-4 and its execution result, its attempt recorded from the
shared steps, its output checked where it is handed on.

1. precondition: the handoff it receives (checked when the stage before it ended), or, for the first stage, the
   request it reads;
2. execution: its producer (a runner made as agents.yaml's are) or its skill, on the stage's request: the case's
   inputs, every earlier stage's output (``context``) and the run's facts (``pipeline``);
3. output: its output is JSON of its declared type (its pydantic model, or its JSON Schema) and passes its
   ``checks:``; a stage whose output fails is ``validation_failed`` (84), and its handoff to the next stage is
   rejected (a PhaseHandoff, accepted or not, written for every pair of consecutive stages it reaches);
4. goal: its ``rubric:``, when it names one, scores its output (the item fails when a score is below the bar, but the
   later stages still run: a learner learns from a bad run too).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.base.clock import utc_now
from harness.base.errors import ExitCode, ValidationFailed
from harness.base.events import ExecutionProgress, HandoffAttempted
from harness.base.models import Case, Rubric
from harness.base.requests import AgentRequest, Subject
from harness.base.usage import Spend
from harness.checks import CheckContext
from harness.evaluation.assessment import Check, Execution, artifact_of, completeness
from harness.evaluation.evaluate import Evaluation, evaluate
from harness.evaluation.items.skill import InputRejected, SkillWork, skill_attempt
from harness.evaluation.steps import Attempt, ItemRun

if TYPE_CHECKING:  # the kind's package imports this module
    from harness.evaluation.items.pipeline import PipelineRun, StageWork


@dataclass
class StageOutcome:
    """How a stage ended, as the item's result, its records and its failure report say it."""

    name: str
    status: str  # passed, failed, blocked, skipped, not_run, not_scored
    exit_code: int | None = None
    reason: str = ""
    attempts: int = 0
    duration_ms: float = 0.0
    spend: Spend = field(default_factory=Spend)
    output: Any = None  # its output, when it made one that is JSON
    handoff: dict[str, Any] | None = None  # the PhaseHandoff to the next stage, when one was made
    evaluation: Evaluation | None = None  # its goal's verdict, when it names a rubric

    @property
    def handed_on(self) -> str | None:
        """What its handoff decided (proceed, proceed_with_warnings, block, skip); None when none was made."""
        return None if self.handoff is None else self.handoff["decision"]


class StageRun:
    """One stage of one pipeline item."""

    def __init__(self, item: PipelineRun, work: StageWork, incoming: dict[str, Any] | None):
        self.item, self.work, self.stage = item, work, work.stage
        self.incoming = incoming
        self.execution: Execution | None = None
        self.output: Any = None
        self.problems: list[str] = []  # what failed gate 3: the output's type and its checks
        self.checks: list[Check] = []

    # -- the stage --------------------------------------------------------------------------------------

    def run(self, receiver: str | None) -> StageOutcome:
        """Run the stage, and hand its output on to ``receiver`` (the next stage; None for the last)."""
        item, stage = self.item, self.stage
        self._start()
        run = ItemRun(item.nodeid, item.pipeline.name, f"{item.case.id}.{stage.name}", self.work.rubric,
                      self.work.threshold, item.stage_location(stage.name), item.events, item.context.stop)
        with run.attempt() as attempt:
            self._attempt(attempt)
        last = run.last
        spend = Spend()
        for result in run.attempts:
            spend.merge(result.spend)
        if self.output is None and not self.problems:  # an error before any output: the pipeline stops here
            self._gate(2, [Check("ran without error", False, last.reason or f"exit code {last.exit_code}",
                                 "fix the stage's producer (its error is above)")])
            unscored = last.outcome == "indeterminate"  # its model is out of reach (no key): not a verdict
            return self._end(last.exit_code, "not_scored" if unscored else "failed", last.reason or "", run, spend)
        self._gate(2, [Check("ran without error", True, f"attempt {last.attempt} made its output")])
        decision = "proceed" if not self.problems else {"block": "block", "warn": "proceed_with_warnings",
                                                        "skip": "skip"}[stage.on_failure]
        handoff = self._handoff(run, receiver, decision) if receiver is not None else None
        self._gate(3, [*(self.checks or [Check("output produced", True, "JSON output")]),
                       *([Check(f"handoff {handoff['handoff']}", handoff["accepted"] or decision == "skip",
                                handoff["rejection_reason"] or decision, handoff["remediation"])] if handoff else [])])
        evaluation = last.evaluation if self.work.scored else None
        if evaluation is not None and evaluation.passed is not None:
            self._gate(4, [Check("verdict", bool(evaluation.passed), _shown(evaluation, self.work.threshold),
                                 None if evaluation.passed else "; ".join(evaluation.suggested_fixes) or None)])
        if self.problems and decision == "block":
            code, status, reason = int(ExitCode.VALIDATION_FAILED), "failed", "; ".join(self.problems[:3])
            if receiver is not None:
                reason = f"{receiver} rejected its output: {reason}"
        elif self.work.scored and last.evaluation is None and not self.problems:  # the judge could not answer
            code, status, reason = last.exit_code, "failed", last.reason or ""
            if last.outcome == "indeterminate":
                code, status = 0, "not_scored"
        elif evaluation is not None and evaluation.passed is None:
            code, status, reason = 0, "not_scored", evaluation.indeterminate_reason or "nobody could score it"
        elif evaluation is not None and not evaluation.passed:
            code, status = int(last.exit_code or ExitCode.GENERAL_FAILURE), "failed"
            reason = _shown(evaluation, self.work.threshold) + " (below it)"
        else:
            code, status, reason = 0, "passed", "; ".join(self.problems[:3])  # a warning under warn or skip
        outcome = self._end(code, status, reason, run, spend, evaluation)
        return dataclasses.replace(outcome, handoff=handoff)

    def blocked(self) -> StageOutcome:
        """The receiver of a handoff that blocked: its gate 1 failed, so it does not run (80, blocked)."""
        assert self.incoming is not None
        self._start()
        self._gate(1, [Check(f"handoff {self.incoming['handoff']}", False, self.incoming["rejection_reason"] or "",
                             self.incoming["remediation"])])
        outcome = self._end(int(ExitCode.BLOCKED), "blocked", self.incoming["rejection_reason"] or "", None, Spend())
        return dataclasses.replace(outcome, status="blocked")

    def _start(self) -> None:
        item, stage = self.item, self.stage
        item.events.emit(ExecutionProgress(item.nodeid, phase_entered=stage.name))
        self.execution = Execution(
            nodeid=item.nodeid, skill_id=self.work.agent_name, version=item.pipeline.version,
            operator_type=stage.operator_type, inputs=item.case.inputs, events=item.events,
            capture=item.context_capture, location=item.location, phase=stage.name,
            goal_statement=stage.description or f"{item.pipeline.name}: stage {stage.name}")
        if self.incoming is not None and self.incoming["decision"] != "block":
            self._gate(1, [Check(f"handoff {self.incoming['handoff']}", True,
                                 "accepted" if self.incoming["accepted"] and not self.incoming["validation"]["warnings"]
                                 else "; ".join(self.incoming["validation"]["warnings"]) or "accepted")])
        elif self.incoming is None and stage.index == 0:
            there = item.pipeline.input in item.case.inputs
            self._gate(1, [Check(f"input {item.pipeline.input}", there, "the request the first stage reads")])

    def _attempt(self, attempt: Attempt) -> None:
        """One attempt, inside the steps' attempt: a ``HarnessError`` raised here ends it as the error it is."""
        if self.stage.skill is not None:
            self.output = self._skill(attempt)
        else:
            self.output = self._producer(attempt)
        self.checks = self._output_checks(attempt)
        self.problems = [f"{c.name}: {c.message}" if c.message else c.name for c in self.checks if not c.passed]
        if self.problems:
            raise ValidationFailed(f"{self.stage.name}'s output failed its checks: {'; '.join(self.problems[:3])}",
                                   self.problems)
        if self.work.scored and self.stage.skill is None:
            attempt.evaluate(judge=self.work.judge, context=self._check_context(),
                             about=Subject(self.work.agent_name, self.item.case.id, attempt.number, self._inputs()))
            attempt.decide()
        elif self.stage.skill is not None:
            attempt.decide()
        else:
            attempt.finish("passed", "passed")

    # -- running ----------------------------------------------------------------------------------------

    def _inputs(self) -> dict[str, Any]:
        """What the stage is given: the case's inputs, every earlier stage's output, and the run's facts."""
        item = self.item
        return {**item.case.inputs, "context": dict(item.outputs),
                "pipeline": {"name": item.pipeline.name, "stage": self.stage.name, "case": item.case.id,
                             "cycle": item.location.cycle_id, "input": item.pipeline.input,
                             "workspace": str(item.workspace), "project": str(item.context.import_root),
                             "memory": str(item.memory) if item.memory is not None else None}}

    def _producer(self, attempt: Attempt) -> Any:
        runner = self.work.runner
        assert runner is not None
        output = self.stage.output
        request = AgentRequest(role="stage", agent=self.work.agent_name, case=self.item.case.id,
                               attempt=attempt.number, inputs=self._inputs(),
                               schema=output.json_schema if output is not None else None)
        made = runner.run(request)
        attempt.outputs.append(made)
        data = made.data
        if data is None:
            try:
                data = json.loads(made.text)
            except ValueError as exc:
                attempt.keep(made.text, role="producer")
                problem = f"not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
                self._failed_output("output is JSON", problem, "make the stage answer with one JSON object")
                raise ValidationFailed(f"{self.stage.name}'s output is {problem}", self.problems,
                                       made.text[:2000]) from None
        attempt.keep(json.dumps(data, indent=2, ensure_ascii=False, default=str), role="producer")
        return data

    def _skill(self, attempt: Attempt) -> Any:
        """The stage's skill, through the skill kind's own steps: its input is the previous stage's output (the
        case's inputs for the first stage)."""
        skill = self.stage.skill
        assert skill is not None
        before = list(self.item.outputs.values())
        given = before[-1] if before and isinstance(before[-1], dict) else dict(self.item.case.inputs)
        case = Case(id=self.item.case.id, agent=skill.skill_id, path=self.item.pipeline.path, line=self.stage.line,
                    inputs=given)
        try:
            return skill_attempt(SkillWork(skill, case, self.work.rubric), attempt, self.item.context)
        except InputRejected:
            raise  # what it was handed does not fit the skill's input_schema: it never ran (65)
        except ValidationFailed as exc:
            self._failed_output(f"skill {skill.skill_id} output", str(exc), "make the output match the skill's "
                                "output_schema")
            raise

    def _failed_output(self, name: str, problem: str, fix: str) -> None:
        self.checks = [Check(name, False, problem, fix)]
        self.problems = [f"{name}: {problem}"]

    def _output_checks(self, attempt: Attempt) -> list[Check]:
        """Gate 3: the output is of its declared type, then its ``checks:`` (each a check of the harness's, on the
        output's JSON)."""
        stage, found = self.stage, []
        if stage.output is not None:
            errors = stage.output.errors(self.output)
            found.append(Check(f"output {stage.output.named}", not errors, "; ".join(errors[:5]) or "matches",
                               "make the stage's output match its declared type" if errors else None))
        if stage.checks:
            rubric = Rubric(name=f"{self.work.agent_name}:checks", path=self.item.pipeline.path,
                            title=f"the checks of stage {stage.name}", version=self.item.pipeline.version,
                            threshold=1.0, dimensions=stage.checks)
            verdict = evaluate(json.dumps(self.output, ensure_ascii=False, default=str), rubric=rubric, threshold=1.0,
                               context=self._check_context(), judge=None,
                               about=Subject(self.work.agent_name, self.item.case.id, attempt.number, self._inputs()),
                               revision_follows=False)
            for dim_id, dim in verdict.dimensions.items():
                ok = dim.score is not None and dim.score >= 1.0 - 1e-9
                found.append(Check(dim_id, ok, dim.reason, None if ok else "; ".join(dim.fixes) or None))
        return found

    def _check_context(self) -> CheckContext:
        case = self.item.case
        return CheckContext(inputs=self._inputs(), today=case.today or dt.datetime.now(dt.timezone.utc).date(),
                            expected=case.expected)

    # -- gates and the end -------------------------------------------------------------------------------

    def _gate(self, number: int, checks: list[Check]) -> None:
        assert self.execution is not None
        self.execution.gate(number, checks)

    def _end(self, code: int, status: str, reason: str, run: ItemRun | None, spend: Spend,
             evaluation: Evaluation | None = None) -> StageOutcome:
        item, stage = self.item, self.stage
        assert self.execution is not None
        artifacts = []
        if run is not None and run.attempts and run.last.record.artifact_path:
            path = run.location.attempt_artifact(run.last.attempt)
            if path.is_file():
                artifacts.append({**artifact_of(path, metadata={"stage": stage.name}),
                                  "path": run.last.record.artifact_path, "content_type": "application/json"})
        errors = [] if code == 0 else [{"code": code, "source": stage.name, "message": reason or status}]
        warnings = [{"source": "handoff", "message": w} for w in (self.incoming or {}).get("validation", {}).get(
            "warnings", [])]
        if status == "not_scored" and evaluation is not None:
            warnings.append({"source": "judge", "message": f"not scored: {evaluation.indeterminate_reason}"})
        evidence = [] if evaluation is None else [
            {"kind": v.source, "reference": dim, "summary": f"{dim}: {v.reason}"[:500]}
            for dim, v in evaluation.dimensions.items()]
        result = self.execution.finish(
            code, primary=self.output, artifacts=artifacts, errors=errors, warnings=warnings, evidence=evidence,
            score=evaluation.overall if evaluation is not None else None,
            attempts=len(run.attempts) if run is not None else 0, cycle_id=item.location.cycle_id)
        item.events.emit(ExecutionProgress(item.nodeid, phase_exited=stage.name,
                                           artifacts_created=tuple(a["path"] for a in artifacts)))
        return StageOutcome(stage.name, status, code, reason, len(run.attempts) if run is not None else 0,
                            float(result["duration_ms"]), spend, self.output, None, evaluation)

    def _handoff(self, run: ItemRun, receiver: str, decision: str) -> dict[str, Any]:
        """The PhaseHandoff from this stage to ``receiver``: its output, checked at gate 3, and what its
        ``on_failure`` decided when that failed (a goal below the bar is the item's verdict, not the handoff's)."""
        item, stage, output = self.item, self.stage, self.stage.output
        warnings = list(self.problems) if decision == "proceed_with_warnings" else []
        blockers = [] if warnings else list(self.problems)
        accepted = decision in ("proceed", "proceed_with_warnings")
        file = run.location.attempt_artifact(run.last.attempt)
        path = file.relative_to(item.location.directory).as_posix()
        provided = [{**artifact_of(file, item.location.directory, {"stage": stage.name}),
                     "content_type": "application/json"}] if file.is_file() else []
        schema = output.json_schema if output is not None and isinstance(self.output, dict) else None
        record = {
            "from_phase": stage.name, "to_phase": receiver, "handoff_at": utc_now(),
            "artifacts": {"required": [{"path": path, "schema": output.named if output is not None else None,
                                        "required": True}],
                          "provided": provided, "missing": [] if provided else [path], "extra": []},
            "validation": {
                "schema_valid": all(c.passed for c in self.checks if c.name.startswith(("output ", "skill "))),
                "completeness": completeness(self.output, schema=schema) if self.output is not None else 0.0,
                "blockers": blockers, "warnings": warnings},
            "accepted": accepted,
            "rejection_reason": None if accepted else (
                f"{receiver} did not accept what {stage.name} handed on: {self.problems[0]}"
                + (f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else "")),
            "remediation": None if not self.problems else _remedy(self.checks, stage.name),
            "handoff": f"{stage.name}_to_{receiver}", "on_failure": stage.on_failure, "decision": decision,
            "declared": True, "nodeid": item.nodeid, "cycle_id": item.location.cycle_id,
        }
        item.events.emit(HandoffAttempted(item.nodeid, record, location=item.location))
        return record


def _remedy(checks: list[Check], stage: str) -> str:
    fixes = [c.remediation for c in checks if not c.passed and c.remediation]
    return "; ".join(dict.fromkeys(fixes)) or f"make stage {stage} hand on an output its checks accept"


def _shown(evaluation: Evaluation, threshold: float) -> str:
    overall = evaluation.overall
    return f"score {overall:.3f} against the threshold {threshold:g}" if overall is not None else ""
