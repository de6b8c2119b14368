"""The recording step: losers' branches archived, the merge report, the iteration history (with every
loser's failure analysis and the costs), the raw data for the plots, the recorded baseline (what the pytest
gate reads); and the trajectory plots at the end of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.apps.tournament import critic
from harness.apps.tournament.context import Context, fmt
from harness.apps.tournament.costs import cost_said, spend_of, total_cost, unpriced
from harness.apps.tournament.execution import load_results
from harness.apps.tournament.failures import failure_analysis
from harness.apps.tournament.models import BaselineRecord, ExecutorResult, Plan
from harness.apps.tournament.schemas import write_record
from harness.apps.tournament.state import ArchivedBranch, Decision, IterationState, Outcome
from harness.apps.tournament.store import append_array, goal_entries, now_iso
from harness.llm.prices import missing_price_line

BASELINE_PLAN, BASELINE_FAMILY = "baseline", "other"  # the goal's first baseline in raw_data.json
_ACCEPTANCE_KEYS = ("accepted", "decided_by", "test", "p_value", "ci_lower", "gain", "min_effect", "spread",
                    "baseline_median", "candidate_median", "pairs", "baseline_samples", "candidate_samples", "reason")


def record(ctx: Context, n: int, st: IterationState, plans: list[Plan]) -> None:
    ctx.store.step("recording")
    rec = st.recording
    rec.status = "in_progress"
    ctx.store.save()
    outcome = st.tournament.outcome
    assert outcome is not None
    merged = outcome.status == "merged"
    winner_eid = outcome.winner.executor_id if merged and outcome.winner else None
    results = load_results(ctx, st)
    by_plan = {p.plan_id: p for p in plans}

    archive_names = _archive_branches(ctx, st, results, winner_eid)
    if archive_names:
        ctx.echo(f"  archived: {', '.join(archive_names)}")

    report_path = ctx.layout.merge_report(n)
    write_record(report_path, "merge_report", _merge_report(ctx, n, outcome, archive_names))
    rec.merge_report_path = ctx.layout.rel(report_path)

    history = _history_record(ctx, n, st, plans, results, outcome, by_plan)
    write_record(ctx.layout.history(n), "iteration_history", history)
    rec.history_path = ctx.layout.rel(ctx.layout.history(n))
    ctx.store.save()

    if not rec.visualization_updated:
        _append_raw_data(ctx, n, st, results, by_plan, winner_eid)
        rec.visualization_updated = True
        ctx.store.save()

    _write_baseline(ctx, n, st, outcome)
    ctx.repo.remove_worktrees_under(ctx.layout.worktrees)
    rec.cleanup_done, rec.status, rec.completed_at = True, "completed", now_iso()
    ctx.store.save()
    cost = history["cost"]["total"]
    ctx.echo(f"  cost: {spend_of(cost).usage.total_tokens} tokens, {cost_said(cost)}")
    for model in unpriced(cost):
        ctx.echo(f"  {missing_price_line(model)}")
    ctx.echo(f"  merge report: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else ""))


def _archive_branches(ctx: Context, st: IterationState, results: list[ExecutorResult],
                      winner_eid: str | None) -> list[str]:
    """Losers' branches become ``archive/...``; the merged winner's branch (and a branch without a commit)
    is deleted. Returns the archive branches."""
    rec = st.recording
    if rec.archived is None:
        rec.archived = []
    archived = rec.archived
    done = {a.executor_id for a in archived}
    for r in results:
        if r.executor_id in done or not ctx.repo.branch_exists(r.branch):
            continue
        if r.executor_id == winner_eid or not r.commit:
            ctx.repo.delete_branch(r.branch)
            archived.append(ArchivedBranch(executor_id=r.executor_id, archive=None))
        else:
            name = ctx.repo.rename_branch(r.branch, r.branch.replace("experiment/", "archive/", 1))
            archived.append(ArchivedBranch(executor_id=r.executor_id, archive=name))
        ctx.store.save()
    return [a.archive for a in archived if a.archive]


def _merge_report(ctx: Context, n: int, outcome: Outcome, archive_names: list[str]) -> dict[str, Any]:
    winner = outcome.winner
    return {
        "iteration": n, "goal_slug": ctx.goal.slug,
        "winner": None if winner is None else {
            "executor_id": winner.executor_id, "branch": winner.branch, "hypothesis": winner.hypothesis,
            "score_before": winner.score_before, "score_after": winner.score_after, "sub_scores": winner.sub_scores,
            "plan_id": winner.plan_id, "commit": winner.commit},
        "archived": archive_names,
        "regressions_detected": bool(outcome.regressions_detected),
        "re_benchmark_score": outcome.re_benchmark_score,
        "status": outcome.status,
        "reason": outcome.reason,
        "acceptance": _acceptance(outcome.decision),
        "merge_commit": outcome.merge_commit,
    }


def _acceptance(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    data = decision.to_json()
    return {k: data[k] for k in _ACCEPTANCE_KEYS if k in data}


def _history_record(ctx: Context, n: int, st: IterationState, plans: list[Plan], results: list[ExecutorResult],
                    outcome: Outcome, by_plan: dict[str, Plan]) -> dict[str, Any]:
    goal = ctx.goal
    outcome_winner = outcome.winner
    merged_eid = outcome_winner.executor_id if outcome.status == "merged" and outcome_winner else None

    def entry(r: ExecutorResult) -> dict[str, Any]:
        plan = by_plan[r.plan_id]
        return {"plan_id": r.plan_id, "score": r.benchmark_score, "approach_family": plan.approach_family,
                "hypothesis": plan.hypothesis, "sub_scores": r.sub_scores, "executor_id": r.executor_id,
                "status": r.status, "diff_sha256": critic.diff_digest(plan.diff)}

    winner = None
    losers = []
    for r in results:
        e = entry(r)
        if r.executor_id == merged_eid:
            winner = e
            continue
        fa = r.failure_analysis
        if fa is None:  # a success that was not merged: the tournament's decision is its analysis
            plan = by_plan[r.plan_id]
            if outcome_winner and outcome_winner.executor_id == r.executor_id:
                category = (outcome.decision.category if outcome.decision else None) or "regression"
                fa = failure_analysis(category, outcome.reason or "", plan, goal, not_merged=True)
            else:
                what = (f"{goal.metric.name} {fmt(r.benchmark_score)} lost the tournament to "
                        f"{outcome_winner.executor_id}" if outcome_winner else "not merged")
                fa = failure_analysis("regression", what, plan, goal, not_merged=True)
        e["failure_analysis"] = fa.to_json()
        losers.append(e)
    rejected = [{"plan_id": p.plan_id, "approach_family": p.approach_family, "hypothesis": p.hypothesis,
                 "reason": p.rejection_reason or f"architect: {(p.architect_review or {}).get('feedback', '')}"}
                for p in plans if not p.critic_approved]
    research_cost = total_cost(st.research.cost)
    plan_costs = {p.plan_id: total_cost(p.cost) for p in plans}
    exec_costs = {r.executor_id: total_cost(r.cost) for r in results}
    failed_planners = [e.cost for e in st.planning.plans.values() if e.output_path is None and e.cost]
    baseline = st.execution.baseline
    return {
        "iteration": n,
        "baseline_score": baseline.score if baseline else None,
        "winner": winner,
        "losers": losers,
        "research_brief_id": f"round_{n}" if st.research.output_path else None,
        "goal_slug": goal.slug,
        "merge_status": outcome.status,
        "rejected_plans": rejected,
        "user_ideas_consumed": st.user_ideas_consumed,
        "cost": {"research": research_cost, "plans": plan_costs, "executors": exec_costs,
                 "total": total_cost(research_cost, *plan_costs.values(), *exec_costs.values(), *failed_planners)},
    }


def _append_raw_data(ctx: Context, n: int, st: IterationState, results: list[ExecutorResult],
                     by_plan: dict[str, Plan], winner_eid: str | None) -> None:
    """The iteration's scores in tracking/raw_data.json, and the goal's first baseline before them: seed 001's
    entry has no place for the unchanged code, so it is iteration 0, ``plan_id`` ``baseline``, no winner, and
    the taxonomy's ``other`` (no change fits a family); the plots draw it as the baseline line."""
    slug = ctx.goal.slug
    entries = []
    b = st.execution.baseline
    if not goal_entries(ctx.layout.raw_data, slug) and b is not None:
        entries.append({"iteration": 0, "plan_id": BASELINE_PLAN, "benchmark_score": b.score, "is_winner": False,
                        "approach_family": BASELINE_FAMILY, "sub_scores": b.sub_scores, "goal": slug})
    for r in results:
        entries.append({"iteration": n, "plan_id": r.plan_id, "benchmark_score": r.benchmark_score,
                        "is_winner": r.executor_id == winner_eid,
                        "approach_family": by_plan[r.plan_id].approach_family, "sub_scores": r.sub_scores,
                        "goal": slug, "status": r.status})
    already = {(e.get("iteration"), e.get("plan_id")) for e in goal_entries(ctx.layout.raw_data, slug)}
    entries = [e for e in entries if (e["iteration"], e["plan_id"]) not in already]
    if entries:
        append_array(ctx.layout.raw_data, "raw_data", entries)


