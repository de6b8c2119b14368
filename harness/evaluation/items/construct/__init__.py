"""The construct kind: ``construct.yaml`` (and ``*.construct.yaml``) files, each one item whose phases run in order.

One item is one run of the construct, in a workspace of its own under its records
(``runs/{cycle}/{construct}[/{case}]/workspace``), seeded with the project files ``workspace:`` names. Each phase
is an execution with gates 1-4 and an execution result (a line of the cycle's ``execution-results.jsonl``, naming
its phase), its attempts recorded
from the shared steps (:mod:`.phases`); between two phases, a handoff checks what the sender wrote against what the
receiver needs and is written as a PhaseHandoff (``handoff-<from>-to-<to>.json``, :mod:`.handoff`). The item
passes when every phase it reached passed; it fails with the exit code of the phase where it stopped: 80 (blocked)
when a handoff with ``on_failure: block`` was rejected, its report naming the handoff, what was missing or
invalid, and the remediation. docs/constructs.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base import exit_codes
from harness.base.attempts import RunLocation
from harness.base.errors import AgentRunError, ExitCode
from harness.base.events import HandoffAttempted
from harness.base.models import Case, Rubric
from harness.base.usage import Spend
from harness.checks import CheckContext
from harness.evaluation.items.construct.artifacts import (
    READ_LIMIT,
    WORKSPACE_DIR,
    Workspace,
    text_of,
)
from harness.evaluation.items.construct.handoff import HandoffResult, attempt_handoff
from harness.evaluation.items.construct.phases import PhaseOutcome, PhaseRun
from harness.evaluation.items.kinds import (
    ItemContext,
    ItemFailed,
    ItemKind,
    ItemSpec,
    item_kind,
)
from harness.evaluation.items.result import ItemResult
from harness.evaluation.items.skill import SkillWork
from harness.evaluation.items.staged import step_models, step_runners
from harness.evaluation.runners import Runner
from harness.loading.constructs import (
    CONSTRUCT_NAMES,
    CONSTRUCT_SUFFIXES,
    Construct,
    Phase,
    load_construct,
)
from harness.records.layout import EXECUTION_RESULTS_NAME


@dataclass(frozen=True)
class PhaseWork:
    """What running one phase needs, made when the file is collected: its runners and the rubric its attempts are
    recorded under."""

    phase: Phase
    agent_name: str  # who its requests name (``<construct>.<phase>``), and ini harness_unconfined lists
    rubric: Rubric  # its goal's rubric, its skill's, or the construct's own (not scored)
    scored: bool  # gate 4: the rubric's verdict counts
    threshold: float
    runner: Runner | None = None
    judge: Runner | None = None
    kills_itself: bool = False  # a command: its runner kills it at timeout_ms

    def skill_work(self, workspace: Workspace, construct: Construct) -> SkillWork:
        """The skill's case for this phase: its ``inputs``, each ``{artifact: path}`` read from the workspace."""
        run = self.phase.skill
        assert run is not None and run.skill is not None
        inputs = {}
        for key, value in run.inputs.items():
            if isinstance(value, dict) and "artifact" in value:
                files = workspace.matches(value["artifact"])
                if not files:
                    raise AgentRunError(f"inputs.{key}: {value['artifact']} is not in the workspace, so skill "
                                        f"{run.skill_id} cannot be given it", int(ExitCode.NO_INPUT))
                value = text_of(files[0], READ_LIMIT)
            inputs[key] = value
        case = Case(id=self.phase.name, agent=run.skill_id, path=construct.path, line=self.phase.line, inputs=inputs)
        return SkillWork(run.skill, case, self.rubric)


@dataclass(frozen=True)
class ConstructWork:
    construct: Construct
    case: str  # the item's case id: the construct file's place in the project
    rubric: Rubric  # the construct's own: what its records and --rubric name it by
    phases: dict[str, PhaseWork]


