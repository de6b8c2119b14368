"""The execution step: the baseline's noise runs, then the executors in parallel, each in its own worktree
on ``experiment/round_N_executor_K``: SafetyGuard's check of the whole plan, the change (executors.py), the
seal check, the critic's measurement flags, the candidate's runs and, for a suspected regression, the
interleaved pairs that decide it. Finished executors are kept when a stopped run resumes."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from harness.apps.tournament import critic, plausibility
from harness.apps.tournament.benchmark import SealedManifest, bounded
from harness.apps.tournament.context import Context, fmt
from harness.apps.tournament.costs import no_cost
from harness.apps.tournament.executors import ChangeOutcome, executor_kind, make_change
from harness.apps.tournament.failures import RUN_CATEGORY, failure_analysis
from harness.apps.tournament.gitops import GitError
from harness.apps.tournament.models import ExecutorResult, Measurement, Plan, RegressionCheck, ResultStatus
from harness.apps.tournament.sampling import Samples
from harness.base import stats
from harness.safety import SafetyGuard
from harness.apps.tournament.schemas import write_record
from harness.apps.tournament.state import BaselineRuns, ExecutorEntry, IterationState
from harness.apps.tournament.store import now_iso, read_result, recorded_baseline, write_json_plain
from harness.base.errors import HarnessError
from harness.loading.goal import Goal
from harness.sandbox import kill_active

BASELINE = "baseline"  # what --approve names to accept an implausible score of the baseline commit


def held_even_tolerance(goal: Goal, baseline_score: float, spread: float) -> float:
    """How much worse than the baseline a candidate may measure and still count as "held even":
    the larger of min_effect x the measured spread and regression_tolerance x |baseline|."""
    acc = goal.acceptance
    return max(acc.min_effect * spread, acc.regression_tolerance * abs(baseline_score))


def load_results(ctx: Context, st: IterationState) -> list[ExecutorResult]:
    """The iteration's executor results written so far, in executor order."""
    executors = st.execution.executors
    out = []
    for eid in sorted(executors, key=lambda e: int(e.split("_")[-1])):
        path = executors[eid].output_path
        if path:
            out.append(read_result(ctx.repo.root / path))
    return out


def describe(ctx: Context, result: ExecutorResult) -> str:
    """An executor's result in the line the tournament prints."""
    text = result.status
    if result.benchmark_score is not None:
        text += f" {ctx.goal.metric.name} {fmt(result.benchmark_score)}"
    fa = result.failure_analysis
    if fa and result.status != "regression":
        text += f" [{fa.category}] {fa.what}"
    if result.regression_check and result.status == "success":
        text += f" ({result.regression_check.reason})"
    return text


def execute(ctx: Context, n: int, st: IterationState, approved: list[Plan]) -> None:
    """The baseline's noise runs, then every approved plan (up to ``executors``) not finished yet."""
    goal, ex = ctx.goal, st.execution
    ctx.store.step("execution")
    ex.status = "in_progress"
    assert st.base_commit is not None
    base = st.base_commit
    manifest = ctx.sampler.manifest(n, base)
    write_json_plain(ctx.layout.sealed(n), manifest.to_json())
    if ex.baseline is None:
        ex.baseline = _measure_baseline(ctx, n, base, manifest)
        ctx.store.save()
    b = ex.baseline
    ctx.echo(f"  baseline: {goal.metric.name} {fmt(b.score)} (median of {len(b.samples)} runs, "
             f"spread {fmt(b.spread)})")
    chosen = approved[: goal.agents.executors]
    for index, plan in enumerate(chosen, 1):
        eid = f"executor_{index}"
        if eid not in ex.executors:
            ex.executors[eid] = ExecutorEntry(status="pending", plan_id=plan.plan_id, output_path=None,
                                              benchmark_score=None)
    for plan in approved[goal.agents.executors:]:
        ctx.echo(f"  {plan.plan_id}: approved but not executed (only {goal.agents.executors} executors)")
    ctx.store.save()
    by_id = {p.plan_id: p for p in chosen}
    todo = []
    for eid, entry in ex.executors.items():
        if entry.status == "completed" and entry.output_path:
            result = read_result(ctx.repo.root / entry.output_path)
            ctx.echo(f"  {eid} {entry.plan_id}: finished earlier, kept ({describe(ctx, result)})")
        else:
            todo.append(eid)
    if todo:
        before = ctx.repo.changes()
        _run_executors(ctx, n, st, todo, by_id, manifest)
        stray = sorted(ctx.repo.changes() - before)
        if stray:  # only possible without the sandbox: say so rather than merge on top of it
            ctx.echo(f"  warning: your checkout changed while candidates ran ({', '.join(stray[:5])}"
                     f"{' ...' if len(stray) > 5 else ''}); a candidate or command wrote outside its worktree")
    ex.status, ex.completed_at = "completed", now_iso()
    ctx.store.save()


