"""The first steps of an iteration: research (a model's brief), planning (user ideas and model planners),
critic review (the deterministic checks, then the optional architect). Every plan is archived under
``state/plan_archive/round_N/``, approved or not: written when it is made, and again with its
``critic_review`` and ``architect_review`` once the critic and the architect have been."""

from __future__ import annotations

from typing import Any

from harness.apps.tournament import agents, critic
from harness.apps.tournament.context import Context
from harness.apps.tournament.costs import cost_said, total_cost
from harness.apps.tournament.ideas import Idea
from harness.apps.tournament.models import AgentSettings, ConsumedIdea, Plan, architect_reviewed, no_architect_review
from harness.apps.tournament.schemas import write_record
from harness.apps.tournament.settings import save_settings
from harness.apps.tournament.state import CriticStep, IterationState, PlanEntry
from harness.apps.tournament.store import now_iso, read_json, read_plan
from harness.base.errors import HarnessError


def research_and_plan(ctx: Context, n: int, st: IterationState, settings: AgentSettings, ideas: list[Idea],
                      history: list[dict[str, Any]]) -> list[Plan]:
    """The iteration's plans, each with the critic's (and the architect's) verdict; steps already done
    (by a run that was stopped) are read back, not done again."""
    brief = _research(ctx, n, st, history)
    if st.planning.status != "completed":
        ctx.store.step("planning")
        st.planning.status = "in_progress"
        ctx.store.save()
        docs = _make_plans(ctx, n, st, settings, ideas, brief, history)
        for doc in docs:
            path = ctx.layout.plan(n, doc["plan_id"])
            write_record(path, "plan", doc)
            st.planning.plans[doc["planner_id"]] = PlanEntry(
                status="completed", output_path=ctx.layout.rel(path), critic_approved=None, plan_id=doc["plan_id"])
        st.planning.status = "completed"
        st.planning.completed_at = now_iso()
        ctx.store.save()
    plans = load_plans(ctx, st)
    if st.critic is None or st.critic.status != "completed":
        _review(ctx, n, st, plans, history)
    return plans


def load_plans(ctx: Context, st: IterationState) -> list[Plan]:
    return [read_plan(ctx.repo.root / entry.output_path) for entry in st.planning.plans.values() if entry.output_path]


