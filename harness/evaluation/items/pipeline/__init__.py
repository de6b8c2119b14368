"""The pipeline kind: ``*.pipeline.yaml`` files, each case (or dataset row) one item whose stages run in order.

One item is one run of the pipeline on one case, in a workspace of its own under its records
(``runs/{cycle}/{pipeline}[/{case}]/workspace``). Each stage is an execution with gates 1-4 and an execution
result (:mod:`.stages`), its attempt recorded from the shared steps under ``stages/<stage>/``; between two stages a
PhaseHandoff checks the sender's output (its type and its checks) before the receiver is given it. The
PipelineContext, every earlier stage's output by name, is handed to each stage and written to
``pipeline-context.json`` when the run ends. The item passes when every stage it reached passed and no handoff
blocked; it fails at the first stage whose handoff was rejected (exit code 80, the report naming the stage and
what it saw) or whose run or goal failed. A case with ``blocked_at: <stage>`` passes only when that stage's
handoff blocks it: a guard's negative test. A pipeline with ``memory:`` runs its items one after another, in
collection order: each learns from the ones before it. docs/pipelines.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base import exit_codes
from harness.base.attempts import RunLocation
from harness.base.errors import ExitCode
from harness.base.fileio import atomic_write_json
from harness.base.models import Rubric
from harness.base.usage import Spend
from harness.evaluation.items.kinds import (
    ItemContext,
    ItemFailed,
    ItemKind,
    ItemSkipped,
    ItemSpec,
    item_kind,
)
from harness.evaluation.items.pipeline.stages import StageOutcome, StageRun
from harness.evaluation.items.result import ItemResult
from harness.evaluation.items.staged import step_models, step_runners
from harness.evaluation.runners import Runner
from harness.loading.pipelines import PIPELINE_SUFFIXES, Pipeline, PipelineCase, Stage, load_pipeline
from harness.records.layout import EXECUTION_RESULTS_NAME

WORKSPACE_DIR = "workspace"
CONTEXT_FILE = "pipeline-context.json"
MEMORY_DIR = "memory"  # WORK/memory/<name>: what a pipeline's stages remember across cycles


@dataclass(frozen=True)
class StageWork:
    """What running one stage needs, made when the file is collected: its runners and the rubric it is recorded
    under."""

    stage: Stage
    agent_name: str  # who its requests name (``<pipeline>.<stage>``), and ini harness_unconfined lists
    rubric: Rubric  # its goal's rubric, its skill's, or the pipeline's own (not scored)
    scored: bool
    threshold: float
    runner: Runner | None = None
    judge: Runner | None = None


@dataclass(frozen=True)
class PipelineWork:
    pipeline: Pipeline
    case: PipelineCase
    rubric: Rubric  # the pipeline's own: what its records and --rubric name it by
    stages: dict[str, StageWork]


@item_kind
class PipelineKind(ItemKind):
    name = "pipeline"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name.endswith(PIPELINE_SUFFIXES)

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        pipeline = load_pipeline(path, import_root=context.import_root, rubrics_dir=context.rubrics_dir,
                                 prompts_dir=context.prompts_dir, runner_kinds=context.runner_kinds(),
                                 input_roots=context.input_roots, check_kinds=context.check_kinds(),
                                 data_modules=context.data_modules)
        own = pipeline_rubric(pipeline)
        stages = {stage.name: _stage_work(stage, pipeline, own, context) for stage in pipeline.stages}
        models = tuple(dict.fromkeys(model for work in stages.values()
                                     for model in step_models(context, work.stage.agent, work.stage.skill)))
        goals = tuple(dict.fromkeys(w.rubric.name for w in stages.values() if w.scored and w.rubric is not own))
        scored = [w for w in stages.values() if w.scored]
        threshold = scored[-1].threshold if scored else None
        for case in pipeline.cases:
            yield ItemSpec(name=case.case.id, label=f"pipeline {pipeline.name}@{pipeline.version}[{case.case.id}]",
                           payload=PipelineWork(pipeline, case, own, stages), line=case.case.line,
                           rubrics=(own.name, *goals), agent=pipeline.name, case=case.case.id, threshold=threshold,
                           models=models, concurrent=pipeline.memory is None)

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> ItemResult:
        return PipelineRun(spec.payload, spec, nodeid, context).run()


def pipeline_rubric(pipeline: Pipeline) -> Rubric:
    """What a pipeline's stages without a goal are recorded under: the pipeline itself, nothing to score."""
    return Rubric(name=f"pipeline:{pipeline.name}", path=pipeline.path, title=pipeline.description or pipeline.name,
                  version=pipeline.version, threshold=1.0, dimensions=())


