"""The shared steps every kind of item runs from: attempts that produce, evaluate and are recorded.

An :class:`ItemRun` is one item's life and an :class:`Attempt` one attempt of it. Each step emits the event
the records, the cost account, progress lines and plugins' sinks listen for (``harness.base.events``), so a
kind of item that runs from these steps is recorded, counted and reported like a case, writing nothing
itself: the session's record writer writes the ``running`` row when an attempt starts, the artifact when it
is produced, the evaluator output when it is judged, and the rows when it finishes.

A :class:`~harness.base.errors.HarnessError` raised inside an attempt (a producer that crashed, a model that
could not be reached, the cost cap) ends the attempt with the outcome it stands for, recorded, and the item
with it; every other exception is a bug and propagates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.base import exit_codes
from harness.base.capture import Capture
from harness.base.clock import utc_now
from harness.base.errors import ExitCode, HarnessError, ModelUnavailable, ValidationFailed
from harness.base.events import (
    ArtifactProduced,
    AttemptFinished,
    AttemptStarted,
    Events,
    ItemFinished,
    ItemStarted,
    Judged,
    Reviewed,
)
from harness.base.models import Outcome, RecordStatus, Rubric, RunRecord
from harness.base.redaction import redact
from harness.base.requests import AgentRequest, Subject
from harness.base.stop import StopFlag
from harness.base.usage import Spend, Usage
from harness.checks import CheckContext
from harness.evaluation.assessment import Check, Execution, artifact_of, assess_attempt
from harness.evaluation.evaluate import Evaluation, check_review, evaluate
from harness.evaluation.runners import Runner, RunnerOutput
from harness.llm import CostCapReached
from harness.records import AttemptDetails, RunLocation

# The exit code each scored outcome records (the exit codes' list, docs/contracts.md).
OUTCOME_EXIT_CODES = {"passed": 0, "failed": 1, "escalated": int(ExitCode.ESCALATION),
                      "indeterminate": int(ExitCode.UNAVAILABLE)}


class Interrupted(HarnessError):
    """The session stopped (-x, --maxfail, Ctrl-C, cost cap) in the middle of an attempt."""

    exit_code = ExitCode.INCOMPLETE


@dataclass(frozen=True)
class AttemptResult:
    attempt: int
    record: RunRecord
    outcome: Outcome
    evaluation: Evaluation | None
    spend: Spend  # every model call of the attempt, per model
    exit_code: int
    error: str | None = None
    commands: tuple[dict[str, Any], ...] = ()  # the attempt's command runs, as the records keep them
    flags: tuple[str, ...] = ()  # what its producer or reviser raised (escalate_conditions)
    reason: str | None = None  # why it ended as it did (an error, an escalation, a verdict's explanation)
    duration_ms: int = 0

    @property
    def usage(self) -> Usage:
        return self.spend.usage

    @property
    def triage(self) -> exit_codes.Triage:
        """What an orchestrator does about how this attempt ended (retry, fix the inputs, escalate, ...)."""
        return exit_codes.triage(self.exit_code)


@dataclass(frozen=True)
class LoopResult:
    """The seed's LoopResult plus what the harness reports: outcome, exit code, tokens and cost."""

    success: bool
    final_attempt: int
    final_score: float | None
    artifact_path: str
    all_runs: list[RunRecord]
    escalated: bool
    escalation_reason: str | None
    outcome: Outcome
    exit_code: int
    attempts: list[AttemptResult] = field(default_factory=list)
    execution: dict[str, Any] | None = field(default=None, repr=False)  # the execution result contract's JSON

    @property
    def spend(self) -> Spend:
        total = Spend()
        for attempt in self.attempts:
            total.merge(attempt.spend)
        return total

    @property
    def usage(self) -> Usage:
        return self.spend.usage

    @property
    def cost_usd(self) -> float | None:
        """What the item cost; None when a model it called has no price."""
        return self.spend.cost_usd

    @property
    def cached_answers(self) -> int:
        return self.spend.cached

    @property
    def last_evaluation(self) -> Evaluation | None:
        return self.attempts[-1].evaluation if self.attempts else None

    @property
    def unconfined_roles(self) -> list[str]:
        """The roles whose commands ran without the sandbox in any attempt."""
        return sorted({run["role"] for attempt in self.attempts for run in attempt.commands if not run["confined"]})

    def contract(self) -> dict[str, Any]:
        """The seed's LoopResult JSON."""
        result = {"success": self.success, "finalAttempt": self.final_attempt, "finalScore": self.final_score,
                  "artifactPath": self.artifact_path, "allRuns": [r.model_dump(mode="json") for r in self.all_runs],
                  "escalated": self.escalated}
        if self.escalation_reason:
            result["escalationReason"] = self.escalation_reason
        return result