def _measure_baseline(ctx: Context, n: int, base: str, manifest: SealedManifest) -> BaselineRuns:
    runs, log = ctx.goal.acceptance.noise_runs, ctx.layout.log(n, "baseline")
    if ctx.cluster is not None:  # on a worker; the winner's confirmation goes to the same one (round_N)
        got = ctx.cluster.samples(ctx, n, manifest, base, runs, log, place=f"round_{n}")
    else:
        wt = ctx.layout.worktrees / f"round_{n}_baseline"
        ctx.repo.add_worktree(wt, base)
        try:
            got = ctx.sampler.sample(n, wt, manifest, runs, log)
        finally:
            ctx.repo.remove_worktree(wt)
    if got.failed is not None:
        raise HarnessError(f"the sealed benchmark fails on the baseline commit {base[:7]}: {got.failed.detail} "
                           "(fix the program or the benchmark before improving it)")
    recorded = recorded_baseline(ctx.layout)  # the last best: the reference of plausible_factor
    implausible = plausibility.flags(ctx.goal, got.scores, recorded.score if recorded else None)
    if implausible and not ctx.approved(BASELINE):
        raise HarnessError(f"the sealed benchmark measures the baseline commit {base[:7]} at a score the goal does "
                           f"not declare plausible ({'; '.join(implausible)}): look at what it measures and fix the "
                           f"benchmark or the goal's bounds, or accept the score with --approve {BASELINE}")
    gains = [ctx.goal.metric.gain(s) for s in got.scores]
    return BaselineRuns(commit=base, samples=got.scores, score=stats.median(got.scores), spread=stats.spread(gains),
                        sub_scores=got.sub_scores)


