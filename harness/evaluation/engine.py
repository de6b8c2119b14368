"""The loop engine (seed 000 section 6): produce, evaluate, revise until the threshold or the limit.

The engine writes nothing itself: it emits the item's life to ``plan.events`` and the session's record
writer (:class:`harness.records.RecordWriter`, a required sink) records it. Every attempt is recorded
before it starts (``running``) and completed after it is scored, so a crash leaves a trace and never a
half-written record.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

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
from harness.base.models import AgentConfig, Case, LoopPolicy, Outcome, RecordStatus, Rubric, RunRecord
from harness.base.requests import AgentRequest, Subject
from harness.base.stop import StopFlag
from harness.base.usage import Spend, Usage
from harness.checks import CheckContext
from harness.evaluation.artifact_items import read_ranking
from harness.evaluation.evaluate import Evaluation, check_review, evaluate
from harness.evaluation.runners import Runner, RunnerOutput
from harness.llm import CostCapReached
from harness.records import AttemptDetails, RunLocation


class Interrupted(HarnessError):
    """The session stopped (-x, --maxfail, Ctrl-C, cost cap) in the middle of an attempt."""

    exit_code = ExitCode.INCOMPLETE


@dataclass(frozen=True)
class CasePlan:
    """Everything one case needs to run (the seed's LoopConfig, resolved)."""

    nodeid: str
    case: Case
    agent: AgentConfig
    rubric: Rubric
    threshold: float
    producer: Runner
    reviser: Runner | None
    judge: Runner | None
    location: RunLocation
    judge_samples: int = 1
    stop: StopFlag | None = None
    events: Events = field(default_factory=Events)  # the item's life, for the session's sinks


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

    @property
    def usage(self) -> Usage:
        return self.spend.usage


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

    def contract(self) -> dict[str, Any]:
        """The seed's LoopResult JSON."""
        result = {"success": self.success, "finalAttempt": self.final_attempt, "finalScore": self.final_score,
                  "artifactPath": self.artifact_path, "allRuns": [r.model_dump(mode="json") for r in self.all_runs],
                  "escalated": self.escalated}
        if self.escalation_reason:
            result["escalationReason"] = self.escalation_reason
        return result


def run_loop(plan: CasePlan) -> LoopResult:
    """Produce, evaluate and revise one case until it passes or its attempts run out; the item's life,
    every attempt included, is emitted to ``plan.events``."""
    policy = plan.agent.policy
    context = CheckContext(inputs=plan.case.inputs, today=plan.case.today or _utc_today(), expected=plan.case.expected)
    agent, case, inputs = plan.agent.name, plan.case.id, plan.case.inputs
    max_attempts = policy.max_attempts if plan.reviser is not None else 1
    attempts: list[AttemptResult] = []
    artifact = ""
    evaluation: Evaluation | None = None
    escalation_reason: str | None = None
    events = plan.events
    events.emit(ItemStarted(plan.nodeid, plan.agent.name, plan.case.id, max_attempts))
    for number in range(1, max_attempts + 1):
        if plan.stop is not None:
            plan.stop.check()  # never start an attempt once the session is stopping
        started = time.monotonic()
        created_at = utc_now()  # the attempt's start: its agent_runs row and run-log entry both carry it
        details = AttemptDetails(nodeid=plan.nodeid, case_id=plan.case.id, rubric_name=plan.rubric.name,
                                 threshold=plan.threshold)
        events.emit(AttemptStarted(plan.nodeid, number, plan.location, plan.rubric.version, details, created_at))
        outputs: list[RunnerOutput] = []
        written = False
        try:
            if number == 1:
                request = AgentRequest("producer", agent, case, number, inputs)
                made = plan.producer.run(request)
            else:
                assert evaluation is not None and plan.reviser is not None
                previous = evaluation.to_output().model_dump(mode="json")
                request = AgentRequest("reviser", agent, case, number, inputs, artifact=artifact,
                                       evaluation=previous, suggested_fixes=tuple(previous["suggestedFixes"]))
                made = plan.reviser.run(request)
            outputs.append(made)
            artifact = made.text
            events.emit(ArtifactProduced(plan.nodeid, number, request.role, artifact, made.spend,
                                         location=plan.location))
            written = True
            if plan.stop is not None and plan.stop.is_set():
                raise Interrupted(f"interrupted before scoring: {plan.stop.reason}")
            scoring_started = time.monotonic()
            evaluation = evaluate(artifact, rubric=plan.rubric, threshold=plan.threshold, context=context,
                                  judge=plan.judge, about=Subject(agent, case, number, inputs, plan.case.expected),
                                  samples=plan.judge_samples, revision_follows=number < max_attempts)
            outputs.append(_evaluation_output(evaluation))
            events.emit(Judged(plan.nodeid, number, evaluation.overall, evaluation.passed, evaluation.spend,
                               output=evaluation.to_output(), location=plan.location))
            if plan.rubric.rubric_id is not None:
                _review(plan, number, evaluation, scoring_started, started)
        except HarnessError as exc:
            outcome = _error_outcome(exc)
            reason = str(exc)
            spent = getattr(exc, "spend", None)
            commands = getattr(exc, "commands", ())
            if spent or commands:  # a failed call's earlier tries, an invalid answer's calls: billed all the same
                outputs.append(RunnerOutput(spend=spent or Spend(), commands=commands))
            if isinstance(exc, CostCapReached) and plan.stop is not None:
                plan.stop.set(str(exc), cause="cost_cap")
            result = _finish(plan, number, started, "escalated", outcome, None, reason, outputs,
                             int(exc.exit_code), created_at=created_at, made=written)
            attempts.append(result)
            escalation_reason = reason
            break
        flags = [f for f in (*plan.case.flags, *made.flags) if f in policy.escalate_conditions]
        status, outcome, stop, reason = _decide(evaluation, artifact, number, max_attempts, policy, flags,
                                               plan.reviser)
        code = {"passed": 0, "failed": 1, "escalated": int(ExitCode.ESCALATION),
                "indeterminate": int(ExitCode.UNAVAILABLE)}[outcome]
        result = _finish(plan, number, started, status, outcome, evaluation, reason, outputs, code,
                         created_at=created_at)
        attempts.append(result)
        if stop:
            escalation_reason = reason if status == "escalated" else None
            break
    last = attempts[-1]
    result = LoopResult(
        success=last.outcome == "passed", final_attempt=last.attempt, final_score=last.record.overall_score,
        artifact_path=last.record.artifact_path, all_runs=[a.record for a in attempts],
        escalated=last.record.status == "escalated", escalation_reason=escalation_reason, outcome=last.outcome,
        exit_code=last.exit_code, attempts=attempts,
    )
    events.emit(ItemFinished(plan.nodeid, result.outcome, result.final_score, len(attempts), result.spend,
                             case_id=plan.case.id, loop_result=result.contract(), location=plan.location))
    return result


def _decide(evaluation: Evaluation, artifact: str, number: int, max_attempts: int, policy: LoopPolicy,
            flags: list[str], reviser: Runner | None) -> tuple[RecordStatus, Outcome, bool, str | None]:
    """Return (record status, outcome, stop?, reason) for a scored attempt."""
    verdict = evaluation.passed
    if verdict is None:
        return "escalated", "indeterminate", True, evaluation.indeterminate_reason
    if flags:
        return "escalated", "escalated", True, f"escalate condition raised: {', '.join(flags)}"
    low, _ = evaluation.bounds
    if verdict:
        if policy.borderline_margin and low - evaluation.threshold < policy.borderline_margin:
            return ("escalated", "escalated", True,
                    f"score {low:.2f} clears threshold {evaluation.threshold:.2f} by less than borderline_margin "
                    f"{policy.borderline_margin:.2f}: a human should decide")
        if policy.margin_required:
            close = _too_close_to_call(artifact, evaluation.rubric, policy.margin_required)
            if close:
                return "escalated", "escalated", True, close
        return "passed", "passed", True, None
    if number < max_attempts:
        return "failed", "failed", False, None
    gates = evaluation.failed_gates
    below = f"below min_score ({', '.join(gates)})" if gates else f"below threshold {evaluation.threshold:.2f}"
    why = f"{below} after {number} attempt{'s' * (number > 1)}"
    if reviser is None and policy.max_attempts > 1:
        why += " (no reviser configured, so no revision was tried)"
    if policy.escalate_on_fail:
        return "escalated", "escalated", True, why
    return "failed", "failed", True, why


def _review(plan: CasePlan, number: int, evaluation: Evaluation, scoring_started: float, started: float) -> None:
    """A review rubric's ReviewResult, recorded, then checked against its ``output_schema`` (seed 003)."""
    now = time.monotonic()
    review = evaluation.to_review(int((now - scoring_started) * 1000), int((now - started) * 1000))
    plan.events.emit(Reviewed(plan.nodeid, number, review, location=plan.location))
    errors = check_review(review, plan.rubric)
    if errors:
        raise ValidationFailed(f"validation_failed: the review does not match {plan.rubric.name}'s output_schema: "
                               f"{'; '.join(errors[:3])}", errors, json.dumps(review)[:2000])
    # (the evaluation's own calls are already in the attempt's outputs)


def _too_close_to_call(artifact: str, rubric: Rubric, margin: float) -> str | None:
    """Seed 000 section 7's margin_required: the top candidate must beat the second by ``margin``.

    Loading made sure the rubric says where the candidates and their scores are (``items.score``)."""
    assert rubric.items is not None
    ranking, problem = read_ranking(artifact, rubric.items)
    if ranking is None:
        return f"cannot rank the candidates for margin_required: {problem}: a human should choose"
    if ranking.gap is None or ranking.gap >= margin - 1e-9:
        return None
    return (f"top candidate {ranking.top!r} ({ranking.top_score:g}) beats #2 {ranking.second!r} "
            f"({ranking.second_score:g}) by {ranking.gap:g}, less than margin_required {margin:g}: "
            "a human should choose")


def _error_outcome(exc: HarnessError) -> Outcome:
    if isinstance(exc, ValidationFailed):
        return "validation_failed"
    if isinstance(exc, ModelUnavailable):
        return "indeterminate"
    return "error"


def _evaluation_output(evaluation: Evaluation) -> RunnerOutput:
    return RunnerOutput(spend=evaluation.spend)


def _finish(plan: CasePlan, number: int, started: float, status: RecordStatus, outcome: Outcome,
            evaluation: Evaluation | None, reason: str | None, outputs: list[RunnerOutput], exit_code: int, *,
            created_at: str, made: bool = True) -> AttemptResult:
    """Record the attempt; ``made`` says whether it wrote an artifact (a crashed producer made none, and the
    record then names no file that is not there)."""
    spend = Spend()
    for out in outputs:
        spend.merge(out.spend)
    usage = spend.usage
    commands = [run.wire() for out in outputs for run in out.commands] or None
    if evaluation is not None:
        dims = {name: {"score": d.score, "weight": d.weight, "reason": d.reason, "source": d.source}
                for name, d in evaluation.dimensions.items()}
        feedback = evaluation.feedback
        if reason and reason not in feedback:
            feedback = f"{feedback} {reason[0].upper()}{reason[1:]}."
        fixes = list(evaluation.suggested_fixes)
        overall = evaluation.overall
    else:
        dims, feedback, fixes, overall = {}, reason or "", [], None
    record = RunRecord(
        cycle_id=plan.location.cycle_id, agent_name=plan.agent.name, attempt=number, status=status,
        overall_score=overall, dimension_scores={k: v["score"] for k, v in dims.items()}, feedback=feedback,
        suggested_fixes=fixes, artifact_path=plan.location.shown_artifact(number) if made else "",
        created_at=created_at,
        duration_ms=int((time.monotonic() - started) * 1000), rubric_version=plan.rubric.version,
    )
    details = AttemptDetails(
        nodeid=plan.nodeid, case_id=plan.case.id, rubric_name=plan.rubric.name, threshold=plan.threshold,
        outcome=outcome, exit_code=exit_code, model=spend.model, input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, cache_write_tokens=usage.cache_write_tokens,
        cache_read_tokens=usage.cache_read_tokens, cost_usd=spend.known_cost_usd, dimensions=dims,
        samples=(evaluation.samples or None) if evaluation else None, cached_answers=spend.cached,
        model_usage=spend.by_model() or None, cost_known=spend.cost_known, commands=commands,
    )
    plan.events.emit(AttemptFinished(plan.nodeid, number, outcome, overall, spend, record, details,
                                     location=plan.location))
    return AttemptResult(attempt=number, record=record, outcome=outcome, evaluation=evaluation, spend=spend,
                         exit_code=exit_code, error=reason if evaluation is None else None,
                         commands=tuple(commands or ()))


def _utc_today():
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).date()