@item_kind
class ConstructKind(ItemKind):
    name = "construct"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name in CONSTRUCT_NAMES or path.name.endswith(CONSTRUCT_SUFFIXES)

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        construct = load_construct(path, import_root=context.import_root, rubrics_dir=context.rubrics_dir,
                                   prompts_dir=context.prompts_dir, runner_kinds=context.runner_kinds(),
                                   input_roots=context.input_roots, check_kinds=context.check_kinds(),
                                   data_modules=context.data_modules)
        own = construct_rubric(construct)
        phases = {phase.name: _phase_work(phase, construct, own, context) for phase in construct.phases}
        models = tuple(dict.fromkeys(model for work in phases.values() for model in step_models(
            context, work.phase.agent, work.phase.skill.skill if work.phase.skill else None)))
        goals = tuple(w.rubric.name for w in phases.values() if w.scored and w.rubric is not own)
        case = _case_id(path, context.import_root)
        yield ItemSpec(name=construct.name, label=f"construct {construct.name}@{construct.version} "
                       f"({' -> '.join(p.name for p in construct.phases)})",
                       payload=ConstructWork(construct, case, own, phases), line=0,
                       rubrics=tuple(dict.fromkeys((own.name, *goals))), agent=construct.name, case=case,
                       models=models)

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> ItemResult:
        return ConstructRun(spec.payload, spec, nodeid, context).run()


def construct_rubric(construct: Construct) -> Rubric:
    """What a construct's phases without a goal are recorded under: the construct itself, nothing to score."""
    return Rubric(name=f"construct:{construct.name}", path=construct.path, title=construct.description or construct.name,
                  version=construct.version, threshold=1.0, dimensions=())


def _phase_work(phase: Phase, construct: Construct, own: Rubric, context: ItemContext) -> PhaseWork:
    skill = phase.skill.skill if phase.skill is not None else None
    how = step_runners(context, own=own, skill=skill, agent=phase.agent, rubric_path=phase.rubric_path,
                       file=construct.path, field=f"phases.{phase.name}.evaluator", what="phase")
    kills = phase.agent is not None and phase.agent.producer.kind == "command"
    return PhaseWork(phase, f"{construct.name}.{phase.name}", kills_itself=kills, **how)


def _case_id(path: Path, root: Path) -> str:
    """The construct file's place in the project (``constructs-fixed`` for constructs/fixed/construct.yaml): two files
    of one construct name keep their records apart."""
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        relative = Path(path.name)
    place = relative.parent if path.name in CONSTRUCT_NAMES else relative.with_name(
        path.name.split(".construct.")[0])
    return "-".join(place.parts) or path.parent.name or "construct"