@dataclass
class ItemRun:
    """One item's run: its attempts, each recorded through ``events``, and its end (:meth:`finish`)."""

    nodeid: str
    agent: str   # who the records file it under (agent_runs.agent_name)
    case_id: str
    rubric: Rubric
    threshold: float
    location: RunLocation
    events: Events
    stop: StopFlag | None = None
    capture: Capture = field(default_factory=Capture)  # what the execution result keeps of inputs and outputs
    attempts: list[AttemptResult] = field(default_factory=list)
    last_artifact: str | None = None  # the latest attempt's artifact (a reviser's starting point)
    execution: Execution | None = None  # the assessment of this run: its gates and execution result
    confidence: float | None = None  # what a kind knows of how sure its verdict is (a review's confidence)
    selection: str | None = None  # the dimension saying whether the right agent or skill was chosen (gate 0)
    variant: str | None = None  # the agent's variant it runs (``variants:``), recorded with each attempt
    _inputs: tuple[str, ...] = field(default=(), init=False, repr=False)
    _case_data: dict[str, Any] | None = field(default=None, init=False, repr=False)  # what it was given, recorded

    def start(self, max_attempts: int, *, operator_type: str = "item", version: str | None = None,
              inputs: Mapping[str, Any] | None = None, goal: str | None = None,
              preconditions: Sequence[Check] | None = None, selection: str | None = None,
              expected: Any = None, description: str | None = None) -> None:
        """The run begins: its execution is invoked with ``inputs``; ``preconditions`` (gate 1) are checked now
        when the kind gives them, else when the first attempt ends (an input rejected there fails the gate).
        ``inputs``, ``expected`` (the reference answer) and ``description`` are recorded once, when it ends."""
        self.events.emit(ItemStarted(self.nodeid, self.agent, self.case_id, max_attempts))
        self.execution = Execution(nodeid=self.nodeid, skill_id=self.agent, version=version,
                                   operator_type=operator_type, inputs=inputs or {}, events=self.events,
                                   capture=self.capture, location=self.location,
                                   goal_statement=goal or self.rubric.description or self.rubric.title)
        self._inputs = tuple(inputs or ())
        if inputs is not None or expected is not None:
            self._case_data = {"inputs": dict(inputs or {}), "expected": expected, "description": description}
        self.selection = selection
        if preconditions is not None:
            self.execution.gate(1, preconditions)

    def preconditions(self) -> list[Check]:
        """Gate 1 of an item whose kind names no preconditions: its inputs were found and loaded."""
        if not self._inputs:
            return [Check("inputs", True, "the item takes no inputs")]
        return [Check("inputs", True, f"{len(self._inputs)} given: {', '.join(self._inputs[:10])}")]

    @contextlib.contextmanager
    def attempt(self) -> Iterator[Attempt]:
        """The next attempt. It must end with :meth:`Attempt.finish` (or :meth:`Attempt.decide`); a
        ``HarnessError`` inside it ends and records it as the error it stands for, and :attr:`failed` says so."""
        if self.stop is not None:
            self.stop.check()  # never start an attempt once the session is stopping
        attempt = Attempt(self, len(self.attempts) + 1)
        try:
            yield attempt
        except HarnessError as exc:
            attempt.fail(exc)
        else:
            if attempt.result is None:
                raise RuntimeError(f"{self.nodeid}: attempt {attempt.number} ended without a verdict")

    @property
    def failed(self) -> bool:
        """The last attempt ended in an error: no more attempts."""
        return bool(self.attempts) and self.attempts[-1].evaluation is None

    @property
    def last(self) -> AttemptResult:
        return self.attempts[-1]

    def finish(self) -> LoopResult:
        """The item's result, from its last attempt; emitted as the item's end."""
        last = self.attempts[-1]
        escalation_reason = last.reason if (last.record.status == "escalated" or last.evaluation is None) else None
        result = LoopResult(
            success=last.outcome == "passed", final_attempt=last.attempt, final_score=last.record.overall_score,
            artifact_path=last.record.artifact_path, all_runs=[a.record for a in self.attempts],
            escalated=last.record.status == "escalated", escalation_reason=escalation_reason, outcome=last.outcome,
            exit_code=last.exit_code, attempts=list(self.attempts),
        )
        result = dataclasses.replace(result, execution=self._execution_result(result))
        self.events.emit(ItemFinished(self.nodeid, result.outcome, result.final_score, len(self.attempts),
                                      result.spend, case_id=self.case_id, loop_result=result.contract(),
                                      location=self.location, case_data=self._case_data))
        return result


    def _execution_result(self, result: LoopResult) -> dict[str, Any] | None:
        """The execution result of this run (the assessment's contract), emitted for the records and the trace."""
        if self.execution is None:
            return None
        last = self.attempts[-1]
        evaluation = last.evaluation
        artifacts = []
        if last.record.artifact_path:
            path = self.location.attempt_artifact(last.attempt)
            if path.is_file():  # the last attempt's artifact, as the records wrote it through the redaction filter
                written = None if self.last_artifact is None else redact(self.last_artifact).encode("utf-8")
                artifacts.append({**artifact_of(path, metadata={"attempt": last.attempt}, written=written),
                                  "path": last.record.artifact_path})
        errors = [{"code": a.exit_code, "source": f"attempt {a.attempt}", "message": a.reason or a.outcome}
                  for a in self.attempts if a.evaluation is None]
        warnings = [{"source": "judge", "message": f"the goal was not assessed: {evaluation.indeterminate_reason}"}
                    for evaluation in [evaluation] if evaluation is not None and evaluation.passed is None]
        warnings += [{"source": "sandbox", "message": f"the {role} command ran without the sandbox"}
                     for role in result.unconfined_roles]
        if not result.spend.cost_known:
            warnings.append({"source": "cost", "message": "a model it called has no price: its cost is unknown"})
        retries = [{"attempt": a.attempt, "exit_code": a.exit_code, "reason": a.reason or a.outcome,
                    "kind": "retry" if a.evaluation is None else "revision", "duration_ms": a.duration_ms}
                   for a in self.attempts[:-1]]
        evidence = [] if evaluation is None else [
            {"kind": verdict.source, "reference": dim_id,
             "summary": f"{dim_id} {'-' if verdict.score is None else f'{verdict.score:.2f}'}: {verdict.reason}"[:500]}
            for dim_id, verdict in evaluation.dimensions.items()]
        return self.execution.finish(
            last.exit_code, primary=self.last_artifact, artifacts=artifacts, errors=errors, warnings=warnings,
            retries=retries, confidence=self.confidence, evidence=evidence,
            human_review_requested=last.record.status == "escalated", score=last.record.overall_score,
            attempts=len(self.attempts), cycle_id=self.location.cycle_id)