def _write_baseline(ctx: Context, n: int, st: IterationState, outcome: Outcome) -> None:
    measured = st.execution.baseline
    post = st.tournament.post_merge
    if outcome.status == "merged" and post is not None and post.score is not None:
        commit, score, subs = st.tournament.merge_commit, post.score, post.sub_scores
    elif measured is not None:
        commit, score, subs = measured.commit, measured.score, measured.sub_scores
    else:
        return
    assert commit is not None
    record = BaselineRecord(commit=commit, score=score, sub_scores=subs, goal_slug=ctx.goal.slug,
                            spread=measured.spread if measured else 0.0, iteration=n, timestamp=now_iso(),
                            metric=ctx.goal.metric.name, direction=ctx.goal.metric.direction)
    write_record(ctx.layout.baseline_file, "baseline", record.to_json())


def plot(ctx: Context) -> list[Path]:
    """Trajectories per approach family (harness.apps.tracking.plots, when it is installed)."""
    if not ctx.layout.raw_data.exists():
        return []
    try:
        from harness.apps.tracking.plots import plot_trajectories
    except ImportError:
        ctx.echo("plots: skipped (harness.apps.tracking.plots is not available)")
        return []
    out_dir = ctx.layout.tracking / "plots"
    try:
        written = [Path(p) for p in plot_trajectories(ctx.layout.raw_data, out_dir,
                                                      metrics={ctx.goal.slug: ctx.goal.metric})]
    except Exception as exc:  # noqa: BLE001 - the records are written; a plot problem must not fail the run
        ctx.echo(f"plots: skipped ({exc})")
        return []
    if written:
        ctx.echo(f"plots: {', '.join(ctx.layout.rel(Path(p).resolve()) for p in written)}")
    return written