def _stage_work(stage: Stage, pipeline: Pipeline, own: Rubric, context: ItemContext) -> StageWork:
    how = step_runners(context, own=own, skill=stage.skill, agent=stage.agent, rubric_path=stage.rubric_path,
                       file=pipeline.path, field=f"stages[{stage.index}].evaluator", what="stage")
    return StageWork(stage, f"{pipeline.name}.{stage.name}", **how)


class PipelineRun:
    """One run of a pipeline item: its stages in order, the handoffs between them, its result."""

    def __init__(self, work: PipelineWork, spec: ItemSpec, nodeid: str, context: ItemContext):
        self.work, self.pipeline, self.case = work, work.pipeline, work.case.case
        self.nodeid, self.context, self.events = nodeid, context, context.events
        run = context.item_run(nodeid, spec, work.rubric)
        self.location: RunLocation = run.location
        self.context_capture = run.capture
        self.workspace = self.location.directory / WORKSPACE_DIR
        self.memory = (context.work_dir / MEMORY_DIR / self.pipeline.memory) if self.pipeline.memory else None
        self.outputs: dict[str, Any] = {}  # the PipelineContext: every stage's output handed on, by name

    def stage_location(self, stage: str) -> RunLocation:
        """Where a stage's attempts are recorded: ``stages/<stage>`` in the item's folder."""
        shown = self.location.shown_directory
        return dataclasses.replace(self.location, directory=self.location.directory / "stages" / stage,
                                   shown_directory=None if shown is None else f"{shown}/stages/{stage}")

    def run(self) -> ItemResult:
        if self.workspace.exists():
            shutil.rmtree(self.workspace)
        self.workspace.mkdir(parents=True)
        if self.memory is not None:
            self.memory.mkdir(parents=True, exist_ok=True)
        outcomes: list[StageOutcome] = []
        incoming: dict[str, Any] | None = None
        stopped: StageOutcome | None = None
        stages = self.pipeline.stages
        for index, stage in enumerate(stages):
            if stopped is not None:
                outcomes.append(StageOutcome(stage.name, "not_run"))
                continue
            if incoming is not None and incoming["decision"] == "skip":
                outcomes.append(StageOutcome(stage.name, "skipped", reason=f"handoff {incoming['handoff']} failed "
                                             f"(on_failure: skip): {incoming['validation']['blockers'][0]}"))
                incoming = None
                continue
            runner = StageRun(self, self.work.stages[stage.name], incoming)
            if incoming is not None and incoming["decision"] == "block":
                stopped = runner.blocked()
                outcomes.append(stopped)
                continue
            outcome = runner.run(stages[index + 1].name if index + 1 < len(stages) else None)
            outcomes.append(outcome)
            incoming = outcome.handoff
            handed_on = incoming["accepted"] if incoming is not None else outcome.exit_code != ExitCode.VALIDATION_FAILED
            if outcome.output is not None and handed_on:
                self.outputs[stage.name] = outcome.output
            if outcome.status in ("failed", "not_scored") and outcome.output is None:
                stopped = outcome  # it made nothing to hand on
        atomic_write_json(self.location.directory / CONTEXT_FILE, self.outputs)
        return self._result(outcomes)

    # -- the result -------------------------------------------------------------------------------------

    def _result(self, outcomes: list[StageOutcome]) -> ItemResult:
        failed = next((o for o in outcomes if o.status in ("failed", "blocked")), None)
        blocked = next((o for o in outcomes if o.status == "blocked"), None)
        code = int(blocked.exit_code) if blocked is not None else int(failed.exit_code or 1) if failed else 0
        spend = Spend()
        for outcome in outcomes:
            spend.merge(outcome.spend)
        usage = spend.usage
        scored = [o for o in outcomes if o.evaluation is not None and o.evaluation.overall is not None]
        goal = scored[-1] if scored else None
        facts: dict[str, Any] = {"stages": json.dumps({o.name: o.status for o in outcomes}),
                                 "stage_ms": json.dumps({o.name: round(o.duration_ms, 1) for o in outcomes
                                                         if o.status not in ("not_run", "skipped")}),
                                 "exit_meaning": exit_codes.name(code)}
        expected = self.work.case.blocked_at
        unscored = next((o for o in outcomes if o.status == "not_scored"), None)
        if unscored is not None and failed is None and blocked is None:  # honest: not run to the end, not judged
            raise ItemSkipped(f"not scored: stage {unscored.name}: {unscored.reason}")
        if blocked is not None:
            facts["blocked_at"] = self._sender(outcomes, blocked).name
        as_expected = expected is not None and blocked is not None and facts["blocked_at"] == expected
        outcome = "passed" if code == 0 or as_expected else (
            "validation_failed" if code == ExitCode.VALIDATION_FAILED else "failed")
        result = ItemResult(
            outcome=outcome, kind=PipelineKind.name, exit_code=0 if as_expected else code, agent=self.pipeline.name,
            case=self.case.id, rubric=(goal and self.work.stages[goal.name].rubric.name) or self.work.rubric.name,
            cycle=self.location.cycle_id, score=goal.evaluation.overall if goal and goal.evaluation else None,
            threshold=self.work.stages[goal.name].threshold if goal else None,
            attempts=sum(o.attempts for o in outcomes), input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens, cache_write_tokens=usage.cache_write_tokens,
            cache_read_tokens=usage.cache_read_tokens, cost_usd=spend.known_cost_usd,
            artifact=self.location.shown_directory, facts=facts, staged=True)
        if expected is not None and not as_expected:
            said = (f"it was blocked at {facts['blocked_at']}" if blocked is not None else
                    "it was not blocked")
            raise ItemFailed(f"pipeline {self.pipeline.name}[{self.case.id}] should be blocked at {expected}, but "
                             f"{said}\n{self._table(outcomes)}", dataclasses.replace(result, outcome="failed",
                                                                                      exit_code=code or 1))
        if as_expected or (failed is None and code == 0):
            return result
        raise ItemFailed(self._report(outcomes, blocked or failed, code), result)  # type: ignore[arg-type]

    @staticmethod
    def _sender(outcomes: list[StageOutcome], blocked: StageOutcome) -> StageOutcome:
        """The stage whose handoff blocked ``blocked``: the one before it."""
        return outcomes[[o.name for o in outcomes].index(blocked.name) - 1]

    def _report(self, outcomes: list[StageOutcome], stopped: StageOutcome, code: int) -> str:
        """The failure report: where it stopped and why, each stage as a row, where the records are."""
        name = f"{self.pipeline.name}[{self.case.id}]"
        meaning = exit_codes.name(code)
        if stopped.status == "blocked":
            sender = self._sender(outcomes, stopped)
            handoff = sender.handoff or {}
            later = [o.name for o in outcomes if o.status in ("blocked", "not_run")]
            lines = [f"pipeline {name} blocked at stage {sender.name} (exit {code}, {meaning}): {', '.join(later)} "
                     "did not run",
                     f"  {stopped.name} did not accept what {sender.name} handed on:"]
            lines += [f"    - {problem}" for problem in handoff.get("validation", {}).get("blockers", [])]
            if handoff.get("remediation"):
                lines.append(f"  remediation: {handoff['remediation']}")
        else:
            lines = [f"pipeline {name} failed at stage {stopped.name} (exit {code}, {meaning})",
                     f"  {stopped.reason}" if stopped.reason else ""]
        lines.append(self._table(outcomes))
        where = self.location.shown_directory or str(self.location.directory)
        lines.append(f"  records: {where} (stages/<stage>/, {CONTEXT_FILE}, workspace/); each stage's execution "
                     f"result: {self.location.shown_cycle_file(EXECUTION_RESULTS_NAME)}")
        return "\n".join(line for line in lines if line)

    @staticmethod
    def _table(outcomes: list[StageOutcome]) -> str:
        """The stages as a table: status, exit code, time, score, and what the handoff decided."""
        width = max(len("stage"), *(len(o.name) for o in outcomes))
        rows = [f"  {'stage':<{width}}  {'status':<11} {'exit':>4} {'ms':>8}  {'score':>5}  handoff"]
        for o in outcomes:
            ran = o.status not in ("not_run", "skipped")
            score = o.evaluation.overall if o.evaluation is not None else None
            rows.append(f"  {o.name:<{width}}  {o.status:<11} {'' if o.exit_code is None else o.exit_code:>4} "
                        f"{f'{o.duration_ms:.0f}' if ran else '':>8}  {'' if score is None else f'{score:.2f}':>5}  "
                        f"{_handoff_word(o)}")
        return "\n".join(rows)


def _handoff_word(outcome: StageOutcome) -> str:
    if outcome.status == "skipped":
        return outcome.reason
    decision = outcome.handed_on
    if decision is None:
        return ""
    return {"proceed": "accepted", "proceed_with_warnings": "accepted with warnings", "block": "rejected: blocks",
            "skip": "rejected: next skipped"}[decision]
