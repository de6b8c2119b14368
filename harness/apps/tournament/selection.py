"""The tournament step: the best ``success`` candidate is confirmed against the baseline in fresh
interleaved pairs (ABAB, with the held-back inputs), merged (``--no-ff``) only when its gain is real, then
re-run at the merge commit and reverted when the gain does not hold there."""

from __future__ import annotations

from harness.apps.tournament import plausibility
from harness.apps.tournament.benchmark import SealedManifest
from harness.apps.tournament.context import Context, fmt
from harness.apps.tournament.execution import load_results
from harness.apps.tournament.gitops import GitError
from harness.apps.tournament.models import ExecutorResult, Plan
from harness.apps.tournament.state import Decision, IterationState, Outcome, PostMerge, Winner
from harness.apps.tournament.store import now_iso, read_plan
from harness.base import stats
from harness.base.errors import HarnessError


def run_tournament(ctx: Context, n: int, st: IterationState, plans: list[Plan]) -> None:
    """Decide the iteration's outcome (the merge report's status) and merge the winner when it earns it."""
    ctx.store.step("tournament")
    t = st.tournament
    t.status = "in_progress"
    ctx.store.save()
    results = load_results(ctx, st)
    approved = [p for p in plans if p.critic_approved]
    winner_result = None
    if not approved:
        outcome = Outcome(status="all_rejected", winner=None, decision=None,
                          reason=f"the critic rejected all {len(plans)} plan(s)"
                          + (": " + "; ".join(f"{p.plan_id}: {p.rejection_reason}" for p in plans)
                             if plans else " (no plans: no ideas left and no model planners)"))
        if not plans:
            outcome.reason = "no plans this round: no user ideas left and the model planners " + (
                f"were skipped ({ctx.access.skip_reason})" if not ctx.access.available else "produced none")
    else:
        candidates = [r for r in results if r.status == "success"]
        if not candidates:
            outcome = Outcome(status="no_winner", winner=None, decision=None,
                              reason="no candidate succeeded: " + "; ".join(
                                  f"{r.executor_id} {r.status}"
                                  + (f" ({r.failure_analysis.category})" if r.failure_analysis else "")
                                  for r in results))
        else:
            best = max(candidates, key=lambda r: ctx.goal.metric.gain(r.score))
            winner_result = best
            t.winner, t.winner_score = best.executor_id, best.benchmark_score
            ctx.store.save()
            outcome = _confirm_and_merge(ctx, n, st, best)
    t.outcome = outcome
    t.status, t.completed_at = "completed", now_iso()
    if winner_result is None:
        t.winner, t.winner_score = None, None
    ctx.store.save()


def _confirm_and_merge(ctx: Context, n: int, st: IterationState, best: ExecutorResult) -> Outcome:
    t, goal = st.tournament, ctx.goal
    acc = goal.acceptance
    assert st.base_commit is not None and st.execution.baseline is not None and best.commit is not None
    base = st.base_commit
    baseline = st.execution.baseline
    manifest = ctx.sampler.manifest(n, base)
    eid = best.executor_id
    plan = read_plan(ctx.layout.plan(n, best.plan_id))
    winner = Winner(executor_id=eid, branch=best.branch, hypothesis=plan.hypothesis, plan_id=best.plan_id,
                    score_before=baseline.score, score_after=best.benchmark_score, sub_scores=best.sub_scores,
                    commit=best.commit)

    if t.decision is None:
        # the goal's held-back inputs are shown to these runs only: a candidate tuned to the inputs it could see
        # fails here. On a cluster both sides run on one worker, the one that measured the round's noise.
        log = ctx.layout.log(n, "confirm")
        if ctx.cluster is not None:
            runs = ctx.cluster.pairs(ctx, n, manifest, best.commit, acc.confirm_pairs, log, held_back=True,
                                     place=f"round_{n}")
        else:
            wt_a = ctx.layout.worktrees / f"round_{n}_confirm_baseline"
            wt_b = ctx.layout.worktrees / f"round_{n}_confirm_{eid}"
            ctx.repo.add_worktree(wt_a, base)
            ctx.repo.add_worktree(wt_b, best.commit)
            try:
                runs = ctx.sampler.pairs(n, wt_a, wt_b, acc.confirm_pairs, manifest, log, held_back=True)
            finally:
                ctx.repo.remove_worktree(wt_a)
                ctx.repo.remove_worktree(wt_b)
        a, b = runs.baseline, runs.candidate
        if runs.failed_side == "baseline":
            raise HarnessError(f"the sealed benchmark failed on the baseline while confirming: {runs.failure}")
        implausible = plausibility.flags(goal, b, stats.median(a) if a else None)
        if runs.failed_side:
            t.decision = Decision(accepted=False, decided_by="re-run", category="logic_error",
                                  reason=f"the winner's benchmark failed when re-run: {runs.failure}")
        elif implausible and not ctx.approved(best.plan_id):
            t.decision = Decision(accepted=False, decided_by="plausibility", category="implausible",
                                  baseline_samples=a, candidate_samples=b, pairs=acc.confirm_pairs,
                                  reason=f"the winner's confirmation runs measured a score outside what the goal "
                                         f"declares plausible ({'; '.join(implausible)}); approve it to merge it "
                                         f"(--approve {best.plan_id})")
        else:
            # the measured spread: every run of the baseline commit, the noise runs and the fresh ones
            pooled = stats.spread([goal.metric.gain(x) for x in baseline.samples + a])
            d = stats.decide([goal.metric.gain(x) for x in a], [goal.metric.gain(x) for x in b],
                             noise_spread=pooled, min_effect_multiple=acc.min_effect,
                             test=acc.significance, alpha=acc.alpha, unit="")
            t.decision = Decision.model_validate({**d.to_json(), "reason": d.reason, "baseline_samples": a,
                                                  "candidate_samples": b, "pairs": acc.confirm_pairs})
            # report medians in the metric's own units
            t.decision.baseline_median = stats.median(a)
            t.decision.candidate_median = stats.median(b)
        ctx.store.save()
    decision = t.decision
    ctx.echo(f"  tournament: {eid} vs baseline over {acc.confirm_pairs} interleaved pairs (ABAB): "
             f"{decision.reason}")
    if not decision.accepted:
        return Outcome(status="no_improvement", winner=winner, decision=decision,
                       reason=f"{eid} was not merged: {decision.reason}")
    assert decision.baseline_median is not None
    winner.score_before = decision.baseline_median
    winner.score_after = decision.candidate_median
    return _merge(ctx, n, st, winner, decision, manifest)


