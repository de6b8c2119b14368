"""The case kind: ``*.cases.yaml`` (cases, or a dataset's rows), each case one item run by the loop engine.

A case file's agents come from the nearest ``agents.yaml`` in its folder or above it; each agent's rubric and
runners are made once per file and shared by its cases, and each case gets its own rubric (its criteria and
checks added, its slots filled) after every slot it must fill is checked, before any model is called.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import HarnessConfigError
from harness.base.models import AgentConfig, Case, Rubric
from harness.evaluation.engine import CasePlan, run_loop
from harness.evaluation.judge_program import JudgeProgramRunner
from harness.evaluation.items.kinds import ItemContext, ItemKind, ItemSpec, item_kind
from harness.evaluation.items.result import item_title
from harness.evaluation.runners import Runner
from harness.evaluation.steps import LoopResult
from harness.loading import load_cases
from harness.loading.per_case import CaseFit

CASE_SUFFIXES = (".cases.yaml", ".cases.yml")
AGENTS_FILE = "agents.yaml"
ROLES = ("producer", "reviser", "evaluator")

FREEZE_AT = 5_000
"""A case file of this many items or more is frozen out of the garbage collector once collected."""


@dataclass(frozen=True)
class CaseWork:
    """What one case item runs: the case, its agent, its own rubric and the agent's runners."""

    case: Case
    agent: AgentConfig
    rubric: Rubric
    runners: dict[str, Runner]


def collected_without_gc(collect: Callable[..., Iterable[ItemSpec]]) -> Callable[..., list[ItemSpec]]:
    """``collect`` with the garbage collector paused, and a large collection frozen (``gc.freeze()``) after.

    A case file's items are long-lived objects built in one go (a 100,000-row dataset is millions of them):
    collecting while they are built only walks them again and again, and so does every full collection of the
    session, and the one at interpreter exit (half of a 100,000-row ``--collect-only``, benchmarks/README.md).
    They live as long as the session, as the SDK's objects do (harness/llm/providers/anthropic.py). Small files
    are not frozen, so a process that runs many sessions (pytester's in-process runs) can still free them."""

    @functools.wraps(collect)
    def paused(*args: object, **kwargs: object) -> list[ItemSpec]:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            items = list(collect(*args, **kwargs))
            if len(items) >= FREEZE_AT:
                gc.freeze()
            return items
        finally:
            if was_enabled:
                gc.enable()

    return paused


def find_agents_file(start: Path, root: Path) -> Path | None:
    """The nearest agents.yaml in the case file's folder or above it, up to the project root."""
    for folder in (start, *start.parents):
        candidate = folder / AGENTS_FILE
        if candidate.is_file():
            return candidate
        if folder == root:
            break
    return None


@item_kind
class CaseKind(ItemKind):
    name = "case"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name.endswith(CASE_SUFFIXES)

    @collected_without_gc
    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        agents_path = find_agents_file(path.parent, context.import_root)
        if agents_path is None:
            raise HarnessConfigError(path, None, f"no {AGENTS_FILE} in this folder or above it",
                                     f"create {AGENTS_FILE} next to the suites (see README)")
        suite = context.suite(agents_path)
        cases = load_cases(path, agents=suite.agents, input_roots=context.input_roots,
                           import_root=context.import_root, check_kinds=context.check_kinds(),
                           data_modules=context.data_modules)
        # an agent with variants runs each case once per variant: its runners made per variant
        runs_of = {name: suite.agents[name].variants or (suite.agents[name],)
                   for name in dict.fromkeys(c.agent for c in cases)}
        prepared = {(agent.name, agent.variant): self._prepare(context, agent)
                    for agents in runs_of.values() for agent in agents}
        for case in cases:
            for agent in runs_of[case.agent]:
                fit, runners = prepared[agent.name, agent.variant]
                # the case's rubric (its own criteria and checks, its slots filled), every slot checked before a call
                rubric = fit.rubric_for(case)
                yield ItemSpec(name=f"{case.id}[{agent.variant}]" if agent.variant else case.id,
                               label=f"{item_title(agent.name, case.id, agent.variant)} scored by {rubric.name}",
                               payload=CaseWork(case, agent, rubric, runners), line=case.line,
                               rubrics=tuple(filter(None, (rubric.name, rubric.rubric_id))), agent=agent.name,
                               case=case.id, variant=agent.variant, threshold=agent.policy.threshold_for(rubric),
                               models=fit.models, escalation_fails_gate=agent.policy.escalation_fails_gate)

    def _prepare(self, context: ItemContext, agent: AgentConfig) -> tuple[_AgentFit, dict[str, Runner]]:
        """The rubric and runners of an agent, shared by all its cases in this file."""
        rubric = context.rubric(agent.rubric_path)
        if agent.policy.margin_required and (rubric.items is None or rubric.items.score is None):
            raise HarnessConfigError(agent.producer.file, f"agents.{agent.name}.margin_required",
                                     f"compares the top two candidates of a ranked artifact, but rubric {rubric.name} "
                                     "does not say where they are", f"add `items: {{path: candidates, score: score}}` "
                                     f"to {rubric.path.name}, or remove margin_required")
        if rubric.judged_dimensions and agent.evaluator is None:  # a case adding criteria is checked at its rubric
            names = ", ".join(d.id for d in rubric.judged_dimensions)
            raise HarnessConfigError(agent.producer.file, f"agents.{agent.name}.evaluator",
                                     f"rubric {rubric.name} has dimensions without a check ({names}) but the "
                                     "agent has no evaluator", "add `evaluator:` (an evaluator prompt .md)")
        runners = {}
        for role in ROLES:
            spec = getattr(agent, role)
            if spec is None:
                continue
            runner = context.make_runner(spec, role, agent)
            if runner is None:
                raise HarnessConfigError(spec.file, spec.field, f"no plugin builds runners of kind {spec.kind!r}",
                                         "install the plugin that provides it or use prompt/template/python/command")
            runners[role] = runner
        names = [context.model_name(agent, role) for role in agent.models]
        judging = agent.models.get("evaluator", agent.judge)
        if "evaluator" in agent.models and not context.judge_model:  # the cost cap checks every judge's price
            names += [*(judging.ensemble.names if judging.ensemble else ()),
                      *((judging.cascade.first.qualified,) if judging.cascade else ())]  # an ensemble's, a cascade's
        models = tuple(dict.fromkeys(names))
        judge = runners.get("evaluator")
        program = judge.program if isinstance(judge, JudgeProgramRunner) else None  # its case slots are checked too
        return _AgentFit(CaseFit(agent, rubric, program), models), runners

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> LoopResult:
        work: CaseWork = spec.payload
        run = context.item_run(nodeid, spec, work.rubric)
        return run_loop(CasePlan(nodeid=nodeid, case=work.case, agent=work.agent, rubric=work.rubric,
                                 threshold=run.threshold, producer=work.runners["producer"],
                                 reviser=work.runners.get("reviser"), judge=work.runners.get("evaluator"),
                                 location=run.location, judge_samples=context.judge_samples, stop=run.stop,
                                 events=run.events, capture=run.capture))


@dataclass(frozen=True)
class _AgentFit:
    """An agent's case fit and the models its roles call (for the cost cap's check)."""

    fit: CaseFit
    models: tuple[str, ...]

    def rubric_for(self, case: Case) -> Rubric:
        return self.fit.rubric_for(case)