class ConstructRun:
    """One run of a construct item: its phases in order, the handoffs between them, its result."""

    def __init__(self, work: ConstructWork, spec: ItemSpec, nodeid: str, context: ItemContext):
        self.work, self.construct, self.case = work, work.construct, work.case
        self.nodeid, self.context, self.events = nodeid, context, context.events
        self.location: RunLocation = context.item_run(nodeid, spec, work.rubric).location
        self.workspace = Workspace(self.location.directory / WORKSPACE_DIR)

    def phase_location(self, phase: str) -> RunLocation:
        """Where a phase's attempts are recorded: ``phases/<phase>`` in the item's folder."""
        shown = self.location.shown_directory
        return dataclasses.replace(self.location, directory=self.location.directory / "phases" / phase,
                                   shown_directory=None if shown is None else f"{shown}/phases/{phase}")

    def check_context(self) -> CheckContext:
        return CheckContext(inputs=dict(self.construct.vars), today=dt.datetime.now(dt.timezone.utc).date())

    def run(self) -> ItemResult:
        self.workspace.reset(self.construct.workspace)
        outcomes: list[PhaseOutcome] = []
        incoming: HandoffResult | None = None
        stopped: PhaseOutcome | None = None
        for index, phase in enumerate(self.construct.phases):
            if stopped is not None:
                outcomes.append(PhaseOutcome(phase.name, "not_run"))
                continue
            skipped = self._skip_reason(phase, incoming)
            if incoming is not None and incoming.decision == "block":
                outcome = PhaseRun(self, index, incoming).blocked()
            elif skipped:
                outcome = PhaseOutcome(phase.name, "skipped", reason=skipped, outgoing=self._handoff_from(index))
            else:
                outcome = PhaseRun(self, index, incoming).run()
            outcomes.append(outcome)
            incoming = outcome.outgoing
            handed_on = outcome.outgoing is not None and outcome.outgoing.decision == "block"
            if outcome.status == "blocked" or (outcome.exit_code not in (None, 0) and not handed_on):
                stopped = outcome
        return self._result(outcomes, stopped)

    def _skip_reason(self, phase: Phase, incoming: HandoffResult | None) -> str | None:
        if incoming is not None and incoming.decision == "skip":
            return f"handoff {incoming.handoff.name} failed (on_failure: skip): {incoming.record['rejection_reason']}"
        if phase.skill is not None and phase.skill.skill is None:
            return f"its skill {phase.skill.skill_id} is optional (skills[].required: false) and not in skills/"
        return None

    def _handoff_from(self, index: int) -> HandoffResult | None:
        """The handoff from a phase that did not run to the next: the workspace as the phases before left it."""
        if index >= len(self.construct.handoffs):
            return None
        result = attempt_handoff(self.construct.handoffs[index], self.construct, self.workspace, [],
                                 nodeid=self.nodeid, cycle_id=self.location.cycle_id)
        self.events.emit(HandoffAttempted(self.nodeid, result.record, location=self.location))
        return result

    # -- the result -------------------------------------------------------------------------------------

    def _result(self, outcomes: list[PhaseOutcome], stopped: PhaseOutcome | None) -> ItemResult:
        code = 0 if stopped is None else int(stopped.exit_code or 0)
        spend = Spend()
        for outcome in outcomes:
            spend.merge(outcome.spend)
        usage = spend.usage
        handoffs = {o.outgoing.handoff.name: o.outgoing.decision for o in outcomes if o.outgoing is not None}
        facts: dict[str, Any] = {"phases": json.dumps({o.name: o.status for o in outcomes}),
                                 "handoffs": json.dumps(handoffs),
                                 "exit_meaning": exit_codes.name(code, self.construct.exit_names)}
        if stopped is not None and stopped.status == "blocked":
            facts["blocked_by"] = next(o.outgoing.handoff.name for o in outcomes if o.outgoing is not None
                                       and o.outgoing.decision == "block")
        outcome = "passed" if code == 0 else "validation_failed" if code == ExitCode.VALIDATION_FAILED else "failed"
        result = ItemResult(
            outcome=outcome, kind=ConstructKind.name, exit_code=code, agent=self.construct.name, case=self.case,
            rubric=self.work.rubric.name, cycle=self.location.cycle_id, attempts=sum(o.attempts for o in outcomes),
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_write_tokens, cache_read_tokens=usage.cache_read_tokens,
            cost_usd=spend.known_cost_usd, artifact=self.location.shown_directory, facts=facts, staged=True)
        if stopped is None:
            return result
        raise ItemFailed(self._report(outcomes, stopped, code), result)

    def _report(self, outcomes: list[PhaseOutcome], stopped: PhaseOutcome, code: int) -> str:
        """The failure report: where it stopped and why, each phase's end, the fixes, where the records are."""
        meaning = exit_codes.name(code, self.construct.exit_names)
        name = self.construct.name
        if stopped.status == "blocked":
            handoff = next(o.outgoing for o in outcomes if o.outgoing is not None and o.outgoing.decision == "block")
            record = handoff.record
            later = [o.name for o in outcomes if o.status in ("blocked", "not_run")]
            lines = [(f"construct {name} blocked at handoff {handoff.handoff.name} (exit {code}, {meaning}): "
                      f"{', '.join(later)} did not run"),
                     f"  {handoff.handoff.to_phase} did not accept what {handoff.handoff.from_phase} handed on:"]
            lines += [f"    - {problem}" for problem in record["validation"]["blockers"]]
            if record["artifacts"]["missing"]:
                lines.append(f"  missing: {', '.join(record['artifacts']['missing'])}")
            lines.append(f"  remediation: {record['remediation']}")
        else:
            lines = [f"construct {name} failed in phase {stopped.name} (exit {code}, {meaning})",
                     f"  {stopped.reason}" if stopped.reason else ""]
        lines.append("  phases:")
        lines += [f"    {o.name}: {o.status}" + (f" (exit {o.exit_code})" if o.exit_code is not None else "")
                  + (f", {o.attempts} attempts" if o.attempts > 1 else "") + _said(o) for o in outcomes]
        where = self.location.shown_directory or str(self.location.directory)
        lines.append(f"  records: {where} (handoff-<from>-to-<to>.json, workspace/); each phase's execution result: "
                     f"{self.location.shown_cycle_file(EXECUTION_RESULTS_NAME)}")
        return "\n".join(line for line in lines if line)


def _said(outcome: PhaseOutcome) -> str:
    """What a phase's line in the report adds: why it was skipped, or that the next phase rejected its output."""
    if outcome.status == "skipped":
        return f": {outcome.reason}"
    if outcome.outgoing is not None and outcome.outgoing.decision == "block":
        return f": {outcome.outgoing.handoff.to_phase} rejected its output"
    return ""