def _merge(ctx: Context, n: int, st: IterationState, winner: Winner, decision: Decision,
           manifest: SealedManifest) -> Outcome:
    t, goal, repo = st.tournament, ctx.goal, ctx.repo
    head = repo.head()
    if t.merge_commit is None:
        parents = repo.parents(head)
        if len(parents) == 2 and parents[1] == winner.commit:
            t.merge_commit = head  # merged just before an interruption
        else:
            if repo.current_branch() != st.branch:
                raise GitError(f"the branch changed from {st.branch} to {repo.current_branch()} during "
                               "the run; switch back and run again to resume")
            if repo.dirty_files():
                raise GitError("the working tree got uncommitted changes during the run; commit or stash them "
                               "and run again to resume")
            message = (f"harness: merge {winner.branch} ({winner.plan_id})\n\n{winner.hypothesis}\n\n"
                       f"{goal.metric.name}: {fmt(winner.score_before)} -> {fmt(winner.score_after)}; "
                       f"{decision.reason}")
            t.merge_commit = repo.merge_no_ff(winner.branch, message)
        ctx.store.save()
        ctx.echo(f"  merged {winner.branch} into {st.branch} (--no-ff) at {t.merge_commit[:7]}")
    merge_commit = t.merge_commit
    if t.post_merge is None:
        runs, log = goal.acceptance.post_merge_runs, ctx.layout.log(n, "post_merge")
        if ctx.cluster is not None:  # on the worker of the confirmation, whose baseline it is compared with
            got = ctx.cluster.samples(ctx, n, manifest, merge_commit, runs, log, held_back=True,
                                      place=f"round_{n}")
        else:
            wt = ctx.layout.worktrees / f"round_{n}_post_merge"
            repo.add_worktree(wt, merge_commit)
            try:
                got = ctx.sampler.sample(n, wt, manifest, runs, log, held_back=True)
            finally:
                repo.remove_worktree(wt)
        if got.failed is not None:
            t.post_merge = PostMerge(score=None, sub_scores={}, failed=got.failed.detail)
        else:
            t.post_merge = PostMerge(score=stats.median(got.scores), sub_scores=got.sub_scores, samples=got.scores)
        ctx.store.save()
    post = t.post_merge
    before = winner.score_before
    implausible = [] if ctx.approved(winner.plan_id) else plausibility.flags(goal, post.samples or [], before)
    regressed = post.score is None or goal.metric.better(post.score, before) <= 0 or bool(implausible)
    if regressed:
        if t.revert_commit is None:
            t.revert_commit = repo.revert_merge(
                merge_commit, f"harness: revert {winner.branch}: the re-benchmark after the merge regressed")
            ctx.store.save()
        why = post.failed or (f"{'; '.join(implausible)}, which the goal does not declare plausible" if implausible
                              else f"{goal.metric.name} {fmt(post.score)} is not better than {fmt(before)}")
        ctx.echo(f"  re-benchmark after merge: {why}; merge reverted at {t.revert_commit[:7]}")
        return Outcome(winner=winner, decision=decision, re_benchmark_score=post.score, merge_commit=merge_commit,
                       status="no_improvement", regressions_detected=True,
                       reason=f"the re-benchmark after the merge regressed ({why}); the merge was reverted "
                              f"({t.revert_commit[:7]})")
    winner.sub_scores = post.sub_scores or winner.sub_scores
    ctx.echo(f"  re-benchmark after merge: {goal.metric.name} {fmt(post.score)} confirms the gain "
             f"(was {fmt(before)})")
    return Outcome(winner=winner, decision=decision, re_benchmark_score=post.score, merge_commit=merge_commit,
                   status="merged", regressions_detected=False, reason=None)