def _research(ctx: Context, n: int, st: IterationState, history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The research brief (a model's), or None without model access or after a failed call."""
    research = st.research
    if research.status == "completed":
        return read_json(ctx.repo.root / research.output_path, "research_brief") if research.output_path else None
    ctx.store.step("research")
    research.status = "in_progress"
    ctx.store.save()
    brief = None
    if not ctx.access.available:
        research.status, research.completed_at, research.skipped = "completed", now_iso(), ctx.access.skip_reason
        ctx.echo(f"  research brief: skipped ({ctx.access.skip_reason})")
    else:
        try:
            brief = agents.research(ctx.access, ctx.goal, ctx.repo.root, n, history)
            write_record(ctx.layout.research(n), "research_brief", brief)
            research.status, research.completed_at = "completed", now_iso()
            research.output_path = ctx.layout.rel(ctx.layout.research(n))
            research.cost = brief["cost"]
            ctx.echo(f"  research brief: {len(brief['ideas'])} idea(s), {cost_said(brief['cost'])}")
        except HarnessError as exc:
            research.status, research.error = "failed", str(exc)
            if isinstance(exc, agents.RoleFailed):
                research.cost = exc.cost  # the calls were billed all the same
            ctx.echo(f"  research brief: failed ({exc}); planners go on without it")
    ctx.store.save()
    return brief


def _make_plans(ctx: Context, n: int, st: IterationState, settings: AgentSettings, ideas: list[Idea],
                brief: dict[str, Any] | None, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This round's plan documents: the user ideas not taken yet, then the model planners'."""
    goal = ctx.goal
    # ideas taken by this round before an interruption are taken again, by this round
    earlier = [c for c in settings.consumed_ideas or [] if c.round != n]
    consumed = {c.idea for c in earlier}
    fresh = [i for i in ideas if i.path.name not in consumed][: goal.agents.executors]
    docs = [idea.to_plan(n, goal.metric.name) for idea in fresh]
    settings.consumed_ideas = earlier + [ConsumedIdea(idea=idea.path.name, round=n, plan_id=doc["plan_id"])
                                         for idea, doc in zip(fresh, docs)]
    st.user_ideas_consumed = [i.path.name for i in fresh]
    if fresh:
        ctx.echo(f"  user ideas: {', '.join(i.path.name for i in fresh)}")
    planners = goal.agents.planners
    if planners and not ctx.access.available:
        ctx.echo(f"  model planners: skipped ({ctx.access.skip_reason})")
    elif planners:
        taken = [d["approach_family"] for d in docs]
        ids = [f"planner_{chr(ord('a') + i)}" for i in range(planners)]
        jobs = {pid: (lambda pid=pid: agents.plan(ctx.access, goal, ctx.repo.root, n, pid, brief, history, taken))
                for pid in ids}
        for pid, (doc, error) in agents.run_parallel(jobs, planners).items():
            if error is not None:
                entry = PlanEntry(status="failed", output_path=None, critic_approved=None, error=str(error))
                if isinstance(error, agents.RoleFailed):
                    entry.cost = error.cost  # no plan to keep it: the iteration's total counts it from here
                st.planning.plans[pid] = entry
                ctx.echo(f"  {pid}: failed ({error})")
                continue
            docs.append(doc)
            ctx.echo(f"  {pid}: plan [{doc['approach_family']}], {cost_said(doc['cost'])}")
    save_settings(ctx.layout, settings)
    return docs


def _review(ctx: Context, n: int, st: IterationState, plans: list[Plan], history: list[dict[str, Any]]) -> None:
    """The critic's checks on every plan, then the architect's review of the approved ones; the verdicts are
    archived with the plans."""
    ctx.store.step("critic_review")
    docs = [plan.to_json() for plan in plans]
    critic.review_round(docs, ctx.goal, history, critic.prior_attempts(history))
    for plan, doc in zip(plans, docs):
        plan.critic_review, plan.critic_approved = doc["critic_review"], doc["critic_approved"]
        verdict = "approved" if plan.critic_approved else f"rejected ({plan.rejection_reason})"
        if plan.measurement_flags:
            verdict += (f"; reaches into the measurement ({plan.measurement_flags[0]}), so it is not "
                        "merged without your approval")
        ctx.echo(f"  critic: {plan.plan_id} [{plan.approach_family}] {verdict}")
    _architect(ctx, plans)
    for plan in plans:
        write_record(ctx.layout.plan(n, plan.plan_id), "plan_archive", plan.to_json())
        st.planning.plans[plan.planner_id].critic_approved = plan.critic_approved
    st.planning.approved_count = sum(1 for p in plans if p.critic_approved)
    st.critic = CriticStep(status="completed", completed_at=now_iso())
    ctx.store.save()


def _architect(ctx: Context, plans: list[Plan]) -> None:
    """The architect's review of every plan the critic approved; every plan, reviewed or not, keeps an
    ``architect_review`` (seed 001), which says why when no architect ran."""
    for plan in plans:
        if not plan.critic_approved:
            plan.architect_review = no_architect_review("the critic rejected the plan")
    approved = [p for p in plans if p.critic_approved]
    if not approved:
        return
    if not ctx.goal.agents.architect_review:
        for plan in approved:
            plan.architect_review = no_architect_review("architect_review is off in goal.md")
        return
    if not ctx.access.available:
        ctx.echo(f"  architect review: skipped ({ctx.access.skip_reason})")
        for plan in approved:
            plan.architect_review = no_architect_review(f"skipped ({ctx.access.skip_reason})")
        return
    jobs = {p.plan_id: (lambda p=p: agents.architect_review(ctx.access, ctx.goal, p.to_json())) for p in approved}
    results = agents.run_parallel(jobs, len(jobs))
    for plan in approved:
        value, error = results[plan.plan_id]
        if error is not None:
            if isinstance(error, agents.RoleFailed):
                plan.cost = total_cost(plan.cost, error.cost)
            ctx.echo(f"  architect review of {plan.plan_id}: failed ({error}); the critic's verdict stands")
            plan.architect_review = no_architect_review(f"the architect's call failed ({error}); "
                                                        "the critic's verdict stands")
            continue
        review, cost = value
        plan.architect_review = architect_reviewed(review)
        plan.cost = total_cost(plan.cost, cost)
        if review["verdict"] == "reject":
            plan.critic_approved = False
            ctx.echo(f"  architect: {plan.plan_id} rejected ({review['feedback']})")
        else:
            ctx.echo(f"  architect: {plan.plan_id} approved")