class Attempt:
    """One attempt of an item: recorded as ``running`` when it starts, its artifact and evaluation as they
    come, and its row when it finishes."""

    def __init__(self, run: ItemRun, number: int):
        self.run = run
        self.number = number
        self.started = time.monotonic()
        self.created_at = utc_now()  # the attempt's start: its agent_runs row and run-log entry both carry it
        self.outputs: list[RunnerOutput] = []
        self.artifact: str | None = None
        self.flags: tuple[str, ...] = ()
        self.evaluation: Evaluation | None = None
        self.error: HarnessError | None = None  # what ended it, when an error did
        self.result: AttemptResult | None = None
        details = AttemptDetails(nodeid=run.nodeid, case_id=run.case_id, rubric_name=run.rubric.name,
                                 threshold=run.threshold, variant=run.variant)
        run.events.emit(AttemptStarted(run.nodeid, number, run.location, run.rubric.version, details,
                                       self.created_at))

    # -- the steps --------------------------------------------------------------------------------------

    def produce(self, runner: Runner, request: AgentRequest) -> str:
        """The artifact ``runner`` makes for ``request`` (a producer's or a reviser's), recorded."""
        made = runner.run(request)
        self.outputs.append(made)
        self.flags = made.flags
        return self.keep(made.text, role=request.role, spend=made.spend)

    def keep(self, artifact: str, *, role: str = "producer", spend: Spend | None = None) -> str:
        """Record ``artifact`` as this attempt's (one the kind made itself: an answer read from a file, a call
        it made)."""
        self.artifact = self.run.last_artifact = artifact
        self.run.events.emit(ArtifactProduced(self.run.nodeid, self.number, role, artifact, spend or Spend(),
                                              location=self.run.location))
        if self.run.stop is not None and self.run.stop.is_set():
            raise Interrupted(f"interrupted before scoring: {self.run.stop.reason}")
        return artifact

    def evaluate(self, *, judge: Runner | None = None, about: Subject | None = None,
                 context: CheckContext | None = None, samples: int = 1, revision_follows: bool = False,
                 rubric: Rubric | None = None, always_judge: bool = False,
                 shape_review: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Evaluation:
        """This attempt's artifact scored: the rubric's checks, then the judge for the rest; recorded. A review
        rubric's ReviewResult goes through ``shape_review`` before it is recorded, when a kind gives one (a
        skill adds its judge's evidence and confidence)."""
        if self.artifact is None:
            raise RuntimeError(f"{self.run.nodeid}: attempt {self.number} evaluated before it made an artifact")
        run = self.run
        rubric = rubric or run.rubric
        context = context or CheckContext(inputs={}, today=dt.datetime.now(dt.timezone.utc).date())
        about = about or Subject(run.agent, run.case_id, self.number, dict(context.inputs), context.expected)
        scoring_started = time.monotonic()
        evaluation = evaluate(self.artifact, rubric=rubric, threshold=run.threshold, context=context, judge=judge,
                              about=about, samples=samples, revision_follows=revision_follows,
                              always_judge=always_judge)
        self.evaluation = evaluation
        self.outputs.append(RunnerOutput(spend=evaluation.spend))
        run.events.emit(Judged(run.nodeid, self.number, evaluation.overall, evaluation.passed, evaluation.spend,
                               output=evaluation.to_output(), location=run.location))
        if rubric.rubric_id is not None:
            self._review(evaluation, rubric, scoring_started, shape_review)
        return evaluation

    def _review(self, evaluation: Evaluation, rubric: Rubric, scoring_started: float,
                shape: Callable[[dict[str, Any]], dict[str, Any]] | None) -> None:
        """A review rubric's ReviewResult, recorded, then checked against its ``output_schema`` (seed 003)."""
        now = time.monotonic()
        review = evaluation.to_review(int((now - scoring_started) * 1000), int((now - self.started) * 1000))
        if shape is not None:
            review = shape(review)
        self.run.events.emit(Reviewed(self.run.nodeid, self.number, review, location=self.run.location))
        errors = check_review(review, rubric)
        if errors:
            raise ValidationFailed(f"the review does not match {rubric.name}'s output_schema: "
                                   f"{'; '.join(errors[:3])}", errors, json.dumps(review)[:2000])

    # -- the end ----------------------------------------------------------------------------------------

    def decide(self) -> AttemptResult:
        """The plain verdict of a scored attempt: passed at or above the threshold, failed below it,
        indeterminate when nobody could score it."""
        evaluation = self.evaluation
        if evaluation is None:
            raise RuntimeError(f"{self.run.nodeid}: attempt {self.number} decided before it was evaluated")
        if evaluation.passed is None:
            return self.finish("escalated", "indeterminate", evaluation.indeterminate_reason)
        return self.finish("passed", "passed") if evaluation.passed else self.finish("failed", "failed")

    def finish(self, status: RecordStatus, outcome: Outcome, reason: str | None = None) -> AttemptResult:
        """Record the attempt as ``outcome`` (``status`` is the run record's word for it)."""
        return self._record(status, outcome, reason, OUTCOME_EXIT_CODES[outcome])

    def fail(self, exc: HarnessError) -> AttemptResult:
        """Record the attempt as ended by ``exc``; what its failed calls cost is billed all the same."""
        spent = getattr(exc, "spend", None)
        commands = getattr(exc, "commands", ())
        if spent or commands:
            self.outputs.append(RunnerOutput(spend=spent or Spend(), commands=commands))
        if isinstance(exc, CostCapReached) and self.run.stop is not None:
            self.run.stop.set(str(exc), cause="cost_cap")
        self.evaluation = None
        self.error = exc
        outcome: Outcome = ("validation_failed" if isinstance(exc, ValidationFailed) else
                            "indeterminate" if isinstance(exc, ModelUnavailable) else "error")
        return self._record("escalated", outcome, str(exc), int(exc.exit_code))

    def _record(self, status: RecordStatus, outcome: Outcome, reason: str | None, exit_code: int) -> AttemptResult:
        run, evaluation = self.run, self.evaluation
        spend = Spend()
        for out in self.outputs:
            spend.merge(out.spend)
        usage = spend.usage
        commands = [command.wire() for out in self.outputs for command in out.commands] or None
        if evaluation is not None:
            dims = {name: {"score": d.score, "weight": d.weight, "reason": d.reason, "source": d.source,
                           **({"judges": d.judges} if d.judges else {})}  # a judge ensemble's own answers
                    for name, d in evaluation.dimensions.items()}
            feedback = evaluation.feedback
            if reason and reason not in feedback:
                feedback = f"{feedback} {reason[0].upper()}{reason[1:]}."
            fixes = list(evaluation.suggested_fixes)
            overall = evaluation.overall
        else:
            dims, feedback, fixes, overall = {}, reason or "", [], None
        made = self.artifact is not None  # a crashed producer made none: the record names no file not there
        record = RunRecord(
            cycle_id=run.location.cycle_id, agent_name=run.agent, attempt=self.number, status=status,
            overall_score=overall, dimension_scores={k: v["score"] for k, v in dims.items()}, feedback=feedback,
            suggested_fixes=fixes, artifact_path=run.location.shown_artifact(self.number) if made else "",
            created_at=self.created_at, duration_ms=int((time.monotonic() - self.started) * 1000),
            rubric_version=run.rubric.version,
        )
        assess_attempt(run.execution, number=self.number, exit_code=exit_code, error=self.error,
                       artifact=self.artifact, evaluation=evaluation, threshold=run.threshold,
                       preconditions=run.preconditions, started=self.started, selection=run.selection)
        details = AttemptDetails(
            nodeid=run.nodeid, case_id=run.case_id, rubric_name=run.rubric.name, threshold=run.threshold,
            outcome=outcome, exit_code=exit_code, model=spend.model, input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens, cache_write_tokens=usage.cache_write_tokens,
            cache_read_tokens=usage.cache_read_tokens, cost_usd=spend.known_cost_usd, dimensions=dims,
            samples=(evaluation.samples or None) if evaluation else None, cached_answers=spend.cached,
            model_usage=spend.by_model() or None, cost_known=spend.cost_known, commands=commands,
            variant=run.variant,
        )
        run.events.emit(AttemptFinished(run.nodeid, self.number, outcome, overall, spend, record, details,
                                        location=run.location))
        self.result = AttemptResult(attempt=self.number, record=record, outcome=outcome, evaluation=evaluation,
                                    spend=spend, exit_code=exit_code, error=reason if evaluation is None else None,
                                    commands=tuple(commands or ()), flags=self.flags, reason=reason,
                                    duration_ms=record.duration_ms)
        run.attempts.append(self.result)
        return self.result
