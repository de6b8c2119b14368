"""pytest File and Item classes: rubric files and case files become items."""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.models import DEFAULT_THRESHOLD, AgentConfig, Case, Rubric
from harness.base.requests import Subject
from harness.base.stop import StopRequested
from harness.checks import CheckContext, CheckParser, with_plugin_kinds
from harness.evaluation.engine import CasePlan, LoopResult, run_loop
from harness.evaluation.evaluate import evaluate
from harness.evaluation.runners import Runner
from harness.face.report_text import failure_table, progress_printer
from harness.face.session import HarnessSession, harness_session
from harness.loading import load_cases, load_rubric, load_suite
from harness.loading.per_case import CaseFit
from harness.loading.versioning import check_version_bump

# An attempt cut short because the session stopped (-x, Ctrl-C, the cost cap): not a verdict.
STOPPED_EXIT_CODES = (int(ExitCode.INCOMPLETE), int(ExitCode.QUOTA_EXCEEDED))
AGENTS_FILE = "agents.yaml"
CASE_COUNTS = pytest.StashKey[dict[str, int]]()


class CaseFailed(Exception):
    """A case did not pass; ``repr_failure`` turns it into a dimension table."""

    def __init__(self, item: CaseItem, result: LoopResult):
        super().__init__(result.outcome)
        self.item = item
        self.result = result


class CalibrationFailed(Exception):
    """A gold example scored below the threshold, or an anti-pattern at or above it."""


def load_rubric_once(hs: HarnessSession, path: Path) -> Rubric:
    return hs.cached("rubric", path, lambda: load_rubric(path, import_root=hs.import_root,
                                                         check_kinds=check_kinds(hs.config),
                                                         input_roots=hs.input_roots))


def check_kinds(config: pytest.Config) -> Mapping[str, CheckParser]:
    """The built-in check kinds plus those plugins add (``pytest_harness_check_kinds``). Each plugin's hook is
    called on its own, so that a kind shadowing another is refused naming the plugin (a conftest by its file)."""
    impls = config.hook.pytest_harness_check_kinds.get_hookimpls()
    return with_plugin_kinds((getattr(impl.plugin, "__file__", None) or impl.plugin_name, impl.function())
                             for impl in impls if not (impl.hookwrapper or impl.wrapper))


def runner_kinds(config: pytest.Config) -> list[str]:
    kinds: list[str] = []
    for names in config.hook.pytest_harness_runner_kinds():
        kinds.extend(n for n in names if n not in kinds)
    return kinds


def find_agents_file(start: Path, root: Path) -> Path | None:
    """The nearest agents.yaml in the case file's folder or above it, up to the rootdir."""
    for folder in (start, *start.parents):
        candidate = folder / AGENTS_FILE
        if candidate.is_file():
            return candidate
        if folder == root:
            break
    return None


# --- rubric files ------------------------------------------------------------------------------


class RubricFile(pytest.File):
    """``rubrics/NAME.yaml``: one item for validity, one per calibration example."""

    def collect(self) -> Iterator[pytest.Item]:
        hs = harness_session(self.config)
        rubric = self._load(hs)
        yield RubricValidItem.from_parent(self, name="valid", rubric=rubric)
        threshold = rubric.effective_threshold(DEFAULT_THRESHOLD)
        for kind, paths in (("gold", rubric.examples.gold), ("anti", rubric.examples.anti_patterns)):
            for example in paths:
                yield CalibrationItem.from_parent(self, name=f"{kind}[{example.stem}]", rubric=rubric,
                                                  example=example, gold=kind == "gold", threshold=threshold)

    def _load(self, hs: HarnessSession) -> Rubric:
        try:
            return load_rubric_once(hs, self.path)
        except HarnessConfigError as exc:
            raise self.CollectError(exc.message(self.config.rootpath)) from None


