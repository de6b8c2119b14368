"""The loop engine (seed 000 section 6): produce, evaluate, revise until the threshold or the limit.

The case kind's run, from the shared steps (:mod:`harness.evaluation.steps`): each attempt produces (the
producer, then the reviser with the last evaluation's feedback), is evaluated and decided by the agent's loop
policy. The engine writes nothing itself: the steps emit the item's life to ``plan.events`` and the session's
record writer (a required sink) records it.

A conversation case (docs/conversations.md) is answered turn by turn (:class:`~harness.evaluation.runners.Conversing`),
its transcript the artifact; it is never revised: one attempt, run again only after an error that calls for a retry.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from harness.base.capture import Capture
from harness.base.conversation import Conversation
from harness.base.events import Events
from harness.base.models import AgentConfig, Case, LoopPolicy, Outcome, RecordStatus, Rubric
from harness.base.requests import AgentRequest, Subject
from harness.base.stop import StopFlag
from harness.checks import CheckContext
from harness.evaluation.artifact_items import read_ranking
from harness.evaluation.conversation import Conversing
from harness.evaluation.evaluate import Evaluation
from harness.evaluation.runners import Runner
from harness.evaluation.steps import Attempt, ItemRun, LoopResult
from harness.loading.cases import SELECTION_DIMENSION
from harness.records import RunLocation


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
    capture: Capture = field(default_factory=Capture)  # what its execution result keeps of inputs and outputs


def run_loop(plan: CasePlan) -> LoopResult:
    """Produce, evaluate and revise one case until it passes or its attempts run out."""
    policy = plan.agent.policy
    case = plan.case
    talk = Conversation(case.turns, case.system) if case.turns else None
    context = CheckContext(inputs=case.inputs, today=case.today or dt.datetime.now(dt.timezone.utc).date(),
                           expected=case.expected, input_text=talk.user_text if talk else None)
    max_attempts = policy.max_attempts if plan.reviser is not None and talk is None else 1
    run = ItemRun(plan.nodeid, plan.agent.name, case.id, plan.rubric, plan.threshold, plan.location, plan.events,
                  plan.stop, capture=plan.capture, variant=plan.agent.variant)
    run.start(max_attempts, operator_type=plan.agent.producer.kind, inputs=case.inputs,
              goal=case.description or plan.rubric.description or plan.rubric.title,
              selection=SELECTION_DIMENSION if case.selection else None, expected=case.expected,
              description=case.description)
    retries = 0  # attempts run again after an error whose exit code calls for a retry
    number = 0
    while number < max_attempts + retries:
        number += 1
        stop = False
        with run.attempt() as attempt:
            maker, request = _maker(plan, run, number)
            conversing = Conversing(maker, talk) if talk is not None else None  # answers each turn, in order
            attempt.produce(conversing or maker, request)
            last = number == max_attempts + retries
            about = Subject(plan.agent.name, case.id, number, case.inputs, case.expected,
                            conversation=conversing.conversation if conversing else None)
            evaluation = attempt.evaluate(judge=plan.judge, context=context, samples=plan.judge_samples, about=about,
                                          revision_follows=not last, always_judge=policy.always_judge)
            status, outcome, stop, reason = _decide(evaluation, attempt, number, max_attempts + retries, policy,
                                                   [f for f in (*case.flags, *attempt.flags)
                                                    if f in policy.escalate_conditions], plan.reviser,
                                                   revised=talk is None)
            attempt.finish(status, outcome, reason)
        if run.failed:
            if run.last.triage == "retry" and retries < policy.max_retries:
                retries += 1
                continue
            break
        if stop:
            break
    return run.finish()


def _maker(plan: CasePlan, run: ItemRun, number: int) -> tuple[Runner, AgentRequest]:
    """Who makes attempt ``number``'s artifact, and what they are asked: the producer first, then the reviser
    with the last artifact, its evaluation and the suggested fixes."""
    agent, case = plan.agent.name, plan.case
    last = run.last if run.attempts else None
    if last is None or last.evaluation is None or plan.reviser is None:  # the first, or a retry after an error
        return plan.producer, AgentRequest("producer", agent, case.id, number, case.inputs)
    previous = last.evaluation.to_output().model_dump(mode="json")
    return plan.reviser, AgentRequest("reviser", agent, case.id, number, case.inputs, artifact=run.last_artifact or "",
                                      evaluation=previous, suggested_fixes=tuple(previous["suggestedFixes"]))


def _decide(evaluation: Evaluation, attempt: Attempt, number: int, max_attempts: int, policy: LoopPolicy,
            flags: list[str], reviser: Runner | None, *, revised: bool = True
            ) -> tuple[RecordStatus, Outcome, bool, str | None]:
    """Return (record status, outcome, stop?, reason) for a scored attempt (``revised`` False: a conversation,
    which its reviser never revises)."""
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
            close = _too_close_to_call(attempt.artifact or "", evaluation.rubric, policy.margin_required)
            if close:
                return "escalated", "escalated", True, close
        return "passed", "passed", True, None
    if number < max_attempts:
        return "failed", "failed", False, None
    gates = evaluation.failed_gates
    below = f"below min_score ({', '.join(gates)})" if gates else f"below threshold {evaluation.threshold:.2f}"
    why = f"{below} after {number} attempt{'s' * (number > 1)}"
    if not revised and reviser is not None:
        why += " (a conversation is not revised)"
    elif reviser is None and policy.max_attempts > 1:
        why += " (no reviser configured, so no revision was tried)"
    if policy.escalate_on_fail:
        return "escalated", "escalated", True, why
    return "failed", "failed", True, why


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