def _run_executors(ctx: Context, n: int, st: IterationState, todo: list[str], by_id: dict[str, Plan],
                   manifest: SealedManifest) -> None:
    ex = st.execution
    assert st.base_commit is not None and ex.baseline is not None
    pool = ThreadPoolExecutor(max_workers=max(1, len(todo)), thread_name_prefix="harness-executor")
    # each thread runs its executor here, or hands it to a Dask worker and waits for it
    executor = run_executor if ctx.cluster is None else ctx.cluster.candidate
    futures: dict[Future[ExecutorResult], str] = {}
    try:
        for eid in todo:
            entry = ex.executors[eid]
            entry.status, entry.started_at, entry.output_path, entry.benchmark_score = "running", now_iso(), None, None
            futures[pool.submit(executor, ctx, n, eid, by_id[entry.plan_id], st.base_commit, manifest,
                                ex.baseline)] = eid
        ctx.store.save()
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: futures[f]):
                eid = futures[future]
                result = future.result()
                path = ctx.layout.result(n, eid)
                write_record(path, "benchmark_result", result.to_json())
                entry = ex.executors[eid]
                entry.status, entry.output_path = "completed", ctx.layout.rel(path)
                entry.benchmark_score, entry.completed_at, entry.cost = result.benchmark_score, now_iso(), result.cost
                ctx.store.save()
                ctx.echo(f"  {eid} {result.plan_id}: {describe(ctx, result)}")
                if ctx.interrupt_after is not None and eid == f"executor_{ctx.interrupt_after}":
                    raise KeyboardInterrupt  # the deterministic kill of the resume tests
    except BaseException:
        ctx.cancel.set()
        kill_active()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def run_executor(ctx: Context, n: int, eid: str, plan: Plan, base: str, manifest: SealedManifest,
                 baseline: BaselineRuns) -> ExecutorResult:
    """One executor, in its own worktree on ``experiment/round_N_executor_K`` (runs in a thread, here or on a Dask
    worker: :mod:`~harness.apps.tournament.remote`)."""
    goal, repo = ctx.goal, ctx.repo
    branch = f"experiment/round_{n}_{eid}"
    wt = ctx.layout.worktrees / f"round_{n}_{eid}"
    log = ctx.layout.log(n, eid)
    log.unlink(missing_ok=True)
    doc = plan.to_json()
    kind = executor_kind(doc, goal)
    result = ExecutorResult(executor_id=eid, plan_id=plan.plan_id, benchmark_score=None, benchmark_raw="",
                            status="error", sub_scores={}, failure_analysis=None, timestamp=now_iso(), branch=branch,
                            commit=None, samples=[], executor_kind=kind)
    approved = ctx.approved(plan.plan_id)
    try:
        repo.add_worktree(wt, base, branch)
        preflight = SafetyGuard(wt).check_plan(
            doc, executor_command=goal.agents.executor_command if kind == "command" else None)
        result.safety_guard = preflight.to_record()
        if not preflight.safe and not approved:
            return _failed(ctx, result, plan, "infrastructure",
                           f"SafetyGuard stopped the plan before it ran: {preflight.reason()}; if it is safe, have "
                           f"it taken again and approve it (--approve {plan.plan_id}, or the idea file's name)")
        change = make_change(kind, repo=repo, goal=goal, plan=doc, worktree=wt, log=log, access=ctx.access,
                             cancel=ctx.cancel, box=ctx.box, plan_file=repo.root / ctx.layout.plan(n, plan.plan_id))
        if ctx.cancel.is_set():
            raise KeyboardInterrupt
        result.cost = change.cost
        if change.blocked_commands:
            result.blocked_commands = change.blocked_commands
        if change.ok:
            commit = repo.commit_all(wt, f"harness: round {n} {eid}: {plan.title or plan.plan_id}"
                                         f"\n\n{plan.hypothesis}\n\nplan: {plan.plan_id}")
            if commit is None:
                change = ChangeOutcome(kind, False, "the executor left the code unchanged", "scope_error", change.cost)
            else:
                result.commit = commit
        if not change.ok:
            return _failed(ctx, result, plan, change.category or "infrastructure", change.detail)
        assert result.commit is not None
        violated = ctx.sealed.filter(repo.changed_files(base, result.commit))
        if violated:
            return _failed(ctx, result, plan, "sealed_file_violation",
                           f"the candidate changed sealed path(s) {', '.join(violated)}")
        flags = critic.measurement_flags(repo.diff(base, result.commit))
        if flags:
            result.measurement = Measurement(flags=flags, approved=approved)
        got = ctx.sampler.sample(n, wt, manifest, goal.acceptance.candidate_runs, log)
        _keep_output(result, got)
        if got.failed is not None:
            return _failed(ctx, result, plan, RUN_CATEGORY.get(got.failed.kind, "logic_error"), got.failed.detail)
        score = stats.median(got.scores)
        result.benchmark_score, result.sub_scores = score, got.sub_scores
        result.samples = got.scores
        implausible = plausibility.flags(goal, got.scores, baseline.score)
        if implausible:
            result.measurement = Measurement(flags=flags + implausible, approved=approved)
        if (flags or implausible) and not approved:
            return _failed(ctx, result, plan, "measurement" if flags else "implausible",
                           f"{_unapproved(flags, implausible)}; measured {goal.metric.name} {fmt(score)}, not merged "
                           f"without your approval: review branch {branch.replace('experiment/', 'archive/', 1)} "
                           f"and merge it yourself, or approve such a plan when it runs (--approve {plan.plan_id})")
        allowed = held_even_tolerance(goal, baseline.score, baseline.spread)
        if -goal.metric.better(score, baseline.score) > allowed:
            check = _check_regression(ctx, n, eid, wt, base, manifest, log, allowed)
            result.regression_check = check
            if check.failed_side:
                category = "logic_error" if check.failed_side == "candidate" else "infrastructure"
                return _failed(ctx, result, plan, category, check.reason)
            if check.regression:
                return _failed(ctx, result, plan, "regression", check.reason, status="regression")
        result.status = "success"
        return result
    except GitError as exc:
        return _failed(ctx, result, plan, "infrastructure", str(exc))
    finally:
        if not ctx.cancel.is_set():
            repo.remove_worktree(wt)