class HarnessItem(pytest.Item):
    rubric: Rubric

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"{self.rubric.name}: {self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        """Our own failures are one readable line, never a traceback."""
        if isinstance(excinfo.value, HarnessConfigError):
            return excinfo.value.message(self.config.rootpath)
        if isinstance(excinfo.value, (CalibrationFailed, HarnessError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)


class RubricValidItem(HarnessItem):
    def __init__(self, *, rubric: Rubric, **kwargs: Any):
        super().__init__(**kwargs)
        self.rubric = rubric

    def runtest(self) -> None:
        """Parsing validated the file; what is left is its version against the last committed one."""
        check_version_bump(self.rubric)


class CalibrationItem(HarnessItem):
    """Seed 000 section 8: gold examples score at or above the threshold, anti-patterns below it."""

    def __init__(self, *, rubric: Rubric, example: Path, gold: bool, threshold: float, **kwargs: Any):
        super().__init__(**kwargs)
        self.rubric, self.example, self.gold, self.threshold = rubric, example, gold, threshold

    def runtest(self) -> None:
        hs = harness_session(self.config)
        judge = _calibration_judge(self.config, hs, self.rubric)
        context = CheckContext(inputs=self.rubric.examples.inputs, today=_examples_today(self.rubric),
                               expected=self.rubric.examples.expected)
        evaluation = evaluate(self.example.read_text(encoding="utf-8"), rubric=self.rubric, threshold=self.threshold,
                              context=context, judge=judge,
                              about=Subject(self.rubric.agent or "", self.example.stem, 1,
                                            dict(self.rubric.examples.inputs), self.rubric.examples.expected),
                              revision_follows=False)
        low, high = evaluation.bounds
        score = f"{low:.2f}" if low == high else f"{low:.2f}..{high:.2f}"
        self.user_properties.append(("harness_rubric", self.rubric.name))
        if evaluation.passed is None:
            raise pytest.skip.Exception(f"{evaluation.indeterminate_reason}; calibration not decided ({score})",
                                        _use_item_location=True)
        if evaluation.passed != self.gold:
            expected = "at or above" if self.gold else "below"
            dims = "; ".join(f"{name} {d.score:.2f} ({d.reason})" for name, d in evaluation.dimensions.items()
                             if d.score is not None)
            raise CalibrationFailed(f"{self.example.name} scores {score}, expected {expected} the threshold "
                                    f"{self.threshold:.2f}: {dims}")


def _examples_today(rubric: Rubric):
    value = rubric.examples.inputs.get("today")
    import datetime as dt

    return value if isinstance(value, dt.date) else dt.datetime.now(dt.timezone.utc).date()


def _calibration_judge(config: pytest.Config, hs: HarnessSession, rubric: Rubric) -> Runner | None:
    """The evaluator of the first agent that uses this rubric, when there is one."""
    if not rubric.judged_dimensions:
        return None
    suite_path = hs.import_root / config.getini("harness_suite")
    if not suite_path.is_file():
        return None
    suite = hs.cached("suite", suite_path, lambda: load_suite(suite_path, rubrics_dir=hs.rubrics_dir,
                                                              runner_kinds=runner_kinds(config),
                                                              input_roots=hs.input_roots))
    for agent in suite.agents.values():
        if agent.rubric_path == rubric.path.resolve() and agent.evaluator is not None:
            return config.hook.pytest_harness_make_runner(spec=agent.evaluator, role="evaluator", agent=agent,
                                                          config=config)
    return None


# --- case files --------------------------------------------------------------------------------

FREEZE_AT = 5_000
"""A case file of this many items or more is frozen out of the garbage collector once collected."""


def collected_without_gc(collect: Callable[[CaseFile], Iterator[pytest.Item]]
                         ) -> Callable[[CaseFile], list[pytest.Item]]:
    """``collect`` with the garbage collector paused, and a large collection frozen (``gc.freeze()``) after.

    A case file's items are long-lived objects built in one go (a 100,000-row dataset is millions of them):
    collecting while they are built only walks them again and again, and so does every full collection of the
    session, and the one at interpreter exit (half of a 100,000-row ``--collect-only``, benchmarks/README.md).
    They live as long as the session, as the SDK's objects do (harness/llm/providers/anthropic.py). Small files
    are not frozen, so a process that runs many sessions (pytester's in-process runs) can still free them."""

    @functools.wraps(collect)
    def paused(self: CaseFile) -> list[pytest.Item]:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            items = list(collect(self))
            if len(items) >= FREEZE_AT:
                gc.freeze()
            return items
        finally:
            if was_enabled:
                gc.enable()

    return paused


class CaseFile(pytest.File):
    """``*.cases.yaml``: every case is one item, named by its id."""

    @collected_without_gc
    def collect(self) -> Iterator[pytest.Item]:
        hs = harness_session(self.config)
        try:
            agents_path = find_agents_file(self.path.parent, Path(self.config.rootpath))
            if agents_path is None:
                raise HarnessConfigError(self.path, None, f"no {AGENTS_FILE} in this folder or above it",
                                         f"create {AGENTS_FILE} next to the suites (see README)")
            suite = hs.cached("suite", agents_path, lambda: load_suite(
                agents_path, rubrics_dir=hs.rubrics_dir, runner_kinds=runner_kinds(self.config),
                input_roots=hs.input_roots))
            cases = load_cases(self.path, agents=suite.agents, input_roots=hs.input_roots,
                               import_root=hs.import_root, check_kinds=check_kinds(self.config),
                               data_modules=hs.data_modules)
            prepared = {name: self._prepare(hs, suite.agents[name]) for name in dict.fromkeys(c.agent for c in cases)}
            # each case's rubric (its own criteria and checks, its slots filled), every slot checked before a call
            rubrics = [prepared[case.agent][0].rubric_for(case) for case in cases]
        except HarnessConfigError as exc:
            raise self.CollectError(exc.message(self.config.rootpath)) from None
        except HarnessError as exc:  # e.g. a plugin's model provider that cannot be set up: one line too
            raise self.CollectError(str(exc)) from None
        for case, rubric in zip(cases, rubrics):
            agent = suite.agents[case.agent]
            yield CaseItem.from_parent(self, name=case.id, case=case, agent=agent, rubric=rubric,
                                       runners=prepared[case.agent][1])

    def _prepare(self, hs: HarnessSession, agent: AgentConfig) -> tuple[CaseFit, dict[str, Runner]]:
        """The rubric and runners of an agent, shared by all its cases in this file."""
        rubric = load_rubric_once(hs, agent.rubric_path)
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
        runners = {role: self.config.hook.pytest_harness_make_runner(spec=spec, role=role, agent=agent,
                                                                     config=self.config)
                   for role, spec in (("producer", agent.producer), ("reviser", agent.reviser),
                                      ("evaluator", agent.evaluator)) if spec is not None}
        for role, runner in runners.items():
            if runner is None:
                spec = getattr(agent, role)
                raise HarnessConfigError(spec.file, spec.field,
                                         f"no plugin builds runners of kind {spec.kind!r}",
                                         "install the plugin that provides it or use prompt/template/python/command")
        return CaseFit(agent, rubric), runners


@functools.cache
def case_mark() -> pytest.MarkDecorator:
    """The mark of every case item, made once: a new one per item costs 2 us and 0.25 KB (24 MB a 100,000 rows)."""
    return pytest.mark.harness_case


class CaseItem(HarnessItem):
    def __init__(self, *, case: Case, agent: AgentConfig, rubric: Rubric, runners: dict[str, Runner], **kwargs: Any):
        super().__init__(**kwargs)
        self.case, self.agent, self.rubric, self.runners = case, agent, rubric, runners
        self.threshold = agent.policy.threshold_for(rubric)
        self.add_marker(case_mark())

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.case.line, f"{self.agent.name}[{self.case.id}] scored by {self.rubric.name}"

    def plan(self, hs: HarnessSession) -> CasePlan:
        shared = self.config.stash.get(CASE_COUNTS, {}).get(self.agent.name, 1) > 1
        location = hs.store.location(hs.cycle_id, self.agent.name, self.case.id if shared else None)
        return CasePlan(nodeid=self.nodeid, case=self.case, agent=self.agent, rubric=self.rubric,
                        threshold=self.threshold, producer=self.runners["producer"],
                        reviser=self.runners.get("reviser"), judge=self.runners.get("evaluator"), location=location,
                        judge_samples=hs.judge_samples, stop=hs.stop, events=hs.events)

    def run_case(self) -> LoopResult:
        """Run this case's loop; may run on a worker thread (see harness.face.scheduler)."""
        hs = harness_session(self.config)
        return run_loop(self.plan(hs))

    def runtest(self) -> None:
        hs = harness_session(self.config)
        try:
            if hs.scheduler is not None and hs.scheduler.has(self.nodeid):
                tick = progress_printer(self.config, hs)
                result = hs.scheduler.wait(self.nodeid, on_tick=tick,
                                           tick_s=min(1.0, hs.progress_interval_s) if tick else 1.0)
            else:
                result = self.run_case()
        except (StopRequested, CancelledError):
            self.user_properties.append(("harness_not_run", hs.stop.cause or "stop"))
            raise pytest.skip.Exception(f"not run: {hs.stop.reason or 'the session is stopping'}",
                                        _use_item_location=True) from None
        self._record_properties(hs, result)
        if result.outcome == "passed":
            return
        if result.exit_code in STOPPED_EXIT_CODES and hs.stop.is_set():
            self.user_properties.append(("harness_not_run", hs.stop.cause or "stop"))
            raise pytest.skip.Exception(f"not run: {hs.stop.reason} (attempt {result.final_attempt} was cut short)",
                                        _use_item_location=True)
        if result.outcome == "indeterminate" and hs.indeterminate == "skip":
            raise pytest.skip.Exception(result.escalation_reason or "not scored (indeterminate)",
                                        _use_item_location=True)
        if result.outcome == "escalated" and not self.agent.policy.escalation_fails_gate:
            pytest.xfail(f"escalated: {result.escalation_reason}")
        raise CaseFailed(self, result)

    def _record_properties(self, hs: HarnessSession, result: LoopResult) -> None:
        spend = result.spend
        usage = spend.usage
        evaluation = result.last_evaluation
        dims = {} if evaluation is None else {
            name: {"score": d.score, "weight": round(d.weight, 6), "reason": d.reason, **d.answer}
            for name, d in evaluation.dimensions.items()}
        self.user_properties.extend([
            ("harness_agent", self.agent.name), ("harness_case", self.case.id), ("harness_rubric", self.rubric.name),
            ("harness_outcome", result.outcome), *([("harness_score", result.final_score)]
                                                   if result.final_score is not None else []),
            ("harness_threshold", self.threshold), ("harness_attempts", result.final_attempt),
            ("harness_input_tokens", usage.input_tokens), ("harness_output_tokens", usage.output_tokens),
            ("harness_cache_write_tokens", usage.cache_write_tokens),
            ("harness_cache_read_tokens", usage.cache_read_tokens),
            ("harness_cost_usd", round(spend.known_cost_usd, 6)), ("harness_cycle", hs.cycle_id),
            ("harness_artifact", result.artifact_path), ("harness_dimensions", json.dumps(dims)),
            ("harness_cached_answers", spend.cached),
        ])
        if len(spend.models) > 1 or not spend.cost_known:  # per model: a producer and a judge on two models
            self.user_properties.append(("harness_models", json.dumps(spend.by_model())))
        if evaluation is not None and evaluation.samples:
            self.user_properties.extend([("harness_samples", json.dumps(evaluation.samples)),
                                         ("harness_unstable", evaluation.unstable)])
        if result.outcome == "indeterminate" and result.escalation_reason:  # the summary says why (which key...)
            self.user_properties.append(("harness_unscored", result.escalation_reason))
        unconfined = sorted({f"{self.agent.name}.{run['role']}" for attempt in result.attempts
                             for run in attempt.commands if not run["confined"]})
        if unconfined:  # the summary names them once
            self.user_properties.append(("harness_unconfined", ",".join(unconfined)))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return failure_table(excinfo.value.result, self.agent.name, self.case.id, self.threshold)
        return super().repr_failure(excinfo, style)