def _keep_output(result: ExecutorResult, got: Samples) -> None:
    """``benchmark_raw``: the stdout of the candidate's last run (the one that failed, when one did), verbatim
    (bounded: :func:`~harness.apps.tournament.benchmark.bounded`); its check's result beside it. The writer
    redacts both."""
    result.benchmark_raw, dropped = bounded(got.raw)
    if dropped:
        result.benchmark_raw_dropped = dropped
    if got.result is not None:
        result.check_result = bounded(got.result)[0]


def _unapproved(flags: list[str], implausible: list[str]) -> str:
    """What keeps a candidate from being merged unseen: the critic's flags and the implausible scores."""
    parts = []
    if flags:
        more = "; ..." if len(flags) > 3 else ""
        parts.append(f"the change reaches into the measurement ({'; '.join(flags[:3])}{more})")
    if implausible:
        parts.append(f"its score is outside what the goal declares plausible "
                     f"({'; '.join(why.removeprefix(plausibility.FLAG + ': ') for why in implausible[:3])})")
    return "; and ".join(parts)


def _check_regression(ctx: Context, n: int, eid: str, wt: Path, base: str, manifest: SealedManifest, log: Path,
                      allowed: float) -> RegressionCheck:
    """A candidate whose first runs measured worse than the noise allows is measured again in
    interleaved pairs with the baseline commit: timings drift over seconds, so runs taken minutes apart
    cannot show a regression. It is one only when the pairs show it, by the median and the goal's test."""
    goal, acc = ctx.goal, ctx.goal.acceptance
    wt_base = ctx.layout.worktrees / f"round_{n}_{eid}_baseline"
    ctx.repo.add_worktree(wt_base, base)
    try:
        runs = ctx.sampler.pairs(n, wt_base, wt, acc.confirm_pairs, manifest, log)
    finally:
        if not ctx.cancel.is_set():  # on Ctrl-C the interrupt handler removes every worktree
            ctx.repo.remove_worktree(wt_base)
    a, b = runs.baseline, runs.candidate
    check = RegressionCheck(pairs=acc.confirm_pairs, baseline_samples=a, candidate_samples=b, allowed=allowed,
                            failed_side=runs.failed_side, regression=False, reason="")
    if runs.failed_side:
        check.reason = f"the benchmark failed on the {runs.failed_side} when re-run in pairs: {runs.failure}"
        return check
    loss = -goal.metric.better(stats.median(b), stats.median(a))
    check.loss = loss
    measured = (f"{goal.metric.name} {fmt(stats.median(b))} vs baseline {fmt(stats.median(a))} over "
                f"{len(b)} interleaved pairs: worse by {fmt(loss)}")
    if loss <= allowed:
        check.reason = f"{measured}, within what the noise allows ({fmt(allowed)}): held even"
        return check
    measured += f", more than the noise allows ({fmt(allowed)})"
    if not stats.exact_test_can_reach(len(a), len(b), acc.alpha):
        check.regression = True
        check.reason = f"{measured}; {len(b)} pairs cannot reach alpha {acc.alpha:g}, so the loss alone decides"
        return check
    worse = stats.significance([goal.metric.gain(x) for x in a], [goal.metric.gain(x) for x in b],
                               test=acc.significance, alpha=acc.alpha, difference="loss")
    check.regression = worse.significant
    check.reason = f"{measured}; {worse.text}" + ("" if worse.significant else ": not significant, held even")
    return check


def _failed(ctx: Context, result: ExecutorResult, plan: Plan, category: str, detail: str,
            status: ResultStatus | None = None) -> ExecutorResult:
    result.status = status or ("timeout" if category == "timeout" else "error")
    result.failure_analysis = failure_analysis(category, detail, plan, ctx.goal)
    if result.cost is None:
        result.cost = no_cost()
    return result
